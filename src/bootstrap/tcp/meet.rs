//! Meeting at rank 0: rank 0 listens and waits for every other rank's hello, then answers
//! each with its local and group ranks; the others connect with bounded retries.

use super::wire::{self, Decoder, Encoder};
use super::{Peer, TcpBootstrap, abort_all, failure, rank_list, secs};
use crate::bootstrap::launch::TcpLaunch;
use crate::bootstrap::{Group, local};
use crate::error::{Error, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// What a process tells rank 0 when it connects.
pub(super) struct Hello {
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) local_rank: Option<usize>,
    pub(super) color: i64,
    pub(super) hash: u64,
    pub(super) pid: u32,
    pub(super) job: String,
    pub(super) host: String,
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

impl TcpBootstrap {
    /// Rank 0: waits for every other rank, then tells each its local and group ranks.
    pub(super) fn accept_all(&mut self, launch: &TcpLaunch, me: &Hello) -> Result<Vec<Peer>> {
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
    pub(super) fn join(&mut self, launch: &TcpLaunch, me: &Hello) -> Result<TcpStream> {
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
