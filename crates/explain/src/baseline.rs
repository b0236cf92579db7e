//! A site's baseline: per collective, job shape (GPU model, ranks, nodes, GPUs per node), size
//! and in/out of place, the bus bandwidths known-good runs reached, so that a health check
//! judges a node against the fleet's own good nodes before the built-in table. Made from runs
//! ([`Baseline::add_run`]), merged ([`Baseline::merge`]), written and read as text
//! ([`format`], docs/health.md "Baselines").

pub mod format;

use crate::observed::Run;
use crate::rows::BANDWIDTH_BOUND;
use crate::sku::same_gpu;
use crate::units::size;
use serde::Serialize;

/// The job shape a row is for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobShape {
    /// The GPU model as the device lines name it.
    pub gpu: String,
    /// Ranks.
    pub ranks: u32,
    /// Nodes.
    pub nodes: u32,
    /// GPUs (ranks) on the fullest node.
    pub gpus_per_node: u32,
}

impl JobShape {
    /// The shape of `run`; `None` when the run does not give its GPU model or its nodes (a log
    /// without device lines).
    pub fn of(run: &Run) -> Option<JobShape> {
        let gpu = run.gpu_names.first().filter(|g| !g.trim().is_empty())?;
        if run.nranks == 0 || run.nnodes == 0 || run.ranks_per_node == 0 {
            return None;
        }
        Some(JobShape {
            gpu: gpu.trim().to_string(),
            ranks: run.nranks,
            nodes: run.nnodes,
            gpus_per_node: run.ranks_per_node,
        })
    }

    /// The same shape (GPU names compared as [`same_gpu`] does).
    pub fn matches(&self, other: &JobShape) -> bool {
        same_gpu(&self.gpu, &other.gpu)
            && self.ranks == other.ranks
            && self.nodes == other.nodes
            && self.gpus_per_node == other.gpus_per_node
    }

    /// In words: `8 × NVIDIA H100 80GB HBM3 on 1 node (8 per node)`.
    pub fn words(&self) -> String {
        format!(
            "{} × {} on {} node{} ({} per node)",
            self.ranks,
            self.gpu,
            self.nodes,
            if self.nodes == 1 { "" } else { "s" },
            self.gpus_per_node
        )
    }
}

/// One row: the busbw every known-good run reached at one size of one collective and shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Benchmark name without `_perf`.
    pub collective: String,
    /// The job shape.
    pub shape: JobShape,
    /// Message size, bytes.
    pub bytes: u64,
    /// In place (else out of place).
    pub in_place: bool,
    /// The figure the runs are of: busbw, or algbw for one rank (whose busbw is 0 by
    /// definition for most collectives).
    pub algbw: bool,
    /// Each run's figure, GB/s, in the order added.
    pub runs: Vec<f64>,
}

impl Entry {
    /// The figure judged against: the median of the runs.
    pub fn busbw(&self) -> f64 {
        median(&self.runs).unwrap_or(0.0)
    }

    /// The lowest and highest run.
    pub fn spread(&self) -> (f64, f64) {
        let lo = self.runs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    }

    fn same_key(&self, o: &Entry) -> bool {
        self.collective == o.collective
            && self.bytes == o.bytes
            && self.in_place == o.in_place
            && self.algbw == o.algbw
            && self.shape.matches(&o.shape)
    }
}

/// A baseline: rows from known-good runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Baseline {
    /// The rows, in the order first seen.
    pub entries: Vec<Entry>,
}

/// One size judged against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeJudged {
    /// Message size, bytes.
    pub bytes: u64,
    /// In place.
    pub in_place: bool,
    /// This run's busbw (algbw for one rank), GB/s.
    pub busbw: f64,
    /// The baseline's (median), GB/s.
    pub baseline_busbw: f64,
    /// This run's over the baseline's, percent.
    pub percent: f64,
}

/// A collective judged against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    /// The median of the judged sizes' percentages: the collective's figure.
    pub percent: f64,
    /// The baseline's busbw at the largest judged out-of-place size (else in place), GB/s.
    pub expected_busbw: f64,
    /// The judged sizes: from 16 MiB up where the run has such sizes in common with the
    /// baseline, else every size in common.
    pub sizes: Vec<SizeJudged>,
}

impl Judged {
    /// The size furthest below its baseline figure.
    pub fn worst(&self) -> Option<&SizeJudged> {
        self.sizes
            .iter()
            .min_by(|a, b| a.percent.total_cmp(&b.percent))
    }
}

/// What the baseline says of one collective.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// The baseline has no row for this collective: it says nothing.
    Silent,
    /// Rows for this collective, but not for this job (another shape, no size in common, or a
    /// run that does not give its shape): the reason, in words.
    NotMatching(String),
    /// Judged.
    Judged(Judged),
}

/// Why a run cannot be added to a baseline.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AddError {
    /// The run names no collective.
    #[error("the run does not name its collective")]
    NoCollective,
    /// The run does not give its GPU model or nodes.
    #[error("{0}: the run does not give its GPU model, ranks or nodes (no device lines)")]
    NoShape(String),
    /// The run has no rows.
    #[error("{0}: the run has no rows")]
    NoRows(String),
}

impl Baseline {
    /// Adds one known-good run: one value per size and place.
    pub fn add_run(&mut self, run: &Run) -> Result<(), AddError> {
        if run.collective.is_empty() {
            return Err(AddError::NoCollective);
        }
        let shape = JobShape::of(run).ok_or_else(|| AddError::NoShape(run.collective.clone()))?;
        let mut added = false;
        let algbw = uses_algbw(run);
        for r in run.rows.iter() {
            let v = if algbw { r.algbw } else { r.busbw };
            if !v.is_finite() || v < 0.0 {
                continue;
            }
            self.add(Entry {
                collective: run.collective.clone(),
                shape: shape.clone(),
                bytes: r.bytes,
                in_place: r.in_place,
                algbw,
                runs: vec![v],
            });
            added = true;
        }
        if added {
            Ok(())
        } else {
            Err(AddError::NoRows(run.collective.clone()))
        }
    }

    /// Adds the rows of `other`: a row of the same collective, shape, size and place gets its
    /// runs appended (its median is then over them all).
    pub fn merge(&mut self, other: Baseline) {
        for e in other.entries {
            self.add(e);
        }
    }

    fn add(&mut self, e: Entry) {
        match self.entries.iter_mut().find(|o| o.same_key(&e)) {
            Some(o) => o.runs.extend(e.runs),
            None => self.entries.push(e),
        }
    }

    /// The collectives and shapes it holds, in words, at most three then a count.
    fn shapes_of(&self, collective: &str) -> String {
        let mut shapes: Vec<String> = Vec::new();
        for e in self.entries.iter().filter(|e| e.collective == collective) {
            let w = e.shape.words();
            if !shapes.contains(&w) {
                shapes.push(w);
            }
        }
        let more = shapes.len().saturating_sub(3);
        shapes.truncate(3);
        let mut s = shapes.join("; ");
        if more > 0 {
            s += &format!(" and {more} more");
        }
        s
    }

    /// `run` judged against the rows of its collective and shape, size by size.
    pub fn judge(&self, run: &Run) -> Judgement {
        if !self.entries.iter().any(|e| e.collective == run.collective) {
            return Judgement::Silent;
        }
        let Some(shape) = JobShape::of(run) else {
            return Judgement::NotMatching(
                "the run does not give its GPU model or nodes to match a baseline row".into(),
            );
        };
        let rows: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.collective == run.collective && e.shape.matches(&shape))
            .collect();
        if rows.is_empty() {
            return Judgement::NotMatching(format!(
                "this job is {}; the baseline has {}",
                shape.words(),
                self.shapes_of(&run.collective)
            ));
        }
        let algbw = uses_algbw(run);
        let common: Vec<SizeJudged> = run
            .rows
            .iter()
            .filter_map(|r| {
                let e = rows
                    .iter()
                    .find(|e| e.bytes == r.bytes && e.in_place == r.in_place && e.algbw == algbw)?;
                let (v, base) = (if algbw { r.algbw } else { r.busbw }, e.busbw());
                (base > 0.0 && v.is_finite()).then(|| SizeJudged {
                    bytes: r.bytes,
                    in_place: r.in_place,
                    busbw: v,
                    baseline_busbw: base,
                    percent: v / base * 100.0,
                })
            })
            .collect();
        // One rank in place is no copy at all (its time is next to nothing): out of place alone.
        let common: Vec<SizeJudged> = common
            .into_iter()
            .filter(|s| !(algbw && s.in_place))
            .collect();
        let large = common.iter().any(|s| s.bytes >= BANDWIDTH_BOUND);
        let sizes: Vec<SizeJudged> = common
            .into_iter()
            .filter(|s| !large || s.bytes >= BANDWIDTH_BOUND)
            .collect();
        let percents: Vec<f64> = sizes.iter().map(|s| s.percent).collect();
        let Some(percent) = median(&percents) else {
            let (lo, hi) = rows.iter().fold((u64::MAX, 0), |(lo, hi), e| {
                (lo.min(e.bytes), hi.max(e.bytes))
            });
            return Judgement::NotMatching(format!(
                "no size in common with the baseline's {} (it has {} to {})",
                run.collective,
                size(lo),
                size(hi)
            ));
        };
        let expected_busbw = sizes
            .iter()
            .filter(|s| !s.in_place)
            .max_by_key(|s| s.bytes)
            .or_else(|| sizes.iter().max_by_key(|s| s.bytes))
            .map_or(0.0, |s| s.baseline_busbw);
        Judgement::Judged(Judged {
            percent,
            expected_busbw,
            sizes,
        })
    }
}

/// Whether `run` is judged by its algbw: one rank, where busbw is 0 by definition for most
/// collectives (a device-local copy).
fn uses_algbw(run: &Run) -> bool {
    run.nranks == 1
}

/// The median of `v` (the mean of the middle two for an even count); `None` when empty.
fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
pub(crate) mod tests;
