//! One thread's work ([`Worker`], every method of it in this folder): warm-up, the timed loop
//! and its blocking modes, the cross-rank time, for the GPUs the thread owns; what it measures
//! is an [`Engine`]'s [`Shape`] (`runner/engine.rs`). Validation is in `validate.rs`, CUDA
//! graphs (`-G`) in `graph.rs`, `--explain`'s untimed call in `explain_call.rs`; per-iteration
//! events and statistics (`-I`) are the runner's `per_iter.rs`.
//!
//! The timed loop is the hot path: each operation is bound once before the clock starts
//! (`bind.rs`); per operation the loop makes the plan's NCCL calls and nothing else: no
//! allocation, no locks, no plan interpretation (plus one event record per GPU per iteration
//! with `-I 1`).

mod bind;
mod explain_call;
mod graph;
mod sure;
mod validate;

pub use sure::Sure;

use super::engine::{Engine, Shape};
use super::hang::note::Stage;
use super::hang::progress::{self, Slot};
use super::interrupt;
use super::per_iter::{self, Events};
use super::setup::Gpu;
#[cfg(feature = "test-hooks")]
use super::stall;
use crate::bootstrap::Reduce;
use crate::error::{Error, Result};
use crate::gpu::driver::CUdeviceptr;
use crate::gpu::nccl::Nccl;
use crate::gpu::op::{BoundOp, Rotation};
use crate::options::{Average, Blocking};
use crate::report::{HalfResult, PerIterStats};
use crate::runner::wrong_ranks::WrongRanks;
use crate::types::{DataType, RedOp};
use std::time::Instant;

/// The GPUs of one thread and its counters.
pub struct Worker<'a> {
    pub(super) e: &'a Engine<'a>,
    pub(super) tid: usize,
    /// This thread's GPUs.
    pub gpus: Vec<Gpu>,
    pub(super) rep: u64,
    /// Measurements in which this thread's GPUs had wrong data (reported halves only).
    pub errors: u64,
    /// Where wrong data was seen, over every rank (reported halves only).
    pub(crate) wrong_ranks: Option<WrongRanks>,
    /// `-I 1` timing events (none otherwise).
    events: Events,
    /// With split groups ([`Engine::record_groups`]): this thread's own time and the bus
    /// bandwidth terms of every measurement, in order.
    pub(super) samples: Vec<GroupSample>,
    /// With `--stop-when-sure`: what the last measured half used and reached.
    pub sure: Option<Sure>,
    /// With `--stop-when-sure`: the events between its batches (none otherwise).
    sure_events: Events,
    /// Test hook: hold the streams this long before the first timed loop ([`stall`]).
    #[cfg(feature = "test-hooks")]
    stall_ms: Option<u64>,
    /// This thread's counters for the hang watch.
    slot: &'static Slot,
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        progress::release(self.slot);
    }
}

/// At most this many measurements are kept per thread for the split groups' results (`-N 0`
/// runs until stopped).
const MAX_GROUP_SAMPLES: usize = 1 << 20;

/// One measurement as one thread saw it, for its split group's own result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct GroupSample {
    /// This thread's time per operation, seconds.
    pub seconds: f64,
    /// The bytes that define algbw.
    pub bytes: f64,
    /// The busbw factor.
    pub factor: f64,
}

/// Runs `f` inside one NCCL group when `grouped`; the group is always closed.
#[inline]
fn in_group(nccl: &Nccl, grouped: bool, f: impl FnOnce() -> Result<()>) -> Result<()> {
    if grouped { nccl.group(f) } else { f() }
}

impl<'a> Worker<'a> {
    /// A worker for thread `tid` owning `gpus`; creates the `-I 1` events.
    pub fn new(e: &'a Engine<'a>, tid: usize, gpus: Vec<Gpu>) -> Result<Worker<'a>> {
        if let Some(g) = gpus.first() {
            g.ctx().make_current()?;
        }
        let events = if e.opts.per_iter {
            Events::create(&gpus, e.opts.iters as u64, e.opts.blocking.each_iteration())?
        } else {
            Events::none()
        };
        let sure_events = match e.opts.stop_when_sure {
            Some(_) => Events::create(&gpus, e.opts.iters as u64, false)?,
            None => Events::none(),
        };
        let first_rank = gpus.first().map_or(0, |g| g.rank());
        let slot = progress::claim(tid, first_rank, gpus.len());
        Ok(Worker {
            e,
            tid,
            slot,
            gpus,
            rep: 0,
            errors: 0,
            wrong_ranks: None,
            events,
            samples: Vec::new(),
            sure: None,
            sure_events,
            #[cfg(feature = "test-hooks")]
            stall_ms: stall::stall_ms(),
        })
    }

    pub(super) fn data_ptrs(
        &self,
        g: &Gpu,
        s: &Shape,
        in_place: bool,
        shift: u64,
    ) -> (CUdeviceptr, CUdeviceptr) {
        s.pointers(
            (g.send().addr(), g.recv().addr()),
            g.rank(),
            self.e.opts.unalign as u64,
            in_place,
            shift,
        )
    }

    /// Polls every stream until idle, checking for asynchronous NCCL errors, the `-T` timeout
    /// and SIGINT/SIGTERM meanwhile.
    #[track_caller]
    pub(super) fn wait(&self) -> Result<()> {
        interrupt::check()?;
        self.slot.waiting();
        let timeout = self.e.opts.timeout_s;
        let start = (timeout > 0).then(Instant::now);
        // Asynchronous errors are looked for on every 64th poll (not the first: a loop of
        // short operations is usually done within a few polls, and the query costs more than
        // the poll): often enough to stop a failed run within microseconds, rarely enough not
        // to delay noticing completion.
        let mut polls = 0u64;
        loop {
            let mut done = true;
            for g in &self.gpus {
                if !g.stream().is_done()? {
                    done = false;
                    if polls > 0 && polls.is_multiple_of(64) {
                        self.check_async(g)?;
                    }
                }
            }
            polls += 1;
            if done {
                self.slot.all_finished();
                return Ok(());
            }
            interrupt::check()?;
            if let Some(t0) = start
                && t0.elapsed().as_secs_f64() > timeout as f64
            {
                // The communicators are aborted when this thread's GPUs are dropped, which
                // follows this error at once (or by `abort_all` on the way).
                #[cfg(feature = "test-hooks")]
                stall::release();
                return Err(Error::Timeout {
                    secs: timeout,
                    site: std::panic::Location::caller(),
                    during: String::new(),
                });
            }
            std::thread::yield_now();
        }
    }

    /// Returns a background operation's error (the communicators are then aborted when this
    /// thread's GPUs are dropped, which follows the error at once).
    fn check_async(&self, g: &Gpu) -> Result<()> {
        let state = g.comm().async_error()?;
        // 7 = ncclInProgress.
        if state != 0 && state != 7 {
            self.e.nccl.check(state)?;
        }
        Ok(())
    }

    /// Aborts every communicator of this thread (after a timeout, an asynchronous error or a
    /// signal); they are not used again. Dropping the GPUs does the same.
    pub fn abort_all(&mut self) {
        for g in &mut self.gpus {
            g.abort();
        }
    }

    /// Warm-up over the doubling ladder of sizes (out-of-place, `-w` operations each).
    pub fn warmup(&self, dt: DataType, op: RedOp, root: usize, ladder: &[u64]) -> Result<()> {
        for &bytes in ladder {
            let s = Shape::new(self.e, dt, op, root, bytes);
            let op = self.bind(&s, false)?;
            let w = self.e.opts.warmup_iters as u64;
            self.slot.begin(self.label(Stage::Warmup, &s, false), w);
            let mut rotation = op.rotation();
            for _ in 0..w {
                self.issue_counted(&mut rotation)?;
            }
            self.wait()?;
        }
        self.slot.outside();
        Ok(())
    }

    /// The hang watch's label of a batch of `s`.
    fn label(&self, stage: Stage, s: &Shape, in_place: bool) -> super::hang::note::Label {
        progress::label(stage, self.e.coll.name(), s, in_place)
    }

    /// Issues the rotation's next operation and counts it for the hang watch (one relaxed
    /// store to this thread's own slot).
    #[inline]
    fn issue_counted(&self, rotation: &mut Rotation) -> Result<()> {
        let n = self.slot.issued() + 1;
        #[cfg(feature = "test-hooks")]
        stall::before_operation(n);
        rotation.issue_next()?;
        self.slot.set_issued(n);
        Ok(())
    }

    /// Measures one half-row: sync op, timed loop, cross-rank time, validation.
    pub fn measure(&mut self, s: &Shape, in_place: bool) -> Result<HalfResult> {
        let o = self.e.opts;
        if o.check > 0 {
            self.prepare(s, in_place, 99, true)?;
        }
        let (n, m) = (o.iters as u64, o.agg_iters as u64);
        let (cpu, local) = self.timed_loop(s, in_place, n, m)?;
        if self.events.active() {
            // With -z 1/2 and m = 1 the last event may still be pending.
            self.wait()?;
        }
        self.slot.outside();
        let per_iter = if self.events.active() {
            self.per_iteration(n, m)?
        } else {
            None
        };

        let time = self.reduce_time(local)?;
        let ts = s.ts();
        let (bytes, factor) = self.e.coll.bandwidth(&s.counts, ts, self.e.nranks);
        if self.e.record_groups && self.samples.len() < MAX_GROUP_SAMPLES {
            self.samples.push(GroupSample {
                seconds: local,
                bytes,
                factor,
            });
        }
        let algbw = bytes / 1e9 / time;
        let busbw = algbw * factor;
        self.e.group.barrier()?;
        let wrong = self.validate(s, in_place)?;
        Ok(HalfResult {
            time_us: if o.report_cputime { cpu } else { time } * 1e6,
            algbw,
            busbw,
            wrong,
            per_iter,
        })
    }

    /// The `-I 1` statistics of the loop just run: per-iteration maxima over this thread's
    /// GPUs, then over threads and processes; the statistics for thread 0 of world rank 0
    /// (which prints), `None` elsewhere.
    fn per_iteration(&self, n: u64, m: u64) -> Result<Option<PerIterStats>> {
        let mine = self.events.iteration_us(n, m)?;
        let rows = self.e.group.gather_max(self.tid, &mine)?;
        if rows.is_empty() {
            return Ok(None);
        }
        let (times, per_process) = per_iter::combine(rows);
        let skip = self.e.opts.per_iter_skip.max(0) as usize;
        Ok(Some(per_iter::summarize(times, skip, per_process)))
    }

    /// One measurement's operations as [`Worker::measure`] makes them, without validation:
    /// the operation is bound, issued once (the sync operation, which also warms NCCL's path
    /// for it) and waited for, the threads and processes meet, and then the timed loop of `n`
    /// iterations of `m` operations (grouped when `m > 1`) runs with the `-z` blocking rules,
    /// or the CUDA graph of `-G`. Returns (host enqueue time, completion time) per operation in
    /// seconds, this thread only. Public for the overhead bench, which must time exactly this.
    pub fn timed_loop(&mut self, s: &Shape, in_place: bool, n: u64, m: u64) -> Result<(f64, f64)> {
        #[cfg(feature = "test-hooks")]
        let stall_ms = self.stall_ms.take();
        let op = self.bind(s, in_place)?;
        self.slot.begin(self.label(Stage::Sync, s, in_place), 1);
        let first = Instant::now();
        let number = self.slot.issued() + 1;
        #[cfg(feature = "test-hooks")]
        stall::before_operation(number);
        op.issue_first()?;
        self.slot.set_issued(number);
        self.wait()?;
        let first = first.elapsed().as_secs_f64();
        self.slot.timed_one((first * 1e9) as u64, s.span);
        self.e.group.barrier()?;
        self.slot
            .begin(self.label(Stage::Timed, s, in_place), n.saturating_mul(m));
        #[cfg(feature = "test-hooks")]
        if let Some(ms) = stall_ms {
            stall::inject(&self.gpus, ms)?;
        }
        match (self.e.opts.graph.launches(), self.e.opts.stop_when_sure) {
            (Some(launches), _) => self.graph_loop(&op, n, m, launches),
            // The options refuse it with -z, -I and -G.
            (None, Some(percent)) => {
                let (cpu, time, sure) = self.timed_until_sure(&op, (n, m), first, percent)?;
                self.sure = Some(sure);
                Ok((cpu, time))
            }
            (None, None) => self.timed(&op, n, m),
        }
    }

    /// [`Worker::timed_loop`] of a bound operation.
    fn timed(&self, op: &BoundOp, n: u64, m: u64) -> Result<(f64, f64)> {
        let z = self.e.opts.blocking;
        let start = Instant::now();
        let coll_only = self.enqueue_loop(op, n, m, false)?;
        let ops = (n * m) as f64;
        let cpu = if z.each_iteration() {
            coll_only
        } else {
            start.elapsed().as_secs_f64()
        } / ops;
        if z == Blocking::Off || m > 1 {
            self.wait()?;
        }
        let local = if z.each_iteration() {
            coll_only
        } else {
            start.elapsed().as_secs_f64()
        } / ops;
        Ok((cpu, local))
    }

    /// Enqueues the `n × m` operations of the timed loop with the `-z` waits and barriers and
    /// the `-I 1` events. While `capturing` into a CUDA graph nothing runs, so the per-operation
    /// waits and barriers of `-z 1/2` are left out. Returns the summed iteration times of
    /// `-z 3` (barriers excluded), in seconds.
    pub(super) fn enqueue_loop(
        &self,
        op: &BoundOp,
        n: u64,
        m: u64,
        capturing: bool,
    ) -> Result<f64> {
        let z = self.e.opts.blocking;
        let per_op_wait = z.waits_each_operation() && !capturing;
        let events = self.events.active() && !capturing;
        let mut rotation = op.rotation();
        if m == 1 && !z.each_iteration() && !per_op_wait && !events {
            // The default loop (-z 0 -m 1, and every capture but -z 3's): the operations and
            // nothing else.
            for _ in 0..n {
                self.issue_counted(&mut rotation)?;
            }
            return Ok(0.0);
        }
        let nccl = self.e.nccl;
        let mut coll_only = 0.0;
        for iter in 0..n {
            // Only -z 3 times single iterations (a clock read per iteration is not free).
            let t0 = z.each_iteration().then(Instant::now);
            in_group(nccl, m > 1, || {
                if events {
                    self.events.record(&self.gpus, self.events.start_of(iter))?;
                }
                for _ in 0..m {
                    self.issue_counted(&mut rotation)?;
                    if per_op_wait {
                        // Inside a group (-m > 1) nothing is launched yet: this wait is a no-op.
                        self.wait()?;
                        if z.barrier_each_operation() {
                            self.e.group.barrier()?;
                        }
                    }
                }
                Ok(())
            })?;
            if z.each_iteration() {
                self.wait()?;
                if events {
                    self.events
                        .record(&self.gpus, self.events.start_of(iter) + 1)?;
                }
                coll_only += t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
                self.e.group.barrier()?;
            }
        }
        if events && !z.each_iteration() {
            self.events.record(&self.gpus, n as usize)?;
        }
        Ok(coll_only)
    }

    /// The cross-rank time of `-a`: 0 this process' thread 0, 1 mean, 2 min, 3 max.
    fn reduce_time(&self, local: f64) -> Result<f64> {
        let g = self.e.group;
        match self.e.opts.average {
            Average::Rank0 => g.allreduce_local(
                self.tid,
                if self.tid == 0 { local } else { 0.0 },
                Reduce::Sum,
            ),
            Average::Min => g.allreduce(self.tid, local, Reduce::Min),
            Average::Max => g.allreduce(self.tid, local, Reduce::Max),
            Average::Mean => {
                let sum = g.allreduce(self.tid, local, Reduce::Sum)?;
                Ok(sum / (self.e.world_size * g.threads()) as f64)
            }
        }
    }
}
