//! The hang watch: no run waits forever on a collective that stopped, and the one that says so
//! names the culprit. Everything of it lives here; the runner enters at three places: the
//! worker's counters ([`progress`]: a slot per benchmark thread, written as operations are
//! enqueued and found finished), the watchdog's tick ([`Watch::tick`]), and the end of a hung
//! run (the watchdog prints the [`Hang`], records it in the `-J` JSON, tells the other
//! processes, exits 4).
//!
//! - `progress.rs`: the counters, and their snapshot;
//! - `note.rs`: a process' state as its heartbeats carry it to rank 0 (checked on arrival),
//!   with the network links NCCL's proxy reported that have not moved
//!   (`nccl_perf_capture::links`, on in jobs of more than one node);
//! - `verdict.rs`: the verdict from every thread's recorded state (pure, tested without a GPU);
//! - `network.rs`: what the links decide: a link stuck on the wire, or a GPU that does not take
//!   data that arrived;
//! - `watch.rs`: when a process is stalled, when rank 0 calls the job hung.
//!
//! docs/hangs.md says what is detected and what is not.

mod network;
pub mod note;
pub mod progress;
pub mod verdict;
mod watch;

pub use watch::{Hang, Watch};
