//! The binaries' command-line behaviour without a GPU: help, argument errors, unsupported
//! options, and a clean one-line failure when the CUDA driver is absent. Every case must end
//! quickly, print no table, and never panic.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::programs::{BINARIES, program};

const ALLTOALLV: &str = env!("CARGO_BIN_EXE_alltoallv_perf");

fn run(bin: &str, args: &[&str]) -> Output {
    run_env(bin, args, &[])
}

fn run_env(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let start = Instant::now();
    let out = program(bin)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env_remove("NCCL_TESTS_ALLTOALLV_MATRIX_FILE")
        .env_remove("NCCL_TESTS_ALLTOALLV_SPREAD")
        .env_remove("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE")
        .env_remove("NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY")
        .envs(env.iter().copied())
        .output()
        .expect("binary runs");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{args:?} took too long"
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn no_panic(o: &Output) {
    let err = text(&o.stderr);
    assert!(
        !err.contains("panicked")
            && !err.contains("RUST_BACKTRACE")
            && !err.contains("stack backtrace"),
        "{err}"
    );
}

#[test]
fn version_prints_one_line_and_exits_0() {
    for bin in BINARIES {
        let name = std::path::Path::new(bin)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for flag in ["--version", "--vers"] {
            let o = run(bin, &[flag]);
            no_panic(&o);
            assert_eq!(o.status.code(), Some(0), "{name} {flag}");
            let out = text(&o.stdout);
            assert_eq!(
                out,
                format!(
                    "{name} nccl-perf {} (nccl-tests version 2.19.6)\n",
                    env!("CARGO_PKG_VERSION")
                ),
                "{name} {flag}"
            );
            assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
        }
    }
}

#[test]
fn help_prints_usage_and_exits_0() {
    for bin in BINARIES {
        let o = run(bin, &["-h"]);
        assert_eq!(o.status.code(), Some(0));
        let out = text(&o.stdout);
        let name = std::path::Path::new(bin)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            out.starts_with(&format!(
                "USAGE: {name} \n\t[-t,--nthreads <num threads>] \n"
            )),
            "{out}"
        );
        // nccl-tests' 36 lines, then ours: a note and one line per long-only option, none of
        // them a line a scraper could take for a result.
        let (upstream, ours) = out.split_at(out.find("\t[-h,--help]\n").unwrap() + 13);
        assert_eq!(upstream.lines().count(), 36);
        assert!(ours.contains("\t[--dry-run] ") && ours.contains("\t[--locate <SCHEDULE>] "));
        assert!(
            ours.lines()
                .all(|l| !l.contains("FAILED") && !l.to_ascii_lowercase().contains("bandwidth")),
            "{ours}"
        );
    }
}

/// (arguments, expected exit code, a word the one-line stderr message must contain)
const BAD: &[(&[&str], i32, &str)] = &[
    (
        &["-b", "1G", "-e", "1M"],
        255,
        "invalid sizes for 'minbytes' and 'maxbytes': 1073741824 > 1048576",
    ),
    (&["-b", "1T"], 255, "minbytes"),
    (&["-e", "abc"], 255, "maxbytes"),
    (&["-e", "99999999999G"], 255, "too large"),
    (&["-i", "-5"], 255, "stepBytes"),
    (&["-b", "0", "-e", "1M", "-f", "2"], 255, "never grows"),
    (&["-b", "8", "-e", "1M", "-i", "0"], 255, "never reaches"),
    (&["-n", "0"], 255, "-n (--iters)"),
    (&["-n", "abc"], 255, "not a number"),
    (&["-w", "-1"], 255, "-w (--warmup_iters)"),
    (&["-g", "0"], 255, "-g (--ngpus)"),
    (&["-t", "99999999999"], 255, "out of range"),
    (&["-d", "bogus"], 255, "unknown datatype 'bogus'"),
    (&["-d", "fp16"], 255, "unknown datatype"),
    (&["-o", "SUM"], 255, "unknown op 'SUM'"),
    (&["-a", "9"], 255, "-a (--average)"),
    (&["-r", "-3"], 255, "invalid root"),
    (&["--bogus", "1"], 255, "unknown option '--bogus'"),
    (&["-q"], 255, "unknown option"),
    (&["-n"], 255, "value"),
    (&["--m", "1"], 255, "--m"),
    (
        &["-D", "1"],
        255,
        "device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)",
    ),
    (&["-D", "2", "-R", "2"], 5, "device-API implementations"),
    (&["-R", "3"], 255, "-R (--local_register)"),
    (&["-G", "1", "-y", "1"], 255, "NULL stream"),
];

#[test]
fn argument_errors_are_one_line_with_the_documented_code() {
    for bin in BINARIES {
        for (args, code, needle) in BAD {
            let o = run(bin, args);
            no_panic(&o);
            assert_eq!(
                o.status.code(),
                Some(*code),
                "{args:?}: {}",
                text(&o.stderr)
            );
            let err = text(&o.stderr);
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains(needle), "{args:?}: {err}");
            assert!(
                o.stdout.is_empty(),
                "{args:?} printed to stdout: {}",
                text(&o.stdout)
            );
        }
    }
}

/// Without a GPU (CI): the driver is missing or reports no device. Either way one clear line,
/// exit code 2 (CUDA), no table.
#[test]
fn without_a_gpu_the_driver_error_is_reported() {
    let probe = run(BINARIES[0], &["-b", "8", "-e", "8", "-c", "0"]);
    if probe.status.code() == Some(0) {
        eprintln!("skipped: a GPU is present");
        return;
    }
    for bin in BINARIES {
        let o = run(bin, &["-b", "8", "-e", "8"]);
        no_panic(&o);
        let all = text(&o.stdout) + &text(&o.stderr);
        assert!(matches!(o.status.code(), Some(2) | Some(3)), "{all}");
        assert!(
            all.contains("libcuda") || all.contains("CUDA failure") || all.contains("NCCL"),
            "{all}"
        );
        assert!(!text(&o.stdout).contains("Avg bus bandwidth"), "{all}");
    }
}

#[test]
fn lenient_numbers_warn_and_continue_to_the_gpu_stage() {
    // A public health checker passes "-w 50--iters 100": read as -w 50 with a warning.
    let o = run(
        BINARIES[0],
        &["-b", "8", "-e", "8", "-w", "50--iters", "100"],
    );
    no_panic(&o);
    let err = text(&o.stderr);
    assert!(
        err.contains("-w (--warmup_iters) '50--iters' read as 50"),
        "{err}"
    );
    assert!(err.contains("ignoring stray argument '100'"), "{err}");
    assert_ne!(o.status.code(), Some(255));
}

/// The timing options of issue 5 reach the GPU stage (no "not supported" stop), and upstream's
/// post-parse messages are printed verbatim on stderr, each on its own line.
#[test]
fn timing_options_run_and_print_upstream_notices() {
    for args in [
        &["-G", "2"][..],
        &["-I", "1", "-K", "2"],
        &["-R", "1"],
        &["-R", "2"],
        &["-x", "1"],
        &["-p", "1"],
        &["-M", "1"],
        &["-V", "32"],
        &["-D", "0"],
        &["-T", "1"],
    ] {
        let o = run(BINARIES[0], &[&["-b", "8", "-e", "8"], args].concat());
        no_panic(&o);
        assert!(
            !matches!(o.status.code(), Some(5) | Some(255)),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    let o = run(
        BINARIES[0],
        &[
            "-b", "8", "-e", "8", "-I", "1", "-G", "1", "-z", "3", "-K", "30",
        ],
    );
    no_panic(&o);
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        &lines[..3],
        [
            "per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling.",
            "blocking mode (-z 3) is incompatible with CUDA graph mode (-G). Disabling.",
            "per-iteration skip (-K) must be between 0 and 19. Disabling.",
        ],
        "{err}"
    );
    let o = run(BINARIES[0], &["-b", "8", "-e", "8", "-V", "500"]);
    assert!(
        text(&o.stderr).starts_with(
            "device_cta_count (-V) must be positive and less than 128, got 500. Using default value 16.\n"
        ),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn non_utf8_argument_is_a_clean_error() {
    use std::os::unix::ffi::OsStrExt;
    let o = program(BINARIES[0])
        .arg("-d")
        .arg(std::ffi::OsStr::from_bytes(b"\xff\xfe"))
        .output()
        .unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(255));
    assert_eq!(text(&o.stderr).lines().count(), 1);
}

/// alltoallv's environment is read once at start, after the command line: a malformed value or
/// matrix file is one line on stderr and exit code 1 (upstream's internal error), before any
/// GPU work; `-h` still works.
#[test]
fn alltoallv_environment_errors_are_one_line_exit_1() {
    let dir = std::env::temp_dir().join(format!("nccl-perf-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let good = write("good.txt", "0 32\n32 0\n");
    // (environment, arguments, text the error line contains)
    type Case<'a> = (Vec<(&'a str, String)>, &'a [&'a str], &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![("NCCL_TESTS_ALLTOALLV_SPREAD", "lots".into())],
            &["-b", "8", "-e", "8"],
            "NCCL_TESTS_ALLTOALLV_SPREAD='lots' is not a number",
        ),
        (
            vec![(
                "NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
                write("ns.txt", "1 2\n3\n"),
            )],
            &["-b", "1M", "-e", "1M"],
            "the matrix must be square",
        ),
        (
            vec![(
                "NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
                write("neg.txt", "1 -2\n3 4\n"),
            )],
            &["-b", "1M", "-e", "1M"],
            "-2 is negative",
        ),
        (
            vec![(
                "NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
                write("nan.txt", "1 two\n3 4\n"),
            )],
            &["-b", "1M", "-e", "1M"],
            "'two' is not a number",
        ),
        (
            vec![(
                "NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
                dir.join("none.txt").to_string_lossy().into_owned(),
            )],
            &["-b", "1M", "-e", "1M"],
            "Unable to read alltoallv traffic matrix file",
        ),
        (
            vec![("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", good.clone())],
            &["-b", "8", "-e", "1M"],
            "-b and -e options must be set to the same value (e.g., -b 32M -e 32M) when using alltoallv traffic matrix mode.",
        ),
        (
            vec![
                ("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", good.clone()),
                ("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", "x2".into()),
            ],
            &["-b", "1M", "-e", "1M"],
            "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE='x2' is not a number",
        ),
    ];
    for (env, args, needle) in &cases {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let o = run_env(ALLTOALLV, args, &env);
        no_panic(&o);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{env:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{env:?}: {err}");
        assert!(err.starts_with("alltoallv_perf: "), "{err}");
        assert!(err.contains(needle), "{env:?}: {err}");
        assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
        // Argument handling comes first.
        let h = run_env(ALLTOALLV, &["-h"], &env);
        assert_eq!(h.status.code(), Some(0));
    }
    // A good matrix gets past the environment stage (to the GPU stage, which fails here).
    let o = run_env(
        ALLTOALLV,
        &["-b", "1M", "-e", "1M"],
        &[("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", &good)],
    );
    no_panic(&o);
    assert_ne!(o.status.code(), Some(1), "{}", text(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
