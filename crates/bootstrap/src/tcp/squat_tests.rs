//! A keyed launch against relays, squatters and strangers that hold no key (issue: "no relay,
//! squatter or stale answer may hold or break a keyed launch"): every wait ends by its
//! deadline whatever arrives, nobody settles on a squatter, and nothing a stranger sends makes
//! a real process give up before its deadline.

use super::tests::{free_port, launch, test_fingerprint};
use super::*;
use crate::Bootstrap;
use crate::auth::Secret;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};

/// A launch of `size` on `port` whose processes hold a secret.
fn keyed(rank: usize, size: usize, port: u16, timeout_ms: u64) -> TcpLaunch {
    let mut l = launch(rank, size, port, timeout_ms);
    l.secret = Secret::from_env(Some("a secret long enough for the tests"), None).unwrap();
    l
}

/// Accepts on `front` and relays to rank 0 at `back`: rank 0's bytes pass through untouched;
/// of the process' frames only the first (its hello) is passed on, and then `inject` is sent
/// to rank 0 followed by one byte every millisecond (a frame that never ends), for `for_how_long`.
fn trickling_relay(
    front: TcpListener,
    back: u16,
    inject: Vec<u8>,
    for_how_long: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let (mut leaf, _) = front.accept().unwrap();
        let t = Instant::now();
        let mut root = loop {
            match TcpStream::connect(("127.0.0.1", back)) {
                Ok(s) => break s,
                Err(e) if t.elapsed() > Duration::from_secs(5) => panic!("{e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let (mut leaf_r, mut root_w) = (leaf.try_clone().unwrap(), root.try_clone().unwrap());
        let down = std::thread::spawn(move || {
            let _ = std::io::copy(&mut root, &mut leaf);
        });
        let mut head = [0u8; 4];
        leaf_r.read_exact(&mut head).unwrap();
        let mut hello = vec![0u8; u32::from_le_bytes(head) as usize];
        leaf_r.read_exact(&mut hello).unwrap();
        root_w.write_all(&[&head[..], &hello].concat()).unwrap();
        // What the process sends from now on is swallowed.
        let swallow = std::thread::spawn(move || {
            let _ = std::io::copy(&mut leaf_r, &mut std::io::sink());
        });
        let t = Instant::now();
        if root_w.write_all(&inject).is_ok() {
            while t.elapsed() < for_how_long && root_w.write_all(&[0]).is_ok() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let _ = root_w.shutdown(std::net::Shutdown::Both);
        let _ = down.join();
        let _ = swallow.join();
    })
}

/// A keyed job of two whose rank 1 goes through a relay that injects `inject` and trickles;
/// both run a barrier. Rank 0's error and how long rank 0 took.
fn trickled_barrier(inject: Vec<u8>) -> (Error, Duration) {
    let port = free_port();
    let front = TcpListener::bind("127.0.0.1:0").unwrap();
    let front_port = front.local_addr().unwrap().port();
    let relay = trickling_relay(front, port, inject, Duration::from_secs(30));
    let (root, leaf) = std::thread::scope(|s| {
        let root = s.spawn(move || {
            let t = Instant::now();
            let r = TcpBootstrap::connect(&keyed(0, 2, port, 3000), 0, &test_fingerprint())
                .and_then(|b| b.barrier());
            (r, t.elapsed())
        });
        let leaf = s.spawn(move || {
            TcpBootstrap::connect(&keyed(1, 2, front_port, 3000), 0, &test_fingerprint())
                .and_then(|b| b.barrier())
        });
        (root.join().unwrap(), leaf.join().unwrap())
    });
    assert!(leaf.is_err(), "{leaf:?}");
    relay.join().unwrap();
    (root.0.unwrap_err(), root.1)
}

#[test]
fn a_relay_that_trickles_a_frame_after_the_welcome_holds_nobody_past_the_deadline() {
    // The length of a 64 MiB gather, then a byte a millisecond: before, rank 0 read on for as
    // long as bytes came (60 s here, 19 hours at 1 KB/s). Now the heartbeat timeout (1 s)
    // names rank 1 well within the bootstrap timeout (3 s).
    let mut gather = ((64u32 << 20) + 1).to_le_bytes().to_vec();
    gather.push(wire::GATHER);
    let (e, took) = trickled_barrier(gather);
    let msg = e.to_string();
    assert!(
        msg.contains("rank 1") && msg.contains("began a gather and did not finish it in time"),
        "{msg}"
    );
    assert!(took < Duration::from_secs(5), "rank 0 took {took:?}: {msg}");
    // A heartbeat's tag with a 64 MiB length: refused before anything more is read.
    let mut beat = ((64u32 << 20) + 1).to_le_bytes().to_vec();
    beat.push(wire::HEARTBEAT);
    let (e, took) = trickled_barrier(beat);
    let msg = e.to_string();
    assert!(
        msg.contains("rank 1")
            && msg.contains("a frame of 67108864 bytes for a heartbeat (at most 4128)"),
        "{msg}"
    );
    assert!(took < Duration::from_secs(3), "rank 0 took {took:?}: {msg}");
}

#[test]
fn closing_a_connection_that_trickles_ends_within_its_limit() {
    // Before: close() drained for as long as bytes came (45 s in the red team's run).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let mut b = l.accept().unwrap().0;
    let key = JobKey::derive("job", &Secret::default(), &[]).session(&[1; 32], &[2; 32]);
    let (mut inbound, _w) = beat::link(a, &key, seal::Direction::ToRoot).unwrap();
    let trickle = std::thread::spawn(move || {
        let mut head = ((64u32 << 20) + 1).to_le_bytes().to_vec();
        head.push(wire::GATHER);
        let _ = b.write_all(&head);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) && b.write_all(&[0]).is_ok() {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    let mut heard = Instant::now();
    close(&mut inbound, &mut heard);
    let took = t.elapsed();
    drop(inbound);
    trickle.join().unwrap();
    assert!(took < CLOSE_LIMIT + Duration::from_millis(500), "{took:?}");
}

/// What a keyless squatter does with the `n`-th connection it accepts.
fn squat(n: usize, c: &mut TcpStream) {
    let send = |c: &mut TcpStream, tag, body: &[u8]| {
        let _ = wire::send(c, tag, body, Duration::from_secs(1));
    };
    // The public key of this job without the secret: all a stranger can sign with.
    let public = JobKey::derive("test-job", &Secret::default(), &[]);
    match n % 7 {
        // A challenge it signs with the only key it has.
        0 => send(
            c,
            wire::CHALLENGE,
            &challenge::Challenge::new(&public, &[9; 32])
                .unwrap()
                .bytes(),
        ),
        // A challenge with a made-up signature.
        1 => send(c, wire::CHALLENGE, &[7u8; challenge::BYTES]),
        // A welcome first.
        2 => send(c, wire::WELCOME, &[0u8; 64]),
        // A length of 0xFFFFFFFF.
        3 => {
            let _ = c.write_all(&[0xff, 0xff, 0xff, 0xff, wire::GATHER]);
        }
        // An unsigned abort.
        4 => send(
            c,
            wire::ABORT,
            &wire::abort_body(wire::abort::LAUNCH, "go away"),
        ),
        // A challenge of the old length.
        5 => send(c, wire::CHALLENGE, &[1u8; 32]),
        // Nothing: closed at once.
        _ => {}
    }
    // Keep the connection a moment, reading what comes (an unsigned hello at most).
    let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 4096];
    let _ = c.read(&mut sink);
}

#[test]
fn a_squatter_before_rank_0_makes_no_process_give_up() {
    // Before: a welcome with a bad signature or a first frame that is not a challenge made a
    // process exit 6 at once, and a length of 0xFFFFFFFF exit 1 printing
    // `Other("bad message length 4294967295")`.
    let port = free_port();
    let squatter = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let served = std::thread::scope(|s| {
        let leaf = s.spawn(|| {
            TcpBootstrap::connect(&keyed(1, 2, port, 10_000), 0, &test_fingerprint())
                .and_then(|b| b.barrier())
        });
        // The squatter serves every connection for 3 s, then rank 0 takes the port.
        squatter.set_nonblocking(true).unwrap();
        let t = Instant::now();
        let mut n = 0;
        while t.elapsed() < Duration::from_secs(3) {
            match squatter.accept() {
                Ok((mut c, _)) => {
                    c.set_nonblocking(false).unwrap();
                    squat(n, &mut c);
                    n += 1;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        drop(squatter);
        let root = TcpBootstrap::connect(&keyed(0, 2, port, 10_000), 0, &test_fingerprint())
            .and_then(|b| b.barrier());
        assert!(root.is_ok(), "{root:?}");
        let leaf = leaf.join().unwrap();
        assert!(leaf.is_ok(), "{leaf:?}");
        n
    });
    assert!(served >= 5, "the process tried only {served} times");
}

#[test]
fn a_stranger_alone_is_named_in_a_plain_sentence_at_the_deadline() {
    for kind in [1, 2, 3] {
        let port = free_port();
        let squatter = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let quit = stop.clone();
        let serve = std::thread::spawn(move || {
            squatter.set_nonblocking(true).unwrap();
            while !quit.load(std::sync::atomic::Ordering::Relaxed) {
                match squatter.accept() {
                    Ok((mut c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        squat(kind, &mut c);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        let t = Instant::now();
        let r = TcpBootstrap::connect(&keyed(1, 2, port, 1500), 0, &test_fingerprint());
        let took = t.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        serve.join().unwrap();
        let Err(e) = r else {
            panic!("joined a stranger")
        };
        let msg = e.to_string();
        assert!(matches!(e, Error::Launch(_)), "{msg}");
        assert!(
            took >= Duration::from_millis(1400),
            "gave up after {took:?}: {msg}"
        );
        assert!(took < Duration::from_secs(4), "{took:?}");
        assert!(msg.contains("no rank 0 of this job answered"), "{msg}");
        assert!(
            !msg.contains("Other(") && !msg.contains("bad message length"),
            "{msg}"
        );
        let expect = match kind {
            1 => "does not hold this job's key",
            2 => "it sent a welcome first",
            _ => "a frame of 4294967294 bytes for a gather (at most 96)",
        };
        assert!(msg.contains(expect), "{msg}");
    }
}

#[test]
fn rank_0_listens_on_every_address_and_a_squatter_on_one_of_them_is_named() {
    // `localhost` resolving to ::1 and 127.0.0.1 (the Debian and RHEL default): before, rank 0
    // bound 127.0.0.1 alone, and a process that took [::1]:PORT met the others first.
    let port = free_port();
    let v4 = SocketAddr::from(([127, 0, 0, 1], port));
    let v6: SocketAddr = format!("[::1]:{port}").parse().unwrap();
    let Ok(squatter) = TcpListener::bind(v6) else {
        // IPv6 is off on this machine: nobody can squat ::1 either; both still bind or skip.
        let ls = meet::listen_on(&[v4, v6]).unwrap();
        assert_eq!(ls.len(), 1);
        return;
    };
    let e = meet::listen_on(&[v4, v6]).unwrap_err().to_string();
    assert!(
        e.contains(&format!("[::1]:{port}")) && e.contains("already listens on that port"),
        "{e}"
    );
    drop(squatter);
    let ls = meet::listen_on(&[v4, v6]).unwrap();
    assert_eq!(ls.len(), 2);
    // Neither address is free for anyone else now.
    assert!(TcpListener::bind(v6).is_err() && TcpListener::bind(v4).is_err());
}

#[test]
fn a_process_moves_on_from_a_squatter_on_another_address_of_rank_0s_name() {
    // Rank 0 at 127.0.0.1; the name also resolves (first) to 127.0.0.2, where a keyless
    // squatter challenges, takes whatever hello comes and then says nothing. Before, the
    // process stayed with the first address that answered until its deadline.
    let port = free_port();
    let squatter = TcpListener::bind(("127.0.0.2", port)).unwrap();
    let hellos = std::thread::spawn(move || {
        let mut macs = Vec::new();
        squatter.set_nonblocking(true).unwrap();
        let t = Instant::now();
        let mut held = Vec::new();
        while t.elapsed() < Duration::from_secs(4) {
            if let Ok((mut c, _)) = squatter.accept() {
                c.set_nonblocking(false).unwrap();
                let public = JobKey::derive("test-job", &Secret::default(), &[]);
                let ch = challenge::Challenge::new(&public, &[9; 32])
                    .unwrap()
                    .bytes();
                wire::send(&mut c, wire::CHALLENGE, &ch, Duration::from_secs(1)).unwrap();
                if let Ok((wire::HELLO, body)) =
                    wire::recv(&mut c, Instant::now() + Duration::from_secs(1))
                {
                    macs.push(body[body.len() - 32..].to_vec());
                }
                held.push(c);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        macs
    });
    let resolve = move |_: &str, p: u16| -> std::io::Result<Vec<SocketAddr>> {
        Ok(vec![
            SocketAddr::from(([127, 0, 0, 2], p)),
            SocketAddr::from(([127, 0, 0, 1], p)),
        ])
    };
    let t = Instant::now();
    let (root, leaf) = std::thread::scope(|s| {
        let root = s.spawn(|| {
            let mut l = keyed(0, 2, port, 10_000);
            l.bind = Some("127.0.0.1".parse().unwrap());
            TcpBootstrap::connect(&l, 0, &test_fingerprint()).and_then(|b| b.barrier())
        });
        let leaf = s.spawn(|| {
            TcpBootstrap::connect_via(
                &keyed(1, 2, port, 10_000),
                0,
                &test_fingerprint(),
                &resolve,
                None,
            )
            .and_then(|b| b.barrier())
        });
        (root.join().unwrap(), leaf.join().unwrap())
    });
    let took = t.elapsed();
    assert!(root.is_ok() && leaf.is_ok(), "{root:?} {leaf:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    // The squatter got no signed hello: nothing to test guesses against.
    let macs = hellos.join().unwrap();
    assert!(!macs.is_empty(), "the squatter was never met");
    assert!(macs.iter().all(|m| m.iter().all(|&b| b == 0)), "{macs:?}");
}

#[test]
fn every_launch_has_its_own_salt() {
    // Before: the secret was stretched under a constant and the job id, so one table of
    // guesses served every launch without a launcher job id.
    let salt_of = |port: u16| {
        std::thread::scope(|s| {
            let root = s.spawn(move || {
                TcpBootstrap::connect(&keyed(0, 2, port, 1000), 0, &test_fingerprint())
            });
            let t = Instant::now();
            let mut c = loop {
                match TcpStream::connect(("127.0.0.1", port)) {
                    Ok(c) => break c,
                    Err(e) if t.elapsed() > Duration::from_secs(5) => panic!("{e}"),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            };
            let (tag, body) = wire::recv(&mut c, Instant::now() + Duration::from_secs(5)).unwrap();
            assert_eq!(tag, wire::CHALLENGE);
            let _ = root.join();
            challenge::Challenge::parse(&body).unwrap().salt
        })
    };
    assert_ne!(salt_of(free_port()), salt_of(free_port()));
}
