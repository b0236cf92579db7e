//! The rendezvous between threads of this test process, over loopback.

use super::*;
use crate::fingerprint::Fingerprint;
use std::net::TcpListener;

pub(super) fn test_fingerprint() -> Fingerprint {
    Fingerprint(vec!["test_perf".into(), "1".into(), "-b 1M".into()])
}

/// A free port below the kernel's ephemeral range (from 10000; as tests/programs' helper): a
/// port from bind(0) can be taken as a local port by a connection another test makes before
/// rank 0 listens on it.
pub(super) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let span = ephemeral.saturating_sub(10_000).max(1000);
    let start = std::process::id().wrapping_mul(7919);
    (0..span)
        .map(|_| (10_000 + start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16)
        .find(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port")
}

pub(super) fn launch(rank: usize, size: usize, port: u16, timeout_ms: u64) -> TcpLaunch {
    TcpLaunch {
        launcher: "test",
        rank,
        size,
        local_rank: None,
        host: "127.0.0.1".into(),
        port,
        expected_hosts: None,
        job: "test-job".into(),
        secret: Default::default(),
        bind: None,
        timeout: Duration::from_millis(timeout_ms),
        // Short, so that the tests also show heartbeats keep quiet and slow ranks alive.
        silence: Some(SILENCE),
    }
}

/// The heartbeat timeout of these tests.
const SILENCE: Duration = Duration::from_secs(1);

/// Runs `f` on `ranks` of a `size`-process run, one thread each, returning each rank's result.
fn run_ranks<T: Send>(
    size: usize,
    ranks: &[usize],
    timeout_ms: u64,
    colors: &[i64],
    f: impl Fn(&mut TcpBootstrap) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    let port = free_port();
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = ranks
            .iter()
            .map(|&r| {
                let color = colors.get(r).copied().unwrap_or(0);
                s.spawn(move || {
                    let mut b = TcpBootstrap::connect(
                        &launch(r, size, port, timeout_ms),
                        color,
                        &test_fingerprint(),
                    )?;
                    f(&mut b)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn four_ranks_meet_and_run_every_collective() {
    let colors = [0, 1, 0, 1];
    let results = run_ranks(4, &[0, 1, 2, 3], 20_000, &colors, |b| {
        b.barrier()?;
        let sum = b.allreduce(b.world_rank() as f64 + 1.0, Reduce::Sum)?;
        let max = b.allreduce(b.world_rank() as f64, Reduce::Max)?;
        let mut id = [b.world_rank() as u8 + 10; 128];
        b.broadcast_id(&mut id)?;
        let texts = b.gather(format!("r{}", b.world_rank()))?;
        let all = b.allgather("é".repeat(b.world_rank()))?;
        assert_eq!(all, ["", "é", "éé", "ééé"]);
        // Several ids per group: group 0 (ranks 0, 2) has three, made by both of its
        // processes; group 1 (ranks 1, 3) one, made by rank 3.
        let mine: Vec<crate::ids::NumberedId> = match b.world_rank() {
            0 => vec![(0, [100; 128]), (2, [102; 128])],
            2 => vec![(1, [101; 128])],
            3 => vec![(0, [200; 128])],
            _ => vec![],
        };
        let count = if colors[b.world_rank()] == 0 { 3 } else { 1 };
        let shared: Vec<u8> = b.share_ids(&mine, count)?.iter().map(|i| i[0]).collect();
        let want: &[u8] = if count == 3 { &[100, 101, 102] } else { &[200] };
        assert_eq!(shared, want, "rank {}", b.world_rank());
        b.barrier()?;
        Ok((
            b.world_rank(),
            b.local_rank(),
            b.local_size(),
            b.group(),
            sum,
            max,
            id[0],
            texts,
        ))
    });
    for r in results {
        let (rank, local, local_size, group, sum, max, id, texts) = r.unwrap();
        // All threads share one host: local ranks follow the world ranks.
        assert_eq!((local, local_size), (rank, 4));
        assert_eq!(group.color, colors[rank]);
        assert_eq!((group.rank, group.size), (rank / 2, 2));
        assert_eq!((sum, max), (10.0, 3.0));
        // Group leaders are ranks 0 and 1.
        assert_eq!(id, 10 + (rank % 2) as u8);
        if rank == 0 {
            assert_eq!(texts, ["r0", "r1", "r2", "r3"]);
        } else {
            assert!(texts.is_empty());
        }
    }
}

#[test]
fn a_rank_that_never_arrives_is_named_by_everyone() {
    let start = Instant::now();
    let results = run_ranks(4, &[0, 1, 3], 1_500, &[], |b| b.barrier());
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    for r in results {
        let e = r.unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("missing: rank 2"), "{msg}");
        assert_eq!(exit_code(&e), 4, "{msg}");
    }
}

#[test]
fn without_rank_0_the_others_name_it() {
    let results = run_ranks(3, &[1, 2], 500, &[], |b| b.barrier());
    for r in results {
        let msg = r.unwrap_err().to_string();
        assert!(
            msg.contains("could not reach rank 0 at 127.0.0.1:"),
            "{msg}"
        );
        assert!(msg.contains("missing: rank 0"), "{msg}");
    }
}

#[test]
fn a_rank_that_leaves_is_named_at_the_next_collective() {
    let results = run_ranks(3, &[0, 1, 2], 20_000, &[], |b| {
        b.barrier()?;
        if b.world_rank() == 2 {
            return Ok(());
        }
        b.barrier()
    });
    assert!(results[2].is_ok());
    for r in &results[..2] {
        let msg = r.as_ref().unwrap_err().to_string();
        assert!(
            msg.contains("rank 2") && msg.contains("left the run"),
            "{msg}"
        );
    }
    // Rank 0 knows which process left (what --locate names as hung).
    match &results[0] {
        Err(Error::Peers { lost, .. }) => assert_eq!(lost, &[2]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rank_that_leaves_between_collectives_is_found_by_check_peers() {
    let results = run_ranks(3, &[0, 1, 2], 20_000, &[], |b| {
        b.barrier()?;
        if b.world_rank() == 2 {
            return Ok(String::new());
        }
        // As the watchdog does while the benchmark thread is busy on its GPUs.
        let start = Instant::now();
        loop {
            if let Err(e) = b.check_peers() {
                // The run is over: later collectives fail at once.
                assert!(b.barrier().is_err());
                return Ok(e.to_string());
            }
            assert!(start.elapsed() < Duration::from_secs(10), "never noticed");
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let msg = |i: usize| results[i].as_ref().unwrap().clone();
    assert!(
        msg(0).starts_with("bootstrap: rank 2 (pid ") && msg(0).contains(") left the run: "),
        "{}",
        msg(0)
    );
    assert!(
        msg(1).starts_with("bootstrap: rank 0 stopped the run: rank 2 (pid "),
        "{}",
        msg(1)
    );
}

/// A process that stops (SIGSTOP) keeps its connection but falls silent: its heartbeats end.
fn stop(b: &mut TcpBootstrap, for_how_long: Duration) {
    drop(b.beats.take());
    std::thread::sleep(for_how_long);
}

#[test]
fn a_stopped_rank_is_named_by_check_peers() {
    let results = run_ranks(3, &[0, 1, 2], 20_000, &[], |b| {
        b.barrier()?;
        if b.world_rank() == 2 {
            stop(b, Duration::from_secs(3));
            return Ok((String::new(), 0));
        }
        let start = Instant::now();
        loop {
            if let Err(e) = b.check_peers() {
                return Ok((e.to_string(), exit_code(&e)));
            }
            assert!(start.elapsed() < Duration::from_secs(10), "never noticed");
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let (m0, code0) = results[0].as_ref().unwrap();
    assert!(
        m0.starts_with("bootstrap: rank 2 (pid ") && m0.contains("not even a heartbeat"),
        "{m0}"
    );
    let (m1, code1) = results[1].as_ref().unwrap();
    assert!(
        m1.starts_with("bootstrap: rank 0 stopped the run: rank 2 (pid ")
            && m1.contains("stopped (SIGSTOP"),
        "{m1}"
    );
    // A wait that ran out: exit code 4 everywhere.
    assert_eq!((*code0, *code1), (4, 4));
}

#[test]
fn a_stopped_rank_is_named_in_a_collective_long_before_the_timeout() {
    let start = Instant::now();
    let results = run_ranks(3, &[0, 1, 2], 30_000, &[], |b| {
        b.barrier()?;
        if b.world_rank() == 1 {
            stop(b, Duration::from_secs(3));
            return Ok(());
        }
        b.barrier()
    });
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    for r in [&results[0], &results[2]] {
        let e = r.as_ref().unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("rank 1 (pid ")
                && msg.contains("during the barrier, not even a heartbeat"),
            "{msg}"
        );
        assert_eq!(exit_code(e), 4, "{msg}");
    }
}

#[test]
fn a_stopped_rank_0_is_named_by_the_others() {
    let results = run_ranks(3, &[0, 1, 2], 30_000, &[], |b| {
        b.barrier()?;
        if b.world_rank() == 0 {
            stop(b, Duration::from_secs(3));
            return Ok(String::new());
        }
        // One rank waits in a collective, the other checks as the watchdog does.
        if b.world_rank() == 1 {
            return b.barrier().map(|()| String::new());
        }
        let start = Instant::now();
        loop {
            if let Err(e) = b.check_peers() {
                return Ok(e.to_string());
            }
            assert!(start.elapsed() < Duration::from_secs(10), "never noticed");
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let e1 = results[1].as_ref().unwrap_err().to_string();
    assert!(
        e1.contains("rank 0 at 127.0.0.1:") && e1.contains("during the barrier, not even a"),
        "{e1}"
    );
    let m2 = results[2].as_ref().unwrap();
    assert!(
        m2.contains("rank 0 at 127.0.0.1:") && m2.contains("not even a heartbeat"),
        "{m2}"
    );
}

#[test]
fn heartbeats_keep_a_slow_rank_alive_in_a_collective() {
    // Rank 2 comes to the barrier long after the heartbeat timeout, busy but not stopped.
    let results = run_ranks(3, &[0, 1, 2], 20_000, &[], |b| {
        b.barrier()?;
        if b.world_rank() == 2 {
            std::thread::sleep(SILENCE * 4);
        } else {
            // The others check on it meanwhile, then wait in the barrier.
            let until = Instant::now() + SILENCE * 2;
            while Instant::now() < until {
                b.check_peers()?;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        b.barrier()?;
        b.allreduce(1.0, Reduce::Sum)
    });
    for r in results {
        assert_eq!(r.unwrap(), 3.0);
    }
}

#[test]
fn lost_peer_names_a_rank_that_left_or_nobody() {
    let results = run_ranks(3, &[0, 1, 2], 20_000, &[], |b| {
        b.barrier()?;
        // Nobody is lost: None, after the wait.
        let t = Instant::now();
        assert!(b.lost_peer(Duration::from_millis(200)).is_none());
        assert!(t.elapsed() >= Duration::from_millis(200));
        b.barrier()?;
        if b.world_rank() == 2 {
            return Ok(String::new());
        }
        // As after an NCCL error: no check_peers before.
        let lost = b
            .lost_peer(Duration::from_secs(5))
            .expect("rank 2 is named");
        assert_eq!(exit_code(&lost), 1);
        // Asked again, the same answer.
        assert_eq!(
            b.lost_peer(Duration::ZERO).map(|e| e.to_string()),
            Some(lost.to_string())
        );
        Ok(lost.to_string())
    });
    for r in &results[..2] {
        let msg = r.as_ref().unwrap();
        assert!(
            msg.contains("rank 2 (pid ") && msg.contains("left the run"),
            "{msg}"
        );
    }
}

#[test]
fn check_peers_is_quiet_while_everyone_is_there_and_finalize_waits_for_all() {
    let results = run_ranks(3, &[0, 1, 2], 20_000, &[], |b| {
        b.barrier()?;
        for _ in 0..5 {
            b.check_peers()?;
            std::thread::sleep(Duration::from_millis(5));
        }
        if b.world_rank() == 1 {
            // A slow last step, longer than the heartbeat timeout: the others must not take
            // the early finishers, nor the slow one, for lost ones.
            std::thread::sleep(SILENCE * 2);
        }
        for _ in 0..5 {
            b.check_peers()?;
            std::thread::sleep(Duration::from_millis(5));
        }
        b.finalize()
    });
    for r in results {
        r.unwrap();
    }
}

/// The exit code the benchmark core ends with for `e` (crates/bench/src/error.rs, whose tests
/// check the mapping): a wait that ran out 4, a wrong launch 6, a bad value 255, anything else 1.
fn exit_code(e: &Error) -> u8 {
    match e {
        Error::Peers {
            timed_out: true, ..
        } => 4,
        Error::Launch(_) => 6,
        Error::Usage(_) => 255,
        Error::Internal(_) | Error::Peers { .. } => 1,
        Error::Said(e) => exit_code(e),
    }
}

/// A failure of the run's own, as the benchmark core hands one to [`Bootstrap::fail`].
struct RunFailure(&'static str);

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Failure for RunFailure {
    fn exit_code(&self) -> u8 {
        1
    }
    fn report(&self) {}
}

#[test]
fn rank_0_tells_the_others_why_it_failed() {
    let results = run_ranks(3, &[0, 1, 2], 20_000, &[], |b| {
        b.barrier()?;
        if b.world_rank() == 0 {
            b.fail(&RunFailure("-J /x/y.json: cannot create the output file"));
            return Ok(());
        }
        b.barrier()
    });
    for r in &results[1..] {
        let msg = r.as_ref().unwrap_err().to_string();
        assert_eq!(
            msg,
            "bootstrap: rank 0 stopped the run: -J /x/y.json: cannot create the output file"
        );
    }
}

#[test]
fn one_process_needs_no_network() {
    let b = TcpBootstrap::connect(&launch(0, 1, 1, 10), 0, &test_fingerprint()).unwrap();
    b.barrier().unwrap();
    assert_eq!(b.allreduce(3.0, Reduce::Sum).unwrap(), 3.0);
    assert_eq!(b.gather("x".into()).unwrap(), ["x"]);
    assert!(b.describe().contains("1 process"));
}

#[test]
fn strays_and_duplicates() {
    // A process of another job is refused (it tries again until its own deadline: a refusal
    // is not signed, anyone could send one); the run goes on.
    let port = free_port();
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let root = s.spawn(|| {
            TcpBootstrap::connect(&launch(0, 2, port, 10_000), 0, &test_fingerprint())?.barrier()
        });
        let stray = s.spawn(|| {
            let mut l = launch(1, 2, port, 1_500);
            l.job = "other-job".into();
            TcpBootstrap::connect(&l, 0, &test_fingerprint()).map(|_| ())
        });
        let stray = stray.join().unwrap();
        let err = stray.unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("was refused") && msg.contains("does not hold this job's key"),
            "{msg}"
        );
        assert_eq!(exit_code(&err), 6);
        let good = s.spawn(|| {
            TcpBootstrap::connect(&launch(1, 2, port, 10_000), 0, &test_fingerprint())?.barrier()
        });
        vec![root.join().unwrap(), good.join().unwrap()]
    });
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
}

#[test]
fn rank_lists_are_compact() {
    let hosts: Vec<String> = ["a", "a", "b", "b", "b", ""].map(String::from).to_vec();
    assert_eq!(
        rank_list(&[1, 2, 3, 5], Some(&hosts)),
        "rank 1 (on a), ranks 2-3 (on b), rank 5"
    );
    assert_eq!(rank_list(&[0, 1, 2, 7], None), "ranks 0-2, rank 7");
    let many: Vec<usize> = (0..100).step_by(2).collect();
    assert!(rank_list(&many, None).ends_with("and 34 more"));
}

#[test]
fn seconds_to_a_tenth() {
    assert_eq!(secs(Duration::from_secs(120)), "120 s");
    assert_eq!(secs(Duration::from_millis(2500)), "2.5 s");
    assert_eq!(secs(Duration::from_nanos(2_007_495_095)), "2 s");
    assert_eq!(secs(Duration::from_millis(10_460)), "10.5 s");
}

/// Relays one connection between `front` (where the process connects) and rank 0 at `back`,
/// frame by frame; `meddle(n, frame)` may change the `n`-th whole frame (length, tag, body)
/// the process sends (0: its hello) or return `None` to drop it.
fn relay(
    front: TcpListener,
    back: u16,
    meddle: impl Fn(usize, Vec<u8>) -> Option<Vec<u8>> + Send + 'static,
) -> std::thread::JoinHandle<()> {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        let (mut leaf, _) = front.accept().unwrap();
        // Rank 0 may not listen yet.
        let t = Instant::now();
        let mut root = loop {
            match std::net::TcpStream::connect(("127.0.0.1", back)) {
                Ok(s) => break s,
                Err(e) if t.elapsed() > Duration::from_secs(5) => panic!("{e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let (mut leaf_r, mut root_w) = (leaf.try_clone().unwrap(), root.try_clone().unwrap());
        // Rank 0 to the process: passed through untouched.
        let down = std::thread::spawn(move || {
            let _ = std::io::copy(&mut root, &mut leaf);
        });
        let mut n = 0;
        loop {
            let mut head = [0u8; 4];
            if leaf_r.read_exact(&mut head).is_err() {
                break;
            }
            let mut frame = head.to_vec();
            frame.resize(4 + u32::from_le_bytes(head) as usize, 0);
            if leaf_r.read_exact(&mut frame[4..]).is_err() {
                break;
            }
            if let Some(f) = meddle(n, frame)
                && root_w.write_all(&f).is_err()
            {
                break;
            }
            n += 1;
        }
        let _ = root_w.shutdown(std::net::Shutdown::Write);
        let _ = down.join();
    })
}

/// A job of two where rank 1 reaches rank 0 through a relay that meddles with what rank 1
/// sends after its hello, running two barriers; rank 0's error.
fn relayed_barrier(meddle: impl Fn(usize, Vec<u8>) -> Option<Vec<u8>> + Send + 'static) -> Error {
    let port = free_port();
    let front = TcpListener::bind("127.0.0.1:0").unwrap();
    let front_port = front.local_addr().unwrap().port();
    let relay = relay(front, port, meddle);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        // Two barriers: a frame replayed after the first is read in the second.
        let two = |l: TcpLaunch| -> Result<()> {
            let b = TcpBootstrap::connect(&l, 0, &test_fingerprint())?;
            b.barrier()?;
            b.barrier()
        };
        let root = s.spawn(move || two(launch(0, 2, port, 10_000)));
        let leaf = s.spawn(move || two(launch(1, 2, front_port, 10_000)));
        vec![root.join().unwrap(), leaf.join().unwrap()]
    });
    relay.join().unwrap();
    assert!(results[1].is_err(), "{results:?}");
    results.into_iter().next().unwrap().unwrap_err()
}

#[test]
fn a_relay_that_changes_replays_or_drops_a_frame_after_the_hello_is_caught() {
    // The first frame after the hello (a heartbeat or the barrier), changed in its last byte.
    let e = relayed_barrier(|n, mut f| {
        if n == 1 {
            let last = f.len() - 1;
            f[last] ^= 1;
        }
        Some(f)
    });
    let msg = e.to_string();
    assert!(
        msg.contains("rank 1") && msg.contains("fails authentication"),
        "{msg}"
    );
    // The same frame sent twice.
    let e = relayed_barrier(|n, f| Some(if n == 1 { [f.clone(), f].concat() } else { f }));
    assert!(e.to_string().contains("fails authentication"), "{e}");
    // A frame injected in place of the first one (a well-formed barrier, unsealed).
    let e = relayed_barrier(|n, f| {
        Some(if n == 1 {
            vec![1, 0, 0, 0, wire::BARRIER]
        } else {
            f
        })
    });
    assert!(e.to_string().contains("fails authentication"), "{e}");
    // The first frame dropped: the next one is out of sequence.
    let e = relayed_barrier(|n, f| (n != 1).then_some(f));
    assert!(e.to_string().contains("fails authentication"), "{e}");
}

#[test]
fn a_relay_that_passes_everything_changes_nothing() {
    let port = free_port();
    let front = TcpListener::bind("127.0.0.1:0").unwrap();
    let front_port = front.local_addr().unwrap().port();
    let relay = relay(front, port, |_, f| Some(f));
    let results: Vec<Result<f64>> = std::thread::scope(|s| {
        let root = s.spawn(|| {
            TcpBootstrap::connect(&launch(0, 2, port, 10_000), 0, &test_fingerprint())?
                .allreduce(1.0, Reduce::Sum)
        });
        let leaf = s.spawn(|| {
            TcpBootstrap::connect(&launch(1, 2, front_port, 10_000), 0, &test_fingerprint())?
                .allreduce(2.0, Reduce::Sum)
        });
        vec![root.join().unwrap(), leaf.join().unwrap()]
    });
    assert!(results.iter().all(|r| matches!(r, Ok(3.0))), "{results:?}");
    relay.join().unwrap();
}

#[test]
fn an_unsigned_abort_before_the_welcome_makes_a_process_try_again() {
    // Anyone could send it (a flood's victim got one from rank 0's door, and a squatter can
    // send one): the process tries again and meets the real rank 0. Before, it exited 6.
    let port = free_port();
    let fake = TcpListener::bind(("127.0.0.1", port)).unwrap();
    std::thread::scope(|s| {
        let leaf = s.spawn(|| {
            TcpBootstrap::connect(&launch(1, 2, port, 10_000), 0, &test_fingerprint())?.barrier()
        });
        let (mut c, _) = fake.accept().unwrap();
        // A challenge signed with the job's key: without a secret anyone can make one.
        let public = JobKey::derive("test-job", &Default::default(), &[]);
        let challenge = challenge::Challenge::new(&public, &[1; 32])
            .unwrap()
            .bytes();
        wire::send(&mut c, wire::CHALLENGE, &challenge, Duration::from_secs(1)).unwrap();
        let (tag, _) = wire::recv(&mut c, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(tag, wire::HELLO);
        let abort = Encoder::default()
            .u32(wire::abort::LAUNCH)
            .str("refused: you are not welcome")
            .0;
        wire::send(&mut c, wire::ABORT, &abort, Duration::from_secs(1)).unwrap();
        drop((c, fake));
        let root = TcpBootstrap::connect(&launch(0, 2, port, 10_000), 0, &test_fingerprint())
            .and_then(|b| b.barrier());
        assert!(root.is_ok(), "{root:?}");
        let leaf = leaf.join().unwrap();
        assert!(leaf.is_ok(), "{leaf:?}");
    });
}

#[test]
fn a_connection_closed_for_load_is_closed_not_told_to_stop() {
    use std::io::Read;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let key = JobKey::derive("test-job", &Default::default(), &[]);
    let mut door = door::Door::new(vec![l], key, [0; 32]).unwrap();
    let mut clients = Vec::new();
    for _ in 0..door::MAX_PENDING + 20 {
        clients.push(std::net::TcpStream::connect(addr).unwrap());
        if clients.len() % 64 == 0 {
            let _ = door.next(Instant::now() + Duration::from_millis(20), &[]);
        }
    }
    for _ in 0..5 {
        let _ = door.next(Instant::now() + Duration::from_millis(50), &[]);
    }
    let (mut closed, mut waiting) = (0, 0);
    for c in &mut clients {
        let mut challenge = [0u8; 5 + challenge::BYTES];
        c.read_exact(&mut challenge).unwrap();
        assert_eq!(challenge[4], wire::CHALLENGE);
        c.set_nonblocking(true).unwrap();
        let mut rest = [0u8; 64];
        match c.read(&mut rest) {
            Ok(0) => closed += 1,
            Ok(n) => panic!("a dropped connection was sent {n} bytes (tag {})", rest[4]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => waiting += 1,
            Err(_) => closed += 1,
        }
    }
    assert_eq!(waiting, door::MAX_PENDING);
    assert_eq!(closed, 20);
    let summary = door.load_summary().unwrap();
    assert!(
        summary.starts_with("20 connections closed for load"),
        "{summary}"
    );
    assert!(summary.contains("from 127.0.0.1 (20)"), "{summary}");
}

#[test]
fn a_contribution_of_the_wrong_size_is_refused_naming_its_rank() {
    // A member that sends 7 bytes for an allreduce (8: one f64) is named, rather than its value
    // read as NaN.
    let results = run_ranks(2, &[0, 1], 20_000, &[], |b| {
        if b.world_rank() == 1 {
            let odd = vec![0u8; 7];
            return b
                .collective(wire::REDUCE, odd, &|bodies, _| {
                    vec![std::rc::Rc::from([]); bodies.len()]
                })
                .map(|_| 0.0);
        }
        b.allreduce(1.0, Reduce::Sum)
    });
    let e = results[0].as_ref().unwrap_err().to_string();
    assert!(
        e.contains("rank 1") && e.contains("sent 7 bytes for the allreduce, which takes 8"),
        "{e}"
    );
    assert!(results[1].is_err());
    // 9 bytes (a prefix of them was used before): the frame is longer than an allreduce's,
    // refused before its body is read.
    let results = run_ranks(2, &[0, 1], 20_000, &[], |b| {
        if b.world_rank() == 1 {
            return b
                .collective(wire::REDUCE, vec![0u8; 9], &|bodies, _| {
                    vec![std::rc::Rc::from([]); bodies.len()]
                })
                .map(|_| 0.0);
        }
        b.allreduce(1.0, Reduce::Sum)
    });
    let e = results[0].as_ref().unwrap_err().to_string();
    assert!(
        e.contains("rank 1") && e.contains("a frame of 41 bytes for an allreduce (at most 40)"),
        "{e}"
    );
    assert_eq!(wire::body_size(wire::GATHER), None);
    assert_eq!(wire::body_size(wire::BCAST), Some(128));
}
