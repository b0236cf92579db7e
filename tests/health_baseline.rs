//! Baselines (`nccl-perf baseline`, `nccl-perf health --baseline`) on committed logs: three
//! one-launch checks of one H100 (docs/results/h100x1/one-launch/) make a baseline; the same
//! logs are judged `ok`, the logs with busbw and algbw cut by 15 % `slow`, a job of another
//! shape (4 ranks posing as hosts) is said not to match in one line; the exit code of every
//! outcome; merging; and a two-node log's Prometheus file read by the real parser with one
//! `host` label per node. `--health` shares the verdict-to-code function
//! (`nccl_perf_explain::health::Health::exit_code`, unit-tested there); on a GPU,
//! ci/gpu-health-baseline.sh checks it end to end.

use crate::health_check::{log, parsed_by_prometheus, scratch};
use crate::programs::tool;
use std::path::{Path, PathBuf};

const RUNS: [&str; 3] = [
    "docs/results/h100x1/one-launch/r1.ours-one.out",
    "docs/results/h100x1/one-launch/r2.ours-one.out",
    "docs/results/h100x1/one-launch/r3.ours-one.out",
];
const POSING: &str = "docs/results/h100x1/one-launch-posing/p4.r1.ours-one.out";

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `nccl-perf` with `args`: (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = tool(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The baseline of the three runs, in `dir`.
fn baseline(dir: &Path) -> PathBuf {
    let b = dir.join("h100x1.baseline");
    let mut args = vec!["baseline".to_string()];
    args.extend(RUNS.iter().map(|r| log(r)));
    args.extend(["-o".into(), s(&b)]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = run(&argv);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("rows from 3 input(s) written to"), "{err}");
    b
}

/// `log` with every row's bandwidths times `k` and times divided by it (the table's columns:
/// size count type redop root, then time algbw busbw #wrong out of place and in place).
fn scaled(log: &str, k: f64, to: &Path) -> PathBuf {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{log}: {e}"));
    let out: String = text
        .lines()
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let row = t.len() == 13 && t[0].parse::<u64>().is_ok() && t[1].parse::<u64>().is_ok();
            if !row {
                return format!("{l}\n");
            }
            let f = |i: usize, by: f64| match t[i].parse::<f64>() {
                Ok(v) => format!("{:.2}", v * by),
                Err(_) => t[i].to_string(),
            };
            format!(
                "{:>12} {:>12} {:>8} {:>6} {:>6} {:>8} {:>7} {:>7} {:>6} {:>8} {:>7} {:>7} {:>6}\n",
                t[0],
                t[1],
                t[2],
                t[3],
                t[4],
                f(5, 1.0 / k),
                f(6, k),
                f(7, k),
                t[8],
                f(9, 1.0 / k),
                f(10, k),
                f(11, k),
                t[12]
            )
        })
        .collect();
    std::fs::write(to, out).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    to.to_path_buf()
}

#[test]
fn a_baseline_of_three_runs_judges_them_ok_and_a_cut_of_15_percent_slow() {
    let dir = scratch("baseline-judge");
    let b = baseline(&dir);
    let text = std::fs::read_to_string(&b).unwrap_or_default();
    assert!(text.starts_with("nccl-perf-baseline 1\n"), "{text}");
    assert!(
        text.contains("row | collective=sendrecv | gpu=NVIDIA H100 80GB HBM3 | ranks=1 | nodes=1 | gpus_per_node=1 | bytes=8589934592 | place=out | metric=algbw | busbw=1448.5 | spread=1446.9..1449.3 | runs=1449.3,1446.9,1448.5\n"),
        "{text}"
    );
    for r in RUNS {
        let json = dir.join("ok.json");
        let (code, out, err) = run(&["health", "--baseline", &s(&b), &log(r), "--json", &s(&json)]);
        assert_eq!(code, 0, "{r}: {out}{err}");
        assert_eq!(out.matches(": ok\n").count(), 5, "{out}");
        assert!(out.ends_with("# health: healthy: 5 of 5 ok, 0 slow (below 90 % of expected), 0 with wrong data, 0 without an expected figure\n"), "{out}");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
                .unwrap_or_default();
        assert_eq!(doc["collectives"][0]["judged_by"], "baseline", "{doc}");
        assert_eq!(doc["collectives"][0]["metric"], "algbw", "{doc}");
    }
    // Five launches of ours and of nccl-tests on the same GPU: ok against the one-launch runs.
    let mut five = vec!["health".to_string(), "--baseline".into(), s(&b)];
    for who in ["ours", "theirs"] {
        for c in [
            "all_reduce",
            "all_gather",
            "reduce_scatter",
            "alltoall",
            "sendrecv",
        ] {
            five.push(log(&format!(
                "docs/results/h100x1/one-launch/r2.{who}-five.{c}.out"
            )));
        }
    }
    let argv: Vec<&str> = five.iter().map(String::as_str).collect();
    let (code, out, err) = run(&argv);
    assert_eq!((code, out.matches(": ok\n").count()), (0, 10), "{out}{err}");
    let cut = scaled(&log(RUNS[1]), 0.85, &dir.join("cut.log"));
    let (code, out, err) = run(&["health", "--baseline", &s(&b), &s(&cut)]);
    assert_eq!(code, 7, "{out}{err}");
    assert_eq!(out.matches(": slow\n").count(), 5, "{out}");
    assert!(
        out.contains("# health: all_reduce: algbw 1298.3 GB/s (one rank) at 8589934592 B, baseline algbw 1527.3 GB/s, 85.0 % over the sizes judged"),
        "{out}"
    );
    assert!(out.ends_with("# health: slow: 0 of 5 ok, 5 slow (below 90 % of expected), 0 with wrong data, 0 without an expected figure\n"), "{out}");
    // 5 % slower is within the default 90 %, but not within --threshold 97.
    let near = scaled(&log(RUNS[1]), 0.95, &dir.join("near.log"));
    assert_eq!(run(&["health", "--baseline", &s(&b), &s(&near)]).0, 0);
    assert_eq!(
        run(&[
            "health",
            "--baseline",
            &s(&b),
            &s(&near),
            "--threshold",
            "97"
        ])
        .0,
        7
    );
}

#[test]
fn another_shape_is_said_in_one_line_and_every_outcome_has_its_code() {
    let dir = scratch("baseline-codes");
    let b = baseline(&dir);
    let (code, out, _) = run(&["health", "--baseline", &s(&b), &log(POSING)]);
    let said: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("baseline not used"))
        .collect();
    assert_eq!(
        said,
        [
            "# health: baseline not used for all_reduce, all_gather, reduce_scatter, alltoall, sendrecv: this job is 4 × NVIDIA H100 80GB HBM3 on 4 nodes (1 per node); the baseline has 1 × NVIDIA H100 80GB HBM3 on 1 node (1 per node)"
        ],
        "{out}"
    );
    assert_eq!(code, 10, "{out}");
    // Not judged: 10, or 0 with --allow-unjudged; without a baseline, one GPU is not judged.
    assert_eq!(
        run(&[
            "health",
            "--baseline",
            &s(&b),
            &log(POSING),
            "--allow-unjudged"
        ])
        .0,
        0
    );
    let (code, out, _) = run(&["health", &log(RUNS[0])]);
    assert_eq!(code, 10, "{out}");
    assert!(out.contains(": unknown (one rank: a device-local copy, for which the table has no figure; --baseline FILE"), "{out}");
    // Wrong data: 7 (and no baseline is made from such a run: 3).
    let wrong = log("docs/results/h200x1/issue7/all_reduce_out.out");
    assert_eq!(run(&["health", &wrong]).0, 7);
    assert_eq!(run(&["health", &wrong, "--allow-unjudged"]).0, 7);
    let (code, _, err) = run(&["baseline", &wrong, "-o", &s(&dir.join("no.baseline"))]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("not a known-good run, so no baseline is made from it"),
        "{err}"
    );
    assert!(!dir.join("no.baseline").exists());
    // Hung: 4 (the hang watch's record in a -J file).
    let (code, out, _) = run(&["health", &log("docs/results/h100x1/hang/host4/run.json")]);
    assert_eq!(code, 4, "{out}");
    // Usage: 2 (a file that is no baseline, a baseline of another version).
    let (code, _, err) = run(&["health", "--baseline", &log(RUNS[0]), &log(RUNS[0])]);
    assert_eq!(code, 2);
    assert!(err.contains("not a baseline file"), "{err}");
    let v2 = dir.join("v2.baseline");
    std::fs::write(&v2, "nccl-perf-baseline 2\n").unwrap_or_default();
    let (code, _, err) = run(&["health", "--baseline", &s(&v2), &log(RUNS[0])]);
    assert_eq!(code, 2);
    assert!(
        err.contains("this nccl-perf reads `nccl-perf-baseline 1` files"),
        "{err}"
    );
}

#[test]
fn baselines_merge_by_nccl_perf_baseline_and_by_cat() {
    let dir = scratch("baseline-merge");
    let one = |r: &str, name: &str| {
        let p = dir.join(name);
        assert_eq!(run(&["baseline", &log(r), "-o", &s(&p)]).0, 0);
        p
    };
    let (a, b, c) = (one(RUNS[0], "a"), one(RUNS[1], "b"), one(RUNS[2], "c"));
    let merged = dir.join("merged");
    assert_eq!(
        run(&["baseline", &s(&a), &s(&b), &log(RUNS[2]), "-o", &s(&merged)]).0,
        0
    );
    let cat = dir.join("cat");
    let joined: String = [&a, &b, &c]
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    std::fs::write(&cat, joined).unwrap_or_default();
    let all = baseline(&dir);
    let rows = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("row "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(rows(&merged), rows(&all));
    // A file joined with cat is read as its merge.
    let (code, out, _) = run(&["health", "--baseline", &s(&cat), &log(RUNS[1])]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        run(&["baseline", &s(&cat), "-o", "-"])
            .1
            .lines()
            .filter(|l| l.starts_with("row "))
            .count(),
        rows(&all).len()
    );
}

#[test]
fn a_two_node_log_gives_one_host_label_per_node() {
    let dir = scratch("baseline-nodes");
    let two = log("tests/logs/gcp-a3mega-mpirun-16.log");
    let (json, prom) = (dir.join("h.json"), dir.join("nodes.prom"));
    let (code, out, _) = run(&["health", &two, "--json", &s(&json), "--prom", &s(&prom)]);
    assert_eq!(code, 10, "{out}");
    assert!(
        out.contains(
            "# health: nodes: ztan-mig-235z (8 ranks): unknown, ztan-mig-gq73 (8 ranks): unknown\n"
        ),
        "{out}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
            .unwrap_or_default();
    assert_eq!(doc["nodes"][1]["host"], "ztan-mig-gq73", "{doc}");
    assert_eq!(doc["nodes"][1]["ranks"], 8, "{doc}");
    // Judged against a baseline of itself: ok, on both nodes.
    let b = dir.join("two.baseline");
    assert_eq!(run(&["baseline", &two, "-o", &s(&b)]).0, 0);
    let (code, out, _) = run(&["health", "--baseline", &s(&b), &two, "--prom", &s(&prom)]);
    assert_eq!(code, 0, "{out}");
    if let Some(samples) = parsed_by_prometheus(&prom) {
        for host in ["ztan-mig-235z", "ztan-mig-gq73"] {
            assert!(
                samples.contains(&format!("gauge nccl_perf_health_verdict [('collective', 'all_reduce'), ('gpu', 'NVIDIA H100 80GB HBM3'), ('host', '{host}'), ('verdict', 'ok')] 1.0\n")),
                "{samples}"
            );
            assert!(
                samples.contains(&format!("gauge nccl_perf_busbw_gbps [('collective', 'all_reduce'), ('gpu', 'NVIDIA H100 80GB HBM3'), ('host', '{host}')] 338.82\n")),
                "{samples}"
            );
        }
        assert_eq!(
            samples.matches("nccl_perf_health_ok ").count(),
            2,
            "{samples}"
        );
    }
}

#[test]
fn wrong_data_placed_by_our_stderr_line_in_a_log_names_its_node() {
    let dir = scratch("baseline-wrong-placed");
    let two =
        std::fs::read_to_string(log("tests/logs/gcp-a3mega-mpirun-16.log")).unwrap_or_default();
    let with = |line: &str, footer: &str| {
        two.replace(
            "# Out of bounds values : 0 OK",
            &format!("{line}\n# Out of bounds values : {footer}"),
        )
    };
    let write = |name: &str, body: String| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap_or_else(|e| panic!("{e}"));
        s(&p)
    };
    let json = dir.join("h.json");
    // Rank 12 is on the second node: that node wrong, the first judged by its figures.
    let one = write(
        "one.log",
        with(
            "all_reduce_perf: wrong data on rank 12 (ztan-mig-gq73) (4 measurement(s) out of bounds)",
            "4 FAILED",
        ),
    );
    let (code, out, _) = run(&["health", &one, "--json", &s(&json)]);
    assert_eq!(code, 7, "{out}");
    assert!(
        out.contains("; wrong data on rank 12 (ztan-mig-gq73)\n")
            && out.contains("# health: nodes: ztan-mig-235z (8 ranks): unknown, ztan-mig-gq73 (8 ranks): wrong\n")
            && out.contains(": on ztan-mig-gq73 (where validation found it)\n"),
        "{out}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
            .unwrap_or_default();
    assert_eq!(
        doc["collectives"][0]["wrong_nodes"][0], "ztan-mig-gq73",
        "{doc}"
    );
    // A range across both nodes: both wrong.
    let both = write(
        "both.log",
        with(
            "all_reduce_perf: wrong data on up to 2 ranks at once between rank 3 (ztan-mig-235z) and rank 12 (ztan-mig-gq73) (1 measurement(s) out of bounds)",
            "1 FAILED",
        ),
    );
    let (_, out, _) = run(&["health", &both]);
    assert!(
        out.contains(
            "# health: nodes: ztan-mig-235z (8 ranks): wrong, ztan-mig-gq73 (8 ranks): wrong\n"
        ),
        "{out}"
    );
    // The line in a run whose footer says no wrong data places nothing.
    let stray = write(
        "stray.log",
        with(
            "all_reduce_perf: wrong data on rank 12 (ztan-mig-gq73) (4 measurement(s) out of bounds)",
            "0 OK",
        ),
    );
    let (code, out, _) = run(&["health", &stray]);
    assert_eq!(code, 10, "{out}");
    assert!(
        !out.contains("wrong data on") && !out.contains(": wrong"),
        "{out}"
    );
}
