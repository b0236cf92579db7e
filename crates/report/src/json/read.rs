//! Reading `-J` JSON files back into [`Run`]s: upstream's schema versions 1 to 3 (misspelled v1
//! keys included), our writer's output, and `nccl-perf parse` output with its `nccl_perf_log`
//! object. A file may hold several documents one after the other.
//!
//! What the schema does not hold is taken from `args` when it is there (`-u`, `-z`, `-S`, as the
//! benchmark parsed them) and otherwise defaults: the `-S 1` timestamps, the `-M 1` memory line
//! and the version line only come back from a `nccl_perf_log` object.

use serde::Deserialize;

use super::schema::{Device, Float, LogJson, PerIterJson};
use crate::numbers::NO_ROWS_AVERAGE;
use crate::run::{ReadError, Run, Source, TextDetails};
use crate::{HalfResult, PerIterStats, RowResult, RunInfo, Step, Summary};

/// Reads every JSON document of `text` (`file` names it in errors and sources).
pub fn read_documents(text: &str, file: &str) -> Result<Vec<Run>, ReadError> {
    let mut runs = Vec::new();
    for doc in serde_json::Deserializer::from_str(text).into_iter::<DocIn>() {
        match doc {
            Ok(d) => runs.push(d.into_run(file)),
            Err(e) => {
                let message = format!("not a nccl-tests JSON document: {e}");
                return Err(ReadError::at(file, e.line().max(1), message));
            }
        }
    }
    if runs.is_empty() {
        return Err(ReadError::whole(file, "no JSON document"));
    }
    Ok(runs)
}

/// Upstream writes booleans as `"true"`/`"false"`; real booleans are accepted too.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Flag {
    Bool(bool),
    Text(String),
}

impl Flag {
    fn get(&self) -> Option<bool> {
        match self {
            Flag::Bool(b) => Some(*b),
            Flag::Text(t) if t == "true" => Some(true),
            Flag::Text(t) if t == "false" => Some(false),
            Flag::Text(_) => None,
        }
    }
}

fn no() -> Flag {
    Flag::Bool(false)
}

/// `root`: the `%6i` string upstream writes, or a plain number.
#[derive(Deserialize)]
#[serde(untagged)]
enum Root {
    Number(i64),
    Text(String),
}

#[derive(Deserialize)]
struct DocIn {
    #[serde(default)]
    start_time: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    nccl_version: i32,
    config: ConfigIn,
    #[serde(default)]
    results: Vec<ResultIn>,
    out_of_bounds: Option<OutOfBoundsIn>,
    #[serde(alias = "average_bus_bandwidith")]
    average_bus_bandwidth: Option<AverageIn>,
    #[serde(default)]
    errors: Vec<Option<String>>,
    #[serde(default)]
    end_time: String,
    nccl_perf_log: Option<LogJson>,
    /// A benchmark's `--explain` record, kept as read.
    nccl_perf_explain: Option<serde_json::Value>,
    /// The hang watch's record of a run it ended: its `line` is kept.
    nccl_perf_hang: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ConfigIn {
    nthreads: i64,
    ngpus: i64,
    minimum_bytes: u64,
    maximum_bytes: u64,
    step_factor: Option<u64>,
    step_bytes: Option<u64>,
    warmup_iters: i64,
    iterations: i64,
    aggregated_iterations: i64,
    validation: i64,
    graph: i64,
    #[serde(default = "no")]
    blocking_collectives: Flag,
    #[serde(default = "no")]
    per_iter_timing: Flag,
    #[serde(default)]
    per_iter_skip: i64,
    #[serde(default = "no")]
    parallel_init: Flag,
    #[serde(default)]
    devices: Vec<Device>,
}

#[derive(Deserialize)]
struct ResultIn {
    size: u64,
    count: u64,
    #[serde(rename = "type")]
    dtype: String,
    redop: String,
    root: Root,
    out_of_place: HalfIn,
    out_of_place_per_iter: Option<PerIterJson>,
    in_place: HalfIn,
    in_place_per_iter: Option<PerIterJson>,
    #[serde(default)]
    actual_iterations: i64,
}

#[derive(Deserialize)]
struct HalfIn {
    time: Option<Float>,
    cpu_time: Option<Float>,
    alg_bw: Float,
    bus_bw: Float,
    nwrong: Option<Float>,
}

#[derive(Deserialize)]
struct OutOfBoundsIn {
    count: u64,
}

#[derive(Deserialize)]
struct AverageIn {
    #[serde(alias = "bandwidith")]
    bandwidth: Float,
    #[serde(default)]
    okay: Option<Flag>,
}

impl DocIn {
    fn into_run(self, file: &str) -> Run {
        let flags = ArgFlags::from_args(&self.args);
        let c = &self.config;
        let log = self.nccl_perf_log.unwrap_or_default();
        let cputime = self
            .results
            .iter()
            .any(|r| r.out_of_place.cpu_time.is_some());
        let info = RunInfo {
            // A log's test that never named itself has an empty program in `args`: it stays
            // unnamed (not the fallback name of a binary).
            program: self
                .args
                .first()
                .filter(|a| !a.is_empty())
                .map(|a| nccl_perf_cli::program_name(a))
                .unwrap_or_default(),
            nthreads: c.nthreads,
            ngpus: c.ngpus,
            min_bytes: c.minimum_bytes,
            max_bytes: c.maximum_bytes,
            step: match (c.step_factor, c.step_bytes) {
                (Some(f), _) => Step::Factor(f),
                (None, Some(b)) => Step::Bytes(b),
                (None, None) => Step::Factor(1),
            },
            warmup_iters: c.warmup_iters,
            iters: c.iterations,
            agg_iters: c.aggregated_iterations,
            check: c.validation,
            graph: c.graph,
            unalign: flags.unalign,
            blocking: match c.blocking_collectives.get() {
                Some(true) => flags.blocking.max(1),
                _ => 0,
            },
            per_iter: c.per_iter_timing.get().unwrap_or(false),
            per_iter_skip: c.per_iter_skip,
            parallel_init: c.parallel_init.get().unwrap_or(false),
            report_cputime: cputime,
            report_timestamps: flags.timestamps || !log.timestamps.is_empty(),
        };
        let devices = if log.devices.is_empty() {
            &c.devices
        } else {
            &log.devices
        };
        let devices = devices.iter().map(Device::to_info).collect();
        let rows: Vec<RowResult> = self
            .results
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.into_row(log.timestamps.get(i).cloned()))
            .collect();
        let summary = self.out_of_bounds.map(|oob| {
            let avg = self
                .average_bus_bandwidth
                .as_ref()
                .map_or(f64::NAN, |a| a.bandwidth.get());
            Summary {
                oob_errors: oob.count,
                // Upstream prints the NaN average of a run without rows as `-nan` (x86).
                avg_busbw: if avg.is_nan() && rows.is_empty() {
                    NO_ROWS_AVERAGE
                } else {
                    avg
                },
                min_bw_ok: self
                    .average_bus_bandwidth
                    .as_ref()
                    .and_then(|a| a.okay.as_ref())
                    .and_then(Flag::get),
                last_error: self.errors.into_iter().flatten().next().unwrap_or_default(),
                memory_report: log.memory_report.clone(),
            }
        });
        let source = if log.first_line > 0 {
            Source {
                file: log.source.clone(),
                first_line: log.first_line,
                last_line: log.last_line,
            }
        } else {
            Source {
                file: file.to_string(),
                first_line: 0,
                last_line: 0,
            }
        };
        Run {
            explain: self.nccl_perf_explain,
            info,
            devices,
            nccl_version: self.nccl_version,
            args: self.args,
            env: self.env,
            start_time: self.start_time,
            end_time: self.end_time,
            text: TextDetails {
                version_line: log.version_line,
                memory_clamp: log.memory_clamp,
                table_header: log.table_header || !rows.is_empty() || summary.is_some(),
                no_header: log.no_header,
                error_column: log.error_column,
                stopped: log.stopped,
                footer_gap: log.footer_gap,
                partial_devices: log.partial_devices.iter().map(Device::to_info).collect(),
                broken_lines: log
                    .broken_lines
                    .into_iter()
                    .map(|b| (b.line, b.why))
                    .collect(),
                extra_lines: log
                    .extra_lines
                    .into_iter()
                    .map(|l| (l.after_rows, l.text))
                    .collect(),
                hang: self
                    .nccl_perf_hang
                    .as_ref()
                    .and_then(|h| h.get("line")?.as_str().map(crate::parse::hang_line)),
                // The -J document keeps nccl-tests' keys: no place for wrong data.
                wrong_on: None,
            },
            rows,
            summary,
            source,
        }
    }
}

impl ResultIn {
    fn into_row(self, timestamp: Option<String>) -> RowResult {
        let root = match self.root {
            Root::Number(n) => n,
            Root::Text(t) => t.trim().parse().unwrap_or(-1),
        };
        RowResult {
            size: self.size,
            count: self.count,
            dtype: self.dtype,
            op: self.redop,
            root,
            out_of_place: self.out_of_place.into_half(self.out_of_place_per_iter),
            in_place: self.in_place.into_half(self.in_place_per_iter),
            timestamp,
            iterations: self.actual_iterations,
        }
    }
}

impl HalfIn {
    fn into_half(self, per_iter: Option<PerIterJson>) -> HalfResult {
        HalfResult {
            time_us: self.time.or(self.cpu_time).map_or(f64::NAN, Float::get),
            algbw: self.alg_bw.get(),
            busbw: self.bus_bw.get(),
            wrong: self.nwrong.map(Float::get),
            per_iter: per_iter.map(PerIterStats::from),
        }
    }
}

/// The options the schema lacks, read from `args` as the benchmark read them (defaults when
/// `args` cannot be parsed).
#[derive(Default)]
struct ArgFlags {
    unalign: i64,
    blocking: i64,
    timestamps: bool,
}

impl ArgFlags {
    fn from_args(args: &[String]) -> ArgFlags {
        let Ok(raw) = nccl_perf_cli::parse(args.iter().skip(1)) else {
            return ArgFlags::default();
        };
        let int = |long: &str| {
            raw.get(long)
                .and_then(|v| {
                    nccl_perf_cli::cnum::strtol(&v.to_string_lossy()).and_then(|(n, _)| n)
                })
                .unwrap_or(0)
        };
        ArgFlags {
            unalign: int("unalign"),
            blocking: int("blocking"),
            timestamps: int("report_timestamps") != 0,
        }
    }
}
