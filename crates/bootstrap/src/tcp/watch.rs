//! Checking on the other processes between collectives, as the run's watchdog does about
//! every 100 ms while this process may be busy on its GPUs: rank 0 looks at every process,
//! the others at rank 0. A closed connection is a process that left; silence (no message, no
//! heartbeat) for the heartbeat timeout is one that is stopped or frozen. Rank 0 tells the
//! others which, and the run stops.

use super::wire::{self, RecvError};
use super::{Leaf, Peer, TcpBootstrap, abort_peers, beat, failure, lost, secs};
use crate::error::Result;

impl TcpBootstrap {
    /// A leaf between collectives: rank 0 sends nothing then but heartbeats, unless it stops
    /// the run, so another message is its abort; a closed connection means rank 0 is gone, and
    /// silence that it is stopped or frozen.
    pub(super) fn leaf_check(&self, leaf: &mut Leaf) -> Result<()> {
        match beat::drain(&mut leaf.stream, &mut leaf.heard) {
            Ok(None) => match beat::silent(leaf.heard, self.silence) {
                None => Ok(()),
                Some(d) => Err(failure(
                    format!(
                        "rank 0 at {} has sent nothing for {}, not even a heartbeat: {STOPPED}",
                        self.address,
                        secs(d)
                    ),
                    true,
                )),
            },
            Ok(Some((wire::ABORT, body))) => Err(self.aborted(&body)),
            Ok(Some(_)) => Err(failure("rank 0 sent a message out of step".into(), false)),
            Err(RecvError::Closed) => Err(failure(
                format!(
                    "lost the connection to rank 0 at {}: rank 0 ended or was killed",
                    self.address
                ),
                false,
            )),
            Err(RecvError::TimedOut | RecvError::Unfinished(_)) => Err(failure(
                format!(
                    "rank 0 at {} began a message and did not finish it within {}: {UNFINISHED}",
                    self.address,
                    secs(beat::DRAIN_LIMIT)
                ),
                true,
            )),
            Err(e) => Err(failure(
                format!("the connection to rank 0 at {}: {e}", self.address),
                false,
            )),
        }
    }

    /// Rank 0 between collectives: a peer whose connection closed has left, one silent for too
    /// long is stopped; the others are told (naming it) and the run stops. A message waiting
    /// is a peer already in the next collective: it is kept for it.
    pub(super) fn root_check(&self, peers: &mut [Peer]) -> Result<()> {
        for i in 0..peers.len() {
            let p = &mut peers[i];
            if p.pending.is_some() {
                continue;
            }
            let (msg, timed_out) = match beat::drain(&mut p.stream, &mut p.heard) {
                Ok(Some(m)) => {
                    p.pending = Some(m);
                    continue;
                }
                Ok(None) => match beat::silent(p.heard, self.silence) {
                    None => continue,
                    Some(d) => (
                        format!(
                            "rank {} (pid {} on {}) has sent nothing for {}, not even a \
                             heartbeat: {STOPPED}",
                            p.rank,
                            p.pid,
                            p.host,
                            secs(d)
                        ),
                        true,
                    ),
                },
                Err(RecvError::Closed) => (
                    format!(
                        "rank {} (pid {} on {}) left the run: its process failed (see its own \
                         error output) or was killed",
                        p.rank, p.pid, p.host
                    ),
                    false,
                ),
                Err(RecvError::TimedOut | RecvError::Unfinished(_)) => (
                    format!(
                        "rank {} (pid {} on {}) began a message and did not finish it within \
                         {}: {UNFINISHED}",
                        p.rank,
                        p.pid,
                        p.host,
                        secs(beat::DRAIN_LIMIT)
                    ),
                    true,
                ),
                Err(e) => (format!("rank {} ({}): {e}", p.rank, p.host), false),
            };
            let rank = p.rank;
            abort_peers(peers, Some(i), &msg, timed_out);
            return Err(lost(msg, timed_out, vec![rank]));
        }
        Ok(())
    }
}

impl Peer {
    /// Whether it has sent a message for the next collective (read now if it waits).
    pub(super) fn has_sent(&mut self) -> bool {
        if self.pending.is_none()
            && let Ok(Some(m)) = beat::drain(&mut self.stream, &mut self.heard)
        {
            self.pending = Some(m);
        }
        self.pending.is_some()
    }
}

/// What a silent process may be going through, for the messages that name it.
pub(super) const STOPPED: &str = "its process is stopped (SIGSTOP, a debugger) or frozen, or its host is \
                       unreachable";

/// What a message begun and never finished means, for the messages that name its sender.
const UNFINISHED: &str = "its connection stalled, or something on the way (a relay) holds it up";
