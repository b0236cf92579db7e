//! The `-J file.json` writer (nccl-tests' schema version 3, the one v2.19.6 writes).
//!
//! [`JsonReport`] collects the run's description and rows and renders one JSON document, on one
//! line, with upstream's keys in upstream's order, so `tools/analyze_perf_json.py` reads it. Its
//! upstream quirks are kept: booleans as the strings `"true"`/`"false"`, `root` as the `%6i`
//! string, one device entry per process, NaN as the string `"nan"`.
//!
//! Deliberate differences (all still valid JSON that parses to the same values where upstream's
//! output is valid):
//! - numbers are written with the shortest representation that reads back exactly (`7.86505`,
//!   `0.0`) instead of `%lf` (`7.865050`, `0.000000`);
//! - infinities are written as the strings `"inf"`/`"-inf"` (upstream writes a bare `inf`, which
//!   is not JSON);
//! - strings are escaped by serde_json (`/` is not escaped) and are never truncated (upstream cuts
//!   a string at the first non-ASCII or control character, and after 2047 characters);
//! - `env` lists only the variables that describe the run ([`filtered_env`]): upstream dumps the
//!   whole environment, secrets included;
//! - the document is rendered at the end of the run (or by [`JsonReport::render_aborted`] after a
//!   failure) instead of being streamed while the run goes on.

mod env;
pub mod of_run;
pub mod read;
mod schema;

pub use env::filtered_env;
pub use schema::{Device, ExtraLine, LogJson};

use std::collections::HashSet;

use super::{DeviceInfo, RowResult, RunInfo, Summary};
use schema::{Config, Document, End, RowJson};

/// The schema version written in `"version"`.
pub const SCHEMA_VERSION: u32 = 3;

/// The JSON document of one run: created at the start, fed every row, rendered at the end.
#[derive(Debug, Clone)]
pub struct JsonReport {
    start_time: String,
    args: Vec<String>,
    env: Vec<String>,
    nccl_version: i32,
    config: Config,
    report_cputime: bool,
    results: Vec<RowJson>,
    log: Option<LogJson>,
    problems: Vec<String>,
    notes: Vec<String>,
    split_groups: Vec<super::split::SplitGroup>,
    explain: Option<serde_json::Value>,
    hang: Option<serde_json::Value>,
}

impl JsonReport {
    /// Starts a report.
    ///
    /// - `info`, `devices`: the run's parameters and every device line of the run; the `devices`
    ///   array keeps the first device of each process (host name and pid), in order.
    /// - `nccl_version`: the runtime NCCL version code (`ncclGetVersion`).
    /// - `start_time`: local time formatted `%Y-%m-%d %H:%M:%S` by the caller.
    /// - `args`: the command line, program name first.
    /// - `env`: `NAME=value` strings, normally [`filtered_env`] of the process environment.
    pub fn new(
        info: &RunInfo,
        devices: &[DeviceInfo],
        nccl_version: i32,
        start_time: String,
        args: Vec<String>,
        env: Vec<String>,
    ) -> JsonReport {
        let mut report = JsonReport {
            start_time,
            args,
            env,
            nccl_version,
            config: Config::new(info, Vec::new()),
            report_cputime: info.report_cputime,
            results: Vec::new(),
            log: None,
            problems: Vec::new(),
            notes: Vec::new(),
            split_groups: Vec::new(),
            explain: None,
            hang: None,
        };
        report.set_devices(info, devices, nccl_version);
        report
    }

    /// Sets the device list and the NCCL version of a report started before they were known
    /// (the benchmarks create the file before touching a GPU).
    pub fn set_devices(&mut self, info: &RunInfo, devices: &[DeviceInfo], nccl_version: i32) {
        let mut seen = HashSet::new();
        let process_devices = devices
            .iter()
            .filter(|d| seen.insert((d.hostname.as_str(), d.pid)))
            .map(Device::from)
            .collect();
        self.config = Config::new(info, process_devices);
        self.nccl_version = nccl_version;
    }

    /// Adds the `nccl_perf_log` object (written last) that `nccl-perf parse` uses to keep what
    /// a text log shows beyond upstream's schema.
    pub fn set_log(&mut self, log: LogJson) {
        self.log = Some(log);
    }

    /// Adds the `nccl_perf_problems` array (written last, only when not empty): why the run's
    /// numbers cannot be trusted, one line each ([`crate::health`]). Readers of
    /// upstream's schema ignore it.
    pub fn set_problems(&mut self, problems: Vec<String>) {
        self.problems = problems;
    }

    /// Adds the `nccl_perf_notes` array (written last, only when not empty): what the run says
    /// that does not make it untrustworthy ([`crate::health::notes`]).
    pub fn set_notes(&mut self, notes: Vec<String>) {
        self.notes = notes;
    }

    /// Adds one table row to `results`.
    pub fn add_row(&mut self, row: &RowResult) {
        self.results.push(RowJson::new(row, self.report_cputime));
    }

    /// The complete document: everything collected, then `out_of_bounds`,
    /// `average_bus_bandwidth`, `errors` and `end_time` (local time `%Y-%m-%d %H:%M:%S`).
    pub fn render(&self, summary: &Summary, end_time: &str) -> String {
        self.to_json(Some(End::new(summary, end_time)))
    }

    /// Records each split group's own measurements (`nccl_perf_split_groups`).
    pub fn set_split_groups(&mut self, groups: Vec<super::split::SplitGroup>) {
        self.split_groups = groups;
    }

    /// Records `--explain`'s object (`nccl_perf_explain`: its lines, verdict and per-row
    /// fields).
    pub fn set_explain(&mut self, explain: serde_json::Value) {
        self.explain = Some(explain);
    }

    /// Records the hang watch's verdict and evidence (`nccl_perf_hang`), kept by every later
    /// rendering.
    pub fn set_hang(&mut self, hang: serde_json::Value) {
        self.hang = Some(hang);
    }

    /// The document of a run that failed before its footer: what was collected so far (the
    /// rows completed), closed properly, without the footer keys and `end_time` (as upstream,
    /// which adds `end_time` only when the failure happens outside every nested container).
    pub fn render_aborted(&self) -> String {
        self.to_json(None)
    }

    fn to_json(&self, end: Option<End<'_>>) -> String {
        let doc = Document {
            version: SCHEMA_VERSION,
            start_time: &self.start_time,
            args: &self.args,
            env: &self.env,
            nccl_version: self.nccl_version,
            config: &self.config,
            results: &self.results,
            end,
            nccl_perf_log: self.log.as_ref(),
            nccl_perf_problems: &self.problems,
            nccl_perf_notes: &self.notes,
            nccl_perf_split_groups: &self.split_groups,
            nccl_perf_explain: self.explain.as_ref(),
            nccl_perf_hang: self.hang.as_ref(),
        };
        // Cannot fail: every map key is a string and no Serialize impl returns an error.
        serde_json::to_string(&doc).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
