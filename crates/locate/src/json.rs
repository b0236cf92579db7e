//! The JSON record of a locate run: configuration, nodes and GPUs, every round with every
//! group's ranks, outcome and judgement, the pair matrix and node scores of the pair
//! schedules, and the verdicts. `nccl-perf plot` reads it back (the tool's `locate_plot`).

use serde::{Deserialize, Serialize};

use super::Report;
use super::evidence::{Closest, JobCheck};
use super::judge::State;
use super::matrix::{PairMatrix, analyse};
use super::round::{Phase, Role, Subject};
use super::schedule::Kind;
use super::seam::GroupOutcome;
use super::stats::Thresholds;
use super::topology::{Gpu, Node, Topology};
use super::verdict::{Culprit, Verdict};

/// Version of this format; bumped on incompatible changes.
pub const FORMAT: u32 = 1;

/// The whole record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocateJson {
    /// Format version ([`FORMAT`]).
    pub locate_format: u32,
    /// The schedule.
    pub schedule: Kind,
    /// Seed of the `quick` matching.
    pub seed: u64,
    /// Per-group deadline, seconds.
    pub deadline_s: f64,
    /// The collective every group ran (`all_reduce`, ...), set by the runner (absent in older
    /// records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<String>,
    /// The data type of every group's measurement (`float`, ...), set by the runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<String>,
    /// The message size of every group's measurement, bytes, set by the runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The thresholds.
    pub thresholds: Thresholds,
    /// Nodes and their GPUs (rank, device, PCI id), in node-index order.
    pub nodes: Vec<Node>,
    /// Every round.
    pub rounds: Vec<RoundJson>,
    /// Pair schedules: busbw (GB/s) of every pair of nodes, `[a][b]`, first measurement;
    /// `null` on the diagonal, for pairs not measured and for hung or failed pairs.
    pub pair_matrix: Option<Vec<Vec<Option<f64>>>>,
    /// Pair schedules: per node, the upper median of its pairs as a multiple of the median
    /// pair (`null`: no pair measured).
    pub node_scores: Option<Vec<Option<f64>>>,
    /// The culprits named.
    pub verdicts: Vec<VerdictJson>,
    /// When nobody is named: the group closest to being slow.
    #[serde(default)]
    pub closest: Option<Closest>,
    /// The whole job's measurement against its pairs.
    #[serde(default)]
    pub job: Option<JobCheck>,
    /// Remarks.
    pub notes: Vec<String>,
    /// What the rounds could not see (absent in older records).
    #[serde(default)]
    pub unseen: Vec<String>,
    /// Why the run stopped early.
    pub stopped: Option<String>,
    /// Wall time of all rounds, seconds.
    pub wall_s: f64,
    /// The exit code of the run.
    pub exit_code: u8,
}

/// One round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundJson {
    /// 1-based index.
    pub round: usize,
    /// The schedule's step.
    pub phase: Phase,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Its groups, in colour order.
    pub groups: Vec<GroupJson>,
}

/// One group of a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupJson {
    /// Colour (index in the round).
    pub group: usize,
    /// What it tests.
    pub subject: Subject,
    /// The subject with host names, as printed.
    pub description: String,
    /// Why it ran.
    pub role: Role,
    /// World ranks.
    pub ranks: Vec<usize>,
    /// What the runner reported.
    pub outcome: GroupOutcome,
    /// The judgement.
    pub state: State,
    /// The reference busbw it was compared with, GB/s.
    pub reference: Option<f64>,
    /// busbw / reference.
    pub ratio: Option<f64>,
    /// Below `--locate-min-busbw`.
    pub below_min: bool,
}

/// One verdict with the names resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictJson {
    /// The verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The culprit as printed.
    pub description: String,
    /// Hosts involved.
    pub hosts: Vec<String>,
    /// GPUs involved (for GPU culprits).
    pub gpus: Vec<Gpu>,
}

/// The record of `report` on `topo`.
pub fn document(report: &Report, topo: &Topology) -> LocateJson {
    let rounds = report
        .rounds
        .iter()
        .map(|rec| RoundJson {
            round: rec.round.index,
            phase: rec.round.phase,
            wall_s: rec.wall_s,
            groups: rec
                .round
                .groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let j = rec.judgement(i);
                    GroupJson {
                        group: i,
                        subject: g.subject.clone(),
                        description: g.subject.describe(topo),
                        role: g.role,
                        ranks: g.ranks.clone(),
                        outcome: rec
                            .outcomes
                            .get(i)
                            .cloned()
                            .unwrap_or(GroupOutcome::Failed {
                                error: "no result".into(),
                            }),
                        state: j.map_or(State::Error, |j| j.state),
                        reference: j.and_then(|j| j.reference).map(|r| r.value),
                        ratio: j.and_then(|j| j.ratio),
                        below_min: j.is_some_and(|j| j.below_min),
                    }
                })
                .collect(),
        })
        .collect();
    let pairs = matches!(report.config.schedule, Kind::Quick | Kind::Full)
        && report.rounds.iter().any(|r| r.round.phase == Phase::Pairs);
    let (pair_matrix, node_scores) = if pairs {
        let n = topo.nodes();
        let m = PairMatrix::from_history(n, &report.rounds);
        let f = analyse(&m, &report.config.thresholds);
        let reference = f.pair_ref.or(f.node_ref).map(|r| r.value);
        let matrix = (0..n)
            .map(|a| (0..n).map(|b| m.get(a, b).and_then(|c| c.busbw)).collect())
            .collect();
        let scores = f
            .scores
            .iter()
            .map(|s| Some(s.as_ref()?.score / reference?))
            .collect();
        (Some(matrix), Some(scores))
    } else {
        (None, None)
    };
    let verdicts = report
        .verdicts
        .iter()
        .map(|v| VerdictJson {
            verdict: v.clone(),
            description: v.culprit.describe(topo),
            hosts: v.culprit.hosts(topo),
            gpus: match &v.culprit {
                Culprit::Gpus { node, gpus } => gpus
                    .iter()
                    .filter_map(|&g| topo.gpu(*node, g).cloned())
                    .collect(),
                _ => Vec::new(),
            },
        })
        .collect();
    LocateJson {
        locate_format: FORMAT,
        schedule: report.config.schedule,
        seed: report.config.seed,
        deadline_s: report.config.deadline.as_secs_f64(),
        collective: None,
        datatype: None,
        bytes: None,
        thresholds: report.config.thresholds,
        nodes: topo.all_nodes().to_vec(),
        rounds,
        pair_matrix,
        node_scores,
        verdicts,
        closest: report.closest.clone(),
        job: report.job.clone(),
        notes: report.notes.clone(),
        unseen: report.unseen.clone(),
        stopped: report.stopped.clone(),
        wall_s: report.wall_s(),
        exit_code: report.exit_code(),
    }
}

/// Why a text is not a locate record this version reads.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    /// JSON, but another kind of document.
    #[error("not a locate record (no locate_format key)")]
    NotLocate,
    /// A locate record of another format version.
    #[error("locate record format {0}; this nccl-perf reads format {FORMAT}")]
    Format(u64),
    /// A locate record with missing or mistyped fields.
    #[error("unreadable locate record: {0}")]
    Unreadable(serde_json::Error),
}

/// Reads a record back; a clear message for anything else (another JSON file, a newer format).
pub fn read(text: &str) -> Result<LocateJson, ReadError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(ReadError::NotJson)?;
    match value.get("locate_format").and_then(|v| v.as_u64()) {
        None => return Err(ReadError::NotLocate),
        Some(v) if v != u64::from(FORMAT) => return Err(ReadError::Format(v)),
        Some(_) => {}
    }
    serde_json::from_value(value).map_err(ReadError::Unreadable)
}

/// Whether `text` looks like a locate record (for tools that read several kinds of JSON).
pub fn is_locate(text: &str) -> bool {
    let head: String = text.chars().take(200).collect();
    head.trim_start().starts_with('{') && head.contains("\"locate_format\"")
}
