//! One whole test (one `Collective test starting` … `concluded` block) as the `nccl-perf` tool
//! sees it, whether it was read from a text log ([`super::parse`]) or from a `-J` JSON file
//! ([`super::json::read`]): the report model plus what the text showed around it.
//!
//! [`Run::to_text`] prints it back with [`super::table`]; `json::of_run` writes upstream's
//! schema (plus the `nccl_perf_log` object when the run came from a log), `health` judges it,
//! and `read` reads runs from files.

use std::fmt;

use super::{DeviceInfo, RowResult, RunInfo, Step, Summary, table};

/// Where a run was read from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Source {
    /// File name as given on the command line.
    pub file: String,
    /// First line of the test in the file (1-based; 0 for JSON).
    pub first_line: usize,
    /// Last line of the test in the file.
    pub last_line: usize,
}

/// What a text log shows besides the model (kept so that the text prints back unchanged).
#[derive(Debug, Clone, PartialEq)]
pub struct TextDetails {
    /// The `# nccl-tests version ...` line, verbatim, without its newline.
    pub version_line: Option<String>,
    /// maxBytes after the memory clamp, when the log shows `# Reducing maxBytes to ...`.
    pub memory_clamp: Option<u64>,
    /// Whether the table header was printed.
    pub table_header: bool,
    /// Lines that belong to the test but to none of its parts: `(rows before it, text)`.
    pub extra_lines: Vec<(usize, String)>,
    /// The log shows the table without the header lines above it (an excerpt).
    pub no_header: bool,
    /// The table has an `error` column (largest deviation, older layouts) where newer ones
    /// have `#wrong` (a count): its values are kept as `wrong` but are not a count.
    pub error_column: bool,
    /// Why a test that has neither footer nor failure lines stopped (the log was cut, another
    /// test started), with the line; `None` for a test that ended.
    pub stopped: Option<String>,
    /// Lines inside the test that could not be read, `(line number, why)`: a row broken by
    /// interleaved output, a damaged device line. The lines are kept among `extra_lines`.
    pub broken_lines: Vec<(usize, String)>,
    /// Device lines shown just before an excerpt's table that starts at a later device line:
    /// some of the GPUs only (the devices are not known), but the highest rank shown bounds the
    /// rank count from below and the names tell the GPU model.
    pub partial_devices: Vec<crate::DeviceInfo>,
    /// The hang watch's verdict (`hang: ...`, from `hang:`), when the run was ended as hung:
    /// from rank 0's stderr line in a log, from `nccl_perf_hang` in a `-J` JSON.
    pub hang: Option<String>,
    /// What a footer that is there lacks (`no '# Out of bounds values' line`): the run has a
    /// summary, but not all of it.
    pub footer_gap: Option<String>,
    /// Where nccl-perf's validation placed wrong data (`rank 5 (node2)`), from world rank 0's
    /// stderr line in a log.
    pub wrong_on: Option<String>,
}

impl Default for TextDetails {
    fn default() -> TextDetails {
        TextDetails {
            version_line: None,
            memory_clamp: None,
            table_header: true,
            extra_lines: Vec::new(),
            no_header: false,
            error_column: false,
            stopped: None,
            broken_lines: Vec::new(),
            partial_devices: Vec::new(),
            hang: None,
            footer_gap: None,
            wrong_on: None,
        }
    }
}

/// One test: parameters, devices, rows and (unless it stopped early) its footer.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Header parameters; `program` names the collective binary.
    pub info: RunInfo,
    /// A benchmark's `--explain` record (`nccl_perf_explain` of its `-J` JSON), kept as read;
    /// `None` for logs.
    pub explain: Option<serde_json::Value>,
    /// Device lines: every GPU from a log, one per process from upstream's JSON.
    pub devices: Vec<DeviceInfo>,
    /// `ncclGetVersion` code (`nccl-library=`), 0 when unknown.
    pub nccl_version: i32,
    /// Command line (from JSON), or the equivalent one rebuilt from a log's header.
    pub args: Vec<String>,
    /// `NAME=value` environment of a JSON file (empty for logs).
    pub env: Vec<String>,
    /// JSON `start_time` (empty for logs).
    pub start_time: String,
    /// JSON `end_time` (empty for logs and unfinished runs).
    pub end_time: String,
    /// Table rows in printed order.
    pub rows: Vec<RowResult>,
    /// The footer; `None` when the test stopped before it (failure, truncated log).
    pub summary: Option<Summary>,
    /// Where the run comes from.
    pub source: Source,
    /// What the log showed besides the model.
    pub text: TextDetails,
}

impl Run {
    /// A run read from a log, before its devices, rows and footer: `info` and NCCL's version
    /// code from its header, `source` and `text` as the reader found them; no command line yet.
    pub fn from_log(info: RunInfo, nccl_version: i32, source: Source, text: TextDetails) -> Run {
        Run {
            info,
            explain: None,
            devices: Vec::new(),
            nccl_version,
            args: Vec::new(),
            env: Vec::new(),
            start_time: String::new(),
            end_time: String::new(),
            rows: Vec::new(),
            summary: None,
            source,
            text,
        }
    }

    /// A short name for legends: the file's stem (`ar_sweep` for `logs/ar_sweep.out`), or the
    /// program when there is no file name.
    pub fn label(&self) -> String {
        std::path::Path::new(&self.source.file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty() && s != "-")
            .unwrap_or_else(|| self.info.program.clone())
    }

    /// The text the benchmark printed for this test, from the version line (when known) to the
    /// footer's last line (or the failure lines of a test that stopped early).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(v) = &self.text.version_line {
            out += v;
            out.push('\n');
        }
        if !self.text.no_header {
            out += &table::header(&self.info);
        }
        for d in &self.devices {
            out += &table::device_line(d);
        }
        if let Some(max) = self.text.memory_clamp {
            out += &table::memory_clamp_lines(max);
        }
        if self.text.table_header {
            out += &table::table_header(&self.info);
        }
        for (i, r) in self.rows.iter().enumerate() {
            out += &self.extra_lines_at(i);
            out += &table::row(r, &self.info);
        }
        out += &self.extra_lines_at(self.rows.len());
        if let Some(s) = &self.summary {
            out += &table::footer(s, &self.info.program);
        }
        if self.info.program.is_empty() {
            // A log that never named its test (before v2.16.7): no empty name lines.
            out = out
                .lines()
                .filter(|l| {
                    *l != "# Collective test starting: " && *l != "# Collective test concluded: "
                })
                .map(|l| format!("{l}\n"))
                .collect();
        }
        out
    }

    fn extra_lines_at(&self, rows: usize) -> String {
        self.text
            .extra_lines
            .iter()
            .filter(|(at, _)| *at == rows)
            .map(|(_, l)| format!("{l}\n"))
            .collect()
    }
}

/// A command line equivalent to a header's parameters (what a log shows of the command):
/// program, `-t -g -b -e -f|-i -w -n -m -c -G -u`, then `-z -I -K -p -C -S` when set.
pub fn equivalent_args(info: &RunInfo, memory_report: bool) -> Vec<String> {
    let mut args = vec![info.program.clone()];
    let mut push = |flag: &str, value: String| {
        args.push(flag.to_string());
        args.push(value);
    };
    push("-t", info.nthreads.to_string());
    push("-g", info.ngpus.to_string());
    push("-b", info.min_bytes.to_string());
    push("-e", info.max_bytes.to_string());
    match info.step {
        Step::Factor(f) => push("-f", f.to_string()),
        Step::Bytes(b) => push("-i", b.to_string()),
    }
    push("-w", info.warmup_iters.to_string());
    push("-n", info.iters.to_string());
    push("-m", info.agg_iters.to_string());
    push("-c", info.check.to_string());
    push("-G", info.graph.to_string());
    push("-u", info.unalign.to_string());
    let flags = [
        ("-z", info.blocking, info.blocking != 0),
        ("-I", 1, info.per_iter),
        ("-K", info.per_iter_skip, info.per_iter_skip != 0),
        ("-p", 1, info.parallel_init),
        ("-C", 1, info.report_cputime),
        ("-S", 1, info.report_timestamps),
        ("-M", 1, memory_report),
    ];
    for (flag, value, set) in flags {
        if set {
            push(flag, value.to_string());
        }
    }
    args
}

/// Why a log or JSON file could not be read: the file, the line when known, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// The file as named by the user.
    pub file: String,
    /// 1-based line number, when the problem is on one line.
    pub line: Option<usize>,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl ReadError {
    /// An error at `line` of `file`.
    pub fn at(file: &str, line: usize, message: impl Into<String>) -> ReadError {
        ReadError {
            file: file.to_string(),
            line: Some(line),
            message: message.into(),
        }
    }

    /// An error about the whole of `file`.
    pub fn whole(file: &str, message: impl Into<String>) -> ReadError {
        ReadError {
            file: file.to_string(),
            line: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ReadError {}
