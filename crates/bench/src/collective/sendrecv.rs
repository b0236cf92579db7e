//! sendrecv_perf: one group per operation in which every rank sends its buffer to the next rank
//! and receives from the previous one (a ring shift), busbw = algbw. The op loop runs and the op
//! is printed although nothing is reduced; in-place errors are not reported (`N/A`).

use super::step::grouped;
use super::{Base, Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step};
use crate::error::Result;
use nccl_perf_facts::benchmarks as facts;

/// `ncclSend` to `(rank+1) % n` and `ncclRecv` from `(rank−1+n) % n`.
pub struct SendRecv;

impl Collective for SendRecv {
    fn facts(&self) -> &'static Benchmark {
        &facts::SENDRECV
    }

    fn counts(&self, count: usize, _nranks: usize, _ts: usize) -> Counts {
        Counts::whole(count)
    }

    fn plan(&self, g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        let n = g.nranks;
        let count = g.counts.param;
        grouped(emit, |emit| {
            emit(Step::Send {
                from: Base::Send,
                offset: 0,
                count,
                peer: (g.rank + 1) % n,
            })?;
            emit(Step::Recv {
                offset: 0,
                count,
                peer: (g.rank + n - 1) % n,
            })
        })
    }

    /// Input: generator indices `rank·count..`; expected: the previous rank's indices.
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let count = f.counts.send;
        let prev = (f.rank + f.nranks - 1) % f.nranks;
        vec![
            Fill::copy_input(f.data(), count, f.seed, (f.rank * count) as u64),
            Fill::copy_expected(0, f.counts.recv, f.seed, (prev * count) as u64),
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
            let c = SendRecv.counts(777, n, 2);
            assert_eq!((c.send, c.recv, c.param), (777, 777, 777));
            assert_eq!(c.printed_size(2), 1554);
            assert_eq!(SendRecv.bandwidth(&c, 2, n), (1554.0, 1.0));
        }
        assert_eq!(SendRecv.op_column().label(RedOp::Min.name()), "min");
        assert!(SendRecv.op_column().loops() && !SendRecv.op_column().reduces());
        assert!(!SendRecv.reports_in_place_errors());
    }

    #[test]
    fn a_ring_shift() {
        let g = Geometry {
            rank: 0,
            nranks: 3,
            root: 0,
            ts: 4,
            counts: SendRecv.counts(10, 3, 4),
            native: Natives::ALL,
        };
        assert_eq!(
            planned(&SendRecv, &g),
            vec![
                Step::GroupStart,
                Step::Send {
                    from: Base::Send,
                    offset: 0,
                    count: 10,
                    peer: 1
                },
                Step::Recv {
                    offset: 0,
                    count: 10,
                    peer: 2
                },
                Step::GroupEnd
            ]
        );
        let ctx = FillCtx {
            rank: 0,
            nranks: 3,
            root: 0,
            op: RedOp::Prod,
            counts: g.counts,
            in_place: false,
            seed: 1,
            ts: 4,
        };
        assert_eq!(
            SendRecv.fills(&ctx),
            vec![
                Fill::copy_input((Buffer::Send, 0), 10, 1, 0),
                Fill::copy_expected(0, 10, 1, 20)
            ]
        );
    }
}
