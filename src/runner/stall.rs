//! Test only: `NCCL_PERF_TEST_STALL_MS=N` holds every stream of the run for N milliseconds,
//! once, right before the first timed loop, so that the `-T` timeout path (abort the
//! communicators, print the timeout line, exit 4) can be exercised on a healthy GPU machine.
//! Deliberately absent from `-h`; `ci/gpu-issue5.sh` uses it.
//!
//! The hold is a host function enqueued on each stream (`cuLaunchHostFunc`), so the stream is
//! really busy and nothing but the stream is affected. It ends early once [`release`] is called
//! (a timeout or a signal), so that aborting the communicators never waits for it.

use super::setup::Gpu;
use crate::error::Result;
use crate::gpu::driver;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The environment variable.
pub const ENV: &str = "NCCL_PERF_TEST_STALL_MS";

static RELEASED: AtomicBool = AtomicBool::new(false);

/// The requested hold in milliseconds, if the variable is set to a positive integer.
pub fn from_env() -> Option<u64> {
    parse(std::env::var(ENV).ok().as_deref())
}

fn parse(v: Option<&str>) -> Option<u64> {
    v.and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
}

/// The host function: sleeps until `ms` (passed as the pointer value) elapsed or [`release`].
unsafe extern "C" fn hold(arg: *mut c_void) {
    let ms = arg as usize as u64;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(ms) && !RELEASED.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Enqueues the hold on every GPU's stream.
pub fn inject(gpus: &[Gpu], ms: u64) -> Result<()> {
    for g in gpus {
        driver::set_current(g.ctx)?;
        // SAFETY: the argument is a plain integer carried in the pointer, never dereferenced;
        // `hold` calls no CUDA function.
        unsafe { driver::launch_host_func(g.stream, hold, ms as usize as *mut c_void)? };
    }
    if let Some(g) = gpus.first() {
        driver::set_current(g.ctx)?;
    }
    Ok(())
}

/// Ends every hold now.
pub fn release() {
    RELEASED.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_positive_integers_stall() {
        assert_eq!(parse(Some("2500")), Some(2500));
        assert_eq!(parse(Some(" 10 ")), Some(10));
        assert_eq!(parse(Some("0")), None);
        assert_eq!(parse(Some("-5")), None);
        assert_eq!(parse(Some("soon")), None);
        assert_eq!(parse(None), None);
    }

    #[test]
    fn a_hold_lasts_until_its_time_or_the_release() {
        let t = Instant::now();
        // SAFETY: `hold` reads the pointer as an integer only.
        unsafe { hold(20 as *mut c_void) };
        assert!(t.elapsed() >= Duration::from_millis(20));
        release();
        let t = Instant::now();
        // SAFETY: as above.
        unsafe { hold(60_000 as *mut c_void) };
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
