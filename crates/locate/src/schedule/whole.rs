//! `nodes` and `rails`: every part of the job on its own at once, judged against the median
//! part, then each slow part bisected along its [`Axis`] (domains::Sliced).
//!
//! * `nodes`: all GPUs of each node (NVLink and PCIe inside the node); a slow node is narrowed
//!   to its GPUs, each half beside the same GPUs of a known-good node. Needs two or more GPUs
//!   per node.
//! * `rails`: GPU *i* of every node (the NICs and switches of rail *i*); a slow rail is narrowed
//!   to its nodes, each half beside the same nodes on a known-good rail (so a slow node, slow on
//!   every rail, is not taken for a rail). When every rail is slow or hung the fault is common
//!   to all of them (a node or a link): no rail is named and a note says to run pairs. Needs
//!   two or more nodes.

use std::marker::PhantomData;

use super::super::bisect::{Bisector, Job, result_word};
use super::super::domains::{AlongRail, Axis, InNode, Sliced};
use super::super::judge::{Judgement, State};
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject};
use super::super::topology::Topology;
use super::{Conclusion, Context, Schedule};

/// What the whole-part schedules need to know of their parts beyond the [`Axis`].
pub trait Part: Axis {
    /// The phase of the first round.
    const PHASE: Phase;
    /// "node" or "rail", in notes.
    const NOUN: &'static str;
    /// The note when no part has the two ranks a group needs.
    const NONE_NOTE: &'static str;
    /// The note when every part is bad at once, which then names none of them; `None` names
    /// them all.
    const ALL_BAD_NOTE: Option<&'static str>;
    /// How many parts the job has.
    fn count(topo: &Topology) -> usize;
    /// The units of part `i` that the job has.
    fn units(topo: &Topology, i: usize) -> Vec<usize>;
    /// Which part a first-round group's subject is.
    fn index_of(subject: &Subject) -> Option<usize>;
    /// The subject of the group of all of part `i`.
    fn whole(i: usize) -> Subject;
    /// Part `i` in a verdict's evidence.
    fn label(topo: &Topology, i: usize) -> String;
}

impl Part for InNode {
    const PHASE: Phase = Phase::Nodes;
    const NOUN: &'static str = "node";
    const NONE_NOTE: &'static str =
        "the nodes schedule needs two or more GPUs per node: no node has them";
    const ALL_BAD_NOTE: Option<&'static str> = None;
    fn count(topo: &Topology) -> usize {
        topo.nodes()
    }
    fn units(topo: &Topology, node: usize) -> Vec<usize> {
        (0..topo.gpus_on(node)).collect()
    }
    fn index_of(subject: &Subject) -> Option<usize> {
        match subject {
            Subject::Node(n) => Some(*n),
            _ => None,
        }
    }
    fn whole(node: usize) -> Subject {
        Subject::Node(node)
    }
    fn label(topo: &Topology, node: usize) -> String {
        topo.host(node).to_string()
    }
}

impl Part for AlongRail {
    const PHASE: Phase = Phase::Rails;
    const NOUN: &'static str = "rail";
    const NONE_NOTE: &'static str = "the rails schedule needs two or more nodes: this job has one";
    const ALL_BAD_NOTE: Option<&'static str> = Some(
        "every rail is slow or hung: the fault is common to all rails (a node or a link), not \
         named here; run the quick or full schedule",
    );
    fn count(topo: &Topology) -> usize {
        topo.rails()
    }
    fn units(topo: &Topology, rail: usize) -> Vec<usize> {
        (0..topo.nodes())
            .filter(|&n| topo.rank(n, rail).is_some())
            .collect()
    }
    fn index_of(subject: &Subject) -> Option<usize> {
        match subject {
            Subject::Rail(r) => Some(*r),
            _ => None,
        }
    }
    fn whole(rail: usize) -> Subject {
        Subject::Rail(rail)
    }
    fn label(_topo: &Topology, rail: usize) -> String {
        format!("rail {rail}")
    }
}

/// The `nodes` schedule.
pub type PerNode = Whole<InNode>;
/// The `rails` schedule.
pub type PerRail = Whole<AlongRail>;

/// A whole-part schedule's state.
#[derive(Debug, Clone)]
pub struct Whole<P> {
    started: bool,
    absorbed: usize,
    good: Vec<usize>,
    bisector: Bisector,
    notes: Vec<String>,
    part: PhantomData<P>,
}

impl<P: Part> Whole<P> {
    /// The schedule for `topo`.
    pub fn new(_topo: &Topology) -> Self {
        Whole {
            started: false,
            absorbed: 0,
            good: Vec::new(),
            bisector: Bisector::default(),
            notes: Vec::new(),
            part: PhantomData,
        }
    }

    fn absorb(&mut self, cx: &Context) {
        let topo = cx.topo;
        for rec in cx.history.get(self.absorbed..).unwrap_or_default() {
            if rec.round.phase != P::PHASE {
                self.bisector
                    .absorb(&Sliced::<P>::new(topo, &self.good), rec);
                continue;
            }
            let judged: Vec<(usize, &Judgement)> = rec
                .round
                .groups
                .iter()
                .zip(&rec.judged)
                .filter_map(|(g, j)| Some((P::index_of(&g.subject)?, j)))
                .collect();
            if let Some(note) = P::ALL_BAD_NOTE
                && judged.len() >= 2
                && judged.iter().all(|(_, j)| j.state.is_bad())
            {
                self.notes.push(note.into());
                continue;
            }
            if judged.iter().any(|(_, j)| j.state == State::Unjudged) {
                let noun = P::NOUN;
                self.notes.push(format!(
                    "a lone {noun} has no other {noun} to be compared with: set --locate-min-busbw to \
                     judge it"
                ));
            }
            for (i, j) in judged {
                if j.state == State::Ok {
                    self.good.push(i);
                } else if j.state.is_bad() {
                    let mut why = format!(
                        "{} {} of the median {} in round {}",
                        P::label(topo, i),
                        result_word(Some(j)),
                        P::NOUN,
                        rec.round.index
                    );
                    if let Some(r) = j.reference {
                        why += &format!(" ({:.1} GB/s)", r.value);
                    }
                    if j.below_min {
                        why += ", below --locate-min-busbw";
                    }
                    let units = P::units(topo, i);
                    self.bisector
                        .jobs
                        .push(Job::new(i, units, j, why, rec.round.index));
                }
            }
        }
        self.absorbed = cx.history.len();
    }
}

impl<P: Part> Schedule for Whole<P> {
    fn next_round(&mut self, cx: &Context) -> Option<Round> {
        self.absorb(cx);
        let topo = cx.topo;
        if !self.started {
            self.started = true;
            let mut b = RoundBuilder::new(topo.world(), P::PHASE);
            for i in 0..P::count(topo) {
                let ranks = P::units(topo, i)
                    .into_iter()
                    .filter_map(|u| P::rank(topo, i, u))
                    .collect();
                b.add(ranks, P::whole(i), Role::Primary);
            }
            if b.is_empty() {
                self.notes.push(P::NONE_NOTE.into());
            }
            return b.finish(cx.next_index());
        }
        let mut b = RoundBuilder::new(topo.world(), Phase::Bisect);
        self.bisector
            .plan(&Sliced::<P>::new(topo, &self.good), &mut b);
        b.finish(cx.next_index())
    }

    fn conclude(&self, cx: &Context) -> Conclusion {
        let domain = Sliced::<P>::new(cx.topo, &self.good);
        let mut notes = self.notes.clone();
        notes.extend(self.bisector.notes(&domain));
        Conclusion {
            verdicts: self.bisector.verdicts(&domain),
            notes,
        }
    }
}
