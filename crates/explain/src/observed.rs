//! What a run shows to explain: the job's shape, its rows, and for each row what NCCL reported
//! through its plugin interfaces (absent when the run came from a log, or NCCL could not say).

use serde::{Deserialize, Serialize};

/// One benchmark run (one collective, one datatype and op), as explain sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Collective name as in the program name without `_perf`: `all_reduce`, `all_gather`,
    /// `reduce_scatter`, `broadcast`, `reduce`, `alltoall`, `scatter`, `gather`, `sendrecv`,
    /// `hypercube`, `alltoallv`.
    pub collective: String,
    /// Ranks in the job (all processes × threads × GPUs).
    pub nranks: u32,
    /// Nodes (distinct hosts) in the job; 0 when unknown.
    pub nnodes: u32,
    /// The most ranks on one node; 0 when unknown.
    pub ranks_per_node: u32,
    /// `ncclGetVersion` code (e.g. 22803), 0 when unknown.
    pub nccl_version: i32,
    /// GPU model names as the device lines show them (e.g. `NVIDIA H200`), one per rank where
    /// known.
    pub gpu_names: Vec<String>,
    /// Each rank's real host and GPU (device lines, or the run itself), where known: several
    /// ranks on one `(host, bus id)` are ranks posing as hosts on one GPU.
    pub rank_devices: Vec<RankDevice>,
    /// The table's rows, in order.
    pub rows: Vec<Row>,
    /// Whether NCCL's view could be captured, and if not, why.
    pub capture: Capture,
    /// Lines about the input itself, printed after the headline (e.g. what a log reader
    /// inferred rather than read).
    pub notes: Vec<String>,
}

/// Where one rank runs: its real host name and its GPU's PCI bus id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankDevice {
    /// The physical host: the benchmarks give its kernel's boot id (ranks posing as hosts share
    /// it whatever their host names), a log gives the device line's host name.
    pub host: String,
    /// PCI bus id (`0000:04:00` or `0000:04:00.0`; compared as given).
    pub pci_bus_id: String,
    /// CUDA device ordinal, when known: old logs print only the bus number (`[0x00]` for
    /// every GPU of some systems), so ranks count as sharing a GPU only when this agrees too.
    pub device: Option<i64>,
}

/// One row of the table, one half of it: out-of-place or in-place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Message size in bytes (the table's `size` column).
    pub bytes: u64,
    /// The in-place half (else out-of-place).
    pub in_place: bool,
    /// Measured time, µs (the table's `time` column).
    pub time_us: f64,
    /// Measured algorithm bandwidth, GB/s.
    pub algbw: f64,
    /// Measured bus bandwidth, GB/s.
    pub busbw: f64,
    /// What NCCL reported for one untimed call of this size and half (`None`: not captured).
    pub seen: Option<Seen>,
}

/// What NCCL reported for one call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    /// Algorithm as NCCL names it (`Ring`, `Tree`, `NVLS`, `CollnetDirect`, `PAT`, …); `None`
    /// for point-to-point operations (sendrecv, alltoall, scatter, gather: NCCL has no
    /// algorithm choice there) or when no collective event arrived.
    pub algo: Option<String>,
    /// Protocol (`Simple`, `LL`, `LL128`).
    pub proto: Option<String>,
    /// Channels (thread blocks) NCCL used.
    pub channels: Option<u32>,
    /// The transport path the data took.
    pub path: Path,
    /// NCCL's cost model for this call, from the tuner interface.
    pub model: Option<Model>,
}

/// The transport path of one call, from NCCL's profiler events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub enum Path {
    /// Not known (no events).
    #[default]
    Unknown,
    /// No proxy (network) operation: inside the node (NVLink/PCIe P2P or shared memory; the
    /// profiler does not say which), or a single rank.
    IntraNode,
    /// Through the network: proxy operations were seen.
    Network(Net),
}

impl Path {
    /// The transport path in words (explain's lines and the CSV's `path` cell).
    pub fn in_words(&self) -> String {
        match self {
            Path::Unknown => "path unknown".into(),
            Path::IntraNode => "inside the node".into(),
            Path::Network(Net::Ib) => "network: InfiniBand/RoCE".into(),
            Path::Network(Net::Socket) => "network: sockets".into(),
            Path::Network(Net::SocketDeduced(why)) => {
                format!("network: sockets (not reported by NCCL; {why})")
            }
            Path::Network(Net::IbDeduced(why)) => {
                format!("network: InfiniBand/RoCE (not reported by NCCL; {why})")
            }
            Path::Network(Net::Unreported) => {
                "network: InfiniBand/RoCE or sockets (NCCL's transports \
                 report themselves only in NCCL builds with NET_PROFILER=1)"
                    .into()
            }
            Path::Network(Net::Plugin(Some(n))) => format!("network: net plugin {n}"),
            Path::Network(Net::PluginLoaded(lib)) => format!(
                "network: not reported by NCCL; net plugin {lib} is loaded (NCCL uses it unless its \
                 start failed, and then its own InfiniBand/RoCE or sockets)"
            ),
            Path::Network(Net::Plugin(None)) => {
                "network: a net plugin (its events name no transport explain knows)".into()
            }
        }
    }
}

/// Which network, as far as NCCL's events tell or, where they are silent, what the
/// configuration leaves (NCCL's own InfiniBand and socket transports report events only when
/// NCCL is built with `NET_PROFILER=1`, which the released packages are not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Net {
    /// NCCL's InfiniBand/RoCE transport reported events.
    Ib,
    /// NCCL's socket transport reported events (plain TCP sockets).
    Socket,
    /// No event named the transport, but only sockets were possible; why (e.g. "no
    /// InfiniBand/RoCE device on this node and no net plugin loaded", "NCCL_NET=Socket").
    SocketDeduced(String),
    /// No event named the transport; `NCCL_NET=IB` forced NCCL's InfiniBand/RoCE transport.
    IbDeduced(String),
    /// No event named the transport and more than one was possible (InfiniBand/RoCE devices
    /// present, no net plugin loaded): NCCL's IB transport or its sockets.
    Unreported,
    /// An external net plugin carried the data: its events came (their transport is not one
    /// explain knows), or `NCCL_NET` forced it by name; its library or name when known.
    Plugin(Option<String>),
    /// No event named the transport and a net plugin library is loaded (`libnccl-net*.so`, or
    /// the one `NCCL_NET_PLUGIN` names): NCCL uses it unless its start failed, and then falls
    /// back to its own transports (the library stays loaded), so it is not asserted.
    PluginLoaded(String),
}

impl Net {
    /// Plain TCP sockets, reported or deduced.
    pub fn is_socket(&self) -> bool {
        matches!(self, Net::Socket | Net::SocketDeduced(_))
    }
}

/// NCCL's predicted cost of one call, per algorithm and protocol, in µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// `(algorithm, protocol, predicted µs)` for every pair NCCL considered possible.
    pub costs: Vec<(String, String, f64)>,
}

/// Whether NCCL's view could be captured in this run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub enum Capture {
    /// Not attempted: the run came from a log or a JSON file.
    #[default]
    FromLog,
    /// Captured: the profiler and/or the tuner interface were ours. `notes` say what is
    /// limited (e.g. "a tuner plugin is configured (…): NCCL's model not shown").
    Live {
        /// Our profiler plugin was loaded by NCCL.
        profiler: bool,
        /// Our tuner plugin was loaded by NCCL.
        tuner: bool,
        /// One line each: what could not be captured and why.
        notes: Vec<String>,
    },
    /// Not possible at all, with the reason (e.g. "NCCL 2.21.5 has no plugin interface
    /// explain can read").
    Unavailable(String),
}

impl Seen {
    /// NCCL's predicted time (µs) of the algorithm and protocol it used, when both and the
    /// model are known.
    pub fn predicted_us(&self) -> Option<f64> {
        let (algo, proto) = (self.algo.as_deref()?, self.proto.as_deref()?);
        self.model
            .as_ref()?
            .costs
            .iter()
            .find(|(a, p, _)| a == algo && p == proto)
            .map(|(_, _, us)| *us)
    }

    /// The CSV cells of `--explain`: algorithm, protocol, channels, path, NCCL's predicted µs
    /// (empty where unknown).
    pub fn cells(seen: Option<&Seen>) -> [String; 5] {
        let Some(s) = seen else {
            return Default::default();
        };
        [
            s.algo.clone().unwrap_or_default(),
            s.proto.clone().unwrap_or_default(),
            s.channels.map(|c| c.to_string()).unwrap_or_default(),
            s.path.in_words(),
            s.predicted_us().map(|v| format!("{v}")).unwrap_or_default(),
        ]
    }
}

/// NCCL's name `a` is `b` but for case and underscores (the profiler says `RING`, `NVLS_TREE`,
/// the cost table `Ring`, `NVLSTree`; a JSON file of an older run kept the former).
pub fn same_name(a: &str, b: Option<&str>) -> bool {
    let key = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    b.is_some_and(|b| key(a) == key(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_prediction() {
        let s = Seen {
            algo: Some("Ring".into()),
            proto: Some("Simple".into()),
            channels: Some(16),
            path: Path::Network(Net::Socket),
            model: Some(Model {
                costs: vec![
                    ("Tree".into(), "Simple".into(), 90.0),
                    ("Ring".into(), "Simple".into(), 80.5),
                ],
            }),
        };
        assert_eq!(s.predicted_us(), Some(80.5));
        assert_eq!(
            Seen::cells(Some(&s)),
            ["Ring", "Simple", "16", "network: sockets", "80.5"].map(String::from)
        );
        assert_eq!(Seen::cells(None), <[String; 5]>::default());
        let p2p = Seen {
            channels: Some(2),
            path: Path::IntraNode,
            ..Seen::default()
        };
        assert_eq!(p2p.predicted_us(), None);
        assert_eq!(Seen::cells(Some(&p2p))[3], "inside the node");
    }
}
