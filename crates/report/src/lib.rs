//! Everything the benchmark prints or writes: the nccl-tests text table and the JSON file.
//!
//! The model types below are filled by the runner; `table` renders them byte-for-byte in the
//! nccl-tests v2.19.6 layout (its numbers spelt by `numbers` as C's printf spells them), `formats`
//! names every output format, `json` writes upstream's `-J` schema (version 3) and `csv` the
//! `-J file.csv` table. The read side, used by the `nccl-perf` tool: `parse` reads text logs
//! and `json::read` JSON files into [`run::Run`]s (`load` picks between them for a file);
//! `markdown` renders them for documents; `health` judges them. Every output file of the project
//! (the tool's and the benchmarks') is written by `output_file`, under one set of rules.

pub mod csv;
pub mod formats;
pub mod health;
pub mod iterations;
pub mod json;
pub mod load;
pub mod markdown;
pub mod numbers;
pub mod output_file;
pub mod parse;
pub mod run;
pub mod split;
pub mod table;

/// The step between two sizes of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Multiply by this factor (`-f`, when > 1).
    Factor(u64),
    /// Add this many bytes (`-i`).
    Bytes(u64),
}

/// The run parameters shown in the header line and the JSON `config` object.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// Program name (basename of `argv[0]`), e.g. `all_reduce_perf`.
    pub program: String,
    /// `-t`
    pub nthreads: i64,
    /// `-g`
    pub ngpus: i64,
    /// `-b` before the memory clamp.
    pub min_bytes: u64,
    /// `-e` before the memory clamp.
    pub max_bytes: u64,
    /// `-f` / `-i`
    pub step: Step,
    /// `-w`
    pub warmup_iters: i64,
    /// `-n`
    pub iters: i64,
    /// `-m`
    pub agg_iters: i64,
    /// `-c`
    pub check: i64,
    /// `-G`
    pub graph: i64,
    /// `-u`
    pub unalign: i64,
    /// `-z`
    pub blocking: i64,
    /// `-I 1`
    pub per_iter: bool,
    /// `-K`
    pub per_iter_skip: i64,
    /// `-p 1`
    pub parallel_init: bool,
    /// `-C 1`
    pub report_cputime: bool,
    /// `-S 1`
    pub report_timestamps: bool,
}

/// nccl-tests' defaults (no program, one thread and GPU, no sizes), for what a log's header or
/// a test does not say.
impl Default for RunInfo {
    fn default() -> RunInfo {
        RunInfo {
            program: String::new(),
            nthreads: 1,
            ngpus: 1,
            min_bytes: 0,
            max_bytes: 0,
            step: Step::Factor(1),
            warmup_iters: 1,
            iters: 20,
            agg_iters: 1,
            check: 1,
            graph: 0,
            unalign: 0,
            blocking: 0,
            per_iter: false,
            per_iter_skip: 0,
            parallel_init: false,
            report_cputime: false,
            report_timestamps: false,
        }
    }
}

/// One GPU of the run, as shown in a `#  Rank ...` device line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Global rank shown in the line (world rank · T · G + local index).
    pub rank: i64,
    /// Split colour (0 without split).
    pub group: i64,
    /// Process id.
    pub pid: u32,
    /// Short host name (up to the first `.`).
    pub hostname: String,
    /// CUDA device ordinal.
    pub device: i64,
    /// PCI domain.
    pub pci_domain: u32,
    /// PCI bus.
    pub pci_bus: u32,
    /// PCI device.
    pub pci_device: u32,
    /// CUDA device name, e.g. `NVIDIA H200`.
    pub name: String,
}

/// The hosts of the device lines from rank `first` to rank `last`, in rank order, each once.
pub fn hosts_of_ranks(devices: &[DeviceInfo], first: i64, last: i64) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for d in devices.iter().filter(|d| (first..=last).contains(&d.rank)) {
        if !hosts.contains(&d.hostname) {
            hosts.push(d.hostname.clone());
        }
    }
    hosts
}

/// Per-iteration statistics of one half-row (`-I 1`), all times in microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct PerIterStats {
    /// Leading samples excluded from the statistics (`-K`).
    pub skipped: i64,
    /// Minimum.
    pub min_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Mean.
    pub avg_us: f64,
    /// Median (element N/2 of the sorted samples).
    pub p50_us: f64,
    /// Nearest-rank 95th percentile.
    pub p95_us: f64,
    /// Nearest-rank 99th percentile.
    pub p99_us: f64,
    /// Population standard deviation.
    pub stdev_us: f64,
    /// Coefficient of variation in percent.
    pub cv_pct: f64,
    /// Every sample, skipped ones included.
    pub times_us: Vec<f64>,
    /// Per-process rows of per-iteration maxima (only with more than one process).
    pub per_process_max_times_us: Vec<Vec<f64>>,
}

/// One measured half of a row (out-of-place or in-place).
#[derive(Debug, Clone, PartialEq)]
pub struct HalfResult {
    /// Time per operation in microseconds (completion time, or CPU enqueue time with `-C 1`).
    pub time_us: f64,
    /// Algorithm bandwidth, GB/s.
    pub algbw: f64,
    /// Bus bandwidth, GB/s.
    pub busbw: f64,
    /// Number of wrong elements; `None` prints `N/A` (validation off or not reported).
    pub wrong: Option<f64>,
    /// Per-iteration statistics with `-I 1`.
    pub per_iter: Option<PerIterStats>,
}

/// One table row.
#[derive(Debug, Clone, PartialEq)]
pub struct RowResult {
    /// Printed size in bytes.
    pub size: u64,
    /// Printed element count.
    pub count: u64,
    /// Datatype name.
    pub dtype: String,
    /// Op column: an op name, `none`, or empty (hypercube).
    pub op: String,
    /// Root column (-1 for non-rooted collectives).
    pub root: i64,
    /// Out-of-place half.
    pub out_of_place: HalfResult,
    /// In-place half.
    pub in_place: HalfResult,
    /// Local time `%Y-%m-%d %H:%M:%S` with `-S 1`.
    pub timestamp: Option<String>,
    /// `actual_iterations` in JSON (`-n`).
    pub iterations: i64,
}

/// What the footer reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Global count of measurements with data errors (`Out of bounds values`).
    pub oob_errors: u64,
    /// Average bus bandwidth over every printed half-row.
    pub avg_busbw: f64,
    /// `None` without `NCCL_TESTS_MIN_BW`; otherwise whether the average met 0.9 × the minimum.
    pub min_bw_ok: Option<bool>,
    /// `ncclGetLastError` text ("" when none).
    pub last_error: String,
    /// The `-M 1` memory report body, if requested.
    pub memory_report: Option<String>,
}
