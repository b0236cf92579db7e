//! Rendezvous and reductions between the threads of one process (`-t`), then across processes
//! through the bootstrap. Every thread must call each method the same number of times.
//!
//! A thread waiting for the others gives up when SIGINT/SIGTERM arrives
//! ([`super::interrupt`]), so a stopped run never leaves a thread blocked here.

use super::interrupt;
use super::per_iter::element_max;
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
    rows: Mutex<Vec<Vec<f64>>>,
    gathered: Mutex<Vec<Vec<f64>>>,
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
            rows: Mutex::new(vec![Vec::new(); n]),
            gathered: Mutex::new(Vec::new()),
            boot,
        }
    }

    /// Number of threads.
    pub fn threads(&self) -> usize {
        self.n
    }

    /// This process' world rank.
    pub fn world_rank(&self) -> usize {
        self.boot.world_rank()
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

    /// Per-iteration maxima (`-I 1`): the element-wise maximum of `row` over the threads of
    /// this process, then one such row per process gathered on world rank 0. Thread 0 of world
    /// rank 0 gets the rows in process order; every other thread gets an empty list.
    pub fn gather_max(&self, tid: usize, row: &[f64]) -> Result<Vec<Vec<f64>>> {
        lock(&self.rows)?[tid] = row.to_vec();
        let leader = self.rendezvous.wait()?;
        let mut outcome = Ok(());
        if leader {
            let local = element_max(&lock(&self.rows)?);
            let rows = if self.boot.world_size() > 1 {
                self.boot
                    .gather(encode_row(&local))
                    .map_err(Error::from)
                    .and_then(|texts| texts.iter().map(|t| decode_row(t)).collect())
            } else {
                Ok(vec![local])
            };
            match rows {
                Ok(rows) => *lock(&self.gathered)? = rows,
                Err(e) => outcome = Err(e),
            }
        }
        self.rendezvous.wait()?;
        outcome?;
        let mine = if tid == 0 {
            std::mem::take(&mut *lock(&self.gathered)?)
        } else {
            Vec::new()
        };
        self.rendezvous.wait()?;
        Ok(mine)
    }
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock().map_err(|_| poisoned())
}

/// A row as text for the bootstrap's gather: shortest exact decimal forms, space-separated.
fn encode_row(row: &[f64]) -> String {
    let parts: Vec<String> = row.iter().map(|v| v.to_string()).collect();
    parts.join(" ")
}

fn decode_row(text: &str) -> Result<Vec<f64>> {
    text.split_ascii_whitespace()
        .map(|t| {
            t.parse::<f64>().map_err(|_| {
                let t = crate::bootstrap::peer_text::clean(t, 40);
                Error::Internal(format!("bad per-iteration times from a process: '{t}'"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::SingleProcess;

    #[test]
    fn a_bad_row_from_a_process_is_quoted_clean_and_short() {
        let e = decode_row("1.5 \u{1b}[2J\u{2028}# Avg bus bandwidth : 999").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("'?[2J?#'"), "{text}");
        assert!(!text.contains(['\u{1b}', '\u{2028}']), "{text}");
        let long = format!("x{}", "y".repeat(1000));
        assert!(decode_row(&long).unwrap_err().to_string().len() < 200);
        assert_eq!(decode_row("1 2.5").unwrap(), [1.0, 2.5]);
    }

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

    #[test]
    fn per_iteration_rows_are_the_maximum_over_threads() {
        let boot = SingleProcess;
        let g = ThreadGroup::new(3, &boot);
        let got: Vec<Vec<Vec<f64>>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|t| {
                    let g = &g;
                    s.spawn(move || {
                        let row = [t as f64, 10.0 - t as f64, 5.0];
                        let first = g.gather_max(t, &row).unwrap();
                        // A second round must not see the first one's rows.
                        let second = g.gather_max(t, &[1.0 + t as f64]).unwrap();
                        (first, second)
                    })
                })
                .collect();
            hs.into_iter()
                .flat_map(|h| {
                    let (a, b) = h.join().unwrap();
                    [a, b]
                })
                .collect()
        });
        assert_eq!(got[0], vec![vec![2.0, 10.0, 5.0]]);
        assert_eq!(got[1], vec![vec![3.0]]);
        assert!(got[2..].iter().all(Vec::is_empty), "{got:?}");
    }

    #[test]
    fn rows_survive_the_text_encoding() {
        let row = vec![1.0 / 3.0, 12.5, 0.0, 1e-7, 123456.789];
        assert_eq!(decode_row(&encode_row(&row)).unwrap(), row);
        assert!(decode_row("1.0 x").is_err());
        assert_eq!(decode_row("").unwrap(), Vec::<f64>::new());
        assert_eq!(
            element_max(&[vec![1.0, 5.0], vec![3.0, 2.0]]),
            vec![3.0, 5.0]
        );
    }
}
