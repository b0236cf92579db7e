//! `nccl-perf parse`, `report` and `compare` on real nccl-tests logs published by others
//! (`tests/logs/`, each with its source in `tests/logs/SOURCES.md`): older layouts (`error`
//! column, no `redop`/`root` columns), `srun -l` and `mpirun --tag-output` prefixes, NCCL INFO
//! lines inside the table, excerpts that start at the table header, and broken runs made
//! from them (wrong data, FAILED footer, error lines, a cut log, fewer rows, other ranks).

use crate::programs::tool;

use std::path::{Path, PathBuf};
use std::process::Output;

use nccl_perf_report::health::{self, Check};
use nccl_perf_report::parse::{ParseOptions, parse_log};

fn logs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/logs")
}

fn read(name: &str) -> String {
    let path = logs().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nccl-perf-logs-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.to_string_lossy().into_owned()
}

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
        file: "nccl-tests-issue-249-hashes-lost.log",
        rows: 0,
        program: "all_reduce_perf",
        ranks: Some(1),
        problems: &[Check::Footer, Check::Rows],
        error_column: false,
        op: "",
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

/// What goes before line `i` of a log.
type Prefix = Box<dyn Fn(usize) -> String>;

/// A real log with every line prefixed, as documents and launchers show them.
fn prefixed(prefix: impl Fn(usize) -> String, body: &str) -> String {
    body.lines()
        .enumerate()
        .map(|(i, l)| format!("{}{l}\n", prefix(i)))
        .collect()
}

#[test]
fn a_constant_prefix_on_every_line_is_taken_off() {
    let body = read("gcp-a3mega-mpirun-16.log");
    let plain = parse_log(&body, "a3", &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch("prefixes");
    let cases: Vec<(&str, Prefix)> = vec![
        ("markdown-4-spaces", Box::new(|_| "    ".to_string())),
        ("tab", Box::new(|_| "\t".to_string())),
        ("quote", Box::new(|_| "> ".to_string())),
        (
            "ray",
            Box::new(|_| "(head, rank=0, pid=3808) [1,0]<stdout>:".to_string()),
        ),
        (
            "kubectl-prefix",
            Box::new(|_| "[pod/nccl-tests-launcher-6xq2v/mpi-launcher] ".to_string()),
        ),
        (
            "stern",
            Box::new(|_| "nccl-tests-launcher-6xq2v mpi-launcher ".to_string()),
        ),
        ("pdsh", Box::new(|_| "ztan-mig-235z: ".to_string())),
        (
            "timestamp",
            Box::new(|i| {
                format!(
                    "2024-11-05T18:{:02}:{:02}.{:09}Z ",
                    i / 60,
                    i % 60,
                    i * 7919
                )
            }),
        ),
    ];
    for (name, prefix) in cases {
        let log = prefixed(prefix, &body);
        let runs = parse_log(&log, name, &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(runs.len(), 1, "{name}");
        assert_eq!(runs[0].rows, plain[0].rows, "{name}");
        assert_eq!(runs[0].devices, plain[0].devices, "{name}");
        assert!(health::problems(&runs[0]).is_empty(), "{name}");
        let path = write(&dir, &format!("{name}.log"), &log);
        let out = tool(&["report", &path]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out));
    }
}

#[test]
fn a_row_broken_by_an_nccl_line_names_it_and_keeps_the_others() {
    let dir = scratch("interleaved");
    // nccl-tests prints a row's size, count, type, redop and root before it times the
    // collective: NCCL's lazy connection lines land inside the row.
    let body = read("gcp-a3mega-mpirun-16.log").replacen(
        "     2097152        524288     float     sum      -1",
        "     2097152        524288     float     sum      -1ztan-mig-235z:6899:7012 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/GPUDirectTCPX/0\n",
        1,
    );
    assert_ne!(body, read("gcp-a3mega-mpirun-16.log"));
    let log = write(&dir, "interleaved.log", &body);
    let out = tool(&["parse", &log]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(
        t.contains("unreadable line 43: a row broken by interleaved output: line 42 ("),
        "{t}"
    );
    assert!(t.contains("NCCL INFO Channel 00/0"), "{t}");
    let json = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        json.matches("\"size\":").count(),
        30,
        "the other 30 rows are kept"
    );
    let base = logs().join("gcp-a3mega-mpirun-16.log");
    let out = tool(&["compare", &base.to_string_lossy(), &log]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(t.contains("# problem: new "), "{t}");
}

#[test]
fn an_excerpt_from_using_devices_keeps_its_rank_count() {
    let dir = scratch("excerpt");
    let body = read("rccl-issue-1562-mi300x-vf-pci-function.log");
    let from = body.find("# Using devices").unwrap_or(0);
    let eight = write(&dir, "eight.log", &body[from..]);
    // The same excerpt as if the run had a second node: device lines for ranks 8 to 15.
    let more: String = (8..16)
        .map(|r| {
            format!(
                "#   Rank {r:2} Pid  61000 on other-node device  {} [0002:00:00.0] AMD Instinct MI300X VF\n",
                r - 8
            )
        })
        .collect();
    let sixteen_body = body[from..].replacen("MI300X VF\n#\n", &format!("MI300X VF\n{more}#\n"), 1);
    let sixteen = write(&dir, "sixteen.log", &sixteen_body);
    let out = tool(&["compare", &sixteen, &eight]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(t.contains("# problem: ranks: base 16, new 8"), "{t}");

    // A table without its device lines (an excerpt from the table header): the rank count
    // comes from busbw/algbw, 16, and is checked.
    let bare = logs().join("aws-eks-mpijob-tag-output.log");
    let out = tool(&["compare", &eight, &bare.to_string_lossy()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(
        t.contains("# note: new has no device lines: 16 rank(s) inferred from busbw/algbw"),
        "{t}"
    );
    assert!(t.contains("# problem: ranks: base 8, new 16"), "{t}");
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

/// `report` on `body` written to `dir/name`: (exit code, stdout, stderr).
fn report(dir: &Path, name: &str, body: &str) -> (Option<i32>, String, String) {
    let path = write(dir, name, body);
    let out = tool(&["report", &path]);
    let err = String::from_utf8_lossy(&out.stderr).replace(&path, "LOG");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        err,
    )
}

#[test]
fn logs_that_lost_their_hashes_read_as_the_originals() {
    // Every golden nccl-tests 2.19.6 log with a table, as a ticket or web page shows it: the `#`
    // gone with its blank kept (a filter), or with the blanks after it (a Markdown heading).
    let dir = scratch("hashes");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/nccl-tests-2.19.6-h200");
    let mut names: Vec<String> = std::fs::read_dir(&golden)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".out"))
        .collect();
    names.sort();
    let mut checked = 0;
    for name in names {
        let body = std::fs::read_to_string(golden.join(&name)).unwrap_or_else(|e| panic!("{e}"));
        if !body.contains("# Avg bus bandwidth") {
            continue;
        }
        let want = report(&dir, &name, &body);
        let filtered: String = body
            .lines()
            .map(|l| l.strip_prefix('#').unwrap_or(l).to_string() + "\n")
            .collect();
        let headings: String = body
            .lines()
            .map(|l| l.strip_prefix('#').map_or(l, str::trim_start).to_string() + "\n")
            .collect();
        for (how, text) in [("filtered", filtered), ("headings", headings)] {
            let got = report(&dir, &format!("{how}-{name}"), &text);
            assert_eq!(got, want, "{name} with its # lost ({how})");
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} golden logs with a table");
}

#[test]
fn a_public_log_that_lost_its_hashes_keeps_its_parameters() {
    let runs = parse_log(
        &read("nccl-tests-issue-249-hashes-lost.log"),
        "l",
        &ParseOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let run = &runs[0];
    assert_eq!(run.info.max_bytes, 16 * 1024 * 1024);
    assert_eq!(run.info.iters, 5);
    // The older wording of `-z 1`.
    assert_eq!(run.info.blocking, 1);
    assert_eq!(run.devices.len(), 1);
    assert_eq!(run.devices[0].name, "NVIDIA A10G");
    // And a log with its `#`s is not taken for one without.
    let with: String = read("gcp-a3mega-mpirun-16.log");
    let runs = parse_log(&with, "g", &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs[0].rows.len(), 31);
}

#[test]
fn ranks_are_inferred_from_the_printed_digits_only_when_they_tell() {
    // busbw/algbw = 2(n-1)/n for all_reduce; the two values are rounded to their last digit, so
    // n is known to a range, and given only when one whole number lies in it.
    let cases: &[(&str, Option<usize>)] = &[
        ("gcp-a3mega-mpirun-16.log", Some(16)),
        ("aws-p5-srun-l.log", Some(16)),
        ("aws-batch-tag-output.log", Some(8)),
        ("coreweave-gb200-1rack.log", Some(72)),
        // 386.56 / 195.31: n between 95.9 and 96.5 (a tolerance of 0.2 around 96.2 missed it).
        ("coreweave-h100-mpijob-kubectl.log", Some(96)),
        // 810.41 / 408.40 = 1.98435 is 2·127/128, but the excerpt's one device line says rank
        // 143 (144 ranks would print 1.98611): the numbers and the line disagree, neither wins.
        ("coreweave-gb200-2racks.log", None),
        // 1440 ranks: 405.74 / 203.01 allows anything from 1376 to 1532.
        ("coreweave-gb200-20racks.log", None),
    ];
    for &(file, want) in cases {
        let runs = parse_log(&read(file), file, &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(health::ranks_from_bandwidth(&runs[0]), want, "{file}");
    }
}

#[test]
fn an_excerpts_last_device_lines_bound_the_ranks_and_name_the_gpu() {
    for (file, least, gpu) in [
        ("coreweave-gb200-1rack.log", 72, "NVIDIA Graphics Device"),
        ("coreweave-gb200-2racks.log", 144, "NVIDIA Graphics Device"),
        ("coreweave-gb200-20racks.log", 1440, "NVIDIA GB200"),
    ] {
        let runs = parse_log(&read(file), file, &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(health::ranks_at_least(&runs[0]), Some(least), "{file}");
        // Some GPUs only: not taken for the run's devices.
        assert!(runs[0].devices.is_empty(), "{file}");
        // Explained from the log, and from its JSON alike.
        let dir = scratch("partial");
        let json = tool(&["parse", &logs().join(file).to_string_lossy()]);
        let json = write(&dir, "run.json", &String::from_utf8_lossy(&json.stdout));
        for input in [logs().join(file).to_string_lossy().into_owned(), json] {
            let out = text(&tool(&["report", "--explain", &input]));
            assert!(out.contains("# explain: all_reduce on "), "{out}");
            assert!(out.contains(&format!(", {gpu}\n")), "{input}: {out}");
            assert!(
                out.contains(&format!("rank {}", least - 1)),
                "{input}: {out}"
            );
        }
    }
}

/// `s` as a JSON string's contents.
fn json_escaped(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '"' => "\\\"".to_string(),
            '\\' => "\\\\".to_string(),
            '\n' => "\\n".to_string(),
            c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

#[test]
fn container_logs_read_as_the_text_they_hold() {
    // A container's output as Docker's json-file driver keeps it: one object a line.
    let dir = scratch("docker");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/nccl-tests-2.19.6-h200");
    for name in ["ar_sweep.out", "ar_perit.out", "alltoall_small.out"] {
        let body = std::fs::read_to_string(golden.join(name)).unwrap_or_else(|e| panic!("{e}"));
        let docker: String = body
            .split_inclusive('\n')
            .enumerate()
            .map(|(i, l)| {
                format!(
                    "{{\"log\":\"{}\",\"stream\":\"stdout\",\"time\":\"2026-12-04T10:00:{:02}.5Z\"}}\n",
                    json_escaped(l),
                    i % 60
                )
            })
            .collect();
        let want = report(&dir, name, &body);
        let got = report(&dir, &format!("docker-{name}"), &docker);
        assert_eq!(got, want, "{name} from a json-file log");
        // And as the kubelet keeps it (CRI: time, stream, full-line tag before each line).
        let cri: String = body
            .lines()
            .enumerate()
            .map(|(i, l)| {
                format!(
                    "2026-12-04T10:00:{:02}.{:09}Z stdout F {l}\n",
                    i % 60,
                    i * 7919
                )
            })
            .collect();
        let got = report(&dir, &format!("cri-{name}"), &cri);
        assert_eq!(got, want, "{name} from a CRI log");
    }
}

#[test]
fn files_saved_with_a_byte_order_mark_or_in_utf16_read_the_same() {
    // Windows PowerShell's `>` writes UTF-16 LE with a mark and CRLF; editors add a UTF-8 mark.
    let dir = scratch("bom");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/nccl-tests-2.19.6-h200");
    for name in ["ar_sweep.out", "ar_json.json"] {
        let body = std::fs::read_to_string(golden.join(name)).unwrap_or_else(|e| panic!("{e}"));
        let want = report(&dir, name, &body);
        let crlf = body.replace('\n', "\r\n");
        let le: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(crlf.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        let be: Vec<u8> = [0xFE, 0xFF]
            .into_iter()
            .chain(body.encode_utf16().flat_map(u16::to_be_bytes))
            .collect();
        let utf8: Vec<u8> = [0xEF, 0xBB, 0xBF].into_iter().chain(body.bytes()).collect();
        for (how, bytes) in [("utf16le", le), ("utf16be", be), ("utf8bom", utf8)] {
            let path = dir.join(format!("{how}-{name}"));
            std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
            let path = path.to_string_lossy().into_owned();
            let out = tool(&["report", &path]);
            let got = (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).replace(&path, "LOG"),
            );
            assert_eq!(got, want, "{name} saved as {how}");
        }
    }
}
