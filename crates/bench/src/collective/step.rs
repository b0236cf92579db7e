//! The NCCL calls of one operation, as data. A collective *plans* an operation as a sequence of
//! [`Step`]s (positions in elements, relative to the call's send and receive pointers), and the
//! unit tests replay the very same steps on host buffers (`collective::sim`). So the offsets of
//! the grouped send/receive fallbacks, hypercube's rounds and alltoallv's packing are checked
//! without a GPU.
//!
//! The runner does not interpret plans per operation: [`bind`] resolves the steps once per
//! measurement into [`Bound`] calls (absolute device addresses, counts, peers), which the GPU
//! layer (`gpu::op`) checks once and issues with the rotation shift added, so one operation
//! costs a walk over a short slice and the NCCL calls themselves: no closures, no allocation,
//! no plan logic.

use super::{Call, Collective, Counts};
use crate::error::Result;
use crate::gpu::driver::CUdeviceptr;
use crate::gpu::nccl::Nccl;
use crate::gpu::op::missing;

pub use crate::gpu::op::{Bound, Io};

/// Which of the call's buffers a step reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// The call's send pointer (the receive buffer plus the in-place offset, in place).
    Send,
    /// The call's receive pointer.
    Recv,
}

/// One NCCL call (or local copy) of an operation.
///
/// The native collectives take their arguments from the [`Call`]: `counts.param` elements, the
/// call's op and root. Positions of the other steps are in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `ncclGroupStart`.
    GroupStart,
    /// `ncclGroupEnd`.
    GroupEnd,
    /// `ncclAllReduce`.
    AllReduce,
    /// `ncclAllGather`.
    AllGather,
    /// `ncclReduceScatter`.
    ReduceScatter,
    /// `ncclBroadcast`.
    Broadcast,
    /// `ncclReduce`.
    Reduce,
    /// `ncclAlltoAll` (only planned when the loaded NCCL has it).
    AlltoAll,
    /// `ncclGather` (only planned when the loaded NCCL has it).
    Gather,
    /// `ncclScatter` (only planned when the loaded NCCL has it).
    Scatter,
    /// `ncclSend` of `count` elements starting `offset` elements into `from`.
    Send {
        /// Buffer read.
        from: Base,
        /// First element sent.
        offset: usize,
        /// Elements sent.
        count: usize,
        /// Receiving rank.
        peer: usize,
    },
    /// `ncclRecv` of `count` elements into the receive pointer plus `offset` elements.
    Recv {
        /// First element written.
        offset: usize,
        /// Elements received.
        count: usize,
        /// Sending rank.
        peer: usize,
    },
    /// A device-to-device copy of `count` elements from `from` + `offset` to the receive pointer
    /// plus `to`; nothing happens when source and destination are the same address.
    CopyToRecv {
        /// Buffer read.
        from: Base,
        /// First element read.
        offset: usize,
        /// First element written, relative to the receive pointer.
        to: usize,
        /// Elements copied.
        count: usize,
    },
}

/// Which optional native collectives the loaded NCCL has (2.28 and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Natives {
    /// `ncclAlltoAll`.
    pub alltoall: bool,
    /// `ncclGather`.
    pub gather: bool,
    /// `ncclScatter`.
    pub scatter: bool,
}

impl Natives {
    /// None of them: every collective uses its grouped send/receive form.
    pub const NONE: Natives = Natives {
        alltoall: false,
        gather: false,
        scatter: false,
    };
    /// All of them.
    pub const ALL: Natives = Natives {
        alltoall: true,
        gather: true,
        scatter: true,
    };

    /// What `nccl` provides.
    #[inline]
    pub fn of(nccl: &Nccl) -> Natives {
        Natives {
            alltoall: nccl.ncclAlltoAll.is_some(),
            gather: nccl.ncclGather.is_some(),
            scatter: nccl.ncclScatter.is_some(),
        }
    }
}

/// What a collective needs to plan one operation on one GPU (no pointers).
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    /// NCCL rank.
    pub rank: usize,
    /// Communicator size.
    pub nranks: usize,
    /// Root (rooted collectives).
    pub root: usize,
    /// Element size in bytes.
    pub ts: usize,
    /// Counts for this size.
    pub counts: Counts,
    /// Native collectives available.
    pub native: Natives,
}

/// The steps of a group of point-to-point calls: `GroupStart`, the steps of `body`, `GroupEnd`.
pub fn grouped(
    emit: &mut dyn FnMut(Step) -> Result<()>,
    body: impl FnOnce(&mut dyn FnMut(Step) -> Result<()>) -> Result<()>,
) -> Result<()> {
    emit(Step::GroupStart)?;
    body(emit)?;
    emit(Step::GroupEnd)
}

/// Binds the steps that `coll` plans for `c` (the pointers of iteration 0) and appends them to
/// `out`. Native collectives missing from `native` are an error here, never per operation.
pub fn bind(coll: &dyn Collective, native: Natives, c: &Call, out: &mut Vec<Bound>) -> Result<()> {
    let g = c.geometry(native);
    let at = |base: Base, offset: usize| -> CUdeviceptr {
        let p = match base {
            Base::Send => c.send,
            Base::Recv => c.recv,
        };
        p + (offset * c.ts) as CUdeviceptr
    };
    let io = Io {
        send: c.send,
        recv: c.recv,
        count: c.counts.param,
    };
    let root = c.root;
    coll.plan(&g, &mut |step| {
        let b = match step {
            Step::GroupStart => Bound::GroupStart,
            Step::GroupEnd => Bound::GroupEnd,
            Step::AllReduce => Bound::AllReduce(io),
            Step::AllGather => Bound::AllGather(io),
            Step::ReduceScatter => Bound::ReduceScatter(io),
            Step::Broadcast => Bound::Broadcast(io, root),
            Step::Reduce => Bound::Reduce(io, root),
            Step::AlltoAll if native.alltoall => Bound::AlltoAll(io),
            Step::Gather if native.gather => Bound::Gather(io, root),
            Step::Scatter if native.scatter => Bound::Scatter(io, root),
            Step::AlltoAll => return Err(missing("ncclAlltoAll")),
            Step::Gather => return Err(missing("ncclGather")),
            Step::Scatter => return Err(missing("ncclScatter")),
            Step::Send {
                from,
                offset,
                count,
                peer,
            } => Bound::Send {
                buf: at(from, offset),
                count,
                peer: peer as i32,
            },
            Step::Recv {
                offset,
                count,
                peer,
            } => Bound::Recv {
                buf: at(Base::Recv, offset),
                count,
                peer: peer as i32,
            },
            Step::CopyToRecv {
                from,
                offset,
                to,
                count,
            } => {
                let (src, dst) = (at(from, offset), at(Base::Recv, to));
                // The rotation shifts both ends alike: a copy onto itself stays one.
                if src == dst || count == 0 {
                    return Ok(());
                }
                Bound::Copy {
                    dst,
                    src,
                    bytes: count * c.ts,
                }
            }
        };
        out.push(b);
        Ok(())
    })
}
