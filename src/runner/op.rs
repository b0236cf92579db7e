//! One operation of a measurement, bound once and issued many times: the hot path of the timed
//! loop.
//!
//! [`Worker::bind`] turns the collective's plan for every GPU of the thread into
//! [`Bound`] calls (pointers of iteration 0, counts, peers, datatype, op, communicator and
//! stream), before the clock starts. Per operation [`Worker::issue`] adds the rotation shift and
//! makes exactly the NCCL calls of the plan: no plan interpretation, no closures, no dynamic
//! dispatch into the collective, no allocation, no clock read, no atomics. [`Rotation`] walks
//! the buffer rotation of consecutive iterations without a division per operation.

use super::measure::{Shape, Worker, in_group};
use crate::collective::{Bound, Call, Natives, Target, step};
use crate::error::{Error, Result};
use crate::gpu::driver::{self, CUcontext};
use crate::types::DataType;
use std::ffi::c_void;

/// `ncclScalarHostImmediate`.
const SCALAR_HOST_IMMEDIATE: i32 = 1;

/// The bit pattern of the small integer `v` (1 or 2) in datatype `dt`.
pub(super) fn scalar_bits(dt: DataType, v: u8) -> u64 {
    let f = v as f64;
    match dt {
        DataType::Half => half::f16::from_f64(f).to_bits() as u64,
        DataType::Bfloat16 => half::bf16::from_f64(f).to_bits() as u64,
        DataType::Float => (f as f32).to_bits() as u64,
        DataType::Double => f.to_bits(),
        // 1.0 and 2.0 in E4M3 (bias 7) and E5M2 (bias 15).
        DataType::F8e4m3 => [0x38, 0x40][v as usize - 1],
        DataType::F8e5m2 => [0x3c, 0x40][v as usize - 1],
        _ => v as u64,
    }
}

/// The calls of one GPU inside a [`BoundOp`].
struct GpuCalls {
    ctx: CUcontext,
    rank: usize,
    target: Target,
    /// Its calls: `BoundOp::calls[start..end]`.
    start: usize,
    end: usize,
}

/// One operation (a shape and a half) bound for every GPU of a thread.
pub(super) struct BoundOp {
    /// Every GPU's calls, in GPU order.
    calls: Vec<Bound>,
    gpus: Vec<GpuCalls>,
    /// Several GPUs: one group around them, each made current in turn.
    multi: bool,
    /// `-o mulsum`: a PreMulSum op of this datatype is created around each GPU's calls.
    premulsum: Option<DataType>,
    /// Buffer rotation (see [`Shape::span`]).
    span: u64,
    steps: u64,
}

impl BoundOp {
    /// The shifts of iterations 0, 1, 2, …
    pub(super) fn rotation(&self) -> Rotation {
        Rotation::new(self.span, self.steps)
    }
}

/// The rotation shifts `span × (it mod steps)` of consecutive iterations `it` = 0, 1, 2, …,
/// by addition.
pub(super) struct Rotation {
    span: u64,
    steps: u64,
    k: u64,
    shift: u64,
}

impl Rotation {
    /// Starts at iteration 0; `steps` ≥ 1.
    pub(super) fn new(span: u64, steps: u64) -> Rotation {
        Rotation {
            span,
            steps: steps.max(1),
            k: 0,
            shift: 0,
        }
    }

    /// The shift of the next iteration.
    #[inline]
    pub(super) fn next_shift(&mut self) -> u64 {
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

impl Worker<'_> {
    /// Binds one operation of shape `s` (half `in_place`) on every GPU of this thread.
    pub(super) fn bind(&self, s: &Shape, in_place: bool) -> Result<BoundOp> {
        let nccl = self.e.nccl;
        let premulsum = match s.op.nccl_builtin() {
            Some(_) => None,
            None if nccl.ncclRedOpCreatePreMulSum.is_some() && nccl.ncclRedOpDestroy.is_some() => {
                Some(s.dt)
            }
            None => {
                return Err(Error::Unsupported(
                    "-o mulsum needs NCCL 2.11 or later (ncclRedOpCreatePreMulSum)".into(),
                ));
            }
        };
        let op = s.op.nccl_builtin().unwrap_or(0);
        let native = Natives::of(nccl);
        let mut calls = Vec::new();
        let mut gpus = Vec::with_capacity(self.gpus.len());
        for g in &self.gpus {
            let (send, recv) = self.data_ptrs(g, s, in_place, 0);
            let target = Target {
                comm: g.comm,
                stream: g.stream as *mut c_void,
                dtype: s.dt.nccl_id(),
                op,
            };
            let call = Call {
                send: send as *const c_void,
                recv: recv as *mut c_void,
                counts: s.counts,
                dtype: target.dtype,
                op,
                root: s.root as i32,
                comm: g.comm,
                stream: target.stream,
                rank: g.rank,
                nranks: self.e.nranks,
                ts: s.ts(),
            };
            let start = calls.len();
            step::bind(self.e.coll, native, &call, &mut calls)?;
            gpus.push(GpuCalls {
                ctx: g.ctx,
                rank: g.rank,
                target,
                start,
                end: calls.len(),
            });
        }
        Ok(BoundOp {
            calls,
            multi: gpus.len() > 1,
            gpus,
            premulsum,
            span: s.span,
            steps: s.steps.max(1),
        })
    }

    /// Enqueues one bound operation on every GPU of this thread, pointers advanced by `shift`
    /// bytes: the GPUs' calls (in one group, each GPU made current, when there are several;
    /// each inside its PreMulSum op with `mulsum`).
    #[inline]
    pub(super) fn issue(&self, op: &BoundOp, shift: u64) -> Result<()> {
        let nccl = self.e.nccl;
        if let ([g], None) = (&op.gpus[..], op.premulsum) {
            return step::issue(nccl, &g.target, &op.calls, shift);
        }
        in_group(nccl, op.multi, || {
            for g in &op.gpus {
                if op.multi {
                    driver::set_current(g.ctx)?;
                }
                let calls = &op.calls[g.start..g.end];
                match op.premulsum {
                    None => step::issue(nccl, &g.target, calls, shift)?,
                    Some(dt) => self.issue_premulsum(g, dt, calls, shift)?,
                }
            }
            Ok(())
        })
    }

    /// `mulsum`: a PreMulSum op (scalar 1 on even ranks, 2 on odd) created around the calls.
    fn issue_premulsum(
        &self,
        g: &GpuCalls,
        dt: DataType,
        calls: &[Bound],
        shift: u64,
    ) -> Result<()> {
        let nccl = self.e.nccl;
        let (Some(create), Some(destroy)) = (nccl.ncclRedOpCreatePreMulSum, nccl.ncclRedOpDestroy)
        else {
            return Err(Error::Unsupported(
                "-o mulsum needs NCCL 2.11 or later (ncclRedOpCreatePreMulSum)".into(),
            ));
        };
        let mut scalar = scalar_bits(dt, if g.rank.is_multiple_of(2) { 1 } else { 2 });
        let mut op = 0;
        // SAFETY: the scalar is read immediately (host-immediate residence).
        nccl.check(unsafe {
            create(
                &mut op,
                &mut scalar as *mut u64 as *mut c_void,
                dt.nccl_id(),
                SCALAR_HOST_IMMEDIATE,
                g.target.comm,
            )
        })?;
        let target = Target { op, ..g.target };
        let r = step::issue(nccl, &target, calls, shift);
        // SAFETY: the op was created above on this communicator.
        let d = nccl.check(unsafe { destroy(op, g.target.comm) });
        r.and(d)
    }

    /// Binds and issues one operation with rotation shift 0 (the validation operation).
    pub(super) fn issue_once(&self, s: &Shape, in_place: bool) -> Result<()> {
        let op = self.bind(s, in_place)?;
        self.issue(&op, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn premulsum_scalars() {
        assert_eq!(scalar_bits(DataType::Float, 2), 2.0f32.to_bits() as u64);
        assert_eq!(scalar_bits(DataType::Half, 1), 0x3c00);
        assert_eq!(scalar_bits(DataType::Bfloat16, 2), 0x4000);
        assert_eq!(scalar_bits(DataType::Double, 1), 1.0f64.to_bits());
        assert_eq!(scalar_bits(DataType::Int64, 2), 2);
        assert_eq!(scalar_bits(DataType::F8e4m3, 1), 0x38);
        assert_eq!(scalar_bits(DataType::F8e5m2, 2), 0x40);
    }

    #[test]
    fn rotation_walks_the_shifts_by_addition() {
        for (span, steps) in [(0, 1), (8, 1), (8, 3), (1 << 20, 1024), (24, 7)] {
            let mut r = Rotation::new(span, steps);
            for it in 0..3000u64 {
                assert_eq!(r.next_shift(), span * (it % steps), "{span} {steps} {it}");
            }
        }
    }
}
