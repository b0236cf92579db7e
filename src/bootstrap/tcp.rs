//! The launcher bootstrap: rank, size and local rank come from the launcher's environment, and
//! the processes meet over TCP at rank 0 (std::net only, no SSH, no MPI). Rank 0 listens; every
//! other rank connects with bounded retries and says hello; rank 0 answers each with its local
//! and group ranks. Collectives go through rank 0 (star): each rank sends its part, rank 0
//! combines and answers. Every wait is bounded by the bootstrap timeout: a rank that never
//! arrives or leaves makes rank 0 stop everyone with a message naming it.

mod wire;

use super::launch::TcpLaunch;
use super::{Bootstrap, Group, Reduce, local};
use crate::error::{Error, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use wire::{Decoder, Encoder, RecvError};

/// Rank 0's side of a collective: every rank's contribution and colour (in rank order) → every
/// rank's answer.
type Combine<'a> = &'a dyn Fn(&[Vec<u8>], &[i64]) -> Vec<Vec<u8>>;

/// How much longer than rank 0 the others wait for an answer: rank 0 gives up first and says why.
const GRACE: Duration = Duration::from_secs(10);

/// Processes that met over TCP (or a launcher's single process, which needs no network).
pub struct TcpBootstrap {
    launcher: &'static str,
    rank: usize,
    size: usize,
    local_rank: usize,
    local_size: usize,
    group: Group,
    address: String,
    timeout: Duration,
    link: Mutex<Link>,
}

enum Link {
    Alone,
    Root(Vec<Peer>),
    Leaf(TcpStream),
    Broken(String),
}

/// A process as rank 0 knows it.
struct Peer {
    rank: usize,
    host: String,
    pid: u32,
    color: i64,
    stream: TcpStream,
}

/// What a process tells rank 0 when it connects.
struct Hello {
    rank: usize,
    size: usize,
    local_rank: Option<usize>,
    color: i64,
    hash: u64,
    pid: u32,
    job: String,
    host: String,
}

impl Hello {
    fn encode(&self) -> Vec<u8> {
        Encoder::default()
            .u32(wire::MAGIC)
            .u64(self.rank as u64)
            .u64(self.size as u64)
            .i64(self.local_rank.map_or(-1, |l| l as i64))
            .i64(self.color)
            .u64(self.hash)
            .u32(self.pid)
            .str(&self.job)
            .str(&self.host)
            .0
    }

    fn decode(body: &[u8]) -> std::result::Result<Hello, String> {
        let mut d = Decoder(body);
        if d.u32()? != wire::MAGIC {
            return Err("not an nccl-perf process of this version".into());
        }
        Ok(Hello {
            rank: d.u64()? as usize,
            size: d.u64()? as usize,
            local_rank: usize::try_from(d.i64()?).ok(),
            color: d.i64()?,
            hash: d.u64()?,
            pid: d.u32()?,
            job: d.str()?,
            host: d.str()?,
        })
    }
}

fn failure(msg: String, timed_out: bool) -> Error {
    Error::Bootstrap { msg, timed_out }
}

impl TcpBootstrap {
    /// Meets the other processes of `launch`; `color` is this process' split colour.
    pub fn connect(launch: &TcpLaunch, color: i64) -> Result<TcpBootstrap> {
        let me = Hello {
            rank: launch.rank,
            size: launch.size,
            local_rank: launch.local_rank,
            color,
            hash: local::this_host_hash(),
            pid: std::process::id(),
            job: launch.job.clone(),
            host: crate::host::short_hostname(),
        };
        let mut b = TcpBootstrap {
            launcher: launch.launcher,
            rank: launch.rank,
            size: launch.size,
            local_rank: launch.local_rank.unwrap_or(0),
            local_size: 1,
            group: Group {
                color,
                rank: 0,
                size: 1,
            },
            address: format_address(&launch.host, launch.port),
            timeout: launch.timeout,
            link: Mutex::new(Link::Alone),
        };
        if launch.size <= 1 {
            return Ok(b);
        }
        let link = if launch.rank == 0 {
            let peers = b.accept_all(launch, &me)?;
            Link::Root(peers)
        } else {
            Link::Leaf(b.join(launch, &me)?)
        };
        b.link = Mutex::new(link);
        Ok(b)
    }

    /// Rank 0: waits for every other rank, then tells each its local and group ranks.
    fn accept_all(&mut self, launch: &TcpLaunch, me: &Hello) -> Result<Vec<Peer>> {
        let listener = listen(&launch.host, launch.port)?;
        let deadline = Instant::now() + self.timeout;
        let mut slots: Vec<Option<(Hello, TcpStream)>> = (1..self.size).map(|_| None).collect();
        let mut arrived = 0;
        while arrived < slots.len() {
            let (mut stream, from) = match listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<usize> =
                            (1..self.size).filter(|r| slots[r - 1].is_none()).collect();
                        let msg = format!(
                            "timed out after {}: {} of {} processes never connected to \
                             rank 0 at {} ({} launch); missing: {}",
                            secs(self.timeout),
                            missing.len(),
                            self.size,
                            self.address,
                            self.launcher,
                            rank_list(&missing, launch.expected_hosts.as_deref())
                        );
                        let mut peers: Vec<TcpStream> =
                            slots.into_iter().flatten().map(|(_, s)| s).collect();
                        abort_all(peers.iter_mut(), &msg, true);
                        return Err(failure(msg, true));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                Err(e) => return Err(failure(format!("rank 0: accept failed: {e}"), false)),
            };
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_nodelay(true);
            let hello = match wire::recv(&mut stream, Instant::now() + Duration::from_secs(5)) {
                Ok((wire::HELLO, body)) => Hello::decode(&body),
                Ok((tag, _)) => Err(format!("sent a {} first", wire::tag_name(tag))),
                Err(e) => Err(format!("no hello ({e:?})")),
            };
            let hello = match hello {
                Ok(h)
                    if h.job != me.job || h.size != me.size || h.rank == 0 || h.rank >= h.size =>
                {
                    Err(format!(
                        "rank {} of {} of job '{}' (this is job '{}' of {})",
                        h.rank, h.size, h.job, me.job, me.size
                    ))
                }
                other => other,
            };
            match hello {
                Err(why) => {
                    eprintln!("nccl-perf: rank 0 refused a connection from {from}: {why}");
                    abort_all(
                        std::iter::once(&mut stream),
                        &format!("refused: {why}"),
                        false,
                    );
                }
                Ok(h) => {
                    if let Some((old, _)) = &slots[h.rank - 1] {
                        let msg = format!(
                            "two processes claim rank {}: pid {} on {} and pid {} on {}",
                            h.rank, old.pid, old.host, h.pid, h.host
                        );
                        let mut peers: Vec<TcpStream> =
                            slots.into_iter().flatten().map(|(_, s)| s).collect();
                        peers.push(stream);
                        abort_all(peers.iter_mut(), &msg, false);
                        return Err(Error::Launch(msg));
                    }
                    let r = h.rank;
                    slots[r - 1] = Some((h, stream));
                    arrived += 1;
                }
            }
        }
        let all: Vec<(Hello, TcpStream)> = slots.into_iter().flatten().collect();
        let hashes: Vec<u64> = std::iter::once(me.hash)
            .chain(all.iter().map(|(h, _)| h.hash))
            .collect();
        let colors: Vec<i64> = std::iter::once(me.color)
            .chain(all.iter().map(|(h, _)| h.color))
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
        for (i, (h, mut stream)) in all.into_iter().enumerate() {
            let r = i + 1;
            let body = Encoder::default()
                .u64(h.local_rank.unwrap_or(local_ranks[r]) as u64)
                .u64(local_sizes[r] as u64)
                .u64(groups[r].0 as u64)
                .u64(groups[r].1 as u64)
                .0;
            if let Err(e) = wire::send(&mut stream, wire::WELCOME, &body, self.timeout) {
                let msg = format!("rank {r} ({}) left during the bootstrap: {e}", h.host);
                abort_all(
                    peers.iter_mut().map(|p: &mut Peer| &mut p.stream),
                    &msg,
                    false,
                );
                return Err(failure(msg, false));
            }
            peers.push(Peer {
                rank: r,
                host: h.host,
                pid: h.pid,
                color: h.color,
                stream,
            });
        }
        Ok(peers)
    }

    /// Any rank but 0: connects to rank 0 (retrying until the timeout), says hello, waits for the
    /// welcome.
    fn join(&mut self, launch: &TcpLaunch, me: &Hello) -> Result<TcpStream> {
        let deadline = Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(50);
        let mut stream = loop {
            let last = match try_connect(&launch.host, launch.port, deadline) {
                Ok(s) => break s,
                Err(e) => e,
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
        };
        let _ = stream.set_nodelay(true);
        wire::send(&mut stream, wire::HELLO, &me.encode(), self.timeout).map_err(|e| {
            failure(
                format!(
                    "rank {}: could not greet rank 0 at {}: {e}",
                    self.rank, self.address
                ),
                false,
            )
        })?;
        let body = self.answer(&mut stream, "bootstrap")?;
        let mut d = Decoder(&body);
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
        Ok(stream)
    }

    /// Reads rank 0's answer (welcome or reply), turning an abort into an error.
    fn answer(&self, stream: &mut TcpStream, what: &str) -> Result<Vec<u8>> {
        match wire::recv(stream, Instant::now() + self.timeout + GRACE) {
            Ok((wire::ABORT, body)) => {
                let mut d = Decoder(&body);
                let timed_out = d.u32().unwrap_or(0) != 0;
                let why = d.str().unwrap_or_default();
                Err(failure(format!("rank 0 stopped the run: {why}"), timed_out))
            }
            Ok((_, body)) => Ok(body),
            Err(RecvError::Closed) => Err(failure(
                format!(
                    "lost the connection to rank 0 at {} during the {what}: rank 0 ended or failed",
                    self.address
                ),
                false,
            )),
            Err(RecvError::TimedOut) => Err(failure(
                format!(
                    "rank 0 at {} did not answer the {what} within {}; missing: rank 0",
                    self.address,
                    secs(self.timeout + GRACE)
                ),
                true,
            )),
            Err(RecvError::Other(e)) => Err(failure(
                format!("rank 0 at {}: {e} during the {what}", self.address),
                false,
            )),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Link>> {
        self.link
            .lock()
            .map_err(|_| Error::Internal("a thread failed inside the bootstrap".into()))
    }

    /// One collective: every rank contributes `body`; rank 0 computes each rank's answer with
    /// `combine` (bodies in rank order → one answer per rank).
    fn collective(&self, tag: u8, body: Vec<u8>, combine: Combine) -> Result<Vec<u8>> {
        let what = wire::tag_name(tag);
        let mut link = self.lock()?;
        let outcome = match &mut *link {
            Link::Alone => Ok(combine(&[body], &[self.group.color]).swap_remove(0)),
            Link::Broken(why) => Err(failure(
                format!("the bootstrap already failed: {why}"),
                false,
            )),
            Link::Leaf(stream) => match wire::send(stream, tag, &body, self.timeout) {
                Ok(()) => self.answer(stream, what),
                Err(e) => Err(failure(
                    format!(
                        "lost the connection to rank 0 at {} during the {what}: {e}",
                        self.address
                    ),
                    false,
                )),
            },
            Link::Root(peers) => self.root_round(peers, tag, body, combine),
        };
        if let Err(e) = &outcome {
            *link = Link::Broken(e.to_string());
        }
        outcome
    }

    fn root_round(
        &self,
        peers: &mut [Peer],
        tag: u8,
        mine: Vec<u8>,
        combine: Combine,
    ) -> Result<Vec<u8>> {
        let what = wire::tag_name(tag);
        let deadline = Instant::now() + self.timeout;
        let mut bodies = vec![mine];
        for i in 0..peers.len() {
            let got = wire::recv(&mut peers[i].stream, deadline);
            let (rank, pid, host) = (peers[i].rank, peers[i].pid, peers[i].host.clone());
            let problem = match got {
                Ok((t, body)) if t == tag => {
                    bodies.push(body);
                    continue;
                }
                Ok((t, _)) => failure(
                    format!(
                        "rank {rank} ({host}) is out of step: it sent a {} while rank 0 is in a {what}",
                        wire::tag_name(t)
                    ),
                    false,
                ),
                Err(RecvError::Closed) => failure(
                    format!(
                        "rank {rank} (pid {pid} on {host}) left the run before the {what}: its \
                         process ended or failed"
                    ),
                    false,
                ),
                Err(RecvError::Other(e)) => failure(
                    format!("rank {rank} ({host}): {e} during the {what}"),
                    false,
                ),
                Err(RecvError::TimedOut) => {
                    // Who else is missing: those that have neither sent nor closed.
                    let mut by_rank = vec![String::new(); self.size];
                    let mut ranks = Vec::new();
                    for q in &peers[i..] {
                        if q.rank == rank || wire::poll(&q.stream) != Some(true) {
                            ranks.push(q.rank);
                            by_rank[q.rank] = q.host.clone();
                        }
                    }
                    failure(
                        format!(
                            "timed out after {} waiting for the {what}; missing: {}",
                            secs(self.timeout),
                            rank_list(&ranks, Some(&by_rank))
                        ),
                        true,
                    )
                }
            };
            let (text, timed_out) = match &problem {
                Error::Bootstrap { msg, timed_out } => (msg.clone(), *timed_out),
                other => (other.to_string(), false),
            };
            abort_all(peers.iter_mut().map(|p| &mut p.stream), &text, timed_out);
            return Err(problem);
        }
        let colors: Vec<i64> = std::iter::once(self.group.color)
            .chain(peers.iter().map(|p| p.color))
            .collect();
        let mut answers = combine(&bodies, &colors).into_iter();
        let own = answers.next().unwrap_or_default();
        for (p, a) in peers.iter_mut().zip(answers) {
            if let Err(e) = wire::send(&mut p.stream, wire::REPLY, &a, self.timeout) {
                let msg = format!("rank {} ({}) left during the {what}: {e}", p.rank, p.host);
                abort_all(peers.iter_mut().map(|p| &mut p.stream), &msg, false);
                return Err(failure(msg, false));
            }
        }
        Ok(own)
    }
}

impl Bootstrap for TcpBootstrap {
    fn world_size(&self) -> usize {
        self.size
    }
    fn world_rank(&self) -> usize {
        self.rank
    }
    fn local_rank(&self) -> usize {
        self.local_rank
    }
    fn local_size(&self) -> usize {
        self.local_size
    }
    fn group(&self) -> Group {
        if self.size <= 1 {
            return Group {
                color: self.group.color,
                rank: 0,
                size: 1,
            };
        }
        self.group
    }
    fn describe(&self) -> String {
        if self.size <= 1 {
            return format!("{} (1 process, no rendezvous needed)", self.launcher);
        }
        format!(
            "{} environment, TCP rendezvous at {} (timeout {})",
            self.launcher,
            self.address,
            secs(self.timeout)
        )
    }
    fn barrier(&self) -> Result<()> {
        self.collective(wire::BARRIER, Vec::new(), &|b, _| vec![Vec::new(); b.len()])
            .map(|_| ())
    }
    fn allreduce(&self, v: f64, op: Reduce) -> Result<f64> {
        let body = Encoder::default().f64(v).0;
        let r = self.collective(wire::REDUCE, body, &|bodies, _| {
            let vals = bodies.iter().map(|b| Decoder(b).f64().unwrap_or(f64::NAN));
            let total = vals.reduce(|a, b| op.apply(a, b)).unwrap_or(f64::NAN);
            vec![Encoder::default().f64(total).0; bodies.len()]
        })?;
        Decoder(&r)
            .f64()
            .map_err(|e| failure(format!("bad allreduce answer: {e}"), false))
    }
    fn broadcast_id(&self, id: &mut [u8; 128]) -> Result<()> {
        let r = self.collective(wire::BCAST, id.to_vec(), &|bodies, colors| {
            // Each group gets the id of its lowest rank.
            colors
                .iter()
                .map(|c| {
                    let leader = colors.iter().position(|x| x == c).unwrap_or(0);
                    bodies[leader].clone()
                })
                .collect()
        })?;
        if r.len() != id.len() {
            return Err(failure("bad id broadcast answer".into(), false));
        }
        id.copy_from_slice(&r);
        Ok(())
    }
    fn gather(&self, text: String) -> Result<Vec<String>> {
        let body = Encoder::default().str(&text).0;
        let gathered = Mutex::new(Vec::new());
        self.collective(wire::GATHER, body, &|bodies, _| {
            if let Ok(mut g) = gathered.lock() {
                *g = bodies
                    .iter()
                    .map(|b| Decoder(b).str().unwrap_or_default())
                    .collect();
            }
            vec![Vec::new(); bodies.len()]
        })?;
        if self.rank != 0 {
            return Ok(Vec::new());
        }
        gathered
            .into_inner()
            .map_err(|_| Error::Internal("gather failed".into()))
    }
}

/// Tells every reachable peer why the run stops (best effort); `timed_out` sets their exit code.
fn abort_all<'a>(peers: impl Iterator<Item = &'a mut TcpStream>, why: &str, timed_out: bool) {
    let body = Encoder::default().u32(u32::from(timed_out)).str(why).0;
    for s in peers {
        let _ = wire::send(s, wire::ABORT, &body, Duration::from_secs(1));
    }
}

/// Rank 0's listening socket: on the rendezvous address itself when it is a loopback address,
/// else on every interface.
fn listen(host: &str, port: u16) -> Result<TcpListener> {
    let resolved: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map(|a| a.collect())
        .unwrap_or_default();
    // Prefer IPv4 (a host without IPv6 cannot bind ::1 even when the name resolves to it).
    let first = resolved.iter().find(|a| a.is_ipv4()).or(resolved.first());
    let addr = match first {
        Some(a) if a.ip().is_loopback() => *a,
        Some(a) if a.is_ipv6() => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        _ => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
    };
    let l = TcpListener::bind(addr).map_err(|e| {
        Error::Launch(format!(
            "rank 0 could not listen on {addr} for the rendezvous: {e}. Pick a free port with \
             NCCL_PERF_RENDEZVOUS_PORT=<port> (or NCCL_PERF_RENDEZVOUS=<host>:<port>) for every process"
        ))
    })?;
    l.set_nonblocking(true)
        .map_err(|e| Error::Internal(format!("rendezvous socket: {e}")))?;
    Ok(l)
}

fn try_connect(host: &str, port: u16, deadline: Instant) -> std::result::Result<TcpStream, String> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut last = format!("{host} has no address");
    for a in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = left.clamp(Duration::from_millis(10), Duration::from_secs(2));
        match TcpStream::connect_timeout(&a, wait) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    Err(last)
}

fn format_address(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// `1, 3-5 (node02), 7 (node04)`: ranks in ranges, with their host where known; long lists cut.
pub fn rank_list(ranks: &[usize], hosts: Option<&[String]>) -> String {
    let host = |r: usize| {
        hosts
            .and_then(|h| h.get(r))
            .filter(|h| !h.is_empty())
            .cloned()
    };
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len()
            && ranks[j + 1] == ranks[j] + 1
            && host(ranks[j + 1]) == host(ranks[i])
        {
            j += 1;
        }
        let span = if i == j {
            format!("rank {}", ranks[i])
        } else {
            format!("ranks {}-{}", ranks[i], ranks[j])
        };
        parts.push(match host(ranks[i]) {
            Some(h) => format!("{span} (on {h})"),
            None => span,
        });
        i = j + 1;
    }
    const SHOWN: usize = 16;
    if parts.len() > SHOWN {
        let more = parts.len() - SHOWN;
        parts.truncate(SHOWN);
        parts.push(format!("and {more} more"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests;
