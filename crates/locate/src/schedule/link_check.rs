//! A suspect link's re-tests, after the pairs that showed it: run once more and named only
//! when slow again. A link slow again whose ends both read clean with other partners has each
//! end re-paired once more with a known-good node: a periodic stall can miss one short window,
//! and an end short of the clear margin the second time turns the verdict into "the node or the
//! link" ([`node_or_link`]).

use super::super::bisect::result_word;
use super::super::history::RoundRecord;
use super::super::judge::Judgement;
use super::super::round::{Role, RoundBuilder, Subject};
use super::super::topology::Topology;
use super::super::verdict::{Culprit, Verdict};

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
pub struct LinkCheck {
    suspect: LinkSuspect,
    step: LinkStep,
    /// Both ends' second re-pairings, once the link was slow again with both ends clean.
    ends: [EndStep; 2],
}

/// How far a link's re-test went.
#[derive(Debug, Clone, PartialEq)]
enum LinkStep {
    /// Not planned yet.
    Pending,
    /// Planned as this group of its round.
    Waiting(usize),
    /// Read: what it showed, in which round, and the word for it.
    Done {
        again: Judgement,
        round: usize,
        word: String,
    },
}

impl LinkCheck {
    /// The re-tests of `suspect`, none planned yet.
    pub fn new(suspect: LinkSuspect) -> LinkCheck {
        LinkCheck {
            suspect,
            step: LinkStep::Pending,
            ends: [EndStep::Pending, EndStep::Pending],
        }
    }

    /// Plans the link's re-test into `b` when it is due and its nodes are free; whether it
    /// was planned.
    pub fn plan_retest(&mut self, topo: &Topology, b: &mut RoundBuilder) -> bool {
        if self.step != LinkStep::Pending {
            return false;
        }
        let (x, y) = self.suspect.nodes;
        let ranks = [topo.ranks_of(x), topo.ranks_of(y)].concat();
        match b.add(ranks, Subject::Pair(x, y), Role::Probe) {
            Some(i) => {
                self.step = LinkStep::Waiting(i);
                true
            }
            None => false,
        }
    }

    /// Takes in a round: the re-test's judgement, the ends' second re-pairings.
    pub fn absorb(&mut self, rec: &RoundRecord) {
        if let LinkStep::Waiting(i) = self.step
            && let Some(j) = rec.judgement(i)
        {
            self.step = LinkStep::Done {
                again: *j,
                round: rec.round.index,
                word: result_word(Some(j)),
            };
        }
        for end in &mut self.ends {
            if let EndStep::Waiting(partner, round, g) = *end
                && round == rec.round.index
            {
                *end = EndStep::Read(partner, round, rec.judgement(g).copied());
            }
        }
    }

    /// Whether the link was slow again while both ends were clean: the case that re-pairs
    /// its ends once more.
    fn wants_ends(&self) -> bool {
        matches!(self.suspect.culprit, Culprit::Link { .. })
            && matches!(&self.step, LinkStep::Done { again, .. } if again.state.is_bad())
    }

    /// Plans the second re-pairing of a confirmed link's ends (a link slow again with both ends
    /// clean), each with a known-good node of `good` other than the ends, where one is free in
    /// round `index`.
    pub fn plan_ends(
        &mut self,
        good: &[usize],
        topo: &Topology,
        index: usize,
        b: &mut RoundBuilder,
    ) {
        if !self.wants_ends() {
            return;
        }
        let (x, y) = self.suspect.nodes;
        for (k, end) in [x, y].into_iter().enumerate() {
            if self.ends[k] != EndStep::Pending {
                continue;
            }
            let mut partners = good
                .iter()
                .copied()
                .filter(|&p| p != x && p != y)
                .peekable();
            if partners.peek().is_none() {
                self.ends[k] = EndStep::NoPartner;
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
                self.ends[k] = EndStep::Waiting(p, index, g);
            }
        }
    }

    /// The verdict on the link (`Ok`), or the note that it was not reproduced (`Err`).
    pub fn conclude(&self, cx: &super::Context) -> Result<Verdict, String> {
        let l = &self.suspect;
        let verdict = |culprit: Culprit, state, ratio, evidence: String, rounds| Verdict {
            culprit,
            state,
            ratio,
            below_min: l.origin.below_min,
            evidence,
            rounds,
        };
        match &self.step {
            LinkStep::Done { again, round, word } if again.state.is_bad() => {
                let mut rounds = vec![l.round, *round];
                let (culprit, ends) = ends_verdict(cx, self, &mut rounds);
                Ok(verdict(
                    culprit,
                    l.origin.state.worst(again.state),
                    again.ratio.or(l.origin.ratio),
                    format!("{}; again in round {round}: {word}{ends}", l.why),
                    rounds,
                ))
            }
            LinkStep::Done { round, word, .. } => Err(format!(
                "not reproduced, not named: {} ({}; again in round {round}: {word})",
                l.culprit.describe(cx.topo),
                l.why
            )),
            _ => Ok(verdict(
                l.culprit.clone(),
                l.origin.state,
                l.origin.ratio,
                format!("{}; not re-tested (the run ended)", l.why),
                vec![l.round],
            )),
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
