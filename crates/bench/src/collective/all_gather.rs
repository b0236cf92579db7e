//! all_gather_perf: `ncclAllGather` of a 16-byte-rounded share per rank, busbw = algbw · (n−1)/n.

use super::{
    Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step, block_seed, round16_per_rank,
};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// `ncclAllGather`: every rank contributes `b` elements, every rank receives `b·n`.
pub struct AllGather;

impl Collective for AllGather {
    fn facts(&self) -> &'static Benchmark {
        &facts::ALL_GATHER
    }

    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts {
        let b = round16_per_rank(count, nranks, ts);
        Counts {
            send: b,
            recv: b * nranks,
            param: b,
            send_inplace_offset: b,
            recv_inplace_offset: 0,
        }
    }

    fn plan(&self, _g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        emit(Step::AllGather)
    }

    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let (buf, offset) = f.data();
        let b = f.counts.send;
        let mut fills = vec![Fill::Input {
            buf,
            offset,
            count: b,
            op: None,
            rn: 1,
            rme: 0,
            seed: block_seed(f.seed, f.rank),
            ix0: 0,
        }];
        fills.extend((0..f.nranks).map(|j| Fill::Expected {
            offset: j * b,
            count: b,
            op: None,
            rn: 1,
            seed: block_seed(f.seed, j),
            ix0: 0,
        }));
        fills
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Buffer;
    use crate::types::RedOp;

    #[test]
    fn counts_sizes_and_factors() {
        // -b 1000 float on 3 ranks: count 250 → b = Round16(83) = 80 → size 960.
        let c = AllGather.counts(250, 3, 4);
        assert_eq!((c.send, c.recv, c.param), (80, 240, 80));
        assert_eq!(c.printed_size(4), 960);
        for n in [1usize, 2, 3, 8, 72] {
            let c = AllGather.counts(1 << 20, n, 4);
            let (bytes, factor) = AllGather.bandwidth(&c, 4, n);
            assert_eq!(bytes, (c.param * 4 * n) as f64);
            assert_eq!(factor, (n as f64 - 1.0) / n as f64);
            assert_eq!(c.recv, c.send * n);
            assert_eq!(c.send % 4, 0);
        }
        // 8 ranks of float below 128 bytes collapse to zero elements.
        assert_eq!(AllGather.counts(31, 8, 4).printed_size(4), 0);
    }

    #[test]
    fn each_rank_block_lands_in_its_slot() {
        let counts = AllGather.counts(1024, 4, 4);
        let ctx = FillCtx {
            rank: 2,
            nranks: 4,
            root: 0,
            op: RedOp::Sum,
            counts,
            in_place: true,
            seed: 5,
            ts: 4,
        };
        let fills = AllGather.fills(&ctx);
        assert_eq!(fills.len(), 5);
        assert!(matches!(
            fills[0],
            Fill::Input {
                buf: Buffer::Recv,
                offset: 512,
                count: 256,
                op: None,
                rn: 1,
                seed: 167,
                ..
            }
        ));
        for (j, f) in fills[1..].iter().enumerate() {
            assert!(
                matches!(*f, Fill::Expected { offset, seed, .. } if offset == j * 256 && seed == 165 + j as u64)
            );
        }
    }
}
