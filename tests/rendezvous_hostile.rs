//! The TCP rendezvous against hostile neighbours: a foreign client written for the purpose holds
//! connections idle, floods rank 0 with 1000 of them, sends junk and oversized frames, and
//! forges hellos (for a free rank, a taken rank, with a wrong key, with control characters in
//! its host name), while a real 4-process `--dry-run` job runs on 127.0.0.1. The job must
//! complete (or fail cleanly where it must) within its deadline plus 2 s, and rank 0's memory
//! must stay bounded. Also: another job on the same port, ranks that differ in options or
//! binary, a rank that dies early, a second rank 0, and launcher environments that would make
//! a lone rank 0.
//!
//! By subject: `door` (strangers at the door), `launch` (launches that go wrong) and
//! `public_key` (a forger with the public job key); the job, the foreign client and the other
//! helpers they share are here.

mod door;
mod launch;
mod public_key;

use crate::programs;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const BCAST: &str = env!("CARGO_BIN_EXE_broadcast_perf");
/// The bootstrap timeout of the jobs below, in seconds: 6, or 20 when our programs run under an
/// emulator (`NCCL_PERF_TEST_RUNNER`, ci/arm64.sh), where every process starts and serves
/// connections an order of magnitude slower — rank 0 then needs more than 6 s to see 1000 idle
/// connections through (each holds a slot for 5 s).
fn timeout() -> u64 {
    if programs::runner().is_empty() { 6 } else { 20 }
}

/// The longest any job here may take: its timeout plus 2 s.
fn limit() -> Duration {
    Duration::from_secs(timeout() + 2)
}

/// One process of a torchrun-style job on 127.0.0.1:`port`.
fn rank(
    bin: &str,
    r: usize,
    size: usize,
    port: u16,
    extra: &[(&str, &str)],
    args: &[&str],
) -> Child {
    let mut c = programs::program(bin);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CUDA_VISIBLE_DEVICES", "0,1,2,3")
        .env("NCCL_PERF_BOOTSTRAP_TIMEOUT", timeout().to_string())
        .env("RANK", r.to_string())
        .env("LOCAL_RANK", r.to_string())
        .env("WORLD_SIZE", size.to_string())
        .env("NCCL_PERF_RENDEZVOUS", format!("127.0.0.1:{port}"))
        .arg("--dry-run")
        .args(if args.is_empty() {
            &["-b", "1M", "-e", "1M"][..]
        } else {
            args
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().expect("binary starts")
}

/// Waits for `c`, killing it past `limit` from `start`; also the largest resident set seen.
fn finish(mut c: Child, start: Instant, limit: Duration) -> (Output, u64) {
    let mut peak = 0;
    loop {
        if let Some(kb) = rss_kb(c.id()) {
            peak = peak.max(kb);
        }
        match c.try_wait() {
            Ok(Some(_)) => break,
            _ if start.elapsed() > limit => {
                let _ = c.kill();
                break;
            }
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    (c.wait_with_output().unwrap(), peak)
}

fn rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A whole job: rank 0 first, `meddle` while it waits, then ranks 1..size. Returns each
/// rank's output, rank 0's peak memory in KiB, and the time the job took.
fn job(
    size: usize,
    extra: &[(&str, &str)],
    meddle: impl FnOnce(u16),
) -> (Vec<Output>, u64, Duration) {
    let port = programs::free_port();
    let start = Instant::now();
    let r0 = rank(BIN, 0, size, port, extra, &[]);
    wait_listening(port);
    meddle(port);
    let others: Vec<Child> = (1..size)
        .map(|r| rank(BIN, r, size, port, extra, &[]))
        .collect();
    let (o0, peak) = finish(r0, start, limit() + Duration::from_secs(5));
    let mut outs = vec![o0];
    outs.extend(
        others
            .into_iter()
            .map(|c| finish(c, start, limit() + Duration::from_secs(5)).0),
    );
    (outs, peak, start.elapsed())
}

fn wait_listening(port: u16) {
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "rank 0 never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every process exited 0 and rank 0 printed the one consistent plan.
fn assert_completed(outs: &[Output], took: Duration) {
    for o in outs {
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    let plan = text(&outs[0].stdout);
    assert!(plan.contains("the launch is consistent"), "{plan}");
    assert!(plan.lines().all(|l| l.starts_with('#')), "{plan}");
    assert!(took < limit(), "took {took:?}");
}

// ---- the foreign client: our wire format, written afresh ----

/// One frame: u32 little-endian length (tag + body), tag, body.
fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut f = ((body.len() + 1) as u32).to_le_bytes().to_vec();
    f.push(tag);
    f.extend_from_slice(body);
    f
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// A well-formed hello for `rank` of `size` from `host`, signed with a key we do not have.
fn forged_hello(rank: u64, size: u64, host: &str) -> Vec<u8> {
    let mut b = hello_body(
        rank,
        size,
        rank as i64,
        host,
        &[b"all_reduce_perf".to_vec()],
    );
    b.extend_from_slice(&[0u8; 32]); // a MAC we cannot compute
    frame(1, &b)
}

/// A hello's body for `rank` of `size` (local rank `local`) from `host`, running `items`, with
/// our nonce at the end; the MAC is the caller's.
fn hello_body(rank: u64, size: u64, local: i64, host: &str, items: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0x4e43_5032u32.to_le_bytes());
    b.extend_from_slice(&rank.to_le_bytes());
    b.extend_from_slice(&size.to_le_bytes());
    b.extend_from_slice(&local.to_le_bytes());
    b.extend_from_slice(&0i64.to_le_bytes());
    b.extend_from_slice(&42u64.to_le_bytes());
    b.extend_from_slice(&4242u32.to_le_bytes());
    put_str(&mut b, host);
    b.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for i in items {
        b.extend_from_slice(&(i.len() as u32).to_le_bytes());
        b.extend_from_slice(i);
    }
    b.extend_from_slice(&[7u8; 32]); // our nonce
    b
}

/// Connects, reads rank 0's challenge, sends `bytes`; returns what rank 0 answered (until it
/// closes, at most 2 s).
fn say(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    // Nonce, salt and signature: 96 bytes after the tag.
    let mut challenge = [0u8; 101];
    s.read_exact(&mut challenge).unwrap();
    assert_eq!(
        &challenge[..5],
        &[97, 0, 0, 0, 9],
        "a length-97 challenge frame"
    );
    let _ = s.write_all(bytes);
    let mut answer = Vec::new();
    let _ = s.take(64 << 10).read_to_end(&mut answer);
    answer
}

fn stderr0(outs: &[Output]) -> String {
    text(&outs[0].stderr)
}

/// The floods of these tests run one at a time (each holds hundreds of connections and a core).
fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

/// Raises this process' open-file limit so it can hold 1000 connections.
fn more_files() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls on a valid struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max.min(8192);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}
