//! Broken runs made from real logs (wrong data, FAILED footer, error lines, a cut log, fewer
//! rows, other ranks, no size in common): `compare` refuses them and says why, and a failure
//! keeps its real cause.

use super::{logs, read, scratch, text, write};
use crate::programs::tool;
use std::path::Path;

/// The a3mega log with one change applied.
fn a3mega(dir: &Path, name: &str, change: impl Fn(&str) -> String) -> String {
    write(dir, name, &change(&read("gcp-a3mega-mpirun-16.log")))
}

#[test]
fn compare_refuses_broken_runs_and_says_why() {
    let dir = scratch("broken");
    let base = logs().join("gcp-a3mega-mpirun-16.log");
    let base = base.to_string_lossy();
    let compare = |new: &str, extra: &[&str]| {
        let mut args = vec!["compare", &*base, new, "--max-regression", "50"];
        args.extend_from_slice(extra);
        tool(&args)
    };

    // The same run: OK.
    let out = compare(&base, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("# verdict: OK"));

    // #wrong 96 and a FAILED footer.
    let wrong = a3mega(&dir, "wrong.log", |s| {
        s.replacen("0.00      0    123.5", "0.00     96    123.5", 1)
            .replace(
                "# Out of bounds values : 0 OK",
                "# Out of bounds values : 4 FAILED",
            )
    });
    let out = compare(&wrong, &[]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(t.contains("# problem: new "), "{t}");
    assert!(
        t.contains("wrong data: #wrong > 0 in 1 measurement(s), 96 wrong values"),
        "{t}"
    );
    assert!(t.contains("footer: Out of bounds values : 4 FAILED"), "{t}");
    assert!(t.contains("# verdict: BROKEN, 2 problem(s)"), "{t}");
    assert!(!t.contains("verdict: OK"), "{t}");
    let out = compare(&wrong, &["--allow", "wrong"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // Cut before its footer: BROKEN, with the rows read so far and where it stopped.
    let cut = a3mega(&dir, "cut.log", |s| {
        s.lines()
            .filter(|l| !l.starts_with("# Out of") && !l.starts_with("# Avg"))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    for extra in [&[][..], &["--partial"][..]] {
        let out = compare(&cut, extra);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(3), "{t}");
        assert!(
            t.contains("no footer: the test stopped after 31 row(s) (the log ends at line"),
            "{t}"
        );
    }
    assert_eq!(compare(&cut, &["--allow", "footer"]).status.code(), Some(0));

    // An NCCL failure after some rows.
    let failed = a3mega(&dir, "failed.log", |s| {
        let keep: Vec<&str> = s.lines().take(40).collect();
        keep.join("\n")
            + "\nztan-mig-235z: Test NCCL failure common.cu:1057 'unhandled system error / '\n \
               .. ztan-mig-235z pid 6899: Test failure common.cu:893\n"
    });
    let out = compare(&failed, &[]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(
        t.contains("no footer: the test stopped after 17 row(s) (it failed)"),
        "{t}"
    );
    assert!(
        t.contains("error: ztan-mig-235z: Test NCCL failure common.cu:1057 'unhandled system error / ' (+1 more error line(s))"),
        "{t}"
    );

    // Fewer rows, and a different rank count: MISMATCH.
    let fewer = a3mega(&dir, "fewer.log", |s| {
        s.lines()
            .filter(|l| !l.trim_start().starts_with("1024 "))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    let out = compare(&fewer, &[]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(
        t.contains("# problem: fewer rows: 1 row(s) of the base have no match in new"),
        "{t}"
    );
    assert_eq!(compare(&fewer, &["--allow", "rows"]).status.code(), Some(0));
    // A different rank count: one device line more in a one-rank run.
    let one = logs().join("nccl-tests-issue-287-rtx5090-alltoall.log");
    let two = write(
        &dir,
        "two.log",
        &read("nccl-tests-issue-287-rtx5090-alltoall.log").replace(
            "RTX 5090\n#\n",
            "RTX 5090\n#  Rank  1 Group  0 Pid 2181763 on   GENOA-01 device  1 [0x02] NVIDIA GeForce RTX 5090\n#\n",
        ),
    );
    let out = tool(&["compare", &one.to_string_lossy(), &two, "--metric", "algbw"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(t.contains("# problem: ranks: base 1, new 2"), "{t}");
    let out = tool(&["compare", &one.to_string_lossy(), &two, "--allow", "ranks"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn a_run_that_failed_before_its_first_row_keeps_its_failure_everywhere() {
    let dir = scratch("first-row");
    let log = write(
        &dir,
        "busy.log",
        &(read("nccl-tests-issue-287-rtx5090-alltoall.log")
            .lines()
            .take(10)
            .collect::<Vec<_>>()
            .join("\n")
            + "\nGENOA-01: Test CUDA failure common.cu:1030 'CUDA-capable device(s) is/are busy or unavailable'\n \
               .. GENOA-01 pid 2181762: Test failure common.cu:1157\n"),
    );
    let out = tool(&["parse", &log]);
    assert_eq!(out.status.code(), Some(3));
    let json = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(json.contains("\"nccl_perf_problems\":[\"no footer: the test stopped after 0 row(s) (it failed)\",\"error: GENOA-01: Test CUDA failure common.cu:1030 'CUDA-capable device(s) is/are busy or unavailable' (+1 more error line(s))\",\"no rows: nothing was measured\"]"), "{json}");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(err.contains("busy.log:3 alltoall_perf: no rows"), "{err}");

    let out = tool(&["report", "--format", "csv", &log]);
    assert_eq!(out.status.code(), Some(3));
    let csv = String::from_utf8_lossy(&out.stdout).into_owned();
    let record = csv.lines().nth(1).unwrap_or_default();
    assert!(record.starts_with("alltoall_perf,,,,,,"), "{csv}");
    assert!(record.contains("busy or unavailable"), "{csv}");
    assert_eq!(
        record.split(',').count(),
        csv.lines().next().unwrap_or_default().split(',').count(),
        "{csv}"
    );

    let md = text(&tool(&["report", "--format", "markdown", &log]));
    assert!(md.contains("**Not to be trusted:**"), "{md}");
    assert!(md.contains("- no rows: nothing was measured"), "{md}");
}

#[test]
fn runs_without_a_common_size_say_so() {
    let dir = scratch("no-common");
    let body = read("gcp-a3mega-mpirun-16.log");
    let small: String = body
        .lines()
        .filter(|l| {
            let size: u64 = l
                .split_whitespace()
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            size == 0 || size < 1 << 20
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let large: String = body
        .lines()
        .filter(|l| {
            let size: u64 = l
                .split_whitespace()
                .next()
                .and_then(|t| t.parse().ok())
                .unwrap_or(u64::MAX);
            size >= 1 << 20
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let (a, b) = (
        write(&dir, "small.log", &small),
        write(&dir, "large.log", &large),
    );
    let out = tool(&["compare", &a, &b]);
    let t = text(&out);
    assert!(t.contains("no size in common, nothing to compare"), "{t}");
    assert!(!t.contains("0 or missing everywhere"), "{t}");
}

#[test]
fn the_real_cause_of_a_failure_is_the_reason_given() {
    let log = logs().join("azure-h100-invalid-number-of-gpus.log");
    let out = tool(&["parse", &log.to_string_lossy()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(
        t.contains(
            "all_reduce_perf: error: Invalid number of GPUs: 297 requested but only 8 were found."
        ),
        "{t}"
    );
    assert!(t.contains("(it failed)"), "{t}");
}

#[test]
fn a_cut_log_keeps_the_complete_tests_before_it() {
    let dir = scratch("cut-two");
    let body = read("superbench-allreduce.log") + &read("aws-p4de-srun-l.log");
    let log = write(&dir, "two.log", &body);
    let out = tool(&["report", "--format", "csv", &log]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    let csv = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(csv.lines().count(), 1 + 34 + 29, "{csv}");
    assert!(
        t.contains("no footer: the test stopped after 29 row(s) (the log ends at line"),
        "{t}"
    );
}

#[test]
fn a_run_that_stopped_in_nccl_s_set_up_or_its_first_measurement_says_where() {
    // NVIDIA/nccl#1320: the process blocked after the device lines and NCCL's INFO lines.
    let log = logs().join("nccl-issue-1320-stopped-in-setup.log");
    let out = tool(&["health", &log.to_string_lossy()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(
        t.contains(
            "the log ends at line 17, before the table header, during NCCL's set-up of the \
             communicators: the log is cut short, or the job hung or was killed)"
        ),
        "{t}"
    );
    assert!(
        t.contains("# health: all_reduce: no rows, no expected figure"),
        "{t}"
    );
    // The same run with its table header printed: it stopped in the first measurement.
    let dir = scratch("first-row");
    let header = "#\n\
        #                                                              out-of-place                       in-place          \n\
        #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
        #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
    let body = read("nccl-issue-1320-stopped-in-setup.log") + header;
    let log = write(&dir, "header.log", &body);
    let t = text(&tool(&["report", &log]));
    assert!(
        t.contains("the log ends at line 21, before the first row, during the first measurement"),
        "{t}"
    );
}
