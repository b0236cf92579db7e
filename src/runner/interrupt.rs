//! Ctrl-C and `kill`: SIGINT and SIGTERM stop a run cleanly instead of killing it mid-write.
//!
//! The handler only records the signal (and wakes a watchdog through a pipe, both
//! async-signal-safe). The benchmark threads notice it where they already wait: every stream
//! wait ([`super::Worker`]) and every rendezvous of the threads ([`super::ThreadGroup`]) check
//! [`pending`]; they abort their communicators and return [`Error::Interrupted`], the JSON file
//! is closed as after any failure, and the process exits with 128 + the signal (130 for SIGINT,
//! 143 for SIGTERM).
//!
//! Two safety nets keep a stuck run from ignoring the user: a second signal (a second or more
//! after the first; sooner it is the same request delivered twice) exits at once, and
//! the watchdog exits [`GRACE`] after the first one if the run has not ended by then (a call into
//! NCCL or a peer process that never returns).

use crate::error::{Error, signal_name};
use std::sync::Once;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

/// How long the run may take to stop after the first signal before the watchdog ends it.
pub const GRACE: Duration = Duration::from_secs(10);

/// The first signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Write end of the watchdog's pipe (-1: none).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// When the first signal came (monotonic milliseconds).
static FIRST_MS: AtomicU64 = AtomicU64::new(0);

/// A second signal this soon after the first is the same request delivered twice (`timeout`
/// signals the child and then its process group; launchers forward to every process), not the
/// user insisting.
const DUPLICATE_MS: u64 = 1000;

/// Monotonic milliseconds (clock_gettime is async-signal-safe).
fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into the live struct above.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

extern "C" fn on_signal(sig: libc::c_int) {
    let now = now_ms();
    if SIGNAL.swap(sig, Ordering::SeqCst) != 0 {
        if now.saturating_sub(FIRST_MS.load(Ordering::SeqCst)) < DUPLICATE_MS {
            return;
        }
        // A later second signal: the user insists.
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(128 + sig) };
    }
    FIRST_MS.store(now, Ordering::SeqCst);
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; the byte outlives the call.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Installs the SIGINT and SIGTERM handlers and starts the watchdog (once per process).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        start_watchdog();
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction with a valid handler and an empty mask is well-formed;
            // the handler only touches atomics and async-signal-safe calls.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    });
}

fn start_watchdog() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    let [read_fd, write_fd] = fds;
    let spawned = std::thread::Builder::new()
        .name("nccl-perf-signal".into())
        .spawn(move || {
            loop {
                let mut byte = 0u8;
                // SAFETY: reads one byte into a live buffer; blocks until the handler writes.
                let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
                if n != 1 {
                    return;
                }
                std::thread::sleep(GRACE);
                let sig = SIGNAL.load(Ordering::SeqCst);
                if sig == 0 {
                    // Cleared meanwhile (tests only): keep watching.
                    continue;
                }
                eprintln!(
                    "{}: still running {} s after {}; exiting now",
                    crate::host::short_hostname(),
                    GRACE.as_secs(),
                    signal_name(sig)
                );
                // SAFETY: ends the process without waiting for threads that are stuck.
                unsafe { libc::_exit(128 + sig) };
            }
        });
    if spawned.is_ok() {
        WAKE_FD.store(write_fd, Ordering::SeqCst);
    }
}

/// The signal received, if any (one relaxed load: cheap enough for every poll of a wait).
#[inline]
pub fn pending() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// [`Error::Interrupted`] when a signal was received.
#[inline]
pub fn check() -> crate::error::Result<()> {
    match pending() {
        None => Ok(()),
        Some(signal) => Err(Error::Interrupted {
            signal,
            during: String::new(),
        }),
    }
}

/// Forgets a received signal. For tests that raise one and go on in the same process.
#[doc(hidden)]
pub fn clear() {
    SIGNAL.store(0, Ordering::SeqCst);
}
