//! Golden test of the text report: every reference output of nccl-tests v2.19.6 is read back
//! into our model (run parameters, devices, rows, summary), rendered with `report::table`, and
//! compared byte for byte.
//!
//! Every program-output line of every file must be either compared or one of the known lines
//! that other modules print (usage text, parse errors, failure traces): an unknown line fails the
//! test, so a change of format cannot slip through as "not compared". Rows are compared whole:
//! each number is re-rendered from its printed value, which lies inside the interval of values
//! printing that way (for `1e+06` too).

use crate::reference_outputs;

use std::path::Path;

use crate::reference_outputs::Golden;
use nccl_perf_report::formats::{Format, Json};
use nccl_perf_report::numbers::fit;
use nccl_perf_report::table::{
    device_line, footer, header, memory_clamp_lines, memory_report, row, table_header, version_line,
};
use nccl_perf_report::{RunInfo, Summary};

/// Lines other modules print (CLI, bootstrap, error paths), recognised so that they are not
/// mistaken for report lines we failed to compare.
fn is_foreign(line: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "USAGE: ",
        "\t",
        "invalid type ",
        "invalid op ",
        "invalid sizes for ",
        "Invalid number of GPUs: ",
        "Please check the number of processes and GPUs per process.",
        " .. ",
    ];
    PREFIXES.iter().any(|p| line.starts_with(p))
        || line.contains(": Test NCCL failure ")
        || line.contains(": Test CUDA failure ")
}

/// What the walk over one file compared.
#[derive(Default)]
struct Tally {
    compared: usize,
    rows: usize,
    e_tokens: usize,
    foreign: usize,
    footers: usize,
}

/// Asserts that `ours` equals the golden lines `lines` (each followed by `\n`).
#[track_caller]
fn same(g: &Golden, at: usize, lines: &[String], ours: &str, tally: &mut Tally) {
    let want: String = lines.iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(
        ours,
        want,
        "{}: lines {}..{} differ",
        g.name,
        at + 1,
        at + lines.len()
    );
    tally.compared += lines.len();
}

/// Checks every exponent-form number of a row (`1e+06`, `1.2e+07`) once more with another value
/// of the interval that prints that way (the printed value plus 0.4 units of its last digit),
/// since such a token cannot be read back to the value that was measured.
fn check_e_tokens(g: &Golden, line: &str, tally: &mut Tally) {
    for token in line.split_whitespace().filter(|t| t.contains("e+")) {
        let (mantissa, exp) = token.split_once('e').unwrap();
        let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len());
        let width = if decimals == 0 { 6 } else { 7 };
        let unit = 10f64.powi(exp.parse::<i32>().unwrap() - decimals as i32);
        let other = reference_outputs::number(token) + 0.4 * unit;
        assert_eq!(
            fit(other, width).trim_start(),
            token,
            "{}: {other} in {line}",
            g.name
        );
        tally.e_tokens += 1;
    }
}

/// Index of the first line at or after `from` that equals `text`.
fn find(g: &Golden, from: usize, text: &str) -> usize {
    (from..g.lines.len())
        .find(|&i| g.lines[i] == text)
        .unwrap_or_else(|| panic!("{}: no `{text}` after line {}", g.name, from + 1))
}

/// Reads the footer starting at `at` back into a summary and the program name.
fn parse_footer(g: &Golden, at: usize) -> (Summary, String, usize) {
    let l = &g.lines;
    let oob = l[at].strip_prefix("# Out of bounds values : ").unwrap();
    let (count, _) = oob.split_once(' ').unwrap();
    let avg = l[at + 1]
        .strip_prefix("# Avg bus bandwidth    : ")
        .unwrap_or_else(|| panic!("{}: no average line after line {}", g.name, at + 1));
    let (value, status) = avg.split_once(' ').unwrap();
    let program = l[at + 3]
        .strip_prefix("# Collective test concluded: ")
        .unwrap_or_else(|| panic!("{}: no concluded line at {}", g.name, at + 4));
    let mut next = at + 4;
    let memory_report = l[next]
        .strip_prefix("# GPU memory usage     : ")
        .map(|body| {
            next += 1;
            parse_memory_report(body)
        });
    assert_eq!(l[next], "#", "{}: line {}", g.name, next + 1);
    let last_error = match l[next + 1].strip_prefix("# error: ") {
        Some(e) => e.to_string(),
        None => String::new(),
    };
    let summary = Summary {
        oob_errors: count.parse().unwrap(),
        avg_busbw: reference_outputs::number(value),
        min_bw_ok: match status {
            "" => None,
            "OK" => Some(true),
            "FAILED" => Some(false),
            other => panic!("{}: bandwidth status {other}", g.name),
        },
        last_error,
        memory_report,
    };
    (summary, program.to_string(), next + 2 - at)
}

/// The three measured amounts of a `-M 1` report body, rendered again (the total is recomputed
/// by [`memory_report`], so it is checked too).
fn parse_memory_report(body: &str) -> String {
    let amounts: Vec<f64> = body
        .split(" | ")
        .take(3)
        .map(|part| {
            let t: Vec<&str> = part.split_whitespace().collect();
            let unit = match t[2] {
                "GB" => 1024.0 * 1024.0 * 1024.0,
                "MB" => 1024.0 * 1024.0,
                "KB" => 1024.0,
                "B" => 1.0,
                u => panic!("unit {u}"),
            };
            t[1].parse::<f64>().unwrap() * unit
        })
        .collect();
    memory_report(amounts[0], amounts[1], amounts[2])
}

/// Walks one file, comparing every report line; returns what was compared.
fn check_file(g: &Golden) -> Tally {
    let mut tally = Tally::default();
    let mut info: Option<RunInfo> = None;
    let l = &g.lines;
    let mut i = 0;
    while i < l.len() {
        let line = l[i].as_str();
        let next = l.get(i + 1).map(String::as_str).unwrap_or("");
        if let Some(path) = line.strip_prefix("# Writing JSON output to ") {
            same(
                g,
                i,
                &l[i..=i],
                &Json.writing_line(Path::new(path)),
                &mut tally,
            );
            i += 1;
        } else if line.starts_with("# nccl-tests version ") {
            let code: i32 = line
                .rsplit_once("nccl-library=")
                .unwrap()
                .1
                .parse()
                .unwrap();
            let ours = version_line(code);
            let suffix = format!(" (nccl-perf {})\n", env!("CARGO_PKG_VERSION"));
            assert_eq!(
                ours.strip_suffix(&suffix),
                Some(line),
                "{}: version line",
                g.name
            );
            tally.compared += 1;
            i += 1;
        } else if line.starts_with("# Collective test starting: ") {
            let end = find(g, i, "# Using devices");
            let run = reference_outputs::run_info(line, next, &g.args());
            same(g, i, &l[i..=end], &header(&run), &mut tally);
            info = Some(run);
            i = end + 1;
        } else if line.starts_with("#  Rank ") {
            same(
                g,
                i,
                &l[i..=i],
                &device_line(&reference_outputs::device(line)),
                &mut tally,
            );
            i += 1;
        } else if line == "#" && next.starts_with("# Reducing maxBytes to ") {
            let max: u64 = next.split_whitespace().nth(4).unwrap().parse().unwrap();
            same(g, i, &l[i..i + 2], &memory_clamp_lines(max), &mut tally);
            i += 2;
        } else if line == "#" && next.starts_with("#  ") && next.contains("out-of-place") {
            let run = info
                .as_ref()
                .expect("table header before the parameter line");
            same(g, i, &l[i..i + 4], &table_header(run), &mut tally);
            i += 4;
        } else if reference_outputs::is_row(line) {
            let run = info.as_ref().expect("row before the parameter line");
            let r = reference_outputs::row(line, run);
            let tokens =
                13 + 8 * usize::from(run.per_iter) + 2 * usize::from(run.report_timestamps)
                    - usize::from(r.op.is_empty());
            assert_eq!(
                line.split_whitespace().count(),
                tokens,
                "{}: {line}",
                g.name
            );
            same(g, i, &l[i..=i], &row(&r, run), &mut tally);
            check_e_tokens(g, line, &mut tally);
            tally.rows += 1;
            i += 1;
        } else if line.starts_with("# Out of bounds values : ") {
            let (summary, program, len) = parse_footer(g, i);
            same(
                g,
                i,
                &l[i..i + len],
                &footer(&summary, &program),
                &mut tally,
            );
            tally.footers += 1;
            i += len;
        } else if is_foreign(line) {
            tally.foreign += 1;
            i += 1;
        } else {
            panic!(
                "{}: line {} is neither compared nor known: {line:?}",
                g.name,
                i + 1
            );
        }
    }
    tally
}

#[test]
fn every_reference_output_renders_identically() {
    let goldens = reference_outputs::load_all();
    let mut total = Tally::default();
    let mut report = String::new();
    for g in &goldens {
        let t = check_file(g);
        report += &format!(
            "{:28} compared {:4} lines ({:3} rows, {} footer), {:2} foreign\n",
            g.name, t.compared, t.rows, t.footers, t.foreign
        );
        total.compared += t.compared;
        total.rows += t.rows;
        total.e_tokens += t.e_tokens;
        total.footers += t.footers;
        total.foreign += t.foreign;
    }
    eprintln!(
        "{report}total: {} lines compared, {} rows, {} exponent-form numbers",
        total.compared, total.rows, total.e_tokens
    );
    assert!(
        goldens.len() >= 28,
        "expected the 28 reference outputs, found {}",
        goldens.len()
    );
    assert!(
        total.compared >= 800,
        "only {} lines compared",
        total.compared
    );
    assert!(total.rows >= 450, "only {} rows compared", total.rows);
    assert!(
        total.e_tokens >= 20,
        "only {} exponent-form numbers",
        total.e_tokens
    );
    assert!(
        total.footers >= 24,
        "only {} footers compared",
        total.footers
    );
    assert!(total.foreign <= 60, "{} lines not compared", total.foreign);
}
