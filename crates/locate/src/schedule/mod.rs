//! Schedules: which groups run in which round. A schedule plans one round at a time from the
//! rounds before it (so adaptive schedules react to what they saw), then gives its verdicts.
//!
//! * [`Kind::Nodes`]: every node on its own at once, then bisection inside slow nodes.
//! * [`Kind::Rails`]: every rail (GPU *i* of every node) at once, then bisection along slow
//!   rails.
//! * [`Kind::Full`]: every pair of nodes exactly once (round-robin: N−1 rounds for even N, N
//!   for odd N), then slow links re-tested and slow nodes bisected.
//! * [`Kind::Quick`]: one random perfect matching, suspects re-paired with known-good nodes,
//!   then slow links re-tested and slow nodes bisected.

mod followup;
pub mod full;
pub mod larger;
pub mod leave_out;
mod link_check;
pub mod quick;
pub mod round_robin;
pub mod whole;

use serde::{Deserialize, Serialize};

use super::history::RoundRecord;
use super::judge::Shape;
use super::round::Round;
use super::stats::Thresholds;
use super::topology::Topology;
use super::verdict::Verdict;

/// What a schedule sees when it plans or concludes.
pub struct Context<'a> {
    /// The job.
    pub topo: &'a Topology,
    /// Every round so far, judged.
    pub history: &'a [RoundRecord],
    /// The thresholds rounds were judged with.
    pub th: &'a Thresholds,
}

impl Context<'_> {
    /// The index the next round gets (1-based).
    pub fn next_index(&self) -> usize {
        self.history.len() + 1
    }
}

/// A schedule's verdicts and remarks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conclusion {
    /// Culprits named.
    pub verdicts: Vec<Verdict>,
    /// Remarks: suspicions not reproduced, what a schedule cannot see on this job.
    pub notes: Vec<String>,
}

/// Plans rounds and names culprits.
pub trait Schedule {
    /// The next round, planned from the rounds so far (`cx.history`), or `None` when done.
    fn next_round(&mut self, cx: &Context) -> Option<Round>;

    /// References this schedule knows for shapes it probes (e.g. the median pair of a full
    /// round-robin, for re-tests where no control fits), merged into the judge's book before
    /// each round is judged.
    fn references(&self) -> Vec<(Shape, f64)> {
        Vec::new()
    }

    /// The verdicts on the rounds so far. Called when the schedule is done, or when the run
    /// stopped early: then suspicions not yet narrowed down are named as they stand.
    fn conclude(&self, cx: &Context) -> Conclusion;
}

/// A schedule name that is none of the four.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown locate schedule '{0}'; use nodes, rails, quick or full")]
pub struct UnknownSchedule(pub String);

/// The schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Every node on its own.
    Nodes,
    /// Every rail on its own.
    Rails,
    /// A random matching and re-pairing of suspects.
    Quick,
    /// Every pair of nodes.
    Full,
}

impl Kind {
    /// Every schedule, in the order of the docs.
    pub const ALL: [Kind; 4] = [Kind::Nodes, Kind::Rails, Kind::Quick, Kind::Full];

    /// The name on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Nodes => "nodes",
            Kind::Rails => "rails",
            Kind::Quick => "quick",
            Kind::Full => "full",
        }
    }

    /// A schedule by name (`per-node` and `per-rail` are accepted too).
    pub fn parse(s: &str) -> Result<Kind, UnknownSchedule> {
        match s {
            "nodes" | "per-node" => Ok(Kind::Nodes),
            "rails" | "per-rail" => Ok(Kind::Rails),
            "quick" => Ok(Kind::Quick),
            "full" => Ok(Kind::Full),
            _ => Err(UnknownSchedule(s.to_string())),
        }
    }

    /// A new schedule of this kind for `topo`; `seed` fixes the random matching of `quick`.
    pub fn build(self, topo: &Topology, seed: u64) -> Box<dyn Schedule> {
        match self {
            Kind::Nodes => Box::new(whole::PerNode::new(topo)),
            Kind::Rails => Box::new(whole::PerRail::new(topo)),
            Kind::Quick => Box::new(quick::Quick::new(topo, seed)),
            Kind::Full => Box::new(full::Full::new(topo)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.name()), Ok(k));
        }
        assert_eq!(Kind::parse("per-rail"), Ok(Kind::Rails));
        assert!(Kind::parse("pairs").is_err());
    }
}
