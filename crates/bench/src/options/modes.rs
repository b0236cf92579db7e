//! The modes of a run, each made once from the number nccl-tests reads (`-z`, `-a`, `-G`; `-R`'s
//! is [`crate::types::Register`], shared with the GPU layer)
//! so that the rest of the code asks what a mode does instead of comparing integers.

/// `-z`: when the timed loop waits for the GPUs and meets the other ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocking {
    /// `-z 0`: the operations back to back, one wait after the loop.
    Off,
    /// `-z 1`: wait and barrier after each operation (each of the `-m` aggregated ones).
    EachOperationWithBarrier,
    /// `-z 2`: wait after each operation, no barrier.
    EachOperation,
    /// `-z 3`: wait and barrier after each timed iteration (`-n`); the time counts the
    /// iterations only, not the barriers.
    EachIteration,
}

impl Blocking {
    /// The mode of `-z z`, for `z` in 0..=3.
    pub fn from_number(z: i64) -> Option<Blocking> {
        match z {
            0 => Some(Blocking::Off),
            1 => Some(Blocking::EachOperationWithBarrier),
            2 => Some(Blocking::EachOperation),
            3 => Some(Blocking::EachIteration),
            _ => None,
        }
    }

    /// The `-z` number of this mode (header, JSON, fingerprint).
    pub fn number(self) -> i64 {
        match self {
            Blocking::Off => 0,
            Blocking::EachOperationWithBarrier => 1,
            Blocking::EachOperation => 2,
            Blocking::EachIteration => 3,
        }
    }

    /// Waits for the GPUs after each operation (`-z 1`, `-z 2`).
    pub fn waits_each_operation(self) -> bool {
        matches!(
            self,
            Blocking::EachOperationWithBarrier | Blocking::EachOperation
        )
    }

    /// Meets the other ranks after each operation (`-z 1`).
    pub fn barrier_each_operation(self) -> bool {
        self == Blocking::EachOperationWithBarrier
    }

    /// Waits and meets after each timed iteration, timing the iterations alone (`-z 3`).
    pub fn each_iteration(self) -> bool {
        self == Blocking::EachIteration
    }
}

/// `-a`: how the times of the ranks become the one reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Average {
    /// `-a 0`: thread 0 of each process (world rank 0's is printed).
    Rank0,
    /// `-a 1`: the mean over every thread of every process.
    Mean,
    /// `-a 2`: the minimum.
    Min,
    /// `-a 3`: the maximum.
    Max,
}

impl Average {
    /// The mode of `-a a`, for `a` in 0..=3.
    pub fn from_number(a: i64) -> Option<Average> {
        match a {
            0 => Some(Average::Rank0),
            1 => Some(Average::Mean),
            2 => Some(Average::Min),
            3 => Some(Average::Max),
            _ => None,
        }
    }

    /// The `-a` number of this mode.
    pub fn number(self) -> i64 {
        match self {
            Average::Rank0 => 0,
            Average::Mean => 1,
            Average::Min => 2,
            Average::Max => 3,
        }
    }
}

/// `-G`: CUDA graph launches of the timed loop. Any number below 1 runs the loop directly, and
/// the header and JSON show the number as given (as nccl-tests does), hence the number is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Graph(i64);

impl Graph {
    /// `-G n`.
    pub fn from_number(n: i64) -> Graph {
        Graph(n)
    }

    /// How many times the captured graph is launched; `None`: no graph.
    pub fn launches(self) -> Option<u64> {
        u64::try_from(self.0).ok().filter(|&n| n > 0)
    }

    /// The timed loop is captured into a CUDA graph.
    pub fn is_on(self) -> bool {
        self.0 > 0
    }

    /// The number as given (header `graph:`, JSON `graph`, fingerprint).
    pub fn number(self) -> i64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        for z in 0..=3 {
            assert_eq!(Blocking::from_number(z).map(Blocking::number), Some(z));
            assert_eq!(Average::from_number(z).map(Average::number), Some(z));
        }
        assert_eq!(Blocking::from_number(4), None);
        assert_eq!(Average::from_number(-1), None);
    }

    #[test]
    fn what_each_blocking_mode_does() {
        let b = |z| Blocking::from_number(z).unwrap();
        assert_eq!(
            (0..=3)
                .map(|z| b(z).waits_each_operation())
                .collect::<Vec<_>>(),
            [false, true, true, false]
        );
        assert!(b(1).barrier_each_operation() && !b(2).barrier_each_operation());
        assert!(b(3).each_iteration() && !b(0).each_iteration());
    }

    #[test]
    fn graphs_below_one_are_off_but_keep_their_number() {
        assert_eq!(Graph::from_number(3).launches(), Some(3));
        assert!(Graph::from_number(3).is_on());
        for n in [0, -1, i64::MIN] {
            let g = Graph::from_number(n);
            assert_eq!((g.launches(), g.is_on(), g.number()), (None, false, n));
        }
    }
}
