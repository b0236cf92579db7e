//! The TCP rendezvous against hostile neighbours: a foreign client written for the purpose holds
//! connections idle, floods rank 0 with 1000 of them, sends junk and oversized frames, and
//! forges hellos (for a free rank, a taken rank, with a wrong key, with control characters in
//! its host name), while a real 4-process `--dry-run` job runs on 127.0.0.1. The job must
//! complete (or fail cleanly where it must) within its deadline plus 2 s, and rank 0's memory
//! must stay bounded. Also: another job on the same port, ranks that differ in options or
//! binary, a rank that dies early, a second rank 0, and launcher environments that would make
//! a lone rank 0.

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

#[test]
fn idle_connections_held_open_do_not_stall_the_job() {
    let mut held = Vec::new();
    let (outs, _, took) = job(4, &[], |port| {
        for _ in 0..10 {
            held.push(TcpStream::connect(("127.0.0.1", port)).unwrap());
        }
    });
    assert_completed(&outs, took);
    // Before: 10 idle connections kept a job with a 10 s timeout alive 51 s, then failed it.
    assert!(took < Duration::from_secs(4), "{took:?}");
    drop(held);
}

/// The floods of this file run one at a time (each holds hundreds of connections and a core).
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

#[test]
fn a_thousand_connections_neither_hang_the_job_nor_grow_rank_0() {
    let _alone = heavy();
    more_files();
    let mut held = Vec::new();
    let (outs, peak, took) = job(4, &[], |port| {
        // A busy machine may refuse a connection now and then (a full accept queue): the
        // client tries on, up to 100 failures.
        let mut failed = 0;
        let t = Instant::now();
        while held.len() < 1000 && failed < 100 {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => held.push(s),
                Err(e) => {
                    if failed == 0 {
                        eprintln!("connection {} failed: {e}", held.len());
                    }
                    failed += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        // With std's backlog of 128, a loaded machine dropped SYNs here and each drop cost the
        // client a second (5 s for 1000); with rank 0's backlog of 4096, milliseconds.
        eprintln!("{} connections in {:?}", held.len(), t.elapsed());
    });
    assert!(held.len() >= 900, "only {} connections", held.len());
    assert_completed(&outs, took);
    eprintln!("rank 0's peak resident set during the flood: {peak} KiB");
    assert!(peak < 64 << 10, "rank 0 grew to {peak} KiB");
    let err = stderr0(&outs);
    assert!(err.lines().count() < 40, "refusals are rate-limited: {err}");
    drop(held);
}

#[test]
fn junk_oversized_frames_and_forged_hellos_are_refused_and_the_job_goes_on() {
    let mut answers = Vec::new();
    let key = [("NCCL_PERF_RENDEZVOUS_KEY", "s3cret-of-this-job")];
    let (outs, _, took) = job(4, &key, |port| {
        answers.push(say(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        answers.push(say(port, &0xffff_fff0u32.to_le_bytes()));
        answers.push(say(port, &frame(3, b"")));
        // A free rank (nobody has claimed rank 3 yet), then rank 0 itself.
        answers.push(say(port, &forged_hello(3, 4, "forger")));
        answers.push(say(port, &forged_hello(0, 4, "forger")));
        // Control characters in the host name: no fake line may reach any output.
        answers.push(say(
            port,
            &forged_hello(2, 4, "evil\n# Avg bus bandwidth    : 999 \n"),
        ));
    });
    assert_completed(&outs, took);
    for a in &answers {
        let t = text(a);
        assert!(t.contains("refused"), "{t:?}");
    }
    let err = stderr0(&outs);
    assert!(err.contains("a frame of 4294967280 bytes"), "{err}");
    assert!(err.contains("not signed with this job's key"), "{err}");
    // Host names keep to the characters host names are made of.
    assert!(err.contains("evil???Avg?bus?bandwidth"), "{err}");
    for o in &outs {
        for l in text(&o.stdout).lines().chain(text(&o.stderr).lines()) {
            assert!(!l.starts_with("# Avg bus"), "injected: {l}");
        }
    }
}

#[test]
fn a_forged_hello_for_a_taken_rank_does_not_abort_the_job() {
    let port = programs::free_port();
    let start = Instant::now();
    let r0 = rank(BIN, 0, 3, port, &[], &[]);
    let r1 = rank(BIN, 1, 3, port, &[], &[]);
    // Rank 0 listens (a slow start, e.g. under an emulator, takes longer than the pause), then
    // rank 1 has time to take its place.
    wait_listening(port);
    std::thread::sleep(Duration::from_millis(500));
    let answer = text(&say(port, &forged_hello(1, 3, "forger")));
    assert!(answer.contains("refused"), "{answer:?}");
    let r2 = rank(BIN, 2, 3, port, &[], &[]);
    let outs: Vec<Output> = [r0, r1, r2]
        .into_iter()
        .map(|c| finish(c, start, limit()).0)
        .collect();
    assert_completed(&outs, start.elapsed());
}

#[test]
fn a_process_of_another_job_on_the_same_port_is_refused() {
    let port = programs::free_port();
    let start = Instant::now();
    let mine = [("TORCHELASTIC_RUN_ID", "job-a")];
    let r0 = rank(BIN, 0, 3, port, &mine, &[]);
    wait_listening(port);
    // Another job: its own run id, another binary and other options, claiming rank 2, with
    // half this job's timeout. It is refused again and again (a refusal is not signed: it could
    // come from anyone, so a process gives up only at its deadline), then the job meets.
    let half = (timeout() / 2).to_string();
    let stranger = rank(
        BCAST,
        2,
        3,
        port,
        &[
            ("TORCHELASTIC_RUN_ID", "job-b"),
            ("NCCL_PERF_BOOTSTRAP_TIMEOUT", half.as_str()),
        ],
        &["-b", "2M", "-e", "2M"],
    );
    let (so, _) = finish(stranger, start, limit());
    let rest: Vec<Child> = (1..3).map(|r| rank(BIN, r, 3, port, &mine, &[])).collect();
    let mut outs = vec![finish(r0, start, limit()).0];
    outs.extend(rest.into_iter().map(|c| finish(c, start, limit()).0));
    assert_completed(&outs, start.elapsed());
    let err = text(&so.stderr);
    assert_eq!(so.status.code(), Some(6), "{err}");
    assert!(err.contains("was refused"), "{err}");
    // Rank 0's challenge is signed with job-a's key, which job-b's process cannot verify: it
    // sends no signed hello and says whose key is missing.
    assert!(
        err.contains("no rank 0 of this job answered")
            && err.contains("does not hold this job's key"),
        "{err}"
    );
}

#[test]
fn a_rank_with_the_wrong_key_is_refused_and_named_at_the_timeout() {
    let port = programs::free_port();
    let start = Instant::now();
    let key = [("NCCL_PERF_RENDEZVOUS_KEY", "right")];
    let mut children: Vec<Child> = (0..3).map(|r| rank(BIN, r, 4, port, &key, &[])).collect();
    children.push(rank(
        BIN,
        3,
        4,
        port,
        &[("NCCL_PERF_RENDEZVOUS_KEY", "wrong")],
        &[],
    ));
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| finish(c, start, limit()).0)
        .collect();
    assert!(start.elapsed() < limit(), "{:?}", start.elapsed());
    let err = stderr0(&outs);
    assert_eq!(outs[0].status.code(), Some(4), "{err}");
    assert!(
        err.contains("missing: rank 3") && err.contains("refused claims: rank 3"),
        "{err}"
    );
    let e3 = text(&outs[3].stderr);
    assert_eq!(outs[3].status.code(), Some(6), "{e3}");
    assert!(!e3.contains("right") && !err.contains("right") && !err.contains("wrong"));
}

/// A launch whose rank 3 runs `bin` with `args`: every process stops with exit 6, and rank 0
/// names the difference.
fn mismatch(bin: &str, args: &[&str], expect: &str) {
    mismatch_with(bin, args, &[], expect);
}

/// [`mismatch`] with `env` added to rank 3's environment.
fn mismatch_with(bin: &str, args: &[&str], env: &[(&str, &str)], expect: &str) {
    let port = programs::free_port();
    let start = Instant::now();
    let id = [("TORCHELASTIC_RUN_ID", "job-m")];
    let mut children: Vec<Child> = (0..3).map(|r| rank(BIN, r, 4, port, &id, &[])).collect();
    let env3: Vec<(&str, &str)> = id.iter().chain(env).copied().collect();
    children.push(rank(bin, 3, 4, port, &env3, args));
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| finish(c, start, limit()).0)
        .collect();
    for o in &outs {
        assert_eq!(o.status.code(), Some(6), "{}", text(&o.stderr));
        assert!(!text(&o.stdout).contains("consistent"));
    }
    let err = stderr0(&outs);
    assert!(err.contains(expect), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn ranks_that_differ_in_options_or_binary_stop_the_launch() {
    mismatch(
        BIN,
        &["-b", "2M", "-e", "2M"],
        "rank 3 runs all_reduce_perf -b 2M; rank 0 runs all_reduce_perf -b 1M",
    );
    mismatch(
        BIN,
        &["-b", "1M", "-e", "1M", "-g", "2"],
        "rank 3 runs all_reduce_perf -g 2; rank 0 runs all_reduce_perf -g 1",
    );
    mismatch(
        BCAST,
        &["-b", "1M", "-e", "1M"],
        "rank 3 runs broadcast_perf; rank 0 runs all_reduce_perf",
    );
}

#[test]
fn ranks_that_differ_in_a_variable_that_shapes_the_run_stop_the_launch() {
    // In a real run rank 3 would call another bootstrap collective than the others.
    mismatch_with(
        BIN,
        &[],
        &[("NCCL_PERF_INIT_ROOTS", "2")],
        "rank 3 runs all_reduce_perf NCCL_PERF_INIT_ROOTS=2; \
         rank 0 runs all_reduce_perf NCCL_PERF_INIT_ROOTS unset",
    );
    mismatch_with(
        BIN,
        &[],
        &[("NCCL_TESTS_SPLIT", "MOD 2")],
        "rank 3 runs all_reduce_perf NCCL_TESTS_SPLIT=MOD 2; \
         rank 0 runs all_reduce_perf NCCL_TESTS_SPLIT unset",
    );
}

#[test]
fn processes_that_joined_rank_0_do_not_exit_0_when_its_own_check_fails_afterwards() {
    // Rank 0 alone reads the --explain-sku table, after every process has joined and the
    // launch has been agreed: its failure must reach them (issue 51, item 8).
    let dir = programs::scratch("rank0-check");
    let table = dir.join("bad.sku");
    std::fs::write(&table, "garbage\n").unwrap();
    let table = table.display().to_string();
    let port = programs::free_port();
    let start = Instant::now();
    let args = ["-b", "1M", "-e", "1M", "--explain", "--explain-sku", &table];
    let children: Vec<Child> = (0..4).map(|r| rank(BIN, r, 4, port, &[], &args)).collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| finish(c, start, limit()).0)
        .collect();
    let err = stderr0(&outs);
    assert_eq!(outs[0].status.code(), Some(255), "{err}");
    assert!(err.contains("--explain-sku: "), "{err}");
    for o in &outs[1..] {
        let e = text(&o.stderr);
        assert!(
            !matches!(o.status.code(), Some(0) | None),
            "a process that joined exited {:?}: {e}",
            o.status.code()
        );
        assert!(e.contains("rank 0 stopped the run: --explain-sku: "), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rank_that_dies_before_the_others_arrive_is_named_at_once() {
    let port = programs::free_port();
    let start = Instant::now();
    let r0 = rank(BIN, 0, 4, port, &[], &[]);
    let mut r1 = rank(BIN, 1, 4, port, &[], &[]);
    // Rank 1 has reached rank 0 (a slow start, e.g. under an emulator, can take longer than a
    // fixed pause), then has time to say hello.
    wait_connected(port);
    std::thread::sleep(Duration::from_millis(500));
    let pid = r1.id();
    let killed = Instant::now();
    r1.kill().unwrap();
    let _ = r1.wait();
    let (o, _) = finish(r0, start, limit());
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("rank 1 (pid {pid}")) && err.contains("left before"),
        "{err}"
    );
    // At once, not at the bootstrap timeout.
    assert!(
        killed.elapsed() < Duration::from_secs(3),
        "{:?}",
        killed.elapsed()
    );
}

/// Waits until some process holds an established TCP connection to port `port` of 127.0.0.1
/// (Linux's /proc/net/tcp: remote address `0100007F:<port>`, state 01), i.e. a rank reached
/// rank 0.
fn wait_connected(port: u16) {
    let t = Instant::now();
    let remote = format!("0100007F:{port:04X}");
    loop {
        let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        let connected = tcp.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[2] == remote && f[3] == "01"
        });
        if connected {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no process connected to port {port}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_second_rank_0_is_told_why() {
    let port = programs::free_port();
    let start = Instant::now();
    let first = rank(BIN, 0, 2, port, &[], &[]);
    wait_listening(port);
    let (o, _) = finish(rank(BIN, 0, 2, port, &[], &[]), start, limit());
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(err.contains("a second rank 0 of this launch"), "{err}");
    let mut first = first;
    let _ = first.kill();
    let _ = first.wait();
}

/// The binary with a clean environment plus `vars`, run to completion.
fn env_run(vars: &[(&str, &str)]) -> Output {
    let mut c = programs::program(BIN);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CUDA_VISIBLE_DEVICES", "0")
        .env("NCCL_PERF_BOOTSTRAP_TIMEOUT", "2")
        .args(["--dry-run", "-b", "1M", "-e", "1M"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        c.env(k, v);
    }
    let start = Instant::now();
    let (o, peak) = finish(c.spawn().unwrap(), start, Duration::from_secs(10));
    assert!(peak < 64 << 10, "{peak} KiB");
    o
}

#[test]
fn launcher_environments_that_would_make_a_lone_rank_0_or_explode() {
    // srun-like: a step, rank 3, no SLURM_STEP_NUM_TASKS and no SLURM_NTASKS.
    let o = env_run(&[
        ("SLURM_PROCID", "3"),
        ("SLURM_JOB_ID", "77"),
        ("SLURM_STEP_ID", "0"),
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(
        err.contains("SLURM_PROCID=3") && err.contains("SLURM_STEP_ID=0"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
    for size in ["18446744073709551615", "100000000"] {
        let o = env_run(&[
            ("RANK", "0"),
            ("WORLD_SIZE", size),
            ("MASTER_ADDR", "127.0.0.1"),
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(6), "{err}");
        assert!(err.contains("more than the 65536"), "{err}");
    }
    let o = env_run(&[
        ("SLURM_PROCID", "1"),
        ("SLURM_JOB_ID", "77"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_STEP_NUM_TASKS", "2"),
        ("SLURM_STEP_NODELIST", "n[0-100000]m[0-100000]"),
        ("SLURM_STEP_TASKS_PER_NODE", "18446744073709551615"),
    ]);
    // Rank 1 finds the first host (n0m0, which does not resolve) and gives up in time.
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("n0m0"), "{err}");
}

// ---- a forger that holds the public job key (no secret, no launcher job id) ----

/// HMAC-SHA256 of `parts`, each prefixed by its length as a little-endian u64.
fn sign(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    use hmac::Mac;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    for p in parts {
        m.update(&(p.len() as u64).to_le_bytes());
        m.update(p);
    }
    m.finalize().into_bytes().to_vec()
}

/// The job key of a launch with neither a secret nor a launcher job id: anyone can compute it.
fn public_key() -> Vec<u8> {
    use hmac::Mac;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&[]).unwrap();
    m.update(b"nccl-perf rendezvous key v3\0");
    m.finalize().into_bytes().to_vec()
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut head = [0u8; 4];
    s.read_exact(&mut head)?;
    let mut body = vec![0u8; u32::from_le_bytes(head) as usize];
    s.read_exact(&mut body)?;
    let tag = body.remove(0);
    Ok((tag, body))
}

/// The run description a real rank of a `size`-process job sends in its hello (public: any
/// process on the path sees it), taken by a stand-in rank 0 that challenges it once.
fn real_run_items(size: usize) -> Vec<Vec<u8>> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut child = rank(BIN, 1, size, port, &[], &[]);
    let (mut s, _) = l.accept().unwrap();
    // A challenge signed with the public key (no secret, no job id): nonce, salt, signature.
    let (nonce, salt) = ([5u8; 32], [6u8; 32]);
    let mac = sign(&public_key(), &[b"challenge", &nonce, &salt]);
    s.write_all(&frame(9, &[&nonce[..], &salt, &mac].concat()))
        .unwrap();
    let (tag, body) = read_frame(&mut s).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(tag, 1, "a hello");
    // magic, rank, size, local rank, colour, host hash, pid, then the host name and the items.
    let mut at = 4 + 8 * 5 + 4;
    let mut take = |n: usize| {
        let b = body[at..at + n].to_vec();
        at += n;
        b
    };
    let u32_of = |b: Vec<u8>| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    let host_len = u32_of(take(4));
    take(host_len);
    let n = u32_of(take(4));
    (0..n)
        .map(|_| {
            let len = u32_of(take(4));
            take(len)
        })
        .collect()
}

/// A hello for `rank` of `size` that fits the real run, signed with the public key over
/// `challenge`.
fn signed_hello(rank: u64, size: u64, items: &[Vec<u8>], challenge: &[u8]) -> Vec<u8> {
    let mut b = hello_body(rank, size, -1, "forger", items);
    let mac = sign(&public_key(), &[b"hello", challenge, &b]);
    b.extend_from_slice(&mac);
    frame(1, &b)
}

/// Connects, answers rank 0's challenge with `signed_hello(rank, size, ..)`; the connection.
fn forge(port: u16, rank: u64, size: u64, items: &[Vec<u8>]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let (tag, challenge) = read_frame(&mut s).unwrap();
    assert_eq!(tag, 9, "a challenge");
    s.write_all(&signed_hello(rank, size, items, &challenge))
        .unwrap();
    s
}

/// CPU time (user + system) of process `pid` so far, in clock ticks (1/100 s on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) end at its last ')'.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

#[test]
fn a_hello_signed_with_the_public_key_for_a_rank_past_the_end_is_refused() {
    // Before: rank 0 indexed its seats with the claimed rank and panicked (exit 1), and the
    // others waited out their timeout.
    let items = real_run_items(4);
    let mut answers = Vec::new();
    let (outs, _, took) = job(4, &[], |port| {
        for rank in [4, 5, 1 << 63, u64::MAX] {
            let mut s = forge(port, rank, 4, &items);
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            answers.push(text(&answer));
        }
    });
    assert_completed(&outs, took);
    for a in &answers {
        assert!(
            a.contains("refused: the rank is outside the launch"),
            "{a:?}"
        );
        assert!(
            !a.contains("pid") && !a.contains("vm"),
            "names nothing of the job: {a:?}"
        );
    }
    let err = stderr0(&outs);
    assert!(
        err.contains("claims a rank outside the launch's 4 processes"),
        "{err}"
    );
    assert!(err.contains("is open to any process"), "{err}");
}

/// A stranger seated as rank 2 of 3 (no secret: the job key is public) does `act` to its
/// connection (given rank 0's pid); then the real ranks 1 and 2 arrive. The job must form, and
/// rank 0's stderr is returned.
fn seated_stranger_then_the_real_ranks(act: impl FnOnce(&mut TcpStream, u32)) -> String {
    let items = real_run_items(3);
    let port = programs::free_port();
    let start = Instant::now();
    let r0 = rank(BIN, 0, 3, port, &[], &[]);
    wait_listening(port);
    let mut s = forge(port, 2, 3, &items);
    std::thread::sleep(Duration::from_millis(200));
    act(&mut s, r0.id());
    let rest: Vec<Child> = (1..3).map(|r| rank(BIN, r, 3, port, &[], &[])).collect();
    let mut outs = vec![finish(r0, start, limit()).0];
    outs.extend(rest.into_iter().map(|c| finish(c, start, limit()).0));
    assert_completed(&outs, start.elapsed());
    drop(s);
    stderr0(&outs)
}

#[test]
fn a_seated_stranger_that_sends_and_half_closes_neither_spins_rank_0_nor_keeps_its_seat() {
    // Before: rank 0 woke for it on every poll, at 80-100 % of a core, until its timeout.
    let err = seated_stranger_then_the_real_ranks(|s, r0| {
        s.write_all(b"x").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let before = cpu_ticks(r0);
        std::thread::sleep(Duration::from_secs(2));
        let spent = cpu_ticks(r0) - before;
        assert!(spent < 40, "rank 0 used {spent} ticks of CPU in 2 s");
    });
    // Rank 2's seat was free again: the real ranks met.
    assert!(err.contains("sent data before its welcome"), "{err}");
}

#[test]
fn a_seated_stranger_that_sends_and_stays_connected_loses_its_seat() {
    // Before: only a hang-up of a seated connection was watched, so data sent without closing
    // kept the seat; the real rank 2 was then refused as a second claim and the job timed out.
    let err = seated_stranger_then_the_real_ranks(|s, _| {
        s.write_all(b"junk before the welcome").unwrap();
        std::thread::sleep(Duration::from_millis(500));
    });
    assert!(err.contains("sent data before its welcome"), "{err}");
}

#[test]
fn a_flood_that_keeps_the_door_full_makes_no_real_rank_quit() {
    // Before: the door made room by sending the oldest waiting connection an abort, and a real
    // rank that got it exited 6 as a wrong launch; the job then timed out.
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let _alone = heavy();
    more_files();
    let port = programs::free_port();
    let start = Instant::now();
    let timeout = [("NCCL_PERF_BOOTSTRAP_TIMEOUT", "20")];
    let r0 = rank(BIN, 0, 4, port, &timeout, &[]);
    wait_listening(port);
    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicUsize::new(0));
    let held = Arc::new(Mutex::new(std::collections::VecDeque::new()));
    let flooders: Vec<_> = (0..3)
        .map(|_| {
            let (stop, made, held) = (stop.clone(), made.clone(), held.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let c = TcpStream::connect_timeout(
                        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                        Duration::from_millis(500),
                    );
                    if let Ok(c) = c {
                        made.fetch_add(1, Ordering::Relaxed);
                        let mut h = held.lock().unwrap();
                        h.push_back(c);
                        // Keep far more than the door holds open, the oldest closing.
                        if h.len() > 1500 {
                            h.pop_front();
                        }
                    }
                }
            })
        })
        .collect();
    while made.load(Ordering::Relaxed) < 900 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the flood did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let rest: Vec<Child> = (1..4)
        .map(|r| rank(BIN, r, 4, port, &timeout, &[]))
        .collect();
    let limit = Duration::from_secs(25);
    let mut outs = vec![finish(r0, start, limit).0];
    outs.extend(rest.into_iter().map(|c| finish(c, start, limit).0));
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.join().unwrap();
    }
    eprintln!(
        "{} flood connections; the job took {:?}",
        made.load(Ordering::Relaxed),
        start.elapsed()
    );
    for o in &outs {
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    let err = stderr0(&outs);
    eprintln!(
        "{}",
        err.lines()
            .filter(|l| l.contains("for load"))
            .collect::<String>()
    );
    // The door filled up (the flood's premise). Under an emulator (ci/arm64.sh) rank 0's door
    // runs emulated while the flood's connects are the host kernel's: it accepts (and signs
    // each connection's challenge) so much slower that the flood closes its oldest connections
    // before the door reaches them, and the door may never hold 512; the job must still form.
    let full = err.contains("closed for load (more than 512 waiting at once), from 127.0.0.1");
    if programs::runner().is_empty() {
        assert!(full, "{err}");
    } else if !full {
        eprintln!("under the emulator the door never held 512 connections at once");
    }
}

#[test]
fn a_rank_that_arrives_after_a_wrong_launch_is_told_why_at_once() {
    // Before: rank 0 told only the processes it already had; one arriving just after waited
    // its whole timeout and exited 4, "could not reach rank 0".
    let port = programs::free_port();
    let start = Instant::now();
    let job = [("TORCHELASTIC_RUN_ID", "job-x")];
    let r0 = rank(BIN, 0, 4, port, &job, &[]);
    wait_listening(port);
    let misfit = rank(BIN, 1, 4, port, &job, &["-b", "2M", "-e", "2M"]);
    let (m, _) = finish(misfit, start, limit());
    assert_eq!(m.status.code(), Some(6), "{}", text(&m.stderr));
    let late_start = Instant::now();
    let (late, _) = finish(rank(BIN, 2, 4, port, &job, &[]), start, limit());
    let err = text(&late.stderr);
    assert_eq!(late.status.code(), Some(6), "{err}");
    assert!(
        err.contains("the launch stopped before this process arrived: wrong launch"),
        "{err}"
    );
    // At once: well inside rank 0's 3 s of lingering (an emulated process starts slower).
    let at_once = if programs::runner().is_empty() { 2 } else { 10 };
    assert!(
        late_start.elapsed() < Duration::from_secs(at_once),
        "{:?}",
        late_start.elapsed()
    );
    let (o0, _) = finish(r0, start, limit());
    assert_eq!(o0.status.code(), Some(6), "{}", text(&o0.stderr));
}
