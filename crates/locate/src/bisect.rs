//! Bisection: narrowing a suspect (a node, a rail) down to the GPUs or nodes at fault.
//!
//! A job holds a suspect set of units (GPUs of a node, or nodes along a rail). Each round it
//! runs both halves of the set at once, each beside a control of the same shape made of
//! known-good ranks, and keeps the slow half; the healthy half becomes known-good padding for
//! later probes. It stops when one unit is left, when both halves are slow (the fault is
//! common to the set: a whole node, a whole rail), or when it cannot build a probe. When
//! neither half is slow, the whole set is re-tested: slow again names the set ("slow only as a
//! whole"), healthy clears it as a transient. A suspect of one unit (a node with one GPU) that
//! was slow is re-tested the same way before it is named: no single reading names anything.
//! What a unit is and how probes and controls are built is the [`Domain`]'s business.

use super::history::RoundRecord;
use super::judge::{Judgement, State};
use super::round::RoundBuilder;
use super::stats::Basis;
use super::topology::Topology;
use super::verdict::{Culprit, Verdict, times};

/// How one kind of suspect is probed.
pub trait Domain {
    /// The job's topology, for descriptions.
    fn topo(&self) -> &Topology;

    /// Adds a probe of `units` of `job` to `b`, padded with known-good units of the job where
    /// a group needs two ranks: the group's index and its layout (the units it used, pads
    /// included), or `None` when it cannot be built in `b`.
    fn probe(
        &self,
        job: &Job,
        units: &[usize],
        b: &mut RoundBuilder,
    ) -> Option<(usize, Vec<usize>)>;

    /// Adds a control of known-good ranks shaped like a probe of `layout`: its index.
    fn control(&self, job: &Job, layout: &[usize], b: &mut RoundBuilder) -> Option<usize>;

    /// What `units` of `job` point at.
    fn culprit(&self, job: &Job, units: &[usize]) -> Culprit;
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Next round runs both halves.
    Split,
    /// Next round re-tests the whole set.
    Retest,
    /// Waiting for the halves (group indices).
    Halves(usize, usize),
    /// Waiting for the whole set (group index).
    Whole(usize),
    /// Done: the set is named.
    Named,
    /// Done: the set was healthy when re-tested.
    Cleared,
}

/// One suspect being narrowed down.
#[derive(Debug, Clone)]
pub struct Job {
    /// The node or rail the units belong to.
    pub owner: usize,
    /// The units still suspected.
    pub set: Vec<usize>,
    /// Units found healthy (padding for probes).
    pub good: Vec<usize>,
    /// The worst state seen along the way.
    pub state: State,
    /// The latest ratio of the suspected set.
    pub ratio: Option<f64>,
    /// Named through `--locate-min-busbw` at the start.
    pub below_min: bool,
    /// The measurements so far, one phrase each.
    pub evidence: Vec<String>,
    /// The rounds that measured it.
    pub rounds: Vec<usize>,
    step: Step,
}

impl Job {
    /// A job for `set` of `owner`, suspected in round `round` with `state` and `ratio`;
    /// `origin` says why. A set of one unit that was slow is measured once more before it is
    /// named (one reading below the cut is within the noise of a busy network now and then);
    /// one that hung or failed is named at once (a second try would only wait for it again).
    pub fn new(
        owner: usize,
        set: Vec<usize>,
        origin: &Judgement,
        why: String,
        round: usize,
    ) -> Job {
        let step = match set.len() {
            0 => Step::Named,
            1 if origin.state == State::Slow => Step::Retest,
            1 => Step::Named,
            _ => Step::Split,
        };
        Job {
            owner,
            set,
            good: Vec::new(),
            state: origin.state,
            ratio: origin.ratio,
            below_min: origin.below_min,
            evidence: vec![why],
            rounds: vec![round],
            step,
        }
    }

    fn name(&mut self) {
        self.step = Step::Named;
    }
}

/// Several jobs narrowed down together, their probes sharing rounds.
#[derive(Debug, Clone, Default)]
pub struct Bisector {
    /// The jobs.
    pub jobs: Vec<Job>,
}

/// `0.48x`, `hung`, `error`: a group's result for evidence text.
pub fn result_word(j: Option<&Judgement>) -> String {
    match j {
        Some(j) if j.state == State::Hung || j.state == State::Error => j.state.name().into(),
        Some(Judgement { ratio: Some(r), .. }) => times(*r),
        _ => "unjudged".into(),
    }
}

impl Bisector {
    /// Whether a job still needs rounds.
    pub fn active(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| !matches!(j.step, Step::Named | Step::Cleared))
    }

    /// Adds the probes (and controls) of every job that can run now to `b`. A job that would
    /// run without a control only because other jobs took the known-good ranks waits for a
    /// round of its own (the first job of a round never waits); a job whose probes cannot be
    /// built even in an empty round is named as it stands.
    pub fn plan<D: Domain>(&mut self, d: &D, b: &mut RoundBuilder) {
        for job in &mut self.jobs {
            if !matches!(job.step, Step::Split | Step::Retest) {
                continue;
            }
            let mark = b.len();
            match Self::try_plan(d, job, b) {
                Some((step, true)) => job.step = step,
                Some((step, false)) => {
                    let alone = Self::try_plan(d, job, &mut b.empty_like());
                    if mark > 0 && alone.is_some_and(|(_, controlled)| controlled) {
                        b.truncate(mark);
                    } else {
                        job.step = step;
                    }
                }
                None => {
                    b.truncate(mark);
                    if Self::try_plan(d, job, &mut b.empty_like()).is_none() {
                        job.evidence
                            .push("no known-good partner to narrow it down further".into());
                        job.name();
                    }
                }
            }
        }
    }

    /// Adds the job's next probes and their controls to `b`: the step that waits for them and
    /// whether every probe got a control. `None` (with probes possibly left in `b`) when a
    /// probe does not fit.
    fn try_plan<D: Domain>(d: &D, job: &Job, b: &mut RoundBuilder) -> Option<(Step, bool)> {
        match job.step {
            Step::Split => {
                let (lo, hi) = job.set.split_at(job.set.len().div_ceil(2));
                let (ia, la) = d.probe(job, lo, b)?;
                let (ic, lc) = d.probe(job, hi, b)?;
                let controlled = d.control(job, &la, b).is_some();
                let controlled = d.control(job, &lc, b).is_some() && controlled;
                Some((Step::Halves(ia, ic), controlled))
            }
            Step::Retest => {
                let (i, layout) = d.probe(job, &job.set, b)?;
                let controlled = d.control(job, &layout, b).is_some();
                Some((Step::Whole(i), controlled))
            }
            _ => None,
        }
    }

    /// Updates every waiting job from its round's judgements.
    pub fn absorb<D: Domain>(&mut self, d: &D, record: &RoundRecord) {
        let topo = d.topo();
        let describe = |g: usize| {
            let subject = record
                .round
                .groups
                .get(g)
                .map(|g| g.subject.describe(topo))
                .unwrap_or_default();
            format!("{subject} {}", result_word(record.judgement(g)))
        };
        let state = |g: usize| record.judgement(g).map_or(State::Error, |j| j.state);
        for job in &mut self.jobs {
            match job.step {
                Step::Halves(ia, ic) => {
                    job.rounds.push(record.round.index);
                    let (sa, sc) = (state(ia), state(ic));
                    job.evidence
                        .push(format!("{}, {}", describe(ia), describe(ic)));
                    if sa == State::Unjudged || sc == State::Unjudged {
                        job.evidence
                            .push("halves not judged (nothing of their shape to compare)".into());
                        job.name();
                        continue;
                    }
                    let mid = job.set.len().div_ceil(2);
                    match (sa.is_bad(), sc.is_bad()) {
                        (true, true) => {
                            job.state = job.state.worst(sa).worst(sc);
                            job.evidence.push("both halves slow".into());
                            job.name();
                        }
                        (true, false) | (false, true) => {
                            let (keep, drop, g) = if sa.is_bad() {
                                (job.set[..mid].to_vec(), job.set[mid..].to_vec(), ia)
                            } else {
                                (job.set[mid..].to_vec(), job.set[..mid].to_vec(), ic)
                            };
                            job.state = job.state.worst(state(g));
                            job.ratio = record.judgement(g).and_then(|j| j.ratio).or(job.ratio);
                            job.good.extend(drop);
                            job.set = keep;
                            if job.set.len() <= 1 {
                                job.name();
                            } else {
                                job.step = Step::Split;
                            }
                        }
                        (false, false) => {
                            let siblings = [ia, ic].iter().any(|&g| {
                                record
                                    .judgement(g)
                                    .and_then(|j| j.reference)
                                    .is_some_and(|r| r.basis == Basis::Round)
                            });
                            job.evidence.push(if siblings {
                                "halves alike (nothing else of their shape to compare)".into()
                            } else {
                                "neither half slow".into()
                            });
                            job.step = Step::Retest;
                        }
                    }
                }
                Step::Whole(g) => {
                    job.rounds.push(record.round.index);
                    let whole = if job.set.len() > 1 { " as a whole" } else { "" };
                    job.evidence.push(format!("again{whole}: {}", describe(g)));
                    if state(g).is_bad() {
                        job.state = job.state.worst(state(g));
                        job.ratio = record.judgement(g).and_then(|j| j.ratio).or(job.ratio);
                        job.evidence.push(format!("slow again{whole}"));
                        job.name();
                    } else {
                        job.step = Step::Cleared;
                    }
                }
                _ => {}
            }
        }
    }

    /// A verdict per job not cleared: named jobs, and jobs cut short (the run stopped), whose
    /// suspect set is named as it stands.
    pub fn verdicts<D: Domain>(&self, d: &D) -> Vec<Verdict> {
        self.jobs
            .iter()
            .filter(|j| j.step != Step::Cleared)
            .map(|j| {
                let mut evidence = j.evidence.join("; ");
                if j.step != Step::Named {
                    evidence += "; narrowing cut short";
                }
                Verdict {
                    culprit: d.culprit(j, &j.set),
                    state: j.state,
                    ratio: j.ratio,
                    below_min: j.below_min,
                    evidence,
                    rounds: j.rounds.clone(),
                }
            })
            .collect()
    }

    /// A note per job cleared by its re-test.
    pub fn notes<D: Domain>(&self, d: &D) -> Vec<String> {
        self.jobs
            .iter()
            .filter(|j| j.step == Step::Cleared)
            .map(|j| {
                format!(
                    "not reproduced, not named: {} ({})",
                    d.culprit(j, &j.set).describe(d.topo()),
                    j.evidence.join("; ")
                )
            })
            .collect()
    }
}
