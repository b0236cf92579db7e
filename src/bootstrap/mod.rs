//! How the processes of a run find each other. The runner only sees this trait; a single process
//! needs nothing, later implementations (MPI, launcher environment + TCP rendezvous) plug in here.

pub mod local;
pub mod nodelist;
pub mod split;

use crate::error::Result;

/// A cross-process reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// Sum.
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

impl Reduce {
    /// Combines two values.
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Reduce::Sum => a + b,
            Reduce::Min => a.min(b),
            Reduce::Max => a.max(b),
        }
    }
}

/// The processes of one run and the few collective operations the harness needs between them.
pub trait Bootstrap: Sync {
    /// Number of processes.
    fn world_size(&self) -> usize;
    /// This process' index.
    fn world_rank(&self) -> usize;
    /// Index of this process among those on the same host.
    fn local_rank(&self) -> usize;
    /// Waits for every process.
    fn barrier(&self) -> Result<()>;
    /// Reduces one value over all processes; everyone gets the result.
    fn allreduce(&self, v: f64, op: Reduce) -> Result<f64>;
    /// Hands rank 0's 128-byte NCCL unique id to every process.
    fn broadcast_id(&self, id: &mut [u8; 128]) -> Result<()>;
    /// Collects one text block per process on rank 0 (others get an empty list).
    fn gather(&self, text: String) -> Result<Vec<String>>;
}

/// One process, no peers.
pub struct SingleProcess;

impl Bootstrap for SingleProcess {
    fn world_size(&self) -> usize {
        1
    }
    fn world_rank(&self) -> usize {
        0
    }
    fn local_rank(&self) -> usize {
        0
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
    fn allreduce(&self, v: f64, _op: Reduce) -> Result<f64> {
        Ok(v)
    }
    fn broadcast_id(&self, _id: &mut [u8; 128]) -> Result<()> {
        Ok(())
    }
    fn gather(&self, text: String) -> Result<Vec<String>> {
        Ok(vec![text])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_process_is_identity() {
        let b = SingleProcess;
        assert_eq!((b.world_size(), b.world_rank(), b.local_rank()), (1, 0, 0));
        assert_eq!(b.allreduce(2.5, Reduce::Max).unwrap(), 2.5);
        assert_eq!(b.gather("x".into()).unwrap(), vec!["x".to_string()]);
        assert_eq!(Reduce::Min.apply(1.0, 2.0), 1.0);
        assert_eq!(Reduce::Sum.apply(1.0, 2.0), 3.0);
    }
}
