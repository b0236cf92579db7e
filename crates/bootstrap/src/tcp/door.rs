//! Rank 0's door during the meeting: one `poll()` over the listening sockets (one per address
//! of rank 0's name), every connection that has not yet said hello (each was sent its signed
//! challenge on arrival), and the processes already seated. Connections are served
//! concurrently and each costs bounded memory (a hello is at most [`MAX_HELLO`] bytes); at most
//! [`MAX_PENDING`] wait at once. When more come, one is closed to make room (never told to stop:
//! real processes say hello within milliseconds and try again when closed): a random one of the
//! source address that holds the most, so a flood from one place mostly pays for itself. One
//! that sends nothing complete within [`HELLO_WAIT`] is dropped. The meeting's deadline holds
//! whatever the connections do, and no connection makes rank 0 spin: every wait is a `poll`.
//! Refusals are one warning line each on stderr, rate-limited; connections closed for load are
//! counted by source and summed up.

use super::challenge::{self, Challenge};
use super::wire;
use crate::auth::{self, JobKey};
use crate::peer_text;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

pub use super::wire::MAX_HELLO;
/// Connections waiting for their hello at once, at most.
pub const MAX_PENDING: usize = 512;
/// How long a connection may take to send its hello.
pub const HELLO_WAIT: Duration = Duration::from_secs(5);
/// Refusal lines printed before rate limiting starts (then one a second).
const SHOWN_FREELY: usize = 8;
/// Source addresses whose load drops are counted one by one. Past that many, the address
/// counted least gives its place to the new one (which starts from its count: a "space-saving"
/// count), so any address that caused more than one drop in this many is always among them,
/// however many addresses a flood comes from.
const COUNTED_SOURCES: usize = 1024;

/// A connection that has not said hello yet.
struct Pending {
    stream: TcpStream,
    from: SocketAddr,
    challenge: [u8; challenge::BYTES],
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
    /// The challenge rank 0 sent it (the hello is signed over it).
    pub challenge: [u8; challenge::BYTES],
    /// The hello's body (after the tag).
    pub body: Vec<u8>,
}

/// What happened at the door.
pub enum Next {
    /// A connection said hello.
    Hello(Arrival),
    /// The seated process of this index closed its connection.
    Left(usize),
    /// The seated process of this index sent something before its welcome (a real process
    /// never does): it is no process of this launch.
    Misbehaved(usize),
    /// The deadline passed.
    TimedOut,
}

/// The listening sockets and the connections waiting at them.
pub struct Door {
    listeners: Vec<TcpListener>,
    /// The job key and the launch's salt, for the challenges.
    key: JobKey,
    salt: [u8; auth::LEN],
    pending: Vec<Pending>,
    refused: usize,
    hidden: usize,
    last_line: Option<Instant>,
    /// Connections closed to make room, by source address (bounded), and in all.
    load_drops: BTreeMap<IpAddr, usize>,
    load_dropped: usize,
    /// Whether the load summary was printed.
    load_told: bool,
}

enum Read_ {
    More,
    Done,
    Bad(String),
}

impl Door {
    /// A door on listening sockets (made non-blocking), challenging every connection with
    /// the launch's `salt` signed with `key`.
    pub fn new(
        listeners: Vec<TcpListener>,
        key: JobKey,
        salt: [u8; auth::LEN],
    ) -> io::Result<Door> {
        for l in &listeners {
            l.set_nonblocking(true)?;
        }
        Ok(Door {
            listeners,
            key,
            salt,
            pending: Vec::new(),
            refused: 0,
            hidden: 0,
            last_line: None,
            load_drops: BTreeMap::new(),
            load_dropped: 0,
            load_told: false,
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
                    self.refuse(p.stream, p.from, &why, "no complete hello in time");
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
            let lists = self.listeners.len();
            let base = lists + self.pending.len();
            if let Some(i) = woke[base..].iter().position(|&w| w) {
                // A seated process that stirs has either left (closed, nothing unread) or sent
                // something it should not have; either way it is dealt with now, so that its
                // readiness cannot wake every poll (and make rank 0 spin).
                return match wire::first_closed(seated.iter().copied()) {
                    Some(gone) => Next::Left(gone),
                    None => Next::Misbehaved(i),
                };
            }
            // Pending connections first (their indexes shift once new ones are accepted).
            let ready: Vec<usize> = (0..self.pending.len())
                .filter(|&i| woke[lists + i])
                .collect();
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
                            challenge: p.challenge,
                            body: p.body,
                        });
                    }
                    Read_::Bad(why) => {
                        let p = self.pending.remove(i);
                        self.refuse(p.stream, p.from, &why, "not a hello of this protocol");
                    }
                }
            }
            let ready: Vec<usize> = (0..lists).filter(|&l| woke[l]).collect();
            for l in ready {
                self.accept_burst(l);
            }
        }
    }

    /// Waits up to `wait` for a listener, a pending connection or a seated process to stir:
    /// which of them did (listeners, then pending, then seated), or `None` when none did.
    fn wait_for_events(&self, seated: &[&TcpStream], wait: Duration) -> Option<Vec<bool>> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = Vec::with_capacity(self.listeners.len() + self.pending.len() + seated.len());
        fds.extend(self.listeners.iter().map(|l| PollFd::new(l, PollFlags::IN)));
        fds.extend(
            self.pending
                .iter()
                .map(|p| PollFd::new(&p.stream, PollFlags::IN)),
        );
        // Seated processes send nothing before their welcome: data or a hang-up from one is
        // dealt with at once (data left unread would break the first sealed frame after it).
        fds.extend(
            seated
                .iter()
                .map(|s| PollFd::new(*s, PollFlags::IN | PollFlags::RDHUP)),
        );
        let timeout = Timespec {
            tv_sec: wait.as_secs() as _,
            tv_nsec: wait.subsec_nanos() as _,
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => Some(fds.iter().map(|f| !f.revents().is_empty()).collect()),
            _ => None,
        }
    }

    /// Takes every connection waiting at listener `l` (up to a burst), sending each its
    /// challenge.
    fn accept_burst(&mut self, l: usize) {
        for _ in 0..256 {
            match self.listeners[l].accept() {
                Ok((stream, from)) => {
                    if self.pending.len() >= MAX_PENDING {
                        self.drop_for_load();
                    }
                    let Ok(challenge) = Challenge::new(&self.key, &self.salt) else {
                        // No random source: nobody can be challenged (connect() failed already
                        // on this process if it never had one).
                        continue;
                    };
                    let challenge = challenge.bytes();
                    let ok = stream.set_nonblocking(true).is_ok()
                        && stream.set_nodelay(true).is_ok()
                        && wire::frame(wire::CHALLENGE, &challenge)
                            .is_ok_and(|f| (&stream).write(&f).is_ok_and(|n| n == f.len()));
                    if ok {
                        self.pending.push(Pending {
                            stream,
                            from,
                            challenge,
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
                        self.drop_for_load();
                    }
                    return;
                }
            }
        }
    }

    /// Closes one waiting connection to make room ([`load_victim`]). It is closed, not told to
    /// stop: a real process whose connection this was simply tries again.
    fn drop_for_load(&mut self) {
        let from: Vec<IpAddr> = self.pending.iter().map(|p| p.from.ip()).collect();
        let Some((i, ip)) = load_victim(&from, auth::below).and_then(|i| Some((i, *from.get(i)?)))
        else {
            return;
        };
        let p = self.pending.swap_remove(i);
        let _ = p.stream.shutdown(Shutdown::Both);
        self.load_dropped += 1;
        count_source(&mut self.load_drops, ip);
    }

    /// How many connections were closed for load and from where (`None`: none were), e.g.
    /// `1200 connections closed for load (more than 512 waiting at once), from 10.0.0.9 (1100),
    /// 10.0.0.7 (100)`.
    pub fn load_summary(&self) -> Option<String> {
        if self.load_dropped == 0 {
            return None;
        }
        let mut by: Vec<(&IpAddr, &usize)> = self.load_drops.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1));
        let shown: Vec<String> = by
            .iter()
            .take(4)
            .map(|(ip, n)| format!("{ip} ({n})"))
            .collect();
        let rest = by.len().saturating_sub(4);
        Some(format!(
            "{} connections closed for load (more than {MAX_PENDING} waiting at once), from {}{}",
            self.load_dropped,
            shown.join(", "),
            if rest > 0 {
                format!(" and {rest} more addresses")
            } else {
                String::new()
            }
        ))
    }

    /// Refuses a connection: prints `why` (one line, rate-limited) and tells the other side
    /// only `told`, which names nothing of this launch's processes (best effort, never
    /// waiting). The refusal is not signed: a real process that gets it tries again.
    pub fn refuse(&mut self, stream: TcpStream, from: SocketAddr, why: &str, told: &str) {
        let body = wire::Encoder::default()
            .u32(wire::abort::LAUNCH)
            .str(&format!("refused: {told}"))
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
        nccl_perf_facts::eline!(
            "nccl-perf: rank 0 refused a connection from {from}: {}{more}",
            peer_text::clean(why, 300)
        );
    }

    /// Says how many refusals were not printed, and how many connections were closed for
    /// load, if any.
    pub fn finish(&mut self) {
        if let Some(load) = self.load_summary()
            && !std::mem::replace(&mut self.load_told, true)
        {
            nccl_perf_facts::eline!("nccl-perf: rank 0 during the rendezvous: {load}");
        }
        if self.hidden > 0 {
            nccl_perf_facts::eline!(
                "nccl-perf: rank 0 refused {} more connection(s) during the rendezvous ({} in all)",
                self.hidden,
                self.refused
            );
            self.hidden = 0;
        }
    }
}

/// Counts one more drop for `ip` in `counts`, which never holds more than [`COUNTED_SOURCES`]
/// addresses: a new address when it is full takes the place of one counted least, starting
/// from that count (so counts may be over, never under, and the heavy sources stay).
fn count_source(counts: &mut BTreeMap<IpAddr, usize>, ip: IpAddr) {
    if let Some(n) = counts.get_mut(&ip) {
        *n += 1;
        return;
    }
    let mut start = 0;
    if counts.len() >= COUNTED_SOURCES
        && let Some((&least, &n)) = counts.iter().min_by_key(|&(_, n)| *n)
    {
        counts.remove(&least);
        start = n;
    }
    counts.insert(ip, start + 1);
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

/// Descriptors rank 0 asks for besides one per process (the listener, waiting connections
/// beyond the seated ones, NCCL, the GPU driver, files), and the fewest it warns below.
const SPARE_DESCRIPTORS: (u64, u64) = (1024, 64);

/// Makes room for `processes` connections at rank 0: raises the soft limit on open descriptors
/// (`ulimit -n`, often 1024) toward the hard one when the job needs more. A warning to print
/// when even the hard limit is too low (the job may then not form).
pub fn make_room(processes: usize) -> Option<String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let want = (processes as u64).saturating_add(SPARE_DESCRIPTORS.0);
    let least = (processes as u64).saturating_add(SPARE_DESCRIPTORS.1);
    let now = getrlimit(Resource::Nofile);
    let mut have = now.current;
    if let Some(to) = raise_to(now.current, now.maximum, want) {
        let new = Rlimit {
            current: Some(to),
            maximum: now.maximum,
        };
        if setrlimit(Resource::Nofile, new).is_ok() {
            have = Some(to);
        }
    }
    let have = have?;
    (have < least).then(|| {
        format!(
            "nccl-perf: rank 0 may keep only {have} files open (ulimit -n) for {processes} \
             processes that each connect to it: the job may not form; raise the limit (to \
             {want} or more)"
        )
    })
}

/// For a soft limit `current` and hard limit `maximum` (`None`: unlimited): the soft limit to
/// set so that `want` descriptors can be open, as near as the hard limit allows (`None`: leave
/// it as it is).
fn raise_to(current: Option<u64>, maximum: Option<u64>, want: u64) -> Option<u64> {
    let c = current?;
    let to = maximum.map_or(want, |m| m.min(want));
    (to > c).then_some(to)
}

/// Which waiting connection to close for load, given the source address of each: one at
/// random of the source that holds the most. Among sources that hold as many, one at random
/// too: an address order would let a flood from addresses that sort first always displace the
/// same (real) processes. `below(n)` draws a number below `n`.
fn load_victim(from: &[IpAddr], mut below: impl FnMut(usize) -> usize) -> Option<usize> {
    let mut count: BTreeMap<IpAddr, usize> = BTreeMap::new();
    for ip in from {
        *count.entry(*ip).or_default() += 1;
    }
    let most = *count.values().max()?;
    let top: Vec<IpAddr> = count
        .iter()
        .filter(|&(_, &n)| n == most)
        .map(|(&ip, _)| ip)
        .collect();
    let ip = *top.get(below(top.len()))?;
    let pick = below(most);
    from.iter()
        .enumerate()
        .filter(|&(_, f)| *f == ip)
        .nth(pick)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::{COUNTED_SOURCES, count_source, load_victim, raise_to};
    use std::collections::BTreeMap;
    use std::net::IpAddr;

    #[test]
    fn a_source_with_many_drops_is_counted_among_thousands_of_addresses() {
        // A flood from 5000 addresses, one drop each, with a real rank's address dropped now
        // and then (before: only the first 64 addresses were counted, so it never appeared).
        let mut counts = BTreeMap::new();
        let real: IpAddr = "192.0.2.1".parse().unwrap();
        for i in 0..5000u32 {
            let ip = IpAddr::from(std::net::Ipv6Addr::from(0x2001_0db8_u128 << 96 | i as u128));
            count_source(&mut counts, ip);
            if i % 100 == 0 {
                count_source(&mut counts, real);
            }
        }
        assert!(counts.len() <= COUNTED_SOURCES);
        assert!(
            counts.get(&real).is_some_and(|&n| n >= 50),
            "{:?}",
            counts.get(&real)
        );
    }

    #[test]
    fn the_descriptor_limit_is_raised_toward_the_hard_one_only_when_needed() {
        assert_eq!(raise_to(Some(4096), Some(4096), 2048), None);
        assert_eq!(raise_to(None, None, 1 << 20), None);
        assert_eq!(raise_to(Some(1024), Some(524288), 3072), Some(3072));
        assert_eq!(raise_to(Some(1024), None, 3072), Some(3072));
        assert_eq!(raise_to(Some(1024), Some(2048), 3072), Some(2048));
        assert_eq!(raise_to(Some(1024), Some(1024), 3072), None);
        // The process' own limit can be raised as far as wanted for a few thousand ranks, or
        // a warning names it.
        let w = super::make_room(2_000_000_000);
        assert!(
            w.as_deref()
                .is_none_or(|w| w.contains("for 2000000000 processes")),
            "{w:?}"
        );
    }

    #[test]
    fn the_source_with_the_most_loses_one_and_ties_are_drawn_at_random() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(load_victim(&[], |_| 0), None);
        // One source with three, one with one: always the first source, its drawn connection.
        let from = [
            ip("10.0.0.9"),
            ip("10.0.0.1"),
            ip("10.0.0.9"),
            ip("10.0.0.9"),
        ];
        assert_eq!(load_victim(&from, |_| 0), Some(0));
        assert_eq!(load_victim(&from, |n| n - 1), Some(3));
        // Every source holds one (a flood from many addresses beside real ranks): whichever
        // source the draw names, in address order, so every one can be chosen.
        let from = [ip("10.0.0.7"), ip("10.0.0.2"), ip("10.0.0.5")];
        let chosen: Vec<usize> = (0..3)
            .map(|k| load_victim(&from, |n| if n == 3 { k } else { 0 }).unwrap())
            .collect();
        assert_eq!(chosen, [1, 2, 0]);
    }
}
