//! What the plugins saw while armed, kept for the runner: bounded (a guard against a flood of
//! events, not a limit a real call reaches) and behind one lock that only armed calls take.
//! Safe code below the C side (`ffi`): the plugins record here, and [`crate::arm`] and
//! [`crate::take`] (the window, with NCCL's activation masks) open and close it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use nccl_perf_explain::observed::{Model, Net, Path, Seen};

/// Whether the plugins record (between [`crate::arm`] and [`crate::take`]).
static ARMED: AtomicBool = AtomicBool::new(false);

/// At most this many collective, point-to-point and cost records are kept per window.
const MAX_RECORDS: usize = 4096;
/// At most this many ranks get counters per window.
const MAX_RANKS: usize = 1024;

/// The records of the current window.
static SEEN: Mutex<Taken> = Mutex::new(Taken::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A collective as the profiler reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct CollSeen {
    /// The rank that reported it.
    pub rank: i32,
    /// NCCL's function name (`AllReduce`, …).
    pub func: String,
    /// Algorithm (`Ring`, `Tree`, …).
    pub algo: Option<String>,
    /// Protocol (`LL`, `LL128`, `Simple`).
    pub proto: Option<String>,
    /// Channels.
    pub channels: u32,
}

/// A point-to-point operation as the profiler reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct P2pSeen {
    /// The rank that reported it.
    pub rank: i32,
    /// `Send` or `Recv`.
    pub func: String,
    /// Channels (`None`: not in the descriptor, as before profiler v4, NCCL 2.27).
    pub channels: Option<u32>,
}

/// One call's cost table as NCCL handed it to the tuner.
#[derive(Debug, Clone, PartialEq)]
pub struct Costs {
    /// NCCL's function name.
    pub func: String,
    /// The call's size as NCCL gave it (`nBytes`).
    pub bytes: u64,
    /// `(algorithm, protocol, µs)` for every possible pair.
    pub table: Vec<(String, String, f64)>,
}

/// Per-rank counters of the network side.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NetCounts {
    /// Proxy operations (data moved by NCCL's proxy thread: the network).
    pub proxy_ops: u64,
    /// Events of NCCL's InfiniBand/RoCE transport.
    pub ib: u64,
    /// Events of NCCL's socket transport.
    pub socket: u64,
    /// Network events of another transport (a net plugin).
    pub other: u64,
}

/// Everything seen in one window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Taken {
    /// Collectives.
    pub colls: Vec<CollSeen>,
    /// Point-to-point operations.
    pub p2ps: Vec<P2pSeen>,
    /// Cost tables.
    pub costs: Vec<Costs>,
    /// Network counters per rank.
    pub net: BTreeMap<i32, NetCounts>,
    /// Records left out beyond the bounds.
    pub dropped: u64,
    /// Whether NCCL had loaded our profiler when the window closed (a communicator's `init`
    /// handed its mask): without it (NCCL 2.22, or a profiler the user configured) a cost
    /// table alone is still reported ([`Taken::seen`]).
    pub profiler_loaded: bool,
}

impl Taken {
    const fn new() -> Taken {
        Taken {
            colls: Vec::new(),
            p2ps: Vec::new(),
            costs: Vec::new(),
            net: BTreeMap::new(),
            dropped: 0,
            profiler_loaded: false,
        }
    }

    /// What `rank` did in this window, for explain; `None` when nothing about it arrived.
    /// `silent` gives the network when proxy operations came without an event naming the
    /// transport ([`crate::silent`]); it is called only then.
    pub fn seen(&self, rank: i32, silent: impl FnOnce() -> Net) -> Option<Seen> {
        let coll = self.colls.iter().find(|c| c.rank == rank);
        let p2ps = self.p2ps.iter().filter(|p| p.rank == rank);
        let p2p_seen = p2ps.clone().next().is_some();
        let p2p_channels = p2ps.filter_map(|p| p.channels).max();
        let counts = self.net.get(&rank).copied().unwrap_or_default();
        if coll.is_none() && !p2p_seen && counts == NetCounts::default() {
            // No profiler: NCCL's model of the call alone (the window holds one call).
            let silent = self.colls.is_empty() && self.p2ps.is_empty() && self.net.is_empty();
            return match self.costs.first() {
                Some(k) if silent && !self.profiler_loaded => Some(Seen {
                    algo: None,
                    proto: None,
                    channels: None,
                    path: Path::Unknown,
                    model: Some(Model {
                        costs: k.table.clone(),
                    }),
                }),
                _ => None,
            };
        }
        let path = if counts.proxy_ops == 0 && counts.ib + counts.socket + counts.other == 0 {
            Path::IntraNode
        } else if counts.ib > 0 {
            Path::Network(Net::Ib)
        } else if counts.socket > 0 {
            Path::Network(Net::Socket)
        } else if counts.other > 0 {
            // Events of a transport other than NCCL's own: a net plugin's.
            Path::Network(match silent() {
                p @ Net::Plugin(_) => p,
                Net::PluginLoaded(lib) => Net::Plugin(Some(lib)),
                _ => Net::Plugin(None),
            })
        } else {
            Path::Network(silent())
        };
        let model = coll.and_then(|c| {
            self.costs.iter().find(|k| k.func == c.func).map(|k| Model {
                costs: k.table.clone(),
            })
        });
        Some(Seen {
            algo: coll.and_then(|c| c.algo.clone()),
            proto: coll.and_then(|c| c.proto.clone()),
            channels: coll.map(|c| c.channels).or(p2p_channels),
            path,
            model,
        })
    }
}

/// Opens a window: empties the records and records from now on (the plugins' side of
/// [`crate::arm`], which then sets NCCL's masks).
pub(crate) fn open() {
    *lock(&SEEN) = Taken::new();
    ARMED.store(true, Ordering::SeqCst);
}

/// Closes the window and returns its records (the plugins' side of [`crate::take`], once
/// NCCL's masks are 0; it fills in [`Taken::profiler_loaded`]).
pub(crate) fn close() -> Taken {
    ARMED.store(false, Ordering::SeqCst);
    std::mem::take(&mut *lock(&SEEN))
}

/// Whether the plugins record now.
#[inline]
pub(crate) fn armed() -> bool {
    ARMED.load(Ordering::Relaxed)
}

/// Runs `f` on the window's records while armed.
pub(crate) fn record(f: impl FnOnce(&mut Taken)) {
    if armed() {
        f(&mut lock(&SEEN));
    }
}

impl Taken {
    /// Keeps a collective (bounded).
    pub(crate) fn push_coll(&mut self, c: CollSeen) {
        if self.colls.len() < MAX_RECORDS {
            self.colls.push(c);
        } else {
            self.dropped += 1;
        }
    }

    /// Keeps a point-to-point operation (bounded).
    pub(crate) fn push_p2p(&mut self, p: P2pSeen) {
        if self.p2ps.len() < MAX_RECORDS {
            self.p2ps.push(p);
        } else {
            self.dropped += 1;
        }
    }

    /// Keeps a cost table (bounded).
    pub(crate) fn push_costs(&mut self, c: Costs) {
        if self.costs.len() < MAX_RECORDS {
            self.costs.push(c);
        } else {
            self.dropped += 1;
        }
    }

    /// The network counters of `rank` (bounded in ranks).
    pub(crate) fn net_of(&mut self, rank: i32) -> Option<&mut NetCounts> {
        if self.net.len() >= MAX_RANKS && !self.net.contains_key(&rank) {
            self.dropped += 1;
            return None;
        }
        Some(self.net.entry(rank).or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coll(rank: i32, algo: &str) -> CollSeen {
        CollSeen {
            rank,
            func: "AllReduce".into(),
            algo: Some(algo.into()),
            proto: Some("Simple".into()),
            channels: 4,
        }
    }

    #[test]
    fn seen_picks_the_rank_and_names_the_path() {
        let mut t = Taken::new();
        t.push_coll(coll(1, "Tree"));
        t.push_coll(coll(0, "Ring"));
        t.push_costs(Costs {
            func: "AllReduce".into(),
            bytes: 1 << 20,
            table: vec![("Ring".into(), "Simple".into(), 12.5)],
        });
        let s = t.seen(0, || Net::Unreported).unwrap();
        assert_eq!(s.algo.as_deref(), Some("Ring"));
        assert_eq!(s.channels, Some(4));
        assert_eq!(s.path, Path::IntraNode);
        assert_eq!(s.model.unwrap().costs[0].2, 12.5);
        t.net_of(0).unwrap().proxy_ops = 3;
        assert_eq!(
            t.seen(0, || Net::Unreported).unwrap().path,
            Path::Network(Net::Unreported)
        );
        t.net_of(0).unwrap().other = 1;
        assert_eq!(
            t.seen(0, || Net::PluginLoaded("libnccl-net-ofi.so".into()))
                .unwrap()
                .path,
            Path::Network(Net::Plugin(Some("libnccl-net-ofi.so".into())))
        );
        t.net_of(0).unwrap().socket = 1;
        assert_eq!(
            t.seen(0, || Net::Unreported).unwrap().path,
            Path::Network(Net::Socket)
        );
        t.net_of(0).unwrap().ib = 1;
        assert_eq!(
            t.seen(0, || Net::Unreported).unwrap().path,
            Path::Network(Net::Ib)
        );
        assert_eq!(t.seen(7, || Net::Unreported), None);
    }

    /// Without our profiler (NCCL 2.22) the cost table alone is reported; with it, a window
    /// without its events is not (NCCL did not report that call).
    #[test]
    fn a_cost_table_alone_counts_only_without_the_profiler() {
        let mut t = Taken::new();
        t.push_costs(Costs {
            func: "AllReduce".into(),
            bytes: 1 << 20,
            table: vec![("Ring".into(), "LL".into(), 3.0)],
        });
        let s = t.seen(0, || Net::Unreported).unwrap();
        assert_eq!((s.algo, s.channels, s.path), (None, None, Path::Unknown));
        assert_eq!(s.model.unwrap().costs.len(), 1);
        t.profiler_loaded = true;
        assert_eq!(t.seen(0, || Net::Unreported), None);
    }

    /// Profilers before v4 (NCCL 2.23–2.26) name no channels of a point-to-point operation:
    /// the operation still counts (its path is known), its channels stay unknown.
    #[test]
    fn a_p2p_without_channels_is_still_seen() {
        let mut t = Taken::new();
        t.push_p2p(P2pSeen {
            rank: 2,
            func: "Send".into(),
            channels: None,
        });
        let s = t.seen(2, || Net::Unreported).unwrap();
        assert_eq!(s.channels, None);
        assert_eq!(s.path, Path::IntraNode);
        t.push_p2p(P2pSeen {
            rank: 2,
            func: "Recv".into(),
            channels: Some(2),
        });
        assert_eq!(t.seen(2, || Net::Unreported).unwrap().channels, Some(2));
    }

    #[test]
    fn records_are_bounded() {
        let mut t = Taken::new();
        for _ in 0..MAX_RECORDS + 10 {
            t.push_coll(coll(0, "Ring"));
        }
        assert_eq!(t.colls.len(), MAX_RECORDS);
        assert_eq!(t.dropped, 10);
        for r in 0..(MAX_RANKS as i32 + 5) {
            let _ = t.net_of(r);
        }
        assert_eq!(t.net.len(), MAX_RANKS);
        assert_eq!(t.dropped, 15);
    }
}
