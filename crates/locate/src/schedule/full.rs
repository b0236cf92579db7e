//! `full`: every pair of nodes once (round-robin), then the pair matrix names slow nodes and
//! slow links; slow nodes are bisected against known-good partners and links re-tested.
//! A node that hangs with two partners sits out the remaining pair rounds (each hang costs a
//! deadline).

use super::super::judge::{Judgement, Shape, State, shape};
use super::super::matrix::{PairMatrix, analyse};
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject};
use super::super::stats::median;
use super::super::topology::Topology;
use super::super::verdict::{Culprit, span, times};
use super::followup::{Followup, NodeSuspect};
use super::link_check::{LinkSuspect, node_or_link};
use super::{Conclusion, Context, Schedule, round_robin};

/// The `full` schedule's state.
#[derive(Debug, Clone)]
pub struct Full {
    n: usize,
    next_pairs: usize,
    absorbed: usize,
    hung_with: Vec<Vec<usize>>,
    followup: Option<Followup>,
    /// The median pair without slow nodes, by the shape of a pair group.
    pair_ref: Option<(Shape, f64)>,
}

impl Full {
    /// A `full` schedule for `topo`.
    pub fn new(topo: &Topology) -> Full {
        Full {
            n: topo.nodes(),
            next_pairs: 0,
            absorbed: 0,
            hung_with: vec![Vec::new(); topo.nodes()],
            followup: None,
            pair_ref: None,
        }
    }

    fn quarantined(&self, node: usize) -> bool {
        self.hung_with.get(node).is_some_and(|v| v.len() >= 2)
    }

    fn absorb(&mut self, cx: &Context) {
        for rec in cx.history.get(self.absorbed..).unwrap_or_default() {
            if rec.round.phase == Phase::Pairs {
                for (g, j) in rec.round.groups.iter().zip(&rec.judged) {
                    if let (Subject::Pair(a, b), State::Hung) = (&g.subject, j.state) {
                        for (x, y) in [(*a, *b), (*b, *a)] {
                            if let Some(v) = self.hung_with.get_mut(x) {
                                v.push(y);
                            }
                        }
                    }
                }
            } else if let Some(f) = &mut self.followup {
                f.absorb(cx.topo, rec);
            }
        }
        self.absorbed = cx.history.len();
    }
}

impl Schedule for Full {
    fn next_round(&mut self, cx: &Context) -> Option<Round> {
        self.absorb(cx);
        while self.next_pairs < round_robin::rounds(self.n) {
            let r = self.next_pairs;
            self.next_pairs += 1;
            let mut b = RoundBuilder::new(cx.topo.world(), Phase::Pairs);
            for (x, y) in round_robin::pairs(self.n, r) {
                if !self.quarantined(x) && !self.quarantined(y) {
                    let ranks = [cx.topo.ranks_of(x), cx.topo.ranks_of(y)].concat();
                    b.add(ranks, Subject::Pair(x, y), Role::Primary);
                }
            }
            if let Some(round) = b.finish(cx.next_index()) {
                return Some(round);
            }
        }
        if self.followup.is_none() {
            let (nodes, links, good) = suspects(cx);
            self.followup = Some(Followup::new(cx.topo, nodes, links, good));
            let m = PairMatrix::from_history(self.n, cx.history);
            let first_pair = cx
                .history
                .iter()
                .filter(|r| r.round.phase == Phase::Pairs)
                .find_map(|r| r.round.groups.first());
            if let (Some(g), Some(r)) = (first_pair, analyse(&m, cx.th).pair_ref) {
                self.pair_ref = Some((shape(g, cx.topo), r.value));
            }
        }
        self.followup.as_mut()?.plan(cx.topo, cx.next_index())
    }

    fn references(&self) -> Vec<(Shape, f64)> {
        self.pair_ref.into_iter().collect()
    }

    fn conclude(&self, cx: &Context) -> Conclusion {
        let mut c = match &self.followup {
            Some(f) => f.conclude(cx),
            None => {
                let (nodes, links, good) = suspects(cx);
                Followup::new(cx.topo, nodes, links, good).conclude(cx)
            }
        };
        for (x, partners) in self.hung_with.iter().enumerate() {
            if partners.len() >= 2 {
                c.notes.push(format!(
                    "{} hung with {} partners: left out of the later pair rounds",
                    cx.topo.host(x),
                    partners.len()
                ));
            }
        }
        c
    }
}

/// What a set of pair rounds points at: slow nodes, suspect links (pairs slow while both nodes
/// are fine with others) and the nodes known good.
pub(super) fn suspects(cx: &Context) -> (Vec<NodeSuspect>, Vec<LinkSuspect>, Vec<usize>) {
    let (topo, history, th) = (cx.topo, cx.history, cx.th);
    let n = topo.nodes();
    let m = PairMatrix::from_history(n, history);
    let f = analyse(&m, th);
    let slow = f.slow_nodes();
    let reference = f.pair_ref.or(f.node_ref);
    let ratio = |v: f64| reference.map(|r| r.ratio(v));
    let ratios =
        |cells: &mut dyn Iterator<Item = f64>| -> Vec<f64> { cells.filter_map(ratio).collect() };
    // Pairs with no suspect at all: no slow node, not a suspect link.
    let innocent = |a: usize, b: usize| {
        !f.is_slow(a) && !f.is_slow(b) && !f.links.contains(&(a.min(b), a.max(b)))
    };
    let clean = ratios(
        &mut m
            .pairs()
            .filter(|(a, b, _)| innocent(*a, *b))
            .map(|(_, _, c)| c.value()),
    );
    let median_pair = reference.map_or(String::new(), |r| format!(" ({:.1} GB/s)", r.value));
    let without = if slow.len() == 1 { "it" } else { "a slow node" };
    let nodes = slow
        .iter()
        .filter_map(|&x| {
            let s = f.scores.get(x).copied().flatten()?;
            let cells: Vec<_> = m.partners(x).map(|(_, c)| *c).collect();
            let hung = cells.iter().filter(|c| c.state == State::Hung).count();
            let with = ratios(&mut cells.iter().map(|c| c.value()));
            let mut why = format!(
                "every pair with {}: {} of the median pair{median_pair}; every pair without \
                 {without}: {}",
                topo.host(x),
                span(&with),
                span(&clean)
            );
            if hung > 0 {
                why += &format!("; {hung} of its {} pairs hung", cells.len());
            }
            if s.below_min {
                why += &format!(
                    "; its median pair is below --locate-min-busbw ({:.1} GB/s)",
                    s.score
                );
            }
            Some(NodeSuspect {
                node: x,
                origin: Judgement {
                    state: s.state,
                    reference,
                    ratio: ratio(s.score),
                    below_min: s.below_min,
                },
                why,
                round: cells.iter().map(|c| c.round).min().unwrap_or(0),
            })
        })
        .collect();
    let others = |x: usize| {
        ratios(
            &mut m
                .partners(x)
                .filter(|(y, _)| innocent(x, *y))
                .map(|(_, c)| c.value()),
        )
    };
    let links = f
        .links
        .iter()
        .filter_map(|&(a, b)| {
            let cell = m.get(a, b)?;
            let word = match cell.busbw {
                None => format!("{} in round {}", cell.state.name(), cell.round),
                Some(v) => format!(
                    "{} of the median pair{median_pair} in round {}",
                    ratio(v).map_or("slow".into(), times),
                    cell.round
                ),
            };
            let mut why = format!("{}+{} {word}", topo.host(a), topo.host(b));
            let mut culprit = Culprit::pair(a, b);
            if n > 2 {
                // An end is clean when its median other pair is clearly healthy.
                let (named, margin) =
                    node_or_link(cx, (a, median(&others(a))), (b, median(&others(b))));
                culprit = named;
                why += &format!(
                    "; {}'s other pairs {}, {}'s {}{margin}",
                    topo.host(a),
                    span(&others(a)),
                    topo.host(b),
                    span(&others(b))
                );
            }
            let below_min = cell.busbw.is_some_and(|v| th.below_min(v));
            Some(LinkSuspect {
                culprit,
                nodes: (a, b),
                origin: Judgement {
                    state: if cell.busbw.is_some() {
                        State::Slow
                    } else {
                        cell.state
                    },
                    reference,
                    ratio: cell.busbw.and_then(ratio),
                    below_min,
                },
                why,
                round: cell.round,
            })
        })
        .collect();
    let good = (0..n)
        .filter(|&x| !f.is_slow(x) && m.partners(x).next().is_some())
        .collect();
    (nodes, links, good)
}
