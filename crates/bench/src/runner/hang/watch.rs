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

use super::network::{NetView, Reported};
use super::note::{LinkNote, MAX_LINKS, Net, Phase, ProcessState, Wait};
use super::progress;
use super::verdict::{self, Kind, Verdict, View};
use crate::bootstrap::Bootstrap;
use nccl_perf_capture::links::{self, Link, Sampler};
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
    /// [`LEAF_GRACE`] and [`STATE_GRACE`] (shorter in tests).
    leaf_grace: Duration,
    state_grace: Duration,
    /// The reader of NCCL's proxy steps.
    links: Sampler,
}

/// A link is published once it has not moved for this long.
const LINK_STILL: Duration = Duration::from_secs(1);

/// How telling a link's state is: the wire first, then data a GPU does not take, then the rest.
fn telling(w: Wait) -> u8 {
    match w {
        Wait::Send => 0,
        Wait::RecvGpu => 1,
        Wait::Recv => 2,
        Wait::SendPeer => 3,
        _ => 4,
    }
}

/// The links worth publishing: still for [`LINK_STILL`], the most telling first.
fn to_publish(mut sampled: Vec<Link>) -> Vec<LinkNote> {
    sampled.retain(|l| l.still >= LINK_STILL);
    sampled.sort_by_key(|l| (telling(l.wait), std::cmp::Reverse(l.still), l.rank, l.peer));
    sampled
        .into_iter()
        .take(MAX_LINKS)
        .map(|l| LinkNote {
            rank: u64::from(l.rank),
            peer: u64::from(l.peer),
            channel: u64::from(l.channel),
            send: l.send,
            step: u64::from(l.step),
            steps: u64::from(l.steps),
            wait: l.wait,
            still_ms: l.still.as_millis() as u64,
        })
        .collect()
}

/// What this process can say of NCCL's network steps.
fn net_here() -> Net {
    if !links::enabled() || !links::loaded() {
        Net::Unwatched
    } else if links::seen() {
        Net::Steps
    } else {
        Net::NoSteps
    }
}

/// Why this process does not watch NCCL's network steps.
fn unwatched_why() -> &'static str {
    match crate::gpu::plugins::unwatched() {
        Some(why) => why,
        None if !links::enabled() => "the watch's profiler is off",
        None => {
            "NCCL did not load the built-in profiler (it takes NCCL 2.27 or later, whose \
             profiler says how many nodes a communicator spans)"
        }
    }
}

/// Counts one process' word on the network into the job's view.
fn count(net: &mut NetView, by: usize, s: &ProcessState) {
    match s.net {
        Net::Unwatched => net.unwatched += 1,
        Net::NoSteps => net.without_steps += 1,
        Net::Steps => net.with_steps += 1,
    }
    net.links.extend(s.links.iter().map(|l| Reported {
        by,
        link: l.clone(),
    }));
}

impl Watch {
    /// A watch with `--hang-timeout` seconds as its floor; `None` when it is 0 (off).
    pub fn new(hang_timeout_s: f64) -> Option<Watch> {
        (hang_timeout_s > 0.0).then(|| Watch {
            floor: Duration::from_secs_f64(hang_timeout_s.min(1e9)),
            last: Vec::new(),
            since: Instant::now(),
            leaf_grace: LEAF_GRACE,
            state_grace: STATE_GRACE,
            links: Sampler::new(),
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
            net: net_here(),
            links: to_publish(self.links.sample()),
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
                None if boot.world_size() == 1 || idle >= limit + self.state_grace => Vec::new(),
                None => return None,
            };
            let (rank, host, pid) = me();
            let mut views = views_of(rank, &host, pid, idle, &mine);
            let mut net = NetView::default();
            count(&mut net, rank, &mine);
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
                        count(&mut net, p.rank, &s);
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
            if waiting_for_state && idle < limit + self.state_grace {
                return None;
            }
            if peers.is_empty() && boot.world_size() > 1 {
                return Some(alone(&views, &net, limit, idle, true));
            }
            return Some(found(&verdict::judge(&views, &net), &views, limit, &host));
        }
        // Rank 0 judges by the longest limit of the job; wait for it by rank 0's own (its
        // heartbeats carry it), not this process' alone.
        let root_limit = boot
            .root_state()
            .and_then(|n| ProcessState::decode(&n))
            .map_or(Duration::ZERO, |s| Duration::from_millis(s.limit_ms));
        if idle < limit.max(root_limit) + self.leaf_grace {
            return None;
        }
        let (rank, host, pid) = me();
        let views = views_of(rank, &host, pid, idle, &mine);
        let mut net = NetView::default();
        count(&mut net, rank, &mine);
        Some(alone(&views, &net, limit, idle, false))
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
    if v.kind == Kind::AllWaiting && v.network == "unwatched" {
        lines.push(format!(
            "  NCCL's network steps are not watched here: {}",
            unwatched_why()
        ));
    }
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
fn alone(views: &[View], net: &NetView, limit: Duration, idle: Duration, root: bool) -> Hang {
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
        let one = verdict::judge(std::slice::from_ref(v), &NetView::default());
        one.evidence.into_iter().next().unwrap_or_default()
    }));
    let v = verdict::judge(views, net);
    lines.extend(v.evidence.iter().skip(views.len()).cloned());
    Hang {
        lines,
        record: v.to_json(views, limit),
        tell: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::note::ThreadState;
    use super::super::note::fixtures::label;
    use super::*;
    use crate::bootstrap::PeerState;
    use crate::runner::fake_job::FakeJob;

    type Job = FakeJob<fn(String) -> crate::bootstrap::Result<Vec<String>>>;

    /// A peer's note: `issued` of a batch of 20 from 100, waiting or enqueuing, idle `idle_ms`.
    fn peer(rank: usize, issued: u64, phase: Phase, idle_ms: u64) -> PeerState {
        let note = ProcessState {
            idle_ms,
            limit_ms: 1_000,
            threads: vec![ThreadState {
                tid: 0,
                first_rank: rank as u64,
                ngpus: 1,
                phase,
                issued,
                finished: 100,
                batch_first: 100,
                batch_len: 20,
                label: Some(label()),
            }],
            net: Net::Unwatched,
            links: Vec::new(),
        };
        PeerState {
            rank,
            host: format!("vnode{rank}"),
            pid: 1000 + rank as u32,
            note: Some((note.encode().into_bytes(), Duration::from_millis(300))),
        }
    }

    fn job(rank: usize, peers: Option<Vec<PeerState>>) -> Job {
        let mut j: Job = FakeJob::new(rank, 4, |_| Ok(Vec::new()));
        j.peers = peers;
        j
    }

    /// The only test that takes a progress slot (the slots are process-wide): every case in
    /// turn, on this process' slot 0 standing for rank 0's benchmark thread.
    #[test]
    fn the_watch_calls_a_hang_only_when_every_rank_is_stalled() {
        let slot = progress::claim(0, 0, 1);
        slot.set_issued(100);
        slot.all_finished();
        slot.begin(label(), 20);
        slot.set_issued(120);
        slot.waiting();
        let mut w = Watch::new(1.0).unwrap();
        w.leaf_grace = Duration::from_secs(2);
        w.state_grace = Duration::from_secs(2);
        let stalled = |w: &mut Watch, secs: u64| {
            w.since = Instant::now() - Duration::from_secs(secs);
        };

        // Rank 2 never enqueued iteration 6; everyone is stalled: a hang naming rank 2.
        let peers = vec![
            peer(1, 120, Phase::Wait, 5_000),
            peer(2, 105, Phase::Enqueue, 5_000),
            peer(3, 120, Phase::Wait, 5_000),
        ];
        let root = job(0, Some(peers.clone()));
        assert!(w.tick(&root).is_none(), "the first look only records");
        let mine = ProcessState::decode(&root.published.lock().unwrap()).unwrap();
        assert_eq!(mine.threads.len(), 1);
        assert_eq!(
            (mine.threads[0].issued, mine.threads[0].phase),
            (120, Phase::Wait)
        );
        stalled(&mut w, 5);
        let h = w.tick(&root).expect("hung");
        assert!(
            h.lines[0].contains("hang: rank 2 (vnode2, pid 1002) never started operation 106"),
            "{:?}",
            h.lines
        );
        assert_eq!(h.lines.len(), 5, "{:?}", h.lines);
        assert!(
            h.tell.as_deref().unwrap().contains("culprit: rank 2"),
            "{:?}",
            h.tell
        );
        assert_eq!(h.record["verdict"], "never_started");

        // A peer that still makes progress: no hang, however long this process waits.
        let mut moving = peers.clone();
        moving[0] = peer(1, 120, Phase::Wait, 10);
        stalled(&mut w, 500);
        assert!(w.tick(&job(0, Some(moving))).is_none());

        // A peer outside the operations (validation, set-up): not hung either.
        let mut outside = peers.clone();
        outside[2] = peer(3, 120, Phase::Outside, 50_000);
        stalled(&mut w, 500);
        assert!(w.tick(&job(0, Some(outside))).is_none());

        // A peer whose note never came: waited for, then named as silent.
        let mut silent = peers.clone();
        silent[1].note = None;
        stalled(&mut w, 2);
        assert!(w.tick(&job(0, Some(silent.clone()))).is_none());
        stalled(&mut w, 4);
        let h = w.tick(&job(0, Some(silent))).expect("hung");
        assert!(
            h.lines[0].contains("rank 2 (vnode2, pid 1002) sent no state"),
            "{:?}",
            h.lines
        );

        // A hostile note counts as none.
        let mut hostile = peers.clone();
        hostile[1].note = Some((b"hang1 idle=\x1b[2J".to_vec(), Duration::ZERO));
        stalled(&mut w, 4);
        let h = w.tick(&job(0, Some(hostile))).expect("hung");
        assert!(h.lines.iter().all(|l| !l.contains('\x1b')), "{:?}", h.lines);

        // Another process: on its own only after the grace for rank 0's word, counted from
        // rank 0's limit where it is longer (rank 0 waits for the job's longest).
        let mut leaf = job(1, None);
        leaf.root = Some(
            ProcessState {
                idle_ms: 0,
                limit_ms: 30_000,
                threads: Vec::new(),
                net: Net::Unwatched,
                links: Vec::new(),
            }
            .encode()
            .into_bytes(),
        );
        stalled(&mut w, 20);
        assert!(w.tick(&leaf).is_none(), "rank 0's limit is 30 s");
        leaf.root = None;
        stalled(&mut w, 2);
        assert!(w.tick(&leaf).is_none());
        stalled(&mut w, 4);
        let h = w.tick(&leaf).expect("hung alone");
        assert!(
            h.lines[0].contains("and rank 0 gave no verdict"),
            "{:?}",
            h.lines
        );
        assert!(h.tell.is_none());

        // This process outside the operations: never stalled.
        slot.outside();
        stalled(&mut w, 500);
        assert!(w.tick(&root).is_none());
        progress::release(slot);
    }
}
