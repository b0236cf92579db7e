//! Strangers at rank 0's door while a real job meets: idle connections held open, a flood of
//! 1000, junk, oversized frames and forged hellos (for a free rank, a taken rank, with a wrong
//! key), and a process of another job on the same port.

use super::{
    BCAST, BIN, assert_completed, finish, forged_hello, frame, heavy, job, limit, more_files, rank,
    say, stderr0, text, timeout, wait_listening,
};
use crate::programs;
use std::net::TcpStream;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

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
