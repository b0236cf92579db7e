//! What every rank tells the others after a round, and how the reports become one outcome per
//! group. Every rank gets every report (the bootstrap's allgather) and combines them the same
//! way, so every rank has the same outcomes and plans the same next round.

use crate::locate::round::Round;
use crate::locate::seam::GroupOutcome;
use crate::options::Average;
use serde::{Deserialize, Serialize};

/// What one rank saw of its group in a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Seen {
    /// It sat the round out.
    Out,
    /// Its timed loop completed: time per operation, µs.
    Measured {
        /// Time per operation, µs.
        time_us: f64,
    },
    /// The deadline passed first; it aborted the group's communicator.
    Hung,
    /// An NCCL or CUDA error (one line).
    Failed {
        /// The error.
        error: String,
    },
}

/// One rank's report on one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The round's index (a rank out of step is an error of its groups).
    pub round: usize,
    /// Its group in the round (`None`: it sat out).
    pub group: Option<usize>,
    /// What it saw.
    pub seen: Seen,
    /// It aborted the communicator the rounds are split from (a split that did not finish in
    /// time or failed): every rank makes a new one before the next round.
    pub world_lost: bool,
    /// Its GPU did not become idle after its group was aborted: it cannot run another round.
    pub stuck: bool,
}

impl Report {
    /// The report as sent.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A report as received; `None` for anything else.
    pub fn decode(text: &str) -> Option<Report> {
        serde_json::from_str(text).ok()
    }
}

/// A round's reports combined.
#[derive(Debug, Clone, PartialEq)]
pub struct Combined {
    /// One outcome per group, in group order.
    pub outcomes: Vec<GroupOutcome>,
    /// A rank lost the world communicator: every rank makes a new one before the next round.
    pub rebuild_world: bool,
    /// Ranks whose GPU stayed busy after their group was aborted.
    pub stuck: Vec<usize>,
}

/// Combines the reports of every world rank (in rank order; `None` for a text that was not a
/// report) on `round`. A group is hung when one of its ranks saw it hang, failed when one saw an
/// error (or did not report on this round as a member), else measured: its time is its ranks'
/// times reduced as `-a` reduces the table's (rank 0 of the group, mean, min or max), and
/// `busbw(ranks, seconds)` its bus bandwidth.
pub fn combine(
    round: &Round,
    reports: &[Option<Report>],
    average: Average,
    busbw: &dyn Fn(usize, f64) -> f64,
) -> Combined {
    let outcomes = round
        .groups
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            let mut times = Vec::with_capacity(g.ranks.len());
            let mut error = None;
            let mut hung = false;
            for &r in &g.ranks {
                match reports.get(r).and_then(Option::as_ref) {
                    None => {
                        error.get_or_insert_with(|| format!("rank {r} sent no report"));
                    }
                    Some(rep) if rep.round != round.index || rep.group != Some(gi) => {
                        error.get_or_insert_with(|| {
                            format!(
                                "rank {r} reported on round {} group {} (out of step)",
                                rep.round,
                                rep.group.map_or("none".to_string(), |g| g.to_string())
                            )
                        });
                    }
                    Some(rep) => match &rep.seen {
                        Seen::Measured { time_us } if time_us.is_finite() && *time_us > 0.0 => {
                            times.push(*time_us)
                        }
                        Seen::Measured { time_us } => {
                            error.get_or_insert_with(|| {
                                format!("rank {r} measured an impossible time ({time_us} us)")
                            });
                        }
                        Seen::Hung => hung = true,
                        Seen::Failed { error: e } => {
                            error.get_or_insert_with(|| format!("rank {r}: {e}"));
                        }
                        Seen::Out => {
                            error.get_or_insert_with(|| format!("rank {r} sat the round out"));
                        }
                    },
                }
            }
            if hung {
                return GroupOutcome::Hung;
            }
            if let Some(error) = error {
                return GroupOutcome::Failed { error };
            }
            let time_us = match average {
                Average::Rank0 => times.first().copied(),
                Average::Mean => Some(times.iter().sum::<f64>() / times.len().max(1) as f64),
                Average::Min => times.iter().copied().reduce(f64::min),
                Average::Max => times.iter().copied().reduce(f64::max),
            }
            .unwrap_or(f64::NAN);
            GroupOutcome::Measured {
                busbw: busbw(g.ranks.len(), time_us * 1e-6),
                time_us,
            }
        })
        .collect();
    let all = || reports.iter().enumerate();
    Combined {
        outcomes,
        rebuild_world: reports.iter().flatten().any(|r| r.world_lost),
        stuck: all()
            .filter(|(_, r)| r.as_ref().is_some_and(|r| r.stuck))
            .map(|(i, _)| i)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate::round::{Phase, Role, RoundBuilder, Subject};

    /// Round 3 of six ranks: groups {0,1} and {2,3,4}; rank 5 sits out.
    fn round() -> Round {
        let mut b = RoundBuilder::new(6, Phase::Pairs);
        b.add(vec![0, 1], Subject::Pair(0, 1), Role::Primary);
        b.add(vec![2, 3, 4], Subject::Node(2), Role::Primary);
        b.finish(3).unwrap()
    }

    fn rep(group: Option<usize>, seen: Seen) -> Option<Report> {
        Some(Report {
            round: 3,
            group,
            seen,
            world_lost: false,
            stuck: false,
        })
    }

    fn measured(t: f64) -> Seen {
        Seen::Measured { time_us: t }
    }

    /// busbw = ranks / seconds, to see both arguments.
    fn bw(n: usize, s: f64) -> f64 {
        n as f64 / s
    }

    #[test]
    fn groups_are_measured_hung_or_failed_as_their_ranks_saw_them() {
        let reports = vec![
            rep(Some(0), measured(10.0)),
            rep(Some(0), measured(30.0)),
            rep(Some(1), measured(5.0)),
            rep(Some(1), Seen::Hung),
            rep(Some(1), Seen::Failed { error: "x".into() }),
            rep(None, Seen::Out),
        ];
        let c = combine(&round(), &reports, Average::Mean, &bw);
        assert_eq!(
            c.outcomes,
            [
                GroupOutcome::Measured {
                    busbw: bw(2, 20.0 * 1e-6),
                    time_us: 20.0
                },
                GroupOutcome::Hung
            ]
        );
        assert!(!c.rebuild_world && c.stuck.is_empty());
        // -a: rank 0 of the group, min, max.
        for (a, t) in [
            (Average::Rank0, 10.0),
            (Average::Min, 10.0),
            (Average::Max, 30.0),
        ] {
            let c = combine(&round(), &reports, a, &bw);
            assert_eq!(
                c.outcomes[0],
                GroupOutcome::Measured {
                    busbw: bw(2, t * 1e-6),
                    time_us: t
                }
            );
        }
    }

    #[test]
    fn missing_garbled_or_out_of_step_reports_fail_their_group() {
        let ok = || rep(Some(0), measured(1.0));
        let cases: Vec<(Option<Report>, &str)> = vec![
            (None, "rank 1 sent no report"),
            (
                Some(Report {
                    round: 2,
                    ..ok().unwrap()
                }),
                "rank 1 reported on round 2 group 0 (out of step)",
            ),
            (rep(Some(1), measured(1.0)), "reported on round 3 group 1"),
            (rep(Some(0), measured(f64::NAN)), "impossible time"),
            (rep(Some(0), measured(0.0)), "impossible time"),
            (
                rep(None, Seen::Out),
                "rank 1 reported on round 3 group none",
            ),
            (rep(Some(0), Seen::Out), "rank 1 sat the round out"),
            (
                rep(
                    Some(0),
                    Seen::Failed {
                        error: "boom".into(),
                    },
                ),
                "rank 1: boom",
            ),
        ];
        for (second, text) in cases {
            let reports = vec![ok(), second, None, None, None, None];
            let c = combine(&round(), &reports, Average::Mean, &bw);
            match &c.outcomes[0] {
                GroupOutcome::Failed { error } => assert!(error.contains(text), "{error}"),
                o => panic!("{text}: {o:?}"),
            }
            assert!(matches!(c.outcomes[1], GroupOutcome::Failed { .. }));
        }
        // Fewer reports than ranks (a short list) fails those groups too.
        let c = combine(&round(), &[], Average::Mean, &bw);
        assert!(
            c.outcomes
                .iter()
                .all(|o| matches!(o, GroupOutcome::Failed { .. }))
        );
    }

    #[test]
    fn world_loss_and_stuck_gpus_are_everyone_s_news() {
        let mut reports: Vec<Option<Report>> =
            (0..6).map(|_| rep(None, Seen::Out)).collect::<Vec<_>>();
        if let Some(r) = reports[4].as_mut() {
            r.world_lost = true;
        }
        if let Some(r) = reports[2].as_mut() {
            r.stuck = true;
        }
        let c = combine(&round(), &reports, Average::Mean, &bw);
        assert!(c.rebuild_world);
        assert_eq!(c.stuck, [2]);
    }

    #[test]
    fn reports_travel_as_one_line_of_json() {
        for seen in [
            Seen::Out,
            measured(12.5),
            Seen::Hung,
            Seen::Failed {
                error: "a\nb \"c\"".into(),
            },
        ] {
            let r = rep(Some(1), seen).unwrap();
            let text = r.encode();
            assert!(!text.contains('\n'));
            assert_eq!(Report::decode(&text), Some(r));
        }
        assert_eq!(Report::decode("junk"), None);
        // A NaN time is sent as null and comes back as no report (its group fails).
        let nan = rep(Some(0), measured(f64::NAN)).unwrap();
        assert_eq!(Report::decode(&nan.encode()), None);
    }
}
