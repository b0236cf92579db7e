//! The `nccl-perf` tool against the nccl-tests v2.19.6 reference outputs: every file parses and
//! prints back byte for byte (through the JSON document), `report` of the upstream JSON file
//! matches its log token for token, and the binary's subcommands keep their exit codes and
//! write real images.

use crate::programs;

use crate::programs::tool;
use crate::reference_outputs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nccl_perf_report::json::of_run::document;
use nccl_perf_report::json::read::read_documents;
use nccl_perf_report::parse::{ParseOptions, parse_log};
use nccl_perf_report::run::Run;

fn reference(name: &str) -> PathBuf {
    reference_outputs::reference_dir().join(name)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fresh scratch folder for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nccl-perf-tool-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Lines that no test owns: the recorder's, and messages printed before a test starts.
fn outside_any_test(line: &str) -> bool {
    line.starts_with("### ")
        || line.starts_with("# time -v:")
        || line.starts_with("# Writing JSON output to ")
        || line.starts_with("invalid type ")
}

#[test]
fn every_reference_file_round_trips_through_json() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(reference_outputs::reference_dir())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let (mut tests, mut rows) = (0, 0);
    for path in &files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = read(path);
        if name.ends_with(".json") {
            let runs = read_documents(&text, &name).unwrap_or_else(|e| panic!("{e}"));
            let again =
                read_documents(&document(&runs[0]), &name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(again, runs, "{name}: JSON → model → JSON → model");
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        let runs = match parse_log(&text, &name, &ParseOptions::default()) {
            Ok(runs) => runs,
            Err(e) => {
                // Only the usage text and an argument error have no test in them.
                assert!(
                    ["ar_help.out", "ar_bad_be.out"].contains(&name.as_str()),
                    "{e}"
                );
                assert!(e.message.starts_with("no nccl-tests output found"), "{e}");
                continue;
            }
        };
        let mut covered = vec![false; lines.len()];
        for run in &runs {
            let back = read_documents(&document(run), &name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back.len(), 1);
            let printed = back[0].to_text();
            let first = run.source.first_line - 1;
            let got: Vec<&str> = printed.lines().collect();
            let want = &lines[first..(first + got.len()).min(lines.len())];
            assert_eq!(got, want, "{name}: test at line {}", first + 1);
            covered[first..first + got.len()].fill(true);
            tests += 1;
            rows += run.rows.len();
        }
        for (i, line) in lines.iter().enumerate() {
            assert!(
                covered[i] || outside_any_test(line),
                "{name}:{}: line not printed back: {line:?}",
                i + 1
            );
        }
    }
    assert!(tests >= 26 && rows >= 300, "{tests} tests, {rows} rows");
}

#[test]
fn report_of_upstream_json_matches_its_log_token_for_token() {
    let out = tool(&["report", &reference("ar_json.json").to_string_lossy()]);
    assert!(out.status.success());
    let ours = stdout(&out);
    let log = read(&reference("ar_json.out"));
    let is_row = |l: &&str| {
        l.split_whitespace()
            .next()
            .is_some_and(|t| t.parse::<u64>().is_ok())
    };
    let ours_rows: Vec<Vec<&str>> = ours
        .lines()
        .filter(is_row)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let log_rows: Vec<Vec<&str>> = log
        .lines()
        .filter(is_row)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(ours_rows.len(), 6);
    assert_eq!(ours_rows, log_rows);
    // The table lines themselves are byte-identical too.
    let table = |t: &str| -> Vec<String> {
        t.lines()
            .skip_while(|l| !l.contains("out-of-place"))
            .take_while(|l| !l.starts_with("# Collective test concluded"))
            .map(String::from)
            .collect()
    };
    assert_eq!(table(&ours), table(&log));
}

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

/// A `--collectives` launch's log (one H100, docs/results/h100x1/one-launch/) reads back as one
/// run per section, in order, and prints back as it was.
#[test]
fn a_log_of_several_collectives_in_one_launch_reads_section_by_section() {
    let log = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/results/h100x1/one-launch/r2.ours-one.out");
    let out = tool(&["parse", &log.to_string_lossy()]);
    let runs = read_documents(&stdout(&out), "stdout").unwrap_or_else(|e| panic!("{e}"));
    let programs: Vec<&str> = runs.iter().map(|r: &Run| r.info.program.as_str()).collect();
    assert_eq!(
        programs,
        [
            "all_reduce_perf",
            "all_gather_perf",
            "reduce_scatter_perf",
            "alltoall_perf",
            "sendrecv_perf"
        ]
    );
    assert!(
        runs.iter().all(|r| r.rows.len() == 31),
        "31 sizes from 8 B to 8 GiB each"
    );
    // The log holds stderr too (2>&1): our line about the validation kernels, which the report
    // keeps but places with the table's first lines.
    let nccl_tests_lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !outside_any_test(l) && !l.contains(": validation kernels:"))
            .map(str::to_string)
            .collect()
    };
    let printed = stdout(&tool(&["report", &log.to_string_lossy()]));
    assert_eq!(nccl_tests_lines(&printed), nccl_tests_lines(&read(&log)));
    // compare of two such launches pairs the sections by program and says which is which.
    let other = log.with_file_name("r3.ours-one.out");
    let cmp = stdout(&tool(&[
        "compare",
        &log.to_string_lossy(),
        &other.to_string_lossy(),
        "--max-regression",
        "1",
    ]));
    for p in [
        "all_reduce_perf",
        "all_gather_perf",
        "reduce_scatter_perf",
        "alltoall_perf",
        "sendrecv_perf",
    ] {
        assert!(cmp.contains(&format!("\n# {p}\n")), "{cmp}");
    }
    assert!(cmp.contains("# 155 sizes in both runs"), "{cmp}");
    assert!(
        cmp.lines()
            .filter(|l| l.starts_with("# regression: "))
            .all(|l| l.contains("_perf: ")),
        "{cmp}"
    );
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
                 ends at line 20, before the footer: the log is cut short or the job was killed)"
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

/// A real run under NCCL 2.32.3 (PyPI's nvidia-nccl-cu12 wheel, pruned to sm_90, loaded with
/// NCCL_PERF_LIBNCCL): all_reduce at 4 ranks posing as hosts on one H100, validated, whose
/// last line is NCCL's last error message, as nccl-tests prints it
/// (docs/results/h100x1/nccl-2.32.3/README.md).
const NCCL_2_32_RUN: &str = "docs/results/h100x1/nccl-2.32.3/all_reduce_n4.out";
const NCCL_2_32_LAST_ERROR: &str =
    "# error: RMA/Socket : rma_socket requires GDRCopy; and GDR Copy is not available";

#[test]
fn nccls_last_error_after_a_complete_run_is_a_note_not_a_failure() {
    // Before: report and compare called every run under NCCL 2.32 BROKEN (exit 3).
    let dir = scratch("last-error");
    let log = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(NCCL_2_32_RUN);
    let text = read(&log);
    assert!(text.trim_end().ends_with(NCCL_2_32_LAST_ERROR), "{text}");
    let log = log.to_string_lossy().into_owned();
    let out = tool(&["report", &log]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("note: ") && err.contains("rma_socket requires GDRCopy"),
        "{err}"
    );
    // The text keeps the line; the JSON carries it as a note, not a problem.
    assert!(stdout(&out).contains(NCCL_2_32_LAST_ERROR));
    let json = stdout(&tool(&["parse", &log]));
    assert!(
        json.contains("\"nccl_perf_notes\":[\"NCCL's last error message"),
        "{json}"
    );
    assert!(!json.contains("nccl_perf_problems"), "{json}");
    // compare against itself: OK, with the notes.
    let out = tool(&["compare", &log, &log]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("# note: new ") && report.contains("rma_socket"),
        "{report}"
    );
    // The same line on a run that did not complete still fails it (no footer).
    let cut: String = text
        .lines()
        .filter(|l| !l.starts_with("# Out of bounds") && !l.starts_with("# Avg bus"))
        .map(|l| format!("{l}\n"))
        .collect();
    let cut_log = dir.join("cut.out");
    std::fs::write(&cut_log, cut).unwrap();
    let out = tool(&["report", &cut_log.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn a_cut_run_is_marked_in_the_legend_and_named_on_stderr() {
    // Before: a cut or failed run was drawn like any other, without a word.
    let dir = scratch("plot-cut");
    let full = reference("ar_sweep.out");
    let text = read(&full);
    let cut: String = text
        .lines()
        .take_while(|l| !l.starts_with("# Out of bounds"))
        .map(|l| format!("{l}\n"))
        .collect();
    let cut_path = dir.join("cut.out");
    std::fs::write(&cut_path, cut).unwrap();
    let svg = dir.join("cut.svg");
    let out = tool(&[
        "plot",
        &full.to_string_lossy(),
        &cut_path.to_string_lossy(),
        "-o",
        &svg.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cut: no footer") && err.contains("marked 'cut short' in the legend"),
        "{err}"
    );
    let image = read(&svg);
    assert!(
        image.contains("cut (cut short) out-of-place"),
        "no mark in the legend"
    );
    assert!(
        !image.contains("ar_sweep (cut short)"),
        "the sound run was marked"
    );
}

#[test]
fn plots_are_written_as_svg_and_png() {
    let dir = scratch("plot");
    let runs = [reference("ar_sweep.out"), reference("ar_sweep_run2.out")];
    let runs: Vec<String> = runs
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    // A folder that does not exist: one line, exit 2.
    let missing = dir.join("no/such/folder/x.png");
    let out = tool(&["plot", &runs[0], "-o", &missing.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        format!(
            "nccl-perf: {}: cannot create the image: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    let svg = dir.join("sweep.svg");
    let out = tool(&[
        "plot",
        &runs[0],
        &runs[1],
        "--metric",
        "algbw",
        "--half",
        "both",
        "-o",
        &svg.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = read(&svg);
    assert!(text.starts_with("<svg ") && text.trim_end().ends_with("</svg>"));
    assert_eq!(text.matches("<svg").count(), 1);
    for label in [
        "Message size (bytes, log2 scale)",
        "Algorithm bandwidth (GB/s)",
        "ar_sweep out-of-place",
        "ar_sweep_run2 in-place",
        "1 MiB",
    ] {
        assert!(text.contains(label), "{label} missing from the SVG");
    }

    let png = dir.join("sweep.png");
    let out = tool(&[
        "plot",
        &runs[0],
        &runs[1],
        "--log-y",
        "--metric",
        "algbw",
        "-o",
        &png.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{e}"));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());

    // busbw of one rank is 0 everywhere: drawn, with a note that says why.
    let out = tool(&[
        "plot",
        &runs[0],
        "-o",
        &dir.join("busbw.svg").to_string_lossy(),
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("every busbw is 0"));

    let out = tool(&["plot", &runs[0], "-o", &dir.join("x.gif").to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plots_name_inputs_apart_and_keep_one_rank_no_ops_off_the_axis() {
    let dir = scratch("plot-names");
    // Two runs both called run.out, in folders a/ and b/ (a colleague's usual layout).
    let mut paths = Vec::new();
    for (folder, name) in [("a", "ar_sweep.out"), ("b", "ar_sweep_run2.out")] {
        std::fs::create_dir_all(dir.join(folder)).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join(folder).join("run.out");
        std::fs::write(&path, read(&reference(name))).unwrap_or_else(|e| panic!("{e}"));
        paths.push(path.to_string_lossy().into_owned());
    }
    let svg = dir.join("ab.svg");
    let out = tool(&[
        "plot",
        &paths[0],
        &paths[1],
        "--metric",
        "algbw",
        "-o",
        &svg.to_string_lossy(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let text = read(&svg);
    assert!(text.contains("a/run out-of-place"), "{text}");
    assert!(text.contains("b/run out-of-place"), "{text}");
    // One rank: the in-place no-ops (algbw in the thousands of GB/s) are left out, and said so.
    assert!(!text.contains("in-place"), "in-place drawn at one rank");
    assert!(
        err.contains("a/run: one rank, where the in-place operations are no-ops"),
        "{err}"
    );
    // No exponent in the axis labels.
    assert!(!text.contains("e+0"), "an exponent in the labels");
    // Asked for, they are drawn, and the labels stay readable.
    let both = dir.join("both.svg");
    let out = tool(&[
        "plot",
        &paths[0],
        "--metric",
        "algbw",
        "--half",
        "both",
        "-o",
        &both.to_string_lossy(),
    ]);
    assert!(out.status.success());
    let text = read(&both);
    assert!(text.contains("run in-place"), "{text}");
    assert!(!text.contains("e+0"), "an exponent in the labels");
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

#[test]
fn report_views_of_per_iteration_json() {
    let dir = scratch("views");
    let name = "ar_json.json";
    let mut run = read_documents(&read(&reference(name)), name)
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0);
    // Four processes on two hosts; process 3 is 1.3x behind in every iteration, and the job
    // spikes at iteration 7 of every row.
    let template = run.devices[0].clone();
    run.devices = (0..4)
        .map(|p| nccl_perf_report::DeviceInfo {
            rank: p,
            pid: 1000 + p as u32,
            hostname: format!("host{}", p / 2),
            ..template.clone()
        })
        .collect();
    for row in &mut run.rows {
        for half in [&mut row.out_of_place, &mut row.in_place] {
            let procs: Vec<Vec<f64>> = (0..4)
                .map(|p| {
                    (0..10)
                        .map(|i| {
                            let t = 100.0 + i as f64 * 0.01 + p as f64 * 0.1;
                            t * if p == 3 { 1.3 } else { 1.0 } * if i == 7 { 3.0 } else { 1.0 }
                        })
                        .collect()
                })
                .collect();
            let times = (0..10)
                .map(|i| procs.iter().map(|p| p[i]).fold(0.0, f64::max))
                .collect();
            half.per_iter = Some(nccl_perf_report::PerIterStats {
                skipped: 0,
                min_us: 100.0,
                max_us: 400.0,
                avg_us: 150.0,
                p50_us: 130.0,
                p95_us: 400.0,
                p99_us: 400.0,
                stdev_us: 80.0,
                cv_pct: 50.0,
                times_us: times,
                per_process_max_times_us: procs,
            });
        }
    }
    let file = dir.join("perit.json");
    std::fs::write(&file, document(&run)).unwrap_or_else(|e| panic!("{e}"));
    let path = file.to_string_lossy().into_owned();
    let out = tool(&["report", &path, "--view", "straggler"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.contains("process 3 (rank 3, pid 1003 on host1)  <- straggler")),
        "{text}"
    );
    let out = tool(&["report", &path, "--view", "nodes", "--in-place"]);
    assert!(
        stdout(&out).contains("host1  <- behind"),
        "{}",
        stdout(&out)
    );
    let out = tool(&["report", &path, "--view", "spikes", "--threshold", "2"]);
    let text = stdout(&out);
    assert!(
        text.contains("(worst 3.00x at iteration 7): 1 of the job"),
        "{text}"
    );
    // A run without per-iteration times: one line, exit 2.
    let out = tool(&[
        "report",
        &reference(name).to_string_lossy(),
        "--view",
        "spikes",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no per-iteration times") && err.lines().count() == 1,
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
