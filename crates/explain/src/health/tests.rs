use super::*;
use crate::observed::Row;

fn run(collective: &str, busbw: f64) -> Run {
    Run {
        collective: collective.into(),
        rows: [1 << 20, 1 << 30]
            .into_iter()
            .flat_map(|bytes| {
                [false, true].map(|in_place| Row {
                    bytes,
                    in_place,
                    busbw: if in_place { 1.0 } else { busbw },
                    ..Row::default()
                })
            })
            .collect(),
        ..Run::default()
    }
}

fn explained(percent: Option<f64>) -> Explanation {
    Explanation {
        percent_of_expected: percent,
        rows: vec![crate::RowFields {
            expected_busbw: percent.map(|_| 400.0),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn verdicts_and_the_worst_of_them() {
    let ok = Check::of(&run("all_reduce", 390.0), &explained(Some(97.5)), 0, 90.0);
    assert_eq!(
        (ok.verdict, ok.largest_bytes, ok.busbw),
        (Verdict::Ok, 1 << 30, Some(390.0))
    );
    let slow = Check::of(&run("all_gather", 300.0), &explained(Some(75.0)), 0, 90.0);
    assert_eq!(slow.verdict, Verdict::Slow);
    let unknown = Check::of(&run("sendrecv", 300.0), &explained(None), 0, 90.0);
    assert_eq!(unknown.verdict, Verdict::Unknown);
    let wrong = Check::of(&run("alltoall", 390.0), &explained(Some(97.5)), 3, 90.0);
    assert_eq!(wrong.verdict, Verdict::Wrong);
    let h = Health::new(vec![ok.clone(), unknown.clone()], 90.0, "n1", "NVIDIA H100");
    assert_eq!(h.verdict, Verdict::Unknown);
    let h = Health::new(vec![ok.clone(), slow.clone(), unknown], 90.0, "n1", "g");
    assert_eq!(h.verdict, Verdict::Slow);
    let text = h.text();
    assert!(text.contains("# health: all_gather: busbw 300.0 GB/s at 1073741824 B, expected 400.0 GB/s on the large sizes (75.0 %): slow\n"), "{text}");
    assert!(text.ends_with("# health: slow: 1 of 3 ok, 1 slow (below 90 % of expected), 0 with wrong data, 1 without an expected figure\n"), "{text}");
    assert!(!text.contains("bandwidth") && !text.contains("FAILED"));
    let h = Health::new(vec![ok, wrong], 90.0, "n1", "g");
    assert_eq!(h.verdict, Verdict::Wrong);
    assert_eq!(h.json()["collectives"][1]["verdict"], "wrong");
}

#[test]
fn prometheus_labels_are_escaped_and_missing_values_left_out() {
    let c = Check::of(&run("all_reduce", 390.0), &explained(None), 0, 90.0);
    let h = Health::new(vec![c], 90.0, "n\"1\\", "GPU\nX");
    let p = h.prometheus();
    assert!(p.contains("nccl_perf_busbw_gbps{collective=\"all_reduce\",host=\"n\\\"1\\\\\",gpu=\"GPU\\nX\"} 390\n"), "{p}");
    assert!(!p.contains("nccl_perf_expected_busbw_gbps{"), "{p}");
    assert!(p.contains("verdict=\"unknown\"} 1\n"), "{p}");
}

#[test]
fn a_hung_collective_is_the_worst_verdict_in_lines_json_and_metrics() {
    let ok = Check::of(&run("all_reduce", 390.0), &explained(Some(97.5)), 0, 90.0);
    let line =
        "hang: rank 2 (vnode2, pid 7) never started operation 30 of the run (low bandwidth FAILED)";
    let hung = Check::hung("all_gather", line);
    let wrong = Check::of(&run("alltoall", 390.0), &explained(Some(97.5)), 3, 90.0);
    let h = Health::new(vec![ok.clone(), wrong, hung], 90.0, "n1", "g");
    assert_eq!(h.verdict, Verdict::Hung);
    let text = h.text();
    assert!(
        text.contains("# health: all_gather: hung: hang: rank 2 (vnode2, pid 7) never started operation 30 of the run (low bw failed)\n"),
        "{text}"
    );
    assert!(
        text.ends_with("without an expected figure, 1 hung\n"),
        "{text}"
    );
    assert!(
        text.lines()
            .last()
            .unwrap_or_default()
            .starts_with("# health: hung: 1 of 3 ok"),
        "{text}"
    );
    assert!(
        !text.contains("bandwidth") && !text.contains("FAILED"),
        "{text}"
    );
    assert_eq!(h.json()["verdict"], "hung");
    assert_eq!(h.json()["collectives"][2]["hang"], line);
    assert!(h.json()["collectives"][0].get("hang").is_none());
    let p = h.prometheus();
    assert!(
        p.contains("nccl_perf_health_ok{collective=\"all_gather\",host=\"n1\",gpu=\"g\"} 0\n"),
        "{p}"
    );
    assert!(p.contains("verdict=\"hung\"} 1\n"), "{p}");
    // A measured check of a run that hung is hung too.
    assert_eq!(ok.hung_by(line).verdict, Verdict::Hung);
}

#[test]
fn exit_codes_of_every_outcome() {
    let ok = Check::of(&run("all_reduce", 390.0), &explained(Some(97.5)), 0, 90.0);
    let slow = Check::of(&run("all_gather", 300.0), &explained(Some(75.0)), 0, 90.0);
    let unknown = Check::of(&run("sendrecv", 300.0), &explained(None), 0, 90.0);
    let wrong = Check::of(&run("alltoall", 390.0), &explained(Some(97.5)), 3, 90.0);
    let hung = Check::hung("reduce_scatter", "hang: rank 1");
    let code = |cs: Vec<Check>, allow| Health::new(cs, 90.0, "n", "g").exit_code(allow);
    assert_eq!(code(vec![ok.clone()], false), 0);
    assert_eq!(code(vec![ok.clone(), unknown.clone()], false), 10);
    assert_eq!(code(vec![ok.clone(), unknown.clone()], true), 0);
    assert_eq!(code(vec![], false), 10);
    assert_eq!(code(vec![unknown.clone(), slow.clone()], true), 7);
    assert_eq!(code(vec![ok.clone(), wrong], false), 7);
    assert_eq!(code(vec![ok, slow, hung], true), 4);
    // Why it was not judged is said on its line.
    let text = Health::new(vec![unknown], 90.0, "n", "g").text();
    assert!(
        text.contains(": unknown (the run does not give its GPU model or nodes (no device lines); --baseline FILE (made by nccl-perf baseline from known-good runs) would judge it)\n"),
        "{text}"
    );
    assert!(text.ends_with("# health: not judged: 0 of 1 ok, 0 slow (below 90 % of expected), 0 with wrong data, 1 without an expected figure\n"), "{text}");
}

#[test]
fn a_baseline_judges_first_and_a_foreign_one_is_said_once() {
    use crate::baseline::Baseline;
    let good = crate::baseline::tests::run("all_reduce", 1.0);
    let mut b = Baseline::default();
    b.add_run(&good).expect("good");
    // The table has nothing (explained(None)); the baseline judges.
    let ok = Check::judged(&good, &explained(None), 0, 90.0, Some(&b));
    assert_eq!(
        (ok.verdict, ok.judged_by.as_deref()),
        (Verdict::Ok, Some("baseline"))
    );
    let slower = crate::baseline::tests::run("all_reduce", 0.85);
    let slow = Check::judged(&slower, &explained(None), 0, 90.0, Some(&b));
    assert_eq!(slow.verdict, Verdict::Slow);
    assert!(slow.worst_bytes.is_some_and(|b| b >= 64 << 20));
    let line = Health::new(vec![slow], 90.0, "n", "g").text();
    assert!(line.starts_with("# health: all_reduce: busbw 306.0 GB/s at 1073741824 B, baseline busbw 360.0 GB/s, 85.0 % over the sizes judged, lowest 85.0 % at "), "{line}");
    // Another GPU model: the baseline is not used, said in one line, and the table judges.
    let mut h200 = crate::baseline::tests::run("all_reduce", 1.0);
    h200.gpu_names = vec!["NVIDIA H200".into()];
    let mut ag = h200.clone();
    ag.collective = "all_gather".into();
    b.add_run(&crate::baseline::tests::run("all_gather", 1.0))
        .expect("good");
    let c1 = Check::judged(&h200, &explained(Some(97.0)), 0, 90.0, Some(&b));
    let c2 = Check::judged(&ag, &explained(None), 0, 90.0, Some(&b));
    assert_eq!(
        (c1.verdict, c1.judged_by.as_deref()),
        (Verdict::Ok, Some("table"))
    );
    assert_eq!(c2.verdict, Verdict::Unknown);
    let text = Health::new(vec![c1, c2], 90.0, "n", "g").text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("baseline not used"))
        .collect();
    assert_eq!(
        lines,
        [
            "# health: baseline not used for all_reduce, all_gather: this job is 8 × NVIDIA H200 on 1 node (8 per node); the baseline has 8 × NVIDIA H100 80GB HBM3 on 1 node (8 per node)"
        ],
        "{text}"
    );
}

#[test]
fn nodes_are_named_and_every_node_has_its_own_series() {
    let mut slow = Check::of(&run("all_gather", 300.0), &explained(Some(75.0)), 0, 90.0);
    let ok = Check::of(&run("all_reduce", 390.0), &explained(Some(97.5)), 0, 90.0);
    let hosts = ["a", "a", "b", "b"];
    let h = Health::new(vec![ok.clone(), slow.clone()], 90.0, "a", "g").with_nodes(hosts);
    assert_eq!(h.nodes.len(), 2);
    assert_eq!(
        (
            h.nodes[1].host.as_str(),
            h.nodes[1].ranks,
            h.nodes[1].verdict
        ),
        ("b", 2, Verdict::Slow)
    );
    let text = h.text();
    assert!(
        text.contains("# health: nodes: a (2 ranks): slow, b (2 ranks): slow\n"),
        "{text}"
    );
    assert!(text.contains(": on the job of 2 nodes (a, b): a collective's busbw is the whole job's; --locate names the node\n"), "{text}");
    // --locate named b: a is ok, b slow, in lines, JSON and series.
    slow.suspects = Some(vec!["b (2 GPUs)".into()]);
    let h = Health::new(vec![ok, slow], 90.0, "a", "g").with_nodes(hosts);
    let text = h.text();
    assert!(
        text.contains("# health: nodes: a (2 ranks): ok, b (2 ranks): slow\n"),
        "{text}"
    );
    assert!(text.contains("; --locate names b (2 GPUs)\n"), "{text}");
    assert!(text.ends_with(": on b (named by --locate)\n"), "{text}");
    assert_eq!(h.json()["nodes"][1]["verdict"], "slow");
    let p = h.prometheus();
    assert!(p.contains("nccl_perf_health_verdict{collective=\"all_gather\",host=\"a\",gpu=\"g\",verdict=\"ok\"} 1\n"), "{p}");
    assert!(p.contains("nccl_perf_health_verdict{collective=\"all_gather\",host=\"b\",gpu=\"g\",verdict=\"slow\"} 1\n"), "{p}");
    assert!(
        p.contains("nccl_perf_busbw_gbps{collective=\"all_gather\",host=\"b\",gpu=\"g\"} 300\n"),
        "{p}"
    );
}

#[test]
fn a_hang_names_the_stuck_rank_s_node() {
    let ok = Check::of(&run("all_reduce", 390.0), &explained(Some(97.5)), 0, 90.0);
    let line = "hang: rank 2 (vnode2, pid 493) never started operation 30 of the run";
    let h = Health::new(
        vec![ok, Check::hung("all_gather", line)],
        90.0,
        "vnode0",
        "g",
    )
    .with_nodes(["vnode0", "vnode1", "vnode2", "vnode3"]);
    let verdicts: Vec<(&str, Verdict)> = h
        .nodes
        .iter()
        .map(|n| (n.host.as_str(), n.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("vnode0", Verdict::Unknown),
            ("vnode1", Verdict::Unknown),
            ("vnode2", Verdict::Hung),
            ("vnode3", Verdict::Unknown)
        ]
    );
    let text = h.text();
    assert!(
        text.ends_with(", 1 hung: on vnode2 (named by the hang watch)\n"),
        "{text}"
    );
    let p = h.prometheus();
    assert!(p.contains("nccl_perf_health_verdict{collective=\"all_gather\",host=\"vnode2\",gpu=\"g\",verdict=\"hung\"} 1\n"), "{p}");
    assert!(p.contains("nccl_perf_health_verdict{collective=\"all_gather\",host=\"vnode1\",gpu=\"g\",verdict=\"unknown\"} 1\n"), "{p}");
}

#[test]
fn wrong_data_placed_by_validation_names_its_node_and_leaves_the_others_their_figures() {
    let ok = Check::of(&run("all_reduce", 390.0), &explained(Some(97.5)), 0, 90.0);
    let wrong = Check::of(&run("all_gather", 390.0), &explained(Some(97.5)), 2, 90.0)
        .wrong_on("rank 5 (b)", &["b".to_string()]);
    let hosts = ["a", "a", "a", "a", "b", "b", "b", "b"];
    let h = Health::new(vec![ok.clone(), wrong], 90.0, "a", "g").with_nodes(hosts);
    assert_eq!(h.verdict, Verdict::Wrong);
    let text = h.text();
    assert!(
        text.contains("# health: nodes: a (4 ranks): ok, b (4 ranks): wrong\n"),
        "{text}"
    );
    assert!(
        text.contains(", 2 wrong values: wrong; wrong data on rank 5 (b)\n"),
        "{text}"
    );
    assert!(
        text.ends_with(": on b (where validation found it)\n"),
        "{text}"
    );
    assert_eq!(h.json()["collectives"][1]["wrong_on"], "rank 5 (b)");
    assert_eq!(h.json()["collectives"][1]["wrong_nodes"][0], "b");
    assert_eq!(h.json()["nodes"][0]["verdict"], "ok");
    let p = h.prometheus();
    assert!(p.contains("nccl_perf_health_verdict{collective=\"all_gather\",host=\"a\",gpu=\"g\",verdict=\"ok\"} 1\n"), "{p}");
    assert!(p.contains("nccl_perf_health_verdict{collective=\"all_gather\",host=\"b\",gpu=\"g\",verdict=\"wrong\"} 1\n"), "{p}");
    // The other node keeps what its figures say: slow stays slow there.
    let slow_wrong = Check::of(&run("all_gather", 300.0), &explained(Some(75.0)), 1, 90.0)
        .wrong_on("rank 5 (b)", &["b".to_string()]);
    let h = Health::new(vec![ok.clone(), slow_wrong], 90.0, "a", "g").with_nodes(hosts);
    assert_eq!(h.nodes[0].verdict, Verdict::Slow);
    assert_eq!(h.nodes[1].verdict, Verdict::Wrong);
    // Wrong data a log reports (nowhere placed): every node wrong, no place claimed.
    let unplaced = Check::of(&run("all_gather", 390.0), &explained(Some(97.5)), 2, 90.0);
    let h = Health::new(vec![ok, unplaced], 90.0, "a", "g").with_nodes(hosts);
    assert!(h.nodes.iter().all(|n| n.verdict == Verdict::Wrong));
    let text = h.text();
    assert!(
        !text.contains("validation found") && !text.contains("--locate names the node"),
        "{text}"
    );
}
