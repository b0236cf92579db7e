//! One thread's work: warm-up, the timed loop, and validation, for the GPUs the thread owns.
//! The timed loop is the hot path: no allocation, no locks, one function-pointer call into NCCL
//! per GPU per operation.

use super::setup::Gpu;
use super::sync::ThreadGroup;
use crate::bootstrap::Reduce;
use crate::collective::{Buffer, Call, Collective, Counts, Fill, FillCtx};
use crate::error::{Error, Result};
use crate::gpu::driver::{self, CUdeviceptr};
use crate::gpu::nccl::Nccl;
use crate::options::Options;
use crate::report::HalfResult;
use crate::types::{DataType, RedOp};
use crate::verify::generator::tolerance;
use std::ffi::c_void;
use std::time::Instant;

/// What every thread shares.
pub struct Engine<'a> {
    /// Validated options.
    pub opts: &'a Options,
    /// The collective under test.
    pub coll: &'a dyn Collective,
    /// libnccl.
    pub nccl: &'a Nccl,
    /// The threads (and processes) of the run.
    pub group: &'a ThreadGroup<'a>,
    /// Communicator size.
    pub nranks: usize,
    /// Largest size after the memory clamp.
    pub max_bytes: u64,
    /// Number of processes (for the `-a 1` mean).
    pub world_size: usize,
}

/// One datatype/op/root combination at one size.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Datatype.
    pub dt: DataType,
    /// Reduction op (ignored by non-reductions).
    pub op: RedOp,
    /// Root.
    pub root: usize,
    /// Counts for this size.
    pub counts: Counts,
}

impl Shape {
    /// Counts for `bytes` bytes of `dt`.
    pub fn new(e: &Engine, dt: DataType, op: RedOp, root: usize, bytes: u64) -> Shape {
        let ts = dt.size();
        Shape {
            dt,
            op,
            root,
            counts: e.coll.counts(bytes as usize / ts, e.nranks, ts),
        }
    }

    fn ts(&self) -> usize {
        self.dt.size()
    }
}

/// The GPUs of one thread and its counters.
pub struct Worker<'a> {
    e: &'a Engine<'a>,
    tid: usize,
    /// This thread's GPUs.
    pub gpus: Vec<Gpu>,
    rep: u64,
    /// Measurements in which this thread's GPUs had wrong data (reported halves only).
    pub errors: u64,
}

/// `ncclScalarHostImmediate`.
const SCALAR_HOST_IMMEDIATE: i32 = 1;

/// The bit pattern of the small integer `v` (1 or 2) in datatype `dt`.
fn scalar_bits(dt: DataType, v: u8) -> u64 {
    let f = v as f64;
    match dt {
        DataType::Half => half::f16::from_f64(f).to_bits() as u64,
        DataType::Bfloat16 => half::bf16::from_f64(f).to_bits() as u64,
        DataType::Float => (f as f32).to_bits() as u64,
        DataType::Double => f.to_bits(),
        // 1.0 and 2.0 in E4M3 (bias 7) and E5M2 (bias 15).
        DataType::F8e4m3 => [0x38, 0x40][v as usize - 1],
        DataType::F8e5m2 => [0x3c, 0x40][v as usize - 1],
        _ => v as u64,
    }
}

/// Runs `f` between `ncclGroupStart`/`ncclGroupEnd` when `grouped`; the group is always closed.
#[inline]
fn in_group(nccl: &Nccl, grouped: bool, f: impl FnOnce() -> Result<()>) -> Result<()> {
    if !grouped {
        return f();
    }
    // SAFETY: balanced by the ncclGroupEnd below.
    nccl.check(unsafe { (nccl.ncclGroupStart)() })?;
    let r = f();
    // SAFETY: closes the group opened above.
    let end = nccl.check(unsafe { (nccl.ncclGroupEnd)() });
    r.and(end)
}

impl<'a> Worker<'a> {
    /// A worker for thread `tid` owning `gpus`.
    pub fn new(e: &'a Engine<'a>, tid: usize, gpus: Vec<Gpu>) -> Result<Worker<'a>> {
        if let Some(g) = gpus.first() {
            driver::set_current(g.ctx)?;
        }
        Ok(Worker {
            e,
            tid,
            gpus,
            rep: 0,
            errors: 0,
        })
    }

    fn data_ptrs(
        &self,
        g: &Gpu,
        s: &Shape,
        in_place: bool,
        shift: u64,
    ) -> (CUdeviceptr, CUdeviceptr) {
        let ts = s.ts() as u64;
        let unalign = self.e.opts.unalign as u64 * ts;
        let recv = g.recv + unalign;
        let rank = g.rank as u64;
        let (send, recv) = if in_place {
            (
                recv + s.counts.send_inplace_offset as u64 * ts * rank,
                recv + s.counts.recv_inplace_offset as u64 * ts * rank,
            )
        } else {
            (g.send + unalign, recv)
        };
        (send + shift, recv + shift)
    }

    /// Enqueues one operation (iteration index `it`) on every GPU of this thread.
    #[inline]
    fn issue(&self, s: &Shape, in_place: bool, it: u64) -> Result<()> {
        let nccl = self.e.nccl;
        let ts = s.ts() as u64;
        let span = s.counts.printed_size(ts as usize);
        let steps = self.e.max_bytes.checked_div(span).unwrap_or(1).max(1);
        let shift = span * (it % steps);
        let multi = self.gpus.len() > 1;
        in_group(nccl, multi, || {
            for g in &self.gpus {
                if multi {
                    driver::set_current(g.ctx)?;
                }
                let (send, recv) = self.data_ptrs(g, s, in_place, shift);
                let mut call = Call {
                    send: send as *const c_void,
                    recv: recv as *mut c_void,
                    counts: s.counts,
                    dtype: s.dt.nccl_id(),
                    op: 0,
                    root: s.root as i32,
                    comm: g.comm,
                    stream: g.stream as *mut c_void,
                    rank: g.rank,
                    nranks: self.e.nranks,
                    ts: ts as usize,
                };
                match s.op.nccl_builtin() {
                    Some(op) => {
                        call.op = op;
                        self.e.coll.enqueue(nccl, &call)?;
                    }
                    None => self.enqueue_premulsum(g, s, &mut call)?,
                }
            }
            Ok(())
        })
    }

    /// `mulsum`: a PreMulSum op (scalar 1 on even ranks, 2 on odd) created around the call.
    fn enqueue_premulsum(&self, g: &Gpu, s: &Shape, call: &mut Call) -> Result<()> {
        let nccl = self.e.nccl;
        let (Some(create), Some(destroy)) = (nccl.ncclRedOpCreatePreMulSum, nccl.ncclRedOpDestroy)
        else {
            return Err(Error::Unsupported(
                "-o mulsum needs NCCL 2.11 or later (ncclRedOpCreatePreMulSum)".into(),
            ));
        };
        let mut scalar = scalar_bits(s.dt, if g.rank.is_multiple_of(2) { 1 } else { 2 });
        let mut op = 0;
        // SAFETY: the scalar is read immediately (host-immediate residence).
        nccl.check(unsafe {
            create(
                &mut op,
                &mut scalar as *mut u64 as *mut c_void,
                s.dt.nccl_id(),
                SCALAR_HOST_IMMEDIATE,
                g.comm,
            )
        })?;
        call.op = op;
        let r = self.e.coll.enqueue(nccl, call);
        // SAFETY: the op was created above on this communicator.
        let d = nccl.check(unsafe { destroy(op, g.comm) });
        r.and(d)
    }

    /// Polls every stream until idle, checking for asynchronous NCCL errors meanwhile.
    #[track_caller]
    fn wait(&self) -> Result<()> {
        let timeout = self.e.opts.timeout_s;
        let start = (timeout > 0).then(Instant::now);
        // Asynchronous errors are looked for on the first poll and every 64th after it: often
        // enough to stop a failed run at once, rarely enough not to delay noticing completion.
        let mut polls = 0u64;
        loop {
            let mut done = true;
            for g in &self.gpus {
                if !driver::stream_done(g.stream)? {
                    done = false;
                    if polls.is_multiple_of(64) {
                        self.check_async(g)?;
                    }
                }
            }
            polls += 1;
            if done {
                return Ok(());
            }
            if let Some(t0) = start
                && t0.elapsed().as_secs_f64() > timeout as f64
            {
                self.abort_all();
                return Err(Error::Timeout {
                    secs: timeout,
                    site: std::panic::Location::caller(),
                    during: String::new(),
                });
            }
            std::thread::yield_now();
        }
    }

    fn check_async(&self, g: &Gpu) -> Result<()> {
        let nccl = self.e.nccl;
        let mut state = 0;
        // SAFETY: valid communicator and out pointer.
        nccl.check(unsafe { (nccl.ncclCommGetAsyncError)(g.comm, &mut state) })?;
        // 7 = ncclInProgress.
        if state != 0 && state != 7 {
            self.abort_all();
            nccl.check(state)?;
        }
        Ok(())
    }

    /// Aborts every communicator of this thread (after a timeout or an asynchronous error).
    fn abort_all(&self) {
        for g in &self.gpus {
            // SAFETY: aborting is the documented way out of a failed communicator.
            unsafe { (self.e.nccl.ncclCommAbort)(g.comm) };
        }
    }

    /// Warm-up over the doubling ladder of sizes (out-of-place, `-w` operations each).
    pub fn warmup(&self, dt: DataType, op: RedOp, root: usize, ladder: &[u64]) -> Result<()> {
        for &bytes in ladder {
            let s = Shape::new(self.e, dt, op, root, bytes);
            for it in 0..self.e.opts.warmup_iters as u64 {
                self.issue(&s, false, it)?;
            }
            self.wait()?;
        }
        Ok(())
    }

    /// Measures one half-row: sync op, timed loop, cross-rank time, validation.
    pub fn measure(&mut self, s: &Shape, in_place: bool) -> Result<HalfResult> {
        let o = self.e.opts;
        if o.check > 0 {
            self.prepare(s, in_place, 99, true)?;
        }
        self.issue(s, in_place, 0)?;
        self.wait()?;
        self.e.group.barrier()?;

        let (cpu, local) = self.timed_loop(s, in_place, o.iters as u64, o.agg_iters as u64)?;

        let time = self.reduce_time(local)?;
        let ts = s.ts();
        let (bytes, factor) = self.e.coll.bandwidth(&s.counts, ts, self.e.nranks);
        let algbw = bytes / 1e9 / time;
        let busbw = algbw * factor;
        self.e.group.barrier()?;
        let wrong = self.validate(s, in_place)?;
        Ok(HalfResult {
            time_us: if o.report_cputime { cpu } else { time } * 1e6,
            algbw,
            busbw,
            wrong,
            per_iter: None,
        })
    }

    /// The timed loop: `n` iterations of `m` operations (grouped when `m > 1`), with the `-z`
    /// blocking rules. Returns (host enqueue time, completion time) per operation in seconds,
    /// this thread only.
    pub fn timed_loop(&self, s: &Shape, in_place: bool, n: u64, m: u64) -> Result<(f64, f64)> {
        let z = self.e.opts.blocking;
        let nccl = self.e.nccl;
        let mut coll_only = 0.0;
        let start = Instant::now();
        for iter in 0..n {
            let t0 = Instant::now();
            in_group(nccl, m > 1, || {
                for a in 0..m {
                    self.issue(s, in_place, iter * m + a)?;
                    if z != 0 && z != 3 {
                        // Inside a group (-m > 1) nothing is launched yet: this wait is a no-op.
                        self.wait()?;
                        if z == 1 {
                            self.e.group.barrier()?;
                        }
                    }
                }
                Ok(())
            })?;
            if z == 3 {
                self.wait()?;
                coll_only += t0.elapsed().as_secs_f64();
                self.e.group.barrier()?;
            }
        }
        let ops = (n * m) as f64;
        let cpu = if z == 3 {
            coll_only
        } else {
            start.elapsed().as_secs_f64()
        } / ops;
        if z == 0 || m > 1 {
            self.wait()?;
        }
        let local = if z == 3 {
            coll_only
        } else {
            start.elapsed().as_secs_f64()
        } / ops;

        Ok((cpu, local))
    }

    /// The cross-rank time of `-a`: 0 this process' thread 0, 1 mean, 2 min, 3 max.
    fn reduce_time(&self, local: f64) -> Result<f64> {
        let g = self.e.group;
        match self.e.opts.average {
            0 => g.allreduce_local(
                self.tid,
                if self.tid == 0 { local } else { 0.0 },
                Reduce::Sum,
            ),
            2 => g.allreduce(self.tid, local, Reduce::Min),
            3 => g.allreduce(self.tid, local, Reduce::Max),
            _ => {
                let sum = g.allreduce(self.tid, local, Reduce::Sum)?;
                Ok(sum / (self.e.world_size * g.threads()) as f64)
            }
        }
    }

    fn report_errors(&self, in_place: bool) -> bool {
        self.e.opts.check > 0 && (!in_place || self.e.coll.reports_in_place_errors())
    }

    /// Validation: fresh data, one operation, count mismatches on every GPU; repeated `-c` times
    /// or until a mismatch. Returns the global count, or `None` when not reported.
    fn validate(&mut self, s: &Shape, in_place: bool) -> Result<Option<f64>> {
        self.rep += 1;
        if self.e.opts.check == 0 {
            return Ok(None);
        }
        let mut wrong = 0.0;
        for _ in 0..self.e.opts.check {
            self.prepare(s, in_place, self.rep, false)?;
            self.issue(s, in_place, 0)?;
            self.wait()?;
            super::fault::corrupt(
                &self.gpus,
                |g| self.data_ptrs(g, s, in_place, 0).1,
                s,
                in_place,
            )?;
            let local = self.count_mismatches(s, in_place)?;
            if local > 0 && self.report_errors(in_place) {
                self.errors += 1;
            }
            wrong = self
                .e
                .group
                .allreduce(self.tid, local as f64, Reduce::Sum)?;
            if wrong > 0.0 {
                break;
            }
        }
        Ok(self.report_errors(in_place).then_some(wrong))
    }

    fn fill_ctx(&self, g: &Gpu, s: &Shape, in_place: bool, seed: u64) -> FillCtx {
        FillCtx {
            rank: g.rank,
            nranks: self.e.nranks,
            root: s.root,
            op: s.op,
            counts: s.counts,
            in_place,
            seed,
            ts: s.ts(),
        }
    }

    /// Writes inputs (and, unless `inputs_only`, expected results) for one validated operation.
    fn prepare(&self, s: &Shape, in_place: bool, seed: u64, inputs_only: bool) -> Result<()> {
        let ts = s.ts();
        for g in &self.gpus {
            driver::set_current(g.ctx)?;
            let k = g
                .kernels
                .as_ref()
                .ok_or_else(|| Error::Internal("validation kernels missing".into()))?;
            let (_, recv) = self.data_ptrs(g, s, in_place, 0);
            driver::memset_async(recv, 0, s.counts.recv * ts, g.stream)?;
            let unalign = self.e.opts.unalign as u64 * ts as u64;
            for fill in self.e.coll.fills(&self.fill_ctx(g, s, in_place, seed)) {
                match fill {
                    Fill::Input {
                        buf,
                        offset,
                        count,
                        op,
                        rn,
                        rme,
                        seed,
                        ix0,
                    } => {
                        let base = match buf {
                            Buffer::Send => g.send + unalign,
                            Buffer::Recv => g.recv + unalign,
                            Buffer::Expected => g.expected,
                        };
                        let p = base + (offset * ts) as u64;
                        k.fill_input(s.dt, p, count as u64, ix0, op, rn, rme, seed, g.stream)?;
                    }
                    _ if inputs_only => {}
                    Fill::Expected {
                        offset,
                        count,
                        op,
                        rn,
                        seed,
                        ix0,
                    } => {
                        let p = g.expected + (offset * ts) as u64;
                        k.fill_expected(s.dt, p, count as u64, ix0, op, rn, seed, g.stream)?;
                    }
                    Fill::ExpectedIsRecv => {
                        driver::copy_async(g.expected, recv, s.counts.recv * ts, g.stream)?;
                    }
                }
            }
        }
        self.restore_context()
    }

    fn count_mismatches(&self, s: &Shape, in_place: bool) -> Result<u64> {
        let mut total = 0;
        let reduces = self.e.coll.op_column().reduces();
        let tol = tolerance(s.dt, reduces.then_some(s.op));
        for g in &self.gpus {
            driver::set_current(g.ctx)?;
            let k = g
                .kernels
                .as_ref()
                .ok_or_else(|| Error::Internal("validation kernels missing".into()))?;
            let (_, recv) = self.data_ptrs(g, s, in_place, 0);
            driver::memset_async(g.counter, 0, 8, g.stream)?;
            k.count_mismatches(
                s.dt,
                recv,
                g.expected,
                s.counts.recv as u64,
                tol,
                g.counter,
                g.stream,
            )?;
            driver::synchronize(g.stream)?;
            let mut n = [0u64];
            driver::copy_to_host(&mut n, g.counter)?;
            total += n[0];
        }
        self.restore_context()?;
        Ok(total)
    }

    fn restore_context(&self) -> Result<()> {
        match self.gpus.first() {
            Some(g) if self.gpus.len() > 1 => driver::set_current(g.ctx),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn premulsum_scalars() {
        assert_eq!(scalar_bits(DataType::Float, 2), 2.0f32.to_bits() as u64);
        assert_eq!(scalar_bits(DataType::Half, 1), 0x3c00);
        assert_eq!(scalar_bits(DataType::Bfloat16, 2), 0x4000);
        assert_eq!(scalar_bits(DataType::Double, 1), 1.0f64.to_bits());
        assert_eq!(scalar_bits(DataType::Int64, 2), 2);
        assert_eq!(scalar_bits(DataType::F8e4m3, 1), 0x38);
        assert_eq!(scalar_bits(DataType::F8e5m2, 2), 0x40);
    }
}
