//! `--explain`'s untimed call: after a half's measurement and validation, so the timed loops
//! run exactly as without explain, one more call of the same operation with NCCL's plugins
//! armed; what they recorded is handed to the printing side with the row.

use super::Worker;
use crate::error::Result;
use crate::runner::engine::Shape;
use nccl_perf_explain::observed::Seen;

impl Worker<'_> {
    /// One untimed call of `s` (`in_place` half) after its measurement, on every rank (it is a
    /// collective call); where `arm`, NCCL's plugins record it and what this thread's first
    /// rank reported is returned.
    pub(in crate::runner) fn explain_call(
        &mut self,
        s: &Shape,
        in_place: bool,
        arm: bool,
    ) -> Result<Option<Seen>> {
        let op = self.bind(s, in_place)?;
        if arm {
            nccl_perf_capture::arm();
        }
        let issued = op.issue_first().and_then(|()| self.wait());
        if !arm {
            return issued.map(|()| None);
        }
        // Proxy and network events of the call may still be arriving from NCCL's proxy thread
        // when the stream is done; they are counted until the window closes here.
        let taken = nccl_perf_capture::take();
        issued?;
        let rank = self.gpus.first().map_or(0, |g| g.rank()) as i32;
        Ok(taken.seen(rank, nccl_perf_capture::silent::network_here))
    }
}
