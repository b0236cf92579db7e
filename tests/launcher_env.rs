//! Launcher variables that a stale environment can carry: a `PMI_FD` naming standard error while
//! standard error is a socket (journald's, a log collector's) must not be taken for the
//! launcher's socket (the PMI-1 client would write `cmd=init` into the log and close it, and
//! every later error line would be lost).

use crate::programs;
use std::io::Read;
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::Stdio;

#[test]
fn a_stale_pmi_fd_naming_standard_error_is_refused_and_the_error_reaches_the_log() {
    let (mut log, child_end) = UnixStream::pair().unwrap();
    let mut c = programs::program(env!("CARGO_BIN_EXE_all_reduce_perf"));
    c.arg("--dry-run")
        .env("PMI_FD", "2")
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "1")
        .env_remove("NCCL_PERF_BOOTSTRAP")
        .stdout(Stdio::null())
        .stderr(Stdio::from(OwnedFd::from(child_end)));
    let mut child = c.spawn().unwrap();
    // Whatever the process writes to its standard error, it reads nothing from it: an old
    // build that took fd 2 as the launcher reads the end of this stream at once and gives up.
    log.shutdown(Shutdown::Write).unwrap();
    drop(c);
    let mut text = String::new();
    log.read_to_string(&mut text).unwrap();
    let status = child.wait().unwrap();
    assert!(!text.contains("cmd=init"), "PMI-1 went to the log: {text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("PMI_FD=2 is this process' standard error, not a launcher's socket"),
        "{text}"
    );
    assert_ne!(status.code(), Some(0), "{text}");
}
