//! The test oracle of nccl-perf: what the GPUs must produce, computed on the host.
//!
//! - [`generator`]: the host mirror of the verifiable data generator, bit-exact with the CUDA
//!   kernels in `kernels/verifiable.cu` (checked against them on a GPU by
//!   `tests/gpu_generator.rs`, and against the kernels compiled as host C++ without one).
//! - [`replay`]: the steps a collective plans, replayed on host buffers as NCCL would execute
//!   them, and the receive buffers compared with the expected fills.
//! - [`locate_model`]: a model cluster (per-node, per-link, per-rail bandwidths, injected
//!   faults, seeded noise) that runs locate's rounds without GPUs.
//!
//! Only tests use it: it is a separate crate of the workspace, a dev-dependency of the root
//! package `nccl-perf`, so no shipped crate can call it (it depends on `nccl-perf-cli`,
//! `nccl-perf-locate` and `nccl-perf-bench`, never the other way round).

pub mod generator;
pub mod locate_model;
pub mod replay;
