//! The seam between locate and whatever runs its rounds: the benchmark runner on GPUs (bench's
//! `runner/locate/`) or the model cluster of the tests (`oracle::locate_model`). Locate plans
//! rounds and judges their results; a [`RoundRunner`] only runs them.
//!
//! Contract for a runner in a job of many processes: every rank calls
//! [`RoundRunner::run_round`] with the same round (locate is deterministic: the same seed and the
//! same outcomes give every rank the same next round), and every rank gets back the same
//! outcomes in group order (the runner gathers each group's result and shares it, e.g. an
//! all-gather over the world communicator or the bootstrap).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::round::Round;

/// The result of one group of a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum GroupOutcome {
    /// The group's collective completed: its bus bandwidth (GB/s, nccl-tests' busbw of the
    /// group's communicator) and time per operation (µs).
    Measured {
        /// Bus bandwidth, GB/s.
        busbw: f64,
        /// Time per operation, µs.
        time_us: f64,
    },
    /// No result before the deadline; the runner aborted the group's communicator. The hang is
    /// localised to this group.
    Hung,
    /// An NCCL or CUDA error in the group (its text).
    Failed {
        /// What went wrong, one line.
        error: String,
    },
}

impl GroupOutcome {
    /// The bus bandwidth of a measured group with a finite, non-negative value.
    pub fn busbw(&self) -> Option<f64> {
        match self {
            GroupOutcome::Measured { busbw, .. } if busbw.is_finite() && *busbw >= 0.0 => {
                Some(*busbw)
            }
            _ => None,
        }
    }

    /// The time per operation of a measured group with a finite, non-negative value.
    pub fn time_us(&self) -> Option<f64> {
        match self {
            GroupOutcome::Measured { time_us, .. } if time_us.is_finite() && *time_us >= 0.0 => {
                Some(*time_us)
            }
            _ => None,
        }
    }
}

/// What a runner returns for a round.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundResult {
    /// One outcome per group, in the round's group order.
    pub outcomes: Vec<GroupOutcome>,
    /// Wall time of the round in seconds: communicator split, warm-up, timed loop, teardown.
    pub wall_s: f64,
}

/// The runner cannot go on (e.g. NCCL cannot abort a hung group without the world
/// communicator, or a process was lost): locate stops and gives its verdict on the rounds
/// completed, naming this reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// Why, one line.
    pub why: String,
    /// World ranks whose processes stopped answering (left the job, or froze), where the
    /// runner knows them: locate names their GPUs as hung.
    pub lost: Vec<usize>,
}

impl Stop {
    /// A stop for `why`, nobody lost.
    pub fn new(why: impl Into<String>) -> Stop {
        Stop {
            why: why.into(),
            lost: Vec::new(),
        }
    }
}

/// Runs rounds: what the benchmark runner implements for real GPUs and the model cluster for
/// tests.
pub trait RoundRunner {
    /// Runs every group of `round` at once, one communicator per group (ranks split by
    /// [`Round::colours`]), each measured as the job's collective at the locate size. A group
    /// without a result `deadline` after the round started is aborted and reported as
    /// [`GroupOutcome::Hung`]; the others go on.
    fn run_round(&mut self, round: &Round, deadline: Duration) -> Result<RoundResult, Stop>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sane_measurements_count() {
        let m = |busbw, time_us| GroupOutcome::Measured { busbw, time_us };
        assert_eq!(m(10.0, 5.0).busbw(), Some(10.0));
        assert_eq!(m(f64::NAN, 5.0).busbw(), None);
        assert_eq!(m(-1.0, 5.0).busbw(), None);
        assert_eq!(m(1.0, f64::INFINITY).time_us(), None);
        assert_eq!(GroupOutcome::Hung.busbw(), None);
    }

    #[test]
    fn outcomes_serialise_with_a_status_tag() {
        let s = serde_json::to_string(&GroupOutcome::Hung).unwrap();
        assert_eq!(s, r#"{"status":"hung"}"#);
        let f = GroupOutcome::Failed { error: "x".into() };
        let back: GroupOutcome = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }
}
