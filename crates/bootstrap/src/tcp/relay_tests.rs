//! What reaches rank 0 between the hello and the end: a relay that changes, replays or drops a
//! frame after the hello (caught) or passes everything (nothing changes), an unsigned abort
//! before the welcome, a connection closed for load, and a contribution of the wrong size.

use super::tests::{free_port, launch, run_ranks, test_fingerprint};
use super::wire::Encoder;
use super::*;
use crate::{Bootstrap, Reduce};
use std::net::TcpListener;

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
