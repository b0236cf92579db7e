//! How strong the evidence is when a verdict names nobody: the group that came closest to the
//! slow threshold, and the whole job's own table against what its pairs reached (a slow job
//! that no pair reproduces is said to be slow, not passed over).

use serde::{Deserialize, Serialize};

use super::history::RoundRecord;
use super::judge::State;
use super::matrix::{PairMatrix, analyse};
use super::round::{Phase, Role};
use super::stats::{Reference, Thresholds, upper_median};
use super::topology::Topology;

/// The group that came closest to being called slow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Closest {
    /// The group as printed (`node005+node006`).
    pub description: String,
    /// The round it ran in.
    pub round: usize,
    /// Its busbw as a multiple of its reference.
    pub ratio: f64,
    /// The drop below the reference it would have needed to count as slow, as a fraction
    /// (the minimum drop, or more when the noise was wider).
    pub needed_drop: f64,
}

/// The upper median busbw of the measured pairs of nodes of the pair rounds, GB/s.
fn median_pair(history: &[RoundRecord]) -> Option<f64> {
    let pairs: Vec<f64> = history
        .iter()
        .filter(|r| r.round.phase == Phase::Pairs)
        .flat_map(|r| r.round.groups.iter().zip(&r.outcomes))
        .filter(|(g, _)| g.role == Role::Primary)
        .filter_map(|(_, o)| o.busbw())
        .collect();
    upper_median(&pairs).filter(|v| *v > 0.0)
}

/// The lowest ratio of a measured group that was judged fine (controls left out: they are
/// the references), with the drop it would have needed. A pair alone in its round (odd jobs
/// of `full`) is unjudged there and is read against the median pair of all rounds, as the
/// pair matrix reads it.
pub fn closest(history: &[RoundRecord], topo: &Topology, th: &Thresholds) -> Option<Closest> {
    let pair_ref = median_pair(history).and_then(|v| Reference::earlier(v, th));
    let mut best: Option<Closest> = None;
    for rec in history {
        for ((g, j), o) in rec.round.groups.iter().zip(&rec.judged).zip(&rec.outcomes) {
            let lone_pair = j.state == State::Unjudged
                && g.role == Role::Primary
                && rec.round.phase == Phase::Pairs;
            let (ratio, reference) = match (j.ratio, j.reference, o.busbw(), pair_ref) {
                (Some(r), Some(reference), _, _) if j.state == State::Ok => (r, reference),
                (_, _, Some(v), Some(p)) if lone_pair && !p.is_low(v, th) => (p.ratio(v), p),
                _ => continue,
            };
            if g.role == Role::Control || !ratio.is_finite() {
                continue;
            }
            if best.as_ref().is_none_or(|b| ratio < b.ratio) {
                best = Some(Closest {
                    description: g.subject.describe(topo),
                    round: rec.round.index,
                    ratio,
                    needed_drop: reference.needed_drop(th),
                });
            }
        }
    }
    best
}

/// When nobody is named: the nodes whose pairs ran under the clear margin
/// ([`Thresholds::clean_ratio`]) of the median node but not below the slow threshold, from two
/// or more measured pairs each, lowest first (at most three). Weak evidence — short of the slow
/// threshold, so not a verdict — but where a node paused now and then or slightly starved
/// shows first.
pub fn leaning(history: &[RoundRecord], topo: &Topology, th: &Thresholds) -> Option<String> {
    let m = PairMatrix::from_history(topo.nodes(), history);
    let f = analyse(&m, th);
    let reference = f.node_ref?;
    let mut low: Vec<(usize, f64, usize)> = f
        .scores
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let s = s.as_ref()?;
            let ratio = reference.ratio(s.score);
            let weak = ratio < th.clean_ratio() && !s.slow && !reference.is_low(s.score, th);
            (s.pairs >= 2 && ratio.is_finite() && weak).then_some((i, ratio, s.pairs))
        })
        .collect();
    if low.is_empty() {
        return None;
    }
    low.sort_by(|a, b| a.1.total_cmp(&b.1));
    let floor = 1.0 - reference.needed_drop(th);
    // Three decimals where two would print a reading equal to the floor it is not below.
    let digits = if low
        .iter()
        .take(3)
        .any(|l| format!("{:.2}", l.1) == format!("{floor:.2}"))
    {
        3
    } else {
        2
    };
    let nodes: Vec<String> = low
        .iter()
        .take(3)
        .map(|&(i, ratio, pairs)| format!("{} {ratio:.digits$}x ({pairs} pairs)", topo.host(i)))
        .collect();
    Some(format!(
        "leaning: {} of the median node, under the clear margin ({:.2}x) but not below \
         {floor:.digits$}x: weak evidence, not named",
        nodes.join(", "),
        th.clean_ratio(),
    ))
}

/// A note on nodes that share a machine (one kernel boot id: containers of one host, or ranks
/// posing as hosts): their groups share its CPUs, GPUs and NICs, and a pair of them never
/// crosses the network between machines. `None` when every node has a machine of its own or
/// none is known.
pub fn machines_note(topo: &Topology) -> Option<String> {
    let shared = topo.shared_machines();
    if shared.is_empty() {
        return None;
    }
    if topo.one_machine() {
        return Some(format!(
            "all {} nodes run on one machine (one kernel boot id): groups running at once share \
             its CPUs, GPUs and NICs, and no reading here is a network figure",
            topo.nodes()
        ));
    }
    let mut groups: Vec<String> = shared
        .iter()
        .take(3)
        .map(|nodes| super::round::hosts(topo, nodes))
        .collect();
    if shared.len() > 3 {
        groups.push(format!("{} more groups", shared.len() - 3));
    }
    Some(format!(
        "nodes share machines (one kernel boot id each): {}; a pair on one machine does not \
         cross the network between machines, and groups running at once share its CPUs, GPUs \
         and NICs",
        groups.join("; ")
    ))
}

/// The whole job's measurement against its pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobCheck {
    /// busbw of the job's own table at the locate size, GB/s.
    pub job_busbw: f64,
    /// The median pair of nodes (upper median of the pair rounds' measured pairs), GB/s.
    pub pairs_busbw: f64,
    /// `job_busbw / pairs_busbw`.
    pub ratio: f64,
    /// Below this ratio the job counts as slow ([`Thresholds::job_ratio`]).
    pub slow_below: f64,
    /// Whether the job was slow against its pairs.
    pub slow: bool,
    /// Whether locate named a suspect (set once the verdicts are in).
    pub localised: bool,
    /// The job's two halves, when larger groups ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halves: Option<Halves>,
    /// Whether every node runs on one machine (one kernel boot id: ranks posing as hosts):
    /// then groups running at once share its CPUs and GPUs, and the job's ratio to its pairs
    /// says how that sharing scales, not how a network does.
    #[serde(default)]
    pub one_machine: bool,
}

/// The job's two halves (the first round of larger groups) against its pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Halves {
    /// Ranks per half.
    pub ranks: usize,
    /// The upper median busbw of the halves as a multiple of the median pair.
    pub ratio: f64,
    /// Whether both halves were judged fine against each other.
    pub alike: bool,
}

impl Halves {
    /// The first round of halves of `history` (both halves whole: no fillers) against the
    /// median pair `pairs` (GB/s).
    fn of(history: &[RoundRecord], pairs: f64) -> Option<Halves> {
        let rec = history.iter().find(|r| r.round.phase == Phase::Halves)?;
        if rec.round.groups.iter().any(|g| g.role != Role::Primary) {
            return None;
        }
        let busbw: Vec<f64> = rec.outcomes.iter().filter_map(|o| o.busbw()).collect();
        let ratio = upper_median(&busbw)? / pairs;
        let ranks = rec.round.groups.first().map_or(0, |g| g.ranks.len());
        Some(Halves {
            ranks,
            ratio,
            alike: busbw.len() == rec.round.groups.len()
                && rec.judged.iter().all(|j| j.state == State::Ok),
        })
    }
}

impl JobCheck {
    /// The check of `job_busbw` against the pairs of `history` on `topo`; `None` without a job
    /// measurement or without measured pairs (the `nodes` and `rails` schedules: a node alone
    /// runs inside the node and a rail one GPU per node, neither comparable with the job).
    pub fn of(
        history: &[RoundRecord],
        topo: &Topology,
        job_busbw: Option<f64>,
        th: &Thresholds,
    ) -> Option<Self> {
        let job = job_busbw.filter(|v| v.is_finite() && *v > 0.0)?;
        let reference = median_pair(history)?;
        let ratio = job / reference;
        Some(JobCheck {
            job_busbw: job,
            pairs_busbw: reference,
            ratio,
            slow_below: th.job_ratio(),
            slow: ratio < th.job_ratio(),
            localised: false,
            halves: Halves::of(history, reference),
            one_machine: topo.one_machine(),
        })
    }

    /// The line's text after `# locate job: `.
    pub fn describe(&self) -> String {
        let head = format!(
            "the full job ran at {:.2}x of its pairs (job {:.2} GB/s, median pair {:.2} GB/s; \
             below {:.2}x is slow)",
            self.ratio, self.job_busbw, self.pairs_busbw, self.slow_below
        );
        let body = match (self.slow, self.localised) {
            (false, _) => head,
            (true, true) => format!("{head}: slow, see the suspects above"),
            (true, false) => format!(
                "{head}: a slowdown no pair reproduces{}; locate could not localise a slowdown \
                 of the whole job",
                self.halves_words()
            ),
        };
        if self.one_machine {
            format!(
                "{body} (all nodes run on one machine: groups running at once share its CPUs \
                 and GPUs, so this ratio is not a network figure)"
            )
        } else {
            body
        }
    }

    /// What the halves add to a slow job that nobody explains, when they were alike: whether
    /// they were already slower than the pairs (below one minimum drop, halfway to the job's
    /// threshold of two), so that busbw falls with the group's size, or ran like them.
    fn halves_words(&self) -> String {
        let Some(h) = self.halves.as_ref().filter(|h| h.alike) else {
            return String::new();
        };
        let trend = if h.ratio < (1.0 + self.slow_below) / 2.0 {
            "busbw falls with the group's size evenly across the job, not in one node or link"
        } else {
            "the slowdown shows only when more than half of the job runs at once"
        };
        format!(
            "; its halves ({} ranks each) ran alike at {:.2}x of its pairs: {trend}",
            h.ranks, h.ratio
        )
    }
}

/// How a verdict of the larger groups begins (both schedules of larger groups, halves and
/// leave-one-out): the job against its pairs, when it was measured.
pub(crate) fn job_lead(job: Option<&JobCheck>) -> String {
    job.map_or(String::new(), |j| {
        format!(
            "the full job ran at {:.2}x of its pairs, which named nobody; ",
            j.ratio
        )
    })
}

#[cfg(test)]
mod tests;
