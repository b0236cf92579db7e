//! Locate's stdout lines keep the nccl-tests contract: comments free of the words scrapers look
//! for, a summary for large rounds, and locate's and the split groups' lines after a table leave
//! the parsed run unchanged.

use nccl_perf_locate::schedule::Kind;
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::{EXIT_SUSPECTS, output, run_schedule};
use nccl_perf_report::health;
use nccl_perf_report::parse::{ParseOptions, parse_log};
use nccl_perf_report::split::{self, SplitGroup};
use oracle::locate_model::{Fault, ModelCluster};

use crate::locate_runs::*;

#[test]
fn output_lines_are_comments_free_of_scraped_words() {
    let topo = hostile_topology();
    let faults = [
        Fault::SlowNode {
            node: 1,
            factor: 0.5,
        },
        Fault::FailingGpu { node: 2, gpu: 1 },
        Fault::HangingLink { a: 1, b: 2 },
        Fault::SlowRail {
            rail: 2,
            factor: 0.5,
        },
    ];
    let mut suspects = 0;
    for kind in Kind::ALL {
        for f in &faults {
            let mut model = ModelCluster::new(topo.clone(), 3).with_fault(f.clone());
            let (report, lines) = locate(&mut model, &topo, &config(kind));
            suspects += report.verdicts.len();
            for l in &lines {
                assert!(l.starts_with("# locate"), "{l}");
                assert!(!l.to_ascii_lowercase().contains("bandwidth"), "{l}");
                assert!(!l.contains("FAILED"), "{l}");
            }
        }
    }
    assert!(suspects >= 8, "the faults were seen: {suspects}");
}

#[test]
fn large_rounds_print_a_summary_and_the_groups_that_are_not_ok() {
    let topo = Topology::uniform(40, 2);
    let mut model =
        ModelCluster::new(topo.clone(), 1).with_fault(Fault::HangingLink { a: 0, b: 39 });
    let mut lines = Vec::new();
    run_schedule(&mut model, &topo, &config(Kind::Full), &mut |rec, t| {
        lines.push(output::round_lines(rec, t, 8))
    })
    .expect("run");
    // The round-robin pairs the first and last nodes in its first round; the re-test of that
    // link (a round of one probe) is short enough to print whole.
    let first = &lines[0];
    assert!(
        first[0].contains(" pairs  20 groups: 19 ok, 0 slow, 1 hung"),
        "{first:?}"
    );
    assert_eq!(first.len(), 2);
    assert!(first[1].contains("node001+node040") && first[1].ends_with("hung"));
    assert!(
        lines[1..39]
            .iter()
            .all(|l| l.len() == 1 && l[0].contains("20 ok"))
    );
    assert!(lines.iter().flatten().all(|l| !l.contains("bandwidth")));
}

#[test]
fn locate_and_split_group_lines_after_a_table_leave_the_parsed_run_unchanged() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/nccl-tests-2.19.6-h200/ar_sweep.out"
    );
    let text: String = std::fs::read_to_string(path)
        .expect("golden output")
        .lines()
        .filter(|l| !l.starts_with("### ") && !l.starts_with("# time -v"))
        .map(|l| format!("{l}\n"))
        .collect();
    let topo = Topology::uniform(8, 2);
    let mut model = ModelCluster::new(topo.clone(), 1).with_fault(Fault::SlowNode {
        node: 3,
        factor: 0.4,
    });
    let (report, lines) = locate(&mut model, &topo, &config(Kind::Full));
    assert_eq!(report.exit_code(), EXIT_SUSPECTS);
    // Split groups' own lines come first, as a split run with --locate prints them.
    let groups = split::lines(&[
        SplitGroup {
            color: 0,
            ranks: vec![0, 2],
            average_bus_bw: 1.5,
            bus_bw: vec![1.0, 2.0],
            time: vec![2.0, 1.0],
        },
        SplitGroup {
            color: 1,
            ranks: vec![1, 3],
            average_bus_bw: 0.5,
            bus_bw: vec![0.5, 0.5],
            time: vec![4.0, 4.0],
        },
    ]);
    let with_locate = text.clone() + &groups + &lines.join("\n") + "\n";
    let options = ParseOptions::default();
    let plain = parse_log(&text, "plain", &options).expect("parse");
    let located = parse_log(&with_locate, "located", &options).expect("parse");
    assert!(!plain.is_empty());
    assert_eq!(plain.len(), located.len());
    for (a, b) in plain.iter().zip(&located) {
        assert_eq!(a.rows, b.rows);
        assert_eq!(a.summary, b.summary);
        assert_eq!(health::problem_lines(a), health::problem_lines(b));
    }
}
