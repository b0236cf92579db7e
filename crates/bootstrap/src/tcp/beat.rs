//! Heartbeats: once the processes have met, each one says "still here" about every second on
//! its connections (rank 0 to every process, every process to rank 0), from a thread of its
//! own that needs no lock the run may hold. A process that is stopped (SIGSTOP, a debugger),
//! frozen or cut off keeps its connection open but falls silent; whoever waits for it, or
//! checks on it between collectives, names it after `NCCL_PERF_HEARTBEAT_TIMEOUT` seconds of
//! silence (default 10) instead of waiting on its GPUs forever.
//!
//! Every message counts as a sign of life; heartbeats themselves are skipped wherever messages
//! are read ([`recv_live`], [`drain`]).

use super::seal::{Direction, Seal};
use super::wire::{self, RecvError};
use crate::auth::JobKey;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The writing half of a connection: every message after the meeting is sealed and written
/// under its lock, so heartbeats from the beat thread never cut into another message and the
/// sequence numbers follow the order on the wire.
pub(super) type Writer = Arc<Mutex<Outbound>>;

/// A connection's writing side: a handle on the socket and the seal of this direction.
pub(super) struct Outbound {
    stream: TcpStream,
    seal: Seal,
    /// A frame went out in part: the stream is out of step, and nothing more is sent on it.
    cut: bool,
}

impl Outbound {
    /// Seals and writes one frame. A frame that could not go at all gives its sequence number
    /// back (the next frame takes it, so a skipped heartbeat does not break the sequence); one
    /// that went in part ends the connection's writing side, so that the peer sees it end
    /// rather than read what follows out of step.
    fn send(&mut self, tag: u8, body: &[u8], timeout: Duration) -> std::io::Result<()> {
        if self.cut {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "an earlier message to this peer went out in part",
            ));
        }
        let sealed = self.seal.close(tag, body);
        let frame = wire::frame(tag, &sealed)?;
        let (written, outcome) = wire::write_frame(&mut self.stream, &frame, timeout);
        if outcome.is_err() {
            if written == 0 {
                self.seal.take_back();
            } else {
                self.cut = true;
                let _ = self.stream.shutdown(std::net::Shutdown::Write);
            }
        }
        outcome
    }
}

/// A connection's reading side: the socket and the seal of the other direction.
pub(super) struct Inbound {
    /// The socket (also polled and shut down directly).
    pub(super) stream: TcpStream,
    seal: Seal,
    /// The last state note the peer's heartbeats carried, and when it came (`None` until one
    /// does).
    pub(super) note: Option<(Vec<u8>, Instant)>,
}

/// Both sides of a connection once met: `session` is its key, `outgoing` the direction this
/// process writes.
pub(super) fn link(
    stream: TcpStream,
    session: &JobKey,
    outgoing: Direction,
) -> std::io::Result<(Inbound, Writer)> {
    let incoming = match outgoing {
        Direction::FromRoot => Direction::ToRoot,
        Direction::ToRoot => Direction::FromRoot,
    };
    let out = Outbound {
        stream: stream.try_clone()?,
        seal: Seal::new(session, outgoing),
        cut: false,
    };
    let inbound = Inbound {
        stream,
        seal: Seal::new(session, incoming),
        note: None,
    };
    Ok((inbound, Arc::new(Mutex::new(out))))
}

/// Receives one sealed message before `deadline`.
fn recv(s: &mut Inbound, deadline: Instant) -> Result<(u8, Vec<u8>), RecvError> {
    let (tag, body) = wire::recv(&mut s.stream, deadline)?;
    let body = s
        .seal
        .open(tag, body)
        .map_err(|e| RecvError::Other(e.to_string()))?;
    if tag == wire::HEARTBEAT && !body.is_empty() {
        s.note = Some((body, Instant::now()));
        return Ok((tag, Vec::new()));
    }
    Ok((tag, body))
}

/// How long one heartbeat may take to write before it is skipped (a peer that reads nothing
/// for hours has a full buffer; it is silent anyway).
const WRITE_LIMIT: Duration = Duration::from_millis(100);

/// How long a read of a message already arriving may take when draining without waiting
/// (generous: a busy machine may not run this thread for a while, and a message cut short
/// would leave the stream out of step).
pub(super) const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// A heartbeat every `silence / 5`, at most every second and at least every 50 ms.
pub(super) fn period(silence: Duration) -> Duration {
    (silence / 5).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// Writes one message under the writer's lock (a poisoned lock still serialises: the guard is
/// taken back).
pub(super) fn send(w: &Writer, tag: u8, body: &[u8], timeout: Duration) -> std::io::Result<()> {
    let mut s = w.lock().unwrap_or_else(|p| p.into_inner());
    s.send(tag, body, timeout)
}

/// The state note every heartbeat carries (empty: none), set by
/// [`crate::Bootstrap::publish_state`].
pub(super) type Note = Arc<Mutex<Vec<u8>>>;

/// The thread that sends the heartbeats; stops when dropped.
pub(super) struct Beats {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Beats {
    /// Starts beating on `writers` every `every`, each heartbeat carrying `note` as it is then.
    pub(super) fn start(writers: Vec<Writer>, every: Duration, note: Note) -> Beats {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("nccl-perf-heartbeat".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    let body = note.lock().map(|n| n.clone()).unwrap_or_default();
                    for w in &writers {
                        // A writer busy with a message is itself a sign of life.
                        if let Ok(mut s) = w.try_lock() {
                            let _ = s.send(wire::HEARTBEAT, &body, WRITE_LIMIT);
                        }
                    }
                    std::thread::park_timeout(every);
                }
            })
            .ok();
        Beats { stop, thread }
    }
}

impl Drop for Beats {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Why a wait for a peer's next message ended without one.
#[derive(Debug)]
pub(super) enum Wait {
    /// The connection failed, closed or the deadline passed.
    Failed(RecvError),
    /// Nothing at all, not even a heartbeat, for this long (shorter than the deadline).
    Silent(Duration),
}

/// Receives the next message that is not a heartbeat before `deadline`. `heard` is when the
/// peer was last heard from (every message moves it); with `silence` set, a peer heard from
/// longer ago than that is given up on before the deadline.
pub(super) fn recv_live(
    s: &mut Inbound,
    deadline: Instant,
    heard: &mut Instant,
    silence: Option<Duration>,
) -> Result<(u8, Vec<u8>), Wait> {
    loop {
        let until = match silence {
            // Whatever already waits is read even when the peer was heard from long ago.
            Some(q) => deadline.min((*heard + q).max(Instant::now() + DRAIN_LIMIT)),
            None => deadline,
        };
        match recv(s, until) {
            Ok((wire::HEARTBEAT, _)) => *heard = Instant::now(),
            Ok(m) => {
                *heard = Instant::now();
                return Ok(m);
            }
            Err(RecvError::TimedOut) if Instant::now() < deadline => {
                return Err(Wait::Silent(heard.elapsed()));
            }
            Err(e) => return Err(Wait::Failed(e)),
        }
    }
}

/// The most heartbeats one [`drain`] reads: the work of a check stays bounded even against a
/// peer that sends nothing else, as fast as it can.
const DRAIN_MAX: usize = 1024;

/// Reads what a peer has sent, without waiting: heartbeats move `heard`; the first other
/// message is returned for the caller to keep. A closed connection is `Err(Closed)` once
/// everything the peer sent before closing has been read. A message already arriving is given
/// [`DRAIN_LIMIT`] in all to arrive whole.
pub(super) fn drain(
    s: &mut Inbound,
    heard: &mut Instant,
) -> Result<Option<(u8, Vec<u8>)>, RecvError> {
    drain_by(s, heard, Instant::now() + DRAIN_LIMIT)
}

/// [`drain`], every read ending by `until` (a peer that trickles bytes cannot hold it longer).
pub(super) fn drain_by(
    s: &mut Inbound,
    heard: &mut Instant,
    until: Instant,
) -> Result<Option<(u8, Vec<u8>)>, RecvError> {
    for _ in 0..DRAIN_MAX {
        match wire::poll(&s.stream) {
            None => return Ok(None),
            Some(false) => return Err(RecvError::Closed),
            Some(true) => {}
        }
        let m = recv(s, until)?;
        *heard = Instant::now();
        if m.0 != wire::HEARTBEAT {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// Whether a peer last heard from at `heard` has been silent too long.
pub(super) fn silent(heard: Instant, silence: Option<Duration>) -> Option<Duration> {
    let since = heard.elapsed();
    silence.filter(|q| since > *q).map(|_| since)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Two ends of a met connection: `a` is rank 0's side, `b` the other process'.
    fn pair() -> ((Inbound, Writer), (Inbound, Writer)) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let b = l.accept().unwrap().0;
        let key = JobKey::derive("test", &Default::default(), b"salt").session(&[1; 32], &[2; 32]);
        (
            link(a, &key, Direction::FromRoot).unwrap(),
            link(b, &key, Direction::ToRoot).unwrap(),
        )
    }

    #[test]
    fn heartbeats_keep_a_peer_alive_and_are_skipped() {
        let ((_a, w), (mut b, _)) = pair();
        let beats = Beats::start(vec![w.clone()], Duration::from_millis(20), Note::default());
        let mut heard = Instant::now() - Duration::from_secs(60);
        let silence = Some(Duration::from_millis(300));
        // Heartbeats alone: never a message, never silent, until the deadline.
        let t = Instant::now();
        let r = recv_live(
            &mut b,
            Instant::now() + Duration::from_millis(500),
            &mut heard,
            silence,
        );
        assert!(matches!(r, Err(Wait::Failed(RecvError::TimedOut))), "{r:?}");
        assert!(t.elapsed() >= Duration::from_millis(450));
        assert!(heard.elapsed() < Duration::from_millis(200));
        // A message between heartbeats comes through whole.
        send(&w, wire::GATHER, b"abc", Duration::from_secs(1)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let m = recv_live(&mut b, deadline, &mut heard, silence).unwrap();
        assert_eq!(m, (wire::GATHER, b"abc".to_vec()));
        drop(beats);
        // Without heartbeats the peer falls silent long before the deadline.
        std::thread::sleep(Duration::from_millis(50));
        let d = drain(&mut b, &mut heard);
        assert!(matches!(d, Ok(None)), "{d:?}");
        let t = Instant::now();
        let r = recv_live(
            &mut b,
            Instant::now() + Duration::from_secs(30),
            &mut heard,
            silence,
        );
        assert!(
            matches!(r, Err(Wait::Silent(d)) if d >= Duration::from_millis(300)),
            "{r:?}"
        );
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(silent(heard, silence).is_some());
        assert!(silent(heard, None).is_none());
    }

    #[test]
    fn heartbeats_carry_the_latest_note_and_stay_heartbeats() {
        let ((_a, w), (mut b, _)) = pair();
        let note = Note::default();
        *note.lock().unwrap() = b"first".to_vec();
        let beats = Beats::start(vec![w.clone()], Duration::from_millis(20), note.clone());
        let mut heard = Instant::now() - Duration::from_secs(60);
        // Waits (by a generous deadline, whatever the machine's load) for a heartbeat noting
        // `want`; nothing else arrives meanwhile.
        let mut noted = |b: &mut Inbound, want: &[u8]| {
            let until = Instant::now() + Duration::from_secs(30);
            while b.note.as_ref().map(|n| &n.0[..]) != Some(want) && Instant::now() < until {
                assert_eq!(drain(b, &mut heard).unwrap(), None);
                std::thread::sleep(Duration::from_millis(5));
            }
            b.note.as_ref().map(|n| n.0.clone())
        };
        assert_eq!(noted(&mut b, b"first"), Some(b"first".to_vec()));
        *note.lock().unwrap() = b"second".to_vec();
        assert_eq!(noted(&mut b, b"second"), Some(b"second".to_vec()));
        drop(beats);
        // A message after noted heartbeats is still the message.
        let mut heard = Instant::now();
        send(&w, wire::BARRIER, &[], Duration::from_secs(1)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let m = recv_live(&mut b, deadline, &mut heard, None).unwrap();
        assert_eq!(m, (wire::BARRIER, Vec::new()));
        // A note at the limit goes through; the receiver's bound is the limit.
        let big = vec![b'x'; wire::MAX_NOTE];
        send(&w, wire::HEARTBEAT, &big, Duration::from_secs(1)).unwrap();
        send(&w, wire::BARRIER, &[], Duration::from_secs(1)).unwrap();
        let m = recv_live(&mut b, deadline, &mut heard, None).unwrap();
        assert_eq!(m, (wire::BARRIER, Vec::new()));
        assert_eq!(b.note.as_ref().map(|n| n.0.len()), Some(wire::MAX_NOTE));
        // One byte more is refused before its body is read.
        send(
            &w,
            wire::HEARTBEAT,
            &[b'x'; wire::MAX_NOTE + 1],
            Duration::from_secs(1),
        )
        .unwrap();
        assert!(recv_live(&mut b, deadline, &mut heard, None).is_err());
    }

    #[test]
    fn drain_keeps_the_first_message_and_sees_a_close_after_it() {
        let ((a, w), (mut b, _)) = pair();
        let mut heard = Instant::now() - Duration::from_secs(60);
        assert_eq!(drain(&mut b, &mut heard).unwrap(), None);
        assert!(heard.elapsed() > Duration::from_secs(59));
        let second = Duration::from_secs(1);
        for _ in 0..3 {
            send(&w, wire::HEARTBEAT, &[], second).unwrap();
        }
        send(&w, wire::BARRIER, &[], second).unwrap();
        send(&w, wire::HEARTBEAT, &[], second).unwrap();
        drop((a, w));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            drain(&mut b, &mut heard).unwrap(),
            Some((wire::BARRIER, Vec::new()))
        );
        assert!(heard.elapsed() < Duration::from_secs(1));
        assert!(matches!(drain(&mut b, &mut heard), Err(RecvError::Closed)));
    }

    #[test]
    fn drain_does_bounded_work_against_a_flood_of_heartbeats() {
        let ((a, w), (mut b, _)) = pair();
        let flood = std::thread::spawn(move || {
            let _keep = a;
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(3) {
                if send(&w, wire::HEARTBEAT, &[], Duration::from_secs(1)).is_err() {
                    break;
                }
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        let mut heard = Instant::now() - Duration::from_secs(60);
        let t = Instant::now();
        assert_eq!(drain(&mut b, &mut heard).unwrap(), None);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(heard.elapsed() < Duration::from_secs(1));
        drop(b);
        flood.join().unwrap();
    }

    #[test]
    fn a_frame_sent_late_still_goes_and_keeps_the_sequence() {
        // Before: a heartbeat whose thread ran after its 100 ms write limit had passed was
        // sealed (its number taken) and then not sent, so the peer's next frame failed
        // authentication (seen under load: "a message that fails authentication").
        let ((_a, w), (mut b, _)) = pair();
        for _ in 0..20 {
            send(&w, wire::HEARTBEAT, &[], Duration::ZERO).unwrap();
        }
        send(&w, wire::BARRIER, &[], Duration::from_secs(1)).unwrap();
        let mut heard = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(5);
        let m = recv_live(&mut b, deadline, &mut heard, None).unwrap();
        assert_eq!(m, (wire::BARRIER, Vec::new()));
    }

    #[test]
    fn the_period_follows_the_silence() {
        assert_eq!(period(Duration::from_secs(10)), Duration::from_secs(1));
        assert_eq!(period(Duration::from_secs(2)), Duration::from_millis(400));
        assert_eq!(period(Duration::from_millis(10)), Duration::from_millis(50));
    }
}
