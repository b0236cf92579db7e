//! The subcommands on the command line: `parse` then `report`, `report`'s formats, several
//! files in one call, unreadable input, `compare`'s exit codes, and
//! `ci/compare-with-nccl-tests.sh`.

use super::{outside_any_test, read, reference, scratch, stdout};
use crate::programs;
use crate::programs::tool;
use nccl_perf_report::json::read::read_documents;
use nccl_perf_report::run::Run;
use std::path::Path;
use std::process::Command;

#[test]
fn parse_then_report_on_the_command_line() {
    let dir = scratch("parse");
    let json = dir.join("ar_perit.json");
    let log = reference("ar_perit.out");
    let out = tool(&[
        "parse",
        &log.to_string_lossy(),
        "-o",
        &json.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = read(&json);
    assert!(doc.starts_with("{\"version\":3,"), "{doc}");
    assert!(doc.contains("\"nccl_perf_log\":{"), "{doc}");
    let printed = stdout(&tool(&["report", &json.to_string_lossy()]));
    let want: String = read(&log)
        .lines()
        .filter(|l| !outside_any_test(l))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(printed, want);
}

#[test]
fn report_formats() {
    let log = reference("sendrecv_small.out");
    let log = log.to_string_lossy();
    let csv = stdout(&tool(&["report", "--format", "csv", &log]));
    let mut lines = csv.lines();
    let header = lines.next().unwrap_or_default();
    assert!(header.starts_with("collective,size,count,type,redop,root,out_of_place_time_us,"));
    let first = lines.next().unwrap_or_default();
    assert_eq!(
        first,
        "sendrecv_perf,8,2,float,sum,-1,10.15,0,0,0,2.32,0,0,,"
    );
    assert!(header.ends_with(",in_place_nwrong,problems"), "{header}");
    assert_eq!(csv.lines().count(), 1 + 25);

    let md = stdout(&tool(&["report", "--format", "markdown", &log]));
    assert!(md.starts_with("### sendrecv_perf ("), "{md}");
    assert!(
        md.contains(
            "| 8 | 2 | float | sum | -1 | 10.15 | 0.00 | 0.00 | 0 | 2.32 | 0.00 | 0.00 | N/A |"
        ),
        "{md}"
    );

    let json = stdout(&tool(&["report", "--format", "json", &log]));
    let runs = read_documents(&json, "stdin").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs[0].rows.len(), 25);
}

#[test]
fn several_files_and_tests_in_one_call() {
    let a = reference("ar_sweep.out");
    let b = reference("ag_seed.out");
    let out = tool(&["parse", &a.to_string_lossy(), &b.to_string_lossy()]);
    let runs = read_documents(&stdout(&out), "stdout").unwrap_or_else(|e| panic!("{e}"));
    let programs: Vec<&str> = runs.iter().map(|r: &Run| r.info.program.as_str()).collect();
    assert_eq!(programs, ["all_reduce_perf", "all_gather_perf"]);
}
#[test]
fn unreadable_input_exits_2_with_file_and_line() {
    let dir = scratch("errors");
    let garbage = dir.join("garbage.log");
    std::fs::write(&garbage, "not a log\n\u{0}\u{1}binary\n").unwrap_or_else(|e| panic!("{e}"));
    let out = tool(&["parse", &garbage.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("garbage.log: no nccl-tests output found"),
        "{err}"
    );

    let cut = dir.join("cut.log");
    let text: String = read(&reference("ar_sweep.out"))
        .lines()
        .take(20)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&cut, text).unwrap_or_else(|e| panic!("{e}"));
    // A cut log (a job killed by its time limit) keeps its rows, says where it stopped and is
    // reported as broken; --partial is accepted and changes nothing.
    for extra in [None, Some("--partial")] {
        let mut args = vec!["report"];
        args.extend(extra);
        let path = cut.to_string_lossy();
        args.push(&path);
        let out = tool(&args);
        assert_eq!(out.status.code(), Some(3));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(
                "cut.log:2 all_reduce_perf: no footer: the test stopped after 9 row(s) (the log \
                 ends at line 20, before the footer: the log is cut short, or the job hung or was killed)"
            ),
            "{err}"
        );
        assert_eq!(
            stdout(&out).lines().filter(|l| !l.starts_with('#')).count(),
            9
        );
    }

    let bad_json = dir.join("bad.json");
    std::fs::write(&bad_json, "{\"version\":3,\n\"config\":{}}").unwrap_or_else(|e| panic!("{e}"));
    let out = tool(&["report", &bad_json.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.json:2: not a nccl-tests JSON document")
    );

    assert_eq!(
        tool(&["report", "/nonexistent/x.json"]).status.code(),
        Some(2)
    );
    assert_eq!(tool(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn compare_exit_codes() {
    let base = reference("ar_sweep.out");
    let base = base.to_string_lossy();
    // The same run: every ratio is 1, no regression.
    let out = tool(&[
        "compare",
        &base,
        &base,
        "--metric",
        "algbw",
        "--max-regression",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("# 31 sizes in both runs; new/base algbw: geometric mean 1.000"),
        "{text}"
    );
    assert!(text.contains("# verdict: OK"), "{text}");

    // A second run of the same command is slower at several sizes.
    let run2 = reference("ar_sweep_run2.out");
    let run2 = run2.to_string_lossy();
    let args = [
        "compare", &base, &run2, "--metric", "algbw", "--half", "out",
    ];
    let out = tool(&[&args[..], &["--max-regression", "10"]].concat());
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("# regression: 1048576 B float out-of-place: 208.68 -> 134.62 GB/s (-35.5%)"),
        "{text}"
    );
    assert!(text.contains("# verdict: FAILED"), "{text}");
    // Without a threshold it only reports; a loose threshold above the noisy sizes (0.01 -> 0
    // at 32 B) or a higher size floor passes.
    assert_eq!(tool(&args).status.code(), Some(0));
    assert_eq!(
        tool(&[&args[..], &["--max-regression", "50", "--min-size", "1K"]].concat())
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        tool(&[&args[..], &["--max-regression", "10", "--min-size", "16M"]].concat())
            .status
            .code(),
        Some(0)
    );

    // busbw of one rank is 0: nothing to gate on, said plainly.
    let out = tool(&["compare", &base, &run2, "--max-regression", "5"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("no ratio: the base busbw is 0 or missing everywhere"));

    // JSON against text, and runs with nothing in common.
    let json = reference("ar_json.json");
    let out = tool(&[
        "compare",
        &json.to_string_lossy(),
        &reference("ar_json.out").to_string_lossy(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let other = reference("ag_dtypes.out");
    let out = tool(&["compare", &base, &other.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        stdout(&out).contains("# problem: collective: base all_reduce_perf, new all_gather_perf"),
        "{}",
        stdout(&out)
    );
}
#[test]
fn compare_with_nccl_tests_script_runs_both_and_compares() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/compare-with-nccl-tests.sh");
    let syntax = Command::new("bash").arg("-n").arg(&script).status();
    assert!(
        syntax.is_ok_and(|s| s.success()),
        "bash -n {}",
        script.display()
    );

    // Stand-ins: "nccl-tests" prints the reference sweep, "ours" its second run.
    let dir = scratch("script");
    let fake = |path: &Path, log: &str| {
        let body = format!(
            "#!/bin/sh\necho \"args: $*\"\ncat '{}'\n",
            reference(log).display()
        );
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new("/")))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(path, body).unwrap_or_else(|e| panic!("{e}"));
        let status = Command::new("chmod").arg("+x").arg(path).status();
        assert!(status.is_ok_and(|s| s.success()));
    };
    fake(
        &dir.join("nccl-tests/build/all_reduce_perf"),
        "ar_sweep.out",
    );
    fake(&dir.join("ours/all_reduce_perf"), "ar_sweep_run2.out");
    programs::program_link(
        Path::new(env!("CARGO_BIN_EXE_nccl-perf")),
        &dir.join("ours/nccl-perf"),
    );
    let run = |compare: &[&str]| {
        let mut args = vec![
            script.to_string_lossy().into_owned(),
            "--bin".into(),
            dir.join("ours").to_string_lossy().into_owned(),
            "--out".into(),
            dir.join("logs").to_string_lossy().into_owned(),
            dir.join("nccl-tests").to_string_lossy().into_owned(),
            "-b".into(),
            "8".into(),
            "-e".into(),
            "8G".into(),
        ];
        args.extend(compare.iter().map(|s| s.to_string()));
        Command::new("bash")
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let out = run(&[
        "--",
        "--metric",
        "algbw",
        "--half",
        "out",
        "--max-regression",
        "10",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("# verdict: FAILED"));
    let theirs = read(&dir.join("logs/nccl-tests.log"));
    assert!(theirs.starts_with("args: -b 8 -e 8G\n"), "{theirs}");
    assert_eq!(run(&[]).status.code(), Some(0));
}
