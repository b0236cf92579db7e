//! `rails`: every rail at once (GPU *i* of every node: the NICs and switches of rail *i*),
//! judged against the median rail; each slow rail is then bisected along its nodes, each half
//! beside the same nodes on a known-good rail (so a slow node, slow on every rail, is not taken
//! for a rail). When every rail is slow or hung the fault is common to all of them (a node or
//! a link): no rail is named and a note says to run pairs. Needs two or more nodes.

use super::super::bisect::{Bisector, Job, result_word};
use super::super::domains::AlongRail;
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject};
use super::super::topology::Topology;
use super::{Conclusion, Context, Schedule};
use crate::locate::judge::State;

/// The `rails` schedule's state.
#[derive(Debug, Clone, Default)]
pub struct PerRail {
    started: bool,
    absorbed: usize,
    good: Vec<usize>,
    bisector: Bisector,
    notes: Vec<String>,
}

impl PerRail {
    /// A `rails` schedule for `topo`.
    pub fn new(_topo: &Topology) -> PerRail {
        PerRail::default()
    }

    fn absorb(&mut self, cx: &Context) {
        let topo = cx.topo;
        for rec in cx.history.get(self.absorbed..).unwrap_or_default() {
            if rec.round.phase != Phase::Rails {
                let domain = AlongRail {
                    topo,
                    good_rails: &self.good,
                };
                self.bisector.absorb(&domain, rec);
                continue;
            }
            let judged: Vec<(usize, &crate::locate::judge::Judgement)> = rec
                .round
                .groups
                .iter()
                .zip(&rec.judged)
                .filter_map(|(g, j)| match g.subject {
                    Subject::Rail(i) => Some((i, j)),
                    _ => None,
                })
                .collect();
            if judged.len() >= 2 && judged.iter().all(|(_, j)| j.state.is_bad()) {
                self.notes.push(
                    "every rail is slow or hung: the fault is common to all rails (a node or a \
                     link), not named here; run the quick or full schedule"
                        .into(),
                );
                continue;
            }
            if judged.iter().any(|(_, j)| j.state == State::Unjudged) {
                self.notes.push(
                    "a lone rail has no other rail to be compared with: set --min-busbw to \
                     judge it"
                        .into(),
                );
            }
            for (rail, j) in judged {
                if j.state == State::Ok {
                    self.good.push(rail);
                } else if j.state.is_bad() {
                    let mut why = format!(
                        "rail {rail} {} of the median rail in round {}",
                        result_word(Some(j)),
                        rec.round.index
                    );
                    if let Some(r) = j.reference {
                        why += &format!(" ({:.1} GB/s)", r.value);
                    }
                    if j.below_min {
                        why += ", below --min-busbw";
                    }
                    let nodes = (0..topo.nodes())
                        .filter(|&n| topo.rank(n, rail).is_some())
                        .collect();
                    self.bisector
                        .jobs
                        .push(Job::new(rail, nodes, j, why, rec.round.index));
                }
            }
        }
        self.absorbed = cx.history.len();
    }
}

impl Schedule for PerRail {
    fn next_round(&mut self, cx: &Context) -> Option<Round> {
        self.absorb(cx);
        let topo = cx.topo;
        if !self.started {
            self.started = true;
            let mut b = RoundBuilder::new(topo.world(), Phase::Rails);
            for rail in 0..topo.rails() {
                let ranks = (0..topo.nodes())
                    .filter_map(|n| topo.rank(n, rail))
                    .collect();
                b.add(ranks, Subject::Rail(rail), Role::Primary);
            }
            if b.is_empty() {
                self.notes
                    .push("the rails schedule needs two or more nodes: this job has one".into());
            }
            return b.finish(cx.next_index());
        }
        let mut b = RoundBuilder::new(topo.world(), Phase::Bisect);
        let domain = AlongRail {
            topo,
            good_rails: &self.good,
        };
        self.bisector.plan(&domain, &mut b);
        b.finish(cx.next_index())
    }

    fn conclude(&self, cx: &Context) -> Conclusion {
        let domain = AlongRail {
            topo: cx.topo,
            good_rails: &self.good,
        };
        let mut notes = self.notes.clone();
        notes.extend(self.bisector.notes(&domain));
        Conclusion {
            verdicts: self.bisector.verdicts(&domain),
            notes,
        }
    }
}
