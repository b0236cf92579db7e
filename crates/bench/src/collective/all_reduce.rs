//! all_reduce_perf: `ncclAllReduce`, busbw = algbw · 2(n−1)/n.

use super::{Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// `ncclAllReduce` over the whole buffer.
pub struct AllReduce;

impl Collective for AllReduce {
    fn facts(&self) -> &'static Benchmark {
        &facts::ALL_REDUCE
    }

    fn counts(&self, count: usize, _nranks: usize, _ts: usize) -> Counts {
        Counts::whole(count)
    }

    fn plan(&self, _g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        emit(Step::AllReduce)
    }

    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        vec![f.reduction_input(), f.reduction_expected(0)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Buffer;
    use crate::types::RedOp;

    #[test]
    fn counts_and_factors() {
        for n in [1, 2, 3, 8, 72] {
            let c = AllReduce.counts(1000, n, 4);
            assert_eq!((c.send, c.recv, c.param), (1000, 1000, 1000));
            assert_eq!(c.printed_size(4), 4000);
            let (bytes, factor) = AllReduce.bandwidth(&c, 4, n);
            assert_eq!(bytes, 4000.0);
            assert_eq!(factor, 2.0 * (n as f64 - 1.0) / n as f64);
        }
        assert_eq!(AllReduce.bandwidth(&AllReduce.counts(8, 1, 4), 4, 1).1, 0.0);
    }

    #[test]
    fn in_place_reads_and_writes_the_receive_buffer() {
        let ctx = FillCtx {
            rank: 3,
            nranks: 4,
            root: 0,
            op: RedOp::Prod,
            counts: AllReduce.counts(64, 4, 4),
            in_place: true,
            seed: 7,
            ts: 4,
        };
        let fills = AllReduce.fills(&ctx);
        assert_eq!(
            fills[0],
            Fill::Input {
                buf: Buffer::Recv,
                offset: 0,
                count: 64,
                op: Some(RedOp::Prod),
                rn: 4,
                rme: 3,
                seed: 7,
                ix0: 0
            }
        );
        assert!(matches!(
            fills[1],
            Fill::Expected {
                count: 64,
                rn: 4,
                ..
            }
        ));
    }
}
