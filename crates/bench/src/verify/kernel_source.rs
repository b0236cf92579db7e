//! CUDA source of the generator and checker kernels, and their names.
//!
//! The source is compiled at run time by NVRTC (it includes no header). Kernel parameters are
//! described in [`crate::verify`].

use crate::types::{DataType, RedOp};

/// CUDA C++ source of every kernel (`kernels/verifiable.cu`).
pub const SOURCE: &str = include_str!("../../../../kernels/verifiable.cu");

/// Threads per block of every kernel launch.
pub const BLOCK: u32 = 512;

/// Largest grid [`launch_dims`] returns: 8 blocks of 512 threads for each of an H200's 132 SMs
/// (two full waves at the 2048 threads an SM holds); grid-stride loops cover the rest.
pub const MAX_GRID: u32 = 132 * 8;

/// Name of the kernel that fills a buffer with rank inputs of type `dt`: `np_input_<type>`.
pub fn input_kernel(dt: DataType) -> String {
    format!("np_input_{}", dt.name())
}

/// Name of the kernel that fills a buffer with expected results of type `dt`:
/// `np_expected_<type>`.
pub fn expected_kernel(dt: DataType) -> String {
    format!("np_expected_{}", dt.name())
}

/// Name of the kernel that counts mismatching elements of `dt`'s width: `np_mismatch_<bits>`.
pub fn mismatch_kernel(dt: DataType) -> String {
    format!("np_mismatch_{}", 8 * dt.size())
}

/// The `op` kernel argument: -1 for the copy pattern (`None`), else the op's index in
/// [`RedOp::ALL`].
pub fn op_code(op: Option<RedOp>) -> i32 {
    match op {
        None => -1,
        Some(RedOp::Sum) => 0,
        Some(RedOp::Prod) => 1,
        Some(RedOp::Max) => 2,
        Some(RedOp::Min) => 3,
        Some(RedOp::Avg) => 4,
        Some(RedOp::MulSum) => 5,
    }
}

/// `(grid, block)` for a grid-stride kernel over `count` elements: blocks of [`BLOCK`]
/// threads, one thread per element up to [`MAX_GRID`] blocks, never an empty grid.
pub fn launch_dims(count: u64) -> (u32, u32) {
    let blocks = count
        .div_ceil(u64::from(BLOCK))
        .clamp(1, u64::from(MAX_GRID));
    (blocks as u32, BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names() {
        assert_eq!(input_kernel(DataType::Float), "np_input_float");
        assert_eq!(expected_kernel(DataType::Bfloat16), "np_expected_bfloat16");
        assert_eq!(mismatch_kernel(DataType::F8e4m3), "np_mismatch_8");
        assert_eq!(mismatch_kernel(DataType::Half), "np_mismatch_16");
        assert_eq!(mismatch_kernel(DataType::Uint32), "np_mismatch_32");
        assert_eq!(mismatch_kernel(DataType::Double), "np_mismatch_64");
    }

    #[test]
    fn op_codes_follow_redop_order() {
        assert_eq!(op_code(None), -1);
        for (i, op) in RedOp::ALL.into_iter().enumerate() {
            assert_eq!(op_code(Some(op)), i as i32);
        }
    }

    #[test]
    fn launch_dims_bounds() {
        assert_eq!(launch_dims(0), (1, 512));
        assert_eq!(launch_dims(1), (1, 512));
        assert_eq!(launch_dims(512), (1, 512));
        assert_eq!(launch_dims(513), (2, 512));
        assert_eq!(launch_dims(512 * 1056), (1056, 512));
        assert_eq!(launch_dims(u64::MAX), (MAX_GRID, 512));
    }

    /// Every kernel the host asks for is defined, with the documented parameter list.
    #[test]
    fn source_defines_every_kernel() {
        assert!(
            !SOURCE
                .lines()
                .any(|l| l.trim_start().starts_with("#include")),
            "the NVRTC source must stay header-free"
        );
        for dt in DataType::ALL {
            let input = format!(
                "extern \"C\" __global__ void {}(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed)",
                input_kernel(dt)
            );
            let expected = format!(
                "extern \"C\" __global__ void {}(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed)",
                expected_kernel(dt)
            );
            let mismatch = format!(
                "extern \"C\" __global__ void {}(const void* got, const void* want, u64 count, u64 tol, u64* nwrong)",
                mismatch_kernel(dt)
            );
            for sig in [input, expected, mismatch] {
                assert!(SOURCE.contains(&sig), "missing in verifiable.cu: {sig}");
            }
        }
        for sig in [
            "typedef unsigned long long u64;",
            "typedef unsigned int u32;",
        ] {
            assert!(SOURCE.contains(sig));
        }
    }
}
