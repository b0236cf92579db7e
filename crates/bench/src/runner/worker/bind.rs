//! One operation of a measurement, bound once and issued many times: the hot path of the timed
//! loop.
//!
//! [`Worker::bind`] turns the collective's plan for every GPU of the thread into bound calls
//! (pointers of iteration 0, counts, peers) before the clock starts; the GPU layer's
//! [`BoundOp`] checks them once and issues them per operation with the rotation shift added
//! (see `gpu::op`): no plan interpretation, no closures, no dynamic dispatch into the
//! collective, no allocation, no clock read, no atomics.

use super::Worker;
use crate::collective::{Call, Natives, step};
use crate::error::Result;
use crate::gpu::op::BoundOp;
use crate::runner::engine::Shape;
use crate::types::DataType;

/// The bit pattern of the small integer `v` (1 or 2) in datatype `dt`.
fn scalar_bits(dt: DataType, v: u8) -> u64 {
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
    use crate::collective::{AllToAllV, Buffer, Fill, FillCtx};
    use crate::gpu::op::check_ranges;
    use crate::types::RedOp;

    /// An 8x8 traffic matrix of uneven byte counts (zeros on the diagonal and here and there).
    fn matrix8() -> String {
        (0..8)
            .map(|i| {
                (0..8)
                    .map(|j| ((i * 37 + j * 11) % 5 * 48 * (i != j) as usize).to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether `len` bytes at `addr` lie inside the buffer at `start` of `size` bytes.
    fn inside(addr: u64, len: usize, (start, size): (u64, u64)) -> bool {
        len == 0 || (addr >= start && addr + len as u64 <= start + size)
    }

    /// Every operation the runner binds passes the GPU layer's range check (no false alarm),
    /// and so does every device range validation writes or reads: all eleven collectives
    /// (alltoallv generated and from matrix files), 1 to 8 ranks, every root, every datatype size, both halves, `-u` 0/1/7, native collectives or
    /// not, over the sweep and warm-up sizes of several `-b`/`-e`/`-f`/`-i` settings, with the
    /// buffers sized as the runner sizes them (`buffer_sizes`) and the shifts of the rotation.
    #[test]
    fn every_bound_operation_stays_inside_its_buffers() {
        // Every benchmark, and alltoallv's other traffic: uniform, and matrices (they need
        // -b = -e): a small uneven 3x3 and an 8x8.
        let mut colls = crate::collective::all();
        colls.push(Box::new(AllToAllV::generated(0.0)));
        colls.push(Box::new(
            AllToAllV::from_matrix_text("m3", "0 100 200\n48 0 16\n1000 1000 0\n", 1.0).unwrap(),
        ));
        colls.push(Box::new(
            AllToAllV::from_matrix_text("m8", &matrix8(), 1.0).unwrap(),
        ));
        // (min, max, step bytes, step factor)
        let sweeps = [
            (0, 4096, 0, 2),
            (1, 1 << 20, 0, 4),
            (8, 1000, 97, 1),
            (1000, 1_000_003, 0, 3),
            (4097, 4097, 0, 2),
            (65536, 65536, 0, 2),
        ];
        let (send0, recv0, exp0) = (
            0x1000_0000_0000u64,
            0x2000_0000_0000u64,
            0x3000_0000_0000u64,
        );
        let types = [
            DataType::Int8,
            DataType::Half,
            DataType::Float,
            DataType::Double,
        ];
        let mut checked = 0usize;
        for coll in &colls {
            for nranks in [1usize, 2, 3, 4, 8] {
                for &(lo, hi, step, factor) in &sweeps {
                    if coll.check_shape(nranks, lo, hi).is_err() {
                        continue;
                    }
                    let mut sizes = crate::sweep::sizes(lo, hi, step, factor);
                    sizes.extend(crate::sweep::warmup_sizes(lo, hi));
                    sizes.sort_unstable();
                    sizes.dedup();
                    for unalign in [0u64, 1, 7] {
                        let data = hi + 8 * unalign;
                        let bufs = [(send0, data), (recv0, data)];
                        for &dt in &types {
                            let ts = dt.size();
                            for &bytes in &sizes {
                                let roots = if coll.rooted() { nranks } else { 1 };
                                for root in 0..roots {
                                    let s =
                                        Shape::of(&**coll, nranks, hi, dt, RedOp::Sum, root, bytes);
                                    let max_shift = s.span * (s.steps - 1);
                                    for rank in 0..nranks {
                                        for in_place in [false, true] {
                                            let (send, recv) = s.pointers(
                                                (send0, recv0),
                                                rank,
                                                unalign,
                                                in_place,
                                                0,
                                            );
                                            let call = Call {
                                                send,
                                                recv,
                                                counts: s.counts,
                                                root: root as i32,
                                                rank,
                                                nranks,
                                                ts,
                                            };
                                            let what = format!(
                                                "{} n={nranks} rank={rank} root={root} {} {bytes} B \
                                                 in_place={in_place} -u {unalign} -b {lo} -e {hi}",
                                                coll.name(),
                                                dt.name()
                                            );
                                            for native in [Natives::NONE, Natives::ALL] {
                                                let mut calls = Vec::new();
                                                step::bind(&**coll, native, &call, &mut calls)
                                                    .unwrap();
                                                check_ranges(
                                                    &calls, ts, rank, nranks, max_shift, &bufs,
                                                )
                                                .unwrap_or_else(|e| panic!("{what}: {e}"));
                                                checked += calls.len();
                                            }
                                            // Validation: the receive range zeroed and checked,
                                            // the fills, the expected buffer (`hi` bytes).
                                            let rbytes = s.counts.recv * ts;
                                            assert!(inside(recv, rbytes, bufs[1]), "{what}");
                                            assert!(inside(exp0, rbytes, (exp0, hi)), "{what}");
                                            let fc = FillCtx {
                                                rank,
                                                nranks,
                                                root,
                                                op: RedOp::Sum,
                                                counts: s.counts,
                                                in_place,
                                                seed: 1,
                                                ts,
                                            };
                                            let u = unalign * ts as u64;
                                            for f in coll.fills(&fc) {
                                                let (at, len, buf) = match f {
                                                    Fill::Input {
                                                        buf, offset, count, ..
                                                    } => {
                                                        let (base, b) = match buf {
                                                            Buffer::Send => (send0 + u, bufs[0]),
                                                            Buffer::Recv => (recv0 + u, bufs[1]),
                                                            Buffer::Expected => (exp0, (exp0, hi)),
                                                        };
                                                        (base + (offset * ts) as u64, count * ts, b)
                                                    }
                                                    Fill::Expected { offset, count, .. } => (
                                                        exp0 + (offset * ts) as u64,
                                                        count * ts,
                                                        (exp0, hi),
                                                    ),
                                                    Fill::ExpectedIsRecv => (exp0, 0, (exp0, hi)),
                                                };
                                                assert!(inside(at, len, buf), "{what}: {f:?}");
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

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
