//! The run's watchdog: a thread beside the benchmark that ends the process cleanly when the run
//! cannot go on and the benchmark thread cannot notice it — another process left the run (its
//! GPU operations would then wait forever inside NCCL), or a signal asks this one to stop
//! (Ctrl-C, or the launcher's SIGTERM after another rank died). It prints one line naming the
//! cause (the lost rank, or the signal), closes the `-J` JSON document with the rows completed
//! so far, and exits: 1 for a lost process (4 when a wait timed out), 128 + the signal number
//! for a signal (130 for SIGINT, 143 for SIGTERM).
//!
//! A lost process is looked for every 100 ms ([`Bootstrap::check_peers`]); when one is found,
//! the benchmark thread gets two seconds to end on its own first (its own error is more precise,
//! e.g. a launch problem every process reports at once). Signals are handled at once: launchers
//! follow SIGTERM with SIGKILL within a second or so.

use super::output::JsonFile;
use crate::bootstrap::Bootstrap;
use crate::error::Error;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// How often the watchdog looks.
const TICK: Duration = Duration::from_millis(100);

/// How long the benchmark thread may take to end on its own after a process was lost.
const GRACE: Duration = Duration::from_secs(2);

/// Test hook: seconds to stall before the run, as if busy on the GPUs (see [`test_stall`]).
pub const STALL_ENV: &str = "NCCL_PERF_TEST_STALL_S";

/// The last stop signal received (0: none). Written by the signal handler, which may only do
/// async-signal-safe work.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// The signals that stop a run cleanly.
const STOP_SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// Our handlers for [`STOP_SIGNALS`] while a run is guarded; the previous ones come back on drop.
struct Handlers(Vec<(libc::c_int, libc::sigaction)>);

impl Handlers {
    fn install() -> Handlers {
        let mut saved = Vec::new();
        for sig in STOP_SIGNALS {
            // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic, and
            // SA_RESETHAND makes a second signal act as if we had not been here.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                act.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut old) == 0 {
                    saved.push((sig, old));
                }
            }
        }
        Handlers(saved)
    }
}

impl Drop for Handlers {
    fn drop(&mut self) {
        for (sig, old) in &self.0 {
            // SAFETY: restores the action saved by `install`.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
    }
}

/// Why the watchdog stops the run.
enum Stop {
    /// A stop signal.
    Signal(libc::c_int),
    /// Another process left (or the bootstrap says the run is over).
    Lost(Error),
}

/// Runs `body` (the benchmark) with the watchdog beside it; returns what `body` returns, unless
/// the watchdog ends the process first.
pub fn guard<T>(boot: &dyn Bootstrap, json: Option<JsonFile>, body: impl FnOnce() -> T) -> T {
    let done = AtomicBool::new(false);
    let handlers = Handlers::install();
    let result = std::thread::scope(|s| {
        let watchdog = s.spawn(|| watch(boot, json, &done));
        let r = body();
        done.store(true, Ordering::SeqCst);
        watchdog.thread().unpark();
        r
    });
    drop(handlers);
    result
}

fn watch(boot: &dyn Bootstrap, json: Option<JsonFile>, done: &AtomicBool) {
    loop {
        std::thread::park_timeout(TICK);
        if done.load(Ordering::SeqCst) {
            return;
        }
        let stop = match SIGNAL.swap(0, Ordering::SeqCst) {
            0 => match boot.check_peers() {
                Ok(()) => continue,
                Err(e) => Stop::Lost(e),
            },
            sig => Stop::Signal(sig),
        };
        if let Stop::Lost(_) = stop {
            let until = Instant::now() + GRACE;
            while Instant::now() < until {
                std::thread::park_timeout(TICK);
                if done.load(Ordering::SeqCst) {
                    return;
                }
            }
        }
        end(stop, json.as_ref());
    }
}

/// Reports, closes the JSON document and exits without running exit handlers: the GPUs may be
/// stuck in an operation that will never finish, which CUDA's and NCCL's own teardown would
/// wait for.
fn end(stop: Stop, json: Option<&JsonFile>) -> ! {
    let host = crate::host::short_hostname();
    let (line, code) = match stop {
        Stop::Signal(sig) => (
            format!(
                "{host}: stopped by signal {sig} ({}); the run is incomplete{}",
                signal_name(sig),
                if sig == libc::SIGTERM {
                    " (a launcher sends SIGTERM when another process of the job failed)"
                } else {
                    ""
                }
            ),
            128 + sig,
        ),
        Stop::Lost(e) => (e.render(&host), i32::from(e.exit_code())),
    };
    if let Some(j) = json {
        j.abort();
    }
    let _ = std::io::stdout().flush();
    eprintln!("{line}");
    // SAFETY: ends the process at once; every file we wrote is flushed above.
    unsafe { libc::_exit(code) }
}

fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Test hook for the rank-fault tests: with `NCCL_PERF_TEST_STALL_S=<seconds>` the process
/// says so on stderr (with its rank and pid) and waits that long before the run, as a process
/// busy on its GPUs would, so a test can kill one process of a job and watch the others stop.
/// Not for production use; hidden from `-h`.
pub fn test_stall(boot: &dyn Bootstrap, program: &str) {
    let Some(secs) = std::env::var(STALL_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
    else {
        return;
    };
    eprintln!(
        "{program}: test hook {STALL_ENV}: rank {} pid {} stalls for {secs} s",
        boot.world_rank(),
        std::process::id()
    );
    std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
}
