//! Logs as people paste them (`tests/logs/pasted/`, made from the public logs: SOURCES.md):
//! rows without any header line, tables trimmed of columns, a crash and no table, footers in
//! part, a command echoed before a table that does not name its test, and copies that lost
//! their `#`s with the columns indented.

use super::{golden_tables, logs, read, scratch, text, write};
use crate::programs::tool;
use nccl_perf_report::health::{self, Check};
use nccl_perf_report::parse::{ParseOptions, parse_log};
use nccl_perf_report::run::Run;

fn one(name: &str, body: &str) -> Run {
    let mut runs =
        parse_log(body, name, &ParseOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(runs.len(), 1, "{name}");
    runs.remove(0)
}

fn pasted(name: &str) -> Run {
    one(name, &read(&format!("pasted/{name}")))
}

fn checks(run: &Run) -> Vec<Check> {
    health::problems(run).iter().map(|p| p.check).collect()
}

/// `args` then the pasted log's path: (exit code, stdout, stderr).
fn run_tool(args: &[&str], name: &str) -> (Option<i32>, String, String) {
    let path = logs().join("pasted").join(name);
    let path = path.to_string_lossy();
    let mut all = args.to_vec();
    all.push(&path);
    let out = tool(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The rows of the public log the excerpts are made from.
fn original() -> Run {
    one("gcp", &read("gcp-a3mega-mpirun-16.log"))
}

#[test]
fn rows_pasted_without_a_header_are_read_and_judged_by_their_footer() {
    let full = original();
    let run = pasted("rows-only-info-before-footer.log");
    assert_eq!(run.rows, full.rows);
    let summary = run.summary.as_ref().unwrap_or_else(|| panic!("no footer"));
    assert_eq!((summary.oob_errors, summary.avg_busbw), (0, 70.742));
    assert!(
        health::problems(&run).is_empty(),
        "{:?}",
        health::problems(&run)
    );
    let (code, out, err) = run_tool(&["report"], "rows-only-info-before-footer.log");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.matches("     float     sum      -1 ").count(),
        31,
        "{out}"
    );
    assert!(out.contains("# Avg bus bandwidth    : 70.742"), "{out}");
    // Explained from its numbers: all_reduce, 16 ranks.
    let (_, out, _) = run_tool(&["report", "--explain"], "rows-only-info-before-footer.log");
    assert!(out.contains("# explain: all_reduce on 16 rank(s)"), "{out}");
    // And through JSON, the same table.
    let (_, json, _) = run_tool(&["parse"], "rows-only-info-before-footer.log");
    let dir = scratch("rows-only");
    let json = write(&dir, "rows.json", &json);
    let again = tool(&["report", &json]);
    assert_eq!(String::from_utf8_lossy(&again.stdout), out_of_report());

    // Without its footer: read, and said to lack it (no silent OK, no "no output").
    let run = pasted("rows-only-no-footer.log");
    assert_eq!(run.rows.len(), 31);
    assert_eq!(checks(&run), [Check::Footer]);
    let (code, _, err) = run_tool(&["report"], "rows-only-no-footer.log");
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("no footer: the test stopped after 31 row(s)"),
        "{err}"
    );

    // Lines of numbers that are no row of nccl-tests are still no output.
    for (name, body) in [
        ("short", "           8             2     float     sum\n"),
        ("notype", "  8  2  3  4  5  6  7  8  9  10  11  12  13\n"),
        (
            "words",
            "     8      2   float   sum   -1  fast  0.00  0.00  0  1.0  0.0  0.0  0\n",
        ),
    ] {
        let path = write(&dir, name, body);
        let out = tool(&["report", &path]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out));
        assert!(text(&out).contains("no nccl-tests output found"), "{name}");
    }
}

fn out_of_report() -> String {
    run_tool(&["report"], "rows-only-info-before-footer.log").1
}

#[test]
fn a_trimmed_table_is_read_by_the_header_it_has() {
    let full = original();
    // No root column and no in-place half: the out-of-place half read, the in-place one unknown.
    let run = pasted("trimmed-no-root-no-in-place.log");
    assert_eq!(run.rows.len(), 31);
    for (got, want) in run.rows.iter().zip(&full.rows) {
        assert_eq!((got.size, got.root), (want.size, -1));
        assert_eq!(got.out_of_place, want.out_of_place);
        assert!(got.in_place.busbw.is_nan() && got.in_place.wrong.is_none());
    }
    assert!(health::problems(&run).is_empty());
    // No #wrong columns: both halves read, judged by the footer.
    let run = pasted("trimmed-no-wrong.log");
    assert_eq!(run.rows.len(), 31);
    for (got, want) in run.rows.iter().zip(&full.rows) {
        assert_eq!(got.in_place.busbw, want.in_place.busbw);
        assert_eq!((got.out_of_place.wrong, got.in_place.wrong), (None, None));
    }
    assert!(health::problems(&run).is_empty());
    for name in ["trimmed-no-root-no-in-place.log", "trimmed-no-wrong.log"] {
        let (code, _, err) = run_tool(&["report"], name);
        assert_eq!(code, Some(0), "{name}: {err}");
        let base = logs().join("gcp-a3mega-mpirun-16.log");
        let path = logs().join("pasted").join(name);
        let out = tool(&["compare", &base.to_string_lossy(), &path.to_string_lossy()]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out));
    }
    // A row that does not fit the trimmed header names the header's columns.
    let body = read("pasted/trimmed-no-root-no-in-place.log").replacen(
        "     float     sum    135.8",
        "     float     sum     -1    135.8",
        1,
    );
    let run = one("misfit", &body);
    assert_eq!(run.rows.len(), 30);
    let why = &run.text.broken_lines[0].1;
    assert!(
        why.contains("has 8 fields (size count type redop, then time algbw busbw #wrong for the out-of-place half only), this line has 9"),
        "{why}"
    );
}

#[test]
fn a_log_with_a_crash_and_no_table_is_a_failed_run() {
    let cases = [
        (
            "crash-signal-aborted.log",
            "all_reduce_perf",
            "error: [ztan-mig-235z:06899] Signal: Aborted (6) (+1 more error line(s))",
        ),
        (
            "crash-test-nccl-failure.log",
            "all_gather_perf",
            "error: node-0: Test NCCL failure common.cu:1279 'unhandled system error",
        ),
        (
            "crash-nccl-warn-fatal.log",
            "",
            "NCCL WARN NET/IB : mlx5_4:1 async fatal event on QP (0x762cfc06f8c8): invalid request local work queue error (+1 more error line(s))",
        ),
    ];
    for (name, program, failure) in cases {
        let run = pasted(name);
        assert_eq!(run.info.program, program, "{name}");
        assert_eq!(
            checks(&run),
            [Check::Footer, Check::Errors, Check::Rows],
            "{name}"
        );
        for args in [&["report"][..], &["parse"], &["health"]] {
            let (code, _, err) = run_tool(args, name);
            assert_eq!(code, Some(3), "{name} {args:?}: {err}");
            assert!(err.contains(failure), "{name} {args:?}: {err}");
            assert!(!err.contains("no nccl-tests output"), "{name}: {err}");
        }
        let base = logs().join("gcp-a3mega-mpirun-16.log");
        let path = logs().join("pasted").join(name);
        let out = tool(&["compare", &base.to_string_lossy(), &path.to_string_lossy()]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(3), "{t}");
        assert!(t.contains("# verdict: BROKEN"), "{t}");
    }
    // NCCL's ordinary lines, a warning that is not fatal: still no nccl-tests output.
    let dir = scratch("no-crash");
    let path = write(
        &dir,
        "chatter.log",
        "node-0:5899:5899 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n\
         node-0:5899:5899 [0] misc/ibvwrap.cc:106 NCCL WARN Failed to open libibverbs.so[.1]\n",
    );
    let out = tool(&["report", &path]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no nccl-tests output found"));
}

#[test]
fn reasons_say_what_is_missing() {
    // A footer whose rows the log leaves out: no rows, but not "no footer".
    let run = pasted("footer-rows-elided.log");
    let problems = health::problems(&run);
    assert_eq!(checks(&run), [Check::Rows], "{problems:?}");
    assert_eq!(
        problems[0].text,
        "no rows: the log leaves the table's rows out (its footer is there)"
    );
    assert_eq!(run.devices.len(), 2);
    // The `Out of bounds values` line left out: the footer is incomplete, not missing.
    let run = pasted("footer-without-out-of-bounds.log");
    assert_eq!(run.rows.len(), 31);
    let problems = health::problems(&run);
    assert_eq!(checks(&run), [Check::Footer], "{problems:?}");
    assert_eq!(
        problems[0].text,
        "footer incomplete: no '# Out of bounds values' line (the log leaves it out)"
    );
    let (code, _, err) = run_tool(&["report"], "footer-without-out-of-bounds.log");
    assert_eq!(code, Some(3), "{err}");
    assert!(!err.contains("no footer"), "{err}");
    // Through JSON too.
    let (_, json, _) = run_tool(&["parse"], "footer-without-out-of-bounds.log");
    let dir = scratch("footer-gap");
    let json = write(&dir, "gap.json", &json);
    let out = tool(&["report", &json]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).contains("footer incomplete: no '# Out of bounds values' line"));
    // The data check there and the average cut off: read as complete (as before).
    let run = pasted("footer-cut-after-out-of-bounds.log");
    assert_eq!(run.rows.len(), 31);
    assert!(health::problems(&run).is_empty());
}

#[test]
fn explain_takes_the_collective_from_an_echoed_command() {
    let body = read("pasted/echoed-command-all-gather.log");
    assert_eq!(
        pasted("echoed-command-all-gather.log").info.program,
        "all_gather_perf"
    );
    let (_, out, _) = run_tool(&["report", "--explain"], "echoed-command-all-gather.log");
    assert!(out.contains("# explain: all_gather on 8 rank(s)"), "{out}");
    let first = body.lines().next().unwrap_or_default();
    let rest = &body[first.len()..];
    let rows_only: String = rest
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = scratch("echoed");
    for (i, (command, table, program)) in [
        (
            "root@node-0:~/nccl-tests# ./build/all_gather_perf -b 8 -e 128M",
            rest,
            "all_gather_perf",
        ),
        (
            "# ./build/all_gather_perf -b 8 -e 128M -f 2 -g 8",
            rest,
            "all_gather_perf",
        ),
        ("+ all_gather_perf -b 8 -e 128M", rest, "all_gather_perf"),
        (
            "$ ./run-nccl-tests.sh -t all_gather -b 8 -e 128M",
            rest,
            "all_gather_perf",
        ),
        (
            "$ ./build/all_gather_perf -b 8 -e 128M -g 8",
            &rows_only,
            "all_gather_perf",
        ),
        // nccl-tests' own `-t` is a thread count; a `#` comment names no program.
        ("$ ./run.sh -t 1 -b 8 -e 128M", rest, ""),
        ("# Running the gather test", rest, ""),
    ]
    .into_iter()
    .enumerate()
    {
        let log = format!("{command}{table}");
        let run = one(command, &log);
        assert_eq!(run.info.program, program, "{command}");
        assert_eq!(run.rows.len(), 23, "{command}");
        if !program.is_empty() {
            let path = write(&dir, &format!("{i}.log"), &log);
            let out =
                String::from_utf8_lossy(&tool(&["report", "--explain", &path]).stdout).into_owned();
            assert!(
                out.contains("# explain: all_gather on 8 rank(s)"),
                "{command}: {out}"
            );
        }
    }
}

#[test]
fn copies_that_lost_their_hashes_with_the_columns_indented_are_read() {
    let full = original();
    let run = pasted("hashes-stripped-indented.log");
    assert_eq!(run.rows, full.rows);
    assert_eq!(run.devices, full.devices);
    assert_eq!(run.summary, full.summary);
    assert!(health::problems(&run).is_empty());
    // dstack's Lambda page: no parameter line, the table header after `Collective test
    // starting`, every line two blanks in.
    let run = one("lambda", &read("dstack-lambda-hashes-lost.log"));
    assert_eq!(run.rows.len(), 29);
    assert_eq!(run.summary.as_ref().map(|s| s.avg_busbw), Some(137.179));
    assert_eq!(run.rows[28].in_place.busbw, 702.91);
}

#[test]
fn the_rows_of_every_golden_table_read_alone_as_in_the_whole_log() {
    // Every nccl-tests 2.19.6 table of tests/golden (sweeps, every collective, `-I 1` with
    // `-S 1`, hypercube's empty op column), its rows and footer pasted without any `#` line.
    let mut checked = 0;
    for (name, body) in golden_tables() {
        let whole = one(&name, &body);
        let rows: String = body
            .lines()
            .filter(|l| {
                l.starts_with(' ') && l.trim_start().starts_with(|c: char| c.is_ascii_digit())
            })
            .chain(
                body.lines()
                    .filter(|l| l.starts_with("# Out of bounds") || l.starts_with("# Avg bus")),
            )
            .map(|l| format!("{l}\n"))
            .collect();
        let alone = one(&name, &rows);
        let mut got = alone.rows.clone();
        for r in &mut got {
            r.iterations = whole.info.iters;
        }
        // As text: per-iteration statistics a log does not show are NaN, never equal.
        assert_eq!(format!("{got:?}"), format!("{:?}", whole.rows), "{name}");
        let footer = |r: &Run| {
            r.summary
                .as_ref()
                .map(|s| (s.oob_errors, s.avg_busbw, s.min_bw_ok))
        };
        assert_eq!(footer(&alone), footer(&whole), "{name}");
        assert!(health::problems(&alone).is_empty(), "{name}");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} golden tables");
}
