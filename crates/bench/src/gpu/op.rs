//! One operation bound for the GPUs of a thread and issued many times: the hot path of the
//! timed loop, and the only place that calls NCCL's collectives.
//!
//! A collective plans an operation as data (`collective::step`), resolved once per measurement
//! into [`Bound`] calls (absolute device addresses of iteration 0, counts, peers). A
//! [`BoundOp`] takes them for each GPU, checks once that every byte each call can reach — at
//! every shift its buffer rotation can add — lies inside that GPU's send or receive buffer, and
//! borrows the GPUs, so none of their buffers, streams or communicators can go away (or be
//! aborted) while it exists. Per operation, [`Rotation::issue_next`] adds the rotation shift and
//! makes exactly the NCCL calls of the plan: no plan interpretation, no closures, no dynamic
//! dispatch into the collective, no allocation, no clock read, no atomics, no checks beyond
//! NCCL's own results.

use super::comm::Communicator;
use super::device::Context;
use super::driver::{CUdeviceptr, CUstream};
use super::nccl::{Comm, IN_PROGRESS, Nccl};
use super::rank::Gpu;
use crate::error::{Error, Result};
use crate::types::DataType;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;

/// `ncclScalarHostImmediate`.
const SCALAR_HOST_IMMEDIATE: c_int = 1;

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

/// One planned step with its arguments resolved for one GPU, once per measurement: per
/// operation only the buffer rotation is added to the addresses. Addresses are those of
/// iteration 0 (rotation shift 0); counts are in elements, copies in bytes. Only data: a
/// [`BoundOp`] checks it before anything is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `ncclGroupStart`.
    GroupStart,
    /// `ncclGroupEnd`.
    GroupEnd,
    /// `ncclAllReduce` with the operation's op.
    AllReduce(Io),
    /// `ncclAllGather`.
    AllGather(Io),
    /// `ncclReduceScatter` with the operation's op.
    ReduceScatter(Io),
    /// `ncclBroadcast` from a root.
    Broadcast(Io, i32),
    /// `ncclReduce` with the operation's op to a root.
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

impl Bound {
    /// The device ranges (address, bytes) this call reads or writes on rank `rank` of
    /// `nranks`, with `ts`-byte elements, as NCCL defines each call: the root-only buffers of
    /// the rooted collectives only on the root, peers only through `ncclSend`/`ncclRecv`.
    pub fn ranges(&self, ts: u64, rank: usize, nranks: usize) -> [(CUdeviceptr, u64); 2] {
        let n = nranks as u64;
        let at_root = |root: i32| root >= 0 && root as usize == rank;
        let none = (0, 0);
        let io = |io: &Io, send: u64, recv: u64| {
            let c = io.count as u64;
            [
                (io.send, c.saturating_mul(send).saturating_mul(ts)),
                (io.recv, c.saturating_mul(recv).saturating_mul(ts)),
            ]
        };
        let only = |keep: [bool; 2], r: [(CUdeviceptr, u64); 2]| {
            [
                if keep[0] { r[0] } else { none },
                if keep[1] { r[1] } else { none },
            ]
        };
        match self {
            Bound::GroupStart | Bound::GroupEnd => [none, none],
            Bound::AllReduce(x) => io(x, 1, 1),
            Bound::AllGather(x) => io(x, 1, n),
            Bound::ReduceScatter(x) => io(x, n, 1),
            Bound::AlltoAll(x) => io(x, n, n),
            Bound::Broadcast(x, root) => only([at_root(*root), true], io(x, 1, 1)),
            Bound::Reduce(x, root) => only([true, at_root(*root)], io(x, 1, 1)),
            Bound::Gather(x, root) => only([true, at_root(*root)], io(x, 1, n)),
            Bound::Scatter(x, root) => only([at_root(*root), true], io(x, n, 1)),
            Bound::Send { buf, count, .. } | Bound::Recv { buf, count, .. } => {
                [(*buf, (*count as u64).saturating_mul(ts)), none]
            }
            Bound::Copy { dst, src, bytes } => [(*src, *bytes as u64), (*dst, *bytes as u64)],
        }
    }
}

/// Checks that every range `calls` reach on rank `rank` of `nranks` (elements of `ts` bytes),
/// moved by any shift up to `max_shift` bytes, lies inside one of `buffers` (address, bytes).
/// Empty ranges reach nothing and pass.
pub fn check_ranges(
    calls: &[Bound],
    ts: usize,
    rank: usize,
    nranks: usize,
    max_shift: u64,
    buffers: &[(CUdeviceptr, u64)],
) -> Result<()> {
    for b in calls {
        for (addr, len) in b.ranges(ts as u64, rank, nranks) {
            if len == 0 {
                continue;
            }
            let end = addr.checked_add(len).and_then(|e| e.checked_add(max_shift));
            let inside = end.is_some_and(|end| {
                buffers
                    .iter()
                    .any(|&(start, size)| start != 0 && addr >= start && end <= start + size)
            });
            if !inside {
                return Err(Error::Internal(format!(
                    "{b:?} on rank {rank} of {nranks} would reach {len} bytes at {addr:#x} \
                     (+ up to {max_shift} of rotation), outside its buffers {buffers:x?}"
                )));
            }
        }
    }
    Ok(())
}

/// The arguments every call of one operation on one GPU shares.
#[derive(Debug, Clone, Copy)]
struct Target {
    comm: Comm,
    stream: CUstream,
    dtype: c_int,
    op: c_int,
}

/// The calls of one GPU inside a [`BoundOp`].
#[derive(Debug)]
struct GpuCalls {
    ctx: Context,
    target: Target,
    /// The PreMulSum scalar (bits of the datatype) with `mulsum`.
    scalar: u64,
    /// Its calls: `BoundOp::calls[start..end]`.
    start: usize,
    end: usize,
}

/// One operation (a shape and a half) bound for every GPU of a thread; borrows the GPUs.
#[derive(Debug)]
pub struct BoundOp<'g> {
    nccl: &'g Nccl,
    /// Every GPU's calls, in GPU order.
    calls: Vec<Bound>,
    gpus: Vec<GpuCalls>,
    /// Several GPUs: one group around them, each made current in turn.
    multi: bool,
    /// `-o mulsum`: a PreMulSum op is created around each GPU's calls.
    premulsum: bool,
    dt: DataType,
    /// Buffer rotation: iteration `it` shifts every address by `span × (it mod steps)` bytes.
    span: u64,
    steps: u64,
    _gpus: PhantomData<&'g Gpu>,
}

/// Builds a [`BoundOp`] one GPU at a time ([`BoundOp::builder`]).
#[derive(Debug)]
pub struct OpBuilder<'g> {
    op: BoundOp<'g>,
    /// The built-in reduction op (0 = sum for the collectives that do not reduce).
    red_op: c_int,
}

impl<'g> BoundOp<'g> {
    /// Starts an operation on datatype `dt` with the built-in reduction `red_op`, or with
    /// `None` a PreMulSum op per GPU (`-o mulsum`; needs NCCL 2.11); its buffer rotation is
    /// `span` bytes times `steps` positions.
    pub fn builder(
        nccl: &'g Nccl,
        dt: DataType,
        red_op: Option<i32>,
        span: u64,
        steps: u64,
    ) -> Result<OpBuilder<'g>> {
        if red_op.is_none()
            && (nccl.ncclRedOpCreatePreMulSum.is_none() || nccl.ncclRedOpDestroy.is_none())
        {
            return Err(Error::Unsupported(
                "-o mulsum needs NCCL 2.11 or later (ncclRedOpCreatePreMulSum)".into(),
            ));
        }
        Ok(OpBuilder {
            op: BoundOp {
                nccl,
                calls: Vec::new(),
                gpus: Vec::new(),
                multi: false,
                premulsum: red_op.is_none(),
                dt,
                span,
                steps: steps.max(1),
                _gpus: PhantomData,
            },
            red_op: red_op.unwrap_or(0),
        })
    }

    /// The shifts of iterations 0, 1, 2, … and the calls to issue with them.
    #[inline]
    pub fn rotation(&self) -> Rotation<'_, 'g> {
        Rotation {
            op: self,
            shifts: Shifts::new(self.span, self.steps),
        }
    }

    /// Issues the operation once, at rotation shift 0 (the sync and validation operations).
    #[inline]
    pub fn issue_first(&self) -> Result<()> {
        self.issue(0)
    }

    /// Enqueues the operation on every GPU, addresses advanced by `shift` bytes (a shift of
    /// this operation's rotation): the GPUs' calls (in one group, each GPU made current, when
    /// there are several; each inside its PreMulSum op with `mulsum`).
    #[inline]
    fn issue(&self, shift: u64) -> Result<()> {
        let nccl = self.nccl;
        if let ([g], false) = (&self.gpus[..], self.premulsum) {
            return issue_calls(nccl, &g.target, &self.calls, shift);
        }
        let all = || {
            for g in &self.gpus {
                if self.multi {
                    g.ctx.make_current()?;
                }
                let calls = &self.calls[g.start..g.end];
                if self.premulsum {
                    self.issue_premulsum(g, calls, shift)?;
                } else {
                    issue_calls(nccl, &g.target, calls, shift)?;
                }
            }
            Ok(())
        };
        if self.multi { nccl.group(all) } else { all() }
    }

    /// `mulsum`: a PreMulSum op (the GPU's scalar, read at once) created around the calls.
    fn issue_premulsum(&self, g: &GpuCalls, calls: &[Bound], shift: u64) -> Result<()> {
        let nccl = self.nccl;
        let (Some(create), Some(destroy)) = (nccl.ncclRedOpCreatePreMulSum, nccl.ncclRedOpDestroy)
        else {
            return Err(Error::Unsupported(
                "-o mulsum needs NCCL 2.11 or later (ncclRedOpCreatePreMulSum)".into(),
            ));
        };
        let mut scalar = g.scalar;
        let mut op = 0;
        // SAFETY: a live communicator (borrowed); the scalar is read immediately (host-immediate
        // residence) and has the datatype's size or more.
        nccl.check(unsafe {
            create(
                &mut op,
                &mut scalar as *mut u64 as *mut c_void,
                self.dt.nccl_id(),
                SCALAR_HOST_IMMEDIATE,
                g.target.comm,
            )
        })?;
        let target = Target { op, ..g.target };
        let r = issue_calls(nccl, &target, calls, shift);
        // SAFETY: the op was created above on this communicator.
        let d = nccl.check(unsafe { destroy(op, g.target.comm) });
        r.and(d)
    }
}

impl<'g> OpBuilder<'g> {
    /// Adds `gpu`'s calls, appended to the list by `bind` (its `mulsum` scalar: `scalar`), and
    /// checks them against the GPU's buffers for every shift of the rotation.
    pub fn add(
        &mut self,
        gpu: &'g Gpu,
        scalar: u64,
        bind: impl FnOnce(&mut Vec<Bound>) -> Result<()>,
    ) -> Result<()> {
        self.add_with(gpu, gpu.comm(), gpu.rank(), scalar, bind)
    }

    /// [`OpBuilder::add`] on another communicator than the GPU's own (`--locate`'s groups):
    /// `gpu`'s buffers and stream, as rank `rank` of `comm`.
    pub fn add_with(
        &mut self,
        gpu: &'g Gpu,
        comm: &'g Communicator,
        rank: usize,
        scalar: u64,
        bind: impl FnOnce(&mut Vec<Bound>) -> Result<()>,
    ) -> Result<()> {
        let op = &mut self.op;
        if !std::ptr::eq(comm.nccl(), op.nccl) {
            return Err(Error::Internal(
                "an operation was bound with another libnccl than its communicator's".into(),
            ));
        }
        let start = op.calls.len();
        bind(&mut op.calls)?;
        let max_shift = op.span.saturating_mul(op.steps - 1);
        let buffers = [gpu.send(), gpu.recv()].map(|b| (b.addr(), b.len() as u64));
        check_ranges(
            &op.calls[start..],
            op.dt.size(),
            rank,
            comm.nranks(),
            max_shift,
            &buffers,
        )?;
        if !comm.is_live() {
            return Err(Error::Internal(
                "an operation was bound to an aborted communicator".into(),
            ));
        }
        op.gpus.push(GpuCalls {
            ctx: gpu.ctx(),
            target: Target {
                comm: comm.as_raw(),
                stream: gpu.stream().as_raw(),
                dtype: op.dt.nccl_id(),
                op: self.red_op,
            },
            scalar,
            start,
            end: op.calls.len(),
        });
        Ok(())
    }

    /// The operation.
    pub fn finish(mut self) -> BoundOp<'g> {
        self.op.multi = self.op.gpus.len() > 1;
        self.op
    }
}

/// The rotation shifts `span × (it mod steps)` of consecutive iterations `it` = 0, 1, 2, …,
/// by addition.
#[derive(Debug, Clone)]
pub struct Shifts {
    span: u64,
    steps: u64,
    k: u64,
    shift: u64,
}

impl Shifts {
    /// Starts at iteration 0; `steps` ≥ 1.
    pub fn new(span: u64, steps: u64) -> Shifts {
        Shifts {
            span,
            steps: steps.max(1),
            k: 0,
            shift: 0,
        }
    }

    /// The shift of the next iteration.
    #[inline]
    pub fn next_shift(&mut self) -> u64 {
        let s = self.shift;
        self.k += 1;
        if self.k == self.steps {
            self.k = 0;
            self.shift = 0;
        } else {
            self.shift += self.span;
        }
        s
    }
}

/// A [`BoundOp`] issued at iterations 0, 1, 2, … of its buffer rotation.
#[derive(Debug)]
pub struct Rotation<'o, 'g> {
    op: &'o BoundOp<'g>,
    shifts: Shifts,
}

impl Rotation<'_, '_> {
    /// Issues the operation at the next iteration's shift.
    #[inline]
    pub fn issue_next(&mut self) -> Result<()> {
        let shift = self.shifts.next_shift();
        self.op.issue(shift)
    }

    /// Issues the operation at the next iteration's shift on a nonblocking communicator (one
    /// GPU, no `mulsum`): a call that NCCL takes in the background (`ncclInProgress`, e.g. the
    /// first one, which connects the ranks) is waited for before the next, polling its
    /// communicator and asking `keep_waiting` between polls; `Ok(false)` when `keep_waiting`
    /// gave up (a deadline: abort the communicator), `Ok(true)` when everything was taken.
    pub fn issue_next_polled(
        &mut self,
        keep_waiting: &mut dyn FnMut() -> Result<bool>,
    ) -> Result<bool> {
        let shift = self.shifts.next_shift();
        let op = self.op;
        let ([g], false) = (&op.gpus[..], op.premulsum) else {
            return Err(Error::Internal(
                "a polled operation needs one GPU and a built-in reduction".into(),
            ));
        };
        let calls = &op.calls[g.start..g.end];
        for (i, b) in calls.iter().enumerate() {
            // SAFETY: as in `issue_calls`: checked calls on borrowed buffers and communicator.
            let r = unsafe { call(b, op.nccl, &g.target, shift) };
            let failed = match r {
                Ok(0) => None,
                Ok(IN_PROGRESS) => match wait_ready(op.nccl, g.target.comm, keep_waiting) {
                    Ok(true) => None,
                    Ok(false) => return Ok(false),
                    Err(e) => Some(e),
                },
                Ok(code) => op.nccl.check(code).err(),
                Err(e) => Some(e),
            };
            if let Some(e) = failed {
                close_groups(op.nccl, &calls[..=i]);
                return Err(e);
            }
        }
        Ok(true)
    }
}

mod calls;

use calls::{call, close_groups, issue_calls, wait_ready};
pub use calls::{missing, open_after_failure};

#[cfg(test)]
mod tests;
