//! Tests across all eleven collectives: the counts table of spec §1.2, and the host replay
//! (`sim`) of every collective for 1, 2, 3, 4 and 8 ranks, every root, both halves, several
//! datatypes, ops and sizes: what NCCL delivers into each receive buffer must equal the expected
//! fills bit for bit (within the runner's tolerance for float `avg`). Mutated collectives show
//! that the replay catches wrong seeds, offsets and pairings.

use super::sim::{Case, planned, simulate};
use super::*;
use crate::error::Result;
use crate::types::DataType;

#[test]
fn round16() {
    assert_eq!(round16_per_rank(250, 3, 4), 80);
    assert_eq!(round16_per_rank(100, 1, 4), 100);
    assert_eq!(round16_per_rank(31, 1, 1), 16);
    assert_eq!(round16_per_rank(7, 2, 8), 2);
    assert_eq!(round16_per_rank(2, 8, 4), 0);
    assert_eq!(round16_per_rank(17, 1, 2), 16);
}

fn eleven() -> Vec<Box<dyn Collective>> {
    vec![
        Box::new(AllReduce),
        Box::new(AllGather),
        Box::new(Broadcast),
        Box::new(ReduceScatter),
        Box::new(Reduce),
        Box::new(AllToAll),
        Box::new(AllToAllV::generated(1.0)),
        Box::new(Scatter),
        Box::new(Gather),
        Box::new(SendRecv),
        Box::new(Hypercube),
    ]
}

/// Spec §1.2's table, written out: (paramcount, sendcount, recvcount, send in-place offset,
/// recv in-place offset, algbw bytes, busbw factor). alltoallv's totals are checked in its own
/// tests; here only its param, offsets and bandwidth rule.
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
    for coll in eleven() {
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

#[test]
fn op_columns() {
    let cols: Vec<(&str, &str)> = eleven()
        .iter()
        .map(|c| (c.name(), c.op_column().label(RedOp::Max)))
        .collect();
    assert_eq!(
        cols,
        vec![
            ("all_reduce", "max"),
            ("all_gather", "none"),
            ("broadcast", "none"),
            ("reduce_scatter", "max"),
            ("reduce", "max"),
            ("alltoall", "none"),
            ("alltoallv", "none"),
            ("scatter", "none"),
            ("gather", "none"),
            ("sendrecv", "max"),
            ("hypercube", ""),
        ]
    );
    let rooted: Vec<&str> = eleven()
        .iter()
        .filter(|c| c.rooted())
        .map(|c| c.name())
        .collect();
    assert_eq!(rooted, vec!["broadcast", "reduce", "scatter", "gather"]);
    let na: Vec<&str> = eleven()
        .iter()
        .filter(|c| !c.reports_in_place_errors())
        .map(|c| c.name())
        .collect();
    assert_eq!(na, vec!["alltoall", "alltoallv", "sendrecv"]);
}

/// Replays every combination and asserts that the reported halves match exactly.
fn replay(
    coll: &dyn Collective,
    ranks: &[usize],
    types: &[DataType],
    sizes: &[usize],
    natives: &[Natives],
) -> usize {
    let ops: &[RedOp] = if coll.op_column().loops() {
        &RedOp::ALL
    } else {
        &[RedOp::Sum]
    };
    let mut cases = 0;
    for &n in ranks {
        let roots = if coll.rooted() { n } else { 1 };
        for &dt in types {
            for &op in ops {
                for root in 0..roots {
                    for &bytes in sizes {
                        for in_place in [false, true] {
                            for &native in natives {
                                cases += 1;
                                let case = Case {
                                    dt,
                                    op,
                                    nranks: n,
                                    root,
                                    bytes,
                                    in_place,
                                    native,
                                    seed: 1 + 7 * cases as u64,
                                };
                                let out = simulate(coll, &case)
                                    .unwrap_or_else(|e| panic!("{} {case:?}: {e}", coll.name()));
                                if !in_place || coll.reports_in_place_errors() {
                                    assert_eq!(
                                        out.total(),
                                        0,
                                        "{} {case:?}: {:?}",
                                        coll.name(),
                                        out.first
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    cases
}

const RANKS: [usize; 5] = [1, 2, 3, 4, 8];
/// Sizes in bytes: zero-element shares on 8 ranks, non-divisible counts, a few KiB.
const SIZES: [usize; 4] = [8, 200, 1000, 3016];
const COPY_TYPES: [DataType; 5] = [
    DataType::Int8,
    DataType::Half,
    DataType::Float,
    DataType::Double,
    DataType::F8e5m2,
];
const ONE: [Natives; 1] = [Natives::NONE];
const BOTH: [Natives; 2] = [Natives::NONE, Natives::ALL];

#[test]
fn replay_all_reduce() {
    assert!(replay(&AllReduce, &RANKS, &DataType::ALL, &SIZES[..3], &ONE) > 0);
}

#[test]
fn replay_reduce() {
    assert!(replay(&Reduce, &RANKS, &DataType::ALL, &[24, 1000], &ONE) > 0);
}

#[test]
fn replay_reduce_scatter() {
    assert!(replay(&ReduceScatter, &RANKS, &DataType::ALL, &SIZES[..3], &ONE) > 0);
}

#[test]
fn replay_all_gather() {
    assert!(replay(&AllGather, &RANKS, &COPY_TYPES, &SIZES, &ONE) > 0);
}

#[test]
fn replay_broadcast() {
    assert!(replay(&Broadcast, &RANKS, &COPY_TYPES, &SIZES, &ONE) > 0);
}

#[test]
fn replay_alltoall_native_and_grouped() {
    assert!(replay(&AllToAll, &RANKS, &COPY_TYPES, &SIZES, &BOTH) > 0);
}

#[test]
fn replay_gather_native_and_grouped() {
    assert!(replay(&Gather, &RANKS, &COPY_TYPES, &SIZES, &BOTH) > 0);
}

#[test]
fn replay_scatter_native_and_grouped() {
    assert!(replay(&Scatter, &RANKS, &COPY_TYPES, &SIZES, &BOTH) > 0);
}

#[test]
fn replay_sendrecv() {
    assert!(replay(&SendRecv, &RANKS, &COPY_TYPES[..3], &SIZES, &ONE) > 0);
}

#[test]
fn replay_hypercube() {
    assert!(replay(&Hypercube, &[1, 2, 4, 8], &COPY_TYPES, &SIZES, &ONE) > 0);
}

#[test]
fn replay_alltoallv_generated() {
    for spread in [1.0, 0.5, 0.0, 0.3] {
        let a = AllToAllV::generated(spread);
        assert!(replay(&a, &RANKS, &COPY_TYPES[..3], &SIZES, &ONE) > 0);
    }
}

/// An 8×8 matrix with empty pairs, a silent rank (row 5) and a rank that receives nothing
/// (column 6), values not multiples of 16.
fn matrix_text() -> String {
    (0..8)
        .map(|i| {
            (0..8)
                .map(|j| match (i, j) {
                    (5, _) | (_, 6) => 0,
                    _ if (i + 2 * j) % 5 == 0 => 0,
                    _ => 17 + 40 * ((3 * i + j) % 7),
                })
                .map(|v: usize| v.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn replay_alltoallv_matrix() {
    for scale in [1.0, 0.37, 3.0] {
        let a = AllToAllV::from_matrix_text("m", &matrix_text(), scale).unwrap();
        for n in RANKS {
            // -b = -e = the largest total (and a little more), as check_shape requires.
            let c = a.counts(0, n, 1);
            let need = c.send.max(c.recv);
            for bytes in [need, need + 48] {
                a.check_shape(n, bytes as u64, bytes as u64).unwrap();
                assert!(replay(&a, &[n], &COPY_TYPES, &[bytes], &ONE) > 0);
            }
        }
    }
}

/// A plan function: the base collective, the geometry, the step sink.
type PlanFn = fn(&dyn Collective, &Geometry, &mut dyn FnMut(Step) -> Result<()>) -> Result<()>;

/// A collective with another collective's counts and rules but its own fills or plan.
struct Mutant<'a> {
    base: &'a dyn Collective,
    fills: fn(&dyn Collective, &FillCtx) -> Vec<Fill>,
    plan: PlanFn,
}

impl Collective for Mutant<'_> {
    fn name(&self) -> &'static str {
        "mutant"
    }
    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts {
        self.base.counts(count, nranks, ts)
    }
    fn bandwidth(&self, c: &Counts, ts: usize, n: usize) -> (f64, f64) {
        self.base.bandwidth(c, ts, n)
    }
    fn op_column(&self) -> OpColumn {
        self.base.op_column()
    }
    fn rooted(&self) -> bool {
        self.base.rooted()
    }
    fn plan(&self, g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        (self.plan)(self.base, g, emit)
    }
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        (self.fills)(self.base, f)
    }
}

fn same_fills(c: &dyn Collective, f: &FillCtx) -> Vec<Fill> {
    c.fills(f)
}

fn same_plan(
    c: &dyn Collective,
    g: &Geometry,
    e: &mut dyn FnMut(Step) -> Result<()>,
) -> Result<()> {
    c.plan(g, e)
}

fn case(n: usize, in_place: bool, native: Natives) -> Case {
    Case {
        dt: DataType::Float,
        op: RedOp::Sum,
        nranks: n,
        root: 1,
        bytes: 1024,
        in_place,
        native,
        seed: 5,
    }
}

#[test]
fn replay_catches_a_wrong_generator_index() {
    // alltoall expecting block j from index j·p instead of rank·p.
    let m = Mutant {
        base: &AllToAll,
        fills: |c, f| {
            let p = f.counts.param;
            c.fills(f)
                .into_iter()
                .enumerate()
                .map(|(k, fill)| match fill {
                    Fill::Expected { seed, .. } if k > 0 => {
                        Fill::copy_expected((k - 1) * p, p, seed, ((k - 1) * p) as u64)
                    }
                    other => other,
                })
                .collect()
        },
        plan: same_plan,
    };
    let out = simulate(&m, &case(3, false, Natives::NONE)).unwrap();
    // 256 floats on 3 ranks: p = 84. Only block `rank` of each rank is right.
    assert_eq!(out.wrong, vec![2 * 84; 3]);
}

#[test]
fn replay_catches_a_wrong_in_place_slot() {
    // gather writing its in-place input at the start of the receive buffer.
    let m = Mutant {
        base: &Gather,
        fills: |c, f| {
            let mut v = c.fills(f);
            if let Fill::Input { buf, offset, .. } = &mut v[0]
                && *buf == Buffer::Recv
            {
                *offset = 0;
            }
            v
        },
        plan: same_plan,
    };
    assert_eq!(
        simulate(&m, &case(4, false, Natives::ALL)).unwrap().total(),
        0
    );
    assert!(simulate(&m, &case(4, true, Natives::ALL)).unwrap().wrong[1] > 0);
}

#[test]
fn replay_catches_wrong_offsets_and_pairings() {
    // The grouped gather receiving block r into slot n−1−r.
    let reversed = Mutant {
        base: &Gather,
        fills: same_fills,
        plan: |c, g, emit| {
            let mut steps = planned(c, g);
            for s in &mut steps {
                if let Step::Recv { offset, count, .. } = s
                    && *count > 0
                {
                    *offset = (g.nranks - 1) * *count - *offset;
                }
            }
            steps.into_iter().try_for_each(emit)
        },
    };
    assert!(
        simulate(&reversed, &case(3, false, Natives::NONE))
            .unwrap()
            .wrong[1]
            > 0
    );
    // A ring that receives from the wrong neighbour: sends never matched.
    let crossed = Mutant {
        base: &SendRecv,
        fills: same_fills,
        plan: |c, g, emit| {
            let mut steps = planned(c, g);
            if let Step::Recv { peer, .. } = &mut steps[2] {
                *peer = (g.rank + 1) % g.nranks;
            }
            steps.into_iter().try_for_each(emit)
        },
    };
    let e = simulate(&crossed, &case(3, false, Natives::NONE)).unwrap_err();
    assert!(
        e.contains("which sends nothing") || e.contains("does not receive"),
        "{e}"
    );
    // A block past the end of the buffers the runner allocates.
    let past = Mutant {
        base: &AllToAll,
        fills: same_fills,
        plan: |c, g, emit| {
            let mut steps = planned(c, g);
            if let Step::Send { offset, .. } = &mut steps[1] {
                *offset += g.counts.send;
            }
            steps.into_iter().try_for_each(emit)
        },
    };
    let e = simulate(&past, &case(2, false, Natives::NONE)).unwrap_err();
    assert!(e.contains("outside"), "{e}");
}

/// The bound calls (what the timed loop issues) are the planned steps, resolved: pointers at
/// base + offset·ts, the call's count and root for natives, copies onto themselves dropped.
#[test]
fn binding_resolves_every_planned_step() {
    use super::step::{Bound, Io, bind};
    use crate::gpu::op::open_after_failure;
    let (send, recv) = (0x7f00_0000_0000usize, 0x7f80_0000_0000usize);
    for coll in eleven() {
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
        fn name(&self) -> &'static str {
            "native"
        }
        fn counts(&self, count: usize, _: usize, _: usize) -> Counts {
            Counts::whole(count)
        }
        fn bandwidth(&self, _: &Counts, _: usize, _: usize) -> (f64, f64) {
            (0.0, 1.0)
        }
        fn op_column(&self) -> OpColumn {
            OpColumn::NoneLabel
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
