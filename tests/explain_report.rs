//! `nccl-perf report --explain` on real logs (tests/golden/, tests/logs/): what a log alone
//! can say against the SKU table, what it cannot know, and the report unchanged above it.

use crate::programs::tool;

use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const ONE_H200: &str = "tests/golden/nccl-tests-2.19.6-h200/ar_mpirun.out";

#[test]
fn without_the_flag_the_report_is_unchanged_and_with_it_only_lines_are_added() {
    let plain = tool(&["report", ONE_H200]);
    let explained = tool(&["report", "--explain", ONE_H200]);
    assert_eq!(plain.status.code(), explained.status.code());
    let (plain, explained) = (stdout(&plain), stdout(&explained));
    assert!(!plain.contains("# explain:"), "{plain}");
    assert!(explained.starts_with(&plain), "{explained}");
    let added = &explained[plain.len()..];
    assert!(added.lines().all(|l| l.starts_with("# ")), "{added}");
}

#[test]
fn one_h200_rank_is_a_device_local_copy() {
    let out = stdout(&tool(&["report", "--explain", ONE_H200]));
    assert!(
        out.contains("# explain: all_reduce on 1 rank(s), 1 node(s) × up to 1 rank(s), NVIDIA H200, NCCL 2.28.3\n"),
        "{out}"
    );
    assert!(out.contains("are not in a log"), "{out}");
    assert!(out.contains("algbw ≤ HBM/2 = 2400 GB/s"), "{out}");
    assert!(
        out.contains("# hardware: hardware not read: explaining a log"),
        "{out}"
    );
    // The out-of-place halves from 1 GiB: 1893.3, 2124.8, 2132.7, 2136.3 GB/s; median 2133.
    assert!(
        out.contains("# verdict: all_reduce ≥ 1 GiB: one rank, algbw 2133 GB/s, 89 % of half the memory speed (HBM/2)"),
        "{out}"
    );
}

#[test]
fn a100_sxm4_eight_gpus_against_the_datasheet() {
    let out = stdout(&tool(&[
        "report",
        "--explain",
        "tests/logs/superbench-allreduce.log",
    ]));
    assert!(
        out.contains("8 rank(s), 1 node(s) × up to 8 rank(s), A100-SXM4-40GB"),
        "{out}"
    );
    assert!(
        out.contains("busbw ≤ 300 GB/s — one node, B = NVLink 12 links × 25 GB/s per direction"),
        "{out}"
    );
    // The log does not name its test; busbw/algbw = 1.75 on 8 ranks is all_reduce's factor.
    assert!(
        out.contains("# the log does not name its test: all_reduce inferred"),
        "{out}"
    );
    assert!(
        out.contains("# published: busbw 235 GB/s at 8 GiB"),
        "{out}"
    );
    // Both halves of 1, 2, 4 and 8 GiB: the median is 234.x GB/s.
    assert!(
        out.contains("# verdict: all_reduce ≥ 1 GiB: busbw 234 GB/s, 78 % of the NVLink ceiling, 100 % of the published 235 GB/s — as expected on 8 × A100-SXM4-40GB"),
        "{out}"
    );
    // all_gather's factor is not all_reduce's: nothing inferred.
    let ag = stdout(&tool(&[
        "report",
        "--explain",
        "tests/logs/superbench-allgather.log",
    ]));
    assert!(ag.contains("the collective (not named in the log)"), "{ag}");
}

#[test]
fn sixteen_h100_over_two_hosts_without_nic_figures() {
    let out = stdout(&tool(&[
        "report",
        "--explain",
        "tests/logs/gcp-a3mega-mpirun-16.log",
    ]));
    assert!(out.contains("# explain: "), "{out}");
    assert!(out.contains("16 rank(s)"), "{out}");
    // Two published rows for 2 × 8 H100, of two networks, and a log does not say which ran:
    // the verdict measures against both and names the missing fact (before: "nothing to
    // compare with" next to the very cluster's row marked "not used").
    let verdict = out
        .lines()
        .find(|l| l.starts_with("# verdict: "))
        .unwrap_or_default();
    assert!(
        verdict.contains("98 % of the 339 GB/s published for GCP A3 Mega")
            && verdict.contains("68 % of the 487 GB/s published for AWS p5.48xlarge")
            && verdict.contains("depends on the network between the nodes"),
        "{verdict}"
    );
    assert!(!verdict.contains("nothing to compare with"), "{verdict}");
}

#[test]
fn markdown_fences_the_lines() {
    let out = stdout(&tool(&[
        "report",
        "--explain",
        "--format",
        "markdown",
        ONE_H200,
    ]));
    assert!(out.contains("\n```text\n# explain: all_reduce"), "{out}");
    assert!(out.trim_end().ends_with("```"), "{out}");
}

#[test]
fn json_keeps_standard_output_a_document() {
    let out = tool(&["report", "--explain", "--format", "json", ONE_H200]);
    let text = stdout(&out);
    assert!(!text.contains("# explain"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("# verdict: all_reduce"));
}

#[test]
fn a_sku_file_of_ones_own_is_used_and_its_errors_name_the_line() {
    let dir = std::env::temp_dir().join(format!("nccl-perf-explain-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("lab.sku");
    std::fs::write(
        &good,
        "# our lab\nexpect | gpu=A100-SXM4-40GB | nodes=1 | gpus_per_node=8 | collective=all_reduce | busbw=250 | measured=our run | source=lab notebook p. 4\n",
    )
    .unwrap();
    let out = tool(&[
        "report",
        "--explain",
        "--explain-sku",
        good.to_str().unwrap(),
        ONE_H200,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = dir.join("bad.sku");
    std::fs::write(&bad, "# x\n\nexpect | gpu=X | nodes=two\n").unwrap();
    let out = tool(&[
        "report",
        "--explain",
        "--explain-sku",
        bad.to_str().unwrap(),
        ONE_H200,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.sku:3: nodes=two"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_public_log_and_golden_output_explains_without_failing() {
    for dir in ["tests/logs", "tests/golden/nccl-tests-2.19.6-h200"] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                continue;
            }
            let p = path.to_str().unwrap();
            let out = tool(&["report", "--explain", "--partial", p]);
            let code = out.status.code();
            assert!(matches!(code, Some(0) | Some(2) | Some(3)), "{p}: {code:?}");
            let text = stdout(&out);
            if text.contains("# explain: ") {
                assert_eq!(
                    text.matches("# explain: ").count(),
                    text.matches("# verdict: ").count(),
                    "{p}"
                );
            }
        }
    }
}

#[test]
fn a_verdict_with_nothing_to_compare_with_names_the_missing_facts() {
    let verdict = |log: &str| {
        let out = stdout(&tool(&["report", "--explain", log]));
        out.lines()
            .find(|l| l.starts_with("# verdict:"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no verdict: {out}"))
    };
    // No device lines: neither the GPU model nor the nodes.
    let v = verdict("tests/logs/aws-p5-srun-l.log");
    assert!(
        v.contains("the run does not give the GPU model (no device lines) or the number of nodes"),
        "{v}"
    );
    // A log that does not name its collective (all_gather's busbw factor is also
    // reduce_scatter's and alltoall's): only the ceiling, and why.
    let v = verdict("tests/logs/superbench-allgather.log");
    assert!(
        v.contains("74 % of the NVLink ceiling — only the hardware ceiling: the log does not name its collective"),
        "{v}"
    );
    // Device lines on one host, but a GPU with no row or datasheet ceiling.
    let v = verdict("tests/logs/rccl-issue-1562-mi300x-vf-pci-function.log");
    assert!(
        v.contains(
            "neither a published figure nor a datasheet ceiling for 8 × AMD Instinct MI300X VF"
        ),
        "{v}"
    );
}
