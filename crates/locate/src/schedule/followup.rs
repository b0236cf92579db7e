//! What the pair schedules do after their pairs: every slow node is bisected against
//! known-good partners (naming its GPUs, or the whole node when every part of it is slow), and
//! every suspect link is run once more and named only when slow again. A link slow again whose
//! ends both read clean with other partners has each end re-paired once more with a known-good
//! node: a periodic stall can miss one short window, and an end short of the clear margin the
//! second time turns the verdict into "the node or the link".

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

/// One end of a confirmed link, re-paired once more with a known-good node.
#[derive(Debug, Clone, PartialEq)]
enum EndStep {
    /// Not planned yet.
    Pending,
    /// Planned: the partner, the round and the group.
    Waiting(usize, usize, usize),
    /// Read: the partner, the round and what the pair showed (`None`: no judgement).
    Read(usize, usize, Option<Judgement>),
    /// No known-good node other than the link's ends: not re-paired.
    NoPartner,
}

/// A suspect link and how far its re-tests went.
#[derive(Debug, Clone)]
struct LinkCheck {
    suspect: LinkSuspect,
    step: LinkStep,
    /// Both ends' second re-pairings, once the link was slow again with both ends clean.
    ends: [EndStep; 2],
}

impl LinkCheck {
    /// Whether the link was slow again while both ends were clean: the case that re-pairs
    /// its ends once more.
    fn wants_ends(&self) -> bool {
        matches!(self.suspect.culprit, Culprit::Link { .. })
            && matches!(&self.step, LinkStep::Done { again, .. } if again.state.is_bad())
    }
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
            links: links
                .into_iter()
                .map(|suspect| LinkCheck {
                    suspect,
                    step: LinkStep::Pending,
                    ends: [EndStep::Pending, EndStep::Pending],
                })
                .collect(),
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
            if l.step == LinkStep::Pending {
                let (x, y) = l.suspect.nodes;
                let ranks = [topo.ranks_of(x), topo.ranks_of(y)].concat();
                if let Some(i) = b.add(ranks, Subject::Pair(x, y), Role::Probe) {
                    l.step = LinkStep::Waiting(i);
                    retests += 1;
                }
            }
        }
        for l in &mut self.links {
            if l.wants_ends() {
                plan_ends(l, &self.good, topo, index, &mut b);
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
        for l in &mut self.links {
            if let LinkStep::Waiting(i) = l.step
                && let Some(j) = rec.judgement(i)
            {
                l.step = LinkStep::Done {
                    again: *j,
                    round: rec.round.index,
                    word: result_word(Some(j)),
                };
            }
            for end in &mut l.ends {
                if let EndStep::Waiting(partner, round, g) = *end
                    && round == rec.round.index
                {
                    *end = EndStep::Read(partner, round, rec.judgement(g).copied());
                }
            }
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
            let l = &check.suspect;
            let verdict = |culprit: Culprit, state, ratio, evidence: String, rounds| Verdict {
                culprit,
                state,
                ratio,
                below_min: l.origin.below_min,
                evidence,
                rounds,
            };
            match &check.step {
                LinkStep::Done { again, round, word } if again.state.is_bad() => {
                    let mut rounds = vec![l.round, *round];
                    let (culprit, ends) = ends_verdict(cx, check, &mut rounds);
                    c.verdicts.push(verdict(
                        culprit,
                        l.origin.state.worst(again.state),
                        again.ratio.or(l.origin.ratio),
                        format!("{}; again in round {round}: {word}{ends}", l.why),
                        rounds,
                    ))
                }
                LinkStep::Done { round, word, .. } => c.notes.push(format!(
                    "not reproduced, not named: {} ({}; again in round {round}: {word})",
                    l.culprit.describe(topo),
                    l.why
                )),
                _ => c.verdicts.push(verdict(
                    l.culprit.clone(),
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

/// Plans the second re-pairing of a confirmed link's ends, each with a known-good node other
/// than the ends, where one is free in this round.
fn plan_ends(
    l: &mut LinkCheck,
    good: &[usize],
    topo: &Topology,
    index: usize,
    b: &mut RoundBuilder,
) {
    let (x, y) = l.suspect.nodes;
    for (k, end) in [x, y].into_iter().enumerate() {
        if l.ends[k] != EndStep::Pending {
            continue;
        }
        let mut partners = good
            .iter()
            .copied()
            .filter(|&p| p != x && p != y)
            .peekable();
        if partners.peek().is_none() {
            l.ends[k] = EndStep::NoPartner;
            continue;
        }
        let ends_free = b.free(&topo.ranks_of(end));
        let partner = partners.find(|&p| ends_free && b.free(&topo.ranks_of(p)));
        if let Some(p) = partner
            && let Some(g) = b.add(
                [topo.ranks_of(end), topo.ranks_of(p)].concat(),
                Subject::Pair(end, p),
                Role::Probe,
            )
        {
            l.ends[k] = EndStep::Waiting(p, index, g);
        }
    }
}

/// The culprit of a link slow again, decided on its ends' second re-pairings, and the text
/// that says what they read (empty when they did not run); their rounds go into `rounds`.
fn ends_verdict(
    cx: &super::Context,
    check: &LinkCheck,
    rounds: &mut Vec<usize>,
) -> (Culprit, String) {
    let l = &check.suspect;
    if !check.wants_ends() {
        return (l.culprit.clone(), String::new());
    }
    let (x, y) = l.nodes;
    let mut read = Vec::new();
    let mut missing = false;
    for (end, step) in [x, y].into_iter().zip(&check.ends) {
        match step {
            EndStep::Read(p, round, j) => {
                if !rounds.contains(round) {
                    rounds.push(*round);
                }
                read.push((end, *p, *round, *j));
            }
            EndStep::NoPartner => {}
            EndStep::Pending | EndStep::Waiting(..) => missing = true,
        }
    }
    if read.is_empty() {
        let why = if missing {
            "the run ended"
        } else {
            "no other known-good node"
        };
        return (
            l.culprit.clone(),
            format!("; ends not re-paired again ({why})"),
        );
    }
    let text: Vec<String> = read
        .iter()
        .map(|&(end, p, round, j)| {
            format!(
                "{}+{} {} in round {round}",
                cx.topo.host(end),
                cx.topo.host(p),
                result_word(j.as_ref())
            )
        })
        .collect();
    let reading = |node: usize| {
        read.iter()
            .find(|r| r.0 == node)
            .map(|r| r.3.and_then(|j| j.ratio))
    };
    // An end not re-paired again keeps its clean first reading.
    let clean = cx.th.clean_ratio();
    let (ra, rb) = (
        reading(x).unwrap_or(Some(clean)),
        reading(y).unwrap_or(Some(clean)),
    );
    let (culprit, margin) = node_or_link(cx, (x, ra), (y, rb));
    (
        culprit,
        format!(
            "; each end once more with a known-good node: {}{margin}",
            text.join(", ")
        ),
    )
}
