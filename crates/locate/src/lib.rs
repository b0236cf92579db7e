//! Locate: name the slow or broken node, GPU, rail or link of a job in one launch.
//!
//! After the whole-job measurement the job is split into groups of ranks that run at once, round
//! after round, following a [`schedule`]: every node alone, every rail alone, or pairs of nodes
//! (`quick`: a random matching and re-pairing of suspects; `full`: every pair once). Each group
//! is judged against the groups of its shape ([`mod@judge`], robust statistics in [`stats`]);
//! adaptive steps then re-test and bisect suspects ([`bisect`]) until each is named with its
//! evidence ([`verdict`]). The rounds are run by a [`seam::RoundRunner`]: the benchmark runner on
//! GPUs, or the model cluster of the tests (`oracle::locate_model`). [`output`] prints the per-group and verdict lines,
//! [`json`] the full record (the `nccl-perf` tool plots it: the pair matrix and node bars). docs/locate.md is the
//! user's guide and cost model.

pub mod bisect;
pub mod coverage;
pub mod domains;
pub mod evidence;
pub mod history;
pub mod json;
pub mod judge;
pub mod matrix;
pub mod output;
pub mod rng;
pub mod round;
pub mod schedule;
pub mod seam;
pub mod stats;
pub mod topology;
pub mod verdict;

use std::time::Duration;

use evidence::{Closest, JobCheck};
use history::RoundRecord;
use judge::State;
use judge::{Book, judge};
use schedule::{Context, Kind, Schedule};
use seam::{GroupOutcome, RoundRunner};
use stats::{ThresholdError, Thresholds};
use topology::Topology;
use verdict::{Culprit, Verdict};

/// Exit code of a locate run that names a suspect. Not one of nccl-tests' codes (0–7, 255)
/// nor ours (130, 143): 8 is left free for the next code nccl-tests may add after 7.
pub const EXIT_SUSPECTS: u8 = 9;

/// How to locate.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Which schedule.
    pub schedule: Kind,
    /// When a group is slow.
    pub thresholds: Thresholds,
    /// Seed of the `quick` matching.
    pub seed: u64,
    /// How long a group may run before it counts as hung.
    pub deadline: Duration,
    /// At most this many rounds (default: four per node plus 64, far above any schedule's
    /// need; a guard, not a tuning knob).
    pub max_rounds: Option<usize>,
    /// busbw of the whole job's own measurement at the locate size, GB/s, when the runner
    /// knows it: compared with the pairs, and the reason for larger groups when the job was
    /// slow and no pair was ([`evidence::JobCheck`]).
    pub job_busbw: Option<f64>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            schedule: Kind::Quick,
            thresholds: Thresholds::default(),
            seed: 1,
            deadline: Duration::from_secs(60),
            max_rounds: None,
            job_busbw: None,
        }
    }
}

/// Everything a locate run found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The configuration it ran with.
    pub config: Config,
    /// Every round, judged.
    pub rounds: Vec<RoundRecord>,
    /// The culprits named.
    pub verdicts: Vec<Verdict>,
    /// Remarks (suspicions not reproduced, limits of the schedule on this job).
    pub notes: Vec<String>,
    /// Why the run stopped before the schedule was done, if it did.
    pub stopped: Option<String>,
    /// When nobody is named: the group that came closest to being slow.
    pub closest: Option<Closest>,
    /// The whole job against its pairs, when the job's busbw was given and pairs ran.
    pub job: Option<JobCheck>,
    /// What the rounds could not see ([`coverage::unseen`]).
    pub unseen: Vec<String>,
}

impl Report {
    /// [`EXIT_SUSPECTS`] when a culprit is named, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.verdicts.is_empty() {
            0
        } else {
            EXIT_SUSPECTS
        }
    }

    /// Wall time of all rounds, seconds.
    pub fn wall_s(&self) -> f64 {
        self.rounds.iter().map(|r| r.wall_s).sum()
    }
}

/// Runs `config.schedule` on `topo` through `runner` to its verdicts, calling `on_round` after
/// each round (to print its lines as they come). Fails only on invalid thresholds; a runner
/// that stops ends the run early with verdicts on the rounds completed.
pub fn run_schedule(
    runner: &mut dyn RoundRunner,
    topo: &Topology,
    config: &Config,
    on_round: &mut dyn FnMut(&RoundRecord, &Topology),
) -> Result<Report, ThresholdError> {
    let th = config.thresholds;
    th.validate()?;
    let mut schedule = schedule::larger::Escalating::new(
        config.schedule.build(topo, config.seed),
        config.job_busbw,
    );
    let cap = config.max_rounds.unwrap_or(4 * topo.nodes() + 64);
    let mut history: Vec<RoundRecord> = Vec::new();
    let mut book = Book::default();
    let mut stopped = None;
    let mut lost = Vec::new();
    loop {
        let cx = Context {
            topo,
            history: &history,
            th: &th,
        };
        let Some(round) = schedule.next_round(&cx) else {
            break;
        };
        for (shape, value) in schedule.references() {
            book.set(shape, value);
        }
        if history.len() >= cap {
            stopped = Some(format!("stopped at the limit of {cap} rounds"));
            break;
        }
        if let Err(e) = round.validate(topo.world()) {
            stopped = Some(format!("internal error, a round was planned wrong: {e}"));
            break;
        }
        let result = match runner.run_round(&round, config.deadline) {
            Ok(r) => r,
            Err(stop) => {
                stopped = Some(format!("stopped in round {}: {}", round.index, stop.why));
                lost = lost_verdicts(topo, round.index, &stop);
                break;
            }
        };
        let mut outcomes: Vec<GroupOutcome> = result
            .outcomes
            .into_iter()
            .map(|o| match o {
                GroupOutcome::Measured { .. } if o.busbw().is_none() || o.time_us().is_none() => {
                    GroupOutcome::Failed {
                        error: "a result that is not a number".into(),
                    }
                }
                o => o,
            })
            .collect();
        outcomes.resize(
            round.groups.len(),
            GroupOutcome::Failed {
                error: "the runner gave no result for this group".into(),
            },
        );
        let judged = judge(&round, &outcomes, topo, &book, &th);
        book.learn(&round, &outcomes, &judged, topo);
        let record = RoundRecord {
            round,
            outcomes,
            judged,
            wall_s: if result.wall_s.is_finite() {
                result.wall_s.max(0.0)
            } else {
                0.0
            },
        };
        on_round(&record, topo);
        history.push(record);
    }
    let cx = Context {
        topo,
        history: &history,
        th: &th,
    };
    let conclusion = schedule.conclude(&cx);
    // A process that stopped answering is named first: what the rounds before said of its
    // GPU is older news.
    let mut verdicts = lost;
    verdicts.extend(conclusion.verdicts);
    verdicts.sort_by(|a, b| a.culprit.cmp(&b.culprit));
    // The first of each culprit is kept (`dedup_by` drops the later ones; the sort is stable).
    verdicts.dedup_by(|later, first| later.culprit == first.culprit);
    let mut job = JobCheck::of(&history, topo, config.job_busbw, &th);
    if let Some(j) = &mut job {
        j.localised = !verdicts.is_empty();
    }
    let (closest, leaning) = if verdicts.is_empty() {
        (
            evidence::closest(&history, topo, &th),
            evidence::leaning(&history, topo, &th),
        )
    } else {
        (None, None)
    };
    let unseen = coverage::unseen(topo, &history, &th);
    Ok(Report {
        unseen,
        config: config.clone(),
        rounds: history,
        verdicts,
        notes: evidence::machines_note(topo)
            .into_iter()
            .chain(leaning)
            .chain(conclusion.notes)
            .collect(),
        stopped,
        closest,
        job,
    })
}

/// The GPUs of the processes that stopped answering in round `round`, named as hung (a whole
/// node when all its processes did): a process that is frozen or gone hangs every group it is
/// in.
fn lost_verdicts(topo: &Topology, round: usize, stop: &seam::Stop) -> Vec<Verdict> {
    // When most of the job "stopped answering", the process that saw it is the one that was
    // cut off (or frozen itself): nobody is named.
    let mut distinct = stop.lost.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() * 2 > topo.world() {
        return Vec::new();
    }
    let mut by_node: Vec<(usize, Vec<usize>, Vec<usize>)> = Vec::new();
    for &rank in &stop.lost {
        let (Some(node), Some(local)) = (topo.node_of(rank), topo.local_of(rank)) else {
            continue;
        };
        match by_node.iter_mut().find(|(n, _, _)| *n == node) {
            Some((_, locals, ranks)) => {
                locals.push(local);
                ranks.push(rank);
            }
            None => by_node.push((node, vec![local], vec![rank])),
        }
    }
    by_node
        .into_iter()
        .map(|(node, locals, mut ranks)| {
            ranks.sort_unstable();
            ranks.dedup();
            let ranks: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
            Verdict {
                culprit: Culprit::gpus(topo, node, &locals),
                state: State::Hung,
                ratio: None,
                below_min: false,
                evidence: format!(
                    "rank{} {} stopped answering in round {round}: {}",
                    if ranks.len() == 1 { "" } else { "s" },
                    ranks.join(","),
                    stop.why
                ),
                rounds: vec![round],
            }
        })
        .collect()
}
