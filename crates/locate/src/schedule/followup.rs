//! What the pair schedules do after their pairs: every slow node is bisected against
//! known-good partners (naming its GPUs, or the whole node when every part of it is slow), and
//! every suspect link is run once more and named only when slow again.

use super::super::bisect::{Bisector, Job, result_word};
use super::super::domains::WithPartner;
use super::super::history::RoundRecord;
use super::super::judge::Judgement;
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject};
use super::super::topology::Topology;
use super::super::verdict::{Culprit, Verdict};
use super::Conclusion;

/// A node the pairs point at.
#[derive(Debug, Clone)]
pub struct NodeSuspect {
    /// The node.
    pub node: usize,
    /// How it looked.
    pub origin: Judgement,
    /// Why it is suspected.
    pub why: String,
    /// The round that showed it.
    pub round: usize,
}

/// A pair of nodes slow together while each is fine with others.
#[derive(Debug, Clone)]
pub struct LinkSuspect {
    /// What to name if confirmed: a link, or a pair when nothing tells the nodes apart.
    pub culprit: Culprit,
    /// The nodes.
    pub nodes: (usize, usize),
    /// How it looked.
    pub origin: Judgement,
    /// Why it is suspected.
    pub why: String,
    /// The round that showed it.
    pub round: usize,
}

/// The link between `a` and `b` when both ends read clean with other partners (at least
/// [`Thresholds::clean_ratio`](crate::stats::Thresholds::clean_ratio)), else the end with the
/// lower reading or the link ([`Culprit::NodeOrLink`]); with the text that says why (empty
/// for a clean link). A reading is the end's ratio with other partners (`None`: not measured).
pub fn node_or_link(
    cx: &super::Context,
    (a, ra): (usize, Option<f64>),
    (b, rb): (usize, Option<f64>),
) -> (Culprit, String) {
    let clean = cx.th.clean_ratio();
    let low = |r: Option<f64>| r.unwrap_or(0.0);
    let (node, other, r) = if low(ra) <= low(rb) {
        (a, b, ra)
    } else {
        (b, a, rb)
    };
    if low(r) >= clean {
        return (Culprit::link(a, b), String::new());
    }
    let reading = r.map_or("not measured".into(), super::super::verdict::times);
    (
        Culprit::NodeOrLink { node, other },
        format!(
            "; {} with other partners {reading}, short of the clear margin ({}): the node or \
             the link",
            cx.topo.host(node),
            super::super::verdict::times(clean)
        ),
    )
}

#[derive(Debug, Clone, PartialEq)]
enum LinkStep {
    Pending,
    Waiting(usize),
    Done {
        again: Judgement,
        round: usize,
        word: String,
    },
}

/// Bisection of slow nodes and re-tests of suspect links, sharing rounds.
#[derive(Debug, Clone)]
pub struct Followup {
    good: Vec<usize>,
    bisector: Bisector,
    links: Vec<(LinkSuspect, LinkStep)>,
}

impl Followup {
    /// Follow-up of `nodes` and `links`, with `good` nodes as partners and controls.
    pub fn new(
        topo: &Topology,
        nodes: Vec<NodeSuspect>,
        links: Vec<LinkSuspect>,
        mut good: Vec<usize>,
    ) -> Followup {
        good.sort_unstable();
        good.dedup();
        let jobs = nodes
            .into_iter()
            .map(|s| {
                let gpus = (0..topo.gpus_on(s.node)).collect();
                Job::new(s.node, gpus, &s.origin, s.why, s.round)
            })
            .collect();
        Followup {
            good,
            bisector: Bisector { jobs },
            links: links.into_iter().map(|l| (l, LinkStep::Pending)).collect(),
        }
    }

    /// The next round (numbered `index`), or `None` when nothing remains.
    pub fn plan(&mut self, topo: &Topology, index: usize) -> Option<Round> {
        let mut b = RoundBuilder::new(topo.world(), Phase::Bisect);
        let domain = WithPartner {
            topo,
            good_nodes: &self.good,
        };
        self.bisector.plan(&domain, &mut b);
        let mut retests = 0;
        for (l, step) in &mut self.links {
            if *step == LinkStep::Pending {
                let (x, y) = l.nodes;
                let ranks = [topo.ranks_of(x), topo.ranks_of(y)].concat();
                if let Some(i) = b.add(ranks, Subject::Pair(x, y), Role::Probe) {
                    *step = LinkStep::Waiting(i);
                    retests += 1;
                }
            }
        }
        if retests > 0 {
            // One control pair of known-good nodes: the re-tests' reference in this round.
            let free: Vec<usize> = self
                .good
                .iter()
                .copied()
                .filter(|&n| b.free(&topo.ranks_of(n)))
                .take(2)
                .collect();
            if let [q, r] = free[..] {
                b.add(
                    [topo.ranks_of(q), topo.ranks_of(r)].concat(),
                    Subject::Pair(q, r),
                    Role::Control,
                );
            }
        }
        b.finish(index)
    }

    /// Takes in a round this follow-up planned.
    pub fn absorb(&mut self, topo: &Topology, rec: &RoundRecord) {
        let domain = WithPartner {
            topo,
            good_nodes: &self.good,
        };
        self.bisector.absorb(&domain, rec);
        for (_, step) in &mut self.links {
            if let LinkStep::Waiting(i) = *step
                && let Some(j) = rec.judgement(i)
            {
                *step = LinkStep::Done {
                    again: *j,
                    round: rec.round.index,
                    word: result_word(Some(j)),
                };
            }
        }
    }

    /// Verdicts on nodes and links; links healthy when re-tested become notes.
    pub fn conclude(&self, topo: &Topology) -> Conclusion {
        let domain = WithPartner {
            topo,
            good_nodes: &self.good,
        };
        let mut c = Conclusion {
            verdicts: self.bisector.verdicts(&domain),
            notes: self.bisector.notes(&domain),
        };
        for (l, step) in &self.links {
            let verdict = |state, ratio, evidence: String, rounds: Vec<usize>| Verdict {
                culprit: l.culprit.clone(),
                state,
                ratio,
                below_min: l.origin.below_min,
                evidence,
                rounds,
            };
            match step {
                LinkStep::Done { again, round, word } if again.state.is_bad() => {
                    c.verdicts.push(verdict(
                        l.origin.state.worst(again.state),
                        again.ratio.or(l.origin.ratio),
                        format!("{}; again in round {round}: {word}", l.why),
                        vec![l.round, *round],
                    ))
                }
                LinkStep::Done { round, word, .. } => c.notes.push(format!(
                    "not reproduced, not named: {} ({}; again in round {round}: {word})",
                    l.culprit.describe(topo),
                    l.why
                )),
                _ => c.verdicts.push(verdict(
                    l.origin.state,
                    l.origin.ratio,
                    format!("{}; not re-tested (the run ended)", l.why),
                    vec![l.round],
                )),
            }
        }
        c
    }
}
