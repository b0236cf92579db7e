//! Rank 0's door during the meeting: one `poll()` over the listening socket, every connection
//! that has not yet said hello, and the processes already seated. Connections are served
//! concurrently and each costs bounded memory (a hello is at most [`MAX_HELLO`] bytes); at most
//! [`MAX_PENDING`] wait at once (the oldest goes when more come: real processes say hello within
//! milliseconds, and retry when dropped); one that sends nothing complete within [`HELLO_WAIT`]
//! is dropped. The meeting's deadline holds whatever the connections do. Refusals are one
//! warning line each on stderr, rate-limited.

use super::wire;
use crate::bootstrap::auth;
use crate::bootstrap::peer_text;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The largest hello accepted (ours is under 1 KiB).
pub const MAX_HELLO: usize = 8 << 10;
/// Connections waiting for their hello at once, at most.
pub const MAX_PENDING: usize = 512;
/// How long a connection may take to send its hello.
pub const HELLO_WAIT: Duration = Duration::from_secs(5);
/// Refusal lines printed before rate limiting starts (then one a second).
const SHOWN_FREELY: usize = 8;

/// A connection that has not said hello yet.
struct Pending {
    stream: TcpStream,
    from: SocketAddr,
    nonce: [u8; auth::LEN],
    head: [u8; 4],
    got: usize,
    body: Vec<u8>,
    until: Instant,
}

/// A complete hello frame from a connection, not yet checked.
pub struct Arrival {
    /// The connection (blocking again).
    pub stream: TcpStream,
    /// Where it came from.
    pub from: SocketAddr,
    /// The nonce rank 0 sent it.
    pub nonce: [u8; auth::LEN],
    /// The hello's body (after the tag).
    pub body: Vec<u8>,
}

/// What happened at the door.
pub enum Next {
    /// A connection said hello.
    Hello(Arrival),
    /// The seated process of this index closed its connection.
    Left(usize),
    /// The deadline passed.
    TimedOut,
}

/// The listening socket and the connections waiting at it.
pub struct Door {
    listener: TcpListener,
    pending: Vec<Pending>,
    refused: usize,
    hidden: usize,
    last_line: Option<Instant>,
}

enum Read_ {
    More,
    Done,
    Bad(String),
}

impl Door {
    /// A door on a listening socket (made non-blocking).
    pub fn new(listener: TcpListener) -> io::Result<Door> {
        listener.set_nonblocking(true)?;
        Ok(Door {
            listener,
            pending: Vec::new(),
            refused: 0,
            hidden: 0,
            last_line: None,
        })
    }

    /// Waits for the next hello, a seated process leaving (`seated`: their connections) or the
    /// deadline.
    pub fn next(&mut self, deadline: Instant, seated: &[&TcpStream]) -> Next {
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Next::TimedOut;
            }
            let mut i = 0;
            while i < self.pending.len() {
                if self.pending[i].until <= now {
                    let p = self.pending.remove(i);
                    let why = format!("sent no complete hello within {} s", HELLO_WAIT.as_secs());
                    self.refuse(p.stream, p.from, &why);
                } else {
                    i += 1;
                }
            }
            let wake = self
                .pending
                .iter()
                .map(|p| p.until)
                .fold(deadline, Instant::min);
            let wait = wake
                .saturating_duration_since(now)
                .clamp(Duration::from_millis(1), Duration::from_secs(1));
            let Some(woke) = self.wait_for_events(seated, wait) else {
                continue;
            };
            let base = 1 + self.pending.len();
            if woke[base..].iter().any(|&w| w)
                && let Some(gone) = wire::first_closed(seated.iter().copied())
            {
                return Next::Left(gone);
            }
            // Pending connections first (their indexes shift once new ones are accepted).
            let ready: Vec<usize> = (0..self.pending.len()).filter(|&i| woke[1 + i]).collect();
            for &i in ready.iter().rev() {
                match read_some(&mut self.pending[i]) {
                    Read_::More => {}
                    Read_::Done => {
                        let p = self.pending.remove(i);
                        // Others that completed stay readable and come out on the next call.
                        let _ = p.stream.set_nonblocking(false);
                        return Next::Hello(Arrival {
                            stream: p.stream,
                            from: p.from,
                            nonce: p.nonce,
                            body: p.body,
                        });
                    }
                    Read_::Bad(why) => {
                        let p = self.pending.remove(i);
                        self.refuse(p.stream, p.from, &why);
                    }
                }
            }
            if woke[0] {
                self.accept_burst();
            }
        }
    }

    /// Waits up to `wait` for the listener, a pending connection or a seated process to
    /// stir: which of them did (listener, then pending, then seated), or `None` when none did.
    fn wait_for_events(&self, seated: &[&TcpStream], wait: Duration) -> Option<Vec<bool>> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = Vec::with_capacity(1 + self.pending.len() + seated.len());
        fds.push(PollFd::new(&self.listener, PollFlags::IN));
        fds.extend(
            self.pending
                .iter()
                .map(|p| PollFd::new(&p.stream, PollFlags::IN)),
        );
        // Seated processes send nothing before their welcome: only a hang-up matters.
        fds.extend(seated.iter().map(|s| PollFd::new(*s, PollFlags::RDHUP)));
        let timeout = Timespec {
            tv_sec: wait.as_secs() as _,
            tv_nsec: wait.subsec_nanos() as _,
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => Some(fds.iter().map(|f| !f.revents().is_empty()).collect()),
            _ => None,
        }
    }

    /// Takes every connection waiting at the listener (up to a burst), sending each its nonce.
    fn accept_burst(&mut self) {
        for _ in 0..256 {
            match self.listener.accept() {
                Ok((stream, from)) => {
                    if self.pending.len() >= MAX_PENDING {
                        let p = self.pending.remove(0);
                        self.refuse(p.stream, p.from, "dropped: too many connections at once");
                    }
                    let nonce = auth::nonce();
                    let ok = stream.set_nonblocking(true).is_ok()
                        && stream.set_nodelay(true).is_ok()
                        && wire::frame(wire::CHALLENGE, &nonce)
                            .is_ok_and(|f| (&stream).write(&f).is_ok_and(|n| n == f.len()));
                    if ok {
                        self.pending.push(Pending {
                            stream,
                            from,
                            nonce,
                            head: [0; 4],
                            got: 0,
                            body: Vec::new(),
                            until: Instant::now() + HELLO_WAIT,
                        });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // Out of descriptors (EMFILE) or similar: make room, or let time pass.
                    if self.pending.is_empty() {
                        std::thread::sleep(Duration::from_millis(10));
                    } else {
                        let p = self.pending.remove(0);
                        self.refuse(p.stream, p.from, "dropped: too many connections at once");
                    }
                    return;
                }
            }
        }
    }

    /// Refuses a connection: tells it why (best effort, never waiting) and prints one line.
    pub fn refuse(&mut self, stream: TcpStream, from: SocketAddr, why: &str) {
        self.refuse_as(stream, from, why, wire::abort::LAUNCH);
    }

    /// [`Door::refuse`] with the abort kind the other side should exit with.
    pub fn refuse_as(&mut self, stream: TcpStream, from: SocketAddr, why: &str, kind: u32) {
        let body = wire::Encoder::default()
            .u32(kind)
            .str(&format!("refused: {why}"))
            .0;
        if let Ok(f) = wire::frame(wire::ABORT, &body) {
            let _ = stream.set_nonblocking(true);
            let _ = (&stream).write(&f);
        }
        drop(stream);
        self.refused += 1;
        let now = Instant::now();
        let free = self.refused <= SHOWN_FREELY;
        if !free
            && self
                .last_line
                .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.hidden += 1;
            return;
        }
        let more = match std::mem::take(&mut self.hidden) {
            0 => String::new(),
            n => format!(" ({n} more refused since the last line)"),
        };
        self.last_line = Some(now);
        eprintln!(
            "nccl-perf: rank 0 refused a connection from {from}: {}{more}",
            peer_text::clean(why, 300)
        );
    }

    /// Says how many refusals were not printed, if any.
    pub fn finish(&mut self) {
        if self.hidden > 0 {
            eprintln!(
                "nccl-perf: rank 0 refused {} more connection(s) during the rendezvous ({} in all)",
                self.hidden, self.refused
            );
            self.hidden = 0;
        }
    }
}

/// Reads what has arrived of a hello frame, without waiting.
fn read_some(p: &mut Pending) -> Read_ {
    loop {
        let r = if p.got < 4 {
            (&p.stream).read(&mut p.head[p.got..])
        } else {
            let at = p.got - 4;
            (&p.stream).read(&mut p.body[at..])
        };
        match r {
            Ok(0) => return Read_::Bad("closed the connection before its hello".into()),
            Ok(n) => p.got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Read_::More,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Read_::Bad(format!("{e}")),
        }
        if p.got == 4 {
            let len = u32::from_le_bytes(p.head) as usize;
            if len == 0 || len > MAX_HELLO {
                return Read_::Bad(format!(
                    "sent a frame of {len} bytes (a hello is at most {MAX_HELLO})"
                ));
            }
            p.body = vec![0; len];
        }
        if p.got > 4 && p.got == 4 + p.body.len() {
            if p.body[0] != wire::HELLO {
                return Read_::Bad(format!("sent a {} first", wire::tag_name(p.body[0])));
            }
            p.body.remove(0);
            return Read_::Done;
        }
    }
}
