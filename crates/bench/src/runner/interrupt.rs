//! Why a run must stop before its end, whichever thread notices it: a stop signal (Ctrl-C,
//! `kill`) or a failed benchmark thread.
//!
//! SIGINT and SIGTERM stop a run cleanly instead of killing it mid-write. `signal-hook` delivers
//! them to a thread of ours, which records the first one. The benchmark threads notice it where
//! they already wait: every stream wait ([`super::Worker`]) and every rendezvous of the threads
//! ([`super::ThreadGroup`]) call [`check`]; they abort their communicators and return
//! [`Error::Interrupted`], the JSON file is closed as after any failure, and the process exits
//! with 128 + the signal (130 for SIGINT, 143 for SIGTERM).
//!
//! A benchmark thread that fails with `-t` > 1 is recorded the same way ([`thread_failed`]): the
//! other threads, which would otherwise wait for it forever, see it in the same places and
//! return [`Error::ThreadStopped`]; the failure itself is what the run reports.
//!
//! Two safety nets keep a stuck run from ignoring the user: a second signal (a second or more
//! after the first; sooner it is the same request delivered twice) exits at once, and the
//! process exits [`GRACE`] after the first one if the run has not ended by then (a call into
//! NCCL or a peer process that never returns). Both end the process from here, without running
//! exit handlers: they are the one way out of a thread stuck in a library call.

use crate::error::{Error, signal_name};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// How long the run may take to stop after the first signal before the process ends anyway.
pub const GRACE: Duration = Duration::from_secs(10);

/// The first signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The first failure of a benchmark thread, while the others stop.
static FAILURE: Mutex<Option<Error>> = Mutex::new(None);
/// Whether [`FAILURE`] holds one (a relaxed load for every poll of a wait).
static FAILED: AtomicBool = AtomicBool::new(false);

/// A second signal this soon after the first is the same request delivered twice (`timeout`
/// signals the child and then its process group; launchers forward to every process), not the
/// user insisting.
const DUPLICATE: Duration = Duration::from_secs(1);

/// Installs the SIGINT and SIGTERM handling (once per process).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(mut signals) = Signals::new([SIGINT, SIGTERM]) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("nccl-perf-signal".into())
            .spawn(move || {
                let mut first = Instant::now();
                for sig in signals.forever() {
                    if SIGNAL.swap(sig, Ordering::SeqCst) == 0 {
                        first = Instant::now();
                        start_grace_timer();
                    } else if first.elapsed() >= DUPLICATE {
                        // A later second signal: the user insists.
                        signal_hook::low_level::exit(128 + sig);
                    }
                }
            });
    });
}

/// Ends the process [`GRACE`] after a signal unless the run ended (or the signal was cleared).
fn start_grace_timer() {
    let _ = std::thread::Builder::new()
        .name("nccl-perf-grace".into())
        .spawn(|| {
            std::thread::sleep(GRACE);
            if let Some(sig) = pending() {
                crate::eline!(
                    "{}: still running {} s after {}; exiting now",
                    crate::host::short_hostname(),
                    GRACE.as_secs(),
                    signal_name(sig)
                );
                signal_hook::low_level::exit(128 + sig);
            }
        });
}

/// The signal received, if any (one relaxed load: cheap enough for every poll of a wait).
#[inline]
pub fn pending() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// Records the failure of a benchmark thread, so that the others stop (the first one is kept).
pub fn thread_failed(err: &Error) {
    if let Ok(mut f) = FAILURE.lock()
        && f.is_none()
    {
        *f = Some(err.clone());
        FAILED.store(true, Ordering::SeqCst);
    }
}

/// The failure of a benchmark thread, if one was recorded.
pub fn failure() -> Option<Error> {
    FAILURE.lock().ok().and_then(|f| f.clone())
}

/// [`Error::Interrupted`] when a signal was received, [`Error::ThreadStopped`] when another
/// benchmark thread failed.
#[inline]
pub fn check() -> crate::error::Result<()> {
    if let Some(signal) = pending() {
        return Err(Error::Interrupted {
            signal,
            during: String::new(),
        });
    }
    if FAILED.load(Ordering::Relaxed) {
        return Err(Error::ThreadStopped);
    }
    Ok(())
}

/// Forgets a received signal. For tests that raise one and go on in the same process.
#[doc(hidden)]
pub fn clear() {
    SIGNAL.store(0, Ordering::SeqCst);
}
