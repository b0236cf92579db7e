//! The binaries' command-line behaviour without a GPU: help, argument errors, unsupported
//! options, and a clean one-line failure when the CUDA driver is absent. Every case must end
//! quickly, print no table, and never panic.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BINARIES: &[&str] = &[
    env!("CARGO_BIN_EXE_all_reduce_perf"),
    env!("CARGO_BIN_EXE_all_gather_perf"),
];

fn run(bin: &str, args: &[&str]) -> Output {
    let start = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .env("RUST_BACKTRACE", "1")
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
        assert!(out.ends_with("\t[-h,--help]\n"));
        assert_eq!(out.lines().count(), 36);
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
    (&["-G", "2"], 5, "not supported yet"),
    (&["-I", "1"], 5, "not supported yet"),
    (&["-R", "1"], 5, "not supported yet"),
    (&["-x", "1"], 5, "not supported yet"),
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

#[test]
fn non_utf8_argument_is_a_clean_error() {
    use std::os::unix::ffi::OsStrExt;
    let o = Command::new(BINARIES[0])
        .arg("-d")
        .arg(std::ffi::OsStr::from_bytes(b"\xff\xfe"))
        .output()
        .unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(255));
    assert_eq!(text(&o.stderr).lines().count(), 1);
}
