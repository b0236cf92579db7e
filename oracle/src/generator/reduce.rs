//! Host-side reductions on raw bit patterns, as NCCL performs them: used by tests to fold
//! per-rank inputs and by callers that want a reference result.
//!
//! Integer arithmetic wraps on the element width. Float arithmetic is done in the element type
//! with one correct rounding per operation (narrow types: exact `f64` operation, then
//! round-to-nearest-even; fp8 saturates).

use super::elem::low_mask;
use super::format::Layout;
use nccl_perf_cli::types::{DataType, RedOp};

/// Sign-extends the low `w` bits of `bits`.
fn sext(bits: u64, w: u32) -> i64 {
    ((bits << (64 - w)) as i64) >> (64 - w)
}

/// Width in bits of one element.
fn width_bits(dt: DataType) -> u32 {
    8 * dt.size() as u32
}

/// Applies a float binary operation in the element type of layout `l`.
fn float_op(dt: DataType, l: Layout, a: u64, b: u64, f: impl Fn(f64, f64) -> f64) -> u64 {
    if dt == DataType::Double {
        f(f64::from_bits(a), f64::from_bits(b)).to_bits()
    } else {
        l.from_f64(f(l.to_f64(a), l.to_f64(b)))
    }
}

/// Combines two elements with `op` (sum, avg and mulsum add; the pre- and post-steps are
/// [`premul_bits`] and [`postop_bits`]). Inputs and result are zero-extended bit patterns.
pub fn reduce_bits(dt: DataType, op: RedOp, a: u64, b: u64) -> u64 {
    let w = width_bits(dt);
    let mask = low_mask(w);
    let (a, b) = (a & mask, b & mask);
    if let Some(l) = Layout::of(dt) {
        return match op {
            RedOp::Sum | RedOp::Avg | RedOp::MulSum => float_op(dt, l, a, b, |x, y| x + y),
            RedOp::Prod => float_op(dt, l, a, b, |x, y| x * y),
            RedOp::Max => {
                if l.less(a, b) {
                    b
                } else {
                    a
                }
            }
            RedOp::Min => {
                if l.less(b, a) {
                    b
                } else {
                    a
                }
            }
        };
    }
    let less = |x: u64, y: u64| {
        if dt.is_signed_int() {
            sext(x, w) < sext(y, w)
        } else {
            x < y
        }
    };
    match op {
        RedOp::Sum | RedOp::Avg | RedOp::MulSum => a.wrapping_add(b) & mask,
        RedOp::Prod => a.wrapping_mul(b) & mask,
        RedOp::Max => {
            if less(a, b) {
                b
            } else {
                a
            }
        }
        RedOp::Min => {
            if less(b, a) {
                b
            } else {
                a
            }
        }
    }
}

/// The PreMulSum step: for `mulsum`, rank `rank`'s input times 1 (even rank) or 2 (odd rank)
/// in the element type (wrapping for integers); every other op returns `bits` unchanged.
pub fn premul_bits(dt: DataType, op: RedOp, rank: u32, bits: u64) -> u64 {
    if op != RedOp::MulSum || rank.is_multiple_of(2) {
        return bits & low_mask(width_bits(dt));
    }
    reduce_bits(dt, RedOp::Sum, bits, bits)
}

/// The post step: for `avg`, the sum divided by `rn` (floats: correctly rounded division;
/// integers: C division truncating toward zero, on the signed value for signed types). Every
/// other op, and `rn == 0`, returns `bits` unchanged.
pub fn postop_bits(dt: DataType, op: RedOp, rn: u32, bits: u64) -> u64 {
    let w = width_bits(dt);
    let bits = bits & low_mask(w);
    if op != RedOp::Avg || rn == 0 {
        return bits;
    }
    if let Some(l) = Layout::of(dt) {
        // Divide by the exact integer rn (it may not be representable in a narrow type).
        let n = f64::from(rn);
        return if dt == DataType::Double {
            (f64::from_bits(bits) / n).to_bits()
        } else {
            l.from_f64(l.to_f64(bits) / n)
        };
    }
    let n = i64::from(rn);
    let q = if dt.is_signed_int() {
        (sext(bits, w) / n) as u64
    } else {
        bits / rn as u64
    };
    q & low_mask(w)
}

/// Folds `(rank, bits)` inputs left to right as NCCL would: pre-step on each input, `op`
/// between them, post-step with `rn` ranks on the result. `None` when there is no input.
pub fn fold_bits(
    dt: DataType,
    op: RedOp,
    rn: u32,
    inputs: impl IntoIterator<Item = (u32, u64)>,
) -> Option<u64> {
    let acc = inputs
        .into_iter()
        .map(|(rank, bits)| premul_bits(dt, op, rank, bits))
        .reduce(|acc, x| reduce_bits(dt, op, acc, x))?;
    Some(postop_bits(dt, op, rn, acc))
}
