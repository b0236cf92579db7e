//! reduce_perf: `ncclReduce` of the whole buffer onto the root, busbw = algbw.

use super::{Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// `ncclReduce`: every rank contributes `count` elements, the root receives their reduction.
pub struct Reduce;

impl Collective for Reduce {
    fn facts(&self) -> &'static Benchmark {
        &facts::REDUCE
    }

    fn counts(&self, count: usize, _nranks: usize, _ts: usize) -> Counts {
        Counts::whole(count)
    }

    fn plan(&self, _g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        emit(Step::Reduce)
    }

    /// Every rank writes its reduction input; the root expects the reduction, the others an
    /// unchanged receive buffer (zeros out of place, their own input in place).
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        vec![f.reduction_input(), f.root_expects(f.reduction_expected(0))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Buffer;
    use crate::types::RedOp;

    #[test]
    fn counts_sizes_and_factors() {
        for n in [1usize, 2, 3, 8, 72] {
            let c = Reduce.counts(333, n, 8);
            assert_eq!((c.send, c.recv, c.param), (333, 333, 333));
            assert_eq!((c.send_inplace_offset, c.recv_inplace_offset), (0, 0));
            assert_eq!(c.printed_size(8), 2664);
            assert_eq!(Reduce.bandwidth(&c, 8, n), (2664.0, 1.0));
        }
    }

    #[test]
    fn the_root_expects_the_reduction_and_the_others_their_buffer() {
        let ctx = |rank| FillCtx {
            rank,
            nranks: 3,
            root: 1,
            op: RedOp::Max,
            counts: Reduce.counts(10, 3, 4),
            in_place: true,
            seed: 4,
            ts: 4,
        };
        let root = Reduce.fills(&ctx(1));
        assert_eq!(
            root[0],
            Fill::Input {
                buf: Buffer::Recv,
                offset: 0,
                count: 10,
                op: Some(RedOp::Max),
                rn: 3,
                rme: 1,
                seed: 4,
                ix0: 0
            }
        );
        assert!(matches!(
            root[1],
            Fill::Expected {
                count: 10,
                rn: 3,
                op: Some(RedOp::Max),
                ..
            }
        ));
        let other = Reduce.fills(&ctx(2));
        assert!(matches!(other[0], Fill::Input { rme: 2, .. }));
        assert_eq!(other[1], Fill::ExpectedIsRecv);
    }
}
