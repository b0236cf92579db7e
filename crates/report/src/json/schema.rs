//! The serialisable shape of upstream's JSON schema version 3: field order here is key order in
//! the file.

use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Deserializer, Serialize};

use crate::{DeviceInfo, HalfResult, PerIterStats, RowResult, RunInfo, Step, Summary};

/// A double as upstream writes it, except that NaN and infinities become strings; read back
/// from a number or from upstream's `"nan"`/`"inf"` strings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Float(pub f64);

impl Float {
    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Float {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Float, D::Error> {
        /// A number, or a string holding one.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(f64),
            Text(#[serde(deserialize_with = "float_text")] f64),
        }
        Ok(match Written::deserialize(d)? {
            Written::Number(v) | Written::Text(v) => Float(v),
        })
    }
}

fn float_text<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let s = String::deserialize(d)?;
    s.trim()
        .parse()
        .map_err(|_| serde::de::Error::custom(format!("'{s}' is not a number")))
}

impl Serialize for Float {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if v.is_nan() {
            s.serialize_str("nan")
        } else if v.is_infinite() {
            s.serialize_str(if v > 0.0 { "inf" } else { "-inf" })
        } else {
            s.serialize_f64(v)
        }
    }
}

/// Upstream's booleans are the strings `"true"` and `"false"`.
fn flag(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// The whole document.
#[derive(Serialize)]
pub(super) struct Document<'a> {
    pub version: u32,
    pub start_time: &'a str,
    pub args: &'a [String],
    pub env: &'a [String],
    pub nccl_version: i32,
    pub config: &'a Config,
    pub results: &'a [RowJson],
    #[serde(flatten)]
    pub end: Option<End<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_perf_log: Option<&'a LogJson>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub nccl_perf_problems: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub nccl_perf_notes: &'a [String],
    #[serde(skip_serializing_if = "<[crate::split::SplitGroup]>::is_empty")]
    pub nccl_perf_split_groups: &'a [crate::split::SplitGroup],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_perf_explain: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_perf_hang: Option<&'a serde_json::Value>,
}

/// `config`.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Config {
    nthreads: i64,
    ngpus: i64,
    minimum_bytes: u64,
    maximum_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    step_factor: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step_bytes: Option<u64>,
    warmup_iters: i64,
    iterations: i64,
    aggregated_iterations: i64,
    validation: i64,
    graph: i64,
    blocking_collectives: &'static str,
    per_iter_timing: &'static str,
    per_iter_skip: i64,
    parallel_init: &'static str,
    devices: Vec<Device>,
}

impl Config {
    pub fn new(info: &RunInfo, devices: Vec<Device>) -> Config {
        let (step_factor, step_bytes) = match info.step {
            Step::Factor(f) => (Some(f), None),
            Step::Bytes(b) => (None, Some(b)),
        };
        Config {
            nthreads: info.nthreads,
            ngpus: info.ngpus,
            minimum_bytes: info.min_bytes,
            maximum_bytes: info.max_bytes,
            step_factor,
            step_bytes,
            warmup_iters: info.warmup_iters,
            iterations: info.iters,
            aggregated_iterations: info.agg_iters,
            validation: info.check,
            graph: info.graph,
            blocking_collectives: flag(info.blocking != 0),
            per_iter_timing: flag(info.per_iter),
            per_iter_skip: info.per_iter_skip,
            parallel_init: flag(info.parallel_init),
            devices,
        }
    }
}

/// One entry of `config.devices` (the first GPU of a process), also used for every GPU in
/// [`LogJson::devices`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// Global rank shown in the device line.
    pub rank: i64,
    /// Split colour.
    #[serde(default)]
    pub group: i64,
    /// Process id.
    pub pid: u32,
    /// Short host name.
    pub hostname: String,
    /// CUDA ordinal.
    pub device: i64,
    /// `domain:bus:device` in hex, e.g. `0000:18:00`.
    pub device_hex: String,
    /// CUDA device name.
    pub device_info: String,
}

impl Device {
    /// The model's device; a malformed `device_hex` gives PCI address 0.
    pub fn to_info(&self) -> DeviceInfo {
        let mut hex = self
            .device_hex
            .split(':')
            .map(|h| u32::from_str_radix(h, 16).unwrap_or(0));
        DeviceInfo {
            rank: self.rank,
            group: self.group,
            pid: self.pid,
            hostname: self.hostname.clone(),
            device: self.device,
            pci_domain: hex.next().unwrap_or(0),
            pci_bus: hex.next().unwrap_or(0),
            pci_device: hex.next().unwrap_or(0),
            name: self.device_info.clone(),
        }
    }
}

/// The `nccl_perf_log` object that `nccl-perf parse` adds after upstream's keys: what a text log
/// shows and the schema has no place for, so that `nccl-perf report` prints the log's lines
/// back byte for byte. Readers of upstream's schema ignore it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogJson {
    /// The log file the test was read from.
    pub source: String,
    /// First line of the test in that file (1-based).
    pub first_line: usize,
    /// Last line of the test in that file.
    pub last_line: usize,
    /// The `# nccl-tests version ...` line, verbatim, when the log has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_line: Option<String>,
    /// Every device line (one per GPU; `config.devices` keeps one per process).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
    /// The `-S 1` timestamp of each result, in `results` order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timestamps: Vec<String>,
    /// maxBytes after the memory clamp (`# Reducing maxBytes to N ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clamp: Option<u64>,
    /// The `-M 1` line's text after `GPU memory usage     : `.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_report: Option<String>,
    /// Whether the table header was printed (false when the test failed before it).
    #[serde(default = "yes")]
    pub table_header: bool,
    /// Other lines of the test (skip notes, failure messages), each after that many rows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_lines: Vec<ExtraLine>,
    /// The log shows the table without its header lines (an excerpt).
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_header: bool,
    /// The table's `error` column (older layouts) was read into `#wrong`: not a count.
    #[serde(default, skip_serializing_if = "is_false")]
    pub error_column: bool,
    /// Why the test stopped before its footer without failure lines (a cut log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Lines of the test that could not be read: line number and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken_lines: Vec<BrokenLine>,
    /// Device lines just before an excerpt that starts at a later device line (some GPUs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partial_devices: Vec<Device>,
    /// What the footer lacks (`no '# Out of bounds values' line`), when it is there in part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footer_gap: Option<String>,
}

/// A line of a test that could not be read (a row broken by interleaved output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrokenLine {
    /// Its line number in the log.
    pub line: usize,
    /// Why it could not be read.
    pub why: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn yes() -> bool {
    true
}

/// A line of the test that is neither header, device, table nor footer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtraLine {
    /// How many result rows precede it.
    pub after_rows: usize,
    /// The line, without its newline.
    pub text: String,
}

impl From<&DeviceInfo> for Device {
    fn from(d: &DeviceInfo) -> Device {
        Device {
            rank: d.rank,
            group: d.group,
            pid: d.pid,
            hostname: d.hostname.clone(),
            device: d.device,
            device_hex: format!(
                "{:04x}:{:02x}:{:02x}",
                d.pci_domain, d.pci_bus, d.pci_device
            ),
            device_info: d.name.clone(),
        }
    }
}

/// One element of `results`.
#[derive(Debug, Clone, Serialize)]
pub(super) struct RowJson {
    size: u64,
    count: u64,
    #[serde(rename = "type")]
    dtype: String,
    redop: String,
    root: String,
    out_of_place: HalfJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    out_of_place_per_iter: Option<PerIterJson>,
    in_place: HalfJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    in_place_per_iter: Option<PerIterJson>,
    actual_iterations: i64,
    experiment_name: &'static str,
}

impl RowJson {
    pub fn new(r: &RowResult, cputime: bool) -> RowJson {
        RowJson {
            size: r.size,
            count: r.count,
            dtype: r.dtype.clone(),
            redop: r.op.clone(),
            root: format!("{:6}", r.root),
            out_of_place: HalfJson::new(&r.out_of_place, cputime),
            out_of_place_per_iter: r.out_of_place.per_iter.as_ref().map(PerIterJson::from),
            in_place: HalfJson::new(&r.in_place, cputime),
            in_place_per_iter: r.in_place.per_iter.as_ref().map(PerIterJson::from),
            actual_iterations: r.iterations,
            experiment_name: "",
        }
    }
}

/// `out_of_place` / `in_place`: `time` (or `cpu_time` with `-C 1`), `alg_bw`, `bus_bw`, `nwrong`
/// (`null` when errors are not reported).
#[derive(Debug, Clone)]
struct HalfJson {
    cputime: bool,
    time: Float,
    alg_bw: Float,
    bus_bw: Float,
    nwrong: Option<Float>,
}

impl HalfJson {
    fn new(h: &HalfResult, cputime: bool) -> HalfJson {
        HalfJson {
            cputime,
            time: Float(h.time_us),
            alg_bw: Float(h.algbw),
            bus_bw: Float(h.busbw),
            nwrong: h.wrong.map(Float),
        }
    }
}

impl Serialize for HalfJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Half", 4)?;
        let time_key = if self.cputime { "cpu_time" } else { "time" };
        st.serialize_field(time_key, &self.time)?;
        st.serialize_field("alg_bw", &self.alg_bw)?;
        st.serialize_field("bus_bw", &self.bus_bw)?;
        st.serialize_field("nwrong", &self.nwrong)?;
        st.end()
    }
}

/// `out_of_place_per_iter` / `in_place_per_iter` (`-I 1`), written and read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PerIterJson {
    #[serde(default)]
    skipped_iterations: i64,
    min_us: Float,
    max_us: Float,
    avg_us: Float,
    p50_us: Float,
    p95_us: Float,
    p99_us: Float,
    stdev_us: Float,
    cv_pct: Float,
    #[serde(default)]
    times_us: Vec<Float>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    per_process_max_times_us: Vec<Vec<Float>>,
}

impl From<&PerIterStats> for PerIterJson {
    fn from(p: &PerIterStats) -> PerIterJson {
        let floats = |v: &[f64]| v.iter().copied().map(Float).collect::<Vec<_>>();
        PerIterJson {
            skipped_iterations: p.skipped,
            min_us: Float(p.min_us),
            max_us: Float(p.max_us),
            avg_us: Float(p.avg_us),
            p50_us: Float(p.p50_us),
            p95_us: Float(p.p95_us),
            p99_us: Float(p.p99_us),
            stdev_us: Float(p.stdev_us),
            cv_pct: Float(p.cv_pct),
            times_us: floats(&p.times_us),
            per_process_max_times_us: p
                .per_process_max_times_us
                .iter()
                .map(|r| floats(r))
                .collect(),
        }
    }
}

impl From<PerIterJson> for PerIterStats {
    fn from(p: PerIterJson) -> PerIterStats {
        let all = |v: Vec<Float>| v.into_iter().map(Float::get).collect::<Vec<f64>>();
        PerIterStats {
            skipped: p.skipped_iterations,
            min_us: p.min_us.get(),
            max_us: p.max_us.get(),
            avg_us: p.avg_us.get(),
            p50_us: p.p50_us.get(),
            p95_us: p.p95_us.get(),
            p99_us: p.p99_us.get(),
            stdev_us: p.stdev_us.get(),
            cv_pct: p.cv_pct.get(),
            times_us: all(p.times_us),
            per_process_max_times_us: p.per_process_max_times_us.into_iter().map(all).collect(),
        }
    }
}

/// The keys written after `results` at the end of a complete run.
#[derive(Serialize)]
pub(super) struct End<'a> {
    out_of_bounds: OutOfBounds,
    average_bus_bandwidth: AverageBusBandwidth,
    errors: [&'a str; 1],
    end_time: &'a str,
}

impl<'a> End<'a> {
    pub fn new(s: &'a Summary, end_time: &'a str) -> End<'a> {
        End {
            out_of_bounds: OutOfBounds {
                count: s.oob_errors,
                okay: flag(s.oob_errors == 0),
            },
            average_bus_bandwidth: AverageBusBandwidth {
                bandwidth: Float(s.avg_busbw),
                okay: s.min_bw_ok.map_or("unchecked", flag),
            },
            errors: [&s.last_error],
            end_time,
        }
    }
}

#[derive(Serialize)]
struct OutOfBounds {
    count: u64,
    okay: &'static str,
}

#[derive(Serialize)]
struct AverageBusBandwidth {
    bandwidth: Float,
    okay: &'static str,
}
