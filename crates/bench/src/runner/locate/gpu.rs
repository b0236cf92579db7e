//! This rank's part of each locate round on its GPU: the round's communicator split from a
//! world communicator of our own, the job's collective measured on it (warm-up, then the timed
//! operations), and the deadline kept everywhere.
//!
//! The world communicator is nonblocking (`ncclConfig_t.blocking = 0`), so its splits go on in
//! the background and are polled; the groups' communicators are nonblocking too, so nothing in
//! a round waits inside NCCL for a peer (connecting the ranks at the first operation included).
//! A group without a result by the deadline is aborted (`ncclCommAbort`, which never waits for
//! the other ranks) and reported hung; a split that does not end by the deadline can only be
//! stopped by aborting the world communicator, which every rank then makes anew before the next
//! round. The benchmark's own communicator is not touched: the GPU's buffers and stream are
//! borrowed, its data is not checked (locate times, the table validates).

use super::rounds::{Local, Part};
use super::share::Seen;
use super::window::Basis;
use crate::bootstrap::Bootstrap;
use crate::collective::{Call, Collective, Natives, step};
use crate::error::{Error, Result};
use crate::gpu::nccl::{Nccl, UniqueId};
use crate::gpu::op::BoundOp;
use crate::gpu::{Communicator, Gpu, Progress};
use crate::locate::round::Round;
use crate::options::window_iters;
use crate::runner::Shape;
use crate::runner::interrupt;
use crate::types::{DataType, RedOp};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// How often a wait asks the bootstrap whether a process of the job stopped answering.
const WATCH: Duration = Duration::from_millis(100);

/// How long an aborted group's GPU may take to become idle before it counts as stuck.
const DRAIN: Duration = Duration::from_secs(10);

/// Pause between polls of a split or of a communicator being made (they take milliseconds to
/// seconds; the timed loop's waits spin instead).
const NAP: Duration = Duration::from_millis(1);

/// What every group measures.
#[derive(Clone, Copy)]
pub struct Plan<'a> {
    /// The job's collective.
    pub coll: &'a dyn Collective,
    /// The first datatype of the run.
    pub dt: DataType,
    /// The first op of the run (`sum` for `mulsum`, which needs a scalar per rank).
    pub op: RedOp,
    /// Message size in bytes (the locate size).
    pub bytes: u64,
    /// The buffers' size (`-e` after the memory clamp).
    pub max_bytes: u64,
    /// `-u`: misalignment of the buffers, in elements.
    pub unalign: u64,
    /// Untimed operations first (at least one: it connects the ranks).
    pub warmup: u32,
    /// Timed operations, at least.
    pub iters: u32,
    /// `--locate-window`: the least time a group is timed for (0: `iters` alone).
    pub window: f64,
    /// Rank 0's busbw (GB/s) of the job's row nearest the locate size, the same on every
    /// rank: the pace of a rank not measured yet, with the groups measured ([`Basis`]).
    pub job_busbw: Option<f64>,
}

/// This rank's GPU in the rounds.
pub struct GpuLocal<'a> {
    nccl: &'static Nccl,
    boot: &'a dyn Bootstrap,
    gpu: &'a Gpu,
    plan: Plan<'a>,
    /// The collective's busbw (GB/s) of a group of `n` ranks taking `seconds` per operation.
    busbw: &'a dyn Fn(usize, f64) -> f64,
    /// What the windows are estimated from; the same on every rank.
    basis: Basis,
    world: Option<Communicator>,
    child: Option<Communicator>,
    /// When the waits last asked about the other processes.
    watched: Cell<Instant>,
}

impl<'a> GpuLocal<'a> {
    /// Rounds on `gpu` (its buffers and stream; this process' one GPU); `busbw(n, seconds)`
    /// as the rounds judge groups by.
    pub fn new(
        nccl: &'static Nccl,
        boot: &'a dyn Bootstrap,
        gpu: &'a Gpu,
        plan: Plan<'a>,
        busbw: &'a dyn Fn(usize, f64) -> f64,
    ) -> GpuLocal<'a> {
        GpuLocal {
            nccl,
            boot,
            gpu,
            plan,
            busbw,
            basis: Basis::new(plan.job_busbw),
            world: None,
            child: None,
            watched: Cell::new(Instant::now()),
        }
    }

    /// In every wait: a signal, or a process of the job that stopped answering (the bootstrap's
    /// watchdog found it; the run ends, and locate names it as hung first), ends the rounds.
    fn watch(&self) -> Result<()> {
        interrupt::check()?;
        if self.watched.get().elapsed() >= WATCH {
            self.watched.set(Instant::now());
            if let Some(e) = self.boot.lost_peer(Duration::ZERO) {
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// Releases the communicators: the world one orderly (it is idle between rounds), a
    /// group's aborted.
    pub fn close(mut self) -> Result<()> {
        drop(self.child.take());
        self.gpu.ctx().make_current()?;
        match self.world.take() {
            Some(mut w) => w.destroy(),
            None => Ok(()),
        }
    }

    /// Makes the world communicator (every rank at once, the id from rank 0 through the
    /// bootstrap); `false` when it is not ready by `deadline` (it is aborted then).
    fn make_world(&mut self, deadline: Instant) -> Result<bool> {
        drop(self.world.take());
        let mut id = UniqueId { internal: [0; 128] };
        if self.boot.world_rank() == 0 {
            id = self.nccl.unique_id()?;
        }
        let mut bytes: [u8; 128] = id.internal.map(|c| c as u8);
        self.boot.broadcast_id(&mut bytes)?;
        id.internal = bytes.map(|b| b as std::ffi::c_char);
        let world = Communicator::init_nonblocking(
            self.nccl,
            &self.gpu.ctx(),
            &id,
            self.boot.world_size(),
            self.boot.world_rank(),
        )?;
        loop {
            match world.progress()? {
                Progress::Ready => break,
                Progress::Pending if Instant::now() >= deadline => return Ok(false),
                Progress::Pending => {
                    self.watch()?;
                    std::thread::sleep(NAP);
                }
            }
        }
        self.world = Some(world);
        Ok(true)
    }

    /// This rank's communicator of the round (`None` when it sits out), or why not: `Err(true)`
    /// when the deadline passed (the world communicator was aborted), `Err(false)` for an
    /// error (likewise), with its text.
    fn split(
        &mut self,
        group: Option<(usize, usize)>,
        deadline: Instant,
    ) -> Result<std::result::Result<Option<Communicator>, (bool, String)>> {
        let boot = self.boot;
        let watched = &self.watched;
        let Some(world) = self.world.as_mut() else {
            return Ok(Err((false, "no world communicator".into())));
        };
        let key = boot.world_rank();
        let colour = group.map(|(g, _)| u32::try_from(g).unwrap_or(u32::MAX));
        let members = group.map_or(0, |(_, n)| n);
        let mut fatal = None;
        let outcome = match world.split(colour, key, members) {
            Err(e) => Err((false, e.to_string())),
            Ok(mut split) => loop {
                match split.poll() {
                    Ok(Some(child)) => break Ok(child),
                    Ok(None) if Instant::now() >= deadline => break Err((true, String::new())),
                    Ok(None) => {
                        let lost = (watched.get().elapsed() >= WATCH)
                            .then(|| {
                                watched.set(Instant::now());
                                boot.lost_peer(Duration::ZERO).map(Error::from)
                            })
                            .flatten();
                        if let Some(e) = interrupt::check().err().or(lost) {
                            fatal = Some(e);
                            break Err((false, String::new()));
                        }
                        std::thread::sleep(NAP);
                    }
                    Err(e) => break Err((false, e.to_string())),
                }
                // An unfinished split aborts the world communicator as it is dropped (at the
                // end of this arm).
            },
        };
        if outcome.is_err() {
            drop(self.world.take());
        }
        match fatal {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    }

    /// Warm-up and timed loop on `comm` as rank `rank` of `n`, the window estimated at
    /// `busbw` GB/s: the time per operation in µs, `None` when the deadline passed first.
    fn measure(
        &self,
        comm: &Communicator,
        (rank, n): (usize, usize),
        busbw: Option<f64>,
        deadline: Instant,
    ) -> Result<Option<f64>> {
        let p = &self.plan;
        p.coll.check_shape(n, p.bytes, p.bytes)?;
        let s = Shape::of(p.coll, n, p.max_bytes, p.dt, p.op, 0, p.bytes);
        let (send, recv) = s.pointers(
            (self.gpu.send().addr(), self.gpu.recv().addr()),
            rank,
            p.unalign,
            false,
            0,
        );
        let call = Call {
            send,
            recv,
            counts: s.counts,
            root: 0,
            rank,
            nranks: n,
            ts: p.dt.size(),
        };
        let mut b = BoundOp::builder(self.nccl, p.dt, p.op.nccl_builtin(), s.span, s.steps)?;
        b.add_with(self.gpu, comm, rank, 0, |calls| {
            step::bind(p.coll, Natives::of(self.nccl), &call, calls)
        })?;
        let op = b.finish();
        // Every rank of the group gets the same count: from the same shared busbw and shape.
        // Busbw is inversely proportional to the time: one second's busbw over the target's.
        let seconds = busbw.map(|bw| (self.busbw)(n, 1.0) / bw);
        let iters = window_iters(p.iters, p.window, seconds).max(1);
        let mut rotation = op.rotation();
        let mut keep_waiting = || -> Result<bool> {
            self.watch()?;
            if Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::yield_now();
            Ok(true)
        };
        for _ in 0..p.warmup.max(1) {
            if !rotation.issue_next_polled(&mut keep_waiting)? {
                return Ok(None);
            }
        }
        if !self.drain(comm, deadline)? {
            return Ok(None);
        }
        let start = Instant::now();
        for _ in 0..iters {
            if !rotation.issue_next_polled(&mut keep_waiting)? {
                return Ok(None);
            }
        }
        if !self.drain(comm, deadline)? {
            return Ok(None);
        }
        Ok(Some(start.elapsed().as_secs_f64() * 1e6 / f64::from(iters)))
    }

    /// Waits until the GPU's stream is idle, checking `comm` for an error now and then;
    /// `false` when the deadline passed first.
    fn drain(&self, comm: &Communicator, deadline: Instant) -> Result<bool> {
        let mut polls = 0u64;
        loop {
            if self.gpu.stream().is_done()? {
                return Ok(true);
            }
            polls += 1;
            if polls.is_multiple_of(64) {
                comm.progress()?;
                self.watch()?;
                if Instant::now() >= deadline {
                    return Ok(false);
                }
            }
            std::thread::yield_now();
        }
    }

    /// After a group was aborted: whether the GPU became idle within [`DRAIN`].
    fn idle_after_abort(&self) -> bool {
        let until = Instant::now() + DRAIN;
        while Instant::now() < until {
            match self.gpu.stream().is_done() {
                Ok(true) => return true,
                Ok(false) => std::thread::sleep(NAP),
                Err(_) => return false,
            }
        }
        false
    }
}

impl Local for GpuLocal<'_> {
    fn run_round(
        &mut self,
        round: &Round,
        group: Option<usize>,
        rebuild: bool,
        deadline: Instant,
    ) -> Result<Part> {
        self.gpu.ctx().make_current()?;
        let mut part = Part {
            seen: Seen::Out,
            world_lost: false,
            stuck: false,
        };
        if (rebuild || self.world.is_none()) && !self.make_world(deadline)? {
            part.world_lost = true;
            if group.is_some() {
                part.seen = Seen::Hung;
            }
            return Ok(part);
        }
        let me = self.boot.world_rank();
        let ranks = group
            .and_then(|g| round.groups.get(g))
            .map(|g| &g.ranks[..]);
        let shape = group
            .zip(ranks)
            .and_then(|(g, ranks)| Some((g, ranks.len(), ranks.iter().position(|&r| r == me)?)));
        let child = match self.split(shape.map(|(g, n, _)| (g, n)), deadline)? {
            Ok(c) => c,
            Err((expired, why)) => {
                part.world_lost = true;
                if group.is_some() {
                    part.seen = if expired {
                        Seen::Hung
                    } else {
                        Seen::Failed {
                            error: format!("communicator split: {why}"),
                        }
                    };
                }
                return Ok(part);
            }
        };
        let (Some(comm), Some((_, n, rank))) = (child, shape) else {
            return Ok(part);
        };
        // A calibrating pass times `--locate-iters` alone: it only learns the groups' pace.
        let busbw = (!self.calibrating())
            .then(|| self.basis.estimate(ranks.unwrap_or_default()))
            .flatten();
        let measured = self.measure(&comm, (rank, n), busbw, deadline);
        self.child = Some(comm);
        part.seen = match measured {
            Ok(Some(time_us)) => Seen::Measured { time_us },
            Ok(None) => Seen::Hung,
            // A signal, or a process that stopped answering: the rounds end.
            Err(e) if e.is_interrupted() || matches!(e, Error::Bootstrap { .. }) => return Err(e),
            Err(e) => Seen::Failed {
                error: e.to_string().replace('\n', " "),
            },
        };
        if !matches!(part.seen, Seen::Measured { .. }) {
            // Stops what the GPU runs for the group; the reports are shared after this.
            if let Some(c) = self.child.as_mut() {
                c.abort();
            }
            part.stuck = !self.idle_after_abort();
        }
        Ok(part)
    }

    fn learn(&mut self, ranks: &[usize], busbw: f64) {
        self.basis.learn(ranks, busbw);
    }

    fn calibrating(&self) -> bool {
        self.plan.window > 0.0 && !self.basis.measured()
    }

    fn finish(&mut self, measured: bool) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        let orderly = measured && self.gpu.ctx().make_current().is_ok() && c.destroy().is_ok();
        if !orderly {
            c.abort();
        }
    }
}
