//! A table of malformed and hostile command lines (and a few hostile environments), run
//! against the real binaries. Every case must end, within a deadline, with its documented exit
//! code and one line naming the problem; none may panic or print a backtrace (the children run
//! with `RUST_BACKTRACE=1`) and none may print a table or part of one on stdout.
//!
//! Cases that pass parsing end at the GPU stage: here, without a GPU, at the missing-driver
//! error (exit 2). On a machine with a CUDA driver they use the stand-in driver of
//! `tests/fakes/fake_cuda.c` reporting "no CUDA-capable device" instead, so no case ever runs a
//! benchmark. The cases come in groups by subject (sizes, counts, GPUs and threads, datatypes,
//! ops and roots, options not implemented and conflicts, output files, malformed options,
//! arguments not UTF-8, lenient parsing, hostile environments), one test each; every test
//! prints a summary with `-- --nocapture`: its cases, invocations, and how each ended.
//!
//! The groups of cases live by subject in `numbers`, `options` and `bytes_and_env`; the
//! framework that runs and checks them, and one test per group, are here.

mod bytes_and_env;
mod numbers;
mod options;

use bytes_and_env::{arguments_not_utf8, hostile_environments, lenient_parsing};
use numbers::{counts, gpus_and_threads, sizes};
use options::{
    datatypes_ops_and_roots, malformed_options, output_files, unimplemented_options_and_conflicts,
};

use crate::programs;

use crate::programs::{BINARIES, Outcome, command, fake_library, run, scratch};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const AR: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const BROADCAST: &str = env!("CARGO_BIN_EXE_broadcast_perf");
const DEADLINE: Duration = Duration::from_secs(20);

/// How a case must end.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Exit 255 (argument error), one line on stderr containing the text, nothing on stdout.
    Args(&'static str),
    /// Exit 5 (not supported), one line on stderr containing the text, nothing on stdout.
    Unsupported(&'static str),
    /// Exit 6 (invalid usage: a wrong launch), one line on stderr containing the text.
    Launch(&'static str),
    /// Parsing accepts it (with this warning on stderr, if any); the run ends at the GPU stage.
    Gpu(Option<&'static str>),
}

/// Which binaries a case runs on.
#[derive(Debug, Clone, Copy)]
enum On {
    /// all_reduce_perf only.
    AllReduce,
    /// broadcast_perf only (roots).
    Broadcast,
    /// Every binary.
    Every,
}

struct Case {
    name: &'static str,
    args: Vec<OsString>,
    env: Vec<(&'static str, String)>,
    on: On,
    expect: Expect,
}

fn bytes(b: &[u8]) -> OsString {
    OsString::from_vec(b.to_vec())
}

fn case(name: &'static str, a: &[&str], on: On, expect: Expect) -> Case {
    Case {
        name,
        args: a.iter().map(OsString::from).collect(),
        env: Vec::new(),
        on,
        expect,
    }
}

fn raw(name: &'static str, a: Vec<OsString>, expect: Expect) -> Case {
    Case {
        name,
        args: a,
        env: Vec::new(),
        on: On::AllReduce,
        expect,
    }
}

fn with_env(name: &'static str, a: &[&str], env: &[(&'static str, &str)], expect: Expect) -> Case {
    Case {
        env: env.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        ..case(name, a, On::AllReduce, expect)
    }
}

/// How runs that pass parsing reach the GPU stage on this machine.
enum GpuStage {
    /// No libcuda here: they end at "cannot load libcuda.so.1".
    NoDriver,
    /// A stand-in driver (first on LD_LIBRARY_PATH) reports no device.
    NoDevice(PathBuf),
}

fn gpu_stage(tmp: &Path) -> Option<GpuStage> {
    let probe = run(
        command(AR, &programs::args(&["-b", "8", "-e", "8"]), &[]),
        DEADLINE,
    );
    // NCCL_PERF_TEST_FAKE_DRIVER=1 exercises the stand-in path on a machine without a driver.
    let force_fake = std::env::var_os("NCCL_PERF_TEST_FAKE_DRIVER").is_some();
    if !force_fake && probe.code == Some(2) && probe.stderr.contains("cannot load libcuda.so.1") {
        return Some(GpuStage::NoDriver);
    }
    let dir = tmp.join("fake-cuda");
    std::fs::create_dir_all(&dir).unwrap();
    fake_library(&dir, "fake_cuda.c", "libcuda.so.1", &["libcuda.so"], &[])?;
    Some(GpuStage::NoDevice(dir))
}

/// Checks one invocation; returns the kind of clean ending for the summary.
fn check(c: &Case, bin: &str, o: &Outcome, stage: &GpuStage) -> &'static str {
    let ctx = || format!("case '{}' on {bin} {:?}: {}", c.name, c.args, o.all());
    assert!(!o.hung, "hung: {}", ctx());
    assert!(!o.panicked(), "panicked: {}", ctx());
    assert!(
        !o.stdout.contains("(elements)")
            && !o.stdout.contains("Avg bus bandwidth")
            && !o.stdout.contains("Out of bounds"),
        "printed a table: {}",
        ctx()
    );
    let one_line = |code: i32, needle: &str| {
        assert_eq!(o.code, Some(code), "{}", ctx());
        assert_eq!(o.stderr.lines().count(), 1, "not one line: {}", ctx());
        assert!(
            o.stderr.contains(needle),
            "message lacks '{needle}': {}",
            ctx()
        );
        assert!(o.stdout.is_empty(), "stdout not empty: {}", ctx());
    };
    match c.expect {
        Expect::Args(needle) => {
            one_line(255, needle);
            "argument error (255)"
        }
        Expect::Unsupported(needle) => {
            one_line(5, needle);
            "not supported (5)"
        }
        Expect::Launch(needle) => {
            one_line(6, needle);
            "wrong launch (6)"
        }
        Expect::Gpu(warning) => {
            assert_eq!(o.code, Some(2), "{}", ctx());
            if let Some(w) = warning {
                assert!(o.stderr.contains(w), "no warning '{w}': {}", ctx());
            }
            // Warnings, then exactly one error line.
            let errors: Vec<&str> = o
                .stderr
                .lines()
                .filter(|l| !l.contains(": warning: "))
                .collect();
            match stage {
                GpuStage::NoDriver => {
                    assert_eq!(errors.len(), 1, "{}", ctx());
                    assert!(
                        // The program's prefix, then the cause.
                        errors[0].split_once(": ").is_some_and(|(program, cause)| {
                            program.ends_with("_perf")
                                && cause.starts_with("cannot load libcuda.so.1 ")
                        }),
                        "{}",
                        ctx()
                    );
                    let json_line = o.stdout.starts_with("# Writing JSON output to ");
                    assert!(o.stdout.is_empty() || json_line, "{}", ctx());
                }
                GpuStage::NoDevice(_) => {
                    assert!(errors.is_empty(), "{}", ctx());
                    assert!(
                        o.stdout.contains("Test CUDA failure src/gpu/driver.rs:")
                            && o.stdout.contains("'no CUDA-capable device is detected'"),
                        "{}",
                        ctx()
                    );
                }
            }
            "GPU stage: driver error (2)"
        }
    }
}

/// A group of cases, made in a working folder of its own.
type Group = fn(&Path) -> Vec<Case>;

/// Every group of cases, in the order of the table.
const GROUPS: &[(&str, Group)] = &[
    ("sizes", sizes),
    ("counts", counts),
    ("gpus and threads", gpus_and_threads),
    ("datatypes ops and roots", datatypes_ops_and_roots),
    (
        "unimplemented options and conflicts",
        unimplemented_options_and_conflicts,
    ),
    ("output files", output_files),
    ("malformed options", malformed_options),
    ("arguments not utf8", arguments_not_utf8),
    ("lenient parsing", lenient_parsing),
    ("hostile environments", hostile_environments),
];

/// Runs the cases of one group on the binaries each names, checks every ending and prints the
/// group's tally; `after` checks what the runs left in the group's working folder.
fn suite(group: &str, cases: Group, after: fn(&Path)) {
    let tmp = scratch(&format!("hostile-{}", group.replace(' ', "-")));
    std::fs::write(tmp.join("taken.json"), "keep").unwrap();
    let all = cases(&tmp);
    assert!(!all.is_empty(), "no cases in group {group}");
    let Some(stage) = gpu_stage(&tmp) else {
        return;
    };
    let mut tally: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut invocations = 0;
    let mut slowest = Duration::ZERO;
    for c in &all {
        let bins: &[&str] = match c.on {
            On::AllReduce => &[AR],
            On::Broadcast => &[BROADCAST],
            On::Every => BINARIES,
        };
        for bin in bins {
            let mut env: Vec<(&str, &str)> = c.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let lib = match &stage {
                GpuStage::NoDevice(dir) => dir.to_string_lossy().into_owned(),
                GpuStage::NoDriver => String::new(),
            };
            if let GpuStage::NoDevice(_) = stage {
                env.push(("LD_LIBRARY_PATH", &lib));
                env.push(("FAKE_CUDA_INIT", "100"));
            }
            let mut cmd = command(bin, &c.args, &env);
            cmd.current_dir(&tmp);
            let o = run(cmd, DEADLINE);
            let kind = check(c, bin, &o, &stage);
            *tally.entry(kind).or_default() += 1;
            invocations += 1;
            slowest = slowest.max(o.elapsed);
        }
    }
    after(&tmp);
    let clean: usize = tally.values().sum();
    println!(
        "hostile CLI suite, {group}: {} cases, {invocations} invocations over {} binaries; \
         {clean} ended in a clean error, 0 panics, 0 hangs, no table printed; slowest {slowest:?}",
        all.len(),
        BINARIES.len()
    );
    for (kind, n) in &tally {
        println!("  {n:4}  {kind}");
    }
    assert_eq!(clean, invocations);
    std::fs::remove_dir_all(&tmp).unwrap();
}

fn nothing_left(_: &Path) {}

/// The table as a whole: no group lost its cases (81 when the table was split into groups).
#[test]
fn the_table_holds_every_case() {
    let tmp = scratch("hostile-table");
    let counts: Vec<(&str, usize)> = GROUPS.iter().map(|(g, f)| (*g, f(&tmp).len())).collect();
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    println!(
        "hostile CLI table: {total} cases in {} groups: {counts:?}",
        counts.len()
    );
    assert!(total >= 81, "only {total} cases: {counts:?}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn sizes_end_cleanly() {
    suite("sizes", sizes, nothing_left);
}

#[test]
fn counts_end_cleanly() {
    suite("counts", counts, nothing_left);
}

#[test]
fn gpu_and_thread_counts_end_cleanly() {
    suite("gpus and threads", gpus_and_threads, nothing_left);
}

#[test]
fn datatypes_ops_and_roots_end_cleanly() {
    suite(
        "datatypes ops and roots",
        datatypes_ops_and_roots,
        nothing_left,
    );
}

#[test]
fn unimplemented_options_and_conflicts_end_cleanly() {
    suite(
        "unimplemented options and conflicts",
        unimplemented_options_and_conflicts,
        nothing_left,
    );
}

#[test]
fn output_files_end_cleanly() {
    suite("output files", output_files, |tmp| {
        // The existing file was kept; the run wrote a numbered alternative instead.
        assert_eq!(
            std::fs::read_to_string(tmp.join("taken.json")).unwrap(),
            "keep"
        );
        assert!(tmp.join("taken.json.0").exists());
    });
}

#[test]
fn malformed_options_end_cleanly() {
    suite("malformed options", malformed_options, nothing_left);
}

#[test]
fn arguments_not_utf8_end_cleanly() {
    suite("arguments not utf8", arguments_not_utf8, nothing_left);
}

#[test]
fn lenient_parsing_warns_then_reaches_the_gpu_stage() {
    suite("lenient parsing", lenient_parsing, nothing_left);
}

#[test]
fn hostile_environments_end_cleanly() {
    suite("hostile environments", hostile_environments, nothing_left);
}
