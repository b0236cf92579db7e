//! Meeting, rank 0's side: rank 0 listens on every address of its name, checks every hello
//! (signed with the job key over its challenge; world size, rank, program and options) before
//! the process takes a rank, then answers each with its local and group ranks, signed over the
//! process' own nonce. The door (`door.rs`) serves the
//! connections; the other processes' side is `join.rs`.

use super::challenge;
use super::door::{Door, Next};
use super::seal::Direction;
use super::wire::{self, Decoder, Encoder, WireError};
use super::{Peer, TcpBootstrap, abort_peers, abort_unwelcomed, beat, failure, rank_list, secs};
use crate::auth::{self, JobKey};
use crate::error::{Error, Result};
use crate::fingerprint::{self, Fingerprint};
use crate::launch::TcpLaunch;
use crate::{Group, local, peer_text};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// How long rank 0 stays after a wrong launch to tell the processes still on their way why
/// (they usually start together: a few seconds catch them).
const LINGER: Duration = Duration::from_secs(3);
/// The same after a process left: shorter, so that rank 0's own error comes at once.
const LINGER_SHORT: Duration = Duration::from_secs(1);

/// What a process tells rank 0 when it connects (signed with the job key over rank 0's
/// challenge).
#[derive(Clone)]
pub(super) struct Hello {
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) local_rank: Option<usize>,
    pub(super) color: i64,
    pub(super) hash: u64,
    pub(super) pid: u32,
    pub(super) host: String,
    pub(super) run: Fingerprint,
    /// The process' own nonce: rank 0 signs its welcome over it.
    pub(super) nonce: [u8; auth::LEN],
}

impl Hello {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::default()
            .u32(wire::MAGIC)
            .u64(self.rank as u64)
            .u64(self.size as u64)
            .i64(self.local_rank.map_or(-1, |l| l as i64))
            .i64(self.color)
            .u64(self.hash)
            .u32(self.pid)
            .str(&self.host)
            .u32(self.run.0.len() as u32);
        for item in &self.run.0 {
            e = e.str(item);
        }
        e.0.extend_from_slice(&self.nonce);
        e.0
    }

    /// Reads a hello; strings are cleaned and bounded.
    fn decode(body: &[u8]) -> std::result::Result<Hello, WireError> {
        let mut d = Decoder(body);
        if d.u32()? != wire::MAGIC {
            return Err(WireError::NotOurs);
        }
        let (rank, size) = (d.u64()?, d.u64()?);
        let local_rank = usize::try_from(d.i64()?).ok();
        let (color, hash, pid) = (d.i64()?, d.u64()?, d.u32()?);
        let host = peer_text::host(&d.str()?);
        let n = d.u32()? as usize;
        if n > fingerprint::MAX_ITEMS {
            return Err(WireError::TooManyItems(n));
        }
        let items = (0..n)
            .map(|_| d.str())
            .collect::<std::result::Result<_, _>>()?;
        let mut nonce = [0u8; auth::LEN];
        nonce.copy_from_slice(d.take(auth::LEN)?);
        Ok(Hello {
            rank: usize::try_from(rank).unwrap_or(usize::MAX),
            size: usize::try_from(size).unwrap_or(usize::MAX),
            local_rank,
            color,
            hash,
            pid,
            host,
            run: Fingerprint::from_peer(items),
            nonce,
        })
    }
}

/// What rank 0 makes of a hello.
enum Verdict {
    /// It takes its rank.
    Seat(Hello),
    /// A stranger (or a process that does not fit and cannot prove it belongs): refused, the
    /// job goes on. `log` is printed on rank 0; the other side is told only `told`, which
    /// names none of this launch's processes. `claimed`: the rank it claimed, when it is one of
    /// this run's, for the timeout message; `signed`: whether the hello carried the job key's
    /// signature (an unsigned claim's reason never displaces a signed one's: anyone can send
    /// it).
    Refuse {
        log: String,
        told: &'static str,
        claimed: Option<usize>,
        signed: bool,
    },
    /// A process of this launch that does not fit: the launch is wrong (exit 6). Its nonce, to
    /// sign the abort it is sent.
    Stop(String, [u8; auth::LEN]),
}

/// Why the last refused claim of each rank was refused (bounded: one per rank), for the
/// timeout message. A claim in a hello without the job key's signature may be anybody's: its
/// reason never displaces a signed claim's, and signed ones are named first.
pub(super) struct Refusals(Vec<Option<(bool, String)>>);

impl Refusals {
    /// No claim refused yet, for ranks below `size`.
    pub(super) fn new(size: usize) -> Refusals {
        Refusals(vec![None; size])
    }

    /// A claim of `rank` refused for `why`; `signed` when its hello carried the signature.
    pub(super) fn note(&mut self, rank: usize, signed: bool, why: String) {
        if let Some(slot) = self.0.get_mut(rank)
            && (signed || !slot.as_ref().is_some_and(|(s, _)| *s))
        {
            *slot = Some((signed, why));
        }
    }

    /// The timeout's note on the `missing` ranks' refused claims (at most four, signed first).
    pub(super) fn notes(&self, missing: &[usize]) -> Option<String> {
        let mut claims: Vec<(bool, usize, &str)> = missing
            .iter()
            .filter_map(|&r| self.0.get(r)?.as_ref().map(|(s, w)| (*s, r, w.as_str())))
            .collect();
        claims.sort_by_key(|&(signed, r, _)| (!signed, r));
        let named: Vec<String> = claims
            .iter()
            .take(4)
            .map(|(_, r, w)| format!("rank {r}: {w}"))
            .collect();
        (!named.is_empty()).then(|| format!("refused claims: {}", named.join("; ")))
    }
}

/// A seated process with its connection and the challenge rank 0 sent it.
struct Seated {
    hello: Hello,
    stream: TcpStream,
    challenge: [u8; challenge::BYTES],
}

/// The hello in a frame signed with `key` over `challenge` (`None`: unreadable or unsigned).
fn signed_hello(key: &JobKey, challenge: &[u8], frame: &[u8]) -> Option<Hello> {
    let split = frame.len().checked_sub(auth::LEN)?;
    let (body, mac) = frame.split_at(split);
    if !key.verify(&[b"hello", challenge, body], mac) {
        return None;
    }
    Hello::decode(body).ok()
}

impl TcpBootstrap {
    /// Checks one hello (`frame`, answering the challenge `challenge`) against this launch.
    /// Only a hello signed with the job key counts; of those, a misfit stops the launch when
    /// the key proves the job (a secret or a launcher job id), and is refused otherwise (anyone
    /// could have forged it). Every field is checked before it is used: any bytes are refused
    /// or seated, never a panic.
    fn judge(
        &self,
        challenge: &[u8],
        frame: &[u8],
        me: &Hello,
        slots: &[Option<Seated>],
    ) -> Verdict {
        let refuse = |log: String, told, claimed, signed| Verdict::Refuse {
            log,
            told,
            claimed,
            signed,
        };
        let Some(split) = frame.len().checked_sub(auth::LEN) else {
            return refuse("a truncated hello".into(), "a truncated hello", None, false);
        };
        let (body, mac) = frame.split_at(split);
        let h = match Hello::decode(body) {
            Ok(h) => h,
            Err(e) => {
                return refuse(
                    format!("an unreadable hello ({e})"),
                    "an unreadable hello",
                    None,
                    false,
                );
            }
        };
        let claimed = (h.rank > 0 && h.rank < self.size).then_some(h.rank);
        if !self.key.verify(&[b"hello", challenge, body], mac) {
            return refuse(
                format!(
                    "a hello for rank {} (pid {} on {}) not signed with this job's key: another \
                     job, or a different NCCL_PERF_RENDEZVOUS_KEY",
                    h.rank, h.pid, h.host
                ),
                "the hello is not signed with this job's key (another job, or a different \
                 NCCL_PERF_RENDEZVOUS_KEY)",
                claimed,
                false,
            );
        }
        let who = format!("rank {} (pid {} on {})", h.rank, h.pid, h.host);
        let misfit = if h.size != self.size {
            Some((
                format!(
                    "{who} was started as one of {} processes; rank 0 as one of {} ({} launch)",
                    h.size, self.size, self.launcher
                ),
                "the number of processes differs from rank 0's",
            ))
        } else if h.rank == 0 {
            Some((
                format!(
                    "two processes claim rank 0: {who} and this one (pid {})",
                    me.pid
                ),
                "rank 0 is taken",
            ))
        } else if h.rank >= self.size {
            Some((
                format!(
                    "{who} claims a rank outside the launch's {} processes",
                    self.size
                ),
                "the rank is outside the launch",
            ))
        } else if let Some(d) = fingerprint::difference(0, &me.run, h.rank, &h.run) {
            Some((d, "the program or its options differ from rank 0's"))
        } else {
            slots[h.rank - 1].as_ref().map(|s| {
                (
                    format!(
                        "two processes claim rank {}: pid {} on {} and pid {} on {}",
                        h.rank, s.hello.pid, s.hello.host, h.pid, h.host
                    ),
                    "the rank is taken",
                )
            })
        };
        match misfit {
            None => Verdict::Seat(h),
            Some((m, _)) if self.strong => Verdict::Stop(m, h.nonce),
            Some((m, told)) => refuse(m, told, claimed, true),
        }
    }

    /// Rank 0: waits for every other rank, then tells each its local and group ranks.
    /// `ready`: sockets already listening (a job formed through an engine), else rank 0
    /// listens on the launch's address.
    pub(super) fn accept_all(
        &mut self,
        launch: &TcpLaunch,
        me: &Hello,
        ready: Option<Vec<TcpListener>>,
    ) -> Result<Vec<Peer>> {
        if let Some(warning) = super::door::make_room(self.size) {
            nccl_perf_facts::eline!("{warning}");
        }
        let listeners = match ready {
            Some(l) => l,
            None => listen(launch)?,
        };
        let mut door = Door::new(listeners, self.key.clone(), self.salt)
            .map_err(|e| Error::Internal(format!("rendezvous socket: {e}")))?;
        let deadline = Instant::now() + self.timeout;
        let mut slots: Vec<Option<Seated>> = (1..self.size).map(|_| None).collect();
        let mut refusals = Refusals::new(self.size);
        let mut arrived = 0;
        while arrived < slots.len() {
            let (index, streams): (Vec<usize>, Vec<&TcpStream>) = slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.as_ref().map(|s| (i, &s.stream)))
                .unzip();
            // The message, the abort kind, how long to linger, and how many processes are
            // accounted for besides those seated (one that left, or the misfit).
            let (msg, kind, linger, others) = match door.next(deadline, &streams) {
                Next::TimedOut => {
                    let missing: Vec<usize> =
                        (1..self.size).filter(|r| slots[r - 1].is_none()).collect();
                    let mut notes: Vec<String> = refusals.notes(&missing).into_iter().collect();
                    notes.extend(door.load_summary());
                    let msg = format!(
                        "timed out after {}: {} of {} processes never connected to rank 0 at {} \
                         ({} launch); missing: {}{}",
                        secs(self.timeout),
                        missing.len(),
                        self.size,
                        self.address,
                        self.launcher,
                        rank_list(&missing, launch.expected_hosts.as_deref()),
                        notes.iter().map(|n| format!("; {n}")).collect::<String>()
                    );
                    // Every process had the whole timeout to arrive: no lingering.
                    (msg, wire::abort::TIMED_OUT, Duration::ZERO, 0)
                }
                Next::Left(i) => {
                    let gone = slots[index[i]].take().map(|s| s.hello);
                    let missing: Vec<usize> =
                        (1..self.size).filter(|r| slots[r - 1].is_none()).collect();
                    let msg = match gone {
                        Some(h) => format!(
                            "rank {} (pid {} on {}) left before every process had arrived: its \
                             process ended or failed; not connected: {}",
                            h.rank,
                            h.pid,
                            h.host,
                            rank_list(&missing, launch.expected_hosts.as_deref())
                        ),
                        None => "a process left during the rendezvous".into(),
                    };
                    (msg, wire::abort::FAILED, LINGER_SHORT, 1)
                }
                Next::Misbehaved(i) => {
                    let from = peer_addr(streams[i]);
                    if let Some(s) = slots[index[i]].take() {
                        arrived -= 1;
                        let h = &s.hello;
                        let why = format!(
                            "the process seated as rank {} (pid {} on {}) sent data before its \
                             welcome: no process of this launch does; its rank is free again",
                            h.rank, h.pid, h.host
                        );
                        refusals.note(h.rank, true, why.clone());
                        door.refuse(s.stream, from, &why, "out of step");
                    }
                    continue;
                }
                Next::Hello(a) => match self.judge(&a.challenge, &a.body, me, &slots) {
                    Verdict::Seat(h) => {
                        let r = h.rank;
                        slots[r - 1] = Some(Seated {
                            hello: h,
                            stream: a.stream,
                            challenge: a.challenge,
                        });
                        arrived += 1;
                        continue;
                    }
                    Verdict::Refuse {
                        log,
                        told,
                        claimed,
                        signed,
                    } => {
                        if let Some(r) = claimed {
                            refusals.note(r, signed, format!("{log} (from {})", a.from));
                        }
                        door.refuse(a.stream, a.from, &log, told);
                        continue;
                    }
                    Verdict::Stop(why, nonce) => {
                        let msg = format!("wrong launch: {why}");
                        let mut misfit = a.stream;
                        abort_unwelcomed(
                            &self.key,
                            std::iter::once((&mut misfit, &nonce)),
                            &msg,
                            wire::abort::LAUNCH,
                        );
                        (msg, wire::abort::LAUNCH, LINGER, 1)
                    }
                },
            };
            // The launch stops: every seated process is told why, and so is every process of
            // this launch that arrives while rank 0 lingers.
            let mut seated: Vec<Seated> = slots.into_iter().flatten().collect();
            abort_unwelcomed(
                &self.key,
                seated.iter_mut().map(|s| (&mut s.stream, &s.hello.nonce)),
                &msg,
                kind,
            );
            let late = (self.size - 1).saturating_sub(seated.len() + others);
            self.linger(&mut door, linger, &msg, late);
            door.finish();
            return Err(match kind {
                wire::abort::LAUNCH => Error::Launch(msg),
                k => failure(msg, k == wire::abort::TIMED_OUT),
            });
        }
        door.finish();
        self.welcome_all(me, slots.into_iter().flatten().collect())
    }

    /// Rank 0 after the launch stopped during the meeting: for `how_long`, tells the `late`
    /// processes that had not arrived yet (those whose hello holds the key) why the launch
    /// stopped, signed, so they exit 6 at once instead of waiting for their timeout. Others are
    /// refused as usual.
    fn linger(&self, door: &mut Door, how_long: Duration, msg: &str, mut late: usize) {
        let until = Instant::now() + how_long;
        let told = format!("the launch stopped before this process arrived: {msg}");
        while late > 0 {
            match door.next(until, &[]) {
                Next::Hello(a) => match signed_hello(&self.key, &a.challenge, &a.body) {
                    Some(h) => {
                        let mut s = a.stream;
                        abort_unwelcomed(
                            &self.key,
                            std::iter::once((&mut s, &h.nonce)),
                            &told,
                            wire::abort::LAUNCH,
                        );
                        late -= 1;
                    }
                    None => door.refuse(
                        a.stream,
                        a.from,
                        "a hello not signed with this job's key",
                        "the hello is not signed with this job's key",
                    ),
                },
                Next::TimedOut | Next::Left(_) | Next::Misbehaved(_) => return,
            }
        }
    }

    /// Rank 0, once everyone is seated: local and group ranks for each, signed; then each
    /// connection's frames are sealed with its session key.
    fn welcome_all(&mut self, me: &Hello, all: Vec<Seated>) -> Result<Vec<Peer>> {
        let hashes: Vec<u64> = std::iter::once(me.hash)
            .chain(all.iter().map(|s| s.hello.hash))
            .collect();
        let colors: Vec<i64> = std::iter::once(me.color)
            .chain(all.iter().map(|s| s.hello.color))
            .collect();
        let (local_ranks, local_sizes) = (local::local_ranks(&hashes), local::local_sizes(&hashes));
        let groups = local::groups(&colors);
        self.local_rank = me.local_rank.unwrap_or(local_ranks[0]);
        self.local_size = local_sizes[0];
        self.group = Group {
            color: me.color,
            rank: groups[0].0,
            size: groups[0].1,
        };
        let mut peers: Vec<Peer> = Vec::with_capacity(all.len());
        for (i, s) in all.into_iter().enumerate() {
            let Seated {
                hello: h,
                mut stream,
                challenge,
            } = s;
            let r = i + 1;
            let mut body = Encoder::default()
                .u64(h.local_rank.unwrap_or(local_ranks[r]) as u64)
                .u64(local_sizes[r] as u64)
                .u64(groups[r].0 as u64)
                .u64(groups[r].1 as u64)
                .0;
            let mac = self.key.sign(&[b"welcome", &h.nonce, &body]);
            body.extend_from_slice(&mac);
            let session = self.key.session(&challenge, &h.nonce);
            let linked = wire::send(&mut stream, wire::WELCOME, &body, self.timeout)
                .and_then(|()| beat::link(stream, &session, Direction::FromRoot));
            let (stream, writer) = match linked {
                Ok(l) => l,
                Err(e) => {
                    let msg = format!("rank {r} ({}) left during the bootstrap: {e}", h.host);
                    abort_peers(&peers, None, &msg, false);
                    return Err(failure(msg, false));
                }
            };
            peers.push(Peer {
                rank: r,
                host: h.host,
                pid: h.pid,
                color: h.color,
                stream,
                writer,
                heard: Instant::now(),
                pending: None,
            });
        }
        Ok(peers)
    }
}

/// The address a seated process connected from (for the refusal line).
fn peer_addr(s: &TcpStream) -> SocketAddr {
    s.peer_addr()
        .unwrap_or_else(|_| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
}

/// Rank 0's listening sockets, on every address the other ranks are given: every address its
/// host name resolves to here, so that no process on this host can squat one of them (another
/// address family's, say `::1` beside `127.0.0.1`) and meet the others first: binding fails and
/// says the port is taken instead. `NCCL_PERF_RENDEZVOUS_BIND` overrides it. A name that
/// resolves only to a loopback address here (Debian's 127.0.1.1) while the others resolve it
/// elsewhere gets every interface of both families, with a note.
fn listen(launch: &TcpLaunch) -> Result<Vec<TcpListener>> {
    let (host, port) = (launch.host.as_str(), launch.port);
    let addrs = match &launch.bind {
        Some(ip) => vec![SocketAddr::new(*ip, port)],
        None => {
            let mut resolved: Vec<SocketAddr> = (host, port)
                .to_socket_addrs()
                .map(|a| a.collect())
                .unwrap_or_default();
            resolved.dedup();
            let named_loopback =
                host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if !resolved.is_empty()
                && (named_loopback || resolved.iter().any(|a| !a.ip().is_loopback()))
            {
                resolved
            } else {
                let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
                nccl_perf_facts::eline!(
                    "nccl-perf: rank 0 listens on {any} and [::]:{port}: '{host}' resolves to no \
                     address of this host's network here (set NCCL_PERF_RENDEZVOUS_BIND=<address> \
                     to choose)"
                );
                vec![
                    any,
                    SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
                ]
            }
        }
    };
    listen_on(&addrs)
}

/// Rank 0's sockets for a job formed through an engine: on `bind` (else every IPv4 address) at
/// `port`, or where it is 0 at a port the system picks, which no other job holds, and on IPv6's
/// every address at the same port where it can be had (skipped otherwise). Returns them and
/// the port.
pub(crate) fn listen_any_port(bind: Option<IpAddr>, port: u16) -> Result<(Vec<TcpListener>, u16)> {
    let first = SocketAddr::new(bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), port);
    let l = bind_listener(first).map_err(|e| cannot_listen(first, &e))?;
    let port = l
        .local_addr()
        .map_err(|e| Error::Internal(format!("rendezvous socket: {e}")))?
        .port();
    let mut all = vec![l];
    if bind.is_none()
        && let Ok(v6) = bind_listener(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port))
    {
        all.push(v6);
    }
    Ok((all, port))
}

/// Listens on every one of `addrs` (the same port). An address this host cannot have (another
/// host's, or IPv6 where it is off) is skipped while another one binds; one that another
/// process holds stops rank 0: it says so rather than leave that address to whoever holds it.
pub(super) fn listen_on(addrs: &[SocketAddr]) -> Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    let mut skipped = None;
    for &addr in addrs {
        match bind_listener(addr) {
            Ok(l) => listeners.push(l),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                return Err(cannot_listen(addr, &e));
            }
            Err(e) => {
                skipped.get_or_insert((addr, e));
            }
        }
    }
    match (listeners.is_empty(), skipped) {
        (false, _) => Ok(listeners),
        (true, Some((addr, e))) => Err(cannot_listen(addr, &e)),
        (true, None) => Err(Error::Launch(
            "rank 0 has no address to listen on for the rendezvous: set \
             NCCL_PERF_RENDEZVOUS_BIND=<ip>"
                .into(),
        )),
    }
}

/// Rank 0 cannot listen on `addr`: what to do about it.
fn cannot_listen(addr: SocketAddr, e: &std::io::Error) -> Error {
    let why = if e.kind() == std::io::ErrorKind::AddrInUse {
        "another process already listens on that port: a second rank 0 of this launch (check \
         that every process gets its own rank) or another job"
            .to_string()
    } else {
        e.to_string()
    };
    Error::Launch(format!(
        "rank 0 could not listen on {addr} for the rendezvous: {why}. Pick a free port with \
         NCCL_PERF_RENDEZVOUS_PORT=<port> (or NCCL_PERF_RENDEZVOUS=<host>:<port>) for every \
         process, or the address with NCCL_PERF_RENDEZVOUS_BIND=<ip>"
    ))
}

/// How many connections the kernel queues before rank 0 accepts them (std's default is 128):
/// under a flood a full queue drops the SYNs of real processes, which then wait a second or more
/// to try again. The kernel caps it at `net.core.somaxconn` (4096 by default).
const BACKLOG: i32 = 4096;

/// A listening socket on `addr` (close-on-exec, address reuse as std sets it) with [`BACKLOG`].
fn bind_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use rustix::net::{AddressFamily, SocketType, bind, listen, socket, sockopt};
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = socket(family, SocketType::STREAM, None)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    if addr.is_ipv6() {
        // IPv6 only: the IPv4 addresses are bound on their own (a dual-stack `[::]` would
        // clash with `0.0.0.0`).
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    bind(&fd, &addr)?;
    listen(&fd, BACKLOG)?;
    Ok(TcpListener::from(fd))
}

#[cfg(test)]
mod tests;
