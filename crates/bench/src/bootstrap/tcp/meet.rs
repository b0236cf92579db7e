//! Meeting at rank 0: rank 0 listens, checks every hello (job key, world size, rank, program and
//! options) before the process takes a rank, then answers each with its local and group ranks;
//! the others connect with bounded retries. The door (`door.rs`) serves the connections.

use super::door::{Arrival, Door, Next};
use super::wire::{self, Decoder, Encoder, RecvError, WireError};
use super::{Peer, TcpBootstrap, abort_all, abort_launch, beat, failure, rank_list, secs};
use crate::bootstrap::auth;
use crate::bootstrap::fingerprint::{self, Fingerprint};
use crate::bootstrap::launch::TcpLaunch;
use crate::bootstrap::{Group, local, peer_text};
use crate::error::{Error, Result};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// How long rank 0 stays after a wrong launch to tell the processes still on their way.
const LINGER: Duration = Duration::from_secs(3);

/// What a process tells rank 0 when it connects (signed with the job key over rank 0's nonce).
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
    fn encode(&self) -> Vec<u8> {
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
    /// job goes on. The rank it claimed, when it is one of this run's, for the timeout message.
    Refuse(String, Option<usize>),
    /// A process of this launch that does not fit: the launch is wrong (exit 6).
    Stop(String),
}

/// A seated process with its connection.
struct Seated {
    hello: Hello,
    stream: TcpStream,
}

impl TcpBootstrap {
    /// Checks one hello against this launch. Only a hello signed with the job key counts; of
    /// those, a misfit stops the launch when the key proves the job (a secret or a launcher job
    /// id), and is refused otherwise (anyone could have forged it).
    fn judge(&self, a: &Arrival, me: &Hello, slots: &[Option<Seated>]) -> Verdict {
        let Some(split) = a.body.len().checked_sub(auth::LEN) else {
            return Verdict::Refuse("a truncated hello".into(), None);
        };
        let (body, mac) = a.body.split_at(split);
        let h = match Hello::decode(body) {
            Ok(h) => h,
            Err(e) => return Verdict::Refuse(format!("an unreadable hello ({e})"), None),
        };
        let claimed = (h.rank > 0 && h.rank < self.size).then_some(h.rank);
        if !self.key.verify(&[b"hello", &a.nonce, body], mac) {
            return Verdict::Refuse(
                format!(
                    "a hello for rank {} (pid {} on {}) not signed with this job's key: another \
                     job, or a different NCCL_PERF_RENDEZVOUS_KEY",
                    h.rank, h.pid, h.host
                ),
                claimed,
            );
        }
        let who = format!("rank {} (pid {} on {})", h.rank, h.pid, h.host);
        let misfit = if h.size != self.size {
            Some(format!(
                "{who} was started as one of {} processes; rank 0 as one of {} ({} launch)",
                h.size, self.size, self.launcher
            ))
        } else if h.rank == 0 {
            Some(format!(
                "two processes claim rank 0: {who} and this one (pid {})",
                me.pid
            ))
        } else if let Some(d) = fingerprint::difference(0, &me.run, h.rank, &h.run) {
            Some(d)
        } else {
            slots[h.rank - 1].as_ref().map(|s| {
                format!(
                    "two processes claim rank {}: pid {} on {} and pid {} on {}",
                    h.rank, s.hello.pid, s.hello.host, h.pid, h.host
                )
            })
        };
        match misfit {
            None => Verdict::Seat(h),
            Some(m) if self.strong => Verdict::Stop(m),
            Some(m) => Verdict::Refuse(m, claimed),
        }
    }

    /// Rank 0: waits for every other rank, then tells each its local and group ranks.
    pub(super) fn accept_all(&mut self, launch: &TcpLaunch, me: &Hello) -> Result<Vec<Peer>> {
        let listener = listen(launch)?;
        let mut door =
            Door::new(listener).map_err(|e| Error::Internal(format!("rendezvous socket: {e}")))?;
        let deadline = Instant::now() + self.timeout;
        let mut slots: Vec<Option<Seated>> = (1..self.size).map(|_| None).collect();
        // Why the last refused claim of each rank was refused (bounded: one per rank).
        let mut refusals: Vec<Option<String>> = vec![None; self.size];
        let mut arrived = 0;
        while arrived < slots.len() {
            let (index, streams): (Vec<usize>, Vec<&TcpStream>) = slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.as_ref().map(|s| (i, &s.stream)))
                .unzip();
            match door.next(deadline, &streams) {
                Next::TimedOut => {
                    door.finish();
                    let missing: Vec<usize> =
                        (1..self.size).filter(|r| slots[r - 1].is_none()).collect();
                    let notes: Vec<String> = missing
                        .iter()
                        .filter_map(|&r| refusals[r].as_ref().map(|w| format!("rank {r}: {w}")))
                        .take(4)
                        .collect();
                    let msg = format!(
                        "timed out after {}: {} of {} processes never connected to rank 0 at {} \
                         ({} launch); missing: {}{}",
                        secs(self.timeout),
                        missing.len(),
                        self.size,
                        self.address,
                        self.launcher,
                        rank_list(&missing, launch.expected_hosts.as_deref()),
                        if notes.is_empty() {
                            String::new()
                        } else {
                            format!("; refused claims: {}", notes.join("; "))
                        }
                    );
                    let mut peers: Vec<TcpStream> =
                        slots.into_iter().flatten().map(|s| s.stream).collect();
                    abort_all(peers.iter_mut(), &msg, true);
                    return Err(failure(msg, true));
                }
                Next::Left(i) => {
                    door.finish();
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
                    let mut peers: Vec<TcpStream> =
                        slots.into_iter().flatten().map(|s| s.stream).collect();
                    abort_all(peers.iter_mut(), &msg, false);
                    return Err(failure(msg, false));
                }
                Next::Hello(a) => match self.judge(&a, me, &slots) {
                    Verdict::Seat(h) => {
                        let r = h.rank;
                        slots[r - 1] = Some(Seated {
                            hello: h,
                            stream: a.stream,
                        });
                        arrived += 1;
                    }
                    Verdict::Refuse(why, claimed) => {
                        if let Some(r) = claimed {
                            refusals[r] = Some(format!("{why} (from {})", a.from));
                        }
                        door.refuse(a.stream, a.from, &why);
                    }
                    Verdict::Stop(why) => {
                        let msg = format!("wrong launch: {why}");
                        let mut peers: Vec<TcpStream> =
                            slots.into_iter().flatten().map(|s| s.stream).collect();
                        peers.push(a.stream);
                        abort_launch(peers.iter_mut(), &msg);
                        self.linger(
                            &mut door,
                            deadline,
                            &msg,
                            (self.size - 1).saturating_sub(peers.len()),
                        );
                        door.finish();
                        return Err(Error::Launch(msg));
                    }
                },
            }
        }
        door.finish();
        self.welcome_all(me, slots.into_iter().flatten().collect())
    }

    /// Rank 0 after a wrong launch: for a little while, tells the `late` processes that had not
    /// arrived yet (those whose hello holds the key) why the launch stops, so they exit 6 too
    /// instead of waiting for their timeout. Others are refused as usual.
    fn linger(&self, door: &mut Door, deadline: Instant, msg: &str, mut late: usize) {
        let until = deadline.min(Instant::now() + LINGER);
        while late > 0 {
            match door.next(until, &[]) {
                Next::Hello(a) => {
                    let signed = a.body.len().checked_sub(auth::LEN).is_some_and(|n| {
                        let (body, mac) = a.body.split_at(n);
                        self.key.verify(&[b"hello", &a.nonce, body], mac)
                    });
                    if signed {
                        let mut s = a.stream;
                        abort_launch(std::iter::once(&mut s), msg);
                        late -= 1;
                    } else {
                        door.refuse(a.stream, a.from, "a hello not signed with this job's key");
                    }
                }
                Next::TimedOut | Next::Left(_) => return,
            }
        }
    }

    /// Rank 0, once everyone is seated: local and group ranks for each, signed.
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
        let mut peers = Vec::with_capacity(all.len());
        for (
            i,
            Seated {
                hello: h,
                mut stream,
            },
        ) in all.into_iter().enumerate()
        {
            let r = i + 1;
            let mut body = Encoder::default()
                .u64(h.local_rank.unwrap_or(local_ranks[r]) as u64)
                .u64(local_sizes[r] as u64)
                .u64(groups[r].0 as u64)
                .u64(groups[r].1 as u64)
                .0;
            let mac = self.key.sign(&[b"welcome", &h.nonce, &body]);
            body.extend_from_slice(&mac);
            if let Err(e) = wire::send(&mut stream, wire::WELCOME, &body, self.timeout) {
                let msg = format!("rank {r} ({}) left during the bootstrap: {e}", h.host);
                abort_all(
                    peers.iter_mut().map(|p: &mut Peer| &mut p.stream),
                    &msg,
                    false,
                );
                return Err(failure(msg, false));
            }
            let writer = beat::writer(&stream).map_err(|e| {
                failure(
                    format!("the connection of rank {r} ({}): {e}", h.host),
                    false,
                )
            })?;
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

    /// Any rank but 0: connects to rank 0 (retrying until the timeout), answers its challenge
    /// with a signed hello, and waits for a welcome signed over its own nonce.
    pub(super) fn join(&mut self, launch: &TcpLaunch, me: &Hello) -> Result<TcpStream> {
        let deadline = Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(50);
        let mut last;
        loop {
            last = match try_connect(&launch.host, launch.port, deadline) {
                Ok(mut s) => match self.greet(&mut s, me, deadline)? {
                    Some(body) => {
                        self.take_welcome(&body, me)?;
                        return Ok(s);
                    }
                    None => "rank 0 dropped the connection before the welcome".to_string(),
                },
                Err(e) => e.to_string(),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(failure(
                    format!(
                        "timed out after {}: rank {} ({}) could not reach rank 0 at {} \
                         ({} launch; last error: {last}); missing: rank 0 (expected on {})",
                        secs(self.timeout),
                        self.rank,
                        me.host,
                        self.address,
                        self.launcher,
                        launch.host
                    ),
                    true,
                ));
            }
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// One attempt: challenge, hello, answer. `None`: dropped before an answer (try again).
    fn greet(&self, s: &mut TcpStream, me: &Hello, deadline: Instant) -> Result<Option<Vec<u8>>> {
        let _ = s.set_nodelay(true);
        let soon = deadline.min(Instant::now() + Duration::from_secs(5));
        let nonce = match wire::recv_limited(s, soon, 64) {
            Ok((wire::CHALLENGE, n)) if n.len() == auth::LEN => n,
            Ok((wire::ABORT, body)) => return Err(self.aborted(&body)),
            Ok(_) => {
                return Err(Error::Launch(format!(
                    "the process listening at {} is not an nccl-perf rank 0 of this version",
                    self.address
                )));
            }
            Err(RecvError::Closed | RecvError::TimedOut) => return Ok(None),
            Err(RecvError::Other(e)) => {
                return Err(Error::Launch(format!(
                    "the process listening at {} is not an nccl-perf rank 0 of this version ({e})",
                    self.address
                )));
            }
        };
        let body = me.encode();
        let mut frame = body.clone();
        frame.extend_from_slice(&self.key.sign(&[b"hello", &nonce, &body]));
        if wire::send(s, wire::HELLO, &frame, self.timeout).is_err() {
            return Ok(None);
        }
        match wire::recv_limited(s, deadline + super::GRACE, 4096) {
            Ok((wire::WELCOME, body)) => Ok(Some(body)),
            Ok((wire::ABORT, body)) => Err(self.aborted(&body)),
            Ok((t, _)) => Err(failure(
                format!("rank 0 sent a {} instead of a welcome", wire::tag_name(t)),
                false,
            )),
            Err(RecvError::Closed) => Ok(None),
            Err(e) => Err(failure(
                format!(
                    "rank 0 at {} did not welcome this process: {e:?}",
                    self.address
                ),
                matches!(e, RecvError::TimedOut),
            )),
        }
    }

    fn take_welcome(&mut self, body: &[u8], me: &Hello) -> Result<()> {
        let unsigned = body.len().saturating_sub(auth::LEN);
        let (fields, mac) = body.split_at(unsigned);
        if !self.key.verify(&[b"welcome", &me.nonce, fields], mac) {
            return Err(Error::Launch(format!(
                "the process at {} answered as rank 0 but does not hold this job's key: another \
                 job's rank 0 on this port, or a different NCCL_PERF_RENDEZVOUS_KEY",
                self.address
            )));
        }
        let mut d = Decoder(fields);
        let mut field = || {
            d.u64()
                .map(|v| v as usize)
                .map_err(|e| failure(format!("bad welcome from rank 0: {e}"), false))
        };
        self.local_rank = field()?;
        self.local_size = field()?;
        let (rank, size) = (field()?, field()?);
        self.group = Group {
            color: me.color,
            rank,
            size,
        };
        Ok(())
    }
}

/// Rank 0's listening socket, on the address the other ranks are given (`NCCL_PERF_RENDEZVOUS_BIND`
/// overrides it). A name that resolves only to a loopback address here (Debian's 127.0.1.1)
/// while the others resolve it elsewhere gets every interface, with a note.
fn listen(launch: &TcpLaunch) -> Result<TcpListener> {
    let (host, port) = (launch.host.as_str(), launch.port);
    let addr = match &launch.bind {
        Some(ip) => SocketAddr::new(*ip, port),
        None => {
            let resolved: Vec<SocketAddr> = (host, port)
                .to_socket_addrs()
                .map(|a| a.collect())
                .unwrap_or_default();
            // Prefer IPv4 (a host without IPv6 cannot bind ::1 even when the name resolves to it).
            let first = resolved.iter().find(|a| a.is_ipv4()).or(resolved.first());
            let named_loopback =
                host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
            match first {
                Some(a) if !a.ip().is_loopback() || named_loopback => *a,
                _ => {
                    let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
                    eprintln!(
                        "nccl-perf: rank 0 listens on {any}: '{host}' resolves to no address of \
                         this host's network here (set NCCL_PERF_RENDEZVOUS_BIND=<address> to choose)"
                    );
                    any
                }
            }
        }
    };
    TcpListener::bind(addr).map_err(|e| {
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
    })
}

/// Why a connection to rank 0 could not be made (this attempt; the caller retries).
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    /// The host name does not resolve.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    /// It resolves to nothing.
    #[error("{0} has no address")]
    NoAddress(String),
    /// The last address tried refused or timed out.
    #[error("{addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

fn try_connect(
    host: &str,
    port: u16,
    deadline: Instant,
) -> std::result::Result<TcpStream, ConnectError> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|source| ConnectError::Resolve {
            host: host.to_string(),
            source,
        })?;
    let mut last = ConnectError::NoAddress(host.to_string());
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = left.clamp(Duration::from_millis(10), Duration::from_secs(2));
        match TcpStream::connect_timeout(&addr, wait) {
            Ok(s) => return Ok(s),
            Err(source) => last = ConnectError::Connect { addr, source },
        }
    }
    Err(last)
}
