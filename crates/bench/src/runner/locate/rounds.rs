//! The benchmark's side of locate's seam: each round, this rank runs its part (its group's
//! communicator split and measured by the round's deadline: [`Local`], on the GPU in `gpu.rs`),
//! then every rank's report goes to every rank ([`Bootstrap::allgather`]) and is combined
//! ([`super::share`]), so that every rank gets the same outcomes.

use super::share::{self, Report, Seen};
use crate::bootstrap::Bootstrap;
use crate::error::Error;
use crate::locate::round::Round;
use crate::locate::seam::{RoundResult, RoundRunner, Stop};
use crate::options::Average;
use std::time::{Duration, Instant};

/// Rounds in a row that may lose the world communicator before locate stops.
const MAX_REBUILDS: usize = 3;

/// What this rank saw of a round.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// Its group's outcome as this rank saw it.
    pub seen: Seen,
    /// It aborted the world communicator (see [`Report::world_lost`]).
    pub world_lost: bool,
    /// Its GPU stayed busy after its group was aborted.
    pub stuck: bool,
}

/// This rank's part of the rounds.
pub trait Local {
    /// Runs this rank's part of `round` (`group`: its group, `None` when it sits out) by
    /// `deadline`, first making a new world communicator when `rebuild` (every rank is told
    /// the same). An error ends the locate run on this rank (a signal, a world communicator
    /// that cannot be made).
    fn run_round(
        &mut self,
        round: &Round,
        group: Option<usize>,
        rebuild: bool,
        deadline: Instant,
    ) -> Result<Part, Error>;

    /// After the reports were shared: releases the round's communicator, orderly when every
    /// rank of its group measured (`measured`), else aborted. (When the rounds stop early it is
    /// not called: the communicator goes with the local part.)
    fn finish(&mut self, measured: bool);

    /// After every round, for each group that measured: its ranks and busbw (GB/s), the same
    /// on every rank (from the shared reports); what later groups' windows are estimated from.
    fn learn(&mut self, ranks: &[usize], busbw: f64);

    /// Whether the next round's part is a short pass that only learns the groups' pace (a
    /// window is asked for and no group has been measured yet): the round then runs again
    /// with windows from it. The same on every rank.
    fn calibrating(&self) -> bool;
}

/// The rounds of one rank: its [`Local`] part and the sharing of the reports.
pub struct Rounds<'a, L: Local> {
    local: L,
    boot: &'a dyn Bootstrap,
    average: Average,
    busbw: &'a dyn Fn(usize, f64) -> f64,
    rebuild: bool,
    /// Rounds in a row that lost the world communicator.
    lost_in_a_row: usize,
    /// Ranks whose GPU stayed busy, found in the last round: the next round stops, naming them.
    stuck: Vec<usize>,
    /// Why this rank cannot go on, for the run to end with once locate has given its verdict.
    fatal: Option<Error>,
}

impl<'a, L: Local> Rounds<'a, L> {
    /// The rounds of this rank; `busbw(ranks, seconds)` is the collective's bus bandwidth for
    /// a group of `ranks` at the locate size, `average` reduces a group's times as `-a` does.
    pub fn new(
        local: L,
        boot: &'a dyn Bootstrap,
        average: Average,
        busbw: &'a dyn Fn(usize, f64) -> f64,
    ) -> Rounds<'a, L> {
        Rounds {
            local,
            boot,
            average,
            busbw,
            rebuild: false,
            lost_in_a_row: 0,
            stuck: Vec::new(),
            fatal: None,
        }
    }

    /// The error that stopped this rank, if one did: the run ends with it after the verdict.
    pub fn into_parts(self) -> (L, Option<Error>) {
        (self.local, self.fatal)
    }

    fn stop(&mut self, e: Error) -> Stop {
        let lost = match &e {
            Error::Bootstrap { lost, .. } => lost.clone(),
            _ => Vec::new(),
        };
        let why = e.to_string();
        self.fatal.get_or_insert(e);
        Stop { why, lost }
    }
}

impl<L: Local> Rounds<'_, L> {
    /// One pass of `round`: this rank's part by `deadline`, then every rank's report shared
    /// and combined; the round's communicator is released and the groups' readings learned.
    fn pass(&mut self, round: &Round, deadline: Instant) -> Result<share::Combined, Stop> {
        let me = self.boot.world_rank();
        let group = round.groups.iter().position(|g| g.ranks.contains(&me));
        let part = match self.local.run_round(round, group, self.rebuild, deadline) {
            Ok(p) => p,
            // The others learn it from the bootstrap (this process ends after the verdict); the
            // round's communicator is aborted when the local part is dropped, after the verdict
            // is out (the watchdog may end this process soon).
            Err(e) => return Err(self.stop(e)),
        };
        let report = Report {
            round: round.index,
            group,
            seen: part.seen,
            world_lost: part.world_lost,
            stuck: part.stuck,
        };
        let texts = match self.boot.allgather(report.encode()) {
            Ok(t) => t,
            Err(e) => return Err(self.stop(e.into())),
        };
        let reports: Vec<Option<Report>> = texts.iter().map(|t| Report::decode(t)).collect();
        let combined = share::combine(round, &reports, self.average, self.busbw);
        let measured = group
            .and_then(|g| combined.outcomes.get(g))
            .is_some_and(|o| o.busbw().is_some());
        self.local.finish(measured);
        for (g, outcome) in round.groups.iter().zip(&combined.outcomes) {
            if let Some(busbw) = outcome.busbw() {
                self.local.learn(&g.ranks, busbw);
            }
        }
        self.rebuild = combined.rebuild_world;
        self.lost_in_a_row = if self.rebuild {
            self.lost_in_a_row + 1
        } else {
            0
        };
        self.stuck = combined.stuck.clone();
        Ok(combined)
    }
}

impl<L: Local> RoundRunner for Rounds<'_, L> {
    fn run_round(&mut self, round: &Round, deadline: Duration) -> Result<RoundResult, Stop> {
        if !self.stuck.is_empty() {
            let ranks: Vec<String> = self.stuck.iter().map(|r| r.to_string()).collect();
            return Err(Stop {
                why: format!(
                    "the GPU of rank {} stayed busy after its group was aborted; no more rounds \
                     can run",
                    ranks.join(",")
                ),
                lost: std::mem::take(&mut self.stuck),
            });
        }
        if self.lost_in_a_row >= MAX_REBUILDS {
            return Err(Stop::new(format!(
                "the communicator the rounds are split from was lost in {MAX_REBUILDS} rounds in \
                 a row (a split or its creation did not finish in time); no more rounds can run"
            )));
        }
        let start = Instant::now();
        let calibrating = self.local.calibrating();
        let mut combined = self.pass(round, start + deadline)?;
        // A short first pass only taught the groups' pace: the round proper runs again with
        // windows from it, unless the pass already found something (a hang, a failure, a lost
        // communicator), which is the round's result as it stands.
        let clean = combined.outcomes.iter().all(|o| o.busbw().is_some())
            && !combined.rebuild_world
            && combined.stuck.is_empty();
        if calibrating && clean {
            combined = self.pass(round, Instant::now() + deadline)?;
        }
        Ok(RoundResult {
            outcomes: combined.outcomes,
            wall_s: start.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests;
