//! Host mirror of nccl-tests' verifiable data generator (its `verifiable/` library), bit-exact with
//! the CUDA kernels in `kernels/verifiable.cu`.
//!
//! Every element is a pure function of `(type, op, rn, rme, seed, ix)`. The inputs of the `rn`
//! ranks are built so that reducing them with `op` gives [`expected_bits`] exactly, whatever the
//! reduction order (within [`tolerance`] for float `avg`).
//!
//! Bit patterns are carried as `u64`, zero-extended from the element width.

mod elem;
pub mod format;
pub mod prim;
mod reduce;
#[cfg(test)]
mod tests;

pub use nccl_perf_bench::verify::tolerance;
pub use reduce::{fold_bits, postop_bits, premul_bits, reduce_bits};

use elem::{
    float_avg, float_minmax, float_mulsum, float_prod, float_sum, int_input, nil_float, nil_int,
};
use format::Layout;
use nccl_perf_cli::types::{DataType, RedOp};

/// The op actually generated: `None` (the copy pattern, "Nil") when `op` is `None` or `rn <= 1`.
pub fn effective_op(op: Option<RedOp>, rn: u32) -> Option<RedOp> {
    if rn <= 1 { None } else { op }
}

/// Bit pattern of rank `rme`'s input element `ix` (of `rn` ranks, op `op`, seed `seed`).
///
/// `op == None` is the copy pattern (Nil), used by non-reduction collectives; `rn <= 1` turns
/// every op into Nil.
pub fn input_bits(dt: DataType, op: Option<RedOp>, rn: u32, rme: u32, seed: u64, ix: u64) -> u64 {
    let op = effective_op(op, rn);
    let Some(l) = Layout::of(dt) else {
        let w = 8 * dt.size() as u32;
        return match op {
            None => nil_int(w, seed, ix),
            Some(op) => int_input(w, op, rme, seed, ix),
        };
    };
    match op {
        None | Some(RedOp::Max) | Some(RedOp::Min) => nil_float(l, rme, seed, ix),
        Some(RedOp::Sum) => float_sum(l, rn, rme, seed, ix).0,
        Some(RedOp::Prod) => float_prod(l, rn, rme, seed, ix).0,
        Some(RedOp::MulSum) => float_mulsum(l, rn, rme, seed, ix).0,
        Some(RedOp::Avg) => float_avg(dt, l, rn, rme, seed).0,
    }
}

/// Bit pattern that element `ix` of the reduction result must have (copy pattern: the value
/// rank 0 sends).
pub fn expected_bits(dt: DataType, op: Option<RedOp>, rn: u32, seed: u64, ix: u64) -> u64 {
    let op = effective_op(op, rn);
    let Some(l) = Layout::of(dt) else {
        let w = 8 * dt.size() as u32;
        return match op {
            None => nil_int(w, seed, ix),
            Some(op) => {
                let inputs = (0..rn).map(|r| (r, int_input(w, op, r, seed, ix)));
                fold_bits(dt, op, rn, inputs).unwrap_or(0)
            }
        };
    };
    match op {
        None => nil_float(l, 0, seed, ix),
        Some(op @ (RedOp::Max | RedOp::Min)) => float_minmax(l, op, rn, seed, ix),
        Some(RedOp::Sum) => float_sum(l, rn, 0, seed, ix).1,
        Some(RedOp::Prod) => float_prod(l, rn, 0, seed, ix).1,
        Some(RedOp::MulSum) => float_mulsum(l, rn, 0, seed, ix).1,
        Some(RedOp::Avg) => float_avg(dt, l, rn, 0, seed).1,
    }
}
