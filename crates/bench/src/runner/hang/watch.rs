//! The stall watch, run by the watchdog's thread every tick: it reads this process' counters,
//! publishes its state on the heartbeats, and decides when the run is hung.
//!
//! A process is *stalled* when, while its threads are in the operations (enqueuing or waiting
//! on their GPUs), no counter moved for its limit: the larger of `--hang-timeout` and 20 times
//! what the operations outstanding should take at the pace of this size's last timed operation.
//! Rank 0 calls the job hung when every process is stalled by its own limit (a process outside
//! the operations, or still making progress, is not), then judges from every thread's state.
//! Any other process that stays stalled [`LEAF_GRACE`] past its limit without rank 0's word
//! (rank 0 stuck itself, or no heartbeats: MPI) ends on its own, saying what it saw.

use super::note::{Phase, ProcessState};
use super::progress;
use super::verdict::{self, Verdict, View};
use crate::bootstrap::Bootstrap;
use std::time::{Duration, Instant};

/// How many times the expected time of the operations outstanding a stall must last.
const PACE_FACTOR: u64 = 20;

/// How long past its limit a process other than rank 0 waits for rank 0's verdict.
pub const LEAF_GRACE: Duration = Duration::from_secs(15);

/// How long rank 0 waits past its limit for processes whose state has not come (a note is
/// sent about every second).
const STATE_GRACE: Duration = Duration::from_secs(5);

/// A hung run, as the watch found it: what to print, record and tell the others.
#[derive(Debug, Clone)]
pub struct Hang {
    /// The lines to print (stderr), the verdict first.
    pub lines: Vec<String>,
    /// The `nccl_perf_hang` JSON record.
    pub record: serde_json::Value,
    /// What rank 0 tells every other process (`None` elsewhere).
    pub tell: Option<String>,
}

/// The watch's memory between ticks.
pub struct Watch {
    floor: Duration,
    last: Vec<(u64, u64, u64, Phase)>,
    since: Instant,
}

impl Watch {
    /// A watch with `--hang-timeout` seconds as its floor; `None` when it is 0 (off).
    pub fn new(hang_timeout_s: f64) -> Option<Watch> {
        (hang_timeout_s > 0.0).then(|| Watch {
            floor: Duration::from_secs_f64(hang_timeout_s.min(1e9)),
            last: Vec::new(),
            since: Instant::now(),
        })
    }

    /// One look: `Some` when the run is hung and this process is to end it.
    pub fn tick(&mut self, boot: &dyn Bootstrap) -> Option<Hang> {
        let (threads, expected_ns) = progress::snapshot();
        let now: Vec<(u64, u64, u64, Phase)> = threads
            .iter()
            .map(|t| (t.tid, t.issued, t.finished, t.phase))
            .collect();
        let armed = threads.iter().any(|t| t.phase != Phase::Outside);
        if now != self.last || !armed {
            self.last = now;
            self.since = Instant::now();
        }
        let idle = self.since.elapsed();
        let paced = Duration::from_nanos(expected_ns.saturating_mul(PACE_FACTOR));
        let limit = self.floor.max(paced);
        let mine = ProcessState {
            idle_ms: idle.as_millis() as u64,
            limit_ms: limit.as_millis() as u64,
            threads,
        };
        boot.publish_state(mine.encode().as_bytes());
        if idle < limit {
            return None;
        }
        let me = || {
            (
                boot.world_rank(),
                crate::host::short_hostname(),
                std::process::id(),
            )
        };
        if boot.world_rank() == 0 {
            let peers = match boot.peer_states() {
                Some(p) => p,
                // One process, or no heartbeats (MPI): judge from this process alone.
                None if boot.world_size() == 1 || idle >= limit + STATE_GRACE => Vec::new(),
                None => return None,
            };
            let (rank, host, pid) = me();
            let mut views = views_of(rank, &host, pid, idle, &mine);
            let mut waiting_for_state = false;
            for p in &peers {
                let state = p
                    .note
                    .as_ref()
                    .and_then(|(n, age)| ProcessState::decode(n).map(|s| (s, *age)));
                match state {
                    Some((s, age)) => {
                        let their_idle = Duration::from_millis(s.idle_ms) + age;
                        let stalled = s.threads.iter().any(|t| t.phase != Phase::Outside)
                            && their_idle >= Duration::from_millis(s.limit_ms);
                        if !stalled {
                            // It still makes progress, or is outside the operations: not
                            // hung (yet).
                            return None;
                        }
                        let host = crate::bootstrap::peer_text::clean(&p.host, 64);
                        views.extend(views_of(p.rank, &host, p.pid, their_idle, &s));
                    }
                    None => {
                        waiting_for_state = true;
                        let host = crate::bootstrap::peer_text::clean(&p.host, 64);
                        views.push(View {
                            rank: p.rank,
                            host,
                            pid: p.pid,
                            idle: Duration::ZERO,
                            state: None,
                        });
                    }
                }
            }
            if waiting_for_state && idle < limit + STATE_GRACE {
                return None;
            }
            if peers.is_empty() && boot.world_size() > 1 {
                return Some(alone(&views, limit, idle, true));
            }
            return Some(found(&verdict::judge(&views), &views, limit, &host));
        }
        if idle < limit + LEAF_GRACE {
            return None;
        }
        let (rank, host, pid) = me();
        let views = views_of(rank, &host, pid, idle, &mine);
        Some(alone(&views, limit, idle, false))
    }
}

/// Every thread of a process' state as views.
fn views_of(rank: usize, host: &str, pid: u32, idle: Duration, s: &ProcessState) -> Vec<View> {
    s.threads
        .iter()
        .map(|t| View {
            rank,
            host: host.to_string(),
            pid,
            idle,
            state: Some(t.clone()),
        })
        .collect()
}

/// Rank 0's hang: the verdict, the evidence, and the pointer line for the others.
fn found(v: &Verdict, views: &[View], limit: Duration, host: &str) -> Hang {
    let mut lines = vec![format!("{host}: {}", v.line)];
    lines.extend(v.evidence.iter().cloned());
    let culprit = if v.culprits.is_empty() {
        "the culprit is undecided".to_string()
    } else {
        format!(
            "culprit: rank{} {}",
            if v.culprits.len() == 1 { "" } else { "s" },
            v.culprits
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Hang {
        lines,
        record: v.to_json(views, limit),
        tell: Some(format!(
            "the run hung at operation {} ({culprit}); rank 0 ({host}) printed the verdict and \
             what each rank saw",
            v.operation
        )),
    }
}

/// A process that decides alone (rank 0 without the others' states, or another process
/// without rank 0's word): what it saw.
fn alone(views: &[View], limit: Duration, idle: Duration, root: bool) -> Hang {
    let host = crate::host::short_hostname();
    let why = if root {
        "the other processes' states are not known here (no heartbeats: MPI)"
    } else {
        "rank 0 gave no verdict"
    };
    let mut lines = vec![format!(
        "{host}: hang: no operation of this process finished for {} s (limit {} s) and {why}; \
         what this process saw:",
        idle.as_secs(),
        limit.as_secs()
    )];
    lines.extend(views.iter().map(|v| {
        let one = verdict::judge(std::slice::from_ref(v));
        one.evidence.into_iter().next().unwrap_or_default()
    }));
    let v = verdict::judge(views);
    Hang {
        lines,
        record: v.to_json(views, limit),
        tell: None,
    }
}
