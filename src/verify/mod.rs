//! Data validation: a generator whose results are exact in any reduction order, its host mirror,
//! and the CUDA kernels (compiled at run time by NVRTC) that fill and check GPU buffers.
//!
//! Kernel interface (source in `kernels/verifiable.cu`, names built by the functions in
//! `kernels`):
//! - `np_input_<type>(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed)`:
//!   `buf[i] = input(op, rn, rme, seed, ix0 + i)`; `op` = -1 for the copy pattern (Nil), else the
//!   index of the op in [`crate::types::RedOp::ALL`]. With `rn == 1` every op becomes Nil.
//! - `np_expected_<type>(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed)`.
//! - `np_mismatch_<bits>(const void* got, const void* want, u64 count, u64 tol, u64* nwrong)`:
//!   atomically adds to `*nwrong` the number of elements whose bit patterns, read as unsigned
//!   integers of `bits` width, differ by more than `tol`.

pub mod generator;
pub mod kernels;
