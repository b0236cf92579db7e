//! Every public log read: its rows, program, ranks, problems and layout (older `error` column,
//! no `redop`/`root` columns), rows that do not fit, several tests in one log, and a test whose
//! log never names it.

use super::{logs, read, scratch, text, write};
use crate::programs::tool;
use nccl_perf_report::health::{self, Check};
use nccl_perf_report::parse::{ParseOptions, parse_log};

/// One public log and what must be read from it.
struct Expect {
    file: &'static str,
    rows: usize,
    /// The program name, when the log shows it (a command line or `Collective test starting`).
    program: &'static str,
    /// Ranks, when the test's device lines are in the log.
    ranks: Option<usize>,
    /// The problems `health` must find, in order (empty for a sound run): `Footer` for an
    /// excerpt or a job that ends before the footer.
    problems: &'static [Check],
    /// `error` column (older layouts) instead of `#wrong`.
    error_column: bool,
    /// op of the first row (when there is one).
    op: &'static str,
}

const PUBLIC: &[Expect] = &[
    Expect {
        file: "superbench-allreduce.log",
        rows: 34,
        program: "",
        ranks: Some(8),
        problems: &[],
        error_column: true,
        op: "sum",
    },
    Expect {
        file: "superbench-allgather.log",
        rows: 34,
        program: "",
        ranks: Some(8),
        problems: &[],
        error_column: true,
        op: "none",
    },
    Expect {
        file: "superbench-alltoall.log",
        rows: 34,
        program: "",
        ranks: Some(8),
        problems: &[],
        error_column: true,
        op: "",
    },
    Expect {
        file: "superbench-broadcast.log",
        rows: 34,
        program: "",
        ranks: Some(8),
        problems: &[],
        error_column: true,
        op: "none",
    },
    Expect {
        file: "superbench-reduce.log",
        rows: 34,
        program: "",
        ranks: Some(8),
        problems: &[],
        error_column: true,
        op: "sum",
    },
    Expect {
        file: "superbench-reducescatter.log",
        rows: 34,
        program: "",
        ranks: Some(8),
        problems: &[],
        error_column: true,
        op: "sum",
    },
    Expect {
        file: "aws-p4de-srun-l.log",
        rows: 29,
        program: "",
        ranks: None,
        problems: &[Check::Footer],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "aws-p5-srun-l.log",
        rows: 32,
        program: "",
        ranks: None,
        problems: &[Check::Footer],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "aws-eks-mpijob-tag-output.log",
        rows: 7,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "aws-batch-tag-output.log",
        rows: 32,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "aws-p5en-topology-excerpt.log",
        rows: 3,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "coreweave-h100-mpijob-kubectl.log",
        rows: 5,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "coreweave-gb200-1rack.log",
        rows: 5,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "coreweave-gb200-2racks.log",
        rows: 6,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "coreweave-gb200-20racks.log",
        rows: 6,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "gcp-a3mega-mpirun-16.log",
        rows: 31,
        program: "",
        // The document lost the `#` of its first three lines (parameters, `Using devices`,
        // rank 0's device line): they are read all the same.
        ranks: Some(16),
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "nccl-tests-issue-287-rtx5090-alltoall.log",
        rows: 1,
        program: "alltoall_perf",
        ranks: Some(1),
        problems: &[],
        error_column: false,
        op: "none",
    },
    Expect {
        file: "rccl-issue-1562-mi300x-vf-pci-function.log",
        rows: 25,
        program: "",
        ranks: Some(8),
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "aws-eks-mpijob-indented.log",
        rows: 7,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "skypilot-pr-3217-ray-prefix-cut.log",
        rows: 0,
        program: "",
        ranks: Some(4),
        problems: &[Check::Footer, Check::Rows],
        error_column: false,
        op: "",
    },
    Expect {
        file: "nccl-issue-258-using-devices-excerpt.log",
        rows: 4,
        program: "",
        ranks: Some(4),
        problems: &[Check::Footer],
        error_column: true,
        op: "sum",
    },
    Expect {
        file: "nccl-issue-583-hashes-lost.log",
        rows: 2,
        program: "",
        ranks: Some(2),
        problems: &[Check::Footer],
        error_column: true,
        op: "sum",
    },
    Expect {
        file: "nccl-issue-1320-stopped-in-setup.log",
        rows: 0,
        program: "all_reduce_perf",
        ranks: Some(2),
        problems: &[Check::Footer, Check::Rows],
        error_column: false,
        op: "",
    },
    Expect {
        file: "nccl-tests-issue-249-hashes-lost.log",
        rows: 0,
        program: "all_reduce_perf",
        ranks: Some(1),
        problems: &[Check::Footer, Check::Rows],
        error_column: false,
        op: "",
    },
    Expect {
        file: "dstack-gcp-a4-hashes-lost.log",
        rows: 11,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "dstack-gcp-a3mega-hashes-lost.log",
        rows: 11,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "none",
    },
    Expect {
        file: "dstack-gcp-a3high-hashes-lost.log",
        rows: 11,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "none",
    },
    Expect {
        file: "dstack-lambda-hashes-lost.log",
        rows: 29,
        program: "all_reduce_perf",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "dstack-nebius-hashes-lost.log",
        rows: 31,
        program: "",
        ranks: None,
        problems: &[],
        error_column: false,
        op: "sum",
    },
    Expect {
        file: "azure-h100-invalid-number-of-gpus.log",
        rows: 0,
        program: "all_reduce_perf",
        ranks: None,
        problems: &[Check::Footer, Check::Errors, Check::Rows],
        error_column: false,
        op: "",
    },
];

#[test]
fn every_public_log_is_read() {
    let mut files: Vec<String> = std::fs::read_dir(logs())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = PUBLIC.iter().map(|e| e.file.to_string()).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "every log in tests/logs has an expectation here"
    );
    let sources = read("SOURCES.md");
    for e in PUBLIC {
        assert!(
            sources.contains(e.file),
            "{} has no entry in SOURCES.md",
            e.file
        );
        let body = read(e.file);
        let runs = parse_log(&body, e.file, &ParseOptions::default())
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(runs.len(), 1, "{}", e.file);
        let run = &runs[0];
        assert_eq!(run.rows.len(), e.rows, "{}", e.file);
        assert_eq!(run.info.program, e.program, "{}", e.file);
        assert_eq!(health::ranks(run), e.ranks, "{}", e.file);
        assert_eq!(run.text.error_column, e.error_column, "{}", e.file);
        if let Some(first) = run.rows.first() {
            assert_eq!(first.op, e.op, "{}", e.file);
        }
        assert!(
            run.rows.iter().all(|r| r.size > 0 || r.count == 0),
            "{}",
            e.file
        );
        // A sound public run is reported as sound; a cut or failed one for what it lacks.
        let problems: Vec<Check> = health::problems(run).iter().map(|p| p.check).collect();
        assert_eq!(
            problems,
            e.problems,
            "{}: {:?}",
            e.file,
            health::problems(run)
        );
        // And the tool agrees, `--partial` or not (accepted, changes nothing).
        let path = logs().join(e.file);
        let path = path.to_string_lossy();
        let want = Some(if e.problems.is_empty() { 0 } else { 3 });
        for extra in [None, Some("--partial")] {
            let mut args = vec!["parse", &*path];
            args.extend(extra);
            let out = tool(&args);
            assert_eq!(out.status.code(), want, "{}", text(&out));
            assert!(!out.stdout.is_empty(), "{}: the runs are written", e.file);
        }
    }
}

#[test]
fn older_layouts_keep_their_values() {
    let runs = parse_log(
        &read("superbench-reduce.log"),
        "r",
        &ParseOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let last = &runs[0].rows[33];
    assert_eq!(
        (last.size, last.root, last.op.as_str()),
        (8589934592, 0, "sum")
    );
    assert_eq!(last.out_of_place.busbw, 228.38);
    assert_eq!(last.in_place.wrong, None);
    let runs = parse_log(
        &read("superbench-allgather.log"),
        "g",
        &ParseOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs[0].rows[33].root, -1);
    assert_eq!(runs[0].summary.as_ref().map(|s| s.avg_busbw), Some(58.2651));
}

#[test]
fn a_row_that_does_not_fit_names_its_line_and_the_columns() {
    let body =
        read("superbench-allgather.log").replacen("    34.27    0.00", "  sum  34.27    0.00", 1);
    let runs =
        parse_log(&body, "ag.log", &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs[0].rows.len(), 33, "the other rows are kept");
    assert_eq!(
        runs[0].text.broken_lines,
        vec![(
            17,
            "a row of this table has 11 fields (size count type, then time algbw busbw error \
             per half), this line has 12"
                .to_string()
        )]
    );
}

#[test]
fn several_tests_in_one_log() {
    let body = read("superbench-allreduce.log") + &read("superbench-allgather.log");
    let runs =
        parse_log(&body, "two.log", &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0].rows[2].op.as_str(), runs[1].rows[2].op.as_str()),
        ("sum", "none")
    );
}

#[test]
fn an_unnamed_test_stays_unnamed_through_json_and_its_tables_name_what_its_numbers_show() {
    let dir = scratch("unnamed");
    let out = tool(&[
        "parse",
        &logs().join("superbench-allreduce.log").to_string_lossy(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let json = write(&dir, "sb.json", &String::from_utf8_lossy(&out.stdout));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .starts_with("{\"version\":3,\"start_time\":\"\",\"args\":[\"\","),
        "the JSON invents no program name"
    );
    // Markdown and CSV name what report --explain infers (before: "unnamed test" and an empty
    // cell), and say so where there is room.
    let md = text(&tool(&["report", "--format", "markdown", &json]));
    assert!(
        md.starts_with("### all_reduce_perf, inferred from its numbers ("),
        "{md}"
    );
    let csv = text(&tool(&["report", "--format", "csv", &json]));
    assert!(
        csv.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("all_reduce_perf,")),
        "{csv}"
    );
    // The title names the test, never the tool (the log's path in it may hold any word).
    assert!(!md.lines().any(|l| l.starts_with("### nccl-perf")), "{md}");
    let table = text(&tool(&["report", &json]));
    assert!(!table.contains("Collective test starting"), "{table}");
}
