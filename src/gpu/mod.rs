//! The GPU side: CUDA driver calls, the NCCL loader, and the validation kernels.

pub mod driver;
pub mod kernels;
pub mod nccl;
