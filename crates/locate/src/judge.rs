//! Judging one round: each group against the groups of its shape. Shapes matter because busbw
//! depends on how many GPUs and nodes a group spans (half a node is not a whole node), so a
//! group is only ever compared with groups of the same number of ranks and nodes:
//!
//! * primary groups (whole nodes, whole rails, pairs of nodes: everyone tested at once) against
//!   the primary groups of their shape in the round;
//! * probes (suspects re-tested) against the control groups of their shape in the round, else
//!   against healthy groups of that shape in an earlier round (or a reference a schedule
//!   knows, e.g. the median pair of `full`), else against their sibling (the other half of the
//!   same suspect in a bisection);
//! * `--locate-min-busbw` against whole nodes, whole rails and pairs of nodes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::round::{Group, Role, Round, Subject};
use super::seam::GroupOutcome;
use super::stats::{Basis, Reference, Thresholds, upper_median};
use super::topology::Topology;

/// The verdict on one group of one round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// As fast as its reference.
    Ok,
    /// Low against its reference, or below `--locate-min-busbw`.
    Slow,
    /// No result before the deadline.
    Hung,
    /// An error, or a result that is not a number.
    Error,
    /// No reference to judge against (a lone group of its shape).
    Unjudged,
}

impl State {
    /// Slow, hung or in error.
    pub fn is_bad(self) -> bool {
        matches!(self, State::Slow | State::Hung | State::Error)
    }

    /// The word printed in the per-group lines.
    pub fn name(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Slow => "slow",
            State::Hung => "hung",
            State::Error => "error",
            State::Unjudged => "unjudged",
        }
    }

    /// The worse of two states (hung > error > slow > unjudged > ok).
    pub fn worst(self, other: State) -> State {
        let rank = |s: State| match s {
            State::Ok => 0,
            State::Unjudged => 1,
            State::Slow => 2,
            State::Error => 3,
            State::Hung => 4,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// One group's judgement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// The verdict.
    pub state: State,
    /// What it was compared with.
    pub reference: Option<Reference>,
    /// busbw as a multiple of the reference.
    pub ratio: Option<f64>,
    /// Below `--locate-min-busbw`.
    pub below_min: bool,
}

/// A group's shape: (ranks, nodes).
pub type Shape = (usize, usize);

/// The shape of `group`.
pub fn shape(group: &Group, topo: &Topology) -> Shape {
    (group.ranks.len(), topo.nodes_of(&group.ranks).len())
}

/// Whose part a bisection probe is (node or rail, with the kind of split): probes are only
/// ever compared with their siblings, never with another suspect's halves.
fn owner(subject: &Subject) -> Option<(u8, usize)> {
    match subject {
        Subject::NodeGpus { node, .. } => Some((0, *node)),
        Subject::RailNodes { rail, .. } => Some((1, *rail)),
        Subject::PairGpus { node, .. } => Some((2, *node)),
        _ => None,
    }
}

/// Whether `--locate-min-busbw` applies: whole nodes, whole rails and pairs of whole nodes.
fn whole(subject: &Subject) -> bool {
    matches!(
        subject,
        Subject::Node(_) | Subject::Rail(_) | Subject::Pair(..)
    )
}

/// References learnt from healthy groups of earlier rounds, by shape.
#[derive(Debug, Clone, Default)]
pub struct Book {
    by_shape: BTreeMap<Shape, f64>,
}

impl Book {
    /// The reference of `shape` learnt so far.
    pub fn get(&self, shape: Shape) -> Option<f64> {
        self.by_shape.get(&shape).copied()
    }

    /// Sets the reference of `shape` (a schedule's own knowledge, e.g. the median pair).
    pub fn set(&mut self, shape: Shape, value: f64) {
        if value.is_finite() && value > 0.0 {
            self.by_shape.insert(shape, value);
        }
    }

    /// Learns from a judged round: per shape, the upper median of its healthy groups.
    pub fn learn(
        &mut self,
        round: &Round,
        outcomes: &[GroupOutcome],
        judged: &[Judgement],
        topo: &Topology,
    ) {
        let mut healthy: BTreeMap<Shape, Vec<f64>> = BTreeMap::new();
        for ((g, o), j) in round.groups.iter().zip(outcomes).zip(judged) {
            if let (State::Ok, Some(v)) = (j.state, o.busbw()) {
                healthy.entry(shape(g, topo)).or_default().push(v);
            }
        }
        for (s, v) in healthy {
            if let Some(m) = upper_median(&v) {
                self.by_shape.insert(s, m);
            }
        }
    }
}

/// Judges every group of `round` from its `outcomes` (missing outcomes count as errors).
pub fn judge(
    round: &Round,
    outcomes: &[GroupOutcome],
    topo: &Topology,
    book: &Book,
    th: &Thresholds,
) -> Vec<Judgement> {
    let shapes: Vec<Shape> = round.groups.iter().map(|g| shape(g, topo)).collect();
    let values: Vec<Option<f64>> = (0..round.groups.len())
        .map(|i| outcomes.get(i).and_then(GroupOutcome::busbw))
        .collect();
    let collect = |s: Shape, role: Role, family: Option<Option<(u8, usize)>>| -> Vec<f64> {
        round
            .groups
            .iter()
            .enumerate()
            .filter(|(i, g)| shapes[*i] == s && g.role == role)
            .filter(|(_, g)| family.is_none_or(|f| f == owner(&g.subject)))
            .filter_map(|(i, _)| values[i])
            .collect()
    };
    type Key = (Shape, bool, Option<(u8, usize)>);
    let mut refs: BTreeMap<Key, Option<Reference>> = BTreeMap::new();
    round
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let s = shapes[i];
            let primary = g.role == Role::Primary;
            let family = owner(&g.subject);
            let key = (s, primary, if primary { None } else { family });
            let reference = *refs.entry(key).or_insert_with(|| {
                if primary {
                    let v = collect(s, Role::Primary, None);
                    return (v.len() >= 2)
                        .then(|| Reference::of(&v, Basis::Round, th))
                        .flatten();
                }
                let controls = collect(s, Role::Control, None);
                if let Some(r) = Reference::of(&controls, Basis::Controls, th) {
                    return Some(r);
                }
                if let Some(r) = book.get(s).and_then(|v| Reference::earlier(v, th)) {
                    return Some(r);
                }
                // Last resort: a probe's siblings (the other half of the same suspect).
                family?;
                let probes = collect(s, Role::Probe, Some(family));
                (probes.len() >= 2)
                    .then(|| Reference::of(&probes, Basis::Round, th))
                    .flatten()
            });
            let Some(v) = values[i] else {
                let state = match outcomes.get(i) {
                    Some(GroupOutcome::Hung) => State::Hung,
                    _ => State::Error,
                };
                return Judgement {
                    state,
                    reference,
                    ratio: None,
                    below_min: false,
                };
            };
            let below_min = whole(&g.subject) && th.below_min(v);
            let state = match reference {
                Some(r) if r.is_low(v, th) => State::Slow,
                _ if below_min => State::Slow,
                Some(_) => State::Ok,
                None => State::Unjudged,
            };
            Judgement {
                state,
                reference,
                ratio: reference.map(|r| r.ratio(v)),
                below_min,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::{Phase, RoundBuilder};

    fn measured(busbw: f64) -> GroupOutcome {
        GroupOutcome::Measured {
            busbw,
            time_us: 1.0,
        }
    }

    #[test]
    fn primaries_are_judged_within_their_shape() {
        let topo = Topology::uniform(4, 2);
        let mut b = RoundBuilder::new(8, Phase::Nodes);
        for n in 0..4 {
            b.add(topo.ranks_of(n), Subject::Node(n), Role::Primary);
        }
        let round = b.finish(1).unwrap();
        let out = [
            measured(100.0),
            measured(100.0),
            measured(50.0),
            GroupOutcome::Hung,
        ];
        let j = judge(
            &round,
            &out,
            &topo,
            &Book::default(),
            &Thresholds::default(),
        );
        let states: Vec<State> = j.iter().map(|j| j.state).collect();
        assert_eq!(states, [State::Ok, State::Ok, State::Slow, State::Hung]);
        assert_eq!(j[2].ratio, Some(0.5));
    }

    #[test]
    fn probes_prefer_controls_then_earlier_rounds() {
        let topo = Topology::uniform(6, 1);
        let pair = |a: usize, b: usize, role| (vec![a, b], Subject::Pair(a, b), role);
        let build = |groups: Vec<(Vec<usize>, Subject, Role)>| {
            let mut b = RoundBuilder::new(6, Phase::Repair);
            for (r, s, role) in groups {
                b.add(r, s, role);
            }
            b.finish(2).unwrap()
        };
        let th = Thresholds::default();
        // Both probes slow: only the control shows it.
        let round = build(vec![
            pair(0, 1, Role::Probe),
            pair(2, 3, Role::Probe),
            pair(4, 5, Role::Control),
        ]);
        let out = [measured(50.0), measured(52.0), measured(100.0)];
        let j = judge(&round, &out, &topo, &Book::default(), &th);
        assert_eq!((j[0].state, j[1].state), (State::Slow, State::Slow));
        assert_eq!(j[0].reference.map(|r| r.basis), Some(Basis::Controls));
        // No control: an earlier round's healthy pairs.
        let round = build(vec![pair(0, 1, Role::Probe), pair(2, 3, Role::Probe)]);
        let mut book = Book::default();
        assert_eq!(
            judge(&round, &out[..2], &topo, &book, &th)[0].state,
            State::Unjudged
        );
        let first = build(vec![pair(4, 5, Role::Primary), pair(0, 1, Role::Primary)]);
        let first_out = [measured(100.0), measured(101.0)];
        let first_j = judge(&first, &first_out, &topo, &book, &th);
        book.learn(&first, &first_out, &first_j, &topo);
        assert_eq!(book.get((2, 2)), Some(101.0));
        let j = judge(&round, &out[..2], &topo, &book, &th);
        assert_eq!((j[0].state, j[1].state), (State::Slow, State::Slow));
    }

    #[test]
    fn halves_are_compared_with_their_sibling_only() {
        let topo = Topology::uniform(2, 4);
        let half = |node: usize, gpus: Vec<usize>| Subject::NodeGpus { node, gpus };
        let mut b = RoundBuilder::new(8, Phase::Bisect);
        b.add(vec![0, 1], half(0, vec![0, 1]), Role::Probe);
        b.add(vec![2, 3], half(0, vec![2, 3]), Role::Probe);
        b.add(vec![4, 5], half(1, vec![0, 1]), Role::Probe);
        b.add(vec![6, 7], half(1, vec![2, 3]), Role::Probe);
        let round = b.finish(3).unwrap();
        // Node 0's halves differ; node 1's are alike (and slower than node 0's fast half,
        // which must not matter).
        let out = [
            measured(100.0),
            measured(50.0),
            measured(60.0),
            measured(61.0),
        ];
        let j = judge(
            &round,
            &out,
            &topo,
            &Book::default(),
            &Thresholds::default(),
        );
        let states: Vec<State> = j.iter().map(|j| j.state).collect();
        assert_eq!(states, [State::Ok, State::Slow, State::Ok, State::Ok]);
    }

    #[test]
    fn a_lone_group_is_unjudged_unless_below_the_floor() {
        let topo = Topology::uniform(2, 1);
        let mut b = RoundBuilder::new(2, Phase::Pairs);
        b.add(vec![0, 1], Subject::Pair(0, 1), Role::Primary);
        let round = b.finish(1).unwrap();
        let th = Thresholds::default();
        let j = judge(&round, &[measured(10.0)], &topo, &Book::default(), &th);
        assert_eq!(j[0].state, State::Unjudged);
        let th = Thresholds {
            min_busbw: Some(20.0),
            ..th
        };
        let j = judge(&round, &[measured(10.0)], &topo, &Book::default(), &th);
        assert_eq!((j[0].state, j[0].below_min), (State::Slow, true));
        let j = judge(&round, &[], &topo, &Book::default(), &th);
        assert_eq!(j[0].state, State::Error);
    }

    #[test]
    fn worst_state_order() {
        assert_eq!(State::Slow.worst(State::Hung), State::Hung);
        assert_eq!(State::Error.worst(State::Slow), State::Error);
        assert_eq!(State::Ok.worst(State::Unjudged), State::Unjudged);
    }
}
