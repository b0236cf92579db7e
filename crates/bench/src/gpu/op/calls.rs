//! The NCCL calls of a bound operation: one call with its addresses shifted, the calls of one
//! GPU in order, the groups a failing call leaves open, and the wait for a nonblocking
//! communicator. Kept apart from the binding and its range checks ([`super`]).

use super::super::driver::{self, CUdeviceptr};
use super::super::nccl::{Comm, IN_PROGRESS, Nccl};
use super::Bound;
use super::Target;
use crate::error::{Error, Result};
use std::ffi::{c_int, c_void};

/// Polls the nonblocking communicator `comm` until its last call is done: `Ok(true)`, or
/// `Ok(false)` when `keep_waiting` says to stop.
pub(super) fn wait_ready(
    nccl: &Nccl,
    comm: Comm,
    keep_waiting: &mut dyn FnMut() -> Result<bool>,
) -> Result<bool> {
    loop {
        let mut state = 0;
        // SAFETY: a live communicator (borrowed by the operation) and a valid out pointer.
        nccl.check(unsafe { (nccl.ncclCommGetAsyncError)(comm, &mut state) })?;
        match state {
            0 => return Ok(true),
            IN_PROGRESS => {
                if !keep_waiting()? {
                    return Ok(false);
                }
            }
            r => return nccl.check(r).map(|_| true),
        }
    }
}

/// Issues the bound calls of one operation on one GPU with every address advanced by `shift`
/// bytes. A group left open by a failing call is closed, so that a skipped combination
/// (`-d all`) does not swallow the calls that follow.
#[inline]
pub(super) fn issue_calls(nccl: &Nccl, t: &Target, calls: &[Bound], shift: u64) -> Result<()> {
    for (i, b) in calls.iter().enumerate() {
        // SAFETY: the calls were checked against this GPU's buffers for every shift of the
        // rotation, and the GPU (communicator, stream, buffers) is borrowed by the `BoundOp`.
        if let Err(e) = unsafe { issue_one(b, nccl, t, shift) } {
            close_groups(nccl, &calls[..=i]);
            return Err(e);
        }
    }
    Ok(())
}

/// After `done` failed at its last call: ends the groups it left open (a failing
/// `ncclGroupStart` opened none, a failing `ncclGroupEnd` still ended its group).
#[cold]
pub(super) fn close_groups(nccl: &Nccl, done: &[Bound]) {
    for _ in 0..open_after_failure(done) {
        // SAFETY: closes a group this operation opened; the first error is the one reported.
        unsafe { (nccl.ncclGroupEnd)() };
    }
}

/// How many groups `done` leaves open when its last call failed.
pub fn open_after_failure(done: &[Bound]) -> usize {
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

/// Issues one call with its addresses advanced by `shift` bytes.
///
/// # Safety
/// As [`call`].
#[inline]
unsafe fn issue_one(b: &Bound, nccl: &Nccl, t: &Target, shift: u64) -> Result<()> {
    // SAFETY: the caller's contract.
    let r = unsafe { call(b, nccl, t, shift) }?;
    nccl.check(r)
}

/// Makes one call with its addresses advanced by `shift` bytes; NCCL's result (0 for a copy,
/// whose failure is an error here).
///
/// # Safety
/// Every range the call reaches, moved by `shift`, must lie inside live device memory of the
/// target's GPU; the target's communicator and stream must be live.
#[inline]
pub(super) unsafe fn call(b: &Bound, nccl: &Nccl, t: &Target, shift: u64) -> Result<c_int> {
    let p = |a: CUdeviceptr| (a + shift) as *mut c_void;
    let (dt, op, comm, st) = (t.dtype, t.op, t.comm, t.stream as *mut c_void);
    // SAFETY: the caller's contract, for every call below.
    let r = unsafe {
        match *b {
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
            Bound::Send { buf, count, peer } => (nccl.ncclSend)(p(buf), count, dt, peer, comm, st),
            Bound::Recv { buf, count, peer } => (nccl.ncclRecv)(p(buf), count, dt, peer, comm, st),
            Bound::Copy { dst, src, bytes } => {
                return driver::copy_async(dst + shift, src + shift, bytes, t.stream).map(|_| 0);
            }
        }
    };
    Ok(r)
}

/// The error of a native collective planned although the loaded NCCL lacks it.
pub fn missing(name: &str) -> Error {
    Error::Internal(format!(
        "{name} was planned but the loaded NCCL does not have it"
    ))
}
