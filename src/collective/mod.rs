//! The collectives: one file each, saying how a size becomes per-rank counts, how bandwidth is
//! computed, which NCCL call(s) one operation is, and what the buffers must hold for validation.

mod all_gather;
mod all_reduce;

pub use all_gather::AllGather;
pub use all_reduce::AllReduce;

use crate::error::Result;
use crate::gpu::nccl::{Comm, Nccl};
use crate::types::RedOp;
use std::ffi::c_void;

/// Per-rank element counts derived from one sweep size (spec §1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Elements each rank sends.
    pub send: usize,
    /// Elements each rank receives (and validates).
    pub recv: usize,
    /// The `count` argument passed to NCCL (printed in the count column).
    pub param: usize,
    /// In-place: the send pointer is the receive buffer plus this many elements × rank.
    pub send_inplace_offset: usize,
    /// In-place: the receive pointer is the receive buffer plus this many elements × rank.
    pub recv_inplace_offset: usize,
}

impl Counts {
    /// The size column: the larger of the bytes sent and received.
    pub fn printed_size(&self, ts: usize) -> u64 {
        (self.send.max(self.recv) * ts) as u64
    }
}

/// `count / n` rounded down to a whole number of 16-byte units of `ts`-byte elements.
pub fn round16_per_rank(count: usize, nranks: usize, ts: usize) -> usize {
    let per = count / nranks.max(1);
    let unit = (16 / ts).max(1);
    per - per % unit
}

/// What the op column shows and whether the op loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpColumn {
    /// A reduction: loops over `-o` ops and prints the op name.
    Reduction,
    /// Not a reduction: prints `none`, runs once.
    NoneLabel,
}

/// Which buffer a fill writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffer {
    /// The send buffer.
    Send,
    /// The receive buffer.
    Recv,
    /// The expected-result buffer.
    Expected,
}

/// One step of preparing buffers for a validated operation (offsets and counts in elements).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Generator inputs of rank `rme` of `rn` (op `None` = copy pattern).
    Input {
        /// Target buffer.
        buf: Buffer,
        /// First element written.
        offset: usize,
        /// Elements written.
        count: usize,
        /// Reduction op, or `None` for the copy pattern.
        op: Option<RedOp>,
        /// Number of contributing ranks.
        rn: u32,
        /// This rank's index among them.
        rme: u32,
        /// Seed.
        seed: u64,
        /// Generator index of the first element.
        ix0: u64,
    },
    /// Expected results into the expected buffer.
    Expected {
        /// First element written.
        offset: usize,
        /// Elements written.
        count: usize,
        /// Reduction op, or `None` for the copy pattern.
        op: Option<RedOp>,
        /// Number of contributing ranks.
        rn: u32,
        /// Seed.
        seed: u64,
        /// Generator index of the first element.
        ix0: u64,
    },
    /// The expected buffer is the receive buffer as prepared ("unchanged" for non-roots).
    ExpectedIsRecv,
}

/// Everything a collective needs to plan its buffers for one validated operation.
#[derive(Debug, Clone, Copy)]
pub struct FillCtx {
    /// NCCL rank.
    pub rank: usize,
    /// Communicator size.
    pub nranks: usize,
    /// Root (rooted collectives).
    pub root: usize,
    /// Reduction op (reductions).
    pub op: RedOp,
    /// Counts for this size.
    pub counts: Counts,
    /// In-place half.
    pub in_place: bool,
    /// Seed of this measurement.
    pub seed: u64,
}

impl FillCtx {
    /// The buffer and element offset of this rank's send data: the send buffer out of place,
    /// the receive buffer at its in-place offset in place.
    pub fn data(&self) -> (Buffer, usize) {
        if self.in_place {
            (Buffer::Recv, self.counts.send_inplace_offset * self.rank)
        } else {
            (Buffer::Send, 0)
        }
    }
}

/// One NCCL call's arguments for one GPU.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// Send pointer.
    pub send: *const c_void,
    /// Receive pointer.
    pub recv: *mut c_void,
    /// Counts for this size.
    pub counts: Counts,
    /// `ncclDataType_t`.
    pub dtype: i32,
    /// `ncclRedOp_t` (built-in or PreMulSum id).
    pub op: i32,
    /// Root.
    pub root: i32,
    /// Communicator.
    pub comm: Comm,
    /// Stream.
    pub stream: *mut c_void,
    /// NCCL rank of this GPU.
    pub rank: usize,
    /// Communicator size.
    pub nranks: usize,
}

/// A collective benchmark (one `*_perf` binary).
pub trait Collective: Sync {
    /// Binary name without `_perf`, e.g. `all_reduce`.
    fn name(&self) -> &'static str;
    /// Per-rank counts for `count` elements of `ts` bytes on `nranks` ranks.
    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts;
    /// (bytes that define algbw, busbw factor).
    fn bandwidth(&self, c: &Counts, ts: usize, nranks: usize) -> (f64, f64);
    /// Whether this is a reduction (op loop and op column).
    fn op_column(&self) -> OpColumn;
    /// Whether the root loop runs (root column shows the root).
    fn rooted(&self) -> bool {
        false
    }
    /// Whether in-place mismatches are reported (sendrecv/alltoall print `N/A`).
    fn reports_in_place_errors(&self) -> bool {
        true
    }
    /// Enqueues one operation on one GPU.
    fn enqueue(&self, nccl: &Nccl, c: &Call) -> Result<()>;
    /// How to prepare the buffers, in order, for one validated operation.
    fn fills(&self, f: &FillCtx) -> Vec<Fill>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round16() {
        assert_eq!(round16_per_rank(250, 3, 4), 80);
        assert_eq!(round16_per_rank(100, 1, 4), 100);
        assert_eq!(round16_per_rank(31, 1, 1), 16);
        assert_eq!(round16_per_rank(7, 2, 8), 2);
        assert_eq!(round16_per_rank(2, 8, 4), 0);
        assert_eq!(round16_per_rank(17, 1, 2), 16);
    }
}
