//! What the measurements of a run are made of: the [`Engine`] every benchmark thread shares
//! (options, collective, libnccl, the threads' rendezvous, the communicator size and the
//! largest size) and the [`Shape`] of one measurement (datatype, op, root, counts, the buffer
//! rotation, and the pointers it uses).

use super::sync::ThreadGroup;
use crate::collective::{Collective, Counts};
use crate::gpu::driver::CUdeviceptr;
use crate::gpu::nccl::Nccl;
use crate::options::Options;
use crate::types::{DataType, RedOp};

/// What every thread shares.
pub struct Engine<'a> {
    /// Validated options.
    pub opts: &'a Options,
    /// The collective under test.
    pub coll: &'a dyn Collective,
    /// libnccl.
    pub nccl: &'static Nccl,
    /// The threads (and processes) of the run.
    pub group: &'a ThreadGroup<'a>,
    /// Communicator size.
    pub nranks: usize,
    /// Largest size after the memory clamp.
    pub max_bytes: u64,
    /// Number of processes (for the `-a 1` mean).
    pub world_size: usize,
    /// `NCCL_TESTS_SPLIT` made several groups: every thread keeps its own time and the bus
    /// bandwidth terms of each measurement, for each group's own result.
    pub record_groups: bool,
}

/// One datatype/op/root combination at one size.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Datatype.
    pub dt: DataType,
    /// Reduction op (ignored by non-reductions).
    pub op: RedOp,
    /// Root.
    pub root: usize,
    /// Counts for this size.
    pub counts: Counts,
    /// Buffer rotation: iteration `it` shifts both pointers by `span × (it mod steps)` bytes,
    /// `span` being the printed size and `steps` how many spans fit in the largest size.
    pub span: u64,
    /// See `span`.
    pub steps: u64,
}

impl Shape {
    /// Counts for `bytes` bytes of `dt`.
    pub fn new(e: &Engine, dt: DataType, op: RedOp, root: usize, bytes: u64) -> Shape {
        Shape::of(e.coll, e.nranks, e.max_bytes, dt, op, root, bytes)
    }

    /// Counts for `bytes` bytes of `dt` of collective `coll` on `nranks` ranks, with buffers
    /// for `max_bytes` (the largest size).
    pub fn of(
        coll: &dyn Collective,
        nranks: usize,
        max_bytes: u64,
        dt: DataType,
        op: RedOp,
        root: usize,
        bytes: u64,
    ) -> Shape {
        let ts = dt.size();
        let counts = coll.counts(bytes as usize / ts, nranks, ts);
        let span = counts.printed_size(ts);
        Shape {
            dt,
            op,
            root,
            counts,
            span,
            steps: max_bytes.checked_div(span).unwrap_or(1).max(1),
        }
    }

    /// The send and receive pointers of rank `rank` whose buffers start at `(send, recv)`:
    /// `unalign` elements in (`-u`), at the in-place offsets in place, advanced by `shift`
    /// bytes.
    pub fn pointers(
        &self,
        (send, recv): (CUdeviceptr, CUdeviceptr),
        rank: usize,
        unalign: u64,
        in_place: bool,
        shift: u64,
    ) -> (CUdeviceptr, CUdeviceptr) {
        let ts = self.ts() as u64;
        let unalign = unalign * ts;
        let recv = recv + unalign;
        let rank = rank as u64;
        let (send, recv) = if in_place {
            (
                recv + self.counts.send_inplace_offset as u64 * ts * rank,
                recv + self.counts.recv_inplace_offset as u64 * ts * rank,
            )
        } else {
            (send + unalign, recv)
        };
        (send + shift, recv + shift)
    }

    pub(super) fn ts(&self) -> usize {
        self.dt.size()
    }
}
