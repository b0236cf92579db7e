//! Validation of one measurement, as nccl-tests does it: fresh inputs and expected results written
//! by the kernels, one operation (in its own one-op CUDA graph with `-G`), mismatches counted on
//! every GPU and summed over all ranks.

use super::Worker;
use crate::bootstrap::Reduce;
use crate::collective::{Buffer, Fill, FillCtx};
use crate::error::{Error, Result};
use crate::gpu::kernels::Kernels;
use crate::runner::engine::Shape;
use crate::runner::setup::Gpu;
use crate::runner::wrong_ranks::WrongRanks;
use crate::verify::tolerance;

impl Worker<'_> {
    fn report_errors(&self, in_place: bool) -> bool {
        self.e.opts.check > 0 && (!in_place || self.e.coll.reports_in_place_errors())
    }

    /// Validation: fresh data, one operation, count mismatches on every GPU; repeated `-c` times
    /// or until a mismatch. Returns the global count, or `None` when not reported.
    pub(super) fn validate(&mut self, s: &Shape, in_place: bool) -> Result<Option<f64>> {
        self.rep += 1;
        if self.e.opts.check == 0 {
            return Ok(None);
        }
        let mut wrong = 0.0;
        for _ in 0..self.e.opts.check {
            self.prepare(s, in_place, self.rep, false)?;
            self.issue_checked_op(s, in_place)?;
            self.wait()?;
            // Test-only (NCCL_PERF_CORRUPT): damage one received element to prove the check works.
            crate::runner::fault::corrupt(
                &self.gpus,
                |g| self.data_ptrs(g, s, in_place, 0).1,
                s,
                in_place,
            )?;
            let counts = self.count_mismatches(s, in_place)?;
            let local: u64 = counts.iter().map(|(_, n)| n).sum();
            if local > 0 && self.report_errors(in_place) {
                self.errors += 1;
            }
            wrong = self
                .e
                .group
                .allreduce(self.tid, local as f64, Reduce::Sum)?;
            if wrong > 0.0 {
                // Every thread of every process sees the same `wrong`: all reduce where it was.
                if self.report_errors(in_place) {
                    let seen = WrongRanks::of_thread(&counts);
                    let seen = WrongRanks::reduced(self.e.group, self.tid, seen)?;
                    self.wrong_ranks = WrongRanks::merge(self.wrong_ranks, seen);
                }
                break;
            }
        }
        Ok(self.report_errors(in_place).then_some(wrong))
    }

    fn fill_ctx(&self, g: &Gpu, s: &Shape, in_place: bool, seed: u64) -> FillCtx {
        FillCtx {
            rank: g.rank(),
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
    pub(super) fn prepare(
        &self,
        s: &Shape,
        in_place: bool,
        seed: u64,
        inputs_only: bool,
    ) -> Result<()> {
        let ts = s.ts();
        for g in &self.gpus {
            let k = kernels(g)?;
            let expected = g.expected();
            let (_, recv) = self.data_ptrs(g, s, in_place, 0);
            let recv = g.recv().span(recv, s.counts.recv * ts)?;
            recv.memset_async(0, g.stream())?;
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
                        let (b, base) = match buf {
                            Buffer::Send => (g.send(), g.send().addr() + unalign),
                            Buffer::Recv => (g.recv(), g.recv().addr() + unalign),
                            Buffer::Expected => (expected, expected.addr()),
                        };
                        let p = b.span(base + (offset * ts) as u64, count * ts)?;
                        k.fill_input(s.dt, p, count as u64, ix0, op, rn, rme, seed, g.stream())?;
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
                        let p =
                            expected.span(expected.addr() + (offset * ts) as u64, count * ts)?;
                        k.fill_expected(s.dt, p, count as u64, ix0, op, rn, seed, g.stream())?;
                    }
                    Fill::ExpectedIsRecv => {
                        let to = expected.span(expected.addr(), recv.len())?;
                        to.copy_from_async(&recv, g.stream())?;
                    }
                }
            }
        }
        self.restore_context()
    }

    /// Each GPU's mismatches, as (its rank in the device lines' numbering, count).
    fn count_mismatches(&self, s: &Shape, in_place: bool) -> Result<Vec<(u64, u64)>> {
        let mut counts = Vec::with_capacity(self.gpus.len());
        let per_process = (self.e.opts.nthreads * self.e.opts.ngpus).max(1) as u64;
        let first = self.e.group.world_rank() as u64 * per_process;
        let reduces = self.e.coll.op_column().reduces();
        let tol = tolerance(s.dt, reduces.then_some(s.op));
        for g in &self.gpus {
            let k = kernels(g)?;
            let expected = g.expected();
            let counter = g.counter().span(g.counter().addr(), 8)?;
            let (_, recv) = self.data_ptrs(g, s, in_place, 0);
            let bytes = s.counts.recv * s.ts();
            counter.memset_async(0, g.stream())?;
            k.count_mismatches(
                s.dt,
                g.recv().span(recv, bytes)?,
                expected.span(expected.addr(), bytes)?,
                s.counts.recv as u64,
                tol,
                counter,
                g.stream(),
            )?;
            g.stream().synchronize()?;
            let mut n = [0u64];
            counter.copy_to_host(&mut n)?;
            counts.push((first + g.rank() as u64 % per_process, n[0]));
        }
        self.restore_context()?;
        Ok(counts)
    }

    pub(super) fn restore_context(&self) -> Result<()> {
        match self.gpus.first() {
            Some(g) if self.gpus.len() > 1 => g.ctx().make_current(),
            _ => Ok(()),
        }
    }
}

/// `g`'s validation kernels, with its context made current.
fn kernels(g: &Gpu) -> Result<&Kernels> {
    g.ctx().make_current()?;
    g.kernels()
        .ok_or_else(|| Error::Internal("validation kernels missing".into()))
}
