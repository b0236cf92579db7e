//! Tests of the evidence lines: the closest group, the job against its pairs and halves, and
//! nodes that share a machine.

use super::*;
use crate::judge::{Book, judge};
use crate::round::{RoundBuilder, Subject};
use crate::seam::GroupOutcome;

/// `round` measured at `values` (GB/s, one per group), judged on `topo`.
fn measured(round: crate::round::Round, values: &[f64], topo: &Topology) -> RoundRecord {
    let outcomes: Vec<GroupOutcome> = values
        .iter()
        .map(|&busbw| GroupOutcome::Measured {
            busbw,
            time_us: 1.0,
        })
        .collect();
    let judged = judge(
        &round,
        &outcomes,
        topo,
        &Book::default(),
        &Thresholds::default(),
    );
    RoundRecord {
        round,
        outcomes,
        judged,
        wall_s: 1.0,
    }
}

/// One round of pairs of nodes at `values`.
fn pairs_round(values: &[f64]) -> (RoundRecord, Topology) {
    let topo = Topology::uniform(2 * values.len(), 1);
    let mut b = RoundBuilder::new(topo.world(), Phase::Pairs);
    for i in 0..values.len() {
        b.add(
            vec![2 * i, 2 * i + 1],
            Subject::Pair(2 * i, 2 * i + 1),
            Role::Primary,
        );
    }
    let round = b.finish(1).expect("a round");
    (measured(round, values, &topo), topo)
}

#[test]
fn the_closest_group_is_the_lowest_fine_one() {
    let (rec, topo) = pairs_round(&[100.0, 92.0, 100.0, 50.0]);
    let c = closest(std::slice::from_ref(&rec), &topo, &Thresholds::default())
        .expect("a closest group");
    assert_eq!(c.description, "node003+node004");
    assert_eq!((c.round, c.ratio, c.needed_drop), (1, 0.92, 0.15));
}

#[test]
fn a_slow_job_is_said_so() {
    let (rec, topo) = pairs_round(&[100.0, 98.0, 100.0]);
    let th = Thresholds::default();
    let history = std::slice::from_ref(&rec);
    assert_eq!(JobCheck::of(history, &topo, None, &th), None);
    let fine = JobCheck::of(history, &topo, Some(90.0), &th).expect("a check");
    assert!(!fine.slow);
    let slow = JobCheck::of(history, &topo, Some(60.0), &th).expect("a check");
    assert!(slow.slow && (slow.ratio - 0.6).abs() < 1e-9);
    assert!(
        slow.describe().ends_with(
            "a slowdown no pair reproduces; locate could not localise a slowdown of the \
             whole job"
        ),
        "{}",
        slow.describe()
    );
}

/// The pairs of 8 nodes at 100 GB/s, then both halves at `halves` (round 2).
fn with_halves(halves: [f64; 2]) -> (Vec<RoundRecord>, Topology) {
    let (pairs, topo) = pairs_round(&[100.0; 4]);
    let mut b = RoundBuilder::new(topo.world(), Phase::Halves);
    b.add((0..4).collect(), Subject::Pair(0, 1), Role::Primary);
    b.add((4..8).collect(), Subject::Pair(4, 5), Role::Primary);
    let round = b.finish(2).expect("a round");
    let halves = measured(round, &halves, &topo);
    (vec![pairs, halves], topo)
}

#[test]
fn the_halves_say_how_a_slow_job_scales() {
    let th = Thresholds::default();
    let words = |halves, job| {
        let (history, topo) = with_halves(halves);
        JobCheck::of(&history, &topo, Some(job), &th)
            .expect("a check")
            .describe()
    };
    let falls = words([60.0, 62.0], 35.0);
    assert!(
        falls.contains(
            "a slowdown no pair reproduces; its halves (4 ranks each) ran alike at 0.62x of \
             its pairs: busbw falls with the group's size evenly across the job, not in one \
             node or link; locate could not localise"
        ),
        "{falls}"
    );
    let large = words([100.0, 97.0], 50.0);
    assert!(
        large.contains(
            "ran alike at 1.00x of its pairs: the slowdown shows only when more than half \
             of the job runs at once;"
        ),
        "{large}"
    );
    // Halves unlike each other say nothing here (the larger groups' note tells of them).
    let unlike = words([100.0, 40.0], 50.0);
    assert!(!unlike.contains("halves"), "{unlike}");
    // A fast job does not mention them.
    assert!(!words([60.0, 62.0], 90.0).contains("halves"));
}

#[test]
fn a_job_on_one_machine_is_not_a_network_figure() {
    let (rec, topo) = pairs_round(&[100.0, 98.0, 100.0]);
    let th = Thresholds::default();
    let one = topo.clone().with_machines(&vec!["boot-a".to_string(); 6]);
    let history = std::slice::from_ref(&rec);
    let check = JobCheck::of(history, &one, Some(40.0), &th).expect("a check");
    assert!(check.one_machine && check.slow);
    assert!(
        check.describe().ends_with(
            "(all nodes run on one machine: groups running at once share its CPUs and \
             GPUs, so this ratio is not a network figure)"
        ),
        "{}",
        check.describe()
    );
    let apart = JobCheck::of(history, &topo, Some(40.0), &th).expect("a check");
    assert!(!apart.one_machine && !apart.describe().contains("machine"));
}

#[test]
fn nodes_sharing_machines_are_noted() {
    let m = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let topo = Topology::uniform(5, 1);
    assert_eq!(machines_note(&topo), None);
    let some = topo.clone().with_machines(&m(&["a", "b", "a", "c", "b"]));
    assert_eq!(
        machines_note(&some).as_deref(),
        Some(
            "nodes share machines (one kernel boot id each): node001,node003; \
             node002,node005; a pair on one machine does not cross the network between \
             machines, and groups running at once share its CPUs, GPUs and NICs"
        )
    );
    let all = topo.with_machines(&m(&["a"; 5]));
    assert!(
        machines_note(&all)
            .is_some_and(|n| n.starts_with("all 5 nodes run on one machine (one kernel")),
    );
}
