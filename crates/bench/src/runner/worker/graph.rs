//! CUDA graphs (`-G k`): the timed loop is captured once per measurement on every
//! GPU stream (thread-local capture mode), instantiated, and launched `k` times back to back;
//! the time per operation is the elapsed time / (n·m·k), the CPU time / (n·m). The validation
//! operation runs as its own one-operation graph. Warm-up and the sync operation are not
//! captured.
//!
//! Beyond upstream: with `-z 1/2` the per-operation waits are left out of the capture (a
//! capturing stream cannot be queried; nccl-tests fails there with a CUDA error), and the
//! launches are always waited for (nccl-tests skips the wait with `-z 1/2` and `-m 1`).

use super::Worker;
use crate::error::Result;
use crate::gpu::device::GraphExec;
use crate::gpu::op::BoundOp;
use crate::runner::engine::Shape;
use std::time::Instant;

/// The executable graphs of one capture, one per GPU, freed when dropped.
struct Graphs<'g>(Vec<GraphExec<'g>>);

impl Worker<'_> {
    /// Runs `enqueue` with every GPU stream of this thread captured into a graph; returns the
    /// instantiated graphs. A failure ends every capture and frees what was captured.
    fn capture(&self, enqueue: impl FnOnce() -> Result<()>) -> Result<Graphs<'_>> {
        let multi = self.gpus.len() > 1;
        let mut begun = 0;
        let mut result = Ok(());
        for g in &self.gpus {
            if multi && let Err(e) = g.ctx().make_current() {
                result = Err(e);
                break;
            }
            if let Err(e) = g.stream().begin_capture() {
                result = Err(e);
                break;
            }
            begun += 1;
        }
        if result.is_ok() {
            result = self.restore_context().and_then(|_| enqueue());
        }
        let mut graphs = Graphs(Vec::with_capacity(self.gpus.len()));
        for g in &self.gpus[..begun] {
            if multi {
                let _ = g.ctx().make_current();
            }
            if result.is_err() {
                g.stream().abandon_capture();
                continue;
            }
            match g.stream().end_capture() {
                Ok(exec) => graphs.0.push(exec),
                Err(e) => result = Err(e),
            }
        }
        self.restore_context()?;
        result.map(|_| graphs)
    }

    /// Launches every GPU's graph once, in GPU order.
    #[inline]
    fn launch(&self, graphs: &Graphs) -> Result<()> {
        let multi = self.gpus.len() > 1;
        for (g, exec) in self.gpus.iter().zip(&graphs.0) {
            if multi {
                g.ctx().make_current()?;
            }
            exec.launch(g.stream())?;
        }
        self.restore_context()
    }

    /// The timed loop as a graph: capture `n × m` operations, instantiate, meet the other ranks,
    /// then time `launches` launches. Returns (CPU time per operation, completion time per
    /// operation) in seconds, as [`Worker::timed_loop`] does.
    pub(super) fn graph_loop(
        &self,
        op: &BoundOp,
        n: u64,
        m: u64,
        launches: u64,
    ) -> Result<(f64, f64)> {
        let graphs = self.capture(|| self.enqueue_loop(op, n, m, true).map(|_| ()))?;
        self.e.group.barrier()?;
        let ops = (n * m) as f64;
        let start = Instant::now();
        for _ in 0..launches {
            self.launch(&graphs)?;
        }
        let cpu = start.elapsed().as_secs_f64() / ops;
        self.wait()?;
        let local = start.elapsed().as_secs_f64() / ops / launches as f64;
        Ok((cpu, local))
    }

    /// The validation operation: issued directly, or with `-G` captured and launched as a
    /// one-operation graph (the caller waits for it).
    pub(super) fn issue_checked_op(&self, s: &Shape, in_place: bool) -> Result<()> {
        if !self.e.opts.graph.is_on() {
            return self.issue_once(s, in_place);
        }
        let op = self.bind(s, in_place)?;
        let graph = self.capture(|| op.issue_first())?;
        self.launch(&graph)
        // Dropping the graph right after the launch is allowed: CUDA frees it once it has run.
    }
}
