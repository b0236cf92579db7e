//! broadcast_perf: `ncclBroadcast` of the whole buffer from the root, busbw = algbw.

use super::{Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// `ncclBroadcast`: the root's `count` elements land in every rank's receive buffer.
pub struct Broadcast;

impl Collective for Broadcast {
    fn facts(&self) -> &'static Benchmark {
        &facts::BROADCAST
    }

    fn counts(&self, count: usize, _nranks: usize, _ts: usize) -> Counts {
        Counts::whole(count)
    }

    fn plan(&self, _g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        emit(Step::Broadcast)
    }

    /// Only the root writes input; every rank expects the root's copy pattern.
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let count = f.counts.send;
        let mut fills = Vec::with_capacity(2);
        if f.rank == f.root {
            fills.push(Fill::copy_input(f.data(), count, f.seed, 0));
        }
        fills.push(Fill::copy_expected(0, f.counts.recv, f.seed, 0));
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
        for n in [1usize, 2, 3, 8, 72] {
            let c = Broadcast.counts(1001, n, 4);
            assert_eq!((c.send, c.recv, c.param), (1001, 1001, 1001));
            assert_eq!((c.send_inplace_offset, c.recv_inplace_offset), (0, 0));
            assert_eq!(c.printed_size(4), 4004);
            assert_eq!(Broadcast.bandwidth(&c, 4, n), (4004.0, 1.0));
        }
        // broadcast_small.out, first row: -b 8 float → size 8, count 2.
        let c = Broadcast.counts(2, 1, 4);
        assert_eq!((c.printed_size(4), c.param), (8, 2));
    }

    #[test]
    fn only_the_root_writes_input() {
        let ctx = |rank, in_place| FillCtx {
            rank,
            nranks: 4,
            root: 2,
            op: RedOp::Sum,
            counts: Broadcast.counts(64, 4, 4),
            in_place,
            seed: 9,
            ts: 4,
        };
        assert_eq!(
            Broadcast.fills(&ctx(2, true)),
            vec![
                Fill::copy_input((Buffer::Recv, 0), 64, 9, 0),
                Fill::copy_expected(0, 64, 9, 0)
            ]
        );
        assert_eq!(
            Broadcast.fills(&ctx(1, false)),
            vec![Fill::copy_expected(0, 64, 9, 0)]
        );
    }
}
