//! scatter_perf: the root sends a 16-byte-rounded block to every rank, busbw = algbw · (n−1)/n.
//! `ncclScatter` where the loaded NCCL has it (2.28+), else a group in which the root sends `n`
//! blocks and every rank receives one. A per-rank count of 0 issues nothing.

use super::step::grouped;
use super::{Base, Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step, round16_per_rank};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// Scatter of `c` elements per rank from the root.
pub struct Scatter;

impl Collective for Scatter {
    fn facts(&self) -> &'static Benchmark {
        &facts::SCATTER
    }

    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts {
        let c = round16_per_rank(count, nranks, ts);
        Counts {
            send: c * nranks,
            recv: c,
            param: c,
            send_inplace_offset: 0,
            recv_inplace_offset: c,
        }
    }

    fn plan(&self, g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        let c = g.counts.param;
        if c == 0 {
            return Ok(());
        }
        if g.native.scatter {
            return emit(Step::Scatter);
        }
        grouped(emit, |emit| {
            if g.rank == g.root {
                for r in 0..g.nranks {
                    emit(Step::Send {
                        from: Base::Send,
                        offset: r * c,
                        count: c,
                        peer: r,
                    })?;
                }
            }
            emit(Step::Recv {
                offset: 0,
                count: c,
                peer: g.root,
            })
        })
    }

    /// Input: the root writes the whole `n·c` pattern (in place: at the start of its receive
    /// buffer). Expected: this rank's slice `rank·c..` of it.
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let c = f.counts.recv;
        let mut fills = Vec::with_capacity(2);
        if f.rank == f.root {
            fills.push(Fill::copy_input(f.data(), f.counts.send, f.seed, 0));
        }
        fills.push(Fill::copy_expected(0, c, f.seed, (f.rank * c) as u64));
        fills
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
            let c = Scatter.counts(10_000, n, 2);
            let b = 10_000 / n / 8 * 8;
            assert_eq!((c.send, c.recv, c.param), (b * n, b, b));
            assert_eq!((c.send_inplace_offset, c.recv_inplace_offset), (0, b));
            assert_eq!(c.printed_size(2), (b * n * 2) as u64);
            let (bytes, factor) = Scatter.bandwidth(&c, 2, n);
            assert_eq!(bytes, (b * n * 2) as f64);
            assert_eq!(factor, (n as f64 - 1.0) / n as f64);
        }
        // scatter_small.out on one rank: 8 B → 0, 32 B → 32.
        assert_eq!(Scatter.counts(2, 1, 4).printed_size(4), 0);
        assert_eq!(Scatter.counts(8, 1, 4).printed_size(4), 32);
    }

    #[test]
    fn the_fallback_sends_from_the_root_only() {
        let mut g = Geometry {
            rank: 2,
            nranks: 3,
            root: 2,
            ts: 1,
            counts: Scatter.counts(96, 3, 1),
            native: Natives::NONE,
        };
        let steps = planned(&Scatter, &g);
        assert_eq!(steps.len(), 2 + 3 + 1);
        assert_eq!(
            steps[3],
            Step::Send {
                from: Base::Send,
                offset: 64,
                count: 32,
                peer: 2
            }
        );
        g.rank = 0;
        assert_eq!(planned(&Scatter, &g)[1..3].len(), 2);
        g.native = Natives::ALL;
        assert_eq!(planned(&Scatter, &g), vec![Step::Scatter]);
        g.counts = Scatter.counts(47, 3, 1);
        assert_eq!(planned(&Scatter, &g), vec![]);
    }

    #[test]
    fn only_the_root_writes_input() {
        let ctx = |rank| FillCtx {
            rank,
            nranks: 4,
            root: 3,
            op: RedOp::Sum,
            counts: Scatter.counts(64, 4, 4),
            in_place: true,
            seed: 8,
            ts: 4,
        };
        assert_eq!(
            Scatter.fills(&ctx(3)),
            vec![
                Fill::copy_input((Buffer::Recv, 0), 64, 8, 0),
                Fill::copy_expected(0, 16, 8, 48)
            ]
        );
        assert_eq!(
            Scatter.fills(&ctx(1)),
            vec![Fill::copy_expected(0, 16, 8, 16)]
        );
    }
}
