//! The PMI-1 client against an in-process fake launcher over a socket pair: a normal session,
//! garbage, silence (the deadline), oversized lines, a closed connection, the `PMI_PORT`
//! greeting.

use super::*;
use crate::engine::Engine;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

/// A fake launcher: answers each request line with `answer(line)` (`None`: say nothing),
/// until the client closes; returns every line it got.
fn fake(
    server: UnixStream,
    answer: impl Fn(&str) -> Option<String> + Send + 'static,
) -> thread::JoinHandle<Vec<String>> {
    thread::spawn(move || {
        let mut got = Vec::new();
        let mut w = server.try_clone().unwrap();
        for line in BufReader::new(server).lines() {
            let Ok(line) = line else { break };
            if let Some(a) = answer(&line) {
                let _ = w.write_all(a.as_bytes());
            }
            got.push(line);
        }
        got
    })
}

/// What a Hydra-like launcher answers, with a key-value space held in the closure's state.
fn hydra() -> impl Fn(&str) -> Option<String> + Send + 'static {
    let kvs = std::sync::Mutex::new(std::collections::HashMap::<String, String>::new());
    move |line: &str| {
        let w = words(line);
        let f = |k: &str| w.iter().find(|(a, _)| *a == k).map(|(_, v)| v.to_string());
        Some(match f("cmd")?.as_str() {
            "init" => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".into(),
            "get_maxes" => "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n".into(),
            "get_appnum" => "cmd=appnum appnum=0\n".into(),
            "get_my_kvsname" => "cmd=my_kvsname kvsname=kvs_42_0\n".into(),
            "put" => {
                kvs.lock().unwrap().insert(f("key")?, f("value")?);
                "cmd=put_result rc=0 msg=success\n".into()
            }
            "get" => match kvs.lock().unwrap().get(&f("key")?) {
                Some(v) => format!("cmd=get_result rc=0 msg=success value={v}\n"),
                None => "cmd=get_result rc=-1 msg=key_not_found\n".into(),
            },
            "barrier_in" => "cmd=barrier_out\n".into(),
            "finalize" => "cmd=finalize_ack\n".into(),
            _ => return None,
        })
    }
}

fn start(client: UnixStream, secs: f64) -> Result<Pmi1> {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    Pmi1::start(
        Box::new(client),
        "test".into(),
        Some(0),
        Some(2),
        None,
        deadline,
    )
}

#[test]
fn a_session_puts_fences_gets_and_finalizes() {
    let (c, s) = UnixStream::pair().unwrap();
    let server = fake(s, hydra());
    let mut p = start(c, 5.0).unwrap();
    assert_eq!((p.rank(), p.size(), p.kvsname()), (0, 2, "kvs_42_0"));
    assert_eq!(p.maxes().key, 64);
    assert_eq!(p.job(), "pmi:kvs_42_0");
    p.put("rv", b"hello world\n=x").unwrap();
    p.fence().unwrap();
    assert_eq!(p.get(0, "rv").unwrap(), b"hello world\n=x");
    // A key nobody put: the launcher's rc, one line.
    let e = p.get(1, "rv").unwrap_err().to_string();
    assert!(e.contains("rc=-1"), "{e}");
    p.finalize().unwrap();
    p.finalize().unwrap();
    drop(p);
    let got = server.join().unwrap();
    assert_eq!(got[0], "cmd=init pmi_version=1 pmi_subversion=1");
    assert!(got.contains(&"cmd=get_maxes".to_string()));
    assert!(got.contains(&"cmd=barrier_in".to_string()));
    assert!(
        got.iter()
            .any(|l| l.starts_with("cmd=put kvsname=kvs_42_0 key=nccl-perf-0-rv value=68656c6c6f"))
    );
    assert_eq!(got.iter().filter(|l| *l == "cmd=finalize").count(), 1);
}

#[test]
fn garbage_answers_are_one_line_errors() {
    for bad in [
        "cmd=whatever rc=0\n",
        "\u{1b}[31mnot a reply at all\n",
        "cmd=response_to_init rc=-1\n",
        "\0\0\0\n",
        "=\n",
    ] {
        let (c, s) = UnixStream::pair().unwrap();
        let bad = bad.to_string();
        let server = fake(s, move |_| Some(bad.clone()));
        let e = start(c, 5.0).err().expect("garbage accepted").to_string();
        assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{e:?}");
        assert!(e.starts_with("PMI-1 (test)"), "{e}");
        server.join().unwrap();
    }
    // A value that is not hex, a kvsname that is missing.
    let (c, s) = UnixStream::pair().unwrap();
    let h = hydra();
    let server = fake(s, move |l| {
        if l.starts_with("cmd=get ") {
            Some("cmd=get_result rc=0 value=zz\n".into())
        } else {
            h(l)
        }
    });
    let mut p = start(c, 5.0).unwrap();
    assert!(p.get(0, "rv").unwrap_err().to_string().contains("not hex"));
    drop(p);
    server.join().unwrap();
    let (c, s) = UnixStream::pair().unwrap();
    let h = hydra();
    let server = fake(s, move |l| {
        if l == "cmd=get_my_kvsname" {
            Some("cmd=my_kvsname\n".into())
        } else {
            h(l)
        }
    });
    assert!(
        start(c, 5.0)
            .err()
            .unwrap()
            .to_string()
            .contains("without a kvsname")
    );
    server.join().unwrap();
}

#[test]
fn a_silent_launcher_ends_at_the_deadline() {
    let (c, s) = UnixStream::pair().unwrap();
    let server = fake(s, |_| None);
    let t0 = Instant::now();
    let e = start(c, 0.5).err().unwrap();
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(450) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert!(
        matches!(
            e,
            Error::Peers {
                timed_out: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("timed out"), "{e}");
    server.join().unwrap();
    // A barrier nobody ends: the same.
    let (c, s) = UnixStream::pair().unwrap();
    let h = hydra();
    let server = fake(s, move |l| if l == "cmd=barrier_in" { None } else { h(l) });
    let mut p = start(c, 0.5).unwrap();
    assert!(matches!(
        p.fence(),
        Err(Error::Peers {
            timed_out: true,
            ..
        })
    ));
    drop(p);
    server.join().unwrap();
}

#[test]
fn an_endless_line_is_refused() {
    let (c, s) = UnixStream::pair().unwrap();
    let (written, all_written) = std::sync::mpsc::channel();
    let writer = thread::spawn(move || {
        let mut s = s;
        let chunk = vec![b'x'; 4096];
        for _ in 0..(MAX_LINE / 4096 + 4) {
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = written.send(());
        // A launcher keeps its end open while the process runs: closing it here could make the
        // client's first request fail (EPIPE) before it reads the line. Wait for the client to
        // close (its requests are read and dropped).
        let _ = std::io::copy(&mut s, &mut std::io::sink());
    });
    // The order that failed now and then: the whole line sent before the client's `cmd=init`
    // (waited for only as long as it takes: a writer blocked on a full socket goes on once the
    // client reads, and the result is the same in either order).
    let _ = all_written.recv_timeout(Duration::from_secs(10));
    let e = start(c, 5.0).err().unwrap().to_string();
    assert!(e.contains("longer than"), "{e}");
    writer.join().unwrap();
}

#[test]
fn a_closed_connection_is_named() {
    let (c, s) = UnixStream::pair().unwrap();
    drop(s);
    let e = start(c, 5.0).err().unwrap().to_string();
    assert!(e.contains("PMI-1 (test)"), "{e}");
}

#[test]
fn the_pmi_port_greeting_sets_rank_and_size() {
    let (c, s) = UnixStream::pair().unwrap();
    let h = hydra();
    let server = fake(s, move |l| {
        if l == "cmd=initack pmiid=7" {
            Some("cmd=initack\ncmd=set size=4\ncmd=set rank=3\ncmd=set debug=0\n".into())
        } else {
            h(l)
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut p = Pmi1::start(Box::new(c), "port".into(), None, None, Some("7"), deadline).unwrap();
    assert_eq!((p.rank(), p.size()), (3, 4));
    p.abort(3, "bye");
    drop(p);
    let got = server.join().unwrap();
    assert_eq!(got.last().unwrap(), "cmd=abort exitcode=3");
}

#[test]
fn values_and_keys_beyond_the_limits_are_refused() {
    let (c, s) = UnixStream::pair().unwrap();
    let h = hydra();
    let server = fake(s, move |l| {
        if l == "cmd=get_maxes" {
            Some("cmd=maxes rc=0 kvsname_max=256 keylen_max=16 vallen_max=64\n".into())
        } else {
            h(l)
        }
    });
    let mut p = start(c, 5.0).unwrap();
    assert!(
        p.put("rv", &[7u8; 40])
            .unwrap_err()
            .to_string()
            .contains("longer")
    );
    assert!(
        p.put("a-much-longer-key", b"x")
            .unwrap_err()
            .to_string()
            .contains("key")
    );
    assert!(p.put("rv", &[7u8; 10]).is_ok());
    drop(p);
    server.join().unwrap();
}

#[test]
fn hex_round_trips_and_refuses_junk() {
    assert_eq!(hex(b"\x00\xffA"), "00ff41");
    assert_eq!(unhex("00ff41").unwrap(), b"\x00\xffA");
    assert_eq!(unhex("ABcd").unwrap(), vec![0xab, 0xcd]);
    for junk in ["0", "zz", "0g", "é1"] {
        assert!(unhex(junk).is_none(), "{junk}");
    }
}
