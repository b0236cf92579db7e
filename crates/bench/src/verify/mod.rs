//! Data validation: the CUDA kernels (compiled at run time by NVRTC) of a generator whose results
//! are exact in any reduction order, which fill and check GPU buffers. Its host mirror, used only
//! by tests, is the `nccl-perf-oracle` crate (`oracle/`).
//!
//! Kernel interface (source in `kernels/verifiable.cu`, names built by the functions in
//! `kernel_source`):
//! - `np_input_<type>(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed)`:
//!   `buf[i] = input(op, rn, rme, seed, ix0 + i)`; `op` = -1 for the copy pattern (Nil), else the
//!   index of the op in [`crate::types::RedOp::ALL`]. With `rn == 1` every op becomes Nil.
//! - `np_expected_<type>(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed)`.
//! - `np_mismatch_<bits>(const void* got, const void* want, u64 count, u64 tol, u64* nwrong)`:
//!   atomically adds to `*nwrong` the number of elements whose bit patterns, read as unsigned
//!   integers of `bits` width, differ by more than `tol`.

pub mod kernel_source;

use crate::types::{DataType, RedOp};

/// Largest allowed difference between result and expected bit patterns (read as unsigned
/// integers of the element width): 2 for float types with `avg`, 0 otherwise. The checker
/// kernels count an element wrong beyond it; the host mirror of the generator (the
/// `nccl-perf-oracle` test crate) is exact within it.
pub fn tolerance(dt: DataType, op: Option<RedOp>) -> u64 {
    if dt.is_float() && op == Some(RedOp::Avg) {
        2
    } else {
        0
    }
}
