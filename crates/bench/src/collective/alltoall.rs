//! alltoall_perf: every rank sends a 16-byte-rounded block to every rank (itself included),
//! busbw = algbw · (n−1)/n. `ncclAlltoAll` where the loaded NCCL has it (2.28+), else one group
//! of `ncclSend`/`ncclRecv` per peer. In-place errors are not reported (`N/A`).

use super::block_seed;
use super::step::grouped;
use super::{Base, Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step, round16_per_rank};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// All-to-all of `p` elements per pair of ranks.
pub struct AllToAll;

impl Collective for AllToAll {
    fn facts(&self) -> &'static Benchmark {
        &facts::ALLTOALL
    }

    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts {
        let p = round16_per_rank(count, nranks, ts);
        Counts {
            send: p * nranks,
            recv: p * nranks,
            param: p,
            send_inplace_offset: 0,
            recv_inplace_offset: 0,
        }
    }

    /// Block `r` of the send buffer goes to rank `r`; block `r` of the receive buffer comes
    /// from rank `r`.
    fn plan(&self, g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        if g.native.alltoall {
            return emit(Step::AlltoAll);
        }
        let p = g.counts.param;
        grouped(emit, |emit| {
            for r in 0..g.nranks {
                emit(Step::Send {
                    from: Base::Send,
                    offset: r * p,
                    count: p,
                    peer: r,
                })?;
                emit(Step::Recv {
                    offset: r * p,
                    count: p,
                    peer: r,
                })?;
            }
            Ok(())
        })
    }

    /// Input: `n·p` elements of this rank's pattern. Expected: block `j` is rank `j`'s block
    /// for this rank, i.e. its pattern from generator index `rank·p`.
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let p = f.counts.param;
        let mut fills = vec![Fill::copy_input(
            f.data(),
            f.counts.send,
            block_seed(f.seed, f.rank),
            0,
        )];
        fills
            .extend((0..f.nranks).map(|j| {
                Fill::copy_expected(j * p, p, block_seed(f.seed, j), (f.rank * p) as u64)
            }));
        fills
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Natives;
    use crate::collective::planned;
    use crate::types::RedOp;

    #[test]
    fn counts_sizes_and_factors() {
        for n in [1usize, 2, 3, 8, 72] {
            let c = AllToAll.counts(100_000, n, 1);
            let p = 100_000 / n / 16 * 16;
            assert_eq!((c.send, c.recv, c.param), (p * n, p * n, p));
            assert_eq!(c.printed_size(1), (p * n) as u64);
            let (bytes, factor) = AllToAll.bandwidth(&c, 1, n);
            assert_eq!(bytes, (p * n) as f64);
            assert_eq!(factor, (n as f64 - 1.0) / n as f64);
        }
        // alltoall_small.out on one rank: 8 B → 0, 16 B → 16 (count 4).
        assert_eq!(AllToAll.counts(2, 1, 4).printed_size(4), 0);
        let c = AllToAll.counts(4, 1, 4);
        assert_eq!((c.printed_size(4), c.param), (16, 4));
        assert!(!AllToAll.reports_in_place_errors());
    }

    #[test]
    fn native_or_one_send_and_receive_per_peer() {
        let mut g = Geometry {
            rank: 1,
            nranks: 3,
            root: 0,
            ts: 4,
            counts: AllToAll.counts(12, 3, 4),
            native: Natives::ALL,
        };
        assert_eq!(planned(&AllToAll, &g), vec![Step::AlltoAll]);
        g.native = Natives::NONE;
        let steps = planned(&AllToAll, &g);
        assert_eq!(steps.len(), 8);
        assert_eq!(
            steps[3],
            Step::Send {
                from: Base::Send,
                offset: 4,
                count: 4,
                peer: 1
            }
        );
        assert_eq!(
            steps[6],
            Step::Recv {
                offset: 8,
                count: 4,
                peer: 2
            }
        );
    }

    #[test]
    fn block_j_comes_from_rank_j() {
        let ctx = FillCtx {
            rank: 2,
            nranks: 3,
            root: 0,
            op: RedOp::Sum,
            counts: AllToAll.counts(12, 3, 4),
            in_place: false,
            seed: 2,
            ts: 4,
        };
        let fills = AllToAll.fills(&ctx);
        assert_eq!(fills.len(), 4);
        assert_eq!(
            fills[0],
            Fill::copy_input((crate::collective::Buffer::Send, 0), 12, 68, 0)
        );
        assert_eq!(fills[2], Fill::copy_expected(4, 4, 67, 8));
    }
}
