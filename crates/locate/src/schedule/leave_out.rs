//! Larger groups for a small job: the job without each node in turn. With 4 or 5 nodes the
//! halves of [`Larger`](super::larger::Larger) are pairs again (2 nodes each), and a slowdown
//! that only shows when many nodes take part is as hidden in them as in the pairs before. So
//! each round runs the job's own collective on every node but one, leaving out a different
//! node each time: N rounds for N nodes. A node is named when the group without it ran clearly
//! faster than every group that held it (the median of those below `1 − min-drop` of it, and
//! each of them below the clear margin `1 − min-drop/2`); otherwise the readings are given and
//! nobody is named.

use super::super::evidence::{JobCheck, job_lead};
use super::super::judge::State;
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject, hosts};
use super::super::stats::median;
use super::super::topology::Topology;
use super::super::verdict::{Culprit, Verdict, span};
use super::{Conclusion, Context};

/// The fewest nodes: with 3, the job without one node is a pair.
pub const MIN_NODES: usize = 4;
/// The most nodes: from 6 the halves have 3 nodes or more and are used instead.
pub const MAX_NODES: usize = 5;

/// The job without each node in turn.
#[derive(Debug, Clone)]
pub struct LeaveOut {
    nodes: usize,
    /// busbw of the job without node `k` (index k), in the order they ran; `None`: not measured.
    readings: Vec<Option<f64>>,
    /// The rounds that ran, one per node left out.
    rounds: Vec<usize>,
}

impl LeaveOut {
    /// The escalation for `topo`; `None` outside 4 to 5 nodes.
    pub fn new(topo: &Topology) -> Option<LeaveOut> {
        (MIN_NODES..=MAX_NODES)
            .contains(&topo.nodes())
            .then(|| LeaveOut {
                nodes: topo.nodes(),
                readings: Vec::new(),
                rounds: Vec::new(),
            })
    }

    /// The next round: the job without the next node, until every node was left out once.
    pub fn next_round(&mut self, cx: &Context) -> Option<Round> {
        if let Some(&last) = self.rounds.last()
            && self.readings.len() < self.rounds.len()
        {
            let rec = last.checked_sub(1).and_then(|i| cx.history.get(i));
            let busbw = rec.and_then(|r| r.outcomes.first()).and_then(|o| o.busbw());
            self.readings.push(busbw);
        }
        let left = self.readings.len();
        if left >= self.nodes {
            return None;
        }
        let ranks: Vec<usize> = (0..self.nodes)
            .filter(|&n| n != left)
            .flat_map(|n| cx.topo.ranks_of(n))
            .collect();
        let mut builder = RoundBuilder::new(cx.topo.world(), Phase::LeaveOut);
        builder.add(ranks, Subject::AllBut(left), Role::Primary)?;
        let round = builder.finish(cx.next_index())?;
        self.rounds.push(round.index);
        Some(round)
    }

    /// The node whose absence made the job clearly faster, or a note with the readings.
    pub fn conclude(&self, cx: &Context, job: Option<&JobCheck>, c: &mut Conclusion) {
        let topo = cx.topo;
        let head = job_lead(job);
        let rounds = match (self.rounds.first(), self.rounds.last()) {
            (Some(a), Some(b)) if a != b => format!("rounds {a}-{b}"),
            (Some(a), _) => format!("round {a}"),
            _ => return,
        };
        let measured: Vec<(usize, f64)> = self
            .readings
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        if measured.len() < self.nodes {
            let missing: Vec<usize> = (0..self.nodes)
                .filter(|k| !measured.iter().any(|(m, _)| m == k))
                .collect();
            c.notes.push(format!(
                "larger groups: the job without each node in turn ({rounds}): without {} not \
                 measured (hung or failed), not named",
                hosts(topo, &missing)
            ));
            return;
        }
        let Some(&(best, top)) = measured.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
            return;
        };
        let others: Vec<f64> = measured
            .iter()
            .filter(|(k, _)| *k != best)
            .map(|(_, v)| *v / top)
            .collect();
        let (Some(mid), Some(closest)) = (
            median(&others),
            others.iter().copied().max_by(f64::total_cmp),
        ) else {
            return;
        };
        let readings: Vec<String> = measured
            .iter()
            .map(|(k, v)| format!("without {} {v:.2}", topo.host(*k)))
            .collect();
        let readings = format!(
            "the job without each node in turn ({rounds}): {} GB/s",
            readings.join(", ")
        );
        let held = format!(
            "every group holding {} ran at {} of the one without it",
            topo.host(best),
            span(&others)
        );
        if mid < 1.0 - cx.th.min_drop && closest < cx.th.clean_ratio() {
            c.verdicts.push(Verdict {
                culprit: Culprit::Node { node: best },
                state: State::Slow,
                ratio: Some(mid),
                below_min: false,
                evidence: format!("{head}larger groups: {readings}: {held}"),
                rounds: self.rounds.clone(),
            });
        } else {
            c.notes.push(format!(
                "larger groups: {readings}: no node's absence made the job clearly faster \
                 ({held}; {:.0} % needed), not named",
                cx.th.min_drop * 100.0
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::RoundRecord;
    use crate::seam::GroupOutcome;
    use crate::stats::Thresholds;

    /// Runs the job without each node, reading `busbw[k]` for the group without node k
    /// (`None`: the group hung), and concludes.
    fn run(busbw: &[Option<f64>]) -> (Conclusion, Vec<Round>) {
        let topo = Topology::uniform(busbw.len(), 1);
        let th = Thresholds::default();
        let mut lo = LeaveOut::new(&topo).expect("4 or 5 nodes");
        let mut history: Vec<RoundRecord> = Vec::new();
        loop {
            let cx = Context {
                topo: &topo,
                history: &history,
                th: &th,
            };
            let Some(round) = lo.next_round(&cx) else {
                break;
            };
            let Subject::AllBut(k) = round.groups[0].subject else {
                panic!("{round:?}");
            };
            let outcome = busbw[k].map_or(GroupOutcome::Hung, |busbw| GroupOutcome::Measured {
                busbw,
                time_us: 1.0,
            });
            history.push(RoundRecord {
                round,
                outcomes: vec![outcome],
                judged: Vec::new(),
                wall_s: 0.1,
            });
        }
        let cx = Context {
            topo: &topo,
            history: &history,
            th: &th,
        };
        let mut c = Conclusion::default();
        lo.conclude(&cx, None, &mut c);
        (c, history.into_iter().map(|r| r.round).collect())
    }

    #[test]
    fn only_small_jobs_leave_one_node_out() {
        assert!(LeaveOut::new(&Topology::uniform(3, 8)).is_none());
        assert!(LeaveOut::new(&Topology::uniform(6, 1)).is_none());
        let (_, rounds) = run(&[Some(1.0); 5]);
        assert_eq!(rounds.len(), 5);
        for (k, r) in rounds.iter().enumerate() {
            assert_eq!(r.groups.len(), 1);
            assert_eq!(r.groups[0].ranks.len(), 4);
            assert!(!r.groups[0].ranks.contains(&k), "{r:?}");
        }
    }

    #[test]
    fn the_node_whose_absence_makes_the_job_fast_is_named() {
        let (c, _) = run(&[Some(0.60), Some(0.95), Some(0.62), Some(0.58)]);
        assert_eq!(c.verdicts.len(), 1, "{c:?}");
        let v = &c.verdicts[0];
        assert_eq!(v.culprit, Culprit::Node { node: 1 });
        assert!((v.ratio.unwrap() - 0.60 / 0.95).abs() < 1e-9);
        assert!(
            v.evidence.contains("without node002 0.95")
                && v.evidence
                    .contains("every group holding node002 ran at 0.61-0.65x"),
            "{}",
            v.evidence
        );
        assert_eq!(v.rounds, vec![1, 2, 3, 4]);
    }

    #[test]
    fn borderline_or_missing_readings_name_nobody() {
        // The job without node004 ran within the clear margin of the best: nobody.
        let (c, _) = run(&[Some(0.70), Some(0.95), Some(0.75), Some(0.90)]);
        assert!(c.verdicts.is_empty(), "{c:?}");
        assert!(
            c.notes[0].contains("no node's absence made the job clearly faster"),
            "{c:?}"
        );
        // All alike: nobody.
        let (c, _) = run(&[Some(0.5); 4]);
        assert!(c.verdicts.is_empty() && c.notes.len() == 1, "{c:?}");
        // A group that did not finish: the readings are incomplete, nobody is named.
        let (c, _) = run(&[Some(0.60), Some(0.95), None, Some(0.58)]);
        assert!(c.verdicts.is_empty(), "{c:?}");
        assert!(c.notes[0].contains("without node003 not measured"), "{c:?}");
    }
}
