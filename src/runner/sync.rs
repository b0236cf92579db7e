//! Rendezvous and reductions between the threads of one process (`-t`), then across processes
//! through the bootstrap. Every thread must call each method the same number of times.

use crate::bootstrap::{Bootstrap, Reduce};
use crate::error::{Error, Result};
use std::sync::{Barrier, Mutex};

/// The threads of this process.
pub struct ThreadGroup<'a> {
    n: usize,
    barrier: Barrier,
    slots: Mutex<Vec<f64>>,
    result: Mutex<f64>,
    boot: &'a dyn Bootstrap,
}

impl<'a> ThreadGroup<'a> {
    /// A group of `n` threads over the given processes.
    pub fn new(n: usize, boot: &'a dyn Bootstrap) -> ThreadGroup<'a> {
        ThreadGroup {
            n,
            barrier: Barrier::new(n),
            slots: Mutex::new(vec![0.0; n]),
            result: Mutex::new(0.0),
            boot,
        }
    }

    /// Number of threads.
    pub fn threads(&self) -> usize {
        self.n
    }

    /// Waits for all threads, then for all processes.
    pub fn barrier(&self) -> Result<()> {
        if self.barrier.wait().is_leader() {
            // The leader's outcome is published after the second wait.
            let r = self.boot.barrier();
            *self.lock_result()? = if r.is_ok() { 0.0 } else { f64::NAN };
        }
        self.barrier.wait();
        if self.lock_result()?.is_nan() {
            return Err(Error::Internal(
                "a process left the run during a barrier".into(),
            ));
        }
        Ok(())
    }

    fn lock_result(&self) -> Result<std::sync::MutexGuard<'_, f64>> {
        self.result
            .lock()
            .map_err(|_| Error::Internal("a thread of this process failed".into()))
    }

    /// Reduces `v` over every thread of every process; all threads get the result.
    pub fn allreduce(&self, tid: usize, v: f64, op: Reduce) -> Result<f64> {
        self.reduce(tid, v, op, true)
    }

    /// Reduces `v` over the threads of this process only.
    pub fn allreduce_local(&self, tid: usize, v: f64, op: Reduce) -> Result<f64> {
        self.reduce(tid, v, op, false)
    }

    fn reduce(&self, tid: usize, v: f64, op: Reduce, across: bool) -> Result<f64> {
        self.slots
            .lock()
            .map_err(|_| Error::Internal("a thread of this process failed".into()))?[tid] = v;
        let leader = self.barrier.wait().is_leader();
        let mut outcome = Ok(());
        if leader {
            let local = {
                let slots = self
                    .slots
                    .lock()
                    .map_err(|_| Error::Internal("a thread of this process failed".into()))?;
                slots[1..].iter().fold(slots[0], |a, b| op.apply(a, *b))
            };
            let global = if across {
                self.boot.allreduce(local, op)
            } else {
                Ok(local)
            };
            match global {
                Ok(g) => *self.lock_result()? = g,
                Err(e) => outcome = Err(e),
            }
        }
        self.barrier.wait();
        outcome?;
        let r = *self.lock_result()?;
        // Nobody may overwrite the result before everyone has read it.
        self.barrier.wait();
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::SingleProcess;

    #[test]
    fn threads_agree_on_reductions() {
        let boot = SingleProcess;
        let g = ThreadGroup::new(4, &boot);
        let results: Vec<(f64, f64, f64)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|t| {
                    let g = &g;
                    s.spawn(move || {
                        g.barrier().unwrap();
                        let sum = g.allreduce(t, t as f64 + 1.0, Reduce::Sum).unwrap();
                        let min = g.allreduce(t, t as f64 + 1.0, Reduce::Min).unwrap();
                        let max = g.allreduce(t, t as f64 + 1.0, Reduce::Max).unwrap();
                        (sum, min, max)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            results.iter().all(|r| *r == (10.0, 1.0, 4.0)),
            "{results:?}"
        );
    }
}
