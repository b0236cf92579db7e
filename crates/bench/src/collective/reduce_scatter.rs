//! reduce_scatter_perf: `ncclReduceScatter` of a 16-byte-rounded share per rank,
//! busbw = algbw · (n−1)/n.

use super::{Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step, round16_per_rank};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// `ncclReduceScatter`: every rank contributes `b·n` elements and receives the reduction of
/// block `rank` (`b` elements).
pub struct ReduceScatter;

impl Collective for ReduceScatter {
    fn facts(&self) -> &'static Benchmark {
        &facts::REDUCE_SCATTER
    }

    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts {
        let b = round16_per_rank(count, nranks, ts);
        Counts {
            send: b * nranks,
            recv: b,
            param: b,
            send_inplace_offset: 0,
            recv_inplace_offset: b,
        }
    }

    fn plan(&self, _g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        emit(Step::ReduceScatter)
    }

    /// Input: the whole `b·n` reduction input (in place: from the start of the receive buffer).
    /// Expected: the reduction of block `rank`, i.e. generator indices from `rank·b`.
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let b = f.counts.recv;
        vec![
            f.reduction_input(),
            f.reduction_expected((f.rank * b) as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::RedOp;

    #[test]
    fn counts_sizes_and_factors() {
        // 1000 floats on 3 ranks: b = Round16(333) = 332.
        let c = ReduceScatter.counts(1000, 3, 4);
        assert_eq!((c.send, c.recv, c.param), (996, 332, 332));
        assert_eq!((c.send_inplace_offset, c.recv_inplace_offset), (0, 332));
        assert_eq!(c.printed_size(4), 3984);
        for n in [1usize, 2, 3, 8, 72] {
            let c = ReduceScatter.counts(1 << 20, n, 2);
            let b = (1 << 20) / n / 8 * 8;
            assert_eq!((c.send, c.recv, c.param), (b * n, b, b));
            let (bytes, factor) = ReduceScatter.bandwidth(&c, 2, n);
            assert_eq!(bytes, (b * 2 * n) as f64);
            assert_eq!(factor, (n as f64 - 1.0) / n as f64);
        }
        // reduce_scatter_small.out: -b 8 and -b 16 float on one rank → sizes 0 and 16.
        assert_eq!(ReduceScatter.counts(2, 1, 4).printed_size(4), 0);
        assert_eq!(ReduceScatter.counts(4, 1, 4).printed_size(4), 16);
    }

    #[test]
    fn each_rank_expects_its_block() {
        let ctx = FillCtx {
            rank: 2,
            nranks: 4,
            root: 0,
            op: RedOp::Avg,
            counts: ReduceScatter.counts(64, 4, 4),
            in_place: false,
            seed: 3,
            ts: 4,
        };
        let fills = ReduceScatter.fills(&ctx);
        assert!(matches!(
            fills[0],
            Fill::Input {
                count: 64,
                rme: 2,
                ix0: 0,
                ..
            }
        ));
        assert!(matches!(
            fills[1],
            Fill::Expected {
                offset: 0,
                count: 16,
                ix0: 32,
                rn: 4,
                ..
            }
        ));
    }
}
