//! Rendezvous and reductions between the threads of one process (`-t`), then across processes
//! through the bootstrap. Every thread must call each method the same number of times.
//!
//! A thread waiting for the others gives up when SIGINT/SIGTERM arrives
//! ([`super::interrupt`]), so a stopped run never leaves a thread blocked here.

use super::interrupt;
use crate::bootstrap::{Bootstrap, Reduce};
use crate::error::{Error, Result};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How often a waiting thread looks for a signal.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// A reusable barrier for `n` threads whose waits end early on a signal.
struct Rendezvous {
    n: usize,
    /// (threads arrived in this round, round number)
    state: Mutex<(usize, u64)>,
    cv: Condvar,
}

impl Rendezvous {
    fn new(n: usize) -> Rendezvous {
        Rendezvous {
            n,
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
        }
    }

    /// Waits for all `n` threads; true for exactly one of them (the last to arrive).
    fn wait(&self) -> Result<bool> {
        let mut st = self.state.lock().map_err(|_| poisoned())?;
        let round = st.1;
        st.0 += 1;
        if st.0 == self.n {
            *st = (0, round.wrapping_add(1));
            self.cv.notify_all();
            return Ok(true);
        }
        loop {
            let (guard, _) = self
                .cv
                .wait_timeout(st, SIGNAL_POLL)
                .map_err(|_| poisoned())?;
            st = guard;
            if st.1 != round {
                return Ok(false);
            }
            interrupt::check()?;
        }
    }
}

fn poisoned() -> Error {
    Error::Internal("a thread of this process failed".into())
}

/// The threads of this process.
pub struct ThreadGroup<'a> {
    n: usize,
    rendezvous: Rendezvous,
    slots: Mutex<Vec<f64>>,
    result: Mutex<f64>,
    boot: &'a dyn Bootstrap,
}

impl<'a> ThreadGroup<'a> {
    /// A group of `n` threads over the given processes.
    pub fn new(n: usize, boot: &'a dyn Bootstrap) -> ThreadGroup<'a> {
        ThreadGroup {
            n,
            rendezvous: Rendezvous::new(n),
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
        if self.rendezvous.wait()? {
            // The leader's outcome is published after the second wait.
            let r = self.boot.barrier();
            *lock(&self.result)? = if r.is_ok() { 0.0 } else { f64::NAN };
        }
        self.rendezvous.wait()?;
        if lock(&self.result)?.is_nan() {
            return Err(Error::Internal(
                "a process left the run during a barrier".into(),
            ));
        }
        Ok(())
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
        lock(&self.slots)?[tid] = v;
        let leader = self.rendezvous.wait()?;
        let mut outcome = Ok(());
        if leader {
            let local = {
                let slots = lock(&self.slots)?;
                slots[1..].iter().fold(slots[0], |a, b| op.apply(a, *b))
            };
            let global = if across {
                self.boot.allreduce(local, op)
            } else {
                Ok(local)
            };
            match global {
                Ok(g) => *lock(&self.result)? = g,
                Err(e) => outcome = Err(e),
            }
        }
        self.rendezvous.wait()?;
        outcome?;
        let r = *lock(&self.result)?;
        // Nobody may overwrite the result before everyone has read it.
        self.rendezvous.wait()?;
        Ok(r)
    }
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock().map_err(|_| poisoned())
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
