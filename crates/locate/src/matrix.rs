//! The pair matrix of the pair schedules and its analysis: node scores and link outliers.
//!
//! A node's score is the upper median busbw of its pairs (a hung or failed pair counts as 0):
//! a node is only scored low when at least half of its pairs are low, which a slow node does
//! to all of its pairs and a slow link to one. Nodes are judged against the upper median of
//! the scores; pairs without a slow node against the upper median of those pairs. Both hold
//! while fewer than half of the nodes (pairs) are faulty.

use super::history::RoundRecord;
use super::judge::State;
use super::round::{Phase, Role, Subject};
use super::stats::{Basis, Reference, Thresholds, upper_median};

/// One measured pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairCell {
    /// busbw, GB/s; `None` when hung or failed.
    pub busbw: Option<f64>,
    /// The round's judgement of it.
    pub state: State,
    /// The round that measured it.
    pub round: usize,
}

impl PairCell {
    /// busbw with a hang or failure counted as 0.
    pub fn value(&self) -> f64 {
        self.busbw.unwrap_or(0.0)
    }
}

/// The first measurement of every pair of nodes, from the rounds of phase `pairs`.
#[derive(Debug, Clone, PartialEq)]
pub struct PairMatrix {
    n: usize,
    cells: Vec<Option<PairCell>>,
}

impl PairMatrix {
    /// The matrix of `n` nodes from the primary pair groups of `history`.
    pub fn from_history(n: usize, history: &[RoundRecord]) -> PairMatrix {
        let mut m = PairMatrix {
            n,
            cells: vec![None; n * n.saturating_sub(1) / 2],
        };
        for rec in history.iter().filter(|r| r.round.phase == Phase::Pairs) {
            for (i, g) in rec.round.groups.iter().enumerate() {
                let (Subject::Pair(a, b), Role::Primary) = (&g.subject, g.role) else {
                    continue;
                };
                let cell = PairCell {
                    busbw: rec.outcomes.get(i).and_then(|o| o.busbw()),
                    state: rec.judgement(i).map_or(State::Error, |j| j.state),
                    round: rec.round.index,
                };
                if let Some(slot) = m.index(*a, *b).and_then(|k| m.cells.get_mut(k))
                    && slot.is_none()
                {
                    *slot = Some(cell);
                }
            }
        }
        m
    }

    fn index(&self, a: usize, b: usize) -> Option<usize> {
        let (a, b) = (a.min(b), a.max(b));
        (a != b && b < self.n).then(|| a * (2 * self.n - a - 1) / 2 + (b - a - 1))
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.n
    }

    /// The cell of `a` and `b`, if measured.
    pub fn get(&self, a: usize, b: usize) -> Option<&PairCell> {
        self.index(a, b).and_then(|k| self.cells.get(k)?.as_ref())
    }

    /// The measured partners of `a` and their cells.
    pub fn partners(&self, a: usize) -> impl Iterator<Item = (usize, &PairCell)> + '_ {
        (0..self.n).filter_map(move |b| self.get(a, b).map(|c| (b, c)))
    }

    /// Every measured pair, lower node first.
    pub fn pairs(&self) -> impl Iterator<Item = (usize, usize, &PairCell)> + '_ {
        (0..self.n).flat_map(move |a| {
            (a + 1..self.n).filter_map(move |b| self.get(a, b).map(|c| (a, b, c)))
        })
    }
}

/// One node's standing in the matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeScore {
    /// Upper median busbw of its pairs, GB/s.
    pub score: f64,
    /// Measured pairs.
    pub pairs: usize,
    /// Named slow.
    pub slow: bool,
    /// Below `--locate-min-busbw`.
    pub below_min: bool,
    /// Slow, or hung/error when most of its pairs were.
    pub state: State,
}

/// What the matrix says.
#[derive(Debug, Clone, PartialEq)]
pub struct Findings {
    /// The reference of node scores.
    pub node_ref: Option<Reference>,
    /// The reference of pairs without a slow node.
    pub pair_ref: Option<Reference>,
    /// Per node (`None`: no pair measured).
    pub scores: Vec<Option<NodeScore>>,
    /// Pairs without a slow node that are low, hung, failed or below `--locate-min-busbw`.
    pub links: Vec<(usize, usize)>,
}

impl Findings {
    /// The nodes named slow.
    pub fn slow_nodes(&self) -> Vec<usize> {
        (0..self.scores.len())
            .filter(|&n| self.scores[n].is_some_and(|s| s.slow))
            .collect()
    }

    /// Whether node `n` is named slow.
    pub fn is_slow(&self, n: usize) -> bool {
        self.scores
            .get(n)
            .copied()
            .flatten()
            .is_some_and(|s| s.slow)
    }
}

/// Node scores and link outliers of `m`. Nodes are only told apart from three nodes on: with
/// two, the one pair is all there is (its outliers are links, to be named as a pair).
pub fn analyse(m: &PairMatrix, th: &Thresholds) -> Findings {
    let n = m.nodes();
    let mut scores: Vec<Option<NodeScore>> = (0..n)
        .map(|a| {
            let cells: Vec<&PairCell> = m.partners(a).map(|(_, c)| c).collect();
            let values: Vec<f64> = cells.iter().map(|c| c.value()).collect();
            let score = upper_median(&values)?;
            let count = |s: State| cells.iter().filter(|c| c.state == s).count();
            let state = if 2 * count(State::Hung) > cells.len() {
                State::Hung
            } else if 2 * count(State::Error) > cells.len() {
                State::Error
            } else {
                State::Slow
            };
            Some(NodeScore {
                score,
                pairs: cells.len(),
                slow: false,
                below_min: false,
                state,
            })
        })
        .collect();
    let all: Vec<f64> = scores.iter().flatten().map(|s| s.score).collect();
    let node_ref = Reference::of(&all, Basis::Matrix, th);
    if n >= 3 {
        for s in scores.iter_mut().flatten() {
            s.below_min = th.below_min(s.score);
            s.slow = node_ref.is_some_and(|r| r.is_low(s.score, th)) || s.below_min;
        }
    }
    let findings = Findings {
        node_ref,
        pair_ref: None,
        scores,
        links: Vec::new(),
    };
    let clean: Vec<(usize, usize, &PairCell)> = m
        .pairs()
        .filter(|(a, b, _)| !findings.is_slow(*a) && !findings.is_slow(*b))
        .collect();
    let values: Vec<f64> = clean.iter().filter_map(|(_, _, c)| c.busbw).collect();
    let pair_ref = Reference::of(&values, Basis::Matrix, th);
    let links = clean
        .iter()
        .filter(|(_, _, c)| match c.busbw {
            None => true,
            Some(v) => th.below_min(v) || pair_ref.is_some_and(|r| r.is_low(v, th)),
        })
        .map(|(a, b, _)| (*a, *b))
        .collect();
    Findings {
        pair_ref,
        links,
        ..findings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Judgement;
    use crate::round::{Round, RoundBuilder};
    use crate::schedule::round_robin;
    use crate::seam::GroupOutcome;

    /// A full round-robin of `n` one-GPU nodes with busbw from `f`.
    fn matrix(n: usize, f: impl Fn(usize, usize) -> Option<f64>) -> PairMatrix {
        let history: Vec<RoundRecord> = (0..round_robin::rounds(n))
            .map(|r| {
                let mut b = RoundBuilder::new(n, Phase::Pairs);
                for (x, y) in round_robin::pairs(n, r) {
                    b.add(vec![x, y], Subject::Pair(x, y), Role::Primary);
                }
                let round: Round = b.finish(r + 1).unwrap();
                let outcomes: Vec<GroupOutcome> = round
                    .groups
                    .iter()
                    .map(|g| match g.subject {
                        Subject::Pair(x, y) => match f(x, y) {
                            Some(busbw) => GroupOutcome::Measured {
                                busbw,
                                time_us: 1.0,
                            },
                            None => GroupOutcome::Hung,
                        },
                        _ => GroupOutcome::Hung,
                    })
                    .collect();
                let judged = outcomes
                    .iter()
                    .map(|o| Judgement {
                        state: if o.busbw().is_some() {
                            State::Ok
                        } else {
                            State::Hung
                        },
                        reference: None,
                        ratio: None,
                        below_min: false,
                    })
                    .collect();
                RoundRecord {
                    round,
                    outcomes,
                    judged,
                    wall_s: 0.0,
                }
            })
            .collect();
        PairMatrix::from_history(n, &history)
    }

    #[test]
    fn a_slow_node_is_a_node_and_a_slow_link_a_link() {
        let th = Thresholds::default();
        let m = matrix(6, |a, b| Some(if a == 2 || b == 2 { 40.0 } else { 100.0 }));
        assert_eq!(m.pairs().count(), 15);
        let f = analyse(&m, &th);
        assert_eq!((f.slow_nodes(), f.links.clone()), (vec![2], vec![]));
        let m = matrix(6, |a, b| Some(if (a, b) == (1, 4) { 40.0 } else { 100.0 }));
        let f = analyse(&m, &th);
        assert_eq!((f.slow_nodes(), f.links), (vec![], vec![(1, 4)]));
    }

    #[test]
    fn three_nodes_tell_a_node_from_a_link() {
        let th = Thresholds::default();
        let f = analyse(
            &matrix(3, |a, _| Some(if a == 0 { 40.0 } else { 100.0 })),
            &th,
        );
        assert_eq!((f.slow_nodes(), f.links), (vec![0], vec![]));
        let f = analyse(
            &matrix(3, |a, b| Some(if (a, b) == (0, 1) { 40.0 } else { 100.0 })),
            &th,
        );
        assert_eq!((f.slow_nodes(), f.links), (vec![], vec![(0, 1)]));
    }

    #[test]
    fn two_slow_nodes_of_five_and_a_hung_link() {
        let th = Thresholds::default();
        let f = analyse(
            &matrix(5, |a, b| {
                Some(if [a, b].iter().any(|x| [1, 3].contains(x)) {
                    40.0
                } else {
                    100.0
                })
            }),
            &th,
        );
        assert_eq!(f.slow_nodes(), vec![1, 3]);
        let f = analyse(
            &matrix(8, |a, b| if (a, b) == (2, 5) { None } else { Some(100.0) }),
            &th,
        );
        assert_eq!((f.slow_nodes(), f.links), (vec![], vec![(2, 5)]));
    }

    #[test]
    fn two_nodes_name_no_node() {
        let th = Thresholds {
            min_busbw: Some(50.0),
            ..Thresholds::default()
        };
        let f = analyse(&matrix(2, |_, _| Some(40.0)), &th);
        assert_eq!((f.slow_nodes(), f.links), (vec![], vec![(0, 1)]));
        assert_eq!(analyse(&matrix(0, |_, _| None), &th).scores.len(), 0);
    }
}
