//! Tests across every collective: the counts each derives from a sweep size (nccl-tests'
//! table) and the binding of planned steps to pointers; the op and root columns are the
//! benchmark table's, tested in `nccl-perf-facts`. The host replay of every collective (what
//! NCCL delivers must equal the expected fills) is `tests/collective_replay.rs`, on the test
//! oracle.

use super::*;
use crate::error::Result;

#[test]
fn round16() {
    assert_eq!(round16_per_rank(250, 3, 4), 80);
    assert_eq!(round16_per_rank(100, 1, 4), 100);
    assert_eq!(round16_per_rank(31, 1, 1), 16);
    assert_eq!(round16_per_rank(7, 2, 8), 2);
    assert_eq!(round16_per_rank(2, 8, 4), 0);
    assert_eq!(round16_per_rank(17, 1, 2), 16);
}

/// nccl-tests' table of what each collective derives from a count, written out: (paramcount,
/// sendcount, recvcount, send in-place offset, recv in-place offset, algbw bytes, busbw factor).
/// alltoallv's totals are checked in its own tests; here only its param, offsets and bandwidth
/// rule.
type Row = (usize, usize, usize, usize, usize, usize, f64);

fn spec_row(name: &str, count: usize, n: usize, ts: usize) -> Option<Row> {
    let unit = 16 / ts;
    let b = count / n / unit * unit;
    let nf = n as f64;
    let ring = (nf - 1.0) / nf;
    Some(match name {
        "all_reduce" => (count, count, count, 0, 0, count * ts, 2.0 * (nf - 1.0) / nf),
        "all_gather" => (b, b, b * n, b, 0, b * ts * n, ring),
        "reduce_scatter" => (b, b * n, b, 0, b, b * ts * n, ring),
        "broadcast" | "reduce" | "sendrecv" => (count, count, count, 0, 0, count * ts, 1.0),
        "alltoall" => (b, n * b, n * b, 0, 0, b * n * ts, ring),
        "gather" => (b, b, b * n, b, 0, b * n * ts, ring),
        "scatter" => (b, b * n, b, 0, b, b * n * ts, ring),
        "hypercube" => (b, b, b * n, b, 0, b * ts * (n - 1), 1.0),
        _ => return None,
    })
}

#[test]
fn counts_follow_the_spec_table() {
    for coll in all() {
        let name = coll.name();
        for n in [1usize, 2, 3, 8, 72] {
            for ts in [1usize, 2, 4, 8] {
                for count in [0usize, 1, 2, 15, 16, 17, 100, 250, 1000, 4099, 1 << 20] {
                    let c = coll.counts(count, n, ts);
                    let (bytes, factor) = coll.bandwidth(&c, ts, n);
                    let what = format!("{name} n={n} ts={ts} count={count}");
                    assert_eq!(
                        c.printed_size(ts),
                        (c.send.max(c.recv) * ts) as u64,
                        "{what}"
                    );
                    let Some(row) = spec_row(name, count, n, ts) else {
                        assert_eq!(name, "alltoallv");
                        assert_eq!(c.param, count / n / (16 / ts) * (16 / ts), "{what}");
                        assert_eq!((c.send_inplace_offset, c.recv_inplace_offset), (0, 0));
                        assert_eq!(bytes, (c.send.max(c.recv) * ts) as f64, "{what}");
                        assert_eq!(factor, (n as f64 - 1.0) / n as f64, "{what}");
                        continue;
                    };
                    let got = (
                        c.param,
                        c.send,
                        c.recv,
                        c.send_inplace_offset,
                        c.recv_inplace_offset,
                        bytes as usize,
                        factor,
                    );
                    assert_eq!(got, row, "{what}");
                    // Every per-rank share is a whole number of 16-byte units.
                    if name != "all_reduce" && !matches!(name, "broadcast" | "reduce" | "sendrecv")
                    {
                        assert_eq!(c.param * ts % 16, 0, "{what}");
                    }
                }
            }
        }
    }
}

/// The bound calls (what the timed loop issues) are the planned steps, resolved: pointers at
/// base + offset·ts, the call's count and root for natives, copies onto themselves dropped.
#[test]
fn binding_resolves_every_planned_step() {
    use super::step::{Bound, Io, bind};
    use crate::gpu::op::open_after_failure;
    let (send, recv) = (0x7f00_0000_0000usize, 0x7f80_0000_0000usize);
    for coll in all() {
        for n in [1usize, 2, 4, 8] {
            for native in [Natives::NONE, Natives::ALL] {
                for ts in [1usize, 4, 8] {
                    for rank in 0..n {
                        for in_place in [false, true] {
                            let counts = coll.counts(1000, n, ts);
                            let s = if in_place {
                                recv + counts.send_inplace_offset * ts * rank
                            } else {
                                send
                            };
                            let r = recv + counts.recv_inplace_offset * ts * rank;
                            let root = (rank + 1) % n;
                            let call = Call {
                                send: s as u64,
                                recv: r as u64,
                                counts,
                                root: root as i32,
                                rank,
                                nranks: n,
                                ts,
                            };
                            let what = format!("{} n={n} rank={rank} ts={ts}", coll.name());
                            let mut steps = Vec::new();
                            coll.plan(&call.geometry(native), &mut |st| {
                                steps.push(st);
                                Ok(())
                            })
                            .unwrap();
                            let mut bound = Vec::new();
                            bind(&*coll, native, &call, &mut bound).unwrap();
                            let at = |b: Base, o: usize| {
                                (match b {
                                    Base::Send => s,
                                    Base::Recv => r,
                                } + o * ts) as u64
                            };
                            let io = Io {
                                send: s as u64,
                                recv: r as u64,
                                count: counts.param,
                            };
                            let root = root as i32;
                            let want: Vec<Bound> = steps
                                .iter()
                                .filter_map(|st| {
                                    Some(match *st {
                                        Step::GroupStart => Bound::GroupStart,
                                        Step::GroupEnd => Bound::GroupEnd,
                                        Step::AllReduce => Bound::AllReduce(io),
                                        Step::AllGather => Bound::AllGather(io),
                                        Step::ReduceScatter => Bound::ReduceScatter(io),
                                        Step::Broadcast => Bound::Broadcast(io, root),
                                        Step::Reduce => Bound::Reduce(io, root),
                                        Step::AlltoAll => Bound::AlltoAll(io),
                                        Step::Gather => Bound::Gather(io, root),
                                        Step::Scatter => Bound::Scatter(io, root),
                                        Step::Send {
                                            from,
                                            offset,
                                            count,
                                            peer,
                                        } => Bound::Send {
                                            buf: at(from, offset),
                                            count,
                                            peer: peer as i32,
                                        },
                                        Step::Recv {
                                            offset,
                                            count,
                                            peer,
                                        } => Bound::Recv {
                                            buf: at(Base::Recv, offset),
                                            count,
                                            peer: peer as i32,
                                        },
                                        Step::CopyToRecv {
                                            from,
                                            offset,
                                            to,
                                            count,
                                        } => {
                                            let (src, dst) = (at(from, offset), at(Base::Recv, to));
                                            if src == dst || count == 0 {
                                                return None;
                                            }
                                            Bound::Copy {
                                                dst,
                                                src,
                                                bytes: count * ts,
                                            }
                                        }
                                    })
                                })
                                .collect();
                            assert_eq!(bound, want, "{what}");
                            // Balanced groups: nothing is left open after a complete operation.
                            let starts = bound.iter().filter(|b| **b == Bound::GroupStart).count();
                            let ends = bound.iter().filter(|b| **b == Bound::GroupEnd).count();
                            assert_eq!(starts, ends, "{what}");
                        }
                    }
                }
            }
        }
    }
    // sendrecv on one rank is exactly nccl-tests' group { send to self; receive from self }.
    let mut b = Vec::new();
    let c = Call {
        send: 0x1000,
        recv: 0x2000,
        counts: Counts::whole(2),
        root: 0,
        rank: 0,
        nranks: 1,
        ts: 4,
    };
    bind(&SendRecv, Natives::ALL, &c, &mut b).unwrap();
    let (send, recv) = (
        Bound::Send {
            buf: 0x1000,
            count: 2,
            peer: 0,
        },
        Bound::Recv {
            buf: 0x2000,
            count: 2,
            peer: 0,
        },
    );
    assert_eq!(b, [Bound::GroupStart, send, recv, Bound::GroupEnd]);
    // Hypercube in place on one rank: nothing at all (its copy would be onto itself).
    b.clear();
    let c = Call {
        send: 0x2000,
        counts: Hypercube.counts(1024, 1, 4),
        ..c
    };
    bind(&Hypercube, Natives::ALL, &c, &mut b).unwrap();
    assert!(b.is_empty(), "{b:?}");
    // A native collective the loaded NCCL lacks is an error at binding, not per operation.
    let e = bind(&AllToAll, Natives::NONE, &c, &mut b);
    assert!(e.is_ok());
    struct Native;
    impl Collective for Native {
        fn facts(&self) -> &'static Benchmark {
            &nccl_perf_facts::benchmarks::GATHER
        }
        fn name(&self) -> &'static str {
            "native"
        }
        fn counts(&self, count: usize, _: usize, _: usize) -> Counts {
            Counts::whole(count)
        }
        fn plan(&self, _: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
            emit(Step::Gather)
        }
        fn fills(&self, _: &FillCtx) -> Vec<Fill> {
            Vec::new()
        }
    }
    let e = bind(&Native, Natives::NONE, &c, &mut b).unwrap_err();
    assert!(e.to_string().contains("ncclGather was planned"), "{e}");
    // Groups left open when a call fails: a failing start opened none, a failing end closed its.
    let (gs, ge, x) = (Bound::GroupStart, Bound::GroupEnd, send);
    assert_eq!(open_after_failure(&[gs]), 0);
    assert_eq!(open_after_failure(&[gs, x]), 1);
    assert_eq!(open_after_failure(&[gs, gs, x]), 2);
    assert_eq!(open_after_failure(&[gs, x, recv, ge]), 0);
    assert_eq!(open_after_failure(&[gs, gs, x, ge]), 1);
    assert_eq!(open_after_failure(&[gs, x, ge, gs, x]), 1);
    assert_eq!(open_after_failure(&[x]), 0);
}
