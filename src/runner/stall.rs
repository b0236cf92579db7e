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

/// The environment variable.
pub const ENV: &str = crate::environment::TEST_STALL_MS.name;

/// The requested hold in milliseconds, if the variable is set to a positive integer.
pub fn from_env() -> Option<u64> {
    parse(std::env::var(ENV).ok().as_deref())
}

fn parse(v: Option<&str>) -> Option<u64> {
    v.and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
}

/// Enqueues the hold on every GPU's stream.
pub fn inject(gpus: &[Gpu], ms: u64) -> Result<()> {
    for g in gpus {
        g.ctx().make_current()?;
        g.stream().hold(ms)?;
    }
    if let Some(g) = gpus.first() {
        g.ctx().make_current()?;
    }
    Ok(())
}

/// Ends every hold now.
pub fn release() {
    crate::gpu::device::release_holds();
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
}
