//! The facts about the suite that several crates need, written once, in a crate with no
//! dependencies so that every other crate of the workspace can read it: the benchmark table
//! ([`benchmarks`]: name, NCCL operation, busbw factor, traffic, columns) and the environment
//! variables the benchmarks read ([`environment`]); and two conventions every program shares:
//! numbers read as nccl-tests' C code reads them ([`cnum`]) and standard error written one line
//! at a time ([`stderr`], [`eline!`]).
//!
//! The benchmarks (`nccl-perf-bench`) time what the table describes, `--explain`
//! (`nccl-perf-explain`) bounds it, the report (`nccl-perf-report`) reads rank counts back from
//! it and the tool (`nccl-perf-tool`) documents both.

pub mod benchmarks;
pub mod cnum;
pub mod environment;
pub mod stderr;

pub use benchmarks::{BENCHMARKS, Benchmark, BusFactor, OpColumn, Traffic, benchmark};
