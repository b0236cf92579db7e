//! The record of a run: every round with its outcomes and judgements, which the schedules read
//! to plan the next round and to give their verdicts.

use super::judge::Judgement;
use super::round::Round;
use super::seam::GroupOutcome;

/// One round as run and judged.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    /// The round.
    pub round: Round,
    /// One outcome per group.
    pub outcomes: Vec<GroupOutcome>,
    /// One judgement per group.
    pub judged: Vec<Judgement>,
    /// Wall time of the round, seconds (as the runner measured it).
    pub wall_s: f64,
}

impl RoundRecord {
    /// The judgement of group `group` (`None` past the end).
    pub fn judgement(&self, group: usize) -> Option<&Judgement> {
        self.judged.get(group)
    }
}
