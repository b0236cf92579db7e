//! The NCCL calls of one operation, as data. A collective *plans* an operation as a sequence of
//! [`Step`]s (positions in elements, relative to the call's send and receive pointers); one
//! executor, [`enqueue_plan`], turns the steps into NCCL calls, and the unit tests replay the very
//! same steps on host buffers (`collective::sim`). So the offsets of the grouped send/receive
//! fallbacks, hypercube's rounds and alltoallv's packing are checked without a GPU.

use super::{Call, Counts};
use crate::error::{Error, Result};
use crate::gpu::driver::{self, CUdeviceptr, CUstream};
use crate::gpu::nccl::Nccl;
use std::ffi::c_void;

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

/// Issues the steps that `plan` produces for `c`. A group left open by a failing step is
/// closed, so that a skipped combination (`-d all`) does not swallow the calls that follow.
#[inline]
pub fn enqueue_plan(
    nccl: &Nccl,
    c: &Call,
    plan: impl FnOnce(&Geometry, &mut dyn FnMut(Step) -> Result<()>) -> Result<()>,
) -> Result<()> {
    let g = c.geometry(Natives::of(nccl));
    let mut open = 0usize;
    let r = plan(&g, &mut |s| {
        let r = execute(nccl, c, s);
        // A failing ncclGroupEnd still ends the group.
        match s {
            Step::GroupStart if r.is_ok() => open += 1,
            Step::GroupEnd => open = open.saturating_sub(1),
            _ => {}
        }
        r
    });
    for _ in 0..open {
        // SAFETY: closes a group this plan opened; the first error is the one reported.
        unsafe { (nccl.ncclGroupEnd)() };
    }
    r
}

/// Issues one step for `c`.
#[inline]
fn execute(nccl: &Nccl, c: &Call, step: Step) -> Result<()> {
    let at = |base: Base, offset: usize| -> *mut c_void {
        let p = match base {
            Base::Send => c.send as usize,
            Base::Recv => c.recv as usize,
        };
        (p + offset * c.ts) as *mut c_void
    };
    let n = c.counts.param;
    let root = c.root;
    let missing = |name: &str| {
        Error::Internal(format!(
            "{name} was planned but the loaded NCCL does not have it"
        ))
    };
    // SAFETY (every call below): the pointers lie inside this GPU's buffers, sized by the runner
    // for `c.counts`; comm and stream are live.
    let r = unsafe {
        match step {
            Step::GroupStart => (nccl.ncclGroupStart)(),
            Step::GroupEnd => (nccl.ncclGroupEnd)(),
            Step::AllReduce => {
                (nccl.ncclAllReduce)(c.send, c.recv, n, c.dtype, c.op, c.comm, c.stream)
            }
            Step::AllGather => (nccl.ncclAllGather)(c.send, c.recv, n, c.dtype, c.comm, c.stream),
            Step::ReduceScatter => {
                (nccl.ncclReduceScatter)(c.send, c.recv, n, c.dtype, c.op, c.comm, c.stream)
            }
            Step::Broadcast => {
                (nccl.ncclBroadcast)(c.send, c.recv, n, c.dtype, root, c.comm, c.stream)
            }
            Step::Reduce => {
                (nccl.ncclReduce)(c.send, c.recv, n, c.dtype, c.op, root, c.comm, c.stream)
            }
            Step::AlltoAll => {
                let f = nccl.ncclAlltoAll.ok_or_else(|| missing("ncclAlltoAll"))?;
                f(c.send, c.recv, n, c.dtype, c.comm, c.stream)
            }
            Step::Gather => {
                let f = nccl.ncclGather.ok_or_else(|| missing("ncclGather"))?;
                f(c.send, c.recv, n, c.dtype, root, c.comm, c.stream)
            }
            Step::Scatter => {
                let f = nccl.ncclScatter.ok_or_else(|| missing("ncclScatter"))?;
                f(c.send, c.recv, n, c.dtype, root, c.comm, c.stream)
            }
            Step::Send {
                from,
                offset,
                count,
                peer,
            } => (nccl.ncclSend)(
                at(from, offset),
                count,
                c.dtype,
                peer as i32,
                c.comm,
                c.stream,
            ),
            Step::Recv {
                offset,
                count,
                peer,
            } => (nccl.ncclRecv)(
                at(Base::Recv, offset),
                count,
                c.dtype,
                peer as i32,
                c.comm,
                c.stream,
            ),
            Step::CopyToRecv {
                from,
                offset,
                to,
                count,
            } => {
                let (src, dst) = (at(from, offset), at(Base::Recv, to));
                if src != dst {
                    driver::copy_async(
                        dst as CUdeviceptr,
                        src as CUdeviceptr,
                        count * c.ts,
                        c.stream as CUstream,
                    )?;
                }
                0
            }
        }
    };
    nccl.check(r)
}
