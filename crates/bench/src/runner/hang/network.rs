//! NCCL's network steps in the verdict: from the links every process reported (their oldest
//! proxy operation, the step it waits on and in which state), a link whose data was handed to
//! the network and never completed, or a GPU that does not take data that arrived.
//!
//! - **link**: a send stuck in `SendWait` (the network took the data and never completed the
//!   transfer; a receiver that has no buffer free keeps its sender in `SendPeerWait` instead,
//!   so this is the wire, not back-pressure), its receiver in `RecvWait` where it reported;
//! - **GPU**: no send stuck on the wire, and a rank's receive stuck in `RecvGPUWait` (the data
//!   arrived and its GPU never took it) while the other ranks wait for data;
//! - otherwise nothing is decided here, and the verdict says why (no steps watched, no network
//!   in the job, or steps that do not decide).

use super::note::{LinkNote, View, Wait};
use serde_json::json;
use std::time::Duration;

/// A link one process reported, with that process' world rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    /// The reporting process' world rank.
    pub by: usize,
    /// The link.
    pub link: LinkNote,
}

/// What the processes said of NCCL's network steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetView {
    /// The links reported (those that had not moved lately).
    pub links: Vec<Reported>,
    /// Processes that watch the steps and saw some.
    pub with_steps: usize,
    /// Processes that watch the steps and saw none (one node).
    pub without_steps: usize,
    /// Processes that do not watch them.
    pub unwatched: usize,
}

/// What the steps decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// A link (`true`) or a GPU.
    pub link: bool,
    /// The world ranks named.
    pub culprits: Vec<usize>,
    /// The verdict's words after "hang: " and before the operation.
    pub subject: String,
    /// The verdict's words after the operation.
    pub detail: String,
    /// The stuck links, for the JSON record.
    pub record: Vec<serde_json::Value>,
}

/// Where NCCL rank `r` lives: its process' world rank and host.
fn place(r: u64, views: &[View]) -> Option<(usize, &str)> {
    views.iter().find_map(|v| {
        let t = v.state.as_ref()?;
        (t.first_rank <= r && r < t.first_rank + t.ngpus.max(1))
            .then_some((v.rank, v.host.as_str()))
    })
}

/// "rank 3 (node08)".
fn named(r: u64, views: &[View]) -> String {
    match place(r, views) {
        Some((_, host)) => format!("rank {r} ({host})"),
        None => format!("rank {r}"),
    }
}

fn secs(ms: u64) -> String {
    format!("{} s", (ms as f64 / 1000.0).round() as u64)
}

fn record(l: &LinkNote, views: &[View]) -> serde_json::Value {
    let host = |r| place(r, views).map(|(_, h)| h.to_string());
    json!({
        "rank": l.rank,
        "host": host(l.rank),
        "peer": l.peer,
        "peer_host": host(l.peer),
        "channel": l.channel,
        "direction": if l.send { "send" } else { "recv" },
        "step": l.step + 1,
        "steps": l.steps,
        "state": l.wait.word(),
        "still_s": l.still_ms as f64 / 1000.0,
    })
}

/// "channel 1" or "channels 0, 1 and 3".
fn channels(mut cs: Vec<u64>) -> String {
    cs.sort_unstable();
    cs.dedup();
    let words: Vec<String> = cs.iter().map(|c| c.to_string()).collect();
    match &words[..] {
        [one] => format!("channel {one}"),
        [head @ .., last] => format!("channels {} and {last}", head.join(", ")),
        [] => "no channel".into(),
    }
}

/// The links still for at least `still`, stuck in `wait`, the longest still first.
fn stuck(net: &NetView, wait: Wait, send: bool, still: Duration) -> Vec<&LinkNote> {
    let mut v: Vec<&LinkNote> = net
        .links
        .iter()
        .map(|r| &r.link)
        .filter(|l| l.send == send && l.wait == wait)
        .filter(|l| Duration::from_millis(l.still_ms) >= still)
        .collect();
    v.sort_by_key(|l| (std::cmp::Reverse(l.still_ms), l.rank, l.peer, l.channel));
    v
}

/// The culprit the steps name, if any; `stall` is how long the job has made no progress (a
/// link counts when it was still for at least half of it, and at least a second).
pub fn decide(net: &NetView, views: &[View], stall: Duration) -> Option<Finding> {
    let still = (stall / 2).max(Duration::from_secs(1));
    let sends = stuck(net, Wait::Send, true, still);
    if let Some(first) = sends.first() {
        let (from, to) = (first.rank, first.peer);
        let same: Vec<u64> = sends
            .iter()
            .filter(|l| (l.rank, l.peer) == (from, to))
            .map(|l| l.channel)
            .collect();
        let waiting = net.links.iter().any(|r| {
            let l = &r.link;
            !l.send && (l.rank, l.peer) == (to, from) && l.wait == Wait::Recv
        });
        let mut others: Vec<(u64, u64)> = sends
            .iter()
            .map(|l| (l.rank, l.peer))
            .filter(|p| *p != (from, to))
            .collect();
        others.sort_unstable();
        others.dedup();
        let mut detail = format!(
            "{}: the send is stuck at step {} of {} in SendWait (handed to the network, never \
             completed) for {}{}; the other ranks wait behind it",
            channels(same),
            first.step + 1,
            first.steps,
            secs(first.still_ms),
            if waiting {
                format!(", and {} waits for it in RecvWait", named(to, views))
            } else {
                String::new()
            }
        );
        if !others.is_empty() {
            let list: Vec<String> = others
                .iter()
                .take(4)
                .map(|(a, b)| format!("rank {a} -> rank {b}"))
                .collect();
            detail.push_str(&format!(
                " (also stuck in SendWait: {}{})",
                list.join(", "),
                if others.len() > 4 { ", ..." } else { "" }
            ));
        }
        let mut culprits: Vec<usize> = std::iter::once((from, to))
            .chain(others.iter().copied())
            .flat_map(|(a, b)| [a, b])
            .filter_map(|r| place(r, views).map(|(w, _)| w))
            .collect();
        culprits.sort_unstable();
        culprits.dedup();
        return Some(Finding {
            link: true,
            culprits,
            subject: format!(
                "the link from {} to {} stopped at",
                named(from, views),
                named(to, views)
            ),
            detail,
            record: sends.iter().map(|l| record(l, views)).collect(),
        });
    }
    let taken = stuck(net, Wait::RecvGpu, false, still);
    let mut gpus: Vec<u64> = taken.iter().map(|l| l.rank).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let reporters = {
        let mut r: Vec<u64> = net.links.iter().map(|r| r.link.rank).collect();
        r.sort_unstable();
        r.dedup();
        r.len()
    };
    // Every rank holding data its GPU does not take decides nothing.
    let first = taken.first()?;
    if gpus.len() >= reporters.max(2) {
        return None;
    }
    let mut culprits: Vec<usize> = gpus
        .iter()
        .filter_map(|r| place(*r, views).map(|(w, _)| w))
        .collect();
    culprits.sort_unstable();
    culprits.dedup();
    let subject = match &gpus[..] {
        [one] => format!("the GPU of {} stopped at", named(*one, views)),
        many => format!(
            "the GPUs of {} stopped at",
            many.iter()
                .map(|r| named(*r, views))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Some(Finding {
        link: false,
        culprits,
        subject,
        detail: format!(
            "data from {} arrived on channel {} (step {} of {}) and has waited for the GPU in \
             RecvGPUWait for {}, and no transfer is stuck on the network; the other ranks wait \
             behind it",
            named(first.peer, views),
            first.channel,
            first.step + 1,
            first.steps,
            secs(first.still_ms)
        ),
        record: taken.iter().map(|l| record(l, views)).collect(),
    })
}

/// Why the steps decided nothing, for the undecided verdict.
pub fn why_undecided(net: &NetView) -> &'static str {
    if net.with_steps > 0 {
        "NCCL's network steps do not decide it"
    } else if net.without_steps > 0 {
        "no network transfer took part (within a node NVLink or shared memory carry the data, \
         and NCCL reports no steps for them)"
    } else {
        "NCCL's network steps are not watched in this run (docs/hangs.md says when)"
    }
}

/// One evidence line per stuck link (at most `max`).
pub fn evidence(net: &NetView, views: &[View], max: usize) -> Vec<String> {
    let mut v: Vec<&LinkNote> = net.links.iter().map(|r| &r.link).collect();
    v.sort_by_key(|l| {
        (
            l.wait,
            std::cmp::Reverse(l.still_ms),
            l.rank,
            l.peer,
            l.channel,
        )
    });
    let total = v.len();
    let mut lines: Vec<String> = v
        .iter()
        .take(max)
        .map(|l| {
            format!(
                "  {} {} {}, channel {}: step {} of {} in {}, still for {}",
                named(l.rank, views),
                if l.send { "send to" } else { "receive from" },
                named(l.peer, views),
                l.channel,
                l.step + 1,
                l.steps,
                l.wait.word(),
                secs(l.still_ms)
            )
        })
        .collect();
    if total > max {
        lines.push(format!("  ... and {} more links", total - max));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::note::Phase;
    use super::super::note::fixtures::{link, thread};
    use super::*;

    fn views(n: usize) -> Vec<View> {
        (0..n)
            .map(|r| View {
                rank: r,
                host: format!("vnode{r}"),
                pid: 1000 + r as u32,
                idle: Duration::from_secs(42),
                state: Some({
                    let mut t = thread(0, Phase::Wait, 120, 100);
                    t.first_rank = r as u64;
                    t
                }),
            })
            .collect()
    }

    fn rep(l: LinkNote) -> Reported {
        Reported {
            by: l.rank as usize,
            link: l,
        }
    }

    /// Rank 2's sends to rank 3 stopped on the wire: the ring backs up behind it (rank 1's
    /// sends wait for buffers, rank 2's GPU holds received data), the link is named.
    #[test]
    fn a_send_stuck_on_the_wire_names_the_link() {
        let net = NetView {
            links: vec![
                rep(link(2, 3, 1, true, Wait::Send, 40_000)),
                rep(link(2, 3, 0, true, Wait::Send, 40_000)),
                rep(link(3, 2, 1, false, Wait::Recv, 40_000)),
                rep(link(1, 2, 1, true, Wait::SendPeer, 39_000)),
                rep(link(2, 1, 1, false, Wait::RecvGpu, 39_000)),
            ],
            with_steps: 4,
            ..NetView::default()
        };
        let f = decide(&net, &views(4), Duration::from_secs(42)).expect("decided");
        assert!(f.link);
        assert_eq!(f.culprits, vec![2, 3]);
        assert_eq!(
            f.subject,
            "the link from rank 2 (vnode2) to rank 3 (vnode3) stopped at"
        );
        assert!(
            f.detail.starts_with(
                "channels 0 and 1: the send is stuck at step 42 of 64 in SendWait (handed to \
                 the network, never completed) for 40 s, and rank 3 (vnode3) waits for it in \
                 RecvWait; the other ranks wait behind it"
            ),
            "{}",
            f.detail
        );
        assert_eq!(f.record.len(), 2);
        assert_eq!(f.record[0]["state"], "SendWait");
        assert_eq!(f.record[0]["peer_host"], "vnode3");
    }

    /// Rank 2's GPU stopped: data from rank 1 arrived and waits for it; the others wait for
    /// data (RecvWait) or for their GPU to produce (SendGPUWait): the GPU is named.
    #[test]
    fn data_the_gpu_never_takes_names_the_gpu() {
        let net = NetView {
            links: vec![
                rep(link(2, 1, 0, false, Wait::RecvGpu, 41_000)),
                rep(link(2, 3, 0, true, Wait::SendGpu, 41_000)),
                rep(link(3, 2, 0, false, Wait::Recv, 41_000)),
                rep(link(0, 3, 0, false, Wait::Recv, 41_000)),
                rep(link(1, 0, 0, false, Wait::Recv, 41_000)),
            ],
            with_steps: 4,
            ..NetView::default()
        };
        let f = decide(&net, &views(4), Duration::from_secs(42)).expect("decided");
        assert!(!f.link);
        assert_eq!(f.culprits, vec![2]);
        assert_eq!(f.subject, "the GPU of rank 2 (vnode2) stopped at");
        assert!(
            f.detail.starts_with(
                "data from rank 1 (vnode1) arrived on channel 0 (step 42 of 64) and has \
                 waited for the GPU in RecvGPUWait for 41 s"
            ),
            "{}",
            f.detail
        );
    }

    #[test]
    fn steps_that_decide_nothing_are_said_so() {
        let vs = views(2);
        // Moving links (still for a moment only), every rank holding data, or nothing at all.
        for links in [
            vec![rep(link(0, 1, 0, true, Wait::Send, 300))],
            vec![
                rep(link(0, 1, 0, false, Wait::RecvGpu, 40_000)),
                rep(link(1, 0, 0, false, Wait::RecvGpu, 40_000)),
            ],
            vec![rep(link(0, 1, 0, false, Wait::Recv, 40_000))],
            vec![],
        ] {
            let net = NetView {
                links,
                with_steps: 2,
                ..NetView::default()
            };
            assert_eq!(decide(&net, &vs, Duration::from_secs(42)), None, "{net:?}");
        }
        let mut net = NetView::default();
        assert!(why_undecided(&net).contains("not watched"));
        net.without_steps = 2;
        assert!(why_undecided(&net).contains("no network transfer took part"));
        net.with_steps = 1;
        assert!(why_undecided(&net).contains("do not decide"));
    }

    #[test]
    fn evidence_is_bounded() {
        let links = (0..40)
            .map(|c| rep(link(0, 1, c, true, Wait::SendPeer, 5_000)))
            .collect();
        let net = NetView {
            links,
            ..NetView::default()
        };
        let lines = evidence(&net, &views(2), 8);
        assert_eq!(lines.len(), 9);
        assert_eq!(lines[8], "  ... and 32 more links");
        assert!(
            lines[0].contains(
                "rank 0 (vnode0) send to rank 1 (vnode1), channel 0: step 42 of 64 in \
                 SendPeerWait, still for 5 s"
            ),
            "{}",
            lines[0]
        );
    }
}
