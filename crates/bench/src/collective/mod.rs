//! The collectives: one file each, saying how a size becomes per-rank counts, how bandwidth is
//! computed, which NCCL call(s) one operation is, and what the buffers must hold for validation.
//!
//! The NCCL calls are *planned* as [`Step`]s (native collective, grouped send/receive, local
//! copy), bound once per measurement by [`step::bind`] and issued by the GPU layer
//! ([`crate::gpu::op`]); the tests replay the same steps on host buffers prepared from the
//! [`Fill`]s (the test oracle's `replay`, in `tests/collective_replay.rs`), which checks counts,
//! offsets, pairings and expected data together without a GPU.

mod all_gather;
mod all_reduce;
mod alltoall;
mod alltoallv;
mod broadcast;
mod gather;
mod hypercube;
mod reduce;
mod reduce_scatter;
mod scatter;
mod sendrecv;
pub mod step;
#[cfg(test)]
mod tests;

pub use all_gather::AllGather;
pub use all_reduce::AllReduce;
pub use alltoall::AllToAll;
pub use alltoallv::AllToAllV;
pub use broadcast::Broadcast;
pub use gather::Gather;
pub use hypercube::Hypercube;
pub use nccl_perf_facts::{Benchmark, OpColumn};
pub use reduce::Reduce;
pub use reduce_scatter::ReduceScatter;
pub use scatter::Scatter;
pub use sendrecv::SendRecv;
pub use step::{Base, Bound, Geometry, Io, Natives, Step};

use crate::error::Result;
use crate::gpu::driver::CUdeviceptr;
use crate::types::RedOp;

/// Every benchmark's collective, in the benchmark table's order (`nccl_perf_facts::BENCHMARKS`;
/// alltoallv with its default, generated traffic); the root's `tests/benchmarks.rs` checks the
/// two lists name the same benchmarks. Each is the binary `<name>_perf` (the root package's
/// `src/bin/`).
pub fn all() -> Vec<Box<dyn Collective>> {
    vec![
        Box::new(AllReduce),
        Box::new(AllGather),
        Box::new(Broadcast),
        Box::new(Reduce),
        Box::new(ReduceScatter),
        Box::new(AllToAll),
        Box::new(AllToAllV::generated(1.0)),
        Box::new(Scatter),
        Box::new(Gather),
        Box::new(SendRecv),
        Box::new(Hypercube),
    ]
}

/// The collectives of `names` (benchmark table names, `--collectives`), in order; alltoallv
/// configured from the environment as its program configures it.
pub fn by_names(
    names: &[&str],
    opts: &crate::options::Options,
) -> Result<Vec<Box<dyn Collective>>> {
    names
        .iter()
        .map(|&n| match n {
            "alltoallv" => Ok(Box::new(AllToAllV::from_env(opts)?) as Box<dyn Collective>),
            n => all()
                .into_iter()
                .find(|c| c.name() == n)
                .ok_or_else(|| crate::error::Error::Internal(format!("no collective {n}"))),
        })
        .collect()
}

/// Per-rank element counts derived from one sweep size (`size / type size` elements) as
/// nccl-tests derives them; the sharded collectives round `count / nranks` down to a multiple of
/// 16 bytes.
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
    /// Every rank sends and receives all `count` elements (all_reduce, broadcast, reduce,
    /// sendrecv); in place, send and receive share one address.
    pub fn whole(count: usize) -> Counts {
        Counts {
            send: count,
            recv: count,
            param: count,
            send_inplace_offset: 0,
            recv_inplace_offset: 0,
        }
    }

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

/// Seed of rank `r`'s block in the gathering collectives (`33·seed + r`), so that blocks of
/// different ranks differ.
pub(crate) fn block_seed(seed: u64, r: usize) -> u64 {
    33u64.wrapping_mul(seed).wrapping_add(r as u64)
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

impl Fill {
    /// The copy pattern (op `None`, one rank) of `count` elements from generator index `ix0`,
    /// written at `at` (a buffer and an element offset).
    pub fn copy_input(at: (Buffer, usize), count: usize, seed: u64, ix0: u64) -> Fill {
        Fill::Input {
            buf: at.0,
            offset: at.1,
            count,
            op: None,
            rn: 1,
            rme: 0,
            seed,
            ix0,
        }
    }

    /// The copy pattern expected at element `offset` of the expected buffer.
    pub fn copy_expected(offset: usize, count: usize, seed: u64, ix0: u64) -> Fill {
        Fill::Expected {
            offset,
            count,
            op: None,
            rn: 1,
            seed,
            ix0,
        }
    }
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
    /// Element size in bytes.
    pub ts: usize,
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

    /// This rank's reduction input: its `counts.send` elements of the op's pattern over every
    /// rank, written where its send data is ([`FillCtx::data`]).
    pub fn reduction_input(&self) -> Fill {
        let (buf, offset) = self.data();
        Fill::Input {
            buf,
            offset,
            count: self.counts.send,
            op: Some(self.op),
            rn: self.nranks as u32,
            rme: self.rank as u32,
            seed: self.seed,
            ix0: 0,
        }
    }

    /// The reduction over every rank of the pattern from generator index `ix0`, expected at
    /// the start of the expected buffer: `counts.recv` elements.
    pub fn reduction_expected(&self, ix0: u64) -> Fill {
        Fill::Expected {
            offset: 0,
            count: self.counts.recv,
            op: Some(self.op),
            rn: self.nranks as u32,
            seed: self.seed,
            ix0,
        }
    }

    /// What a rooted collective expects on this rank: `at_root` on the root, an unchanged
    /// receive buffer on the others.
    pub fn root_expects(&self, at_root: Fill) -> Fill {
        if self.rank == self.root {
            at_root
        } else {
            Fill::ExpectedIsRecv
        }
    }
}

/// What one GPU's operation is bound from: its pointers and shape (datatype, op, communicator
/// and stream are the GPU layer's, see `gpu::op`).
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// Send pointer (device address).
    pub send: CUdeviceptr,
    /// Receive pointer (device address).
    pub recv: CUdeviceptr,
    /// Counts for this size.
    pub counts: Counts,
    /// Root.
    pub root: i32,
    /// NCCL rank of this GPU.
    pub rank: usize,
    /// Communicator size.
    pub nranks: usize,
    /// Element size in bytes.
    pub ts: usize,
}

impl Call {
    /// The pointer-free part of the call, for planning.
    #[inline]
    pub fn geometry(&self, native: Natives) -> Geometry {
        Geometry {
            rank: self.rank,
            nranks: self.nranks,
            root: self.root.max(0) as usize,
            ts: self.ts,
            counts: self.counts,
            native,
        }
    }
}

/// A collective benchmark (one `*_perf` binary): its entry of the benchmark table
/// (`nccl-perf-facts`: name, operation, busbw factor, columns) and how it runs.
pub trait Collective: Sync {
    /// Its entry of the benchmark table.
    fn facts(&self) -> &'static Benchmark;
    /// Binary name without `_perf`, e.g. `all_reduce`.
    fn name(&self) -> &'static str {
        self.facts().name
    }
    /// The NCCL operation it times, as documentation names it, e.g. `AllReduce`.
    fn operation(&self) -> &'static str {
        self.facts().operation
    }
    /// Per-rank counts for `count` elements of `ts` bytes on `nranks` ranks.
    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts;
    /// The bytes that define algbw: by default the size column's, the larger of the bytes sent
    /// and received.
    fn algbw_bytes(&self, c: &Counts, ts: usize, _nranks: usize) -> f64 {
        c.printed_size(ts) as f64
    }
    /// (bytes that define algbw, busbw factor from the table).
    fn bandwidth(&self, c: &Counts, ts: usize, nranks: usize) -> (f64, f64) {
        (
            self.algbw_bytes(c, ts, nranks),
            self.facts().bus_factor(nranks),
        )
    }
    /// The op column, the op loop, and whether the data is reduced.
    fn op_column(&self) -> OpColumn {
        self.facts().ops
    }
    /// Whether the root loop runs (root column shows the root).
    fn rooted(&self) -> bool {
        self.facts().rooted
    }
    /// Whether in-place mismatches are reported (sendrecv/alltoall print `N/A`).
    fn reports_in_place_errors(&self) -> bool {
        self.facts().in_place_errors
    }
    /// Checks, before any communicator exists, that this benchmark can run on `nranks` ranks
    /// with the (clamped) size range `min_bytes..=max_bytes`.
    fn check_shape(&self, _nranks: usize, _min_bytes: u64, _max_bytes: u64) -> Result<()> {
        Ok(())
    }
    /// The NCCL calls of one operation on one GPU, in order.
    fn plan(&self, g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()>;
    /// How to prepare the buffers for one validated operation. The runner first zeroes
    /// `counts.recv` elements at the receive pointer, then applies the fills in order.
    fn fills(&self, f: &FillCtx) -> Vec<Fill>;
}

/// The steps `coll` plans for `g`, collected (the runner binds them as they are planned; the
/// tests and the test oracle's replay look at them whole).
pub fn plan_steps(coll: &dyn Collective, g: &Geometry) -> Result<Vec<Step>> {
    let mut steps = Vec::new();
    coll.plan(g, &mut |s| {
        steps.push(s);
        Ok(())
    })?;
    Ok(steps)
}

/// [`plan_steps`] of a plan that must succeed (unit tests).
#[cfg(test)]
pub(crate) fn planned(coll: &dyn Collective, g: &Geometry) -> Vec<Step> {
    plan_steps(coll, g).expect("planning succeeds")
}
