//! One process of a job of several, for the runner's tests ([`FakeJob`]): its exchanges with
//! the others are a function of the test's choosing; nothing else of a bootstrap is modelled.

use crate::bootstrap::{Bootstrap, Reduce, Result};

/// World rank `rank` of `size` processes whose `gather` and `allgather` answer what `exchange`
/// returns for this process' text; `barrier`, `allreduce` and `broadcast_id` change nothing.
pub(super) struct FakeJob<X> {
    /// This process' world rank.
    pub rank: usize,
    /// The number of processes.
    pub size: usize,
    /// Every process' text, in rank order, for this one's.
    pub exchange: X,
}

impl<X: Fn(String) -> Result<Vec<String>> + Sync> Bootstrap for FakeJob<X> {
    fn world_size(&self) -> usize {
        self.size
    }
    fn world_rank(&self) -> usize {
        self.rank
    }
    fn local_rank(&self) -> usize {
        0
    }
    fn describe(&self) -> String {
        "test".into()
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
        (self.exchange)(text)
    }
    fn allgather(&self, text: String) -> Result<Vec<String>> {
        (self.exchange)(text)
    }
}
