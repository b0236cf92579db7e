//! Test hooks, compiled only with the cargo feature `test-hooks` (release builds do not enable
//! it; `-h` does not list them). The times are milliseconds; each is read once:
//!
//! - `NCCL_PERF_TEST_PAUSE_MS=N`: every process says so on stderr and waits N ms after the
//!   bootstrap, before any GPU work, as a process busy on its GPUs would, so that a test can kill
//!   one process of a job and watch the others stop (`tests/rank_faults.rs`).
//! - `NCCL_PERF_TEST_HOST_STOP_OP=K`: the benchmark thread stops (for an hour, heartbeats
//!   going on) before it enqueues operation K of the run, so that the hang watch's "never
//!   started" verdict can be shown with real NCCL (`ci/gpu-hang.sh`).
//! - `NCCL_PERF_TEST_STALL_MS=N`: holds every stream of the run for N ms, once, right before the
//!   first timed loop, so that the `-T` timeout path (abort the communicators, print the timeout
//!   line, exit 4) can be exercised on a healthy GPU machine (`ci/gpu-timing-options.sh`). The hold is a
//!   host function enqueued on each stream (`Stream::hold` of the GPU layer), so the stream is
//!   really busy and nothing but the stream is affected. It ends early once [`release`] is
//!   called (a timeout or a signal), so that aborting the communicators never waits for it.

use super::setup::Gpu;
use crate::bootstrap::Bootstrap;
use crate::environment;
use crate::error::Result;
use std::sync::OnceLock;
use std::time::Duration;

/// The hooks, read once.
struct Hooks {
    /// `NCCL_PERF_TEST_PAUSE_MS`.
    pause_ms: Option<u64>,
    /// `NCCL_PERF_TEST_STALL_MS`.
    stall_ms: Option<u64>,
    /// `NCCL_PERF_TEST_HOST_STOP_OP`.
    host_stop_op: Option<u64>,
}

fn hooks() -> &'static Hooks {
    static HOOKS: OnceLock<Hooks> = OnceLock::new();
    HOOKS.get_or_init(|| Hooks {
        pause_ms: parse(environment::TEST_PAUSE_MS.get().as_deref()),
        stall_ms: parse(environment::TEST_STALL_MS.get().as_deref()),
        host_stop_op: parse(environment::TEST_HOST_STOP_OP.get().as_deref()),
    })
}

/// A positive whole number of milliseconds; anything else is off.
fn parse(v: Option<&str>) -> Option<u64> {
    v.and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
}

/// `NCCL_PERF_TEST_PAUSE_MS`: says so on stderr (with the rank and pid) and waits, as a process
/// busy on its GPUs would.
pub fn pause(boot: &dyn Bootstrap, program: &str) {
    let Some(ms) = hooks().pause_ms else {
        return;
    };
    crate::eline!(
        "{program}: test hook {}: rank {} pid {} pauses for {ms} ms",
        environment::TEST_PAUSE_MS.name,
        boot.world_rank(),
        std::process::id()
    );
    std::thread::sleep(Duration::from_millis(ms.min(3_600_000)));
}

/// `NCCL_PERF_TEST_STALL_MS`: the hold in milliseconds, if set (the first timed loop of each
/// thread takes it).
pub fn stall_ms() -> Option<u64> {
    hooks().stall_ms
}

/// `NCCL_PERF_TEST_HOST_STOP_OP`: before enqueuing operation `n` of the run (1 = the first),
/// the thread that would enqueue it says so on stderr and stops for an hour (its heartbeats go
/// on): a host thread that never enqueues the next operation, for the hang watch.
#[inline]
pub fn before_operation(n: u64) {
    if hooks().host_stop_op != Some(n) {
        return;
    }
    crate::eline!(
        "test hook {}: this thread stops before enqueuing operation {n}",
        environment::TEST_HOST_STOP_OP.name
    );
    std::thread::sleep(Duration::from_secs(3600));
}

/// Enqueues the hold on every GPU's stream, saying so on stderr.
pub fn inject(gpus: &[Gpu], ms: u64) -> Result<()> {
    crate::eline!(
        "test hook {}: holding every stream for {ms} ms",
        environment::TEST_STALL_MS.name
    );
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
