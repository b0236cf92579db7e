//! One definition per option of the benchmarks: flags, nccl-tests' `-h` text, our help text,
//! the default and the kind of value. The parser ([`super::parse`]), the `-h` text
//! ([`super::usage`]), the defaults of the benchmark core's `options`, the man pages, shell completions and
//! the options table of the documentation (`nccl-perf` tool, its `docs` module) are all made
//! from [`OPTIONS`].

/// What an option's value is. The benchmark core's `options` gives each value its meaning; the kind says
/// what documentation and completions offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// No value: a flag (`-h`, `--dry-run`).
    Flag,
    /// An integer, read like C `strtol` (`0x` hex, leading-`0` octal, junk after it warned
    /// about and ignored).
    Integer,
    /// 0 (off) or 1 (on), read as an integer.
    Switch,
    /// A size in bytes: a decimal number with an optional binary `K`, `M` or `G` suffix.
    Size,
    /// A datatype name, or `all`.
    DataType,
    /// A reduction op name, or `all`.
    Op,
    /// A file name.
    File,
    /// A decimal number (`0.15`, `60`, `2.5`).
    Number,
    /// A locate schedule: `nodes`, `rails`, `quick` or `full`.
    Schedule,
    /// Benchmark names separated by commas (`all_reduce,all_gather`, `_perf` optional), or `all`.
    Collectives,
}

/// The value an option has when it is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// Read as if the option were given with this value.
    Value(&'static str),
    /// Not set unless given; the text says what happens then.
    Unset(&'static str),
}

/// One option of the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// `-x`; `None` for our long-only options (`--dry-run`).
    pub short: Option<char>,
    /// `--long`, also the option's name everywhere else.
    pub long: &'static str,
    /// What `-h` prints after `-x,--long ` (nccl-tests' text, kept byte for byte); `None`:
    /// left out of `-h` (ours).
    pub usage: Option<&'static str>,
    /// One line for man pages, completions and the documentation (the default is added).
    pub help: &'static str,
    /// The default.
    pub default: DefaultValue,
    /// The kind of value.
    pub value: Value,
    /// The value's name for options left out of `-h` (`SCHEDULE`); the others take it from
    /// their `-h` text.
    pub metavar: Option<&'static str>,
}

impl Spec {
    /// The help text with the default appended, as man pages and completions show it.
    pub fn documented_help(&self) -> String {
        match (self.value, self.default) {
            (Value::Flag, _) => self.help.to_string(),
            (_, DefaultValue::Value(v)) => format!("{} (default {v})", self.help),
            (_, DefaultValue::Unset(what)) => format!("{} (default: {what})", self.help),
        }
    }

    /// The value's name: the word between `<` and `>` in the `-h` text (`num threads`), else
    /// the option's own name for it, else `VALUE`; `None` for flags.
    pub fn value_name(&self) -> Option<&'static str> {
        if self.value == Value::Flag {
            return None;
        }
        if let Some(name) = self.metavar {
            return Some(name);
        }
        let usage = self.usage.unwrap_or("");
        let start = usage.find('<').map_or(0, |i| i + 1);
        let end = usage
            .get(start..)
            .and_then(|rest| rest.find('>'))
            .map_or(usage.len(), |i| start + i);
        Some(
            usage
                .get(start..end)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .unwrap_or("VALUE"),
        )
    }

    /// `-x (--long)`, or `--long` for a long-only option, as messages name the option.
    pub fn flag_name(&self) -> String {
        match self.short {
            Some(s) => format!("-{s} (--{})", self.long),
            None => format!("--{}", self.long),
        }
    }
}

/// The option named `long`.
pub fn spec(long: &str) -> Option<&'static Spec> {
    OPTIONS.iter().find(|s| s.long == long)
}

/// Shorthand for the table below.
const fn opt(
    short: char,
    long: &'static str,
    usage: &'static str,
    value: Value,
    default: DefaultValue,
    help: &'static str,
) -> Spec {
    Spec {
        short: Some(short),
        long,
        usage: Some(usage),
        help,
        default,
        value,
        metavar: None,
    }
}

/// Shorthand for our long-only options: left out of `-h`, which keeps nccl-tests' text.
const fn ours(
    long: &'static str,
    metavar: &'static str,
    value: Value,
    default: DefaultValue,
    help: &'static str,
) -> Spec {
    Spec {
        short: None,
        long,
        usage: None,
        help,
        default,
        value,
        metavar: Some(metavar),
    }
}

use DefaultValue::{Unset, Value as Is};
use Value::{Collectives, DataType, File, Flag, Integer, Number, Op, Schedule, Size, Switch};

/// Every option, in nccl-tests' `-h` order, then `-h` itself, our `--dry-run` and the options
/// of `--locate` (docs/locate.md). Ours are long options only and not in `-h`.
#[rustfmt::skip]
pub const OPTIONS: &[Spec] = &[
    opt('t', "nthreads", "<num threads>", Integer, Is("1"),
        "Threads per process, each driving -g GPUs"),
    opt('g', "ngpus", "<gpus per thread>", Integer, Is("1"),
        "GPUs per thread; a process uses threads times GPUs devices"),
    opt('b', "minbytes", "<min size in bytes>", Size, Is("32M"),
        "Smallest message size in bytes, K/M/G suffixes"),
    opt('e', "maxbytes", "<max size in bytes>", Size, Is("32M"),
        "Largest message size in bytes, K/M/G suffixes"),
    opt('i', "stepbytes", "<increment size>", Size, Is("1M"),
        "Size increment when no -f factor above 1 is given"),
    opt('f', "stepfactor", "<increment factor>", Integer, Is("1"),
        "Multiply the size by this factor at each step; 1 or less adds -i instead"),
    opt('n', "iters", "<iteration count>", Integer, Is("20"),
        "Timed iterations per size"),
    opt('m', "agg_iters", "<aggregated iteration count>", Integer, Is("1"),
        "Operations aggregated into each timed iteration"),
    opt('w', "warmup_iters", "<warmup iteration count>", Integer, Is("1"),
        "Untimed warm-up iterations"),
    opt('N', "run_cycles", "<cycle count> run & print each cycle (default: 1; 0=infinite)",
        Integer, Is("1"),
        "Run the sweep this many times, printing each; 0 runs until interrupted"),
    opt('p', "parallel_init", "<0/1>", Switch, Is("0"),
        "1: threads create their communicators in parallel"),
    opt('c', "check", "<check iteration count>", Integer, Is("1"),
        "Validated iterations per size; 0 turns validation off and needs no NVRTC"),
    opt('o', "op", "<sum/prod/min/max/avg/mulsum/all>", Op, Is("sum"),
        "Reduction operation: sum, prod, min, max, avg, mulsum, or all"),
    opt('d', "datatype", "<nccltype/all>", DataType, Is("float"),
        "Element type, or all"),
    opt('r', "root", "<root>", Integer, Is("0"),
        "Root rank of rooted collectives; -1 or all runs every root"),
    opt('z', "blocking",
        "<0/1/2/3> 1=barrier after each inner iter (-m), 2=no barrier, 3=wait and barrier after each outer iter (-n)",
        Integer, Is("0"),
        "0: no wait between operations; 1: wait and barrier after each operation; 2: wait after each operation, no barrier; 3: wait and barrier after each timed iteration (-n)"),
    opt('y', "stream_null", "<0/1>", Switch, Is("0"),
        "1: use the legacy NULL stream"),
    opt('T', "timeout", "<time in seconds>", Integer, Is("0"),
        "Stop with exit code 4 when an NCCL wait takes longer than this many seconds; 0 is off"),
    opt('G', "cudagraph", "<num graph launches>", Integer, Is("0"),
        "Capture the iterations in a CUDA graph launched this many times; 0 is off"),
    opt('C', "report_cputime", "<0/1>", Switch, Is("0"),
        "1: report CPU enqueue time instead of GPU time"),
    opt('S', "report_timestamps", "<0/1> report timestamps (default 0)", Switch, Is("0"),
        "1: add a timestamp column to each row"),
    opt('J', "output_file",
        "<file> write output to filepath, if accessible. Infer type from suffix (only json supported presently.)",
        File, Unset("none"),
        "Also write the results to this file: JSON (upstream's schema) or, for a .csv name, CSV"),
    opt('a', "average", "<0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>",
        Integer, Is("1"),
        "Time reported across ranks: 0 rank 0, 1 mean, 2 min, 3 max"),
    opt('R', "local_register",
        "<0/1/2> enable local (1) or symmetric (2) buffer registration on send/recv buffers (default: disable (0))",
        Integer, Is("0"),
        "Buffer registration: 0 none, 1 local, 2 symmetric"),
    opt('x', "cta_policy",
        "<0/1/2> set CTA policy (NCCL_CTA_POLICY_DEFAULT (0), NCCL_CTA_POLICY_EFFICIENCY (1), NCCL_CTA_POLICY_ZERO (2)) (default: do not set)",
        Integer, Unset("not set, NCCL's own"),
        "NCCL CTA policy: 0 default, 1 efficiency, 2 zero"),
    opt('D', "device_implementation",
        "<implementation number> enable device implementation (default: 0, use NCCL implementation; requires -R 2 if > 0)",
        Integer, Unset("0, NCCL's own"),
        "Device-side implementation number"),
    opt('V', "device_cta_count",
        "<number> set number of CTAs for device implementation (default: 16)",
        Integer, Unset("16"),
        "CTAs for the device implementation"),
    opt('M', "memory", "<0/1> enable memory usage report (default: 0)", Switch, Is("0"),
        "1: report device memory usage"),
    opt('u', "unalign", "<index of first element> Misalign source and destination buffers (default: 0)",
        Integer, Is("0"),
        "Misalign the send and receive buffers by this many elements"),
    opt('I', "per_iter_timing",
        "<0/1> per-iteration CUDA event timing\n\t    (best with -z 0, -z 2, or -z 3; with -z 1 includes barrier wait;\n\t    i_p99 uses nearest-rank percentile and may equal i_max\n\t    with <100 samples) (default: 0)",
        Switch, Is("0"),
        "1: time each iteration with CUDA events and report min, max, p99 and spread"),
    opt('K', "per_iter_skip", "<count> exclude leading samples from -I summary stats (default: 0)",
        Integer, Is("0"),
        "Leading iterations left out of the per-iteration statistics"),
    Spec {
        short: Some('h'),
        long: "help",
        usage: Some(""),
        help: "Print nccl-tests' usage text, then nccl-perf's own options, and exit 0",
        default: Unset("off"),
        value: Flag,
        metavar: None,
    },
    Spec {
        short: None,
        long: "version",
        usage: None,
        help: "Print the program's name and version (nccl-perf's, and the nccl-tests version it follows) on one line, and exit 0",
        default: Unset("off"),
        value: Flag,
        metavar: None,
    },
    Spec {
        short: None,
        long: "dry-run",
        usage: None,
        help: "Bootstrap, check the launch and print each rank's host, GPU, sizes and memory, then exit 0 without loading CUDA or NCCL",
        default: Unset("off"),
        value: Flag,
        metavar: None,
    },
    Spec {
        short: None,
        long: "explain",
        usage: None,
        help: "After the table, say what NCCL did for each size (algorithm, protocol, channels, transport), what it should reach (NCCL's cost model, the hardware's ceiling, the expected figure for the GPU model) and a verdict",
        default: Unset("off"),
        value: Flag,
        metavar: None,
    },
    Spec {
        short: None,
        long: "health",
        usage: None,
        help: "A node or job check in one launch: all_reduce, all_gather, reduce_scatter, alltoall and sendrecv (unless --collectives says otherwise), -b 1M -e 8G -f 2 unless sizes are given, --explain on, then one '# health:' line per collective (busbw at the largest size against the expected figure for the GPU model) and an overall verdict; exit 7 when one is slow (below --explain-gate, default 90 %) or has wrong data, 4 when the launch hung, 10 when one could not be judged (--baseline FILE judges against your own runs)",
        default: Unset("off"),
        value: Flag,
        metavar: None,
    },
    ours("health-json", "FILE", File, Unset("none"),
        "With --health: write the summary (per collective busbw, expected, verdict; the overall verdict) as JSON to this file"),
    ours("health-prom", "FILE", File, Unset("none"),
        "With --health: write the summary in the Prometheus text format to this file (for node_exporter's textfile collector: name it *.prom); every node of the job has its own series (label host)"),
    ours("baseline", "FILE", File, Unset("none: the built-in table alone"),
        "With --health: judge each collective first against this baseline of known-good runs (made by nccl-perf baseline), size by size, then against the SKU table; a baseline for another GPU model or job shape is said in one line and not used"),
    Spec {
        short: None,
        long: "health-allow-unjudged",
        usage: None,
        help: "With --health: exit 0 when the worst outcome is a collective that could not be judged (no baseline row or table figure), instead of 10",
        default: Unset("off: a collective not judged exits 10"),
        value: Flag,
        metavar: None,
    },
    ours("stop-when-sure", "PERCENT", Number, Unset("off: every size runs -n iterations"),
        "Stop a size's timed iterations once the 95 % confidence interval of its mean time is within this percentage of it (at most -n iterations; sizes too short for three batches of 1 ms run -n); the iterations used go into the JSON's actual_iterations and a line after the footer. Not with -z, -I or -G"),
    ours("hang-timeout", "SECONDS", Number, Is("60"),
        "The hang watch: when no operation finishes on any rank for this many seconds (or 20 times what the operations outstanding should take at this size's pace, if longer), name the stuck rank, close the JSON with a hang record and exit 4 on every process; 0 turns it off (docs/hangs.md)"),
    ours("collectives", "LIST", Collectives, Unset("this program's own collective alone"),
        "Run these benchmarks one after the other in this one launch (names separated by commas, with or without _perf, e.g. all_reduce,all_gather,reduce_scatter,alltoall,sendrecv; or all): one CUDA context, one set of communicators and buffers, and for each the section its own program prints; the exit code is the worst of them"),
    ours("explain-sku", "FILE", File, Unset("the built-in table"),
        "--explain's table of expected bus bandwidths per GPU model, instead of the built-in one (docs/explain.md gives the format)"),
    ours("explain-gate", "PERCENT", Number, Unset("off"),
        "With --explain: exit 7 when the large sizes' bus bandwidth is below this percentage of what is expected"),
    ours("locate", "SCHEDULE", Schedule, Unset("off"),
        "After the table, split the job into groups round by round and name the slow or hung node, GPU, rail or link: nodes, rails, quick or full (one GPU per process)"),
    ours("locate-size", "BYTES", Size, Unset("the smaller of -e and 256M"),
        "Message size of every --locate group's measurement, K/M/G suffixes"),
    ours("locate-iters", "N", Integer, Is("20"),
        "Timed operations per --locate group (after -w warm-up operations, at least 1)"),
    ours("locate-window", "SECONDS", Number, Is("1"),
        "Time every --locate group for about this many seconds at least (at most half --locate-deadline when not given): more timed operations than --locate-iters where the groups' own pace says they are short (round 1 learns it in a short first pass; a node that stalls now and then needs a window of several of its periods); 0: --locate-iters alone"),
    ours("locate-deadline", "SECONDS", Number, Is("60"),
        "A --locate group without a result this many seconds after its round started is hung, and its communicator aborted"),
    ours("locate-threshold", "K", Number, Is("5"),
        "A --locate group is slow when it is more than K spreads (MAD) below the groups of its shape"),
    ours("locate-min-drop", "FRACTION", Number, Is("0.15"),
        "A --locate group must also be at least this fraction below the groups of its shape to be slow"),
    ours("locate-min-busbw", "GBPS", Number, Unset("off"),
        "A whole node, whole rail or pair of nodes below this bus bandwidth in GB/s is slow whatever the others do"),
    ours("locate-seed", "N", Integer, Is("1"),
        "Seed of the random matching of --locate quick"),
    ours("locate-lines", "N", Integer, Is("64"),
        "--locate rounds with more groups print one summary line and the groups that are not ok"),
    ours("locate-json", "FILE", File, Unset("none"),
        "Write the full --locate record (every round and group, the pair matrix, the verdicts) to this JSON file"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_value_names_come_from_the_usage_text() {
        for (i, s) in OPTIONS.iter().enumerate() {
            assert!(
                OPTIONS[..i]
                    .iter()
                    .all(|o| o.long != s.long && (o.short != s.short || s.short.is_none())),
                "--{} twice",
                s.long
            );
            if let (Some(name), Some(usage)) = (s.value_name(), s.usage) {
                assert!(usage.contains(&format!("<{name}>")), "--{}: {name}", s.long);
            }
            // Ours are long options only, left out of -h, and name their value themselves.
            assert_eq!(s.short.is_none(), s.usage.is_none(), "--{}", s.long);
            assert_eq!(
                s.metavar.is_some(),
                s.usage.is_none() && s.value != Value::Flag,
                "--{}",
                s.long
            );
            assert!(
                !s.help.is_empty() && !s.help.contains("(default"),
                "--{}",
                s.long
            );
        }
        assert_eq!(
            spec("iters").and_then(Spec::value_name),
            Some("iteration count")
        );
        assert_eq!(spec("help").and_then(Spec::value_name), None);
    }

    #[test]
    fn documented_help_carries_the_default() {
        assert_eq!(
            spec("iters").map(Spec::documented_help).as_deref(),
            Some("Timed iterations per size (default 20)")
        );
        assert!(
            spec("cta_policy")
                .unwrap()
                .documented_help()
                .ends_with("(default: not set, NCCL's own)")
        );
        assert_eq!(spec("dry-run").unwrap().flag_name(), "--dry-run");
        assert_eq!(spec("iters").unwrap().flag_name(), "-n (--iters)");
    }
}
