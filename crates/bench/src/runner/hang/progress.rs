//! What each benchmark thread is doing, as counters its own thread writes and the watch reads:
//! the operations it enqueued and the ones known finished since the run began, where its host
//! thread is (enqueuing, waiting on its GPUs, or outside the operations), and the batch it is
//! in (what is measured, which stage). The timed loop writes one counter per operation (a plain
//! relaxed store, no lock, no shared cache line: every thread has its own slot); the rest is
//! written once per batch, outside the loop.

use super::note::{Label, Phase, Stage, ThreadState};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};

/// Threads beyond this many share the last slot (`-t` is far below it in practice).
pub const MAX_THREADS: usize = 64;

/// One benchmark thread's counters, on a cache line of its own.
#[repr(align(64))]
pub struct Slot {
    used: AtomicBool,
    tid: AtomicU64,
    first_rank: AtomicU64,
    ngpus: AtomicU64,
    issued: AtomicU64,
    finished: AtomicU64,
    phase: AtomicU8,
    batch_first: AtomicU64,
    batch_len: AtomicU64,
    /// The last sync operation's time (ns) and size (bytes): what one operation takes.
    op_ns: AtomicU64,
    op_bytes: AtomicU64,
    label: Mutex<Option<Label>>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            used: AtomicBool::new(false),
            tid: AtomicU64::new(0),
            first_rank: AtomicU64::new(0),
            ngpus: AtomicU64::new(0),
            issued: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            phase: AtomicU8::new(Phase::Outside as u8),
            batch_first: AtomicU64::new(0),
            batch_len: AtomicU64::new(0),
            op_ns: AtomicU64::new(0),
            op_bytes: AtomicU64::new(0),
            label: Mutex::new(None),
        }
    }

    /// Operations this thread enqueued so far.
    #[inline]
    pub fn issued(&self) -> u64 {
        self.issued.load(Relaxed)
    }

    /// A batch of `count` operations of `label` begins: the host thread enqueues.
    pub fn begin(&self, label: Label, count: u64) {
        if let Ok(mut l) = self.label.lock() {
            *l = Some(label);
        }
        self.batch_first.store(self.issued(), Relaxed);
        self.batch_len.store(count, Relaxed);
        self.phase.store(Phase::Enqueue as u8, Relaxed);
    }

    /// The operation numbered `n` (counted from the run's start) was enqueued.
    #[inline]
    pub fn set_issued(&self, n: u64) {
        self.issued.store(n, Relaxed);
    }

    /// The host thread waits on its GPUs.
    #[inline]
    pub fn waiting(&self) {
        self.phase.store(Phase::Wait as u8, Relaxed);
    }

    /// Every stream was found idle: all enqueued operations finished; the host thread goes on
    /// with what follows (enqueuing more, or work outside the operations).
    #[inline]
    pub fn all_finished(&self) {
        self.finished.store(self.issued(), Relaxed);
        self.phase.store(Phase::Enqueue as u8, Relaxed);
    }

    /// The host thread leaves the operations (validation, printing, set-up): not watched.
    pub fn outside(&self) {
        self.phase.store(Phase::Outside as u8, Relaxed);
    }

    /// One operation of `bytes` took `ns` (the sync operation before a timed loop).
    pub fn timed_one(&self, ns: u64, bytes: u64) {
        self.op_ns.store(ns, Relaxed);
        self.op_bytes.store(bytes.max(1), Relaxed);
    }

    /// The slot's state as the watch sees it (`None` when unused).
    fn state(&self) -> Option<ThreadState> {
        if !self.used.load(Relaxed) {
            return None;
        }
        let label = self.label.lock().ok().and_then(|l| l.clone());
        let phase = Phase::from_u8(self.phase.load(Relaxed));
        Some(ThreadState {
            tid: self.tid.load(Relaxed),
            first_rank: self.first_rank.load(Relaxed),
            ngpus: self.ngpus.load(Relaxed),
            phase,
            issued: self.issued(),
            finished: self.finished.load(Relaxed),
            batch_first: self.batch_first.load(Relaxed),
            batch_len: self.batch_len.load(Relaxed),
            label,
        })
    }

    /// How long the operations outstanding now should take at most, by the last sync
    /// operation's pace (scaled to the batch's size), in nanoseconds; 0 before any was timed.
    fn expected_ns(&self) -> u64 {
        let (ns, bytes) = (self.op_ns.load(Relaxed), self.op_bytes.load(Relaxed).max(1));
        let outstanding = self.issued().saturating_sub(self.finished.load(Relaxed));
        let now_bytes = self
            .label
            .lock()
            .ok()
            .and_then(|l| l.as_ref().map(|l| l.bytes))
            .unwrap_or(0);
        let scale = (now_bytes as f64 / bytes as f64).max(1.0);
        (ns as f64 * scale * outstanding as f64).min(u64::MAX as f64 / 2.0) as u64
    }
}

static SLOTS: [Slot; MAX_THREADS] = [const { Slot::new() }; MAX_THREADS];

/// Takes the slot of thread `tid`, whose GPUs are NCCL ranks `first_rank ..+ ngpus`.
pub fn claim(tid: usize, first_rank: usize, ngpus: usize) -> &'static Slot {
    let s = &SLOTS[tid.min(MAX_THREADS - 1)];
    s.tid.store(tid as u64, Relaxed);
    s.first_rank.store(first_rank as u64, Relaxed);
    s.ngpus.store(ngpus as u64, Relaxed);
    s.phase.store(Phase::Outside as u8, Relaxed);
    s.used.store(true, Relaxed);
    s
}

/// Gives a thread's slot back (its thread ended); the counters stay for the next section.
pub fn release(s: &Slot) {
    s.phase.store(Phase::Outside as u8, Relaxed);
    s.used.store(false, Relaxed);
}

/// Every used slot's state, and the longest time the operations outstanding should take
/// (nanoseconds).
pub fn snapshot() -> (Vec<ThreadState>, u64) {
    let mut out = Vec::new();
    let mut expected = 0;
    for s in &SLOTS {
        if let Some(st) = s.state() {
            expected = expected.max(s.expected_ns());
            out.push(st);
        }
    }
    (out, expected)
}

/// The label of a batch (what is measured, at which stage).
pub fn label(stage: Stage, coll: &str, shape: &super::super::Shape, in_place: bool) -> Label {
    Label {
        stage,
        coll: coll.to_string(),
        dt: shape.dt.name().to_string(),
        op: shape.op.name().to_string(),
        root: shape.root as u64,
        bytes: shape.span,
        in_place,
    }
}
