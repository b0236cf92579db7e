use super::*;
use crate::bootstrap;
use crate::error::Result;
use crate::locate::round::{Phase, Role, RoundBuilder, Subject};
use crate::locate::seam::GroupOutcome;
use crate::runner::fake_job::FakeJob;
use std::sync::{Arc, Barrier, Mutex};

/// Rank `rank` of `size` processes run as threads: only the allgather is real (through `posted`
/// and `barrier`); with `broken`, this rank's fails (as a lost process makes the bootstrap's
/// fail).
fn threads(
    rank: usize,
    size: usize,
    posted: Arc<Mutex<Vec<String>>>,
    barrier: Arc<Barrier>,
    broken: bool,
) -> FakeJob<impl Fn(String) -> bootstrap::Result<Vec<String>> + Sync> {
    FakeJob::new(rank, size, move |text| {
        if broken {
            return Err(bootstrap::Error::Peers {
                msg: "rank 3 (pid 9 on n4) has sent nothing for 30 s".into(),
                timed_out: true,
                lost: vec![3],
            });
        }
        posted.lock().unwrap()[rank] = text;
        barrier.wait();
        let all = posted.lock().unwrap().clone();
        barrier.wait();
        Ok(all)
    })
}

/// What a rank sees: by round, rank, group and pass (0, or 1 for a round run again after a
/// calibrating pass).
type Seer = fn(usize, usize, Option<usize>, usize) -> Part;

/// A rank's part from a table: per round, what it sees.
struct Scripted {
    rank: usize,
    seen: Seer,
    finished: Vec<bool>,
    rebuilds: Vec<bool>,
    learned: Vec<(Vec<usize>, f64)>,
    /// Whether it asks for a calibrating pass until it has learned something.
    calibrate: bool,
    /// The round of each part it ran.
    parts: Vec<usize>,
}

impl Scripted {
    fn new(rank: usize, seen: Seer, calibrate: bool) -> Scripted {
        Scripted {
            rank,
            seen,
            finished: Vec::new(),
            rebuilds: Vec::new(),
            learned: Vec::new(),
            calibrate,
            parts: Vec::new(),
        }
    }
}

impl Local for Scripted {
    fn run_round(
        &mut self,
        round: &Round,
        group: Option<usize>,
        rebuild: bool,
        _deadline: Instant,
    ) -> Result<Part> {
        self.rebuilds.push(rebuild);
        let pass = self.parts.iter().filter(|&&r| r == round.index).count();
        self.parts.push(round.index);
        Ok((self.seen)(round.index, self.rank, group, pass))
    }
    fn finish(&mut self, measured: bool) {
        self.finished.push(measured);
    }
    fn learn(&mut self, ranks: &[usize], busbw: f64) {
        self.learned.push((ranks.to_vec(), busbw));
    }
    fn calibrating(&self) -> bool {
        self.calibrate && self.learned.is_empty()
    }
}

/// Rounds 1 and 2 of four ranks: pairs {0,1} {2,3}, then {0,2} {1,3}.
fn rounds() -> Vec<Round> {
    [[[0, 1], [2, 3]], [[0, 2], [1, 3]]]
        .iter()
        .enumerate()
        .map(|(i, groups)| {
            let mut b = RoundBuilder::new(4, Phase::Pairs);
            for g in groups {
                b.add(g.to_vec(), Subject::Pair(g[0], g[1]), Role::Primary);
            }
            b.finish(i + 1).unwrap()
        })
        .collect()
}

type Outcome = (
    Vec<std::result::Result<RoundResult, Stop>>,
    Scripted,
    Option<Error>,
);

/// Runs `rounds()` on four threads; rank `broken` (if any) cannot share.
fn run_four_ranks(seen: Seer, broken: Option<usize>) -> Vec<Outcome> {
    run_four_ranks_calibrating(seen, broken, false)
}

/// As [`run_four_ranks`], the ranks asking for a calibrating pass when `calibrate`.
fn run_four_ranks_calibrating(seen: Seer, broken: Option<usize>, calibrate: bool) -> Vec<Outcome> {
    let posted = Arc::new(Mutex::new(vec![String::new(); 4]));
    let barrier = Arc::new(Barrier::new(if broken.is_some() { 1 } else { 4 }));
    let bw = |n: usize, s: f64| n as f64 / s;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .filter(|r| broken.is_none() || broken == Some(*r))
            .map(|rank| {
                let (posted, barrier) = (posted.clone(), barrier.clone());
                s.spawn(move || {
                    let boot = threads(rank, 4, posted, barrier, broken.is_some());
                    let local = Scripted::new(rank, seen, calibrate);
                    let mut r = Rounds::new(local, &boot, Average::Mean, &bw);
                    let results: Vec<_> = rounds()
                        .iter()
                        .map(|round| r.run_round(round, Duration::from_secs(1)))
                        .collect();
                    let (local, fatal) = r.into_parts();
                    (results, local, fatal)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn part(seen: Seen) -> Part {
    Part {
        seen,
        world_lost: false,
        stuck: false,
    }
}

#[test]
fn every_rank_gets_the_same_outcomes() {
    // Round 1: rank 3 sees its group hang; round 2: everyone measures, rank r in r+1 us.
    let seen = |round, rank, _group, _pass| match (round, rank) {
        (1, 3) => part(Seen::Hung),
        (1, 2) => part(Seen::Failed {
            error: "remote process exited".into(),
        }),
        _ => part(Seen::Measured {
            time_us: rank as f64 + 1.0,
        }),
    };
    let all = run_four_ranks(seen, None);
    let first: Vec<_> = all[0].0.iter().map(|r| r.clone().unwrap()).collect();
    assert_eq!(
        first[0].outcomes,
        [
            GroupOutcome::Measured {
                busbw: 2.0 / (1.5 * 1e-6),
                time_us: 1.5
            },
            GroupOutcome::Hung
        ]
    );
    assert_eq!(
        first[1].outcomes,
        [
            GroupOutcome::Measured {
                busbw: 2.0 / (2.0 * 1e-6),
                time_us: 2.0
            },
            GroupOutcome::Measured {
                busbw: 2.0 / (3.0 * 1e-6),
                time_us: 3.0
            }
        ]
    );
    for (results, local, fatal) in &all {
        let outcomes: Vec<_> = results
            .iter()
            .map(|r| r.as_ref().unwrap().outcomes.clone())
            .collect();
        let expected: Vec<_> = first.iter().map(|r| r.outcomes.clone()).collect();
        assert_eq!(outcomes, expected);
        assert!(fatal.is_none());
        // Orderly teardown only where the whole group measured.
        let hung_group = local.rank >= 2;
        assert_eq!(local.finished, [!hung_group, true]);
        assert_eq!(local.rebuilds, [false, false]);
        // Every rank learns the same: each group that measured, with its ranks (the hung one
        // of round 1 is left out).
        assert_eq!(
            local.learned,
            [
                (vec![0, 1], 2.0 / (1.5 * 1e-6)),
                (vec![0, 2], 2.0 / (2.0 * 1e-6)),
                (vec![1, 3], 2.0 / (3.0 * 1e-6)),
            ]
        );
    }
}

#[test]
fn a_lost_world_communicator_is_rebuilt_by_everyone_and_a_stuck_gpu_stops_the_next_round() {
    let seen = |round, rank, _group, _pass| Part {
        seen: Seen::Measured { time_us: 1.0 },
        world_lost: round == 1 && rank == 1,
        stuck: round == 2 && rank == 2,
    };
    let all = run_four_ranks(seen, None);
    for (results, local, _) in &all {
        assert!(results.iter().all(|r| r.is_ok()));
        assert_eq!(local.rebuilds, [false, true]);
    }
    // Lost again and again: locate stops instead of rebuilding forever.
    let lost = |_, _, _, _| Part {
        seen: Seen::Hung,
        world_lost: true,
        stuck: false,
    };
    let boot = threads(
        0,
        1,
        Arc::new(Mutex::new(vec![String::new(); 1])),
        Arc::new(Barrier::new(1)),
        false,
    );
    let bw = |_: usize, _: f64| 1.0;
    let scripted = Scripted::new(0, lost, false);
    let mut r = Rounds::new(scripted, &boot, Average::Mean, &bw);
    let round = Round {
        index: 1,
        phase: Phase::Nodes,
        groups: Vec::new(),
    };
    for _ in 0..MAX_REBUILDS {
        assert!(r.run_round(&round, Duration::from_secs(1)).is_ok());
    }
    let stop = r.run_round(&round, Duration::from_secs(1)).unwrap_err();
    assert!(stop.why.contains("3 rounds in a row"), "{}", stop.why);
    // A third round would stop and name rank 2.
    let posted = Arc::new(Mutex::new(vec![String::new(); 1]));
    let boot = threads(0, 1, posted, Arc::new(Barrier::new(1)), false);
    let bw = |_: usize, _: f64| 1.0;
    let mut r = Rounds::new(Scripted::new(0, seen, false), &boot, Average::Mean, &bw);
    r.stuck = vec![2];
    let stop = r
        .run_round(&rounds()[0], Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(stop.lost, [2]);
    assert!(stop.why.contains("rank 2 stayed busy"), "{}", stop.why);
}

#[test]
fn a_bootstrap_that_lost_a_process_stops_naming_it() {
    let seen = |_, _, _, _| part(Seen::Measured { time_us: 1.0 });
    let all = run_four_ranks(seen, Some(0));
    let (results, local, fatal) = &all[0];
    let stop = results[0].as_ref().unwrap_err();
    assert_eq!(stop.lost, [3]);
    assert!(stop.why.contains("has sent nothing"), "{}", stop.why);
    assert!(matches!(fatal, Some(Error::Bootstrap { .. })));
    assert!(local.finished.is_empty());
}

#[test]
fn a_calibrating_pass_runs_round_one_again_unless_it_found_something() {
    // Everyone measures; the first pass reads 10 us, the round proper 1 us.
    let seen = |_round, rank, _group, pass| {
        part(Seen::Measured {
            time_us: if pass == 0 { 10.0 } else { 1.0 + rank as f64 },
        })
    };
    for (results, local, fatal) in run_four_ranks_calibrating(seen, None, true) {
        assert!(fatal.is_none());
        // Round 1 twice, round 2 once; the first pass's communicator released orderly.
        assert_eq!(local.parts, [1, 1, 2]);
        assert_eq!(local.finished, [true, true, true]);
        // The round's outcomes are the second pass's; the first pass's pace was learned.
        let first = results[0].as_ref().unwrap();
        assert_eq!(
            first.outcomes[0],
            GroupOutcome::Measured {
                busbw: 2.0 / (1.5 * 1e-6),
                time_us: 1.5
            }
        );
        assert_eq!(local.learned[0], (vec![0, 1], 2.0 / (10.0 * 1e-6)));
        assert_eq!(local.learned.len(), 6);
    }
    // A first pass that found a hang is the round's result: no second pass.
    let hung = |round, rank, _group, _pass| {
        part(if round == 1 && rank == 3 {
            Seen::Hung
        } else {
            Seen::Measured { time_us: 1.0 }
        })
    };
    for (results, local, _) in run_four_ranks_calibrating(hung, None, true) {
        assert_eq!(local.parts, [1, 2]);
        assert_eq!(results[0].as_ref().unwrap().outcomes[1], GroupOutcome::Hung);
    }
    // Without a window (no calibration) every round runs once.
    for (_, local, _) in run_four_ranks(seen, None) {
        assert_eq!(local.parts, [1, 2]);
    }
}
