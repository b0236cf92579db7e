//! One process of a job of several, for the runner's tests ([`FakeJob`]): its exchanges with
//! the others are a function of the test's choosing, and the hang watch's notes are the test's
//! to set and read; nothing else of a bootstrap is modelled.

use crate::bootstrap::{Bootstrap, PeerState, Reduce, Result};
use std::sync::Mutex;

/// World rank `rank` of `size` processes whose `gather` and `allgather` answer what `exchange`
/// returns for this process' text; `barrier`, `allreduce` and `broadcast_id` change nothing.
pub(crate) struct FakeJob<X> {
    /// This process' world rank.
    pub rank: usize,
    /// The number of processes.
    pub size: usize,
    /// Every process' text, in rank order, for this one's.
    pub exchange: X,
    /// What [`Bootstrap::peer_states`] answers (rank 0's view of the others' notes).
    pub peers: Option<Vec<PeerState>>,
    /// What [`Bootstrap::root_state`] answers (rank 0's note, as another process has it).
    pub root: Option<Vec<u8>>,
    /// The last note published ([`Bootstrap::publish_state`]).
    pub published: Mutex<Vec<u8>>,
    /// What [`Bootstrap::end_hung`] was told.
    pub told: Mutex<Option<String>>,
}

impl<X> FakeJob<X> {
    /// World rank `rank` of `size` processes exchanging through `exchange`; no notes.
    pub fn new(rank: usize, size: usize, exchange: X) -> FakeJob<X> {
        FakeJob {
            rank,
            size,
            exchange,
            peers: None,
            root: None,
            published: Mutex::new(Vec::new()),
            told: Mutex::new(None),
        }
    }
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
    fn publish_state(&self, note: &[u8]) {
        if let Ok(mut p) = self.published.lock() {
            *p = note.to_vec();
        }
    }
    fn peer_states(&self) -> Option<Vec<PeerState>> {
        self.peers.clone()
    }
    fn root_state(&self) -> Option<Vec<u8>> {
        self.root.clone()
    }
    fn end_hung(&self, why: &str) {
        if let Ok(mut t) = self.told.lock() {
            *t = Some(why.to_string());
        }
    }
}
