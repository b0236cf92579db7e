//! The NCCL calls of one operation, as data. A collective *plans* an operation as a sequence of
//! [`Step`]s (positions in elements, relative to the call's send and receive pointers), and the
//! unit tests replay the very same steps on host buffers (`collective::sim`). So the offsets of
//! the grouped send/receive fallbacks, hypercube's rounds and alltoallv's packing are checked
//! without a GPU.
//!
//! The runner does not interpret plans per operation: [`bind`] resolves the steps once per
//! measurement into [`Bound`] calls (absolute pointers, counts, peers, the function to call),
//! and [`issue`] runs them with the rotation shift added, so one operation costs a walk over a
//! short slice and the NCCL calls themselves: no closures, no allocation, no plan logic.

use super::{Call, Collective, Counts};
use crate::error::{Error, Result};
use crate::gpu::driver::{self, CUdeviceptr, CUstream};
use crate::gpu::nccl::{Comm, Nccl};
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

/// The arguments every call of one operation on one GPU shares.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Communicator.
    pub comm: Comm,
    /// Stream.
    pub stream: *mut c_void,
    /// `ncclDataType_t`.
    pub dtype: i32,
    /// `ncclRedOp_t` of the reductions: built-in, or this operation's PreMulSum op.
    pub op: i32,
}

/// Send pointer, receive pointer and count of a native collective call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io {
    /// Send pointer (device address).
    pub send: CUdeviceptr,
    /// Receive pointer (device address).
    pub recv: CUdeviceptr,
    /// The `count` argument.
    pub count: usize,
}

/// One [`Step`] with its arguments resolved for one GPU, once per measurement: per operation
/// only the buffer rotation is added to the pointers. Pointers are device addresses of
/// iteration 0 (rotation shift 0); counts are in elements, copies in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `ncclGroupStart`.
    GroupStart,
    /// `ncclGroupEnd`.
    GroupEnd,
    /// `ncclAllReduce` with the target's op.
    AllReduce(Io),
    /// `ncclAllGather`.
    AllGather(Io),
    /// `ncclReduceScatter` with the target's op.
    ReduceScatter(Io),
    /// `ncclBroadcast` from a root.
    Broadcast(Io, i32),
    /// `ncclReduce` with the target's op to a root.
    Reduce(Io, i32),
    /// `ncclAlltoAll`.
    AlltoAll(Io),
    /// `ncclGather` to a root.
    Gather(Io, i32),
    /// `ncclScatter` from a root.
    Scatter(Io, i32),
    /// `ncclSend`.
    Send {
        /// First byte sent.
        buf: CUdeviceptr,
        /// Elements sent.
        count: usize,
        /// Receiving rank.
        peer: i32,
    },
    /// `ncclRecv`.
    Recv {
        /// First byte written.
        buf: CUdeviceptr,
        /// Elements received.
        count: usize,
        /// Sending rank.
        peer: i32,
    },
    /// A device-to-device copy (only bound when source and destination differ and it is not
    /// empty).
    Copy {
        /// Destination.
        dst: CUdeviceptr,
        /// Source.
        src: CUdeviceptr,
        /// Bytes copied.
        bytes: usize,
    },
}

fn missing(name: &str) -> Error {
    Error::Internal(format!(
        "{name} was planned but the loaded NCCL does not have it"
    ))
}

/// Binds the steps that `coll` plans for `c` (the pointers of iteration 0) and appends them to
/// `out`. Native collectives missing from `native` are an error here, never per operation.
pub fn bind(coll: &dyn Collective, native: Natives, c: &Call, out: &mut Vec<Bound>) -> Result<()> {
    let g = c.geometry(native);
    let at = |base: Base, offset: usize| -> CUdeviceptr {
        let p = match base {
            Base::Send => c.send as CUdeviceptr,
            Base::Recv => c.recv as CUdeviceptr,
        };
        p + (offset * c.ts) as CUdeviceptr
    };
    let io = Io {
        send: c.send as CUdeviceptr,
        recv: c.recv as CUdeviceptr,
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

/// Issues the bound calls of one operation on one GPU with every pointer advanced by `shift`
/// bytes. A group left open by a failing call is closed, so that a skipped combination
/// (`-d all`) does not swallow the calls that follow.
#[inline]
pub fn issue(nccl: &Nccl, t: &Target, calls: &[Bound], shift: u64) -> Result<()> {
    for (i, b) in calls.iter().enumerate() {
        if let Err(e) = b.issue(nccl, t, shift) {
            close_groups(nccl, &calls[..=i]);
            return Err(e);
        }
    }
    Ok(())
}

/// After `done` failed at its last call: ends the groups it left open (a failing
/// `ncclGroupStart` opened none, a failing `ncclGroupEnd` still ended its group).
#[cold]
fn close_groups(nccl: &Nccl, done: &[Bound]) {
    for _ in 0..open_after_failure(done) {
        // SAFETY: closes a group this operation opened; the first error is the one reported.
        unsafe { (nccl.ncclGroupEnd)() };
    }
}

/// How many groups `done` leaves open when its last call failed.
pub(crate) fn open_after_failure(done: &[Bound]) -> usize {
    let last = done.len().saturating_sub(1);
    let mut open = 0usize;
    for (i, b) in done.iter().enumerate() {
        match b {
            Bound::GroupStart if i < last => open += 1,
            Bound::GroupEnd => open = open.saturating_sub(1),
            _ => {}
        }
    }
    open
}

impl Bound {
    /// Issues this call with its pointers advanced by `shift` bytes.
    #[inline]
    fn issue(&self, nccl: &Nccl, t: &Target, shift: u64) -> Result<()> {
        let p = |a: CUdeviceptr| (a + shift) as *mut c_void;
        let (dt, op, comm, st) = (t.dtype, t.op, t.comm, t.stream);
        // SAFETY (every call below): the pointers lie inside this GPU's buffers, sized by the
        // runner for the largest size and its rotation; comm and stream are live.
        let r = unsafe {
            match *self {
                Bound::GroupStart => (nccl.ncclGroupStart)(),
                Bound::GroupEnd => (nccl.ncclGroupEnd)(),
                Bound::AllReduce(io) => {
                    (nccl.ncclAllReduce)(p(io.send), p(io.recv), io.count, dt, op, comm, st)
                }
                Bound::AllGather(io) => {
                    (nccl.ncclAllGather)(p(io.send), p(io.recv), io.count, dt, comm, st)
                }
                Bound::ReduceScatter(io) => {
                    (nccl.ncclReduceScatter)(p(io.send), p(io.recv), io.count, dt, op, comm, st)
                }
                Bound::Broadcast(io, root) => {
                    (nccl.ncclBroadcast)(p(io.send), p(io.recv), io.count, dt, root, comm, st)
                }
                Bound::Reduce(io, root) => {
                    (nccl.ncclReduce)(p(io.send), p(io.recv), io.count, dt, op, root, comm, st)
                }
                Bound::AlltoAll(io) => match nccl.ncclAlltoAll {
                    Some(f) => f(p(io.send), p(io.recv), io.count, dt, comm, st),
                    None => return Err(missing("ncclAlltoAll")),
                },
                Bound::Gather(io, root) => match nccl.ncclGather {
                    Some(f) => f(p(io.send), p(io.recv), io.count, dt, root, comm, st),
                    None => return Err(missing("ncclGather")),
                },
                Bound::Scatter(io, root) => match nccl.ncclScatter {
                    Some(f) => f(p(io.send), p(io.recv), io.count, dt, root, comm, st),
                    None => return Err(missing("ncclScatter")),
                },
                Bound::Send { buf, count, peer } => {
                    (nccl.ncclSend)(p(buf), count, dt, peer, comm, st)
                }
                Bound::Recv { buf, count, peer } => {
                    (nccl.ncclRecv)(p(buf), count, dt, peer, comm, st)
                }
                Bound::Copy { dst, src, bytes } => {
                    return driver::copy_async(dst + shift, src + shift, bytes, st as CUstream);
                }
            }
        };
        nccl.check(r)
    }
}
