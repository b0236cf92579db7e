//! `--explain`'s NCCL plugins (`nccl-perf-capture`): pointing NCCL at them sets environment
//! variables, which is only sound while the process has one thread; [`install`] is called
//! from the start-up, before any thread and before libnccl is loaded.

pub use nccl_perf_capture::Installed;

/// Points NCCL at the built-in profiler and tuner unless plugins of those kinds are configured
/// (`crates/capture/src/ffi/install.rs`). Call it from the single-threaded start-up only.
pub fn install() -> &'static Installed {
    // SAFETY: the start-up calls this before it starts any thread (the benchmark threads, the
    // bootstrap's, the watchdog) and before NCCL is loaded, as `install` requires.
    unsafe { nccl_perf_capture::install() }
}
