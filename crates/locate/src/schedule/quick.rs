//! `quick`: one random perfect matching of the nodes (seeded), then every node of a slow pair
//! (and the node that sat out, for odd counts) re-paired with a known-good node: a suspect slow
//! again is a slow node, a slow pair whose nodes are both fine again is a suspect link. Then
//! the follow-up: slow nodes bisected against known-good partners, links re-tested.
//!
//! Quick sees every node fault in about `2 + log2(GPUs per node)` rounds whatever the number of
//! nodes, but a link only when the matching happens to pair its nodes. Its first round is
//! judged against the median pair, so fewer than half of the pairs may be slow: with fewer
//! than eight nodes (three pairs or less) two slow nodes already break that, and quick runs
//! `full` instead (at most 7 pair rounds).

use super::super::judge::{Judgement, State};
use super::super::rng::Rng;
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject};
use super::super::topology::Topology;
use super::super::verdict::{Culprit, Verdict};
use super::followup::{Followup, NodeSuspect};
use super::full::Full;
use super::link_check::{LinkSuspect, node_or_link};
use super::{Conclusion, Context, Schedule};
use crate::bisect::result_word;

/// Below this many nodes quick runs full.
const MIN_NODES: usize = 8;

/// A node of a slow pair (or the one that sat out), with what its re-pairing showed.
#[derive(Debug, Clone)]
struct Suspect {
    node: usize,
    /// The round-1 partner (`None` for the node that sat out).
    first_partner: Option<usize>,
    /// Round and group of its re-pairing, once planned.
    repair: Option<(usize, usize)>,
    /// Its re-pairing's judgement and description.
    result: Option<(Judgement, String)>,
}

#[derive(Debug, Clone)]
enum Stage {
    Match,
    Repair,
    Follow(Box<Followup>),
    /// No pair of the matching was healthy.
    Done,
}

/// The `quick` schedule's state.
#[derive(Debug, Clone)]
pub struct Quick {
    seed: u64,
    stage: Stage,
    absorbed: usize,
    /// Round-1 pairs: (a, b, round, group).
    matching: Vec<(usize, usize, usize, usize)>,
    good: Vec<usize>,
    suspects: Vec<Suspect>,
    fallback: Option<Full>,
}

impl Quick {
    /// A `quick` schedule for `topo` whose matching is drawn from `seed`.
    pub fn new(topo: &Topology, seed: u64) -> Quick {
        Quick {
            seed,
            stage: Stage::Match,
            absorbed: 0,
            matching: Vec::new(),
            good: Vec::new(),
            suspects: Vec::new(),
            fallback: (topo.nodes() < MIN_NODES).then(|| Full::new(topo)),
        }
    }

    fn absorb(&mut self, cx: &Context) {
        for rec in cx.history.get(self.absorbed..).unwrap_or_default() {
            match rec.round.phase {
                Phase::Pairs => self.after_matching(cx, rec),
                Phase::Repair => {
                    for s in &mut self.suspects {
                        if let Some((round, g)) = s.repair
                            && round == rec.round.index
                            && let Some(j) = rec.judgement(g)
                        {
                            let subject = rec
                                .round
                                .groups
                                .get(g)
                                .map(|g| g.subject.describe(cx.topo))
                                .unwrap_or_default();
                            let text =
                                format!("{subject} {} in round {round}", result_word(Some(j)));
                            s.result = Some((*j, text));
                        }
                    }
                }
                _ => {
                    if let Stage::Follow(f) = &mut self.stage {
                        f.absorb(cx.topo, rec);
                    }
                }
            }
        }
        self.absorbed = cx.history.len();
    }

    fn after_matching(&mut self, cx: &Context, rec: &super::super::history::RoundRecord) {
        let mut paired = vec![false; cx.topo.nodes()];
        for (g, group) in rec.round.groups.iter().enumerate() {
            let Subject::Pair(a, b) = group.subject else {
                continue;
            };
            paired[a] = true;
            paired[b] = true;
            self.matching.push((a, b, rec.round.index, g));
            // A pair that completed without a reference (a lone measured pair beside hung
            // ones) counts as healthy: the hang is the anomaly.
            if rec.judgement(g).is_some_and(|j| !j.state.is_bad()) {
                self.good.extend([a, b]);
            } else {
                for (x, y) in [(a, b), (b, a)] {
                    self.suspects.push(Suspect {
                        node: x,
                        first_partner: Some(y),
                        repair: None,
                        result: None,
                    });
                }
            }
        }
        for (x, _) in paired.iter().enumerate().filter(|(_, p)| !**p) {
            self.suspects.push(Suspect {
                node: x,
                first_partner: None,
                repair: None,
                result: None,
            });
        }
        self.stage = if self.good.is_empty() {
            Stage::Done
        } else {
            Stage::Repair
        };
    }

    fn matching_round(&self, cx: &Context) -> Option<Round> {
        let mut order: Vec<usize> = (0..cx.topo.nodes()).collect();
        Rng::new(self.seed).shuffle(&mut order);
        let mut b = RoundBuilder::new(cx.topo.world(), Phase::Pairs);
        for pair in order.chunks_exact(2) {
            let (x, y) = (pair[0].min(pair[1]), pair[0].max(pair[1]));
            let ranks = [cx.topo.ranks_of(x), cx.topo.ranks_of(y)].concat();
            b.add(ranks, Subject::Pair(x, y), Role::Primary);
        }
        b.finish(cx.next_index())
    }

    /// Pairs every suspect not yet re-paired with a free known-good node, plus up to two
    /// control pairs of known-good nodes.
    fn repair_round(&mut self, cx: &Context) -> Option<Round> {
        let topo = cx.topo;
        let index = cx.next_index();
        let mut b = RoundBuilder::new(topo.world(), Phase::Repair);
        for s in self.suspects.iter_mut().filter(|s| s.repair.is_none()) {
            let start = s.node % self.good.len();
            let partner = self.good[start..]
                .iter()
                .chain(&self.good[..start])
                .copied()
                .find(|&g| b.free(&topo.ranks_of(g)) && b.free(&topo.ranks_of(s.node)));
            if let Some(g) = partner {
                let ranks = [topo.ranks_of(s.node), topo.ranks_of(g)].concat();
                let (x, y) = (s.node.min(g), s.node.max(g));
                if let Some(i) = b.add(ranks, Subject::Pair(x, y), Role::Probe) {
                    s.repair = Some((index, i));
                }
            }
        }
        let spare: Vec<usize> = self
            .good
            .iter()
            .copied()
            .filter(|&g| b.free(&topo.ranks_of(g)))
            .take(4)
            .collect();
        for c in spare.chunks_exact(2) {
            let ranks = [topo.ranks_of(c[0]), topo.ranks_of(c[1])].concat();
            b.add(
                ranks,
                Subject::Pair(c[0].min(c[1]), c[0].max(c[1])),
                Role::Control,
            );
        }
        b.finish(index)
    }

    /// After the re-pairing: suspects slow again are nodes; slow pairs whose nodes are both
    /// fine again are links.
    fn followup(&self, cx: &Context) -> Followup {
        let topo = cx.topo;
        let bad = |s: &Suspect| s.result.as_ref().is_none_or(|(j, _)| j.state.is_bad());
        let first = |a: usize, b: usize| {
            self.matching
                .iter()
                .find(|m| (m.0, m.1) == (a.min(b), a.max(b)))
                .and_then(|&(_, _, round, g)| {
                    let rec = cx.history.get(round.checked_sub(1)?)?;
                    Some((
                        rec.judgement(g).copied()?,
                        round,
                        result_word(rec.judgement(g)),
                    ))
                })
        };
        let mut nodes = Vec::new();
        let mut links = Vec::new();
        let mut good = self.good.clone();
        for s in &self.suspects {
            let repaired = s
                .result
                .as_ref()
                .map_or("not re-paired".into(), |r| r.1.clone());
            let opening = match s
                .first_partner
                .and_then(|p| first(s.node, p).map(|f| (p, f)))
            {
                Some((p, (_, round, word))) => format!(
                    "{}+{} {word} in round {round}",
                    topo.host(s.node.min(p)),
                    topo.host(s.node.max(p))
                ),
                None => format!("{} sat out round 1", topo.host(s.node)),
            };
            if bad(s) {
                let origin = s.result.as_ref().map(|r| r.0).unwrap_or(Judgement {
                    state: State::Error,
                    reference: None,
                    ratio: None,
                    below_min: false,
                });
                nodes.push(NodeSuspect {
                    node: s.node,
                    origin,
                    why: format!("{opening}; with a known-good node: {repaired}"),
                    round: s.repair.map_or(1, |r| r.0),
                });
            } else {
                good.push(s.node);
            }
        }
        for &(a, b, round, _) in &self.matching {
            let cleared = |x: usize| {
                self.suspects
                    .iter()
                    .any(|s| s.node == x && s.first_partner.is_some() && !bad(s))
            };
            if cleared(a)
                && cleared(b)
                && let Some((origin, _, word)) = first(a, b)
            {
                let again = |x: usize| {
                    self.suspects
                        .iter()
                        .find(|s| s.node == x)
                        .and_then(|s| s.result.as_ref().map(|r| r.1.clone()))
                        .unwrap_or_default()
                };
                let reading = |x: usize| {
                    self.suspects
                        .iter()
                        .find(|s| s.node == x && s.first_partner.is_some())
                        .and_then(|s| s.result.as_ref()?.0.ratio)
                };
                let (culprit, margin) = node_or_link(cx, (a, reading(a)), (b, reading(b)));
                links.push(LinkSuspect {
                    culprit,
                    nodes: (a, b),
                    origin,
                    why: format!(
                        "{}+{} {word} in round {round}; each fine with a known-good node: {}, \
                         {}{margin}",
                        topo.host(a),
                        topo.host(b),
                        again(a),
                        again(b)
                    ),
                    round,
                });
            }
        }
        Followup::new(topo, nodes, links, good)
    }
}

impl Schedule for Quick {
    fn references(&self) -> Vec<(crate::judge::Shape, f64)> {
        self.fallback
            .as_ref()
            .map(Schedule::references)
            .unwrap_or_default()
    }

    fn next_round(&mut self, cx: &Context) -> Option<Round> {
        if let Some(full) = &mut self.fallback {
            return full.next_round(cx);
        }
        self.absorb(cx);
        loop {
            match &mut self.stage {
                Stage::Match => return self.matching_round(cx),
                Stage::Repair => {
                    if self.suspects.iter().any(|s| s.repair.is_none())
                        && let Some(r) = self.repair_round(cx)
                    {
                        return Some(r);
                    }
                    let pending = self
                        .suspects
                        .iter()
                        .any(|s| s.repair.is_some() && s.result.is_none());
                    if pending {
                        return None;
                    }
                    self.stage = Stage::Follow(Box::new(self.followup(cx)));
                }
                Stage::Follow(f) => return f.plan(cx.topo, cx.next_index()),
                Stage::Done => return None,
            }
        }
    }

    fn conclude(&self, cx: &Context) -> Conclusion {
        if let Some(full) = &self.fallback {
            let mut c = full.conclude(cx);
            c.notes.insert(
                0,
                format!("quick needs {MIN_NODES} or more nodes: ran full instead"),
            );
            return c;
        }
        if let Stage::Follow(f) = &self.stage {
            return f.conclude(cx);
        }
        // Stopped before the re-pairing finished, or no pair was healthy: each slow pair is
        // named as a pair, which is as far as the rounds go.
        let mut c = Conclusion::default();
        for &(a, b, round, g) in &self.matching {
            let rec = round.checked_sub(1).and_then(|i| cx.history.get(i));
            let Some(j) = rec.and_then(|r| r.judgement(g)) else {
                continue;
            };
            if j.state.is_bad() {
                c.verdicts.push(Verdict {
                    culprit: Culprit::pair(a, b),
                    state: j.state,
                    ratio: j.ratio,
                    below_min: j.below_min,
                    evidence: format!(
                        "{}+{} {} in round {round}; not re-paired",
                        cx.topo.host(a),
                        cx.topo.host(b),
                        result_word(Some(j))
                    ),
                    rounds: vec![round],
                });
            }
        }
        if self.good.is_empty() && !self.matching.is_empty() {
            c.notes.push(
                "no pair of the matching was healthy: no known-good node to compare with \
                 (run full, or set --locate-min-busbw)"
                    .into(),
            );
        }
        c
    }
}
