//! Every output file of the project under one set of rules (`nccl_perf_report::output_file`),
//! seen from the command line: a symbolic link planted at an output path is never written
//! through, a named pipe there is refused at once, and nothing is written in place.

use crate::programs::{self, tool};
use std::os::unix::fs::{OpenOptionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A log the tool reads: nccl-tests' own output of an all_reduce sweep.
fn a_log() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/nccl-tests-2.19.6-h200/ar_sweep.out")
        .to_string_lossy()
        .into_owned()
}

/// A scratch folder holding `victim` (a file someone else cares about) and a link `name` to it.
fn planted(test: &str, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = programs::scratch(&format!("out-{test}"));
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = dir.join(name);
    symlink(&victim, &link).unwrap();
    (dir, victim, link)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One line on stderr, exit 2, nothing on stdout.
fn refused(o: &Output, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(what), "{err}");
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn health_files_are_never_written_through_a_planted_link() {
    for option in ["--prom", "--json"] {
        let (dir, victim, link) = planted(&format!("health{option}"), "node.out");
        let o = tool(&["health", option, link.to_str().unwrap(), &a_log()]);
        refused(&o, "symbolic link");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn parse_output_is_never_written_through_a_planted_link() {
    let (dir, victim, link) = planted("parse", "run.json");
    let o = tool(&["parse", "-o", link.to_str().unwrap(), &a_log()]);
    refused(&o, "symbolic link");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn plot_output_is_never_written_through_a_planted_link() {
    let (dir, victim, link) = planted("plot", "busbw.svg");
    let o = tool(&["plot", "-o", link.to_str().unwrap(), &a_log()]);
    refused(&o, "symbolic link");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn parse_replaces_a_hard_linked_file_instead_of_writing_into_it() {
    let dir = programs::scratch("out-hard");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = dir.join("run.json");
    std::fs::hard_link(&victim, &out).unwrap();
    let o = tool(&["parse", "-o", out.to_str().unwrap(), &a_log()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(std::fs::read_to_string(&out).unwrap().starts_with('{'));
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 2, "no temporary file is left behind");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_named_pipe_at_an_output_path_is_refused_at_once() {
    // The test holds the pipe's reading end open (without blocking), so a writer that opened
    // the pipe would not block either: it would write there and exit 0, and the test fails
    // instead of hanging.
    let dir = programs::scratch("out-fifo");
    let fifo = dir.join("node.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    assert!(made, "mkfifo failed");
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    for args in [
        vec!["health", "--json", fifo.to_str().unwrap()],
        vec!["health", "--prom", fifo.to_str().unwrap()],
        vec!["parse", "-o", fifo.to_str().unwrap()],
    ] {
        let log = a_log();
        let mut args = args.clone();
        args.push(&log);
        let o = tool(&args);
        refused(&o, "is a named pipe (FIFO), not a regular file");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_benchmarks_health_files_refuse_a_link_or_pipe_before_any_work() {
    let (dir, victim, link) = planted("bench-health", "node.prom");
    let o = programs::program(env!("CARGO_BIN_EXE_all_reduce_perf"))
        .args(["--health", "--health-prom", link.to_str().unwrap()])
        .env("NCCL_PERF_BOOTSTRAP", "single")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(255), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "all_reduce_perf: --health-prom {}: cannot write it: is a symbolic link",
            link.display()
        )),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    std::fs::remove_dir_all(&dir).unwrap();
}
