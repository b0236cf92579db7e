//! The hang's verdict, from what every benchmark thread of the job last said of itself: a pure
//! function of the recorded states, so that every class of verdict is tested without a GPU.
//!
//! - **never started**: some threads never enqueued an operation the others did: their host
//!   thread is the culprit (stuck before it, or still waiting on its GPUs for an earlier one);
//! - **all waiting**: every thread enqueued the same operations and none finished the oldest
//!   outstanding one: a GPU or a link between the ranks stopped, and the counters alone cannot
//!   say which; the table of what each rank saw follows;
//! - **link** / **GPU**: every thread enqueued the operation and NCCL's network steps name a
//!   link whose data never completed on the wire, or a GPU that never took data that arrived
//!   ([`super::network`]);
//! - **no state**: some processes said nothing of themselves (no note reached rank 0).

use super::network::{self, NetView};
pub use super::note::View;
use super::note::{Label, Phase, Stage, ThreadState};
use serde_json::json;
use std::time::Duration;

/// The class of a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Some threads never enqueued an operation the others did.
    NeverStarted,
    /// Every thread enqueued the operation and none finished it; nothing decides more.
    AllWaiting,
    /// A link's data never completed on the wire.
    Link,
    /// A GPU never took data that arrived.
    Gpu,
    /// Some processes sent no state.
    NoState,
}

impl Kind {
    /// Its word in the JSON record.
    pub fn word(self) -> &'static str {
        match self {
            Kind::NeverStarted => "never_started",
            Kind::AllWaiting => "all_waiting",
            Kind::Link => "link",
            Kind::Gpu => "gpu",
            Kind::NoState => "no_state",
        }
    }
}

/// What the watch concluded: one line naming the culprit, the evidence, the JSON record.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The class.
    pub kind: Kind,
    /// The world ranks named as the culprit (empty when undecided).
    pub culprits: Vec<usize>,
    /// The operation the job stopped at (1 = the run's first operation).
    pub operation: u64,
    /// The verdict in one line.
    pub line: String,
    /// One line per thread: what it saw; then the links that had not moved.
    pub evidence: Vec<String>,
    /// The stuck links or held data named (JSON), for a link or GPU verdict.
    pub links: Vec<serde_json::Value>,
    /// What the run could see of NCCL's network steps: `steps`, `no_steps`, `unwatched`.
    pub network: &'static str,
}

/// The most link lines in a verdict's evidence.
const LINK_EVIDENCE: usize = 8;

/// Seconds, rounded, for the lines.
fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64().round() as u64)
}

/// "rank 2 (node07, pid 77)", with the thread where the process has several.
fn who(v: &View, threads_per_process: bool) -> String {
    match (&v.state, threads_per_process) {
        (Some(t), true) => format!(
            "rank {} (thread {}, {}, pid {})",
            v.rank, t.tid, v.host, v.pid
        ),
        _ => format!("rank {} ({}, pid {})", v.rank, v.host, v.pid),
    }
}

/// "all_reduce float sum 1048576 B out-of-place".
fn what(l: &Label) -> String {
    let mut s = format!("{} {}", l.coll, l.dt);
    if !matches!(l.op.as_str(), "none" | "") {
        s.push_str(&format!(" {}", l.op));
    }
    s.push_str(&format!(
        " {} B {}",
        l.bytes,
        if l.in_place {
            "in-place"
        } else {
            "out-of-place"
        }
    ));
    s
}

/// Operation `k` of the run, described from a thread whose batch holds it.
fn operation(k: u64, views: &[View]) -> String {
    let holder = views
        .iter()
        .filter_map(|v| v.state.as_ref())
        .find(|t| t.label.is_some() && t.batch_first < k && k <= t.batch_first + t.batch_len);
    let Some(t) = holder else {
        return format!("operation {k} of the run");
    };
    let Some(l) = &t.label else {
        return format!("operation {k} of the run");
    };
    let i = k - t.batch_first;
    let n = t.batch_len;
    match l.stage {
        Stage::Sync => format!(
            "operation {k} of the run ({}, the untimed one before its timed loop)",
            what(l)
        ),
        Stage::Warmup => format!("operation {k} of the run ({}, warm-up {i} of {n})", what(l)),
        Stage::Timed => format!(
            "operation {k} of the run ({}, timed iteration {i} of {n})",
            what(l)
        ),
    }
}

/// Where a thread's host side is, in words.
fn doing(t: &ThreadState, idle: Duration) -> String {
    match t.phase {
        Phase::Enqueue if t.finished == t.issued => {
            format!(
                "its host thread has enqueued nothing more for {}",
                secs(idle)
            )
        }
        Phase::Enqueue => format!("its host thread is enqueuing, stalled for {}", secs(idle)),
        Phase::Wait if t.issued > t.finished + 1 => format!(
            "its host thread waits on its GPUs for operations {}-{}, for {}",
            t.finished + 1,
            t.issued,
            secs(idle)
        ),
        Phase::Wait => format!(
            "its host thread waits on its GPUs for operation {}, for {}",
            t.finished + 1,
            secs(idle)
        ),
        Phase::Outside => "its host thread is outside the operations".to_string(),
    }
}

/// One evidence line.
fn evidence(v: &View, many_threads: bool) -> String {
    let head = who(v, many_threads);
    let Some(t) = &v.state else {
        return format!("  {head}: sent no state");
    };
    let gpus = if t.ngpus > 1 {
        format!(
            "NCCL ranks {}-{}",
            t.first_rank,
            t.first_rank + t.ngpus.saturating_sub(1)
        )
    } else {
        format!("NCCL rank {}", t.first_rank)
    };
    let batch = t
        .label
        .as_ref()
        .map(|l| format!("; batch: {} {}", what(l), l.stage.word()))
        .unwrap_or_default();
    format!(
        "  {head}, {gpus}: enqueued {}, finished {}; {}{batch}",
        t.issued,
        t.finished,
        doing(t, v.idle)
    )
}

/// The verdict over every thread's view and what the processes saw of the network.
pub fn judge(views: &[View], net: &NetView) -> Verdict {
    let mut v = judge_threads(views, net);
    v.evidence
        .extend(network::evidence(net, views, LINK_EVIDENCE));
    v.network = if net.with_steps > 0 {
        "steps"
    } else if net.without_steps > 0 {
        "no_steps"
    } else {
        "unwatched"
    };
    v
}

/// A verdict when the threads and the network steps decide it (evidence of threads only).
fn judge_threads(views: &[View], net: &NetView) -> Verdict {
    let many_threads = views
        .iter()
        .filter_map(|v| v.state.as_ref())
        .any(|t| t.tid > 0);
    let evidence_lines: Vec<String> = views.iter().map(|v| evidence(v, many_threads)).collect();
    let stall = views
        .iter()
        .filter(|v| v.state.is_some())
        .map(|v| v.idle)
        .min()
        .unwrap_or_default();
    let by_network = |k: u64, evidence: Vec<String>| {
        network::decide(net, views, stall).map(|f| Verdict {
            kind: if f.link { Kind::Link } else { Kind::Gpu },
            culprits: f.culprits,
            operation: k,
            line: format!("hang: {} {}: {}", f.subject, operation(k, views), f.detail),
            evidence,
            links: f.record,
            network: "",
        })
    };
    let known: Vec<(&View, &ThreadState)> = views
        .iter()
        .filter_map(|v| v.state.as_ref().map(|t| (v, t)))
        .collect();
    let max_issued = known.iter().map(|(_, t)| t.issued).max().unwrap_or(0);
    let behind: Vec<&(&View, &ThreadState)> = known
        .iter()
        .filter(|(_, t)| t.issued < max_issued)
        .collect();
    let silent: Vec<&View> = views.iter().filter(|v| v.state.is_none()).collect();
    let ranks = |vs: &mut dyn Iterator<Item = usize>| {
        let mut r: Vec<usize> = vs.collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    // A thread behind is the culprit only when every thread ahead of it enqueued its whole
    // batch and waits: threads still enqueuing may be blocked in the launch itself (the GPU's
    // queue full behind a stalled operation), where being behind proves nothing.
    let min_issued = behind.iter().map(|(_, t)| t.issued).min().unwrap_or(0);
    let ahead_all_wait = known
        .iter()
        .filter(|(_, t)| t.issued > min_issued)
        .all(|(_, t)| t.phase == Phase::Wait);
    if !behind.is_empty() && !ahead_all_wait {
        let k = known.iter().map(|(_, t)| t.finished).min().unwrap_or(0) + 1;
        if let Some(v) = by_network(k, evidence_lines.clone()) {
            return v;
        }
        return Verdict {
            kind: Kind::AllWaiting,
            culprits: Vec::new(),
            operation: k,
            line: format!(
                "hang: {} never finished, and the threads are blocked at different operations, \
                 some while enqueuing (a GPU's queue full behind the stalled operation): a GPU \
                 or a link stopped, and {}; what each rank saw follows",
                operation(k, views),
                network::why_undecided(net)
            ),
            evidence: evidence_lines,
            links: Vec::new(),
            network: "",
        };
    }
    if !behind.is_empty() {
        let k = min_issued + 1;
        let ahead = known.iter().filter(|(_, t)| t.issued >= k).count();
        let culprits = ranks(&mut behind.iter().map(|(v, _)| v.rank));
        let unit = if many_threads { "thread" } else { "rank" };
        let (subject, detail) = match &behind[..] {
            [(v, t)] => (who(v, many_threads), doing(t, v.idle)),
            _ => (
                format!("{} {unit}s", behind.len()),
                behind
                    .iter()
                    .map(|(v, t)| format!("{}: {}", who(v, many_threads), doing(t, v.idle)))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        };
        let line = format!(
            "hang: {subject} never started {} that {ahead} other {unit}{} started; {detail}",
            operation(k, views),
            if ahead == 1 { "" } else { "s" },
        );
        return Verdict {
            kind: Kind::NeverStarted,
            culprits,
            operation: k,
            line,
            evidence: evidence_lines,
            links: Vec::new(),
            network: "",
        };
    }
    let k = known.iter().map(|(_, t)| t.finished).min().unwrap_or(0) + 1;
    if !silent.is_empty() {
        let culprits = ranks(&mut silent.iter().map(|v| v.rank));
        let list: Vec<String> = silent.iter().map(|v| who(v, false)).collect();
        return Verdict {
            kind: Kind::NoState,
            culprits,
            operation: k,
            line: format!(
                "hang: no operation finished; {} sent no state (the others wait at {})",
                list.join(", "),
                operation(k, views)
            ),
            evidence: evidence_lines,
            links: Vec::new(),
            network: "",
        };
    }
    if let Some(v) = by_network(k, evidence_lines.clone()) {
        return v;
    }
    let idle = known.iter().map(|(v, _)| v.idle).min().unwrap_or_default();
    let last = known.iter().map(|(_, t)| t.issued).max().unwrap_or(0);
    let through = if last > k {
        format!(" through {last}")
    } else {
        String::new()
    };
    Verdict {
        kind: Kind::AllWaiting,
        culprits: Vec::new(),
        operation: k,
        line: format!(
            "hang: all {} thread{} enqueued {}{through} and none saw them finish for {}: a GPU \
             or a link between the ranks stopped, and {}, so this run cannot tell which; what \
             each rank saw follows",
            known.len(),
            if known.len() == 1 { "" } else { "s" },
            operation(k, views),
            secs(idle),
            network::why_undecided(net)
        ),
        evidence: evidence_lines,
        links: Vec::new(),
        network: "",
    }
}

impl Verdict {
    /// The `nccl_perf_hang` record of the `-J` JSON.
    pub fn to_json(&self, views: &[View], limit: Duration) -> serde_json::Value {
        let ranks: Vec<serde_json::Value> = views
            .iter()
            .map(|v| {
                let mut o = json!({
                    "rank": v.rank,
                    "host": v.host,
                    "pid": v.pid,
                    "idle_s": v.idle.as_secs_f64(),
                });
                if let Some(t) = &v.state {
                    o["thread"] = json!(t.tid);
                    o["first_nccl_rank"] = json!(t.first_rank);
                    o["gpus"] = json!(t.ngpus);
                    o["enqueued"] = json!(t.issued);
                    o["finished"] = json!(t.finished);
                    o["phase"] = json!(match t.phase {
                        Phase::Outside => "outside",
                        Phase::Enqueue => "enqueue",
                        Phase::Wait => "wait",
                    });
                    if let Some(l) = &t.label {
                        o["batch"] = json!({
                            "stage": l.stage.word(),
                            "collective": l.coll,
                            "datatype": l.dt,
                            "op": l.op,
                            "root": l.root,
                            "size": l.bytes,
                            "in_place": l.in_place,
                            "first_operation": t.batch_first + 1,
                            "operations": t.batch_len,
                        });
                    }
                }
                o
            })
            .collect();
        json!({
            "verdict": self.kind.word(),
            "line": self.line,
            "culprits": self.culprits,
            "operation": self.operation,
            "limit_s": limit.as_secs_f64(),
            "network": self.network,
            "links": self.links,
            "ranks": ranks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::hang::note::fixtures::thread as state;

    fn view(rank: usize, st: Option<ThreadState>) -> View {
        View {
            rank,
            host: format!("vnode{rank}"),
            pid: 1000 + rank as u32,
            idle: Duration::from_secs(42),
            state: st.map(|mut s| {
                s.first_rank = rank as u64;
                s
            }),
        }
    }

    #[test]
    fn a_rank_that_never_enqueued_is_named() {
        // Ranks 0, 1, 3 enqueued the whole batch (ops 101-120) and wait; rank 2 stopped
        // before iteration 6 (enqueued 105).
        let views = vec![
            view(0, Some(state(0, Phase::Wait, 120, 100))),
            view(1, Some(state(0, Phase::Wait, 120, 100))),
            view(2, Some(state(0, Phase::Enqueue, 105, 100))),
            view(3, Some(state(0, Phase::Wait, 120, 100))),
        ];
        let v = judge(&views, &NetView::default());
        assert_eq!(v.kind, Kind::NeverStarted);
        assert_eq!(v.culprits, vec![2]);
        assert_eq!(v.operation, 106);
        assert!(
            v.line.starts_with(
                "hang: rank 2 (vnode2, pid 1002) never started operation 106 of the run \
                 (all_reduce float sum 1048576 B out-of-place, timed iteration 6 of 20) that 3 \
                 other ranks started; its host thread is enqueuing, stalled for 42 s"
            ),
            "{}",
            v.line
        );
        assert!(
            v.line.contains("is enqueuing, stalled for 42 s"),
            "{}",
            v.line
        );
        assert_eq!(v.evidence.len(), 4);
        assert!(
            v.evidence[2].contains("enqueued 105, finished 100"),
            "{:?}",
            v.evidence
        );
        assert!(
            v.evidence[0].contains("waits on its GPUs for operations 101-120, for 42 s"),
            "{:?}",
            v.evidence
        );
        let j = v.to_json(&views, Duration::from_secs(60));
        assert_eq!(j["verdict"], "never_started");
        assert_eq!(j["culprits"], json!([2]));
        assert_eq!(j["ranks"][2]["batch"]["first_operation"], 101);
    }

    #[test]
    fn every_rank_waiting_is_undecided_with_the_table() {
        let views: Vec<View> = (0..4)
            .map(|r| view(r, Some(state(0, Phase::Wait, 120, 100))))
            .collect();
        let v = judge(&views, &NetView::default());
        assert_eq!(v.kind, Kind::AllWaiting);
        assert!(v.culprits.is_empty());
        assert_eq!(v.operation, 101);
        assert!(v.line.contains("steps are not watched"), "{}", v.line);
        assert!(
            v.line
                .contains("all 4 threads enqueued operation 101 of the run"),
            "{}",
            v.line
        );
        assert!(v.line.contains("timed iteration 1 of 20"), "{}", v.line);
        assert_eq!(v.evidence.len(), 4);
    }

    #[test]
    fn a_rank_still_waiting_for_an_earlier_operation_is_behind() {
        // Rank 1's GPU never finished the sync operation 100: it never enqueued the timed loop.
        let mut slow = state(0, Phase::Wait, 100, 99);
        slow.batch_first = 99;
        slow.batch_len = 1;
        let views = vec![
            view(0, Some(state(0, Phase::Wait, 120, 100))),
            view(1, Some(slow)),
        ];
        let v = judge(&views, &NetView::default());
        assert_eq!(v.kind, Kind::NeverStarted);
        assert_eq!(v.culprits, vec![1]);
        assert!(
            v.line.contains("waits on its GPUs for operation 100"),
            "{}",
            v.line
        );
        assert!(v.line.contains("that 1 other rank started;"), "{}", v.line);
    }

    #[test]
    fn threads_blocked_while_enqueuing_name_nobody() {
        // A long batch: every rank's launch queue filled behind a stalled operation, at
        // different counts; being behind then proves nothing.
        let views = vec![
            view(0, Some(state(0, Phase::Enqueue, 1130, 100))),
            view(1, Some(state(0, Phase::Enqueue, 1124, 100))),
            view(2, Some(state(0, Phase::Wait, 1130, 100))),
        ];
        let v = judge(&views, &NetView::default());
        assert_eq!(v.kind, Kind::AllWaiting);
        assert!(v.culprits.is_empty());
        assert!(
            v.line.contains("blocked at different operations"),
            "{}",
            v.line
        );
    }

    #[test]
    fn a_silent_process_is_said_as_such() {
        let views = vec![
            view(0, Some(state(0, Phase::Wait, 120, 100))),
            view(1, None),
        ];
        let v = judge(&views, &NetView::default());
        assert_eq!(v.kind, Kind::NoState);
        assert_eq!(v.culprits, vec![1]);
        assert!(
            v.line.contains("rank 1 (vnode1, pid 1001) sent no state"),
            "{}",
            v.line
        );
    }

    #[test]
    fn threads_of_one_process_are_told_apart() {
        let mut t1 = state(1, Phase::Enqueue, 110, 100);
        t1.first_rank = 1;
        let views = vec![
            view(0, Some(state(0, Phase::Wait, 120, 100))),
            View {
                state: Some(t1),
                ..view(0, None)
            },
        ];
        let v = judge(&views, &NetView::default());
        assert_eq!(v.culprits, vec![0]);
        assert!(
            v.line.starts_with(
                "hang: rank 0 (thread 1, vnode0, pid 1000) never started operation 111"
            ),
            "{}",
            v.line
        );
    }

    /// Every rank waits, and rank 2's send to rank 3 is stuck on the wire: the link verdict,
    /// with the stuck link in the JSON and the links after the threads in the evidence.
    #[test]
    fn a_stuck_link_decides_what_the_counters_cannot() {
        use super::super::network::Reported;
        use super::super::note::Wait;
        use super::super::note::fixtures::link;
        let views: Vec<View> = (0..4)
            .map(|r| view(r, Some(state(0, Phase::Wait, 120, 100))))
            .collect();
        let net = NetView {
            links: vec![
                Reported {
                    by: 2,
                    link: link(2, 3, 1, true, Wait::Send, 40_000),
                },
                Reported {
                    by: 3,
                    link: link(3, 2, 1, false, Wait::Recv, 40_000),
                },
            ],
            with_steps: 4,
            ..NetView::default()
        };
        let v = judge(&views, &net);
        assert_eq!(v.kind, Kind::Link);
        assert_eq!(v.culprits, vec![2, 3]);
        assert!(
            v.line.starts_with(
                "hang: the link from rank 2 (vnode2) to rank 3 (vnode3) stopped at operation \
                 101 of the run (all_reduce float sum 1048576 B out-of-place, timed iteration 1 \
                 of 20): channel 1: the send is stuck at step 42 of 64 in SendWait"
            ),
            "{}",
            v.line
        );
        assert_eq!(v.evidence.len(), 6, "{:?}", v.evidence);
        assert!(v.evidence[4].contains("send to rank 3 (vnode3), channel 1"));
        let j = v.to_json(&views, Duration::from_secs(10));
        assert_eq!(j["verdict"], "link");
        assert_eq!(j["network"], "steps");
        assert_eq!(j["links"][0]["rank"], 2);
        assert_eq!(j["links"][0]["peer"], 3);
    }
}
