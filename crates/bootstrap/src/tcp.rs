//! The launcher bootstrap: rank, size and local rank come from the launcher's environment, and
//! the processes meet over TCP at rank 0 (std::net only, no SSH, no MPI). Rank 0 listens; every
//! other rank connects with bounded retries and says hello; rank 0 answers each with its local
//! and group ranks. Collectives go through rank 0 (star): each rank sends its part, rank 0
//! combines and answers. Every wait is bounded by the bootstrap timeout: a rank that never
//! arrives or leaves makes rank 0 stop everyone with a message naming it. Only processes that
//! prove the job key (`auth.rs`) take a rank. Once met, every connection carries heartbeats
//! (`beat.rs`), so a process that is stopped or frozen is named too, not only one that left.
//! Every read ends by its deadline, whatever a peer or a relay sends (`wire.rs`).
//! Meeting is in `meet.rs` (rank 0's side) and `join.rs` (everyone else's), rank 0's door
//! (many connections at once, bounded, on every address of its name) in `door.rs`, rank 0's
//! signed challenge with the launch's salt in `challenge.rs`, the wire format in `wire.rs`, and
//! the authentication of every frame after the meeting in `seal.rs`; the words it prints
//! (addresses, durations, rank lists, the open-door note) in `words.rs`. This file connects
//! and runs each collective through rank 0 (the star); the `Bootstrap` calls the run makes on
//! it are in `calls.rs`, and the checks on the others between collectives (the watchdog's) in
//! `watch.rs`. Its tests: `tests.rs` (meeting, collectives, failures, and the helpers the others
//! share), `silence_tests.rs` (stopped and departed processes), `relay_tests.rs` (frames changed
//! on the way) and `squat_tests.rs` (relays, squatters and strangers without the key).

mod beat;
mod calls;
mod challenge;
mod door;
mod join;
mod meet;
mod seal;
mod watch;
mod wire;
mod words;

use super::auth::JobKey;
use super::fingerprint::Fingerprint;
use super::launch::TcpLaunch;
use super::{Group, local, peer_text};
use crate::error::{Error, Result};
use beat::{Beats, Inbound, Wait, Writer};
pub(crate) use join::resolve as resolve_all;
use meet::Hello;
pub(crate) use meet::listen_any_port;
use std::net::TcpStream;
use std::rc::Rc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use watch::STOPPED;
use wire::{Decoder, RecvError};
pub use words::rank_list;
use words::{format_address, secs, warn_if_open};

/// Rank 0's side of a collective: every rank's contribution and colour (in rank order) → every
/// rank's answer. Answers are shared, not copied: an allgather's one answer for every rank
/// would otherwise take the whole gathered text once per rank in rank 0's memory.
type Combine<'a> = &'a dyn Fn(&[Vec<u8>], &[i64]) -> Vec<Rc<[u8]>>;

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
    /// How long a peer may stay silent before it is named as stopped (`None`: heartbeats off).
    silence: Option<Duration>,
    /// The job key every challenge, hello and welcome is signed with: rank 0's from the
    /// start (under the salt it draws), another process' once rank 0's challenge has given it
    /// the launch's salt (until then, the key without the secret, which proves nothing).
    key: JobKey,
    /// The launch's salt (rank 0: drawn at random; the others: from rank 0's challenge).
    salt: [u8; super::auth::LEN],
    /// What the key is derived from.
    job: String,
    secret: super::auth::Secret,
    /// The key proves the job (a secret or a launcher job id): a misfit that holds it is a
    /// wrong launch, not a stranger.
    strong: bool,
    /// The heartbeat thread, once the processes have met (stopped before the link closes).
    beats: Option<Beats>,
    /// The state note the heartbeats carry ([`Bootstrap::publish_state`]).
    note: beat::Note,
    link: Mutex<Link>,
    /// The first failure of the link that names a lost or silent process, kept for
    /// [`Bootstrap::lost_peer`].
    lost: Mutex<Option<Error>>,
}

enum Link {
    Alone,
    Root(Vec<Peer>),
    Leaf(Leaf),
    Broken(String),
}

/// A process as rank 0 knows it.
struct Peer {
    rank: usize,
    host: String,
    pid: u32,
    color: i64,
    /// The connection, read under the link's lock.
    stream: Inbound,
    /// The same connection for writing (shared with the heartbeat thread).
    writer: Writer,
    /// When it was last heard from (any message or heartbeat).
    heard: Instant,
    /// A message it sent for the next collective, read early while checking on it.
    pending: Option<(u8, Vec<u8>)>,
}

/// Rank 0 as any other process knows it.
struct Leaf {
    stream: Inbound,
    writer: Writer,
    heard: Instant,
}

fn failure(msg: String, timed_out: bool) -> Error {
    lost(msg, timed_out, Vec::new())
}

/// A failure naming the processes (world ranks) that left or fell silent.
fn lost(msg: String, timed_out: bool, ranks: Vec<usize>) -> Error {
    Error::Peers {
        msg,
        timed_out,
        lost: ranks,
    }
}

impl TcpBootstrap {
    /// Meets the other processes of `launch`; `color` is this process' split colour and `run`
    /// what it runs (every process must run the same).
    pub fn connect(launch: &TcpLaunch, color: i64, run: &Fingerprint) -> Result<TcpBootstrap> {
        Self::connect_via(launch, color, run, &join::resolve, None)
    }

    /// Meets the other processes of a job formed through a launcher's engine
    /// (`engine::form`): rank 0 on the sockets it already listens on, the others at what its
    /// host name resolves to and then at the interface addresses it published.
    /// `listeners`: rank 0's, already listening; `extra`: rank 0's published addresses.
    pub fn connect_formed(
        launch: &TcpLaunch,
        listeners: Option<Vec<std::net::TcpListener>>,
        extra: Vec<std::net::IpAddr>,
        color: i64,
        run: &Fingerprint,
    ) -> Result<TcpBootstrap> {
        let resolve = move |host: &str, port: u16| -> std::io::Result<Vec<std::net::SocketAddr>> {
            let mut out = join::resolve(host, port).unwrap_or_default();
            for ip in &extra {
                let a = std::net::SocketAddr::new(*ip, port);
                if !out.contains(&a) {
                    out.push(a);
                }
            }
            if out.is_empty() {
                return join::resolve(host, port);
            }
            Ok(out)
        };
        Self::connect_via(launch, color, run, &resolve, listeners)
    }

    /// [`TcpBootstrap::connect`], the others finding rank 0's addresses with `resolve`.
    fn connect_via(
        launch: &TcpLaunch,
        color: i64,
        run: &Fingerprint,
        resolve: join::Resolve,
        listeners: Option<Vec<std::net::TcpListener>>,
    ) -> Result<TcpBootstrap> {
        let me = Hello {
            rank: launch.rank,
            size: launch.size,
            local_rank: launch.local_rank,
            color,
            hash: local::this_host_hash(),
            pid: std::process::id(),
            host: local::short_hostname(),
            run: run.clone(),
            nonce: super::auth::nonce().map_err(|e| failure(e.to_string(), false))?,
        };
        let salt = super::auth::nonce().map_err(|e| failure(e.to_string(), false))?;
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
            // Rank 0 stretches the secret once, under the salt it draws for this launch; the
            // others do when they have it (join.rs).
            key: if launch.rank == 0 && launch.size > 1 {
                JobKey::derive(&launch.job, &launch.secret, &salt)
            } else {
                JobKey::derive(&launch.job, &super::auth::Secret::default(), &salt)
            },
            salt,
            job: launch.job.clone(),
            secret: launch.secret.clone(),
            strong: launch.secret.is_set() || !launch.job.is_empty(),
            silence: launch.silence,
            link: Mutex::new(Link::Alone),
            lost: Mutex::new(None),
            beats: None,
            note: beat::Note::default(),
        };
        if launch.size <= 1 {
            return Ok(b);
        }
        if launch.rank == 0 {
            warn_if_open(launch, &b.address);
        }
        let link = if launch.rank == 0 {
            let peers = b.accept_all(launch, &me, listeners)?;
            Link::Root(peers)
        } else {
            let (stream, session) = b.join(launch, &me, resolve)?;
            let (stream, writer) =
                beat::link(stream, &session, seal::Direction::ToRoot).map_err(|e| {
                    failure(
                        format!("the connection to rank 0 at {}: {e}", b.address),
                        false,
                    )
                })?;
            Link::Leaf(Leaf {
                stream,
                writer,
                heard: Instant::now(),
            })
        };
        if let Some(q) = b.silence {
            let writers = match &link {
                Link::Root(peers) => peers.iter().map(|p| p.writer.clone()).collect(),
                Link::Leaf(l) => vec![l.writer.clone()],
                _ => Vec::new(),
            };
            b.beats = Some(Beats::start(writers, beat::period(q), b.note.clone()));
        }
        b.link = Mutex::new(link);
        Ok(b)
    }

    /// Reads rank 0's answer to a collective, turning an abort into an error.
    fn answer(&self, leaf: &mut Leaf, what: &str) -> Result<Vec<u8>> {
        let deadline = Instant::now() + self.timeout + GRACE;
        match beat::recv_live(&mut leaf.stream, deadline, &mut leaf.heard, self.silence) {
            Ok((wire::ABORT, body)) => Err(self.aborted(&body)),
            Ok((_, body)) => Ok(body),
            Err(Wait::Silent(d)) => Err(failure(
                format!(
                    "rank 0 at {} has sent nothing for {} during the {what}, not even a \
                     heartbeat: {STOPPED}",
                    self.address,
                    secs(d)
                ),
                true,
            )),
            Err(Wait::Failed(RecvError::Closed)) => Err(failure(
                format!(
                    "lost the connection to rank 0 at {} during the {what}: rank 0 ended or failed",
                    self.address
                ),
                false,
            )),
            Err(Wait::Failed(RecvError::TimedOut)) => Err(failure(
                format!(
                    "rank 0 at {} did not answer the {what} within {}; missing: rank 0",
                    self.address,
                    secs(self.timeout + GRACE)
                ),
                true,
            )),
            Err(Wait::Failed(e)) => Err(failure(
                format!("rank 0 at {}: {e} during the {what}", self.address),
                matches!(e, RecvError::Unfinished(_)),
            )),
        }
    }

    /// The error for rank 0's abort message `body` (its text cleaned: rank 0 could be an
    /// impostor until its welcome is checked).
    fn aborted(&self, body: &[u8]) -> Error {
        let mut d = Decoder(body);
        let kind = d.u32().unwrap_or(wire::abort::FAILED);
        let why = peer_text::clean(&d.str().unwrap_or_default(), 2000);
        let msg = format!("rank 0 stopped the run: {why}");
        match kind {
            wire::abort::LAUNCH => Error::Launch(msg),
            k => failure(msg, k == wire::abort::TIMED_OUT),
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
            Link::Alone => Ok(combine(&[body], &[self.group.color])
                .first()
                .map(|a| a.to_vec())
                .unwrap_or_default()),
            Link::Broken(why) => Err(failure(
                format!("the bootstrap already failed: {why}"),
                false,
            )),
            Link::Leaf(leaf) => match beat::send(&leaf.writer, tag, &body, self.timeout) {
                Ok(()) => self.answer(leaf, what),
                // Rank 0 may have said why it stopped before its connection went.
                Err(e) => match beat::drain(&mut leaf.stream, &mut leaf.heard) {
                    Ok(Some((wire::ABORT, why))) => Err(self.aborted(&why)),
                    _ => Err(failure(
                        format!(
                            "lost the connection to rank 0 at {} during the {what}: {e}",
                            self.address
                        ),
                        false,
                    )),
                },
            },
            Link::Root(peers) => self.root_round(peers, tag, body, combine),
        };
        if let Err(e) = &outcome {
            self.broke(&mut link, e);
        }
        outcome
    }

    /// Marks the link broken by `e`, keeping the first such failure for [`Bootstrap::lost_peer`].
    fn broke(&self, link: &mut Link, e: &Error) {
        *link = Link::Broken(e.to_string());
        if let Error::Peers { .. } = e
            && let Ok(mut lost) = self.lost.lock()
        {
            lost.get_or_insert_with(|| e.clone());
        }
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
            let p = &mut peers[i];
            let got = match p.pending.take() {
                Some(m) => Ok(m),
                None => beat::recv_live(&mut p.stream, deadline, &mut p.heard, self.silence),
            };
            let (rank, pid, host) = (p.rank, p.pid, p.host.clone());
            let problem = match got {
                Ok((t, body)) if t == tag => match wire::body_size(t) {
                    Some(n) if n != body.len() => failure(
                        format!(
                            "rank {rank} ({host}) sent {} bytes for the {what}, which takes {n}",
                            body.len()
                        ),
                        false,
                    ),
                    _ => {
                        bodies.push(body);
                        continue;
                    }
                },
                Ok((t, _)) => failure(
                    format!(
                        "rank {rank} ({host}) is out of step: it sent a {} while rank 0 is in a {what}",
                        wire::tag_name(t)
                    ),
                    false,
                ),
                Err(Wait::Failed(RecvError::Closed)) => lost(
                    format!(
                        "rank {rank} (pid {pid} on {host}) left the run before the {what}: its \
                         process ended or failed"
                    ),
                    false,
                    vec![rank],
                ),
                Err(Wait::Failed(
                    e @ (RecvError::Other(_) | RecvError::Malformed(_) | RecvError::Unfinished(_)),
                )) => lost(
                    format!("rank {rank} (pid {pid} on {host}): {e} during the {what}"),
                    matches!(e, RecvError::Unfinished(_)),
                    vec![rank],
                ),
                Err(Wait::Silent(d)) => lost(
                    format!(
                        "rank {rank} (pid {pid} on {host}) has sent nothing for {} during the \
                         {what}, not even a heartbeat: {STOPPED}",
                        secs(d)
                    ),
                    true,
                    vec![rank],
                ),
                Err(Wait::Failed(RecvError::TimedOut)) => {
                    // Who else is missing: those that have sent nothing but heartbeats.
                    let mut by_rank = vec![String::new(); self.size];
                    let mut ranks = Vec::new();
                    for q in peers[i..].iter_mut() {
                        if q.rank == rank || !q.has_sent() {
                            ranks.push(q.rank);
                            by_rank[q.rank] = q.host.clone();
                        }
                    }
                    let text = format!(
                        "timed out after {} waiting for the {what}; missing: {}",
                        secs(self.timeout),
                        rank_list(&ranks, Some(&by_rank))
                    );
                    lost(text, true, ranks)
                }
            };
            let (text, timed_out) = match &problem {
                Error::Peers { msg, timed_out, .. } => (msg.clone(), *timed_out),
                other => (other.to_string(), false),
            };
            abort_peers(peers, None, &text, timed_out);
            return Err(problem);
        }
        // Everyone spoke in this round, however long it took.
        let now = Instant::now();
        for p in peers.iter_mut() {
            p.heard = now;
        }
        let colors: Vec<i64> = std::iter::once(self.group.color)
            .chain(peers.iter().map(|p| p.color))
            .collect();
        let mut answers = combine(&bodies, &colors).into_iter();
        let own = answers.next().map(|a| a.to_vec()).unwrap_or_default();
        for i in 0..peers.len() {
            let (p, a) = (&peers[i], answers.next().unwrap_or_else(|| Rc::from([])));
            if let Err(e) = beat::send(&p.writer, wire::REPLY, &a, self.timeout) {
                let msg = format!("rank {} ({}) left during the {what}: {e}", p.rank, p.host);
                abort_peers(peers, None, &msg, false);
                return Err(lost(msg, false, vec![p.rank]));
            }
        }
        Ok(own)
    }
}

/// Closes a connection in order: the write side first (what was sent, an abort message above
/// all, arrives before the end), then whatever the peer sent is read, so that closing does not
/// reset the connection and destroy a message the peer has not read yet.
/// That reading ends by [`CLOSE_LIMIT`]: a peer (or a relay on the way) that keeps sending, or
/// trickles a frame a byte at a time, cannot hold a process that is done.
fn close(s: &mut Inbound, heard: &mut Instant) {
    let _ = s.stream.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + CLOSE_LIMIT;
    while Instant::now() < until {
        if !matches!(beat::drain_by(s, heard, until), Ok(Some(_))) {
            break;
        }
    }
}

/// How long closing a connection may spend reading what the peer still sends.
const CLOSE_LIMIT: Duration = Duration::from_secs(1);

impl Drop for Peer {
    fn drop(&mut self) {
        close(&mut self.stream, &mut self.heard);
    }
}

impl Drop for Leaf {
    fn drop(&mut self) {
        close(&mut self.stream, &mut self.heard);
    }
}

/// Tells every peer but `skip` why the run stops (best effort; each through its writer, so
/// no heartbeat cuts in); `timed_out` sets their exit code.
fn abort_peers(peers: &[Peer], skip: Option<usize>, why: &str, timed_out: bool) {
    let body = wire::abort_body(failed_kind(timed_out), why);
    for (i, p) in peers.iter().enumerate() {
        if Some(i) != skip {
            let _ = beat::send(&p.writer, wire::ABORT, &body, Duration::from_secs(1));
        }
    }
}

/// The abort kind of a failure: a timeout (exit 4) or not (exit 1).
fn failed_kind(timed_out: bool) -> u32 {
    if timed_out {
        wire::abort::TIMED_OUT
    } else {
        wire::abort::FAILED
    }
}

/// Tells processes that said hello but have no welcome yet why the run stops (best effort):
/// each abort is signed over the process' own nonce, so it knows rank 0 sent it (an unsigned
/// one could come from anyone and only makes it try again). `kind` sets their exit code.
fn abort_unwelcomed<'a>(
    key: &JobKey,
    peers: impl Iterator<Item = (&'a mut TcpStream, &'a [u8; super::auth::LEN])>,
    why: &str,
    kind: u32,
) {
    let body = wire::abort_body(kind, why);
    for (s, nonce) in peers {
        let mut signed = body.clone();
        signed.extend_from_slice(&key.sign(&[b"abort", nonce, &body]));
        let _ = wire::send(s, wire::ABORT, &signed, Duration::from_secs(1));
    }
}

#[cfg(test)]
mod relay_tests;
#[cfg(test)]
mod silence_tests;
#[cfg(test)]
mod squat_tests;
#[cfg(test)]
mod tests;
