//! Every reference output parses and prints back byte for byte (through the JSON document),
//! `report` of the upstream JSON file matches its log token for token, and a launch of several
//! collectives reads back section by section.

use super::{outside_any_test, read, reference, stdout};
use crate::programs::tool;
use crate::reference_outputs;
use nccl_perf_report::json::of_run::document;
use nccl_perf_report::json::read::read_documents;
use nccl_perf_report::parse::{ParseOptions, parse_log};
use nccl_perf_report::run::Run;
use std::path::{Path, PathBuf};

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
