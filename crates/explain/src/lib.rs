//! Explain: for every row of a benchmark, what NCCL did (algorithm, protocol, channels, the
//! transport path), what it should have reached (NCCL's own cost model, the hardware's ceiling,
//! a table of expected bus bandwidths per GPU model), and a verdict in plain words.
//!
//! This crate is pure logic: the benchmark fills [`observed::Run`] from NCCL's profiler and
//! tuner plugin interfaces (`crates/capture`) and from the hardware it reads; the `nccl-perf`
//! tool fills the same type from a log or a JSON file, where NCCL's view is missing. Either way
//! [`explain`] turns it into lines and fields.

pub mod observed;
