//! The GPU side: CUDA driver calls, the NCCL loader, and the validation kernels.

pub mod driver;
pub mod kernel_image;
pub mod kernels;
pub mod nccl;
pub mod ptx;
