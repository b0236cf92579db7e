//! The host replay of every collective (the test oracle's `replay`) for 1, 2, 3, 4 and 8
//! ranks, every root, both halves, several datatypes, ops and sizes: what NCCL delivers into
//! each receive buffer must equal the expected fills bit for bit (within the runner's tolerance
//! for float `avg`). Mutated collectives show that the replay catches wrong seeds, offsets and
//! pairings.

use nccl_perf_bench::collective::{
    AllGather, AllReduce, AllToAll, AllToAllV, Benchmark, Broadcast, Buffer, Collective, Counts,
    Fill, FillCtx, Gather, Geometry, Hypercube, Natives, OpColumn, Reduce, ReduceScatter, Scatter,
    SendRecv, Step,
};
use nccl_perf_bench::error::Result;
use nccl_perf_cli::types::{DataType, RedOp};
use oracle::replay::{Case, planned, simulate};

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
    fn facts(&self) -> &'static Benchmark {
        self.base.facts()
    }
    /// The in-place half is checked too, whatever the base reports.
    fn reports_in_place_errors(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "mutant"
    }
    fn operation(&self) -> &'static str {
        self.base.operation()
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
