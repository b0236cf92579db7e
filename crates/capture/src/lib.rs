//! What NCCL did, told by NCCL itself: a profiler plugin and a tuner plugin built into the
//! benchmark programs, for `--explain`.
//!
//! NCCL 2.26 and later load a plugin from the program itself when its variable is
//! `STATIC_PLUGIN` (`dlopen(NULL)`, then `dlsym` of the versioned symbol). The programs export
//! `ncclProfiler_v5`/`_v4` ([`profiler`]) and `ncclTunerPlugin_v5`/`_v4` ([`tuner`]) in their
//! dynamic symbol table (the root package's `build.rs`), and [`install()`] points NCCL at them
//! when `--explain` is on, unless the user or the system already configured a plugin of that
//! kind, which it leaves in place and says so.
//!
//! Both plugins record nothing until [`arm`]: the profiler's activation mask (which NCCL reads
//! on every call) stays 0 and the tuner returns at once, so the timed loops run as without
//! explain. The runner arms around one extra, untimed call per size and half, then [`take`]s
//! what the plugins saw ([`store`]).
//!
//! The hang watch uses the profiler too, on every run ([`install_profiler`]): in a job of more
//! than one node the mask keeps NCCL's proxy operations and steps on, which [`links`] records
//! in a fixed table so the watch can name a link that stopped.
//!
//! Raw pointers and C calls live in one module, `ffi` (re-exported as [`abi`], [`chain`],
//! [`install`](mod@install), [`profiler`] and [`tuner`]), the only one allowed `unsafe_code`:
//! the workspace denies it everywhere else (the root `Cargo.toml`'s `[workspace.lints]`).

#[allow(unsafe_code)]
mod ffi;
pub mod links;
pub mod silent;
pub mod store;

pub use ffi::window::{arm, take};
pub use ffi::{abi, abi_v1_v3, chain, install, profiler, profiler_v1_v3, tuner};
pub use install::{Installed, install, install_profiler, installed};
pub use store::Taken;

/// Serializes the tests that arm the process-wide plugins.
#[cfg(test)]
pub(crate) fn test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}
