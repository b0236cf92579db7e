//! A property of rank 0's judgement: whatever a connection sends as its hello, it is seated
//! only when every field fits this launch, and otherwise refused (or, when the key proves
//! the job, stops the launch) — never a panic, never an index past the end.

use super::*;
use crate::auth::Secret;
use std::sync::Mutex;

/// splitmix64: reproducible numbers for the generated hellos.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// An edge value around `size` or anything at all.
    fn count(&mut self, size: u64) -> u64 {
        let edges = [
            0,
            1,
            2,
            size - 1,
            size,
            size + 1,
            1 << 31,
            1 << 63,
            u64::MAX,
        ];
        match self.below(3) {
            0 => edges[self.below(edges.len() as u64) as usize],
            1 => self.below(size + 2),
            _ => self.next(),
        }
    }
    fn text(&mut self) -> Vec<u8> {
        let n = [0, 1, 8, 64, 300, 5000][self.below(6) as usize];
        let pool: [&[u8]; 8] = [
            b"node01",
            b"\n# Avg bus bandwidth : 999",
            "\u{2028}\u{202e}\u{200b}".as_bytes(),
            b"\xff\xfe",
            b"\0",
            "ノード".as_bytes(),
            b"all_reduce_perf",
            b"-b 1M",
        ];
        let mut t = Vec::new();
        while t.len() < n {
            t.extend_from_slice(pool[self.below(8) as usize]);
        }
        t
    }
}

fn bootstrap(size: usize, strong: bool) -> TcpBootstrap {
    TcpBootstrap {
        launcher: "test",
        rank: 0,
        size,
        local_rank: 0,
        local_size: 1,
        group: Group {
            color: 0,
            rank: 0,
            size: 1,
        },
        address: "127.0.0.1:1".into(),
        timeout: Duration::from_secs(1),
        silence: None,
        key: JobKey::derive("job", &Secret::default(), b"salt"),
        salt: [0; 32],
        job: "job".into(),
        secret: Secret::default(),
        strong,
        beats: None,
        note: Default::default(),
        link: Mutex::new(super::super::Link::Alone),
        lost: Mutex::new(None),
    }
}

fn me(size: usize) -> Hello {
    Hello {
        rank: 0,
        size,
        local_rank: None,
        color: 0,
        hash: 1,
        pid: 1,
        host: "root".into(),
        run: Fingerprint(vec!["all_reduce_perf".into(), "-b 1M".into()]),
        nonce: [0; auth::LEN],
    }
}

/// A hello with every field drawn from `r`, its length prefixes sometimes lying, signed
/// with the job key or not, sometimes cut or with a byte changed.
fn arbitrary_frame(r: &mut Rng, key: &JobKey, challenge: &[u8], size: u64) -> Vec<u8> {
    // Half the frames are well formed and signed but for their numbers.
    let honest = r.below(2) == 0;
    let lie = |r: &mut Rng, odds: u64| !honest && r.below(odds) == 0;
    let mut b = Vec::new();
    let magic = if lie(r, 8) {
        r.next() as u32
    } else {
        wire::MAGIC
    };
    b.extend_from_slice(&magic.to_le_bytes());
    b.extend_from_slice(&r.count(size).to_le_bytes());
    let claimed_size = if r.below(2) == 0 { size } else { r.count(size) };
    b.extend_from_slice(&claimed_size.to_le_bytes());
    b.extend_from_slice(&(r.next() as i64 >> r.below(64)).to_le_bytes());
    b.extend_from_slice(&r.next().to_le_bytes());
    b.extend_from_slice(&r.next().to_le_bytes());
    b.extend_from_slice(&(r.next() as u32).to_le_bytes());
    let host = r.text();
    let host_len = if lie(r, 6) {
        r.next() as u32
    } else {
        host.len() as u32
    };
    b.extend_from_slice(&host_len.to_le_bytes());
    b.extend_from_slice(&host);
    let ours: Vec<Vec<u8>> = vec![b"all_reduce_perf".to_vec(), b"-b 1M".to_vec()];
    let items: Vec<Vec<u8>> = match r.below(3) {
        _ if honest => ours,
        0 => ours,
        1 => (0..r.below(70)).map(|_| r.text()).collect(),
        _ => Vec::new(),
    };
    let n = if lie(r, 6) {
        r.next() as u32
    } else {
        items.len() as u32
    };
    b.extend_from_slice(&n.to_le_bytes());
    for i in &items {
        let len = if lie(r, 10) {
            r.next() as u32
        } else {
            i.len() as u32
        };
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(i);
    }
    let nonce = if lie(r, 4) {
        r.below(auth::LEN as u64) as usize
    } else {
        auth::LEN
    };
    b.extend_from_slice(&[7; auth::LEN][..nonce]);
    let mac = if lie(r, 4) {
        [0xab; auth::LEN]
    } else {
        key.sign(&[b"hello", challenge, &b])
    };
    b.extend_from_slice(&mac);
    match r.below(8) {
        _ if honest => {}
        0 => b.truncate(r.below(b.len() as u64 + 1) as usize),
        1 if !b.is_empty() => {
            let at = r.below(b.len() as u64) as usize;
            b[at] ^= 1 << r.below(8);
        }
        _ => {}
    }
    b
}

#[test]
fn any_hello_is_refused_or_fits_never_a_panic() {
    let challenge = [3u8; auth::LEN];
    let mut r = Rng(0x5eed);
    let (mut seated, mut stopped, mut refused) = (0, 0, 0);
    for case in 0..20_000 {
        let size = 2 + r.below(7) as usize;
        let strong = case % 2 == 0;
        let b = bootstrap(size, strong);
        // Some ranks already taken (their streams are never used by judge).
        let slots: Vec<Option<Seated>> = (1..size).map(|_| None).collect();
        let frame = arbitrary_frame(&mut r, &b.key, &challenge, size as u64);
        match b.judge(&challenge, &frame, &me(size), &slots) {
            Verdict::Seat(h) => {
                seated += 1;
                assert!(h.rank >= 1 && h.rank < size, "case {case}: rank {}", h.rank);
                assert_eq!(h.size, size, "case {case}");
                assert!(signed_hello(&b.key, &challenge, &frame).is_some());
                assert!(h.host.chars().count() <= peer_text::MAX_NAME + 1);
                // What rank 0 then computes from seated hellos stays in bounds too.
                let _ = local::local_ranks(&[1, h.hash]);
                let _ = local::groups(&[0, h.color]);
            }
            Verdict::Stop(why, _) => {
                stopped += 1;
                assert!(strong, "case {case}: only a proven job stops: {why}");
                assert!(signed_hello(&b.key, &challenge, &frame).is_some());
            }
            Verdict::Refuse { told, signed, .. } => {
                refused += 1;
                assert!(!told.contains("pid") && !told.contains("root"), "{told}");
                // Only a hello that carries the job key's signature counts as signed.
                assert!(!signed || signed_hello(&b.key, &challenge, &frame).is_some());
            }
        }
    }
    // The generator reaches every outcome.
    assert!(
        seated > 100 && stopped > 100 && refused > 100,
        "{seated} {stopped} {refused}"
    );
}

#[test]
fn a_signed_hello_for_a_rank_past_the_end_is_refused() {
    let challenge = [3u8; auth::LEN];
    for rank in [4u64, 5, 1 << 63, u64::MAX] {
        for strong in [false, true] {
            let b = bootstrap(4, strong);
            let mut h = me(4);
            h.rank = rank as usize;
            let mut frame = h.encode();
            frame.extend_from_slice(&b.key.sign(&[b"hello", &challenge, &h.encode()]));
            let slots: Vec<Option<Seated>> = (1..4).map(|_| None).collect();
            match b.judge(&challenge, &frame, &me(4), &slots) {
                Verdict::Refuse { told, claimed, .. } => {
                    assert!(!strong);
                    assert_eq!(told, "the rank is outside the launch");
                    assert_eq!(claimed, None);
                }
                Verdict::Stop(why, _) => {
                    assert!(strong);
                    assert!(why.contains("outside the launch's 4 processes"), "{why}");
                }
                Verdict::Seat(_) => panic!("rank {rank} seated"),
            }
        }
    }
}

#[test]
fn an_unsigned_claim_never_hides_a_signed_one_at_the_timeout() {
    let mut r = Refusals::new(8);
    assert_eq!(r.notes(&[1, 2, 3]), None);
    // A real rank 5 refused for a signed reason; strangers then claim 1-5 unsigned.
    r.note(5, true, "options differ".into());
    for rank in 1..=5 {
        r.note(rank, false, format!("stranger {rank}"));
    }
    let notes = r.notes(&[1, 2, 3, 4, 5]).unwrap();
    assert!(
        notes.starts_with("refused claims: rank 5: options differ; rank 1: stranger 1"),
        "{notes}"
    );
    assert!(
        !notes.contains("stranger 4") && !notes.contains("stranger 5"),
        "{notes}"
    );
    // A later signed reason replaces an earlier one; ranks out of range are ignored.
    r.note(5, true, "world size differs".into());
    r.note(99, true, "nonsense".into());
    let notes = r.notes(&[5, 99]).unwrap();
    assert_eq!(notes, "refused claims: rank 5: world size differs");
}
