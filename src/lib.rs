//! nccl-perf: a native reimplementation of NVIDIA's nccl-tests `*_perf` benchmarks.

pub mod report;
pub mod types;
pub mod verify;
