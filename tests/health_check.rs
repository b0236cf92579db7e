//! `nccl-perf health` on real public logs (Microsoft SuperBench's six nccl-tests programs on
//! one 8-GPU node, tests/logs/SOURCES.md) and on our own `--collectives` launch: the verdict
//! per collective and overall, the exit code, the JSON summary, and the Prometheus text format
//! read back by the Prometheus project's own Python parser (`prometheus_client`; under
//! `CI=true` a missing parser fails the test).

use crate::programs::tool;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn log(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(name)
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nccl-perf-health-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

const SUPERBENCH: [&str; 6] = [
    "tests/logs/superbench-allreduce.log",
    "tests/logs/superbench-allgather.log",
    "tests/logs/superbench-reducescatter.log",
    "tests/logs/superbench-alltoall.log",
    "tests/logs/superbench-broadcast.log",
    "tests/logs/superbench-reduce.log",
];

/// The families and samples `prometheus_client`'s parser reads from `file`, one line each
/// (`name labels value`); `None` (outside CI) when the parser is not installed.
pub(crate) fn parsed_by_prometheus(file: &Path) -> Option<String> {
    let script = "import sys\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        for f in text_string_to_metric_families(open(sys.argv[1]).read()):\n\
        \x20   for s in f.samples:\n\
        \x20       print(f.type, s.name, sorted(s.labels.items()), s.value)\n";
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script]).arg(file);
    if let Ok(p) = std::env::var("NCCL_PERF_PYTHONPATH") {
        cmd.env("PYTHONPATH", p);
    }
    let out = cmd.output();
    let missing = match &out {
        Err(_) => true,
        Ok(o) => String::from_utf8_lossy(&o.stderr).contains("No module named 'prometheus_client'"),
    };
    if missing {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 with prometheus_client is needed under CI (.ci/run installs it and sets NCCL_PERF_PYTHONPATH)"
        );
        eprintln!(
            "note: python3 with prometheus_client not found: the Prometheus file is not parsed"
        );
        return None;
    }
    let o = out.ok()?;
    assert!(
        o.status.success(),
        "the parser refused the file: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn a_node_check_from_public_logs_is_judged_and_written_for_prometheus() {
    let dir = scratch("superbench");
    let (json, prom) = (dir.join("h.json"), dir.join("node.prom"));
    let mut args: Vec<String> = vec!["health".into()];
    args.extend(SUPERBENCH.iter().map(|l| log(l)));
    args.extend(["--json".into(), json.to_string_lossy().into_owned()]);
    args.extend(["--prom".into(), prom.to_string_lossy().into_owned()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = tool(&argv);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert!(lines.iter().all(|l| l.starts_with("# health: ")), "{text}");
    assert!(
        !text.contains("bandwidth") && !text.contains("FAILED"),
        "{text}"
    );
    // all_reduce has a published figure for this node; the other five logs never name their
    // program (SuperBench cuts the header), so they are `unnamed` and not judged.
    assert!(
        lines[0].starts_with("# health: all_reduce: busbw 235.3 GB/s at 8589934592 B, expected "),
        "{text}"
    );
    assert!(lines[0].ends_with(": ok"), "{text}");
    assert_eq!(
        lines[1..6]
            .iter()
            .filter(|l| l.starts_with("# health: unnamed")
                && l.contains(": unknown (the log does not name its collective"))
            .count(),
        5,
        "{text}"
    );
    assert_eq!(
        lines[6],
        "# health: not judged: 1 of 6 ok, 0 slow (below 90 % of expected), 0 with wrong data, 5 without an expected figure",
        "{text}"
    );
    // Not judged: exit 10, as --health exits.
    assert_eq!(out.status.code(), Some(10), "{text}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
            .unwrap_or_default();
    let colls = doc["collectives"].as_array().cloned().unwrap_or_default();
    assert_eq!(colls.len(), 6, "{doc}");
    assert_eq!(colls[0]["collective"], "all_reduce");
    assert_eq!(colls[0]["verdict"], "ok");
    assert_eq!(colls[0]["largest_bytes"], 8589934592u64);
    if let Some(samples) = parsed_by_prometheus(&prom) {
        assert!(
            samples.contains("gauge nccl_perf_busbw_gbps [('collective', 'all_reduce'), ('gpu', 'A100-SXM4-40GB'), ('host', 'localhost')] 235.26\n"),
            "{samples}"
        );
        assert!(
            samples.contains("gauge nccl_perf_health_verdict [('collective', 'all_reduce'),"),
            "{samples}"
        );
        assert_eq!(
            samples.matches("nccl_perf_health_ok ").count(),
            6,
            "{samples}"
        );
    }
    // A threshold above what was measured makes all_reduce slow, and the check exit 7.
    let strict = tool(&["health", &log(SUPERBENCH[0]), "--threshold", "99.99"]);
    let s = String::from_utf8_lossy(&strict.stdout);
    assert_eq!(strict.status.code(), Some(7), "{s}");
    assert!(
        s.contains(": slow\n") && s.contains("# health: slow: 0 of 1 ok, 1 slow"),
        "{s}"
    );
    let bad = tool(&["health", &log(SUPERBENCH[0]), "--threshold", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn our_one_launch_check_reads_section_by_section() {
    let out = tool(&[
        "health",
        &log("docs/results/h100x1/one-launch/r2.ours-one.out"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# health: ")?.split(':').next())
        .collect();
    assert_eq!(
        names,
        [
            "all_reduce",
            "all_gather",
            "reduce_scatter",
            "alltoall",
            "sendrecv",
            "not judged"
        ],
        "{text}"
    );
    // One GPU: the built-in table has no figure for one rank, so nothing is judged (exit 10;
    // tests/health_baseline.rs judges the same log against a baseline).
    assert_eq!(out.status.code(), Some(10), "{text}");
    assert!(
        text.contains("# health: sendrecv: busbw 1446.9 GB/s at 8589934592 B, no expected figure"),
        "{text}"
    );
}
