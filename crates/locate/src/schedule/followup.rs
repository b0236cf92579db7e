//! What the pair schedules do after their pairs: every slow node is bisected against
//! known-good partners (naming its GPUs, or the whole node when every part of it is slow), and
//! every suspect link is re-tested ([`LinkCheck`]), sharing the same rounds.

use super::super::bisect::{Bisector, Job};
use super::super::domains::WithPartner;
use super::super::history::RoundRecord;
use super::super::judge::Judgement;
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject};
use super::super::topology::Topology;
use super::Conclusion;
use super::link_check::{LinkCheck, LinkSuspect};

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

/// Bisection of slow nodes and re-tests of suspect links, sharing rounds.
#[derive(Debug, Clone)]
pub struct Followup {
    good: Vec<usize>,
    bisector: Bisector,
    links: Vec<LinkCheck>,
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
            links: links.into_iter().map(LinkCheck::new).collect(),
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
        for l in &mut self.links {
            retests += usize::from(l.plan_retest(topo, &mut b));
        }
        for l in &mut self.links {
            l.plan_ends(&self.good, topo, index, &mut b);
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
        for l in &mut self.links {
            l.absorb(rec);
        }
    }

    /// Verdicts on nodes and links; links healthy when re-tested become notes.
    pub fn conclude(&self, cx: &super::Context) -> Conclusion {
        let topo = cx.topo;
        let domain = WithPartner {
            topo,
            good_nodes: &self.good,
        };
        let mut c = Conclusion {
            verdicts: self.bisector.verdicts(&domain),
            notes: self.bisector.notes(&domain),
        };
        for check in &self.links {
            match check.conclude(cx) {
                Ok(v) => c.verdicts.push(v),
                Err(note) => c.notes.push(note),
            }
        }
        c
    }
}
