//! How strong the evidence is when a verdict names nobody: the group that came closest to the
//! slow threshold, and the whole job's own table against what its pairs reached (a slow job
//! that no pair reproduces is said to be slow, not passed over).

use serde::{Deserialize, Serialize};

use super::history::RoundRecord;
use super::judge::State;
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
}

impl JobCheck {
    /// The check of `job_busbw` against the pairs of `history`; `None` without a job
    /// measurement or without measured pairs (the `nodes` and `rails` schedules: a node alone
    /// runs inside the node and a rail one GPU per node, neither comparable with the job).
    pub fn of(history: &[RoundRecord], job_busbw: Option<f64>, th: &Thresholds) -> Option<Self> {
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
        })
    }

    /// The line's text after `# locate job: `.
    pub fn describe(&self) -> String {
        let head = format!(
            "the full job ran at {:.2}x of its pairs (job {:.2} GB/s, median pair {:.2} GB/s; \
             below {:.2}x is slow)",
            self.ratio, self.job_busbw, self.pairs_busbw, self.slow_below
        );
        match (self.slow, self.localised) {
            (false, _) => head,
            (true, true) => format!("{head}: slow, see the suspects above"),
            (true, false) => format!(
                "{head}: a slowdown no pair reproduces; locate could not localise a slowdown \
                 of the whole job"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::{Book, judge};
    use crate::round::{RoundBuilder, Subject};
    use crate::seam::GroupOutcome;

    fn pairs_round(values: &[f64]) -> (RoundRecord, Topology) {
        let topo = Topology::uniform(2 * values.len(), 1);
        let mut b = RoundBuilder::new(topo.world(), Phase::Pairs);
        for i in 0..values.len() {
            b.add(
                vec![2 * i, 2 * i + 1],
                Subject::Pair(2 * i, 2 * i + 1),
                Role::Primary,
            );
        }
        let round = b.finish(1).expect("a round");
        let outcomes: Vec<GroupOutcome> = values
            .iter()
            .map(|&busbw| GroupOutcome::Measured {
                busbw,
                time_us: 1.0,
            })
            .collect();
        let th = Thresholds::default();
        let judged = judge(&round, &outcomes, &topo, &Book::default(), &th);
        let rec = RoundRecord {
            round,
            outcomes,
            judged,
            wall_s: 1.0,
        };
        (rec, topo)
    }

    #[test]
    fn the_closest_group_is_the_lowest_fine_one() {
        let (rec, topo) = pairs_round(&[100.0, 92.0, 100.0, 50.0]);
        let c = closest(std::slice::from_ref(&rec), &topo, &Thresholds::default())
            .expect("a closest group");
        assert_eq!(c.description, "node003+node004");
        assert_eq!((c.round, c.ratio, c.needed_drop), (1, 0.92, 0.15));
    }

    #[test]
    fn a_slow_job_is_said_so() {
        let (rec, _) = pairs_round(&[100.0, 98.0, 100.0]);
        let th = Thresholds::default();
        let history = std::slice::from_ref(&rec);
        assert_eq!(JobCheck::of(history, None, &th), None);
        let fine = JobCheck::of(history, Some(90.0), &th).expect("a check");
        assert!(!fine.slow);
        let slow = JobCheck::of(history, Some(60.0), &th).expect("a check");
        assert!(slow.slow && (slow.ratio - 0.6).abs() < 1e-9);
        assert!(
            slow.describe().ends_with(
                "a slowdown no pair reproduces; locate could not localise a slowdown of the \
                 whole job"
            ),
            "{}",
            slow.describe()
        );
    }
}
