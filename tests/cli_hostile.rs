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

/// Sizes: empty, bad suffixes, overflow, negative, not numbers, endless sweeps.
fn sizes(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "empty -b",
            &["-b", ""],
            Every,
            Args("invalid size specified for 'minbytes': '' is not a number"),
        ),
        case(
            "empty -e",
            &["-e", ""],
            AllReduce,
            Args("invalid size specified for 'maxbytes'"),
        ),
        case(
            "empty -i",
            &["-i", ""],
            AllReduce,
            Args("invalid size specified for 'stepBytes'"),
        ),
        case(
            "suffix T",
            &["-b", "1T"],
            Every,
            Args("unknown size suffix 'T' in '1T'"),
        ),
        case(
            "suffix X",
            &["-e", "8X"],
            AllReduce,
            Args("unknown size suffix 'X'"),
        ),
        case(
            "hex size",
            &["-b", "0x10"],
            AllReduce,
            Args("unknown size suffix 'x'"),
        ),
        case(
            "size overflow",
            &["-e", "99999999999G"],
            Every,
            Args("'99999999999G' is too large"),
        ),
        case(
            "size exponent overflow",
            &["-e", "1e400"],
            AllReduce,
            Args("'1e400' is too large"),
        ),
        case(
            "negative size",
            &["-b", "-1"],
            AllReduce,
            Args("'-1' is negative"),
        ),
        case(
            "negative fraction",
            &["-e", "-0.5K"],
            AllReduce,
            Args("'-0.5K' is negative"),
        ),
        case(
            "size word",
            &["-b", "abc"],
            AllReduce,
            Args("'abc' is not a number"),
        ),
        case(
            "size nan",
            &["-e", "nan"],
            AllReduce,
            Args("'nan' is not a number"),
        ),
        case(
            "size inf",
            &["-e", "inf"],
            AllReduce,
            Args("'inf' is not a number"),
        ),
        case(
            "min above max",
            &["-b", "1G", "-e", "1M"],
            Every,
            Args("invalid sizes for 'minbytes' and 'maxbytes': 1073741824 > 1048576"),
        ),
        case(
            "zero start with factor",
            &["-b", "0", "-e", "1M", "-f", "2"],
            Every,
            Args("never grows"),
        ),
        case(
            "zero additive step",
            &["-b", "8", "-e", "1M", "-i", "0"],
            AllReduce,
            Args("never reaches"),
        ),
    ]
}

/// Counts: zero, negative, overflow, junk.
fn counts(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "zero iterations",
            &["-n", "0"],
            Every,
            Args("invalid value 0 for -n (--iters): must be at least 1"),
        ),
        case(
            "negative iterations",
            &["-n", "-5"],
            AllReduce,
            Args("-n (--iters)"),
        ),
        case(
            "iterations word",
            &["-n", "abc"],
            AllReduce,
            Args("invalid value 'abc' for -n (--iters): not a number"),
        ),
        case(
            "iterations empty",
            &["-n", ""],
            AllReduce,
            Args("not a number"),
        ),
        case(
            "iterations overflow",
            &["-n", "99999999999"],
            AllReduce,
            Args("out of range"),
        ),
        case(
            "iterations 0x",
            &["-n", "0x"],
            AllReduce,
            Args("must be at least 1"),
        ),
        case(
            "negative warmup",
            &["-w", "-1"],
            AllReduce,
            Args("-w (--warmup_iters)"),
        ),
        case(
            "zero aggregation",
            &["-m", "0"],
            AllReduce,
            Args("-m (--agg_iters)"),
        ),
        case(
            "negative check",
            &["-c", "-1"],
            AllReduce,
            Args("-c (--check)"),
        ),
        case(
            "negative timeout",
            &["-T", "-1"],
            AllReduce,
            Args("-T (--timeout)"),
        ),
        case(
            "bad average",
            &["-a", "9"],
            AllReduce,
            Args("-a (--average)"),
        ),
    ]
}

/// GPUs and threads: zero, negative, absurd.
fn gpus_and_threads(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "zero GPUs",
            &["-g", "0"],
            Every,
            Args("invalid value 0 for -g (--ngpus)"),
        ),
        case(
            "zero threads",
            &["-t", "0"],
            AllReduce,
            Args("-t (--nthreads)"),
        ),
        case(
            "negative threads",
            &["-t", "-1"],
            AllReduce,
            Args("-t (--nthreads)"),
        ),
        case(
            "threads overflow",
            &["-t", "99999999999"],
            AllReduce,
            Args("out of range"),
        ),
        case(
            "GPUs beyond any machine",
            &["-g", "2000000"],
            Every,
            Unsupported("GPUs per process: more than nccl-perf can drive"),
        ),
        case(
            "threads x GPUs overflow",
            &["-t", "2147483647", "-g", "2147483647"],
            AllReduce,
            Unsupported("-t 2147483647 x -g 2147483647"),
        ),
        case(
            "absurd -g reaches the GPU count check",
            &["-g", "100000", "-b", "8", "-e", "8"],
            AllReduce,
            Gpu(None),
        ),
    ]
}

/// Datatypes, ops, roots.
fn datatypes_ops_and_roots(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "unknown type",
            &["-d", "bogus"],
            Every,
            Args("unknown datatype 'bogus' for -d (--datatype)"),
        ),
        case(
            "type alias",
            &["-d", "fp16"],
            AllReduce,
            Args("unknown datatype 'fp16'"),
        ),
        case(
            "type case",
            &["-d", "FLOAT"],
            AllReduce,
            Args("unknown datatype 'FLOAT'"),
        ),
        case(
            "empty type",
            &["-d", ""],
            AllReduce,
            Args("unknown datatype ''"),
        ),
        case(
            "unknown op",
            &["-o", "mean"],
            Every,
            Args("unknown op 'mean' for -o (--op)"),
        ),
        case(
            "op case",
            &["-o", "SUM"],
            AllReduce,
            Args("unknown op 'SUM'"),
        ),
        case("empty op", &["-o", ""], AllReduce, Args("unknown op ''")),
        case(
            "negative root",
            &["-r", "-3"],
            Broadcast,
            Args("invalid root -3"),
        ),
        case(
            "root word",
            &["-r", "first"],
            Broadcast,
            Args("invalid value 'first' for -r (--root): not a number"),
        ),
        case(
            "root outside the communicator",
            &["-r", "5", "--dry-run"],
            Broadcast,
            Args("invalid root 5 for -r (--root): the communicator has 1 rank"),
        ),
    ]
}

/// Options this build does not implement, and conflicts.
fn unimplemented_options_and_conflicts(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case("graphs", &["-G", "2"], AllReduce, Gpu(None)),
        case(
            "device API without registration",
            &["-D", "1", "-R", "0"],
            AllReduce,
            Args(
                "device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)",
            ),
        ),
        case(
            "device API kernels are not built",
            &["-D", "1", "-R", "2"],
            AllReduce,
            Unsupported("device-API implementations"),
        ),
        case(
            "graphs cannot capture the NULL stream",
            &["-G", "2", "-y", "1"],
            AllReduce,
            Args("cannot capture the legacy NULL stream"),
        ),
    ]
}

/// -J: unwritable, unsupported, empty, not UTF-8.
fn output_files(tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    let f = |p: &str| tmp.join(p).to_string_lossy().into_owned();
    let taken = f("taken.json");
    std::fs::create_dir_all(tmp.join("dir.json")).unwrap();
    vec![
        case(
            "-J in a missing folder",
            &["-J", "/nonexistent/dir/x.json"],
            Every,
            Args("-J /nonexistent/dir/x.json: cannot create the output file"),
        ),
        case(
            "-J under /proc",
            &["-J", "/proc/x.json"],
            AllReduce,
            Args("cannot create the output file"),
        ),
        case(
            "-J unsupported suffix",
            &["-J", "out.txt"],
            Every,
            Args("only .json and .csv output are supported"),
        ),
        case(
            "-J root folder",
            &["-J", "/"],
            AllReduce,
            Args("only .json and .csv output are supported"),
        ),
        case(
            "-J empty",
            &["-J", ""],
            AllReduce,
            Args("-J (--output_file) needs a file name"),
        ),
        case(
            "-J dry run checks the folder",
            &["--dry-run", "-J", "/nonexistent/x.json"],
            AllReduce,
            Args("cannot create the output file"),
        ),
        Case {
            env: Vec::new(),
            ..case(
                "-J existing file is never overwritten",
                &["-b", "8", "-e", "8", "-J", &taken],
                AllReduce,
                Gpu(None),
            )
        },
        raw(
            "-J not UTF-8",
            vec!["-J".into(), bytes(b"\xff.json")],
            Args("the value of -J (--output_file) is not valid UTF-8"),
        ),
    ]
}

/// Unknown, ambiguous and malformed options.
fn malformed_options(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "unknown long option",
            &["--bogus", "1"],
            Every,
            Args("unknown option '--bogus'"),
        ),
        case(
            "unknown short option",
            &["-q"],
            AllReduce,
            Args("unknown option '-q'"),
        ),
        case(
            "missing value",
            &["-n"],
            Every,
            Args("option -n (--iters) requires a value"),
        ),
        case(
            "missing long value",
            &["-b", "8", "--iters"],
            AllReduce,
            Args("option -n (--iters) requires a value"),
        ),
        case("ambiguous prefix", &["--m", "1"], AllReduce, Args("--m")),
        case(
            "three dashes",
            &["---n", "5"],
            AllReduce,
            Args("unknown option '---n'"),
        ),
        case("bare --=", &["--=5"], AllReduce, Args("unknown option")),
        case(
            "value for a flag",
            &["--dry-run=1"],
            AllReduce,
            Args("--dry-run"),
        ),
        case("value for help", &["--help=1"], AllReduce, Args("--help")),
    ]
}

/// Not UTF-8.
fn arguments_not_utf8(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    vec![
        raw(
            "type not UTF-8",
            vec!["-d".into(), bytes(b"\xff\xfe")],
            Args("the value of -d (--datatype) is not valid UTF-8"),
        ),
        raw(
            "size not UTF-8",
            vec!["-b".into(), bytes(b"8\xff")],
            Args("the value of -b (--minbytes) is not valid UTF-8"),
        ),
        raw(
            "option name not UTF-8",
            vec![bytes(b"--\xff")],
            Args("unknown option"),
        ),
        raw(
            "stray word not UTF-8",
            vec![
                "-b".into(),
                "8".into(),
                "-e".into(),
                "8".into(),
                bytes(b"\xff"),
            ],
            Gpu(Some("ignoring stray argument")),
        ),
    ]
}

/// Lenient where real scripts depend on it: warn, then run.
fn lenient_parsing(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "health checker -w 50--iters",
            &["-b", "8", "-e", "8", "-w", "50--iters", "100"],
            AllReduce,
            Gpu(Some("-w (--warmup_iters) '50--iters' read as 50")),
        ),
        case(
            "junk after a count",
            &["-b", "8", "-e", "8", "-n", "5x"],
            AllReduce,
            Gpu(Some("-n (--iters) '5x' read as 5")),
        ),
        case(
            "end of options",
            &["-b", "8", "-e", "8", "--", "-n", "5"],
            AllReduce,
            Gpu(Some("ignoring stray argument '-n'")),
        ),
        case(
            "zero bytes (nccl-tests hangs)",
            &["-b", "0", "-e", "0"],
            Every,
            Gpu(None),
        ),
    ]
}

/// Hostile environments.
fn hostile_environments(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    vec![
        with_env(
            "bad bootstrap choice",
            &["--dry-run"],
            &[("NCCL_PERF_BOOTSTRAP", "bogus")],
            Args(
                "NCCL_PERF_BOOTSTRAP='bogus' is not one of auto, mpi, mpilib, pmi, pmi2, pmix, env, single",
            ),
        ),
        with_env(
            "bad bootstrap timeout",
            &["--dry-run"],
            &[
                ("NCCL_PERF_BOOTSTRAP_TIMEOUT", "abc"),
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "127.0.0.1"),
            ],
            Args("NCCL_PERF_BOOTSTRAP_TIMEOUT='abc'"),
        ),
        with_env(
            "bad world size",
            &["--dry-run"],
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "abc"),
                ("MASTER_ADDR", "127.0.0.1"),
            ],
            Args("WORLD_SIZE='abc'"),
        ),
        with_env(
            "rank beyond the world",
            &["--dry-run"],
            &[
                ("RANK", "5"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "127.0.0.1"),
            ],
            Launch("rank 5 is not below the number of processes 2"),
        ),
        with_env(
            "an empty world",
            &["--dry-run"],
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "0"),
                ("MASTER_ADDR", "127.0.0.1"),
            ],
            Launch("the number of processes is 0 (it must be at least 1)"),
        ),
        with_env(
            "bad port",
            &["--dry-run"],
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "127.0.0.1"),
                ("MASTER_PORT", "99999"),
            ],
            Args("MASTER_PORT='99999' is not a port"),
        ),
        with_env(
            "bad rendezvous",
            &["--dry-run"],
            &[
                ("RANK", "1"),
                ("WORLD_SIZE", "2"),
                ("NCCL_PERF_RENDEZVOUS", "garbage"),
            ],
            Args("NCCL_PERF_RENDEZVOUS: 'garbage' is not host:port"),
        ),
        with_env(
            "bad device override",
            &["--dry-run"],
            &[("NCCL_TESTS_DEVICE", "abc")],
            Args("NCCL_TESTS_DEVICE='abc' is not a device index"),
        ),
        with_env(
            "bad self-test switch",
            &["-b", "8", "-e", "8"],
            &[("NCCL_PERF_CORRUPT", "sideways:1")],
            Args("NCCL_PERF_CORRUPT='sideways:1'"),
        ),
        with_env(
            "bad number of init roots",
            &["-b", "8", "-e", "8"],
            &[("NCCL_PERF_INIT_ROOTS", "0")],
            Args("NCCL_PERF_INIT_ROOTS='0' is neither auto nor a number of roots"),
        ),
    ]
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
                        errors[0].starts_with("cannot load libcuda.so.1"),
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
