//! The rendezvous' messages on the wire: `u32` little-endian length, one tag byte, the body.
//! Bodies are built with [`Encoder`] and read with [`Decoder`]. Every read ends by its deadline
//! however the bytes arrive, and a frame's length is checked against its tag before its body
//! is read ([`max_body`]).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// First word of a hello: the protocol name and version (2: authenticated hellos).
pub const MAGIC: u32 = 0x4e43_5032;

/// A process introduces itself to rank 0.
pub const HELLO: u8 = 1;
/// Rank 0 accepts a process: its local and group ranks.
pub const WELCOME: u8 = 2;
/// Collective: barrier.
pub const BARRIER: u8 = 3;
/// Collective: allreduce of one f64.
pub const REDUCE: u8 = 4;
/// Collective: broadcast of the 128-byte id within a group.
pub const BCAST: u8 = 5;
/// Collective: gather of one text per process.
pub const GATHER: u8 = 6;
/// Rank 0 ends the run; the body says why.
pub const ABORT: u8 = 7;
/// Rank 0's answer to a collective.
pub const REPLY: u8 = 8;
/// Rank 0's first words to every connection: a fresh nonce the hello must sign.
pub const CHALLENGE: u8 = 9;
/// "Still here": sent about every second in both directions once the processes have met, so
/// that a process that is stopped or frozen (its connection still open) is noticed.
pub const HEARTBEAT: u8 = 10;
/// Collective: every process' text to every process.
pub const ALLGATHER: u8 = 11;
/// Collective: several NCCL ids, each process' to its group (`ncclCommInitRankScalable`).
pub const IDS: u8 = 12;

/// What an abort means for the process that receives it (its exit code).
pub mod abort {
    /// A failure elsewhere in the run.
    pub const FAILED: u32 = 0;
    /// A bootstrap wait timed out.
    pub const TIMED_OUT: u32 = 1;
    /// A wrong launch (exit 6): options that differ, a duplicate rank, a refused hello.
    pub const LAUNCH: u32 = 2;
}

/// The largest hello accepted (ours is under 1 KiB).
pub const MAX_HELLO: usize = 8 << 10;

/// The largest contribution of NCCL ids accepted (1,024 ids, far more than the GPUs of one
/// process), its signature or seal included.
const MAX_IDS_BODY: usize = 4 + 1024 * (4 + 128) + MAC;

/// The largest message accepted (a gathered text block).
const MAX_MESSAGE: usize = 64 << 20;

/// The largest abort accepted, its signature or seal included (the text is cut to fit when
/// sent: [`abort_body`]).
const MAX_ABORT: usize = 16 << 10;

/// The most bytes of state note a heartbeat may carry (what the benchmark publishes through
/// [`crate::Bootstrap::publish_state`]; a longer note is not sent).
pub const MAX_NOTE: usize = 4 << 10;

/// Length of a signature or seal (HMAC-SHA256) at the end of a body.
const MAC: usize = 32;

/// The most bytes a frame of `tag` may carry after its tag, signature or seal included
/// (`None`: no message of ours has that tag). A frame's length is checked against this
/// before its body is read, so a length that does not fit its tag costs no wait and no memory:
/// a heartbeat is at most 4 KiB with its state note (4,128 bytes), never 64 MiB.
pub fn max_body(tag: u8) -> Option<usize> {
    Some(match tag {
        CHALLENGE => super::challenge::BYTES,
        HELLO => MAX_HELLO,
        // Four u64s and the signature.
        WELCOME => 4 * 8 + MAC,
        // A heartbeat may carry the sender's state note (the hang watch's, `note.rs`).
        HEARTBEAT => MAX_NOTE + MAC,
        BARRIER | REDUCE | BCAST => body_size(tag)? + MAC,
        ABORT => MAX_ABORT,
        REPLY | GATHER | ALLGATHER => MAX_MESSAGE,
        // A process' own ids: one per NCCL rank it holds at most.
        IDS => MAX_IDS_BODY,
        _ => return None,
    })
}

/// An abort's body: its kind and `why`, cut (at a character boundary) so that the frame, with
/// a signature or seal added, stays within [`MAX_ABORT`].
pub fn abort_body(kind: u32, why: &str) -> Vec<u8> {
    let room = MAX_ABORT - MAC - 8;
    let mut end = why.len().min(room);
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    Encoder::default().u32(kind).str(&why[..end]).0
}

/// The size a collective contribution of `tag` must have (`None`: any size up to the largest
/// message): what rank 0 accepts from the others.
pub fn body_size(tag: u8) -> Option<usize> {
    match tag {
        BARRIER => Some(0),
        REDUCE => Some(8),
        BCAST => Some(128),
        _ => None,
    }
}

/// The name of a collective tag, for messages.
pub fn tag_name(tag: u8) -> &'static str {
    match tag {
        HELLO => "hello",
        WELCOME => "welcome",
        BARRIER => "barrier",
        REDUCE => "allreduce",
        BCAST => "id broadcast",
        GATHER => "gather",
        ABORT => "abort",
        REPLY => "reply",
        CHALLENGE => "challenge",
        HEARTBEAT => "heartbeat",
        ALLGATHER => "allgather",
        IDS => "NCCL id exchange",
        _ => "unknown message",
    }
}

/// Why a receive failed.
#[derive(Debug)]
pub enum RecvError {
    /// The peer closed the connection (its process ended).
    Closed,
    /// Nothing arrived before the deadline.
    TimedOut,
    /// A message of this tag began but did not arrive whole before the deadline (a peer, or
    /// something on the way, that trickles it or stalls).
    Unfinished(u8),
    /// A frame no process of ours sends (an unknown tag, or a length its tag does not allow),
    /// refused before its body was read: what it was, as a phrase.
    Malformed(String),
    /// Anything else, as text.
    Other(String),
}

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecvError::Closed => f.write_str("the connection closed"),
            RecvError::TimedOut => f.write_str("nothing complete arrived in time"),
            RecvError::Unfinished(tag) => write!(
                f,
                "it began a {} and did not finish it in time: its connection stalled, or \
                 something on the way (a relay) holds it up",
                tag_name(*tag)
            ),
            RecvError::Malformed(what) => write!(f, "it sent {what}"),
            RecvError::Other(e) => f.write_str(e),
        }
    }
}

/// One message as it goes on the wire.
pub fn frame(tag: u8, body: &[u8]) -> io::Result<Vec<u8>> {
    let len = u32::try_from(body.len() + 1)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "message too large"))?;
    let mut frame = Vec::with_capacity(body.len() + 5);
    frame.extend_from_slice(&len.to_le_bytes());
    frame.push(tag);
    frame.extend_from_slice(body);
    Ok(frame)
}

/// Sends one message within `timeout` in all: a peer that reads slowly (a little just before
/// each write would time out) cannot stretch it.
pub fn send(s: &mut TcpStream, tag: u8, body: &[u8], timeout: Duration) -> io::Result<()> {
    write_frame(s, &frame(tag, body)?, timeout).1
}

/// Writes `frame` within `timeout` in all; how many bytes went, and the outcome. The first
/// write is tried even when the time is already up (a thread that did not run for a while must
/// not give up a frame the socket would take at once); past it, bytes go only while the peer
/// takes them in time.
pub fn write_frame(s: &mut TcpStream, frame: &[u8], timeout: Duration) -> (usize, io::Result<()>) {
    let deadline = Instant::now() + timeout;
    let mut written = 0;
    while written < frame.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() && written > 0 {
            let late = io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer did not take the message in time",
            );
            return (written, Err(late));
        }
        if let Err(e) = s.set_write_timeout(Some(left.max(Duration::from_millis(1)))) {
            return (written, Err(e));
        }
        match s.write(&frame[written..]) {
            Ok(0) => return (written, Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if written == 0 && Instant::now() < deadline => {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) {
                    return (0, Err(e));
                }
            }
            Err(e) => return (written, Err(e)),
        }
    }
    (written, Ok(()))
}

/// How much of a message's body is allocated ahead of its bytes arriving.
const RECV_CHUNK: usize = 64 << 10;

/// Receives one message before `deadline`.
pub fn recv(s: &mut TcpStream, deadline: Instant) -> Result<(u8, Vec<u8>), RecvError> {
    recv_limited(s, deadline, MAX_MESSAGE)
}

/// Receives one message whose body (after the tag) is at most `max` bytes, and at most what
/// its tag allows ([`max_body`]), before `deadline`. The length and tag are checked before the
/// body is read; the deadline holds however the bytes arrive.
pub fn recv_limited(
    s: &mut TcpStream,
    deadline: Instant,
    max: usize,
) -> Result<(u8, Vec<u8>), RecvError> {
    let mut head = [0u8; 5];
    read_exact(s, &mut head, deadline)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let tag = head[4];
    let Some(allowed) = max_body(tag) else {
        return Err(RecvError::Malformed(format!(
            "a frame with an unknown tag ({tag})"
        )));
    };
    let allowed = allowed.min(max);
    let Some(n) = len.checked_sub(1).filter(|&n| n <= allowed) else {
        let name = tag_name(tag);
        let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        return Err(RecvError::Malformed(format!(
            "a frame of {} bytes for {article} {name} (at most {allowed})",
            len.saturating_sub(1)
        )));
    };
    // Grown as the bytes arrive: a length that is never sent costs no memory.
    let mut body = Vec::with_capacity(n.min(RECV_CHUNK));
    while body.len() < n {
        let start = body.len();
        body.resize(start + (n - start).min(RECV_CHUNK), 0);
        read_exact(s, &mut body[start..], deadline).map_err(|e| match e {
            RecvError::TimedOut => RecvError::Unfinished(tag),
            e => e,
        })?;
    }
    Ok((tag, body))
}

/// How long past its deadline a read may still take bytes: a thread that did not run for a
/// while finds a message that arrived in time whole, but a peer that trickles bytes cannot
/// stretch the wait (the deadline holds to within this, whatever arrives).
const LATE: Duration = Duration::from_millis(100);

/// Fills `buf` before `deadline` (or within [`LATE`] after it, for bytes already arriving).
fn read_exact(s: &mut TcpStream, mut buf: &mut [u8], deadline: Instant) -> Result<(), RecvError> {
    let hard = deadline + LATE;
    while !buf.is_empty() {
        let now = Instant::now();
        if now >= hard {
            return Err(RecvError::TimedOut);
        }
        // Past the deadline, only a moment's wait for each read.
        let left = if now < deadline {
            deadline - now
        } else {
            Duration::from_millis(1)
        }
        .max(Duration::from_millis(1));
        s.set_read_timeout(Some(left))
            .map_err(|e| RecvError::Other(e.to_string()))?;
        match s.read(buf) {
            Ok(0) => return Err(RecvError::Closed),
            Ok(n) => buf = &mut buf[n..],
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => {
                    if Instant::now() >= deadline {
                        return Err(RecvError::TimedOut);
                    }
                }
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
                    return Err(RecvError::Closed);
                }
                _ => return Err(RecvError::Other(e.to_string())),
            },
        }
    }
    Ok(())
}

/// Whether a peer has sent something (`Some(true)`), closed (`Some(false)`) or neither (`None`),
/// without waiting.
pub fn poll(s: &TcpStream) -> Option<bool> {
    if s.set_nonblocking(true).is_err() {
        return None;
    }
    let mut b = [0u8; 1];
    let r = match s.peek(&mut b) {
        Ok(0) => Some(false),
        Ok(_) => Some(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
        Err(_) => Some(false),
    };
    let _ = s.set_nonblocking(false);
    r
}

/// The index of the first of `streams` whose peer has closed the connection (and sent nothing
/// still unread), without waiting: one `poll` for all of them, then a peek at those that woke.
pub fn first_closed<'a>(streams: impl Iterator<Item = &'a TcpStream>) -> Option<usize> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::net::{RecvFlags, recv};
    let streams: Vec<&TcpStream> = streams.collect();
    let mut fds: Vec<PollFd<'_>> = streams
        .iter()
        .map(|s| PollFd::new(*s, PollFlags::IN | PollFlags::RDHUP))
        .collect();
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&now)) {
        Ok(n) if n > 0 => {}
        _ => return None,
    }
    let woke: Vec<PollFlags> = fds.iter().map(PollFd::revents).collect();
    woke.iter().zip(&streams).position(|(&r, s)| {
        if r.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
            return true;
        }
        if !r.intersects(PollFlags::IN | PollFlags::RDHUP) {
            return false;
        }
        // A peek of one byte that neither blocks nor consumes it: 0 is an orderly close.
        let mut b = [0u8; 1];
        match recv(s, &mut b[..], RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            Ok((n, _)) => n == 0,
            Err(e) => e != rustix::io::Errno::WOULDBLOCK && e != rustix::io::Errno::INTR,
        }
    })
}

/// Builds a message body.
#[derive(Default)]
pub struct Encoder(pub Vec<u8>);

impl Encoder {
    /// Appends a `u32`.
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a `u64`.
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends an `i64`.
    pub fn i64(self, v: i64) -> Self {
        self.u64(v as u64)
    }
    /// Appends an `f64`.
    pub fn f64(self, v: f64) -> Self {
        self.u64(v.to_bits())
    }
    /// Appends a length-prefixed string.
    pub fn str(mut self, s: &str) -> Self {
        self = self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
}

/// Why a message body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The body ends before the field.
    #[error("truncated message")]
    Truncated,
    /// A text field that is not UTF-8.
    #[error("invalid text in message")]
    BadText,
    /// A hello of another protocol (or version), or none at all.
    #[error("not a hello of this nccl-perf protocol version")]
    NotOurs,
    /// A run description longer than any process of ours sends.
    #[error("a description of {0} items")]
    TooManyItems(usize),
}

/// Reads a message body front to back.
pub struct Decoder<'a>(pub &'a [u8]);

impl Decoder<'_> {
    /// Reads `n` raw bytes.
    pub fn take(&mut self, n: usize) -> Result<&[u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    /// Reads a `u32`.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Reads a `u64`.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// Reads an `i64`.
    pub fn i64(&mut self) -> Result<i64, WireError> {
        self.u64().map(|v| v as i64)
    }
    /// Reads an `f64`.
    pub fn f64(&mut self) -> Result<f64, WireError> {
        self.u64().map(f64::from_bits)
    }
    /// Reads a length-prefixed string.
    pub fn str(&mut self) -> Result<String, WireError> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| WireError::BadText)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_closed_finds_a_closed_peer_and_ignores_waiting_data() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..3 {
            theirs.push(TcpStream::connect(addr).unwrap());
            ours.push(l.accept().unwrap().0);
        }
        assert_eq!(first_closed(ours.iter()), None);
        // Data waiting is a live peer.
        theirs[0].write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(first_closed(ours.iter()), None);
        drop(theirs.remove(2));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(first_closed(ours.iter()), Some(2));
        // Nothing was consumed.
        let mut b = [0u8];
        ours[0].read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
    }

    #[test]
    fn encode_decode_round_trip() {
        let body = Encoder::default()
            .u32(7)
            .u64(u64::MAX)
            .i64(-3)
            .f64(2.5)
            .str("héllo")
            .0;
        let mut d = Decoder(&body);
        assert_eq!(d.u32(), Ok(7));
        assert_eq!(d.u64(), Ok(u64::MAX));
        assert_eq!(d.i64(), Ok(-3));
        assert_eq!(d.f64(), Ok(2.5));
        assert_eq!(d.str().as_deref(), Ok("héllo"));
        assert!(d.u32().is_err());
    }

    #[test]
    fn frames_over_loopback_and_deadlines() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        send(&mut a, GATHER, b"abc", Duration::from_secs(5)).unwrap();
        let soon = Instant::now() + Duration::from_secs(5);
        assert_eq!(recv(&mut b, soon).unwrap(), (GATHER, b"abc".to_vec()));
        assert_eq!(poll(&b), None);
        let t = Instant::now();
        let r = recv(&mut b, Instant::now() + Duration::from_millis(100));
        assert!(matches!(r, Err(RecvError::TimedOut)), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(2));
        drop(a);
        assert_eq!(poll(&b), Some(false));
        assert!(matches!(recv(&mut b, soon), Err(RecvError::Closed)));
    }

    #[test]
    fn a_trickled_frame_ends_at_the_deadline_and_a_length_its_tag_forbids_at_once() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        // A gather's length, then a byte a millisecond: before, the read went on while bytes
        // came.
        let mut head = ((64u32 << 20) + 1).to_le_bytes().to_vec();
        head.push(GATHER);
        a.write_all(&head).unwrap();
        let trickle = std::thread::spawn(move || {
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(3) && a.write_all(&[0]).is_ok() {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let t = Instant::now();
        let r = recv(&mut b, Instant::now() + Duration::from_millis(300));
        let took = t.elapsed();
        drop(b);
        trickle.join().unwrap();
        assert!(matches!(r, Err(RecvError::Unfinished(GATHER))), "{r:?}");
        assert!(took < Duration::from_millis(300) + LATE * 3, "{took:?}");
        // Lengths no frame of that tag has, and tags no frame has: refused unread.
        for (len, tag, what) in [
            (
                u32::MAX,
                HEARTBEAT,
                "a frame of 4294967294 bytes for a heartbeat (at most 4128)",
            ),
            (
                42,
                REDUCE,
                "a frame of 41 bytes for an allreduce (at most 40)",
            ),
            (0, BARRIER, "a frame of 0 bytes for a barrier"),
            (5, 200, "a frame with an unknown tag (200)"),
        ] {
            let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (mut b, _) = l.accept().unwrap();
            let mut f = len.to_le_bytes().to_vec();
            f.push(tag);
            a.write_all(&f).unwrap();
            let r = recv(&mut b, Instant::now() + Duration::from_secs(5));
            let Err(RecvError::Malformed(m)) = r else {
                panic!("{r:?}")
            };
            assert!(m.starts_with(what), "{m}");
        }
        assert_eq!(max_body(CHALLENGE), Some(96));
        // A process' NCCL ids: 1,024 at most (4 + 1024 × 132 bytes and the seal), far below
        // a gather's 64 MiB.
        assert_eq!(max_body(IDS), Some(4 + 1024 * 132 + 32));
        assert_eq!(tag_name(IDS), "NCCL id exchange");
        assert!(abort_body(abort::FAILED, &"é".repeat(20_000)).len() + 32 <= MAX_ABORT);
    }

    #[test]
    fn a_large_message_arrives_whole_and_a_slow_reader_cannot_stretch_a_send() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        // Several chunks, read as they come.
        let body: Vec<u8> = (0..(3 * RECV_CHUNK + 17)).map(|i| i as u8).collect();
        let sent = body.clone();
        let t = std::thread::spawn(move || send(&mut a, GATHER, &sent, Duration::from_secs(5)));
        let soon = Instant::now() + Duration::from_secs(5);
        assert_eq!(recv(&mut b, soon).unwrap(), (GATHER, body));
        t.join().unwrap().unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        // A reader that takes 64 KiB every 100 ms: each write makes progress well within the
        // timeout, but the whole send must still end by it.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let quit = stop.clone();
        let reader = std::thread::spawn(move || {
            let mut chunk = vec![0u8; RECV_CHUNK];
            while !quit.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = b.set_read_timeout(Some(Duration::from_millis(50)));
                let _ = b.read(&mut chunk);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let big = vec![7u8; 64 << 20];
        let t = Instant::now();
        let r = send(&mut a, GATHER, &big, Duration::from_millis(500));
        let took = t.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap();
        assert!(r.is_err(), "a 64 MiB send to a slow reader finished");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
}
