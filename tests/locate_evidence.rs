//! How strong locate's evidence is (issue 29): a verdict that names nobody says how close the
//! nearest group came and how the whole job compared with its pairs; a slow job that no pair
//! reproduces is tested in larger groups and, when even they cannot place it, said to be slow
//! rather than passed over; a link is named only when both its ends are clean with other
//! partners, else "X or the X-Y link" with the readings.

use nccl_perf_locate::schedule::Kind;
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::verdict::Culprit;
use nccl_perf_locate::{Config, EXIT_SUSPECTS, Report, json};
use oracle::locate_model::{Fault, ModelCluster};

use crate::locate_runs::*;

/// `kind` on `n` nodes of `g` GPUs with `faults`; the job's own busbw measured first when
/// `job`.
fn run(
    kind: Kind,
    (n, g): (usize, usize),
    seed: u64,
    faults: &[Fault],
    job: bool,
) -> (Report, Vec<String>) {
    let topo = Topology::uniform(n, g);
    let mut model = ModelCluster::new(topo.clone(), seed);
    for f in faults {
        model = model.with_fault(f.clone());
    }
    let config = Config {
        seed,
        job_busbw: job.then(|| model.job_busbw()),
        ..config(kind)
    };
    locate(&mut model, &topo, &config)
}

/// A node slightly slow with everyone (0.9x: under the 15 % threshold) and slower still with
/// one partner: the pair is slow twice, but the node's other readings are borderline.
fn borderline() -> Vec<Fault> {
    vec![
        Fault::SlowNode {
            node: 2,
            factor: 0.9,
        },
        Fault::SlowLink {
            a: 2,
            b: 4,
            factor: 0.7,
        },
    ]
}

#[test]
fn a_link_is_named_only_when_both_its_ends_are_clean() {
    // full: node003's other pairs read 0.88-0.91x.
    let (report, lines) = run(Kind::Full, (8, 1), 1, &borderline(), false);
    let suspect: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("# locate suspect:"))
        .collect();
    assert_eq!(suspect.len(), 1, "{lines:#?}");
    assert!(
        suspect[0].starts_with("# locate suspect: node003 or the node003-node005 link slow"),
        "{}",
        suspect[0]
    );
    assert!(
        suspect[0].contains("node003 with other partners 0.90x, short of the clear margin"),
        "{}",
        suspect[0]
    );
    assert_eq!(report.exit_code(), EXIT_SUSPECTS);
    // quick (8 nodes): whenever its matching pairs the two, the re-pairings decide the same.
    let mut matched = 0;
    for seed in 1..=40 {
        let (report, lines) = run(Kind::Quick, (8, 1), seed, &borderline(), false);
        for l in lines.iter().filter(|l| l.starts_with("# locate suspect:")) {
            assert!(
                l.contains("node003 or the node003-node005 link"),
                "seed {seed}: {l}"
            );
            matched += 1;
        }
        assert!(report.verdicts.len() <= 1, "seed {seed}");
    }
    assert!(matched >= 2, "{matched} of 40");
    // Clean ends: the link itself.
    let link = [Fault::SlowLink {
        a: 2,
        b: 4,
        factor: 0.7,
    }];
    let (report, _) = run(Kind::Full, (8, 1), 1, &link, false);
    let named: Vec<&Culprit> = report.verdicts.iter().map(|v| &v.culprit).collect();
    assert_eq!(named, [&Culprit::link(2, 4)]);
}

#[test]
fn no_verdict_says_a_bare_no_suspect() {
    for kind in Kind::ALL {
        for n in [3, 8] {
            let (report, lines) = run(kind, (n, 8), 1, &[], false);
            assert!(report.verdicts.is_empty());
            let verdict = lines
                .iter()
                .find(|l| l.starts_with("# locate verdict: no suspect"))
                .expect("a verdict line");
            let (_, closest) = verdict.split_once("; closest: ").expect(verdict);
            assert!(
                closest.contains("x in round ") && closest.ends_with("; 15 % needed"),
                "{verdict}"
            );
        }
    }
}

#[test]
fn a_slow_job_that_no_group_reproduces_is_said_to_be_slow() {
    // A slowdown that only shows when more than half of the job takes part: every pair and
    // both halves are fine.
    let whole = [Fault::SlowInLarge {
        node: 5,
        above: 4,
        factor: 0.5,
    }];
    let (report, lines) = run(Kind::Quick, (8, 8), 1, &whole, true);
    assert!(report.verdicts.is_empty(), "{:?}", report.verdicts);
    assert_eq!(report.exit_code(), 0);
    let job = job_line(&lines);
    assert!(
        job.starts_with("# locate job: the full job ran at 0.5")
            && job.ends_with(
                "a slowdown no pair reproduces; its halves (32 ranks each) ran alike at 1.00x \
                 of its pairs: the slowdown shows only when more than half of the job runs at \
                 once; locate could not localise a slowdown of the whole job"
            ),
        "{job}"
    );
    let halves: Vec<&String> = lines
        .iter()
        .filter(|l| l.split_whitespace().nth(3) == Some("halves"))
        .collect();
    assert_eq!(halves.len(), 2, "{lines:#?}");
    assert!(
        lines.iter().any(
            |l| l.starts_with("# locate note: larger groups: node001..node004 1.")
                && l.ends_with("no group slow, not named")
        ),
        "{lines:#?}"
    );
    // The record carries it.
    let doc = json::document(&report, &Topology::uniform(8, 8));
    let check = doc.job.as_ref().expect("the job's check");
    assert!(check.slow && !check.localised);
    assert!(doc.closest.is_some());
    let back = json::read(&serde_json::to_string(&doc).expect("json")).expect("read back");
    assert_eq!(back.job.map(|j| (j.slow, j.localised)), Some((true, false)));
    assert_eq!(
        back.closest.map(|c| c.description),
        doc.closest.as_ref().map(|c| c.description.clone())
    );
    // A record of before issue 29 (no `job`, no `closest`) still reads.
    let mut old = serde_json::to_value(&doc).expect("json");
    if let Some(map) = old.as_object_mut() {
        map.remove("job");
        map.remove("closest");
    }
    let old = json::read(&old.to_string()).expect("an older record");
    assert!(old.job.is_none() && old.closest.is_none());
    // Healthy: the job line says the job was as fast as its pairs, and no larger groups ran.
    let (report, lines) = run(Kind::Quick, (8, 8), 1, &[], true);
    assert_eq!(report.rounds.len(), 1);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("# locate job: the full job ran at 1.0")
                && l.ends_with("below 0.70x is slow)")),
        "{lines:#?}"
    );
}

#[test]
fn busbw_that_falls_with_the_group_size_is_said_so_and_names_nobody() {
    // Ranks posing as hosts on one machine: every group is slower the larger it is (pairs 1x,
    // halves 0.7x, the job 0.49x), and all nodes share one kernel boot id.
    let sized = [Fault::SizeCost { per_doubling: 0.7 }];
    let topo = Topology::uniform(8, 1).with_machines(&vec!["boot".to_string(); 8]);
    let mut model = ModelCluster::new(topo.clone(), 3).with_fault(sized[0].clone());
    let config = Config {
        seed: 3,
        job_busbw: Some(model.job_busbw()),
        ..config(Kind::Quick)
    };
    let (report, lines) = locate(&mut model, &topo, &config);
    assert!(report.verdicts.is_empty(), "{lines:#?}");
    let job = job_line(&lines);
    assert!(
        job.contains("its halves (4 ranks each) ran alike at 0.7")
            && job.contains(
                "of its pairs: busbw falls with the group's size evenly across the job, not in \
                 one node or link; locate could not localise a slowdown of the whole job (all \
                 nodes run on one machine:"
            ),
        "{job}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l
                .starts_with("# locate note: all 8 nodes run on one machine (one kernel boot id)")),
        "{lines:#?}"
    );
    // The same cluster on machines of their own: no note, no remark on the job line.
    let (_, lines) = run(Kind::Quick, (8, 1), 3, &sized, true);
    assert!(!lines.iter().any(|l| l.contains("machine")), "{lines:#?}");
}

#[test]
fn larger_groups_name_a_node_that_only_large_groups_show() {
    let paused = [Fault::SlowInLarge {
        node: 5,
        above: 2,
        factor: 0.6,
    }];
    for kind in [Kind::Quick, Kind::Full] {
        let (report, lines) = run(kind, (16, 8), 2, &paused, true);
        let named: Vec<&Culprit> = report.verdicts.iter().map(|v| &v.culprit).collect();
        assert_eq!(named, [&Culprit::Node { node: 5 }], "{lines:#?}");
        assert_eq!(report.exit_code(), EXIT_SUSPECTS);
        let halves = lines
            .iter()
            .filter(|l| l.split_whitespace().nth(3) == Some("halves"))
            .count();
        // The halves, then 3 rounds of two parts down to one node of the 8.
        assert_eq!(halves, 2 * 4, "{lines:#?}");
        assert!(lines.iter().any(|l| {
            l.starts_with("# locate suspect: node006 (all 8 GPUs) slow 0.6")
                && l.contains("larger groups: node001..node008 0.6")
        }));
        // Without the job's measurement there is no reason for larger groups.
        let (report, _) = run(kind, (16, 8), 2, &paused, false);
        assert!(report.verdicts.is_empty() && report.job.is_none());
    }
}

/// The `# locate unseen:` lines of a healthy run, without their text after the first colon.
fn unseen(kind: Kind, shape: (usize, usize), min_busbw: Option<f64>) -> Vec<String> {
    let topo = Topology::uniform(shape.0, shape.1);
    let mut model = ModelCluster::new(topo.clone(), 1);
    let mut config = config(kind);
    config.thresholds.min_busbw = min_busbw;
    let (_, lines) = locate(&mut model, &topo, &config);
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("# locate unseen: "))
        .map(|l| l.split(':').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn what_a_run_could_not_see_is_said() {
    // quick on 8 nodes of 8 GPUs: whole nodes in pairs, 4 pairs of 28.
    assert_eq!(
        unseen(Kind::Quick, (8, 8), None),
        [
            "NVLink/PCIe inside nodes",
            "links",
            "a slowdown shared by every group of a shape (one rail's switch under every pair, \
             the whole fabric)"
        ]
    );
    // nodes: everything inside nodes, nothing across.
    assert_eq!(
        unseen(Kind::Nodes, (8, 8), Some(1.0)),
        ["the network between nodes (links, NICs, rails)"]
    );
    // full on one-GPU nodes with a floor: every pair ran, nothing inside to test.
    assert!(unseen(Kind::Full, (6, 1), Some(1.0)).is_empty());
}

#[test]
fn a_node_short_of_the_threshold_is_leaned_on_not_named() {
    // A node slowed by 10 %, under the 15 % threshold: every pair with it reads about 0.9x.
    let weak = [Fault::SlowNode {
        node: 2,
        factor: 0.9,
    }];
    let (report, lines) = run(Kind::Full, (4, 1), 1, &weak, false);
    assert!(report.verdicts.is_empty(), "{lines:#?}");
    let note = lines
        .iter()
        .find(|l| l.starts_with("# locate note: leaning: "))
        .expect("a leaning note");
    assert!(
        note.starts_with("# locate note: leaning: node003 0.9")
            && note.contains("x (3 pairs) of the median node, under the clear margin (0.93x)")
            && note.ends_with("weak evidence, not named"),
        "{note}"
    );
    // Healthy: no lean.
    let (_, lines) = run(Kind::Full, (4, 1), 1, &[], false);
    assert!(!lines.iter().any(|l| l.contains("leaning")), "{lines:#?}");
    // Named: no lean either.
    let slow = [Fault::SlowNode {
        node: 2,
        factor: 0.5,
    }];
    let (report, lines) = run(Kind::Full, (4, 1), 1, &slow, false);
    assert!(!report.verdicts.is_empty());
    assert!(!lines.iter().any(|l| l.contains("leaning")), "{lines:#?}");
}
