//! One operation of a measurement, bound once and issued many times: the hot path of the timed
//! loop.
//!
//! [`Worker::bind`] turns the collective's plan for every GPU of the thread into bound calls
//! (pointers of iteration 0, counts, peers) before the clock starts; the GPU layer's
//! [`BoundOp`] checks them once and issues them per operation with the rotation shift added
//! (see `gpu::op`): no plan interpretation, no closures, no dynamic dispatch into the
//! collective, no allocation, no clock read, no atomics.

use super::measure::{Shape, Worker};
use crate::collective::{Call, Natives, step};
use crate::error::Result;
use crate::gpu::op::BoundOp;
use crate::types::DataType;

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

impl Worker<'_> {
    /// Binds one operation of shape `s` (half `in_place`) on every GPU of this thread: the
    /// collective's plan for each GPU resolved into calls, checked by the GPU layer against
    /// the GPU's buffers.
    pub(super) fn bind(&self, s: &Shape, in_place: bool) -> Result<BoundOp<'_>> {
        let nccl = self.e.nccl;
        let native = Natives::of(nccl);
        let mut op = BoundOp::builder(nccl, s.dt, s.op.nccl_builtin(), s.span, s.steps)?;
        for g in &self.gpus {
            let (send, recv) = self.data_ptrs(g, s, in_place, 0);
            let call = Call {
                send,
                recv,
                counts: s.counts,
                root: s.root as i32,
                rank: g.rank(),
                nranks: self.e.nranks,
                ts: s.ts(),
            };
            // `mulsum`: scalar 1 on even ranks, 2 on odd.
            let scalar = match s.op.nccl_builtin() {
                Some(_) => 0,
                None => scalar_bits(s.dt, if g.rank().is_multiple_of(2) { 1 } else { 2 }),
            };
            op.add(g, scalar, |calls| {
                step::bind(self.e.coll, native, &call, calls)
            })?;
        }
        Ok(op.finish())
    }

    /// Binds and issues one operation with rotation shift 0 (the validation operation).
    pub(super) fn issue_once(&self, s: &Shape, in_place: bool) -> Result<()> {
        self.bind(s, in_place)?.issue_first()
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
}
