//! A launcher library whose calls may block without end (`MPI_Init`, `PMI2_KVS_Fence`) kept on
//! a thread of its own: every call is handed to that thread and waited for until the engine's
//! deadline at most. A call still blocked then is left behind on its thread (the process ends
//! soon after, and the launcher ends the rest of the job).

use crate::error::{Error, Result};
use std::sync::mpsc;
use std::time::Instant;

type Job<L> = Box<dyn FnOnce(&L) + Send>;

/// The thread that owns a library `L` and runs its calls in order.
pub struct OnThread<L> {
    jobs: mpsc::Sender<Job<L>>,
    /// The library's name in messages (`MPI`, `PMI-2`).
    label: &'static str,
}

impl<L: 'static> OnThread<L> {
    /// Moves `lib` onto a new thread named `thread`.
    pub fn start(lib: L, label: &'static str, thread: &str) -> Result<Self>
    where
        L: Send,
    {
        let (tx, rx) = mpsc::channel::<Job<L>>();
        std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || {
                for job in rx {
                    job(&lib);
                }
            })
            .map_err(|e| Error::Internal(format!("{label}: cannot start a thread: {e}")))?;
        Ok(OnThread { jobs: tx, label })
    }

    /// Runs `f` on the library's thread and waits for it until `deadline`. `engine` names the
    /// engine in messages; `what` the call. An error `f` returns is a launch error; running out
    /// of time says that a process of the job did not arrive (exit 4).
    pub fn call<T: Send + 'static>(
        &self,
        engine: &str,
        deadline: Instant,
        what: &str,
        f: impl FnOnce(&L) -> std::result::Result<T, String> + Send + 'static,
    ) -> Result<T> {
        let label = self.label;
        let (tx, rx) = mpsc::channel();
        self.jobs
            .send(Box::new(move |l: &L| {
                let _ = tx.send(f(l));
            }))
            .map_err(|_| Error::Internal(format!("{label}: {what}: the {label} thread is gone")))?;
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Error::Launch(format!("{engine}: {e}"))),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Peers {
                msg: format!(
                    "{engine}: timed out in {what} (NCCL_PERF_BOOTSTRAP_TIMEOUT): a process of \
                     the job did not arrive"
                ),
                timed_out: true,
                lost: Vec::new(),
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(Error::Internal(format!("{label}: {what}'s call failed")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn calls_run_in_order_and_a_blocked_one_ends_at_the_deadline() {
        let t = OnThread::start(5u32, "LIB", "test-lib").unwrap();
        let far = Instant::now() + Duration::from_secs(10);
        assert_eq!(t.call("engine", far, "get", |v| Ok(*v + 1)).unwrap(), 6);
        let e = t.call::<()>("engine", far, "fail", |_| Err("no".into()));
        assert_eq!(e.unwrap_err().to_string(), "engine: no");
        let start = Instant::now();
        let soon = start + Duration::from_millis(200);
        let e = t.call("engine", soon, "fence", |_| {
            std::thread::sleep(Duration::from_secs(2));
            Ok(())
        });
        assert!(start.elapsed() < Duration::from_secs(1));
        let e = e.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Peers {
                    timed_out: true,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("timed out in fence"), "{e}");
    }
}
