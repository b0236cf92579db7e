//! Joining at rank 0, as any process but rank 0 does: connect to each address rank 0's name
//! resolves to in turn (retrying with backoff until the bootstrap deadline), check rank 0's
//! challenge against the job key (stretched under the launch's salt the challenge carries),
//! answer it with a hello signed over it, and take only what rank 0 signed over the process'
//! own nonce (its welcome, or an abort). Anything else, whatever a keyless stranger can send (a
//! challenge it cannot sign, another frame, a length no frame has, a refusal, a closed
//! connection), sends the process to the next address and then round again until its
//! deadline, so no squatter, stranger or flood can make a real process give up early or settle
//! on anyone but rank 0. Rank 0's side is `meet.rs`.

use super::challenge::{self, Challenge, Keys};
use super::meet::Hello;
use super::wire::{self, Decoder, RecvError};
use super::{TcpBootstrap, failure, secs};
use crate::auth::{self, JobKey};
use crate::error::{Error, Result};
use crate::launch::TcpLaunch;
use crate::{Group, peer_text};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The addresses of a host name and port, in the resolver's order, each once.
pub(super) type Resolve<'a> = &'a dyn Fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>;

/// The system resolver's addresses for `host`, each once.
pub(crate) fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for a in (host, port).to_socket_addrs()? {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    Ok(out)
}

impl TcpBootstrap {
    /// Any rank but 0: meets rank 0 at one of the addresses `resolve` gives for its host
    /// (retrying until the timeout) and waits for a welcome signed over its own nonce. Returns
    /// the connection and its session key.
    pub(super) fn join(
        &mut self,
        launch: &TcpLaunch,
        me: &Hello,
        resolve: Resolve,
    ) -> Result<(TcpStream, JobKey)> {
        let deadline = Instant::now() + self.timeout;
        let (job, secret) = (self.job.clone(), self.secret.clone());
        let mut keys = Keys::new(&job, &secret);
        let mut pause = Duration::from_millis(50);
        let mut last = String::new();
        // Refusals (answers that are not rank 0's: unsigned, from rank 0 or from anyone) and
        // the last one's text.
        let mut refused = (0usize, String::new());
        loop {
            let addrs = match resolve(&launch.host, launch.port) {
                Ok(a) if a.is_empty() => {
                    last = format!("{} has no address", launch.host);
                    Vec::new()
                }
                Ok(a) => a,
                Err(e) => {
                    last = format!("cannot resolve {}: {e}", launch.host);
                    Vec::new()
                }
            };
            for addr in addrs {
                if Instant::now() >= deadline {
                    break;
                }
                let mut hello = me.clone();
                hello.nonce = auth::nonce().map_err(|e| failure(e.to_string(), false))?;
                let mut s = match connect(addr, deadline) {
                    Ok(s) => s,
                    Err(e) => {
                        last = format!("{addr}: {e}");
                        continue;
                    }
                };
                match self.greet(&mut s, addr, &hello, &mut keys, deadline)? {
                    Attempt::Welcomed {
                        fields,
                        challenge,
                        key,
                    } => {
                        self.take_welcome(&fields, &hello)?;
                        let session = key.session(&challenge, &hello.nonce);
                        self.salt = Challenge::parse(&challenge).map_or(self.salt, |c| c.salt);
                        self.key = key;
                        return Ok((s, session));
                    }
                    Attempt::Dropped(why) => last = why,
                    Attempt::Refused(why) => {
                        refused = (refused.0 + 1, why.clone());
                        last = why;
                    }
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if refused.0 > 0 {
                    return Err(Error::Launch(format!(
                        "rank {} ({}) was refused {} time(s) at {} until its timeout of {} \
                         ({} launch): no rank 0 of this job answered; the last answer: {}",
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

    /// One attempt at `addr`: a challenge signed with the job key, the hello, the welcome.
    fn greet(
        &self,
        s: &mut TcpStream,
        addr: SocketAddr,
        me: &Hello,
        keys: &mut Keys,
        deadline: Instant,
    ) -> Result<Attempt> {
        let _ = s.set_nodelay(true);
        let soon = deadline.min(Instant::now() + Duration::from_secs(5));
        let not_ours = |what: String| {
            Attempt::Refused(format!(
                "the process at {addr} is not an nccl-perf rank 0 of this version: {what}"
            ))
        };
        let got = match wire::recv_limited(s, soon, challenge::BYTES) {
            Ok((wire::CHALLENGE, body)) => match Challenge::parse(&body) {
                Some(c) => Ok((c, body)),
                None => Err(not_ours(format!(
                    "it sent a challenge of {} bytes",
                    body.len()
                ))),
            },
            // Before the hello nothing can be signed for this process: a refusal.
            Ok((wire::ABORT, body)) => Err(Attempt::Refused(format!(
                "the process at {addr} refused the connection: {}",
                unsigned(&body)
            ))),
            Ok((t, _)) => Err(not_ours(format!("it sent a {} first", wire::tag_name(t)))),
            Err(RecvError::Closed | RecvError::TimedOut | RecvError::Unfinished(_)) => {
                Err(Attempt::Dropped(format!(
                    "the process at {addr} closed the connection before its challenge (busy, \
                     or not yet ready)"
                )))
            }
            Err(e @ RecvError::Malformed(_)) => Err(not_ours(e.to_string())),
            Err(RecvError::Other(e)) => Err(Attempt::Dropped(format!("{addr}: {e}"))),
        };
        let (challenge, sent) = match got {
            Ok(c) => c,
            Err(attempt) => return Ok(attempt),
        };
        let key = keys.under(&challenge.salt);
        let body = me.encode();
        let mut frame = body.clone();
        let genuine = challenge.verify(&key);
        if genuine {
            frame.extend_from_slice(&key.sign(&[b"hello", &sent, &body]));
        } else {
            // Not signed with this job's key: nothing signed goes to it (a stranger could test
            // guesses against a signed hello, under a salt it chose). The hello goes unsigned,
            // so that a real rank 0 of another key can still name this process.
            frame.extend_from_slice(&[0u8; auth::LEN]);
        }
        let sent_hello = wire::send(s, wire::HELLO, &frame, self.timeout).is_ok();
        if !genuine {
            return Ok(Attempt::Refused(format!(
                "the process at {addr} does not hold this job's key: another job's rank 0 on \
                 this port, a different NCCL_PERF_RENDEZVOUS_KEY, or a process posing as rank 0"
            )));
        }
        if !sent_hello {
            return Ok(Attempt::Dropped(format!(
                "the process at {addr} closed the connection during the hello"
            )));
        }
        match wire::recv_limited(s, deadline + super::GRACE, 4096) {
            Ok((wire::WELCOME, body)) => {
                let unsigned_len = body.len().saturating_sub(auth::LEN);
                let (fields, mac) = body.split_at(unsigned_len);
                if key.verify(&[b"welcome", &me.nonce, fields], mac) {
                    Ok(Attempt::Welcomed {
                        fields: fields.to_vec(),
                        challenge: sent,
                        key,
                    })
                } else {
                    Ok(Attempt::Refused(format!(
                        "the process at {addr} sent a welcome not signed with this job's key"
                    )))
                }
            }
            Ok((wire::ABORT, body)) => {
                // Signed over this process' nonce: rank 0 stops the launch. Otherwise anyone
                // may have sent it: a refusal, and this process tries again.
                let fields = body.len().saturating_sub(auth::LEN);
                let (fields, mac) = body.split_at(fields);
                if key.verify(&[b"abort", &me.nonce, fields], mac) {
                    Err(self.aborted(fields))
                } else {
                    Ok(Attempt::Refused(format!(
                        "the process at {addr} refused the hello: {}",
                        unsigned(&body)
                    )))
                }
            }
            Ok((t, _)) => Ok(not_ours(format!(
                "it sent a {} instead of a welcome",
                wire::tag_name(t)
            ))),
            Err(e @ RecvError::Malformed(_)) => Ok(not_ours(e.to_string())),
            Err(RecvError::Closed) => Ok(Attempt::Dropped(format!(
                "the process at {addr} closed the connection before the welcome"
            ))),
            Err(e) => Err(failure(
                format!("rank 0 at {addr} did not welcome this process: {e}"),
                matches!(e, RecvError::TimedOut | RecvError::Unfinished(_)),
            )),
        }
    }

    fn take_welcome(&mut self, fields: &[u8], me: &Hello) -> Result<()> {
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
    /// Rank 0's welcome (its signature checked), the challenge it had sent and the key.
    Welcomed {
        fields: Vec<u8>,
        challenge: Vec<u8>,
        key: JobKey,
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

/// A connection to `addr`, waiting at most 2 s (and not past `deadline` by much).
fn connect(addr: SocketAddr, deadline: Instant) -> std::io::Result<TcpStream> {
    let left = deadline.saturating_duration_since(Instant::now());
    let wait = left.clamp(Duration::from_millis(10), Duration::from_secs(2));
    TcpStream::connect_timeout(&addr, wait)
}
