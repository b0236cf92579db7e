//! NCCL plugins built into the programs (`nccl-perf-capture`): `--explain`'s profiler and
//! tuner, and the hang watch's view of NCCL's network steps through the same profiler.
//! Pointing NCCL at them sets environment variables, which is only sound while the process has
//! one thread; [`install`] is called from the start-up, before any thread and before libnccl
//! is loaded.

use std::sync::OnceLock;

/// Why the hang watch does not see NCCL's network steps (`None`: it does, or it is off).
static UNWATCHED: OnceLock<Option<String>> = OnceLock::new();

/// Points NCCL at the built-in plugins: profiler and tuner for `explain`, unless plugins of
/// those kinds are configured (`crates/capture/src/ffi/install.rs`); the profiler alone for the
/// hang watch (`watch`) otherwise. Call it from the single-threaded start-up only.
pub fn install(explain: bool, watch: bool) {
    let unwatched = if explain {
        // SAFETY: the start-up calls this before it starts any thread (the benchmark threads,
        // the bootstrap's, the watchdog) and before NCCL is loaded, as `install` requires.
        let i = unsafe { nccl_perf_capture::install() };
        match (&i.profiler, watch) {
            (None, true) => {
                nccl_perf_capture::links::enable();
                None
            }
            (Some(why), true) => Some(why.clone()),
            (_, false) => None,
        }
    } else if watch {
        // SAFETY: as above.
        unsafe { nccl_perf_capture::install_profiler() }
    } else {
        None
    };
    let _ = UNWATCHED.set(unwatched);
}

/// Why the hang watch does not see NCCL's network steps, when it is on and does not.
pub fn unwatched() -> Option<&'static str> {
    UNWATCHED.get().and_then(|u| u.as_deref())
}
