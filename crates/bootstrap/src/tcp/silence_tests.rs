//! Processes that fall silent (stopped, as by SIGSTOP) or leave between collectives: heartbeats
//! name them long before the timeout, keep a slow rank alive, and `check_peers`, `lost_peer`
//! and `finalize` say who is gone, or nothing while everyone is there.

use super::tests::{SILENCE, exit_code, run_ranks};
use super::*;
use crate::{Bootstrap, Reduce};

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
