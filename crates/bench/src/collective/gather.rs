//! gather_perf: every rank sends a 16-byte-rounded block to the root, busbw = algbw · (n−1)/n.
//! `ncclGather` where the loaded NCCL has it (2.28+), else a group in which every rank sends to
//! the root and the root receives `n` blocks. A per-rank count of 0 issues nothing.

use super::step::grouped;
use super::{Base, Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step, round16_per_rank};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// Gather of `c` elements per rank onto the root.
pub struct Gather;

impl Collective for Gather {
    fn facts(&self) -> &'static Benchmark {
        &facts::GATHER
    }

    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts {
        let c = round16_per_rank(count, nranks, ts);
        Counts {
            send: c,
            recv: c * nranks,
            param: c,
            send_inplace_offset: c,
            recv_inplace_offset: 0,
        }
    }

    fn plan(&self, g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        let c = g.counts.param;
        if c == 0 {
            return Ok(());
        }
        if g.native.gather {
            return emit(Step::Gather);
        }
        grouped(emit, |emit| {
            emit(Step::Send {
                from: Base::Send,
                offset: 0,
                count: c,
                peer: g.root,
            })?;
            if g.rank == g.root {
                for r in 0..g.nranks {
                    emit(Step::Recv {
                        offset: r * c,
                        count: c,
                        peer: r,
                    })?;
                }
            }
            Ok(())
        })
    }

    /// Input: this rank's slice `rank·c..` of one pattern (in place: into its own slot of the
    /// receive buffer). The root expects the whole pattern; the others an unchanged buffer.
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let c = f.counts.send;
        let input = Fill::copy_input(f.data(), c, f.seed, (f.rank * c) as u64);
        vec![
            input,
            f.root_expects(Fill::copy_expected(0, f.counts.recv, f.seed, 0)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::planned;
    use crate::collective::{Buffer, Natives};
    use crate::types::RedOp;

    #[test]
    fn counts_sizes_and_factors() {
        for n in [1usize, 2, 3, 8, 72] {
            let c = Gather.counts(10_000, n, 8);
            let b = 10_000 / n / 2 * 2;
            assert_eq!((c.send, c.recv, c.param), (b, b * n, b));
            assert_eq!((c.send_inplace_offset, c.recv_inplace_offset), (b, 0));
            assert_eq!(c.printed_size(8), (b * n * 8) as u64);
            let (bytes, factor) = Gather.bandwidth(&c, 8, n);
            assert_eq!(bytes, (b * n * 8) as f64);
            assert_eq!(factor, (n as f64 - 1.0) / n as f64);
        }
        // gather_small.out on one rank: 8 B → 0, 16 B → 16.
        assert_eq!(Gather.counts(2, 1, 4).printed_size(4), 0);
        assert_eq!(Gather.counts(4, 1, 4).printed_size(4), 16);
    }

    #[test]
    fn zero_count_issues_nothing_and_the_fallback_receives_on_the_root() {
        let mut g = Geometry {
            rank: 0,
            nranks: 8,
            root: 0,
            ts: 4,
            counts: Gather.counts(31, 8, 4),
            native: Natives::ALL,
        };
        assert_eq!(planned(&Gather, &g), vec![]);
        g.counts = Gather.counts(64, 8, 4);
        assert_eq!(planned(&Gather, &g), vec![Step::Gather]);
        g.native = Natives::NONE;
        assert_eq!(planned(&Gather, &g).len(), 2 + 1 + 8);
        g.rank = 3;
        assert_eq!(
            planned(&Gather, &g),
            vec![
                Step::GroupStart,
                Step::Send {
                    from: Base::Send,
                    offset: 0,
                    count: 8,
                    peer: 0
                },
                Step::GroupEnd
            ]
        );
    }

    #[test]
    fn in_place_input_lands_in_the_rank_slot() {
        let ctx = FillCtx {
            rank: 2,
            nranks: 4,
            root: 1,
            op: RedOp::Sum,
            counts: Gather.counts(64, 4, 4),
            in_place: true,
            seed: 6,
            ts: 4,
        };
        assert_eq!(
            Gather.fills(&ctx),
            vec![
                Fill::copy_input((Buffer::Recv, 32), 16, 6, 32),
                Fill::ExpectedIsRecv
            ]
        );
    }
}
