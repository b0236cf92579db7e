//! The rendezvous between threads of this test process, over loopback: meeting, every
//! collective, ranks that never arrive or leave, failures told to the others, and the helpers
//! the other tests of `tcp` share (`silence_tests.rs`, `relay_tests.rs`, `squat_tests.rs`).

use super::*;
use crate::error::Failure;
use crate::fingerprint::Fingerprint;
use crate::{Bootstrap, Reduce};
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
pub(super) const SILENCE: Duration = Duration::from_secs(1);

/// Runs `f` on `ranks` of a `size`-process run, one thread each, returning each rank's result.
pub(super) fn run_ranks<T: Send>(
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

/// The exit code the benchmark core ends with for `e` (crates/bench/src/error.rs, whose tests
/// check the mapping): a wait that ran out 4, a wrong launch 6, a bad value 255, anything else 1.
pub(super) fn exit_code(e: &Error) -> u8 {
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
