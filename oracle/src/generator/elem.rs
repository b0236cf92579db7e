//! Element generators of nccl-tests' `verifiable/` library. Each float generator returns `(input,
//! expected)` bit patterns for one element; the expected value never depends on `rme`.

use super::format::{HALF, Layout};
use super::prim::{Width, hash, mix, mulhi32, shuffle, sum_xy};
use nccl_perf_cli::types::{DataType, RedOp};

/// Mask of the low `w` bits (`w` in 1..=64).
pub(super) fn low_mask(w: u32) -> u64 {
    u64::MAX >> (64 - w)
}

/// Index hash shared by the integer generators and the float copy pattern.
fn index_hash(rme: u32, seed: u64, ix: u64) -> u64 {
    hash(ix ^ (ix << 16) ^ u64::from(rme), seed)
}

/// Copy pattern of an integer type of `w` bits: the top `w` bits of `mix(seed ^ ix)`.
pub(super) fn nil_int(w: u32, seed: u64, ix: u64) -> u64 {
    mix(seed ^ ix) >> (64 - w)
}

/// Input of rank `rme` for an integer type of `w` bits and any reduction op.
pub(super) fn int_input(w: u32, op: RedOp, rme: u32, seed: u64, ix: u64) -> u64 {
    let v = index_hash(rme, seed, ix) & low_mask(w);
    if op == RedOp::Prod && v == 0 { 1 } else { v }
}

/// Copy pattern of a float layout (always finite, normal and non-zero).
pub(super) fn nil_float(l: Layout, rme: u32, seed: u64, ix: u64) -> u64 {
    let mut r = index_hash(rme, seed, ix);
    let sign = r & 1;
    r ^= r >> 1;
    let exp = (r & ((1 << (l.e - 1)) - 1)) + (1 << (l.e - 2));
    r ^= r >> l.e;
    l.make(sign, exp, r & l.mant_mask())
}

/// Mantissa-integer width: 64 bits for double, 32 otherwise.
fn width(l: Layout) -> Width {
    if l.m > 31 { Width::W64 } else { Width::W32 }
}

/// Random exponent base in `[M+1, 2^E − 2]` drawn from the high half of `rng`.
fn sum_base(l: Layout, rng: u64) -> u32 {
    let span = ((1u32 << l.e) - 1) - (l.m + 1);
    (l.m + 1) + mulhi32((rng >> 32) as u32, span)
}

/// `ceil(rn / 2)` without overflow.
fn half_up(rn: u32) -> u32 {
    rn / 2 + (rn & 1)
}

/// Float sum: even shuffled ranks add, odd ones subtract; all partial sums are exact.
pub(super) fn float_sum(l: Layout, rn: u32, rme: u32, seed: u64, ix: u64) -> (u64, u64) {
    let w = width(l);
    let ymax = (1u64 << (l.m + 1)) - 1;
    let mut rng = hash(seed, ix);
    let mut ysign = rng & 1;
    let mut xsign = ysign;
    let base = sum_base(l, rng);
    rng = mix(rng);
    let r = shuffle(rn, rme, &mut rng);
    let mut y0 = 0;
    let mut x = sum_xy(w, half_up(rn), r / 2, &mut rng, ymax, &mut y0, false);
    let mut y = y0;
    if rn / 2 != 0 {
        let mut y1 = y0;
        let x1 = sum_xy(w, rn / 2, r / 2, &mut rng, ymax, &mut y1, true);
        ysign ^= u64::from(y0 < y1);
        y = y0.abs_diff(y1);
        xsign ^= u64::from(r % 2);
        if r % 2 == 1 {
            x = x1;
        }
    }
    (l.normalise(xsign, base, x), l.normalise(ysign, base, y))
}

/// Float prod: one shuffled rank contributes the mantissa, the others powers of two.
pub(super) fn float_prod(l: Layout, rn: u32, rme: u32, seed: u64, ix: u64) -> (u64, u64) {
    let mut rng = hash(seed, ix);
    let r = shuffle(rn, rme, &mut rng);
    let ysign = u64::from((rn / 2) % 2);
    let xsign = u64::from(r % 2);
    let bias = u64::from(l.bias());
    let mut ye = 0;
    let xe = sum_xy(Width::W32, rn, r, &mut rng, bias, &mut ye, false);
    let mut ym = rng & l.mant_mask();
    if ym == 0 {
        ym = 1;
    }
    let xm = if r == 0 { ym } else { 0 };
    (l.make(xsign, xe + bias, xm), l.make(ysign, ye + bias, ym))
}

/// Float PreMulSum with scalar 1 on even ranks and 2 on odd ranks.
pub(super) fn float_mulsum(l: Layout, rn: u32, rme: u32, seed: u64, ix: u64) -> (u64, u64) {
    let w = width(l);
    let ymax = (1u64 << (l.m + 1)) - 1;
    let mut rng = hash(seed, ix);
    let ysign = rng & 1;
    let base = sum_base(l, rng);
    rng = mix(rng);
    let s0 = shuffle(half_up(rn), rme / 2, &mut rng);
    let s1 = shuffle(rn / 2, rme / 2, &mut rng);
    let mut y0 = 0;
    let x0 = sum_xy(w, half_up(rn), s0, &mut rng, ymax >> 1, &mut y0, false);
    let (mut x1, mut y1) = (0, 0);
    if rn / 2 != 0 {
        x1 = sum_xy(w, rn / 2, s1, &mut rng, ymax >> 2, &mut y1, false);
    }
    let x = if rme.is_multiple_of(2) { x0 } else { x1 };
    (
        l.normalise(ysign, base, x),
        l.normalise(ysign, base, y0 + 2 * y1),
    )
}

/// Float avg: independent of the index; two shuffled ranks hold `1 + m`, the rest zero.
pub(super) fn float_avg(dt: DataType, l: Layout, rn: u32, rme: u32, seed: u64) -> (u64, u64) {
    let mut rng = seed;
    let r = shuffle(rn, rme, &mut rng);
    let mask = l.mant_mask();
    let m = rng.wrapping_mul(if r == 0 { 1 } else { 0xbeef }) & mask;
    // 1 + m <= 2^M: an exact integer of the layout.
    let input = if r < 2 {
        l.normalise(0, l.bias() + l.m, 1 + m)
    } else {
        0
    };
    let m0 = rng & mask;
    let m1 = rng.wrapping_mul(0xbeef) & mask;
    let expected = if dt == DataType::Double {
        let inv = 1.0 / f64::from(rn);
        ((1 + m0) as f64 * inv + (1 + m1) as f64 * inv).to_bits()
    } else {
        let inv = (1.0 / f64::from(rn)) as f32;
        let a = l.from_f64(f64::from((1 + m0) as u32 as f32 * inv));
        let b = l.from_f64(f64::from((1 + m1) as u32 as f32 * inv));
        let (a, b) = (l.to_f64(a), l.to_f64(b));
        match dt {
            DataType::Float => u64::from((a as f32 + b as f32).to_bits()),
            DataType::F8e4m3 | DataType::F8e5m2 => l.from_f64(HALF.to_f64(HALF.from_f64(a + b))),
            _ => l.from_f64(a + b),
        }
    };
    (input, expected)
}

/// Float min/max: inputs are the copy pattern of each rank; expected folds them.
pub(super) fn float_minmax(l: Layout, op: RedOp, rn: u32, seed: u64, ix: u64) -> u64 {
    let mut best = nil_float(l, 0, seed, ix);
    for r in 1..rn {
        let v = nil_float(l, r, seed, ix);
        let take = if op == RedOp::Max {
            l.less(best, v)
        } else {
            l.less(v, best)
        };
        if take {
            best = v;
        }
    }
    best
}
