//! The verdicts of whole jobs: odd jobs (one node, one GPU per node) end cleanly and say why,
//! thresholds judge and are checked before any round, the same seed gives the same run, and the
//! GPU check's jobs name the slowed node and nobody else.

use nccl_perf_locate::round::{NO_COLOUR, Subject};
use nccl_perf_locate::schedule::Kind;
use nccl_perf_locate::stats::Thresholds;
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::verdict::{Culprit, times};
use nccl_perf_locate::{Config, run_schedule};
use oracle::locate_model::{Fault, ModelCluster};

use crate::locate_runs::*;

#[test]
fn odd_jobs_end_cleanly_and_say_why() {
    for (n, g) in [(0, 8), (1, 1), (1, 8), (4, 1), (2, 1), (3, 2)] {
        let topo = Topology::uniform(n, g);
        for kind in Kind::ALL {
            let mut model = ModelCluster::new(topo.clone(), 1);
            let (report, lines) = locate(&mut model, &topo, &config(kind));
            assert!(report.verdicts.is_empty(), "{n}x{g} {kind:?}");
            assert!(report.stopped.is_none());
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with("# locate verdict: no suspect"))
            );
        }
    }
    let topo = Topology::uniform(1, 8);
    let (report, _) = locate(
        &mut ModelCluster::new(topo.clone(), 1),
        &topo,
        &config(Kind::Nodes),
    );
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("--locate-min-busbw"))
    );
    let topo = Topology::uniform(4, 1);
    let (report, _) = locate(
        &mut ModelCluster::new(topo.clone(), 1),
        &topo,
        &config(Kind::Nodes),
    );
    assert!(report.rounds.is_empty());
    assert!(report.notes.iter().any(|n| n.contains("two or more GPUs")));
}

#[test]
fn min_busbw_judges_a_lone_node_down_to_its_gpu() {
    let topo = Topology::uniform(1, 8);
    let model = ModelCluster::new(topo.clone(), 1).with_fault(Fault::SlowGpu {
        node: 0,
        gpu: 5,
        factor: 0.5,
    });
    let (report, _) = locate(&mut model.clone(), &topo, &config(Kind::Nodes));
    assert!(report.verdicts.is_empty());
    let config = Config {
        schedule: Kind::Nodes,
        thresholds: Thresholds {
            min_busbw: Some(300.0),
            ..Thresholds::default()
        },
        ..Config::default()
    };
    let (report, lines) = locate(&mut model.clone(), &topo, &config);
    let named: Vec<&Culprit> = report.verdicts.iter().map(|v| &v.culprit).collect();
    assert_eq!(
        named,
        [&Culprit::Gpus {
            node: 0,
            gpus: vec![5]
        }],
        "{lines:#?}"
    );
    assert!(report.verdicts[0].below_min);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("(below --locate-min-busbw)"))
    );
}

#[test]
fn invalid_thresholds_are_refused_before_any_round() {
    let topo = Topology::uniform(4, 2);
    let config = Config {
        thresholds: Thresholds {
            min_drop: 2.0,
            ..Thresholds::default()
        },
        ..Config::default()
    };
    let mut model = ModelCluster::new(topo.clone(), 1);
    assert!(run_schedule(&mut model, &topo, &config, &mut |_, _| {}).is_err());
}

#[test]
fn same_seed_same_run_and_colours_follow_the_groups() {
    let topo = Topology::uniform(20, 4);
    let fault = Fault::SlowNode {
        node: 7,
        factor: 0.5,
    };
    let go = |seed| {
        let mut model = ModelCluster::new(topo.clone(), 9).with_fault(fault.clone());
        let config = Config {
            seed,
            ..config(Kind::Quick)
        };
        locate(&mut model, &topo, &config).0
    };
    let (a, b, c) = (go(1), go(1), go(2));
    assert_eq!(a, b);
    assert_ne!(
        a.rounds[0].round, c.rounds[0].round,
        "another seed, another matching"
    );
    assert_eq!(a.verdicts, {
        let mut v = c.verdicts.clone();
        for (x, y) in v.iter_mut().zip(&a.verdicts) {
            x.evidence.clone_from(&y.evidence);
            x.ratio = y.ratio;
            x.rounds.clone_from(&y.rounds);
        }
        v
    });
    for rec in &a.rounds {
        let colours = rec.round.colours(topo.world());
        for (i, g) in rec.round.groups.iter().enumerate() {
            assert!(g.ranks.iter().all(|&r| colours[r] == i as i32));
        }
        let grouped: usize = rec.round.groups.iter().map(|g| g.ranks.len()).sum();
        let idle = colours.iter().filter(|&&c| c == NO_COLOUR).count();
        assert_eq!(grouped + idle, topo.world());
    }
}

/// One reading names nobody: on 8 nodes of one GPU each, the slowed node's round-1 partner
/// also reads slow in its re-pairing (round 2) through a transient of its own, as happened on
/// the GPU (docs/results/vcluster-h200/locate-8ranks, run 4). The slowed node is named; the
/// partner is measured once more, found healthy and left out with a note.
#[test]
fn a_one_round_blip_beside_a_slow_node_is_not_named() {
    let topo = Topology::uniform(8, 1);
    let config = |seed| quick(seed, 0.15);
    for seed in 1..=5u64 {
        for slow in [1, 2, 4, 5] {
            let fault = Fault::SlowNode {
                node: slow,
                factor: 0.6,
            };
            let mut model = ModelCluster::new(topo.clone(), seed).with_fault(fault.clone());
            model.noise = 0.03;
            let (report, _) = locate(&mut model, &topo, &config(seed));
            let partner = report.rounds[0]
                .round
                .groups
                .iter()
                .find_map(|g| match g.subject {
                    Subject::Pair(a, b) if a == slow => Some(b),
                    Subject::Pair(a, b) if b == slow => Some(a),
                    _ => None,
                })
                .expect("the slow node is paired in round 1");
            let mut model = ModelCluster::new(topo.clone(), seed)
                .with_fault(fault)
                .with_fault(Fault::Blip {
                    node: partner,
                    round: 2,
                    factor: 0.75,
                });
            model.noise = 0.03;
            let (report, named) = named(&mut model, &topo, &config(seed));
            assert_eq!(
                named,
                [Culprit::Node { node: slow }],
                "seed {seed}, slow {slow}, blip {partner}: {:?}",
                report.verdicts
            );
            assert!(
                report
                    .notes
                    .iter()
                    .any(|n| n.starts_with("not reproduced, not named")
                        && n.contains(topo.host(partner))),
                "seed {seed}, slow {slow}, blip {partner}: {:?}",
                report.notes
            );
        }
    }
}

/// The GPU check's job (ci/gpu-locate.sh): 4 and 8 nodes of one GPU each (ranks posing as hosts),
/// quick (full below 8 nodes) with a 30 % minimum drop against the socket transport's noise.
#[test]
fn one_gpu_per_node_as_the_gpu_check_runs_it() {
    let config = |seed| quick(seed, 0.3);
    for nodes in [4, 8] {
        let topo = Topology::uniform(nodes, 1);
        for seed in 1..=5u64 {
            for slow in 0..nodes {
                let mut model = ModelCluster::new(topo.clone(), seed).with_fault(Fault::SlowNode {
                    node: slow,
                    factor: 0.5,
                });
                model.noise = 0.05;
                let (_, named) = named(&mut model, &topo, &config(seed));
                assert_eq!(
                    named,
                    [Culprit::Node { node: slow }],
                    "{nodes} nodes, seed {seed}, slow {slow}"
                );
            }
            let mut healthy = ModelCluster::new(topo.clone(), seed);
            healthy.noise = 0.05;
            let (report, _) = locate(&mut healthy, &topo, &config(seed));
            assert!(
                report.verdicts.is_empty(),
                "{nodes} nodes, seed {seed}: {:?}",
                report.verdicts
            );
        }
    }
}

/// A link slow again whose ends both read clean has each end re-paired once more: an end that
/// stalls in that window (a node slow now and then) makes the verdict "the node or the link",
/// with the readings; ends clean twice leave the link named.
#[test]
fn a_link_is_named_only_when_its_ends_read_clean_twice() {
    let topo = Topology::uniform(4, 1);
    let link = Fault::SlowLink {
        a: 1,
        b: 3,
        factor: 0.6,
    };
    for seed in 1..=5u64 {
        let mut model = ModelCluster::new(topo.clone(), seed).with_fault(link.clone());
        let (report, named_now) = named(&mut model, &topo, &config(Kind::Full));
        assert_eq!(named_now, [Culprit::link(1, 3)], "seed {seed}");
        let ends_round = report.rounds.len();
        let evidence = &report.verdicts[0].evidence;
        assert!(
            evidence.contains(&format!(
                "each end once more with a known-good node: {}+",
                topo.host(1)
            )) && evidence.contains(&format!("in round {ends_round}")),
            "seed {seed}: {evidence}"
        );
        // The same run with node 1 at 0.88x in that round only: under the clear margin.
        let mut model = ModelCluster::new(topo.clone(), seed)
            .with_fault(link.clone())
            .with_fault(Fault::Blip {
                node: 1,
                round: ends_round,
                factor: 0.88,
            });
        let (report, named_now) = named(&mut model, &topo, &config(Kind::Full));
        assert_eq!(
            named_now,
            [Culprit::NodeOrLink { node: 1, other: 3 }],
            "seed {seed}: {:?}",
            report.verdicts
        );
        let evidence = &report.verdicts[0].evidence;
        assert!(
            evidence.ends_with(&format!(
                "short of the clear margin ({}): the node or the link",
                times(Thresholds::default().clean_ratio())
            )),
            "seed {seed}: {evidence}"
        );
    }
}
