//! Order-independence tests: fold the per-rank inputs as NCCL would, in several orders, and
//! compare with the expected values bit for bit (within the tolerance for float `avg`).

use super::format::Layout;
use super::prim::{hash, mix};
use super::*;

/// Rank counts tested in depth: every count up to 12, then the edges around powers of two, up
/// to 72. Every other count in 1..=72 gets a lighter pass ([`LIGHT`] indices).
const NS: &[u32] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16, 17, 23, 31, 32, 33, 47, 63, 64, 65, 71, 72,
];
const SEEDS: [u64; 3] = [1, 0x2a, 0xfeed_0000_dead_beef];
/// Indices per (op, n, seed) for the counts in [`NS`] and for the others.
const DEEP: u64 = 48;
const LIGHT: u64 = 8;

/// Alternately small indices and pseudo-random ones over the whole 64-bit range.
fn indices(n: u32, seed: u64, count: u64) -> impl Iterator<Item = u64> {
    (0..count).map(move |k| {
        if k % 2 == 0 {
            k / 2
        } else {
            hash(u64::from(n) ^ (k << 8), seed)
        }
    })
}

fn asc(n: u32) -> Vec<u32> {
    (0..n).collect()
}

fn desc(n: u32) -> Vec<u32> {
    (0..n).rev().collect()
}

/// Fisher–Yates permutation driven by `mix`.
fn permuted(n: u32, key: u64) -> Vec<u32> {
    let mut v = asc(n);
    let mut s = key;
    for i in (1..v.len()).rev() {
        s = mix(s);
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

/// Sequential fold in the given rank order.
fn fold_in(dt: DataType, op: RedOp, n: u32, inputs: &[u64], order: &[u32]) -> u64 {
    fold_bits(dt, op, n, order.iter().map(|&r| (r, inputs[r as usize]))).unwrap()
}

/// Pairwise-tree fold (adjacent pairs, level by level), as ring/tree algorithms combine.
fn fold_tree(dt: DataType, op: RedOp, n: u32, inputs: &[u64]) -> u64 {
    let mut level: Vec<u64> = (0..n)
        .map(|r| premul_bits(dt, op, r, inputs[r as usize]))
        .collect();
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|c| {
                if c.len() == 2 {
                    reduce_bits(dt, op, c[0], c[1])
                } else {
                    c[0]
                }
            })
            .collect();
    }
    postop_bits(dt, op, n, level[0])
}

/// Checks every op for one type, every rank count in 1..=72; returns the number of comparisons.
fn check_type(dt: DataType) -> u64 {
    let mut checks = 0;
    for op in RedOp::ALL {
        let tol = tolerance(dt, Some(op));
        for n in 1..=72u32 {
            let count = if NS.contains(&n) { DEEP } else { LIGHT };
            for seed in SEEDS {
                for ix in indices(n, seed, count) {
                    let inputs: Vec<u64> = (0..n)
                        .map(|r| input_bits(dt, Some(op), n, r, seed, ix))
                        .collect();
                    let want = expected_bits(dt, Some(op), n, seed, ix);
                    let orders = [
                        ("ascending", fold_in(dt, op, n, &inputs, &asc(n))),
                        ("descending", fold_in(dt, op, n, &inputs, &desc(n))),
                        (
                            "permuted",
                            fold_in(dt, op, n, &inputs, &permuted(n, ix ^ seed)),
                        ),
                        ("tree", fold_tree(dt, op, n, &inputs)),
                    ];
                    for (name, got) in orders {
                        assert!(
                            got.abs_diff(want) <= tol,
                            "{} {} n={n} seed={seed:#x} ix={ix:#x} {name} fold: got {got:#x} want {want:#x} \
                             inputs {inputs:x?}",
                            dt.name(),
                            op.name()
                        );
                        checks += 1;
                    }
                }
            }
        }
    }
    checks
}

macro_rules! fold_tests {
    ($($name:ident: $dt:expr;)*) => {$(
        #[test]
        fn $name() {
            assert!(check_type($dt) > 0);
        }
    )*};
}

fold_tests! {
    fold_orders_int8: DataType::Int8;
    fold_orders_uint8: DataType::Uint8;
    fold_orders_int32: DataType::Int32;
    fold_orders_uint32: DataType::Uint32;
    fold_orders_int64: DataType::Int64;
    fold_orders_uint64: DataType::Uint64;
    fold_orders_half: DataType::Half;
    fold_orders_float: DataType::Float;
    fold_orders_double: DataType::Double;
    fold_orders_bfloat16: DataType::Bfloat16;
    fold_orders_f8e4m3: DataType::F8e4m3;
    fold_orders_f8e5m2: DataType::F8e5m2;
}

#[test]
fn single_rank_and_nil_are_the_copy_pattern() {
    for dt in DataType::ALL {
        for seed in SEEDS {
            for ix in 0..64 {
                let nil = input_bits(dt, None, 1, 0, seed, ix);
                assert_eq!(expected_bits(dt, None, 7, seed, ix), nil);
                assert_eq!(input_bits(dt, None, 7, 0, seed, ix), nil);
                for op in RedOp::ALL {
                    assert_eq!(input_bits(dt, Some(op), 1, 0, seed, ix), nil);
                    assert_eq!(expected_bits(dt, Some(op), 1, seed, ix), nil);
                }
                assert!(
                    dt.size() == 8 || nil >> (8 * dt.size()) == 0,
                    "{dt:?} {nil:#x} too wide"
                );
                if let Some(l) = Layout::of(dt) {
                    let v = l.to_f64(nil);
                    assert!(
                        v.is_finite() && v.abs() >= l.to_f64(1 << l.m),
                        "{dt:?} {nil:#x}"
                    );
                    // rme enters the float copy pattern (min/max inputs differ per rank).
                    if dt.size() >= 4 {
                        assert_ne!(input_bits(dt, None, 1, 1, seed, ix), nil);
                    }
                }
            }
        }
    }
}

#[test]
fn fixed_element_values() {
    // Integer copy pattern: top bits of mix(seed ^ ix).
    assert_eq!(input_bits(DataType::Uint64, None, 1, 0, 0, 0), mix(0));
    assert_eq!(input_bits(DataType::Uint8, None, 1, 0, 0, 0), 0x1d);
    assert_eq!(input_bits(DataType::Int32, None, 1, 0, 0, 1), 0x7f4a_7c13);
    assert_eq!(
        input_bits(DataType::Int8, Some(RedOp::Sum), 4, 0, 0, 0),
        hash(0, 0) & 0xff
    );
    let fixed = [
        (DataType::Half, Some(RedOp::Sum), 5, 3, 7, 11),
        (DataType::Float, Some(RedOp::Prod), 8, 1, 7, 12),
        (DataType::Double, Some(RedOp::MulSum), 3, 2, 7, 13),
        (DataType::Bfloat16, Some(RedOp::Avg), 4, 1, 7, 14),
        (DataType::F8e4m3, Some(RedOp::Sum), 72, 71, 7, 15),
        (DataType::F8e5m2, None, 1, 0, 7, 16),
    ];
    let got: Vec<(u64, u64)> = fixed
        .iter()
        .map(|&(dt, op, rn, rme, seed, ix)| {
            (
                input_bits(dt, op, rn, rme, seed, ix),
                expected_bits(dt, op, rn, seed, ix),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0x7b36, 0x6890),
            (0x4300_0000, 0x622e_a3f7),
            (0xacf0_0000_0000_0000, 0xb03b_8e1b_0cb8_e40c),
            (0x4298, 0x4232),
            (0x0, 0xaa),
            (0xda, 0xda),
        ]
    );
}

#[test]
fn avg_inputs_have_two_nonzero_ranks() {
    for dt in DataType::ALL.into_iter().filter(|d| d.is_float()) {
        for n in [2u32, 3, 8, 72] {
            for seed in SEEDS {
                let nz = (0..n)
                    .filter(|&r| input_bits(dt, Some(RedOp::Avg), n, r, seed, 5) != 0)
                    .count();
                assert_eq!(nz, 2, "{dt:?} n={n}");
                // Independent of the index.
                assert_eq!(
                    expected_bits(dt, Some(RedOp::Avg), n, seed, 5),
                    expected_bits(dt, Some(RedOp::Avg), n, seed, 1 << 40)
                );
            }
        }
    }
}

#[test]
fn tolerance_and_host_reductions() {
    for dt in DataType::ALL {
        for op in RedOp::ALL {
            let want = if dt.is_float() && op == RedOp::Avg {
                2
            } else {
                0
            };
            assert_eq!(tolerance(dt, Some(op)), want);
        }
        assert_eq!(tolerance(dt, None), 0);
    }
    assert_eq!(fold_bits(DataType::Int8, RedOp::Sum, 2, []), None);
    // int8: (-7) / 2 truncates toward zero; uint8 wraps.
    assert_eq!(postop_bits(DataType::Int8, RedOp::Avg, 2, 0xf9), 0xfd);
    assert_eq!(reduce_bits(DataType::Uint8, RedOp::Sum, 0xff, 2), 1);
    assert_eq!(reduce_bits(DataType::Int32, RedOp::Max, 0xffff_ffff, 1), 1);
    assert_eq!(
        reduce_bits(DataType::Uint32, RedOp::Max, 0xffff_ffff, 1),
        0xffff_ffff
    );
    assert_eq!(premul_bits(DataType::Int64, RedOp::MulSum, 3, 1 << 63), 0);
    assert_eq!(
        premul_bits(DataType::Half, RedOp::MulSum, 1, 0x3c00),
        0x4000
    );
    assert_eq!(
        premul_bits(DataType::Half, RedOp::MulSum, 2, 0x3c00),
        0x3c00
    );
    // fp8 e4m3: 448 + 448 saturates; 1.0 / 3 rounds to 0.34375 (0x2b).
    assert_eq!(reduce_bits(DataType::F8e4m3, RedOp::Sum, 0x7e, 0x7e), 0x7e);
    assert_eq!(postop_bits(DataType::F8e4m3, RedOp::Avg, 3, 0x38), 0x2b);
    assert_eq!(
        reduce_bits(
            DataType::Double,
            RedOp::Prod,
            2f64.to_bits(),
            3f64.to_bits()
        ),
        6f64.to_bits()
    );
}
