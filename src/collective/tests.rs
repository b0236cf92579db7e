//! Tests across the collectives: the host replay (`sim`) of every collective for 1, 2, 3, 4
//! and 8 ranks, every root, both halves, several datatypes, ops and sizes: what NCCL delivers
//! into each receive buffer must equal the expected fills bit for bit (within the runner's
//! tolerance for float `avg`).

use super::sim::{Case, simulate};
use super::*;
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
fn replay_all_gather() {
    assert!(replay(&AllGather, &RANKS, &COPY_TYPES, &SIZES, &ONE) > 0);
}

#[test]
fn replay_broadcast() {
    assert!(replay(&Broadcast, &RANKS, &COPY_TYPES, &SIZES, &ONE) > 0);
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
