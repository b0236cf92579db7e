//! What a group's window (`--locate-window`) is estimated from: the busbw its operations would
//! run at. For each rank of the group, the fastest group it was measured in so far, and for
//! the group the slowest of those (a rank not yet measured counts at the fastest group of any
//! round, or at rank 0's row of the job nearest the locate size before any group ran). A
//! group holding a slow node is thus estimated at that node's pace and lasts about the window,
//! not the window times its slowdown. Round 1 first runs a short pass that only learns each
//! group's pace ([`super::rounds::Local::calibrating`]), so that a job slower than its groups
//! (its row is all there is before) does not shorten their windows. Every rank learns the
//! same figures (from the shared reports), so every rank of a group runs the same count.

use std::collections::HashMap;

/// The figures the windows are estimated from (GB/s of busbw).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Basis {
    /// Rank 0's job row at first, raised to the fastest group measured since.
    fastest: Option<f64>,
    /// Each world rank's fastest group so far.
    by_rank: HashMap<usize, f64>,
}

impl Basis {
    /// Before any round: the job's own busbw nearest the locate size, if it has a row.
    pub fn new(job_busbw: Option<f64>) -> Basis {
        Basis {
            fastest: job_busbw.filter(|b| b.is_finite() && *b > 0.0),
            by_rank: HashMap::new(),
        }
    }

    /// After a round: a group of `ranks` reached `busbw` (ignored unless positive and finite).
    pub fn learn(&mut self, ranks: &[usize], busbw: f64) {
        if !(busbw.is_finite() && busbw > 0.0) {
            return;
        }
        self.fastest = Some(self.fastest.map_or(busbw, |b| b.max(busbw)));
        for &r in ranks {
            let best = self.by_rank.entry(r).or_insert(busbw);
            *best = best.max(busbw);
        }
    }

    /// Whether any group has been measured (learned).
    pub fn measured(&self) -> bool {
        !self.by_rank.is_empty()
    }

    /// The busbw a group of `ranks` is estimated to run at; `None` when nothing is known (the
    /// window then does not apply).
    pub fn estimate(&self, ranks: &[usize]) -> Option<f64> {
        ranks
            .iter()
            .filter_map(|r| self.by_rank.get(r).copied().or(self.fastest))
            .reduce(f64::min)
            .or(self.fastest)
    }
}

#[cfg(test)]
mod tests {
    use super::Basis;

    #[test]
    fn the_job_row_first_then_each_ranks_fastest_group_the_slowest_member_deciding() {
        let mut b = Basis::new(Some(0.15));
        assert_eq!(b.estimate(&[0, 1]), Some(0.15));
        assert!(!b.measured());
        // Round 1: a starved rank 1 with rank 0; ranks 2 and 3 healthy.
        b.learn(&[0, 1], 0.4);
        b.learn(&[2, 3], 1.8);
        assert!(b.measured());
        // A group with rank 1 runs at its pace; the healthy ones at theirs.
        assert_eq!(b.estimate(&[1, 3]), Some(0.4));
        assert_eq!(b.estimate(&[0, 2]), Some(0.4));
        assert_eq!(b.estimate(&[2, 3]), Some(1.8));
        // A rank not measured yet counts at the fastest group of any round.
        assert_eq!(b.estimate(&[2, 7]), Some(1.8));
        assert_eq!(b.estimate(&[7]), Some(1.8));
        // Rank 0 is cleared by a faster group; rank 1 is not.
        b.learn(&[0, 2], 1.7);
        assert_eq!(b.estimate(&[0, 3]), Some(1.7));
        assert_eq!(b.estimate(&[0, 1]), Some(0.4));
        // A slower reading never lowers a rank's best.
        b.learn(&[2, 3], 0.1);
        assert_eq!(b.estimate(&[2, 3]), Some(1.8));
    }

    #[test]
    fn nothing_known_means_no_estimate_and_bad_figures_are_ignored() {
        let mut b = Basis::new(None);
        assert_eq!(b.estimate(&[0, 1]), None);
        for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
            b.learn(&[0, 1], bad);
        }
        assert_eq!(b, Basis::new(Some(f64::NAN)));
        assert_eq!(b.estimate(&[0, 1]), None);
        assert_eq!(b.estimate(&[]), None);
        b.learn(&[0], 2.0);
        assert_eq!(b.estimate(&[]), Some(2.0));
        assert_eq!(b.estimate(&[1]), Some(2.0));
    }
}
