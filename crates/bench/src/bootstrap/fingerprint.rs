//! What a process runs, in words every rank can compare: the program, the crate version and each
//! option that shapes the run (sizes, iterations, ops, types, roots, threads and GPUs, modes).
//! Processes of one launch that differ here would call different collectives or sizes and hang
//! or report wrong numbers; the first difference is named (`rank 3 runs broadcast_perf -b 1M;
//! rank 0 runs all_reduce_perf -b 512M`).

use super::peer_text;
use crate::options::{Options, Roots};
use serde::{Deserialize, Serialize};

/// Most items a peer may send (ours has about 30).
pub const MAX_ITEMS: usize = 64;
/// Longest item a peer may send.
const MAX_ITEM: usize = 200;

/// The program, its version and the run-shaping options, one item each (`-b 1M`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Fingerprint(pub Vec<String>);

impl Fingerprint {
    /// The fingerprint of `program` run with `o`.
    pub fn of_run(program: &str, o: &Options) -> Fingerprint {
        // Every option, field by field: each is an item below but the `-J` file (world rank
        // 0's alone), so a new option does not compile until it is one or said not to be.
        let Options {
            nthreads: _,
            ngpus: _,
            min_bytes: _,
            max_bytes: _,
            step_bytes: _,
            step_factor: _,
            iters: _,
            agg_iters: _,
            warmup_iters: _,
            run_cycles: _,
            check: _,
            ops: _,
            types: _,
            all_types: _,
            roots: _,
            blocking: _,
            stream_null: _,
            timeout_s: _,
            graph: _,
            report_cputime: _,
            report_timestamps: _,
            output_file: _,
            average: _,
            register: _,
            memory_report: _,
            unalign: _,
            per_iter: _,
            per_iter_skip: _,
            parallel_init: _,
            cta_policy: _,
            device_impl: _,
            device_cta_count: _,
            dry_run: _,
            locate: _,
            explain: _,
        } = o;
        let roots = match o.roots {
            Roots::All => "all".to_string(),
            Roots::One(r) => r.to_string(),
        };
        let list = |v: Vec<&str>| v.join(",");
        let opt = |v: Option<i64>| v.map_or_else(|| "unset".to_string(), |v| v.to_string());
        let types = if o.all_types {
            "all".to_string()
        } else {
            list(o.types.iter().map(|t| t.name()).collect())
        };
        let items = [
            program.to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
            format!("-t {}", o.nthreads),
            format!("-g {}", o.ngpus),
            format!("-b {}", size(o.min_bytes)),
            format!("-e {}", size(o.max_bytes)),
            format!("-i {}", size(o.step_bytes)),
            format!("-f {}", o.step_factor),
            format!("-n {}", o.iters),
            format!("-m {}", o.agg_iters),
            format!("-w {}", o.warmup_iters),
            format!("-N {}", o.run_cycles.map_or(-1, |n| n as i64)),
            format!("-c {}", o.check),
            format!("-o {}", list(o.ops.iter().map(|op| op.name()).collect())),
            format!("-d {types}"),
            format!("-r {roots}"),
            format!("-z {}", o.blocking.number()),
            format!("-y {}", u8::from(o.stream_null)),
            format!("-T {}", o.timeout_s),
            format!("-G {}", o.graph.number()),
            format!("-C {}", u8::from(o.report_cputime)),
            format!("-S {}", u8::from(o.report_timestamps)),
            format!("-a {}", o.average.number()),
            format!("-R {}", o.register.number()),
            format!("-M {}", u8::from(o.memory_report)),
            format!("-u {}", o.unalign),
            format!("-I {}", u8::from(o.per_iter)),
            format!("-K {}", o.per_iter_skip),
            format!("-p {}", u8::from(o.parallel_init)),
            format!("-x {}", opt(o.cta_policy)),
            format!("-D {}", opt(o.device_impl)),
            format!("-V {}", opt(o.device_cta_count)),
            format!("--dry-run {}", u8::from(o.dry_run)),
        ];
        // --explain adds one untimed call per size and half on every rank; its table
        // (--explain-sku) and gate are world rank 0's alone.
        let explain = format!(
            "--explain {}",
            if o.explain.is_some() { "on" } else { "off" }
        );
        Fingerprint(
            items
                .into_iter()
                .chain(locate(o))
                .chain(std::iter::once(explain))
                .collect(),
        )
    }

    /// A peer's fingerprint made safe to keep and print: at most [`MAX_ITEMS`] items, each
    /// cleaned of control characters and cut.
    pub fn from_peer(items: Vec<String>) -> Fingerprint {
        Fingerprint(
            items
                .into_iter()
                .take(MAX_ITEMS)
                .map(|i| peer_text::clean(&i, MAX_ITEM))
                .collect(),
        )
    }

    fn item(&self, i: usize) -> &str {
        self.0.get(i).map_or("(none)", String::as_str)
    }
}

/// `None` when rank `theirs_rank` runs what rank `mine_rank` runs; else one line naming the
/// program of each and the first item where they differ.
pub fn difference(
    mine_rank: usize,
    mine: &Fingerprint,
    theirs_rank: usize,
    theirs: &Fingerprint,
) -> Option<String> {
    if mine == theirs {
        return None;
    }
    let n = mine.0.len().max(theirs.0.len());
    let first = (1..n).find(|&i| mine.0.get(i) != theirs.0.get(i));
    let say = |f: &Fingerprint| match first {
        Some(1) => format!("{} version {}", f.item(0), f.item(1)),
        Some(i) => format!("{} {}", f.item(0), f.item(i)),
        None => f.item(0).to_string(),
    };
    Some(format!(
        "rank {theirs_rank} runs {}; rank {mine_rank} runs {}",
        say(theirs),
        say(mine)
    ))
}

/// `--locate` and the options every process must share to plan the same rounds (the JSON
/// record and the line limit are rank 0's alone), one item each.
fn locate(o: &Options) -> Vec<String> {
    let Some(l) = &o.locate else {
        return vec!["--locate off".to_string()];
    };
    // Field by field, as in `of_run`: all are items but `lines` and `json` (rank 0's).
    let crate::options::LocateOptions {
        schedule: _,
        size: _,
        iters: _,
        window: _,
        deadline: _,
        thresholds: _,
        seed: _,
        lines: _,
        json: _,
    } = l;
    let t = &l.thresholds;
    vec![
        format!("--locate {}", l.schedule.name()),
        format!(
            "--locate-size {}",
            l.size.map_or_else(|| "default".to_string(), size)
        ),
        format!("--locate-iters {}", l.iters),
        format!("--locate-window {}", l.window),
        format!("--locate-deadline {}", l.deadline.as_secs_f64()),
        format!("--locate-threshold {}", t.mad_k),
        format!("--locate-min-drop {}", t.min_drop),
        format!(
            "--locate-min-busbw {}",
            t.min_busbw
                .map_or_else(|| "off".to_string(), |v| v.to_string())
        ),
        format!("--locate-seed {}", l.seed),
    ]
}

/// `1048576` → `1M`; sizes that are not a whole number of K, M or G stay in bytes.
fn size(b: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if b != 0 && b.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_is_named_with_both_programs() {
        let base = Options {
            min_bytes: 512 << 20,
            ..Options::default()
        };
        let a = Fingerprint::of_run("all_reduce_perf", &base);
        let b = Fingerprint::of_run(
            "broadcast_perf",
            &Options {
                min_bytes: 1 << 20,
                ..base.clone()
            },
        );
        assert_eq!(difference(0, &a, 3, &a), None);
        assert_eq!(
            difference(0, &a, 3, &b).unwrap(),
            "rank 3 runs broadcast_perf -b 1M; rank 0 runs all_reduce_perf -b 512M"
        );
        let g = Fingerprint::of_run(
            "all_reduce_perf",
            &Options {
                ngpus: 2,
                ..base.clone()
            },
        );
        assert_eq!(
            difference(0, &a, 1, &g).unwrap(),
            "rank 1 runs all_reduce_perf -g 2; rank 0 runs all_reduce_perf -g 1"
        );
        let other = Fingerprint::of_run("broadcast_perf", &base);
        assert_eq!(
            difference(0, &a, 2, &other).unwrap(),
            "rank 2 runs broadcast_perf; rank 0 runs all_reduce_perf"
        );
        let mut old = a.clone();
        old.0[1] = "0.0.9".into();
        assert_eq!(
            difference(0, &a, 5, &old).unwrap(),
            format!(
                "rank 5 runs all_reduce_perf version 0.0.9; rank 0 runs all_reduce_perf version {}",
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[test]
    fn peer_fingerprints_are_bounded_and_clean() {
        let f = Fingerprint::from_peer(vec!["x\ny".repeat(100); 1000]);
        assert_eq!(f.0.len(), MAX_ITEMS);
        assert!(
            f.0.iter()
                .all(|i| !i.contains('\n') && i.chars().count() <= MAX_ITEM + 1)
        );
        assert_eq!(size(3 << 30), "3G");
        assert_eq!(size(1536), "1536");
        assert_eq!(size(0), "0");
    }
}
