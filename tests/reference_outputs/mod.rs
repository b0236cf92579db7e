//! Reading the reference outputs of nccl-tests v2.19.6 (`tests/golden/nccl-tests-2.19.6-h200/`)
//! back into our report model, for the golden tests.
//!
//! Each `.out` file starts with `### <command>` and ends with recorder lines (`# time -v: ...`,
//! `### rc=N`); everything else is what nccl-tests printed.

use std::path::PathBuf;

use nccl_perf_report::numbers::NO_ROWS_AVERAGE;
use nccl_perf_report::{DeviceInfo, HalfResult, PerIterStats, RowResult, RunInfo, Step};

/// Folder of the reference outputs, committed with the tests:
/// `<package>/tests/golden/nccl-tests-2.19.6-h200` (see the README there). Panics (failing the
/// test) when it is missing: the golden tests must never pass by finding nothing to compare.
pub fn reference_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/nccl-tests-2.19.6-h200");
    assert!(
        dir.is_dir(),
        "golden reference folder {} is missing: the golden tests need the nccl-tests v2.19.6 \
         outputs committed under tests/golden/",
        dir.display()
    );
    dir
}

/// One reference output.
pub struct Golden {
    /// File name, e.g. `ar_sweep.out`.
    pub name: String,
    /// The recorded command line, split on spaces (`mpirun ...` included).
    pub command: Vec<String>,
    /// The program's output lines, without their `\n`, recorder lines removed.
    pub lines: Vec<String>,
}

impl Golden {
    /// The program's arguments: argv[0] (the first word ending in `_perf`) and what follows.
    pub fn args(&self) -> Vec<String> {
        let start = self
            .command
            .iter()
            .position(|w| w.ends_with("_perf"))
            .unwrap_or_else(|| panic!("{}: no *_perf program in the command", self.name));
        self.command[start..].to_vec()
    }
}

/// Loads one reference output.
pub fn load(name: &str) -> Golden {
    let path = reference_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut raw: Vec<&str> = text.split('\n').collect();
    if raw.last() == Some(&"") {
        raw.pop();
    }
    let command = raw
        .first()
        .and_then(|l| l.strip_prefix("### "))
        .unwrap_or_else(|| panic!("{name}: first line is not `### <command>`"))
        .split_whitespace()
        .map(String::from)
        .collect();
    let lines = raw
        .iter()
        .filter(|l| !l.starts_with("### ") && !l.starts_with("# time -v:"))
        .map(|l| l.to_string())
        .collect();
    Golden {
        name: name.to_string(),
        command,
        lines,
    }
}

/// Every `*.out` file of the reference folder, by name.
pub fn load_all() -> Vec<Golden> {
    let dir = reference_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".out"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no .out file in {}", dir.display());
    names.iter().map(|n| load(n)).collect()
}

/// The integer value of option `-x` / `--long` in `args` (`-x 1`, `-x1`, `--long 1`,
/// `--long=1`), parsed like `strtol` for the plain decimal values the references use.
pub fn int_option(args: &[String], short: &str, long: &str) -> Option<i64> {
    let mut value = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let long_eq = format!("--{long}=");
        let v = if a == short || a == &format!("--{long}") {
            it.next().cloned()
        } else if let Some(v) = a.strip_prefix(&long_eq) {
            Some(v.to_string())
        } else if a.len() > 2 && a.starts_with(short) && !a.starts_with("--") {
            Some(a[2..].to_string())
        } else {
            None
        };
        if let Some(v) = v {
            value = Some(v.trim().parse().unwrap_or(0));
        }
    }
    value
}

/// The run parameters from the header lines (`# Collective test starting:` and `# nThread`)
/// and, for what the header line does not show, the command line.
pub fn run_info(program_line: &str, nthread_line: &str, args: &[String]) -> RunInfo {
    let program = program_line
        .strip_prefix("# Collective test starting: ")
        .unwrap_or_else(|| panic!("not a starting line: {program_line}"));
    let t: Vec<&str> = nthread_line.split_whitespace().collect();
    let labels = [
        (1, "nThread"),
        (3, "nGpus"),
        (5, "minBytes"),
        (7, "maxBytes"),
        (9, "step:"),
        (12, "iters:"),
        (14, "iters:"),
        (17, "iters:"),
        (19, "validation:"),
        (21, "graph:"),
        (23, "unalign:"),
    ];
    assert_eq!(t.len(), 25, "unexpected parameter line: {nthread_line}");
    for (i, label) in labels {
        assert_eq!(t[i], label, "unexpected parameter line: {nthread_line}");
    }
    let int = |i: usize| -> i64 { t[i].parse().unwrap_or_else(|_| panic!("{}", t[i])) };
    let step = if let Some(f) = t[10].strip_suffix("(factor)") {
        Step::Factor(f.parse().unwrap())
    } else if let Some(b) = t[10].strip_suffix("(bytes)") {
        Step::Bytes(b.parse().unwrap())
    } else {
        panic!("unexpected step: {}", t[10])
    };
    let opt = |short: &str, long: &str| int_option(args, short, long).unwrap_or(0);
    let graph = int(22);
    let iters = int(15);
    let per_iter = opt("-I", "per_iter_timing") == 1 && graph == 0;
    let skip = opt("-K", "per_iter_skip");
    let mut blocking = opt("-z", "blocking");
    if blocking == 3 && graph > 0 {
        blocking = 0;
    }
    RunInfo {
        program: program.to_string(),
        nthreads: int(2),
        ngpus: int(4),
        min_bytes: int(6) as u64,
        max_bytes: int(8) as u64,
        step,
        warmup_iters: int(13),
        iters,
        agg_iters: int(18),
        check: int(20),
        graph,
        unalign: int(24),
        blocking,
        per_iter,
        per_iter_skip: if per_iter && (0..iters).contains(&skip) {
            skip
        } else {
            0
        },
        parallel_init: opt("-p", "parallel_init") == 1,
        report_cputime: opt("-C", "report_cputime") != 0,
        report_timestamps: opt("-S", "report_timestamps") != 0,
    }
}

/// A `#  Rank ...` device line back into a [`DeviceInfo`].
pub fn device(line: &str) -> DeviceInfo {
    let (fields, name) = line
        .split_once("] ")
        .unwrap_or_else(|| panic!("not a device line: {line}"));
    let t: Vec<&str> = fields.split_whitespace().collect();
    assert_eq!(t.len(), 12, "not a device line: {line}");
    let pci: Vec<u32> = t[11]
        .trim_start_matches('[')
        .split(':')
        .map(|x| u32::from_str_radix(x, 16).unwrap())
        .collect();
    DeviceInfo {
        rank: t[2].parse().unwrap(),
        group: t[4].parse().unwrap(),
        pid: t[6].parse().unwrap(),
        hostname: t[8].to_string(),
        device: t[10].parse().unwrap(),
        pci_domain: pci[0],
        pci_bus: pci[1],
        pci_device: pci[2],
        name: name.to_string(),
    }
}

/// A printed number (`7.87`, `1e+06`, `nan`, `-nan`) back into an `f64` that prints the same.
pub fn number(token: &str) -> f64 {
    match token {
        "-nan" => NO_ROWS_AVERAGE,
        "nan" => f64::NAN,
        _ => token
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {token}")),
    }
}

/// True for a data row (starts with the right-aligned size).
pub fn is_row(line: &str) -> bool {
    line.len() >= 12 && line[..12].trim_start().parse::<u64>().is_ok()
}

/// A data row back into a [`RowResult`]. The preamble is read by columns (the op column is
/// empty for hypercube), the rest by whitespace.
pub fn row(line: &str, info: &RunInfo) -> RowResult {
    assert!(line.len() > 52, "short row: {line}");
    let col = |a: usize, b: usize| line[a..b].trim().to_string();
    let mut t = line[52..].split_whitespace();
    let mut next = || t.next().unwrap_or_else(|| panic!("short row: {line}"));
    let mut half = || {
        let time_us = number(next());
        let algbw = number(next());
        let busbw = number(next());
        let wrong = match next() {
            "N/A" => None,
            w => Some(number(w)),
        };
        let per_iter = info.per_iter.then(|| {
            let v = [(); 4].map(|_| number(next()));
            per_iter_stats(v)
        });
        HalfResult {
            time_us,
            algbw,
            busbw,
            wrong,
            per_iter,
        }
    };
    let out_of_place = half();
    let in_place = half();
    let timestamp = info
        .report_timestamps
        .then(|| format!("{} {}", next(), next()));
    assert!(t.next().is_none(), "extra tokens in row: {line}");
    RowResult {
        size: col(0, 12).parse().unwrap(),
        count: col(14, 26).parse().unwrap(),
        dtype: col(28, 36),
        op: col(38, 44),
        root: col(46, 52).parse().unwrap(),
        out_of_place,
        in_place,
        timestamp,
        iterations: info.iters,
    }
}

/// Statistics holding the four printed values (`i_min i_max i_p99 i_cv%`).
fn per_iter_stats([min_us, max_us, p99_us, cv_pct]: [f64; 4]) -> PerIterStats {
    PerIterStats {
        skipped: 0,
        min_us,
        max_us,
        avg_us: f64::NAN,
        p50_us: f64::NAN,
        p95_us: f64::NAN,
        p99_us,
        stdev_us: f64::NAN,
        cv_pct,
        times_us: Vec::new(),
        per_process_max_times_us: Vec::new(),
    }
}
