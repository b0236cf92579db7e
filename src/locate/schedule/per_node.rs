//! `nodes`: every node on its own at once (all its GPUs: NVLink and PCIe inside the node),
//! judged against the median node; each slow node is then bisected to its GPUs, each half
//! beside the same GPUs of a known-good node. Needs two or more GPUs per node.

use super::super::bisect::{Bisector, Job, result_word};
use super::super::domains::InNode;
use super::super::judge::State;
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject};
use super::super::topology::Topology;
use super::{Conclusion, Context, Schedule};

/// The `nodes` schedule's state.
#[derive(Debug, Clone, Default)]
pub struct PerNode {
    started: bool,
    absorbed: usize,
    good: Vec<usize>,
    bisector: Bisector,
    notes: Vec<String>,
}

impl PerNode {
    /// A `nodes` schedule for `topo`.
    pub fn new(_topo: &Topology) -> PerNode {
        PerNode::default()
    }

    fn absorb(&mut self, cx: &Context) {
        let topo = cx.topo;
        for rec in cx.history.get(self.absorbed..).unwrap_or_default() {
            if rec.round.phase != Phase::Nodes {
                let domain = InNode {
                    topo,
                    good_nodes: &self.good,
                };
                self.bisector.absorb(&domain, rec);
                continue;
            }
            let mut unjudged = 0;
            for (g, group) in rec.round.groups.iter().enumerate() {
                let (Subject::Node(n), Some(j)) = (&group.subject, rec.judgement(g)) else {
                    continue;
                };
                match j.state {
                    State::Ok => self.good.push(*n),
                    State::Unjudged => unjudged += 1,
                    _ => {
                        let mut why = format!(
                            "{} {} of the median node in round {}",
                            topo.host(*n),
                            result_word(Some(j)),
                            rec.round.index
                        );
                        if let Some(r) = j.reference {
                            why += &format!(" ({:.1} GB/s)", r.value);
                        }
                        if j.below_min {
                            why += ", below --min-busbw";
                        }
                        let gpus = (0..topo.gpus_on(*n)).collect();
                        self.bisector
                            .jobs
                            .push(Job::new(*n, gpus, j, why, rec.round.index));
                    }
                }
            }
            if unjudged > 0 {
                self.notes.push(
                    "a lone node has no other node to be compared with: set --min-busbw to \
                     judge it"
                        .into(),
                );
            }
        }
        self.absorbed = cx.history.len();
    }
}

impl Schedule for PerNode {
    fn next_round(&mut self, cx: &Context) -> Option<Round> {
        self.absorb(cx);
        let topo = cx.topo;
        if !self.started {
            self.started = true;
            let mut b = RoundBuilder::new(topo.world(), Phase::Nodes);
            for n in 0..topo.nodes() {
                b.add(topo.ranks_of(n), Subject::Node(n), Role::Primary);
            }
            if b.is_empty() {
                self.notes.push(
                    "the nodes schedule needs two or more GPUs per node: no node has them".into(),
                );
            }
            return b.finish(cx.next_index());
        }
        let mut b = RoundBuilder::new(topo.world(), Phase::Bisect);
        let domain = InNode {
            topo,
            good_nodes: &self.good,
        };
        self.bisector.plan(&domain, &mut b);
        b.finish(cx.next_index())
    }

    fn conclude(&self, cx: &Context) -> Conclusion {
        let domain = InNode {
            topo: cx.topo,
            good_nodes: &self.good,
        };
        let mut notes = self.notes.clone();
        notes.extend(self.bisector.notes(&domain));
        Conclusion {
            verdicts: self.bisector.verdicts(&domain),
            notes,
        }
    }
}
