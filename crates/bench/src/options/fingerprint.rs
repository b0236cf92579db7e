//! What this process runs, as the bootstrap's [`Fingerprint`]: the program, the crate version and
//! each option that shapes the run (sizes, iterations, ops, types, roots, threads and GPUs,
//! modes), one item each (`-b 1M`), so that the processes of one launch can compare them and
//! name the first difference.

use super::{LocateOptions, Options, Roots};
use crate::bootstrap::fingerprint::Fingerprint;

/// The fingerprint of `program` run with `o` in this process' environment.
pub fn of_run(program: &str, o: &Options) -> Fingerprint {
    of_run_in(program, o, &|k| std::env::var(k).ok())
}

/// The fingerprint of `program` run with `o` where `env` gives the variables: the options, then
/// each variable that shapes the run the same way everywhere ([`LAUNCH_WIDE`]).
///
/// [`LAUNCH_WIDE`]: crate::environment::LAUNCH_WIDE
pub fn of_run_in(program: &str, o: &Options, env: &dyn Fn(&str) -> Option<String>) -> Fingerprint {
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
        collectives: _,
        health: _,
        stop_when_sure: _,
        hang_timeout_s: _,
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
        format!("--collectives {}", list(o.collectives.clone())),
        format!("--health {}", u8::from(o.health.is_some())),
        format!(
            "--stop-when-sure {}",
            o.stop_when_sure
                .map_or("off".to_string(), |p| p.to_string())
        ),
        format!("--hang-timeout {}", o.hang_timeout_s),
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
            .chain(variables(env))
            .collect(),
    )
}

/// One item per launch-wide variable: `NAME=value`, `NAME unset`; a value that is long or not
/// plain printable ASCII by its digest (`NAME=#<16 hex digits>`), so that it passes the peer's
/// bounds unchanged; the alltoallv matrix file by its content's digest.
fn variables(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    use crate::environment::{ALLTOALLV_MATRIX_FILE, LAUNCH_WIDE};
    let digest = |bytes: &[u8]| {
        use std::hash::{Hash, Hasher};
        // SipHash with fixed keys: the same bytes give the same digest in every process of
        // one build (the version is an item before these).
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut h);
        format!("#{:016x}", h.finish())
    };
    LAUNCH_WIDE
        .iter()
        .map(|v| {
            let Some(value) = env(v.name) else {
                return format!("{} unset", v.name);
            };
            if v.name == ALLTOALLV_MATRIX_FILE.name {
                // Only a regular file is read (a pipe would block the launch check); what
                // cannot be read is said by alltoallv itself.
                let regular = std::fs::metadata(&value).is_ok_and(|m| m.is_file());
                return match regular.then(|| std::fs::read(&value)) {
                    Some(Ok(bytes)) => format!("{}={}", v.name, digest(&bytes)),
                    _ => format!("{} unreadable", v.name),
                };
            }
            let plain = value.len() <= 64 && value.bytes().all(|b| (b' '..=b'~').contains(&b));
            if plain {
                format!("{}={value}", v.name)
            } else {
                format!("{}={}", v.name, digest(value.as_bytes()))
            }
        })
        .collect()
}

/// `--locate` and the options every process must share to plan the same rounds (the JSON
/// record and the line limit are rank 0's alone), one item each.
fn locate(o: &Options) -> Vec<String> {
    let Some(l) = &o.locate else {
        return vec!["--locate off".to_string()];
    };
    // Field by field, as in `of_run`: all are items but `lines` and `json` (rank 0's).
    let LocateOptions {
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
    use crate::bootstrap::fingerprint::difference;

    #[test]
    fn the_first_difference_is_named_with_both_programs() {
        let base = Options {
            min_bytes: 512 << 20,
            ..Options::default()
        };
        let a = of_run("all_reduce_perf", &base);
        let b = of_run(
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
        let g = of_run(
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
        let other = of_run("broadcast_perf", &base);
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
    fn a_launch_wide_variable_that_differs_is_the_difference_named() {
        let o = Options::default();
        let none = |_: &str| None;
        let roots = |k: &str| (k == "NCCL_PERF_INIT_ROOTS").then(|| "4".to_string());
        let a = of_run_in("all_reduce_perf", &o, &none);
        let b = of_run_in("all_reduce_perf", &o, &roots);
        assert_eq!(
            difference(0, &a, 2, &b).unwrap(),
            "rank 2 runs all_reduce_perf NCCL_PERF_INIT_ROOTS=4; \
             rank 0 runs all_reduce_perf NCCL_PERF_INIT_ROOTS unset"
        );
        // Every launch-wide variable counts; a per-process one does not.
        for v in crate::environment::LAUNCH_WIDE {
            let set = |k: &str| (k == v.name).then(|| "1".to_string());
            assert_ne!(
                of_run_in("x", &o, &set),
                of_run_in("x", &o, &none),
                "{}",
                v.name
            );
        }
        for (v, _) in crate::environment::PER_PROCESS {
            let set = |k: &str| (k == v.name).then(|| "1".to_string());
            assert_eq!(
                of_run_in("x", &o, &set),
                of_run_in("x", &o, &none),
                "{}",
                v.name
            );
        }
        // A long or odd value is sent as its digest, within what a peer's item may hold.
        let long = |k: &str| (k == "NCCL_TESTS_SPLIT").then(|| "MOD 8\n".repeat(100));
        let f = of_run_in("x", &o, &long);
        let item =
            f.0.iter()
                .find(|i| i.starts_with("NCCL_TESTS_SPLIT="))
                .unwrap();
        assert!(
            item.starts_with("NCCL_TESTS_SPLIT=#") && item.len() < 40,
            "{item}"
        );
        assert_eq!(
            crate::bootstrap::fingerprint::Fingerprint::from_peer(f.0.clone()),
            f
        );
    }

    #[test]
    fn sizes_are_short() {
        assert_eq!(size(3 << 30), "3G");
        assert_eq!(size(1536), "1536");
        assert_eq!(size(0), "0");
    }
}
