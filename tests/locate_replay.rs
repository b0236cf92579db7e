//! Locate's logic replayed on real measurements: the `--locate-json` records of the GPU runs
//! in docs/results/vcluster-h200/locate-evidence/ (ranks posing as hosts: run1 to run6 on one
//! H200, run7 to run11 on one H100; a rank CPU-starved, paused by signals, or none) are fed
//! back, round by round, through today's planning and judging. The replay must plan the rounds
//! the GPU ran and reach the verdicts recorded then; and the lean added since must say what it
//! claims on real readings: the paused rank in every 4-rank run, nobody in the healthy ones.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nccl_perf_locate::evidence;
use nccl_perf_locate::json::{self, LocateJson};
use nccl_perf_locate::round::{Phase, Round};
use nccl_perf_locate::seam::{GroupOutcome, RoundResult, RoundRunner, Stop};
use nccl_perf_locate::stats::Thresholds;
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::verdict::Culprit;
use nccl_perf_locate::{Config, Report};

use crate::locate_runs::{job_line, locate};

/// Answers each round with what the record measured for the same groups (by their ranks); a
/// group the record does not have stops the replay.
struct Recorded<'a>(&'a LocateJson);

impl RoundRunner for Recorded<'_> {
    fn run_round(&mut self, round: &Round, _: Duration) -> Result<RoundResult, Stop> {
        let rec = self
            .0
            .rounds
            .iter()
            .find(|r| r.round == round.index)
            .ok_or_else(|| Stop::new(format!("no round {} in the record", round.index)))?;
        let outcomes: Vec<GroupOutcome> = round
            .groups
            .iter()
            .map(|g| {
                rec.groups
                    .iter()
                    .find(|r| r.ranks == g.ranks)
                    .map(|r| r.outcome.clone())
                    .ok_or_else(|| {
                        Stop::new(format!("round {} has no group {:?}", round.index, g.ranks))
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(RoundResult {
            outcomes,
            wall_s: rec.wall_s,
        })
    }
}

fn runs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/results/vcluster-h200/locate-evidence")
}

/// The records of `case` (`pause-4`, ...) in run order, with the slowed rank of each run.
fn records(dir: &str, case: &str, n: usize) -> Vec<(LocateJson, Option<usize>)> {
    (1..=5)
        .map(|i| {
            let path = runs().join(dir).join(format!("{case}-{i}.json"));
            let text = std::fs::read_to_string(&path).expect("a committed record");
            let doc = json::read(&text).expect("a locate record");
            let slowed = (!case.starts_with("healthy")).then_some(1 + (i - 1) % (n - 1));
            (doc, slowed)
        })
        .collect()
}

/// The record replayed with its own configuration.
fn replay(doc: &LocateJson) -> (Report, Vec<String>) {
    replay_on(
        doc,
        Topology::new(doc.nodes.clone()).expect("the record's topology"),
    )
}

/// The record replayed with its own configuration on `topo`.
fn replay_on(doc: &LocateJson, topo: Topology) -> (Report, Vec<String>) {
    let config = Config {
        schedule: doc.schedule,
        thresholds: doc.thresholds,
        seed: doc.seed,
        deadline: Duration::from_secs_f64(doc.deadline_s),
        max_rounds: None,
        job_busbw: doc.job.as_ref().map(|j| j.job_busbw),
    };
    locate(&mut Recorded(doc), &topo, &config)
}

#[test]
fn the_gpu_runs_replay_to_the_verdicts_recorded() {
    const ALL: &[&str] = &["starve", "pause", "healthy"];
    for (dir, n, cases) in [
        ("run1/loc4", 4, ALL),
        ("run1/loc8", 8, ALL),
        ("run2", 4, ALL),
        ("run2", 8, ALL),
        ("run3", 4, ALL),
        ("run4", 4, &["pause"][..]),
        ("run4", 8, &["pause", "healthy"][..]),
        ("run5", 4, &["starve", "healthy"][..]),
        ("run5", 8, &["starve"][..]),
        ("run6", 4, &["pause"][..]),
        ("run6", 8, &["pause", "healthy"][..]),
        ("run7", 4, &["pause", "healthy"][..]),
        ("run7", 8, &["pause"][..]),
        ("run8", 4, &["starve"][..]),
        ("run8", 8, &["starve", "healthy"][..]),
        ("run9", 4, ALL),
        ("run10", 8, ALL),
        ("run11", 4, &["starve", "pause"][..]),
        ("run11", 8, ALL),
    ] {
        for case in cases {
            let case = format!("{case}-{n}");
            for (i, (doc, _)) in records(dir, &case, n).iter().enumerate() {
                let what = format!("{case}-{}", i + 1);
                let (report, lines) = replay(doc);
                if let Some(first) = halves_of_pairs(doc) {
                    // Recorded before 4- and 5-node jobs ran the job without each node in
                    // turn: the replay runs the same rounds up to the halves, then asks for
                    // the job without the first node, which the record does not have.
                    assert_eq!(report.rounds.len(), first - 1, "{what}: {lines:#?}");
                    let stop = report.stopped.as_deref().unwrap_or_default();
                    assert!(stop.contains(&format!("round {first}")), "{what}: {stop}");
                    continue;
                }
                if names_a_link(doc) {
                    // Recorded before a link slow again had its ends re-paired once more: the
                    // replay runs every recorded round, then asks for that round.
                    assert_eq!(report.rounds.len(), doc.rounds.len(), "{what}: {lines:#?}");
                    let stop = report.stopped.as_deref().unwrap_or_default();
                    let next = doc.rounds.len() + 1;
                    assert!(stop.contains(&format!("round {next}")), "{what}: {stop}");
                    continue;
                }
                assert_eq!(report.stopped, None, "{what}: {lines:#?}");
                assert_eq!(report.rounds.len(), doc.rounds.len(), "{what}");
                let named: Vec<_> = report.verdicts.iter().map(|v| &v.culprit).collect();
                let recorded: Vec<_> = doc.verdicts.iter().map(|v| &v.verdict.culprit).collect();
                assert_eq!(named, recorded, "{what}: {lines:#?}");
                assert_eq!(report.exit_code(), doc.exit_code, "{what}");
                assert_eq!(
                    report.closest.as_ref().map(|c| &c.description),
                    doc.closest.as_ref().map(|c| &c.description),
                    "{what}"
                );
            }
        }
    }
}

/// The first round of halves in a record of 4 or 5 nodes (halves of pairs), if it ran one.
fn halves_of_pairs(doc: &LocateJson) -> Option<usize> {
    (doc.nodes.len() <= 5)
        .then(|| doc.rounds.iter().find(|r| r.phase == Phase::Halves))
        .flatten()
        .map(|r| r.round)
}

/// Whether a record named a link (a verdict on two nodes that are each fine with others).
fn names_a_link(doc: &LocateJson) -> bool {
    doc.verdicts
        .iter()
        .any(|v| matches!(v.verdict.culprit, Culprit::Link { .. }))
}

/// The lean of a replayed record's readings under `min_drop`.
fn lean(doc: &LocateJson, min_drop: f64) -> Option<String> {
    let topo = Topology::new(doc.nodes.clone()).expect("the record's topology");
    let (report, _) = replay(doc);
    let th = Thresholds {
        min_drop,
        ..doc.thresholds
    };
    evidence::leaning(&report.rounds, &topo, &th)
}

#[test]
fn the_paused_rank_is_leaned_on_at_the_default_drop_and_nobody_when_healthy() {
    // Run1 judged 4 ranks at a minimum drop of 0.3 (clear margin 0.85x): the paused rank's
    // pairs, 0.75-0.90x of the others, were neither slow nor clearly clean, and nobody was named.
    // On the same readings at the product's default (0.15: clear margin 0.925x) the lean points
    // at the paused rank alone in every run, and at nobody in the healthy runs.
    for (doc, slowed) in records("run1/loc4", "pause-4", 4) {
        let slowed = slowed.expect("a paused rank");
        let note = lean(&doc, 0.15).expect("a lean");
        assert!(
            note.starts_with(&format!("leaning: vnode{slowed} 0.")) && !note.contains(", vnode"),
            "{note}"
        );
        // At the run's own drop the readings were within the margin: no lean, as printed then.
        assert_eq!(lean(&doc, doc.thresholds.min_drop), None);
    }
    for (doc, _) in records("run1/loc4", "healthy-4", 4) {
        assert_eq!(lean(&doc, 0.15), None);
    }
    // A starved rank, 0.2x: slow, never a lean.
    for (doc, _) in records("run1/loc4", "starve-4", 4) {
        assert_eq!(lean(&doc, 0.15), None);
    }
}

#[test]
fn the_healthy_8_rank_job_line_says_it_ran_on_one_machine() {
    // Run1's records predate the boot id; the ranks did share one machine. Told so, the job line
    // of the healthy 8-rank runs (0.35-0.60x of their pairs) carries the remark, and where the
    // halves ran it says what they showed; nobody is named.
    let mut halves = 0;
    for (doc, _) in records("run1/loc8", "healthy-8", 8) {
        let topo = Topology::new(doc.nodes.clone())
            .expect("the record's topology")
            .with_machines(&vec!["one-boot-id".to_string(); 8]);
        let (report, lines) = replay_on(&doc, topo);
        assert!(report.verdicts.is_empty(), "{lines:#?}");
        let job = job_line(&lines);
        assert!(
            job.ends_with("so this ratio is not a network figure)"),
            "{job}"
        );
        if job.contains("its halves (4 ranks each) ran alike at ") {
            halves += 1;
        }
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("# locate note: all 8 nodes run on one machine")),
            "{lines:#?}"
        );
    }
    assert!(halves > 0);
}

#[test]
fn a_lean_never_prints_its_reading_equal_to_the_floor_it_is_not_below() {
    // Run2's pause-4-3 printed "vnode3 0.85x ... not below 0.85x" (0.8504 against 0.85).
    let (doc, _) = records("run2", "pause-4", 4).swap_remove(2);
    let note = lean(&doc, doc.thresholds.min_drop).expect("a lean");
    let reading = note
        .split_once("vnode3 ")
        .and_then(|(_, r)| r.split_once("x ("))
        .map(|(r, _)| r.to_string())
        .expect("vnode3's reading");
    let floor = note
        .split_once("not below ")
        .and_then(|(_, r)| r.split_once("x:"))
        .map(|(r, _)| r.to_string())
        .expect("the floor");
    assert_ne!(reading, floor, "{note}");
    assert!(reading.starts_with("0.85") && reading.len() == 5, "{note}");
}

#[test]
fn the_default_window_runs_name_every_slowed_rank_and_nobody_when_healthy() {
    // Run7, run8, run9 and run11 ran the shipped default window (1 s): the starved and paused
    // ranks (the pause at 70 of 100 ms at 8 ranks, which slowed the job to about 0.5x) were each
    // named alone, 5 of 5, and the healthy runs named nobody. Today's logic must say the same on
    // their readings. (Run10's pause-8, 4 of 5 before round 1 had its calibrating pass, is
    // replayed to its recorded verdicts above.)
    for (dir, case, n) in [
        ("run7", "pause-4", 4),
        ("run7", "healthy-4", 4),
        ("run7", "pause-8", 8),
        ("run8", "starve-4", 4),
        ("run8", "starve-8", 8),
        ("run8", "healthy-8", 8),
        ("run9", "starve-4", 4),
        ("run9", "pause-4", 4),
        ("run9", "healthy-4", 4),
        ("run11", "starve-4", 4),
        ("run11", "pause-4", 4),
        ("run11", "starve-8", 8),
        ("run11", "pause-8", 8),
        ("run11", "healthy-8", 8),
    ] {
        for (i, (doc, slowed)) in records(dir, case, n).iter().enumerate() {
            let (report, lines) = replay(doc);
            let named: Vec<_> = report.verdicts.iter().map(|v| v.culprit.clone()).collect();
            let want: Vec<_> = slowed.iter().map(|&node| Culprit::Node { node }).collect();
            assert_eq!(named, want, "{dir} {case}-{}: {lines:#?}", i + 1);
        }
    }
}
