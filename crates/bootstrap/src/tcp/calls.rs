//! `Bootstrap` for processes that met over TCP: the calls the run makes (who is who, barrier,
//! allreduce, the NCCL id broadcast, gathers, peer checks, the hang watch's states, ending a
//! hung or failed run), each collective through rank 0's star (`collective` in `tcp.rs`).

use super::wire::{self, Decoder, Encoder};
use super::words::secs;
use super::{Link, TcpBootstrap, abort_peers, failure};
use crate::error::{Error, Failure, Result};
use crate::{Bootstrap, Group, PeerState, Reduce};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
        // A job formed through the launcher's wire-up (engine/) says so.
        let how = match self.launcher {
            "PMIx" | "PMI-1" => "wire-up",
            l if l.starts_with("MPI library") || l.starts_with("PMI-2 library") => "to start",
            _ => "environment",
        };
        format!(
            "{} {how}, TCP rendezvous at {} (timeout {})",
            self.launcher,
            self.address,
            secs(self.timeout)
        )
    }
    fn barrier(&self) -> Result<()> {
        self.collective(wire::BARRIER, Vec::new(), &|b, _| {
            vec![Rc::from([]); b.len()]
        })
        .map(|_| ())
    }
    fn allreduce(&self, v: f64, op: Reduce) -> Result<f64> {
        let body = Encoder::default().f64(v).0;
        let r = self.collective(wire::REDUCE, body, &|bodies, _| {
            let vals = bodies.iter().map(|b| Decoder(b).f64().unwrap_or(f64::NAN));
            let total = vals.reduce(|a, b| op.apply(a, b)).unwrap_or(f64::NAN);
            vec![Rc::from(Encoder::default().f64(total).0); bodies.len()]
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
                    Rc::from(bodies.get(leader).map_or(&[][..], |b| &b[..]))
                })
                .collect()
        })?;
        if r.len() != id.len() {
            return Err(failure("bad id broadcast answer".into(), false));
        }
        id.copy_from_slice(&r);
        Ok(())
    }
    fn finalize(&self) -> Result<()> {
        self.barrier()
    }
    fn wait_limit(&self) -> Option<Duration> {
        (self.size > 1).then_some(self.timeout)
    }
    fn check_peers(&self) -> Result<()> {
        // A collective in progress has its own deadlines and notices a lost peer itself.
        let Ok(mut link) = self.link.try_lock() else {
            return Ok(());
        };
        let outcome = match &mut *link {
            Link::Alone | Link::Broken(_) => Ok(()),
            Link::Root(peers) => self.root_check(peers),
            Link::Leaf(leaf) => self.leaf_check(leaf),
        };
        if let Err(e) = &outcome {
            self.broke(&mut link, e);
        }
        outcome
    }
    fn lost_peer(&self, wait: Duration) -> Option<Error> {
        if self.size <= 1 {
            return None;
        }
        let until = Instant::now() + wait;
        loop {
            if let Some(e) = self.lost.lock().ok()?.clone() {
                return Some(e);
            }
            if let Err(e) = self.check_peers() {
                return Some(e);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fn publish_state(&self, note: &[u8]) {
        if note.len() <= wire::MAX_NOTE
            && let Ok(mut n) = self.note.lock()
        {
            n.clear();
            n.extend_from_slice(note);
        }
    }
    fn peer_states(&self) -> Option<Vec<PeerState>> {
        let Ok(mut link) = self.link.try_lock() else {
            return None;
        };
        let Link::Root(peers) = &mut *link else {
            return None;
        };
        Some(
            peers
                .iter_mut()
                .map(|p| {
                    // Reads what has arrived (a message for the next collective is kept).
                    p.has_sent();
                    PeerState {
                        rank: p.rank,
                        host: p.host.clone(),
                        pid: p.pid,
                        note: p
                            .stream
                            .note
                            .as_ref()
                            .map(|(n, at)| (n.clone(), at.elapsed())),
                    }
                })
                .collect(),
        )
    }
    fn root_state(&self) -> Option<Vec<u8>> {
        // The watchdog's checks read rank 0's heartbeats (and keep their note) every 100 ms.
        let link = self.link.try_lock().ok()?;
        let Link::Leaf(leaf) = &*link else {
            return None;
        };
        leaf.stream.note.as_ref().map(|(n, _)| n.clone())
    }
    fn end_hung(&self, why: &str) {
        let Ok(mut link) = self.link.lock() else {
            return;
        };
        if let Link::Root(peers) = &*link {
            let why = why.replace('\n', " ");
            abort_peers(peers, None, &why, true);
            *link = Link::Broken(why);
        }
    }
    fn fail(&self, err: &dyn Failure) {
        // Rank 0 tells the others why the run stops, instead of letting them find a closed
        // connection (or wait on their GPUs). A leaf's exit is noticed by rank 0.
        let Ok(mut link) = self.link.lock() else {
            return;
        };
        if let Link::Root(peers) = &*link {
            let why = err.to_string().replace('\n', " ");
            abort_peers(peers, None, &why, false);
            *link = Link::Broken(why);
        }
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
            vec![Rc::from([]); bodies.len()]
        })?;
        if self.rank != 0 {
            return Ok(Vec::new());
        }
        gathered
            .into_inner()
            .map_err(|_| Error::Internal("gather failed".into()))
    }
    fn share_ids(&self, mine: &[crate::ids::NumberedId], count: usize) -> Result<Vec<[u8; 128]>> {
        let body = crate::ids::encode(count, mine);
        let answer = self.collective(wire::IDS, body, &|bodies, colors| {
            let bodies: Vec<&[u8]> = bodies.iter().map(|b| &b[..]).collect();
            crate::ids::route(&bodies, colors)
                .into_iter()
                .map(Rc::from)
                .collect()
        })?;
        crate::ids::finish(&answer, count)
            .map_err(|e| failure(format!("bad NCCL id answer: {e}"), false))
    }
    fn allgather(&self, text: String) -> Result<Vec<String>> {
        let body = Encoder::default().str(&text).0;
        let all = self.collective(wire::ALLGATHER, body, &|bodies, _| {
            // Rank 0 passes the bodies on as they came: each is a length-prefixed text.
            let mut e = Encoder::default().u32(bodies.len() as u32);
            for b in bodies {
                e.0.extend_from_slice(b);
            }
            vec![Rc::from(e.0); bodies.len()]
        })?;
        let bad = |e: wire::WireError| failure(format!("bad allgather answer: {e}"), false);
        let mut d = Decoder(&all);
        let n = d.u32().map_err(bad)? as usize;
        if n != self.size {
            return Err(failure(
                format!(
                    "bad allgather answer: {n} texts for {} processes",
                    self.size
                ),
                false,
            ));
        }
        (0..n).map(|_| d.str().map_err(bad)).collect()
    }
}
