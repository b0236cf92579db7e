//! Explain: for every row of a benchmark, what NCCL did (algorithm, protocol, channels, the
//! transport path), what it should have reached (NCCL's own cost model, the hardware's ceiling,
//! a table of expected bus bandwidths per GPU model), and a verdict in plain words.
//!
//! This crate is pure logic: the benchmark fills [`observed::Run`] from NCCL's profiler and
//! tuner plugin interfaces (`crates/capture`) and from the hardware it reads
//! ([`hardware::probe`]); the `nccl-perf` tool fills the same type from a log or a JSON file,
//! where NCCL's view is missing. Either way [`explain`] turns it into lines and fields.
//! docs/explain.md is the user's guide.

pub mod baseline;
pub mod ceiling;
pub mod hardware;
pub mod health;
mod judge;
mod nics;
#[allow(unsafe_code)]
mod nvml;
pub mod observed;
pub mod render;
mod rows;
pub mod sku;
mod units;
pub mod verdict;

pub use hardware::{Hardware, probe};
pub use sku::SkuTable;
pub use verdict::{Explanation, RowFields, explain};

impl Explanation {
    /// The lines and the verdict as text, each line after `# ` (what the benchmarks and the
    /// tool print after a table).
    pub fn to_text(&self) -> String {
        self.lines
            .iter()
            .map(|l| format!("# {l}\n"))
            .chain(std::iter::once(format!("# verdict: {}\n", self.verdict)))
            .collect()
    }
}
