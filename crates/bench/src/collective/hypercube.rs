//! hypercube_perf: an all-gather by recursive doubling over grouped `ncclSend`/`ncclRecv`,
//! algbw from `b·(n−1)` bytes, busbw = algbw. The op column is empty.
//!
//! Needs a power-of-two number of ranks. nccl-tests prints a "skipping" line per thread, no rows,
//! a NaN average and exits 0 otherwise; nccl-perf stops before the table with a clear message on
//! stderr and exit code 5 ("not implemented"), so a health check cannot mistake it for a pass.

use super::step::grouped;
use super::{
    Base, Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step, block_seed,
    round16_per_rank,
};
use crate::error::{Error, Result};
use nccl_perf_facts::benchmarks as facts;

/// Recursive-doubling all-gather of `b` elements per rank.
pub struct Hypercube;

fn power_of_two(nranks: usize) -> Result<()> {
    if nranks.is_power_of_two() {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "hypercube_perf needs a power-of-two number of ranks (1, 2, 4, 8, ...), but this run has {nranks}; nothing was measured"
    )))
}

impl Collective for Hypercube {
    fn facts(&self) -> &'static Benchmark {
        &facts::HYPERCUBE
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

    /// `b·(n−1)` bytes: one block from each of the other ranks.
    fn algbw_bytes(&self, c: &Counts, ts: usize, n: usize) -> f64 {
        (c.param * ts * n.saturating_sub(1)) as f64
    }

    fn check_shape(&self, nranks: usize, _min_bytes: u64, _max_bytes: u64) -> Result<()> {
        power_of_two(nranks)
    }

    /// Own block into slot `rank` (no copy in place: it is already there), then for
    /// mask = 1, 2, 4, … < n one group exchanging the `mask` blocks held so far with
    /// rank `rank ^ mask`.
    fn plan(&self, g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        power_of_two(g.nranks)?;
        let b = g.counts.param;
        emit(Step::CopyToRecv {
            from: Base::Send,
            offset: 0,
            to: g.rank * b,
            count: b,
        })?;
        let mut mask = 1;
        while mask < g.nranks {
            let held = g.rank & !(mask - 1);
            let peer = g.rank ^ mask;
            grouped(emit, |emit| {
                emit(Step::Send {
                    from: Base::Recv,
                    offset: held * b,
                    count: b * mask,
                    peer,
                })?;
                emit(Step::Recv {
                    offset: (held ^ mask) * b,
                    count: b * mask,
                    peer,
                })
            })?;
            mask <<= 1;
        }
        Ok(())
    }

    /// As all_gather: this rank's block has seed `33·rep + rank`; block `j` of the result is
    /// rank `j`'s.
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let b = f.counts.send;
        let mut fills = vec![Fill::copy_input(f.data(), b, block_seed(f.seed, f.rank), 0)];
        fills
            .extend((0..f.nranks).map(|j| Fill::copy_expected(j * b, b, block_seed(f.seed, j), 0)));
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
            let c = Hypercube.counts(4096, n, 4);
            let b = 4096 / n / 4 * 4;
            assert_eq!((c.send, c.recv, c.param), (b, b * n, b));
            assert_eq!((c.send_inplace_offset, c.recv_inplace_offset), (b, 0));
            assert_eq!(c.printed_size(4), (b * n * 4) as u64);
            assert_eq!(
                Hypercube.bandwidth(&c, 4, n),
                ((b * 4 * (n - 1)) as f64, 1.0)
            );
        }
        // hypercube_small.out on one rank: algbw bytes are 0.
        assert_eq!(Hypercube.bandwidth(&Hypercube.counts(4, 1, 4), 4, 1).0, 0.0);
        assert_eq!(Hypercube.op_column().label(RedOp::Sum.name()), "");
    }

    #[test]
    fn only_powers_of_two() {
        for n in [1, 2, 4, 8, 64] {
            assert!(Hypercube.check_shape(n, 8, 8).is_ok());
        }
        for n in [3, 6, 72] {
            let e = Hypercube.check_shape(n, 8, 8).unwrap_err();
            assert_eq!(e.exit_code(), 5);
            let msg = e.to_string();
            assert!(msg.contains(&format!("has {n}")), "{msg}");
            assert!(!msg.contains("bandwidth") && !msg.contains("FAILED"));
        }
    }

    #[test]
    fn rounds_exchange_the_blocks_held_so_far() {
        let g = Geometry {
            rank: 5,
            nranks: 8,
            root: 0,
            ts: 4,
            counts: Hypercube.counts(8 * 8, 8, 4),
            native: Natives::NONE,
        };
        let steps = planned(&Hypercube, &g);
        assert_eq!(steps.len(), 1 + 3 * 4);
        // mask 4: rank 5 holds blocks 4..8 and receives blocks 0..4 from rank 1.
        assert_eq!(
            &steps[10..12],
            &[
                Step::Send {
                    from: Base::Recv,
                    offset: 32,
                    count: 32,
                    peer: 1
                },
                Step::Recv {
                    offset: 0,
                    count: 32,
                    peer: 1
                }
            ]
        );
        let ctx = FillCtx {
            rank: 1,
            nranks: 2,
            root: 0,
            op: RedOp::Sum,
            counts: Hypercube.counts(8, 2, 4),
            in_place: true,
            seed: 2,
            ts: 4,
        };
        assert_eq!(
            Hypercube.fills(&ctx)[0],
            Fill::copy_input((Buffer::Recv, 4), 4, 67, 0)
        );
    }
}
