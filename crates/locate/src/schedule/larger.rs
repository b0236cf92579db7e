//! Larger groups when pairs cannot explain a slow job. A slowdown that only shows when many
//! nodes take part (a process paused now and then, which every other node of a ring waits on)
//! can leave every pair fine while the job's own table is slow. When the job ran below
//! [`Thresholds::job_ratio`](crate::stats::Thresholds::job_ratio) of its pairs and the schedule
//! named nobody, the job's two halves run at once (the job's own collective, each half half the
//! nodes). When one half is slow, its nodes are bisected **keeping the group size**: each part
//! of the suspects runs beside known-good nodes from the other half, so the slowdown still has
//! a large group to show in, down to one node (named) or as far as the readings go (then
//! nothing is named and the job line says the slowdown could not be localised).
//!
//! Cost: 1 round of halves, then ⌈log₂(N/2)⌉ rounds to one node: log₂ N rounds for N a power
//! of two. Used from 6 nodes; with 4 or 5 the halves would be pairs again, and
//! [`LeaveOut`] runs the job without each node in turn instead (N rounds).

use super::super::bisect::result_word;
use super::super::evidence::{JobCheck, job_lead};
use super::super::judge::State;
use super::super::round::{Phase, Role, Round, RoundBuilder, Subject};
use super::super::topology::Topology;
use super::super::verdict::{Culprit, Verdict};
use super::leave_out::{self, LeaveOut};
use super::{Conclusion, Context, Schedule};

/// Fewer nodes than this: no halves (with 4 or 5 they would be pairs).
const MIN_NODES: usize = leave_out::MAX_NODES + 1;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// The next round is to be planned.
    Plan,
    /// Round `round` runs these parts of the suspects (one per group, in group order).
    Waiting {
        round: usize,
        parts: Vec<Vec<usize>>,
    },
    /// One node left: named.
    Named(usize),
    /// The readings went no further; why.
    Stuck(String),
}

/// The halves and the bisection of the slow half.
#[derive(Debug, Clone)]
pub struct Larger {
    /// Nodes per group: half the job.
    size: usize,
    /// The nodes that may hold the slowdown; empty before the halves ran.
    suspects: Vec<usize>,
    /// Nodes of groups that were fine.
    good: Vec<usize>,
    step: Step,
    /// The readings, one entry per round.
    trail: Vec<String>,
    rounds: Vec<usize>,
    /// The last slow group's judgement: its state and ratio.
    last: Option<(State, Option<f64>)>,
}

impl Larger {
    /// The escalation for `topo`; `None` below 6 nodes.
    pub fn new(topo: &Topology) -> Option<Larger> {
        (topo.nodes() >= MIN_NODES).then(|| Larger {
            size: topo.nodes() / 2,
            suspects: Vec::new(),
            good: Vec::new(),
            step: Step::Plan,
            trail: Vec::new(),
            rounds: Vec::new(),
            last: None,
        })
    }

    fn absorb(&mut self, cx: &Context) {
        let Step::Waiting { round, parts } = &self.step else {
            return;
        };
        let Some(rec) = round.checked_sub(1).and_then(|i| cx.history.get(i)) else {
            return;
        };
        let (round, parts) = (*round, parts.clone());
        let words: Vec<String> = rec
            .round
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let word = result_word(rec.judgement(i));
                format!("{} {word}", g.subject.describe(cx.topo))
            })
            .collect();
        self.trail
            .push(format!("{} in round {round}", words.join(", ")));
        self.rounds.push(round);
        let bad: Vec<usize> = (0..parts.len())
            .filter(|&i| rec.judgement(i).is_some_and(|j| j.state.is_bad()))
            .collect();
        self.step = match bad[..] {
            [i] => {
                for (k, part) in parts.iter().enumerate() {
                    if k != i {
                        self.good.extend(part);
                    }
                }
                self.suspects = parts[i].clone();
                self.last = rec.judgement(i).map(|j| (j.state, j.ratio));
                match self.suspects[..] {
                    [node] => Step::Named(node),
                    _ => Step::Plan,
                }
            }
            [] if (0..parts.len())
                .any(|i| rec.judgement(i).is_none_or(|j| j.state == State::Unjudged)) =>
            {
                Step::Stuck("a group could not be judged".into())
            }
            [] => Step::Stuck("no group slow".into()),
            _ => Step::Stuck("every group slow".into()),
        };
    }

    /// The halves first, then the suspects split in two, each part beside known-good nodes.
    fn plan(&mut self, cx: &Context) -> Option<Round> {
        let topo = cx.topo;
        let parts: Vec<Vec<usize>> = if self.rounds.is_empty() {
            let all: Vec<usize> = (0..2 * self.size).collect();
            all.chunks(self.size).map(<[usize]>::to_vec).collect()
        } else {
            let (a, b) = self.suspects.split_at(self.suspects.len().div_ceil(2));
            vec![a.to_vec(), b.to_vec()]
        };
        let mut spare = self.good.clone();
        spare.sort_unstable();
        let mut spare = spare.into_iter();
        let mut builder = RoundBuilder::new(topo.world(), Phase::Halves);
        for part in &parts {
            let fillers: Vec<usize> = spare
                .by_ref()
                .take(self.size.saturating_sub(part.len()))
                .collect();
            let ranks: Vec<usize> = part
                .iter()
                .chain(&fillers)
                .flat_map(|&n| topo.ranks_of(n))
                .collect();
            let role = if fillers.is_empty() {
                Role::Primary
            } else {
                Role::Probe
            };
            let subject = Subject::Nodes {
                nodes: part.clone(),
                fillers,
            };
            if part.is_empty() || builder.add(ranks, subject, role).is_none() {
                self.step = Step::Stuck("no room for the parts".into());
                return None;
            }
        }
        let round = builder.finish(cx.next_index())?;
        self.step = Step::Waiting {
            round: round.index,
            parts,
        };
        Some(round)
    }

    /// The next round, or `None` when done.
    pub fn next_round(&mut self, cx: &Context) -> Option<Round> {
        self.absorb(cx);
        match self.step {
            Step::Plan => self.plan(cx),
            _ => None,
        }
    }

    /// The node named, or a note on how far the larger groups went.
    pub fn conclude(&self, cx: &Context, job: Option<&JobCheck>, c: &mut Conclusion) {
        let job = job_lead(job);
        let trail = self.trail.join("; ");
        match (&self.step, self.last) {
            (Step::Named(node), Some((state, ratio))) => c.verdicts.push(Verdict {
                culprit: Culprit::Node { node: *node },
                state,
                ratio,
                below_min: false,
                evidence: format!("{job}larger groups: {trail}"),
                rounds: self.rounds.clone(),
            }),
            (step, _) => {
                let why = match step {
                    Step::Stuck(why) => why.as_str(),
                    _ => "the run ended",
                };
                let left = if self.suspects.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; the slowdown is in {}, not narrowed further",
                        super::super::round::hosts(cx.topo, &self.suspects)
                    )
                };
                c.notes
                    .push(format!("larger groups: {trail}: {why}{left}, not named"));
            }
        }
    }
}

/// The larger groups of a job: halves from 6 nodes, the job without each node at 4 or 5.
enum Escalation {
    Halves(Larger),
    LeaveOut(LeaveOut),
}

impl Escalation {
    fn new(topo: &Topology) -> Option<Escalation> {
        Larger::new(topo)
            .map(Escalation::Halves)
            .or_else(|| LeaveOut::new(topo).map(Escalation::LeaveOut))
    }
}

/// A schedule followed by larger groups when its pairs leave a slow job unexplained.
pub struct Escalating {
    inner: Box<dyn Schedule>,
    job_busbw: Option<f64>,
    inner_done: bool,
    larger: Option<Escalation>,
}

impl Escalating {
    /// `inner`, then larger groups when the job (`job_busbw`, GB/s) was slow and it named
    /// nobody.
    pub fn new(inner: Box<dyn Schedule>, job_busbw: Option<f64>) -> Escalating {
        Escalating {
            inner,
            job_busbw,
            inner_done: false,
            larger: None,
        }
    }

    fn job(&self, cx: &Context) -> Option<JobCheck> {
        JobCheck::of(cx.history, cx.topo, self.job_busbw, cx.th)
    }
}

impl Schedule for Escalating {
    fn next_round(&mut self, cx: &Context) -> Option<Round> {
        if !self.inner_done {
            if let Some(r) = self.inner.next_round(cx) {
                return Some(r);
            }
            self.inner_done = true;
            let slow = self.job(cx).is_some_and(|j| j.slow);
            if slow && self.inner.conclude(cx).verdicts.is_empty() {
                self.larger = Escalation::new(cx.topo);
            }
        }
        match self.larger.as_mut()? {
            Escalation::Halves(l) => l.next_round(cx),
            Escalation::LeaveOut(l) => l.next_round(cx),
        }
    }

    fn references(&self) -> Vec<(crate::judge::Shape, f64)> {
        self.inner.references()
    }

    fn conclude(&self, cx: &Context) -> Conclusion {
        let mut c = self.inner.conclude(cx);
        let job = self.job(cx);
        match &self.larger {
            Some(Escalation::Halves(l)) => l.conclude(cx, job.as_ref(), &mut c),
            Some(Escalation::LeaveOut(l)) => l.conclude(cx, job.as_ref(), &mut c),
            None => {}
        }
        c
    }
}
