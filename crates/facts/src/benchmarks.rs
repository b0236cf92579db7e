//! The benchmark table: one entry per `*_perf` program, the one place its name, NCCL operation,
//! busbw factor, traffic and columns are written. The benchmarks (`nccl-perf-bench`'s
//! `collective/`) take their factor and columns from it, `--explain` its factor and traffic,
//! the tool its names; the root's `tests/benchmarks.rs` checks that every program of `src/bin/`
//! has an entry, and every entry a program and a collective.
//!
//! A new benchmark is one entry here, its collective file in bench's `collective/` and its
//! program in `src/bin/` (docs/contributing.md, "Adding a benchmark").

/// The bus-bandwidth factor: busbw = algbw × factor on `n` ranks (docs/measurement.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusFactor {
    /// 2(n−1)/n: every rank sends and receives its data twice over (all_reduce).
    TwiceShare,
    /// (n−1)/n: every rank sends or receives all but its own share.
    Share,
    /// 1: busbw is algbw.
    One,
}

impl BusFactor {
    /// The factor on `nranks` ranks (0 on one rank for the shares; 0 ranks count as 1).
    pub fn of(self, nranks: usize) -> f64 {
        let n = nranks.max(1) as f64;
        match self {
            BusFactor::TwiceShare => 2.0 * (n - 1.0) / n,
            BusFactor::Share => (n - 1.0) / n,
            BusFactor::One => 1.0,
        }
    }

    /// The factor as a formula of `n`, as documentation writes it.
    pub fn formula(self) -> &'static str {
        match self {
            BusFactor::TwiceShare => "2(n−1)/n",
            BusFactor::Share => "(n−1)/n",
            BusFactor::One => "1",
        }
    }
}

/// How the data moves between ranks, as `--explain`'s ceilings tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// An NCCL collective reducing the whole buffer onto every rank (all_reduce): the one an
    /// NVLink switch (NVLS) or the network (CollNet) can reduce in.
    ReduceAll,
    /// A rooted NCCL collective (broadcast, reduce): its ring crosses each node once per channel.
    Rooted,
    /// An NCCL collective of one share per rank (all_gather, reduce_scatter).
    Shares,
    /// Point to point: grouped sends and receives with many peers at once (alltoall, alltoallv,
    /// scatter, gather).
    ManyPeers,
    /// Point to point: grouped sends and receives with one peer at a time (sendrecv, hypercube).
    OnePeer,
}

impl Traffic {
    /// Whether the benchmark is grouped sends and receives, with no NCCL algorithm choice.
    pub fn point_to_point(self) -> bool {
        matches!(self, Traffic::ManyPeers | Traffic::OnePeer)
    }
}

/// What the op column shows, whether the op loop runs, and whether the data is reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpColumn {
    /// A reduction: loops over `-o` ops and prints the op name.
    Reduction,
    /// Not a reduction: prints `none`, runs once.
    NoneLabel,
    /// Not a reduction: prints an empty op name, runs once (hypercube).
    Empty,
    /// Not a reduction, yet loops over `-o` ops and prints their names (sendrecv).
    Unused,
}

impl OpColumn {
    /// Whether the `-o` op loop runs.
    pub fn loops(self) -> bool {
        matches!(self, OpColumn::Reduction | OpColumn::Unused)
    }

    /// Whether the data is reduced with the op (bit-exact comparison otherwise).
    pub fn reduces(self) -> bool {
        self == OpColumn::Reduction
    }

    /// The op column of a row measured with the op named `op`.
    pub fn label(self, op: &'static str) -> &'static str {
        match self {
            OpColumn::Reduction | OpColumn::Unused => op,
            OpColumn::NoneLabel => "none",
            OpColumn::Empty => "",
        }
    }
}

/// One benchmark: the program `<name>_perf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Benchmark {
    /// The program's name without `_perf`, e.g. `all_reduce`.
    pub name: &'static str,
    /// The NCCL operation it times, as documentation names it, e.g. `AllReduce`.
    pub operation: &'static str,
    /// Its busbw factor.
    pub bus: BusFactor,
    /// How its data moves.
    pub traffic: Traffic,
    /// Its op column and op loop.
    pub ops: OpColumn,
    /// Whether the root loop runs (the root column shows the root).
    pub rooted: bool,
    /// Whether in-place mismatches are reported (`N/A` in the in-place error column if not).
    pub in_place_errors: bool,
}

impl Benchmark {
    /// Its busbw factor on `nranks` ranks.
    pub fn bus_factor(&self, nranks: usize) -> f64 {
        self.bus.of(nranks)
    }

    /// The program's name, `<name>_perf`.
    pub fn program(&self) -> String {
        format!("{}_perf", self.name)
    }
}

/// An unrooted benchmark that reports in-place errors (most of them).
const fn plain(
    name: &'static str,
    operation: &'static str,
    bus: BusFactor,
    traffic: Traffic,
    ops: OpColumn,
) -> Benchmark {
    Benchmark {
        name,
        operation,
        bus,
        traffic,
        ops,
        rooted: false,
        in_place_errors: true,
    }
}

/// The same, rooted.
const fn rooted(b: Benchmark) -> Benchmark {
    Benchmark { rooted: true, ..b }
}

/// The same, with no in-place error count (`N/A`).
const fn no_in_place_errors(b: Benchmark) -> Benchmark {
    Benchmark {
        in_place_errors: false,
        ..b
    }
}

use BusFactor::{One, Share, TwiceShare};
use OpColumn::{Empty, NoneLabel, Reduction, Unused};
use Traffic::{ManyPeers, OnePeer, ReduceAll, Rooted, Shares};

/// all_reduce_perf.
pub const ALL_REDUCE: Benchmark =
    plain("all_reduce", "AllReduce", TwiceShare, ReduceAll, Reduction);
/// all_gather_perf.
pub const ALL_GATHER: Benchmark = plain("all_gather", "AllGather", Share, Shares, NoneLabel);
/// broadcast_perf.
pub const BROADCAST: Benchmark = rooted(plain("broadcast", "Broadcast", One, Rooted, NoneLabel));
/// reduce_perf.
pub const REDUCE: Benchmark = rooted(plain("reduce", "Reduce", One, Rooted, Reduction));
/// reduce_scatter_perf.
pub const REDUCE_SCATTER: Benchmark =
    plain("reduce_scatter", "ReduceScatter", Share, Shares, Reduction);
/// alltoall_perf.
pub const ALLTOALL: Benchmark =
    no_in_place_errors(plain("alltoall", "AlltoAll", Share, ManyPeers, NoneLabel));
/// alltoallv_perf.
pub const ALLTOALLV: Benchmark =
    no_in_place_errors(plain("alltoallv", "AlltoAllv", Share, ManyPeers, NoneLabel));
/// scatter_perf.
pub const SCATTER: Benchmark = rooted(plain("scatter", "Scatter", Share, ManyPeers, NoneLabel));
/// gather_perf.
pub const GATHER: Benchmark = rooted(plain("gather", "Gather", Share, ManyPeers, NoneLabel));
/// sendrecv_perf.
pub const SENDRECV: Benchmark =
    no_in_place_errors(plain("sendrecv", "SendRecv", One, OnePeer, Unused));
/// hypercube_perf: its n−1 exchanges count in algbw's bytes, so busbw is algbw.
pub const HYPERCUBE: Benchmark = plain("hypercube", "hypercube exchange", One, OnePeer, Empty);

/// Every benchmark, in nccl-tests' order: the one list documentation, completions and tests use.
pub const BENCHMARKS: &[Benchmark] = &[
    ALL_REDUCE,
    ALL_GATHER,
    BROADCAST,
    REDUCE,
    REDUCE_SCATTER,
    ALLTOALL,
    ALLTOALLV,
    SCATTER,
    GATHER,
    SENDRECV,
    HYPERCUBE,
];

/// The benchmark named `name` (program name without `_perf`), `None` for any other name.
pub fn benchmark(name: &str) -> Option<&'static Benchmark> {
    BENCHMARKS.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for (i, b) in BENCHMARKS.iter().enumerate() {
            assert!(
                BENCHMARKS[..i].iter().all(|o| o.name != b.name),
                "{}",
                b.name
            );
            assert_eq!(benchmark(b.name), Some(b));
        }
        assert_eq!(benchmark("nope"), None);
    }

    #[test]
    fn factors_of_eight_ranks() {
        let f = |name: &str, n| benchmark(name).unwrap().bus_factor(n);
        assert_eq!(f("all_reduce", 8), 1.75);
        assert_eq!(f("all_gather", 8), 0.875);
        assert_eq!(f("broadcast", 8), 1.0);
        assert_eq!(f("all_reduce", 1), 0.0);
        assert_eq!(f("all_reduce", 0), 0.0);
        assert!(SENDRECV.traffic.point_to_point() && !ALL_REDUCE.traffic.point_to_point());
    }

    #[test]
    fn op_labels() {
        assert_eq!(OpColumn::Reduction.label("sum"), "sum");
        assert_eq!(OpColumn::Unused.label("min"), "min");
        assert_eq!(OpColumn::NoneLabel.label("sum"), "none");
        assert_eq!(OpColumn::Empty.label("sum"), "");
        assert!(OpColumn::Unused.loops() && !OpColumn::Unused.reduces());
    }

    /// nccl-tests' columns, written out: the op column of a `max` row, the rooted ones, the
    /// ones printing `N/A` for in-place errors.
    #[test]
    fn columns_are_nccl_tests() {
        let cols: Vec<(&str, &str)> = BENCHMARKS
            .iter()
            .map(|b| (b.name, b.ops.label("max")))
            .collect();
        assert_eq!(
            cols,
            vec![
                ("all_reduce", "max"),
                ("all_gather", "none"),
                ("broadcast", "none"),
                ("reduce", "max"),
                ("reduce_scatter", "max"),
                ("alltoall", "none"),
                ("alltoallv", "none"),
                ("scatter", "none"),
                ("gather", "none"),
                ("sendrecv", "max"),
                ("hypercube", ""),
            ]
        );
        let names = |f: fn(&Benchmark) -> bool| -> Vec<&str> {
            BENCHMARKS.iter().filter(|b| f(b)).map(|b| b.name).collect()
        };
        assert_eq!(
            names(|b| b.rooted),
            ["broadcast", "reduce", "scatter", "gather"]
        );
        assert_eq!(
            names(|b| !b.in_place_errors),
            ["alltoall", "alltoallv", "sendrecv"]
        );
    }
}
