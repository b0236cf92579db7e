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

/// A PMI-1 launcher on a TCP port (`PMI_PORT`) that starts a process as rank 1 of 2 and closes
/// the connection when it reaches the fence (`barrier_in`); the lines it was sent.
fn launcher_that_leaves_at_the_fence(listener: std::net::TcpListener) -> Vec<String> {
    use std::io::{BufRead, BufReader, Write};
    let (conn, _) = listener.accept().unwrap();
    let mut out = conn.try_clone().unwrap();
    let mut got = Vec::new();
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { break };
        got.push(line.clone());
        let cmd = line.split_whitespace().next().unwrap_or("").to_string();
        let answer = match cmd.as_str() {
            "cmd=initack" => "cmd=initack\ncmd=set size=2\ncmd=set rank=1\ncmd=set debug=0\n",
            "cmd=init" => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
            "cmd=get_maxes" => "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n",
            "cmd=get_appnum" => "cmd=appnum appnum=0\n",
            "cmd=get_my_kvsname" => "cmd=my_kvsname kvsname=kvs_1\n",
            "cmd=put" => "cmd=put_result rc=0 msg=success\n",
            _ => break,
        };
        if out.write_all(answer.as_bytes()).is_err() {
            break;
        }
    }
    got
}

#[test]
fn a_launcher_that_leaves_at_the_fence_is_said_once() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || launcher_that_leaves_at_the_fence(listener));
    let o = programs::program(env!("CARGO_BIN_EXE_all_reduce_perf"))
        .arg("--dry-run")
        .env("PMI_PORT", format!("127.0.0.1:{port}"))
        .env("PMI_ID", "1")
        .env_remove("PMI_FD")
        .env_remove("NCCL_PERF_BOOTSTRAP")
        .output()
        .unwrap();
    let got = server.join().unwrap();
    assert!(got.iter().any(|l| l == "cmd=barrier_in"), "{got:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "the error once: {err}");
    assert!(err.contains("PMI-1 (PMI_PORT=127.0.0.1:"), "{err}");
}
