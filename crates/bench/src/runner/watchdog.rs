//! The run's watchdog: a thread beside the benchmark that ends the process cleanly when the run
//! cannot go on and the benchmark thread cannot notice it — another process left the run (its
//! GPU operations would then wait forever inside NCCL), or a signal asks this one to stop
//! (Ctrl-C, or the launcher's SIGTERM after another rank died). It prints one line naming the
//! cause (the lost rank, or the signal), closes the `-J` JSON document with the rows completed
//! so far, and exits: 1 for a lost process (4 when a wait timed out), 128 + the signal number
//! for a signal (130 for SIGINT, 143 for SIGTERM).
//!
//! It also runs the hang watch (`hang/`) every tick: when the run is hung (no operation
//! finishes on any rank for the stall limit), it prints the verdict, records it in the JSON,
//! tells the other processes (rank 0) and exits 4.
//!
//! A lost process is looked for every 100 ms ([`Bootstrap::check_peers`]); when one is found,
//! the benchmark thread gets two seconds to end on its own first (its own error is more precise,
//! e.g. a launch problem every process reports at once). Signals are handled at once: launchers
//! follow SIGTERM with SIGKILL within a second or so.

use super::output::JsonFile;
use crate::bootstrap::Bootstrap;
use crate::error::Error;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the watchdog looks.
const TICK: Duration = Duration::from_millis(100);

/// How long the benchmark thread may take to end on its own after a process was lost.
const GRACE: Duration = Duration::from_secs(2);

/// How long the benchmark threads get to stop on their own after a stop signal (they notice it
/// within milliseconds in every wait and rendezvous) before the watchdog closes the JSON file and
/// ends the process.
const SIGNAL_GRACE: Duration = Duration::from_secs(2);

/// Why the watchdog stops the run.
enum Stop {
    /// A stop signal.
    Signal(libc::c_int),
    /// Another process left (or the bootstrap says the run is over).
    Lost(Error),
    /// A benchmark thread failed and another one did not stop (stuck in a library call).
    Stuck(Error),
    /// The hang watch found the run hung.
    Hung(Box<super::hang::Hang>),
}

/// Runs `body` (the benchmark) with the watchdog beside it; returns what `body` returns, unless
/// the watchdog ends the process first.
pub fn guard<T>(
    boot: &dyn Bootstrap,
    json: Vec<JsonFile>,
    hang: Option<super::hang::Watch>,
    body: impl FnOnce() -> T,
) -> T {
    let done = AtomicBool::new(false);
    // The signal handlers are `interrupt`'s; this thread only watches what they record.
    super::interrupt::install();
    std::thread::scope(|s| {
        let watchdog = s.spawn(|| watch(boot, json, hang, &done));
        // Also when `body` panics: the scope then waits for the watchdog.
        let _done = SetOnDrop(&done, watchdog.thread());
        body()
    })
}

/// Sets the flag and wakes the watchdog when dropped.
struct SetOnDrop<'a>(&'a AtomicBool, &'a std::thread::Thread);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
        self.1.unpark();
    }
}

fn watch(
    boot: &dyn Bootstrap,
    json: Vec<JsonFile>,
    mut hang: Option<super::hang::Watch>,
    done: &AtomicBool,
) {
    let mut signalled: Option<Instant> = None;
    loop {
        std::thread::park_timeout(TICK);
        if done.load(Ordering::SeqCst) {
            return;
        }
        if let Some(h) = hang.as_mut().and_then(|w| w.tick(boot)) {
            if let Some(why) = &h.tell {
                boot.end_hung(why);
            }
            end(Stop::Hung(Box::new(h)), &json);
        }
        if let Some(sig) = super::interrupt::pending() {
            let since = signalled.get_or_insert_with(Instant::now);
            if since.elapsed() >= SIGNAL_GRACE {
                end(Stop::Signal(sig), &json);
            }
            continue;
        }
        if let Some(err) = super::interrupt::failure() {
            let since = signalled.get_or_insert_with(Instant::now);
            if since.elapsed() >= SIGNAL_GRACE {
                end(Stop::Stuck(err), &json);
            }
            continue;
        }
        let stop = match boot.check_peers() {
            Ok(()) => continue,
            Err(e) => Stop::Lost(e.into()),
        };
        let until = Instant::now() + GRACE;
        while Instant::now() < until {
            std::thread::park_timeout(TICK);
            if done.load(Ordering::SeqCst) {
                return;
            }
        }
        end(stop, &json);
    }
}

/// Reports, closes the JSON document and exits without running exit handlers: the GPUs may be
/// stuck in an operation that will never finish, which CUDA's and NCCL's own teardown would
/// wait for.
fn end(stop: Stop, json: &[JsonFile]) -> ! {
    let host = crate::host::short_hostname();
    let (line, code) = match stop {
        Stop::Signal(sig) => (
            format!(
                "{host}: stopped by signal {sig} ({}); the run is incomplete{}",
                crate::error::signal_name(sig),
                if sig == libc::SIGTERM {
                    " (a launcher sends SIGTERM when another process of the job failed)"
                } else {
                    ""
                }
            ),
            128 + sig,
        ),
        Stop::Lost(e) => (e.render(&host), i32::from(e.exit_code())),
        Stop::Stuck(e) => {
            e.report();
            (String::new(), i32::from(e.exit_code()))
        }
        Stop::Hung(h) => {
            for j in json {
                j.set_hang(h.record.clone());
            }
            // --health: the collective that hung is judged so, in its lines and files.
            let line = h.record["line"].as_str().unwrap_or("hang");
            if let Some(text) = super::health::on_hang(line) {
                print!("{text}");
            }
            (h.lines.join("\n"), i32::from(crate::error::code::TIMEOUT))
        }
    };
    // Every section's document (--collectives): those finished are closed already.
    for j in json {
        j.abort();
    }
    let _ = std::io::stdout().flush();
    if !line.is_empty() {
        crate::eline!("{line}");
    }
    // Ends the process at once (no exit handlers); every file we wrote is flushed above.
    signal_hook::low_level::exit(code)
}
