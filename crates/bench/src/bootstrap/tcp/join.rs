//! Joining at rank 0, as any process but rank 0 does: connect (retrying with backoff until the
//! bootstrap deadline), answer rank 0's challenge with a hello signed over a fresh nonce, and
//! take only what rank 0 signed over that nonce (its welcome, or an abort). A refusal or a
//! closed connection before that makes the process try again, so neither a stranger nor a
//! flood can make a real process give up before its deadline. Rank 0's side is `meet.rs`.

use super::meet::Hello;
use super::wire::{self, Decoder, RecvError};
use super::{TcpBootstrap, failure, secs};
use crate::bootstrap::auth::{self, JobKey};
use crate::bootstrap::launch::TcpLaunch;
use crate::bootstrap::{Group, peer_text};
use crate::error::{Error, Result};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

impl TcpBootstrap {
    /// Any rank but 0: connects to rank 0 (retrying until the timeout), answers its challenge
    /// with a hello signed over a fresh nonce, and waits for a welcome signed over that nonce.
    /// Returns the connection and its session key.
    pub(super) fn join(&mut self, launch: &TcpLaunch, me: &Hello) -> Result<(TcpStream, JobKey)> {
        let deadline = Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(50);
        let mut last;
        // Refusals (unsigned: from rank 0, or from anyone) and the last one's text.
        let mut refused = (0usize, String::new());
        loop {
            let mut hello = me.clone();
            hello.nonce = auth::nonce().map_err(|e| failure(e.to_string(), false))?;
            last = match try_connect(&launch.host, launch.port, deadline) {
                Ok(mut s) => match self.greet(&mut s, &hello, deadline)? {
                    Attempt::Welcomed { body, challenge } => {
                        self.take_welcome(&body, &hello)?;
                        return Ok((s, self.key.session(&challenge, &hello.nonce)));
                    }
                    Attempt::Dropped(why) => why,
                    Attempt::Refused(why) => {
                        refused = (refused.0 + 1, why.clone());
                        why
                    }
                },
                Err(e) => e.to_string(),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if refused.0 > 0 {
                    return Err(Error::Launch(format!(
                        "rank {} ({}) was refused {} time(s) by the process at {} until its \
                         timeout of {} ({} launch); the last answer: {}",
                        self.rank,
                        me.host,
                        refused.0,
                        self.address,
                        secs(self.timeout),
                        self.launcher,
                        refused.1
                    )));
                }
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

    /// One attempt: challenge, hello, answer.
    fn greet(&self, s: &mut TcpStream, me: &Hello, deadline: Instant) -> Result<Attempt> {
        let _ = s.set_nodelay(true);
        let soon = deadline.min(Instant::now() + Duration::from_secs(5));
        let challenge: [u8; auth::LEN] = match wire::recv_limited(s, soon, 4096) {
            Ok((wire::CHALLENGE, n)) if n.len() == auth::LEN => {
                let mut c = [0u8; auth::LEN];
                c.copy_from_slice(&n);
                c
            }
            // Before the hello nothing can be signed for this process: a refusal.
            Ok((wire::ABORT, body)) => return Ok(Attempt::Refused(unsigned(&body))),
            Ok(_) => {
                return Err(Error::Launch(format!(
                    "the process listening at {} is not an nccl-perf rank 0 of this version",
                    self.address
                )));
            }
            Err(RecvError::Closed | RecvError::TimedOut) => {
                return Ok(Attempt::Dropped(
                    "rank 0 closed the connection before its challenge (busy, or not yet ready)"
                        .into(),
                ));
            }
            Err(RecvError::Other(e)) => {
                return Err(Error::Launch(format!(
                    "the process listening at {} is not an nccl-perf rank 0 of this version ({e})",
                    self.address
                )));
            }
        };
        let body = me.encode();
        let mut frame = body.clone();
        frame.extend_from_slice(&self.key.sign(&[b"hello", &challenge, &body]));
        if wire::send(s, wire::HELLO, &frame, self.timeout).is_err() {
            return Ok(Attempt::Dropped(
                "rank 0 closed the connection during the hello".into(),
            ));
        }
        match wire::recv_limited(s, deadline + super::GRACE, 4096) {
            Ok((wire::WELCOME, body)) => Ok(Attempt::Welcomed { body, challenge }),
            Ok((wire::ABORT, body)) => {
                // Signed over this process' nonce: rank 0 stops the launch. Otherwise anyone
                // may have sent it: a refusal, and this process tries again.
                let fields = body.len().saturating_sub(auth::LEN);
                let (fields, mac) = body.split_at(fields);
                if self.key.verify(&[b"abort", &me.nonce, fields], mac) {
                    Err(self.aborted(fields))
                } else {
                    Ok(Attempt::Refused(unsigned(&body)))
                }
            }
            Ok((t, _)) => Err(failure(
                format!("rank 0 sent a {} instead of a welcome", wire::tag_name(t)),
                false,
            )),
            Err(RecvError::Closed) => Ok(Attempt::Dropped(
                "rank 0 closed the connection before the welcome".into(),
            )),
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

/// How one attempt to meet rank 0 ended, short of an error.
enum Attempt {
    /// Rank 0's welcome (not checked yet) and the challenge it had sent.
    Welcomed {
        body: Vec<u8>,
        challenge: [u8; auth::LEN],
    },
    /// The connection closed before an answer: try again.
    Dropped(String),
    /// An unsigned refusal (its text, cleaned): try again until the deadline.
    Refused(String),
}

/// The text of an unsigned abort: anyone could have sent it, so it is cleaned and cut.
fn unsigned(body: &[u8]) -> String {
    let mut d = Decoder(body);
    let _kind = d.u32();
    let text = d.str().unwrap_or_default();
    peer_text::clean(&text, 300)
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
