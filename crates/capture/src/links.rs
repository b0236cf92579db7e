//! The network links' progress as NCCL's proxy thread reports it, for the hang watch.
//!
//! Every proxy operation NCCL starts (one channel's sends to, or receives from, one peer, for
//! one collective) takes a slot of a fixed table; its steps and the state each waits in are
//! written there by the proxy thread with relaxed stores (one writer per slot, no lock, no
//! allocation, no clock). The hang watch's thread reads the table every tick ([`Sampler`]) and
//! says, per link, where its oldest operation stands and how long it has not moved.
//!
//! Nothing is recorded unless [`enable`] was called and a communicator spans more than one
//! node ([`communicator`]): NCCL's network transports are the only ones with proxy steps, and
//! a one-node job pays nothing.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Proxy operations tracked at once; an operation started while every slot is taken is not
/// tracked (its events are ignored).
pub const SLOTS: usize = 8192;

/// Steps NCCL keeps in flight per operation (`NCCL_STEPS`): a slot keeps each one's state.
const IN_FLIGHT: u32 = 8;

/// Whether the hang watch wants the links ([`enable`]).
static ENABLED: AtomicBool = AtomicBool::new(false);
/// Whether NCCL set up a communicator with the profiler (v4 or v5) at all.
static LOADED: AtomicBool = AtomicBool::new(false);
/// Whether a communicator of more than one node was set up.
static MULTI_NODE: AtomicBool = AtomicBool::new(false);
/// Whether any proxy operation was seen.
static SEEN: AtomicBool = AtomicBool::new(false);
/// Where the next free-slot search starts.
static CURSOR: AtomicU32 = AtomicU32::new(0);
/// The order proxy operations started in (the oldest of a link is the one it waits on).
static ORDER: AtomicU64 = AtomicU64::new(0);

/// The state a proxy step waits in, as NCCL's profiler names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wait {
    /// The operation's next step has not started (the proxy has not reached it).
    Queued,
    /// The step started; no state reported yet.
    Posted,
    /// `SendGPUWait`: the sender waits for its GPU to fill the buffer.
    SendGpu,
    /// `SendPeerWait`: the data is ready; the receiver has not posted a buffer for it.
    SendPeer,
    /// `SendWait`: handed to the network, which has not completed it.
    Send,
    /// `RecvWait`: the receive is posted; no data has arrived.
    Recv,
    /// `RecvFlushWait`: the data arrived and is being flushed to the GPU.
    RecvFlush,
    /// `RecvGPUWait`: the data arrived; the GPU has not taken it.
    RecvGpu,
}

impl Wait {
    const ALL: [Wait; 8] = [
        Wait::Queued,
        Wait::Posted,
        Wait::SendGpu,
        Wait::SendPeer,
        Wait::Send,
        Wait::Recv,
        Wait::RecvFlush,
        Wait::RecvGpu,
    ];

    /// NCCL's name of the state (`SendWait`, …), or ours for the first two.
    pub fn word(self) -> &'static str {
        match self {
            Wait::Queued => "Queued",
            Wait::Posted => "Posted",
            Wait::SendGpu => "SendGPUWait",
            Wait::SendPeer => "SendPeerWait",
            Wait::Send => "SendWait",
            Wait::Recv => "RecvWait",
            Wait::RecvFlush => "RecvFlushWait",
            Wait::RecvGpu => "RecvGPUWait",
        }
    }

    /// The state named by [`Wait::word`].
    pub fn parse(word: &str) -> Option<Wait> {
        Wait::ALL.into_iter().find(|w| w.word() == word)
    }

    /// The state of NCCL's `ncclProfilerEventState_t` value, for proxy steps.
    pub(crate) fn of_nccl(state: i32) -> Option<Wait> {
        Some(match state {
            8 => Wait::SendGpu,
            20 => Wait::SendPeer,
            9 => Wait::Send,
            10 => Wait::Recv,
            11 => Wait::RecvFlush,
            12 => Wait::RecvGpu,
            _ => return None,
        })
    }

    fn code(self) -> u8 {
        self as u8
    }

    fn of_code(c: u8) -> Wait {
        Wait::ALL
            .get(usize::from(c))
            .copied()
            .unwrap_or(Wait::Queued)
    }
}

/// One proxy operation's slot.
struct Slot {
    /// 0 free, 1 being filled or live.
    taken: AtomicU8,
    /// Bumped at each claim, so a reused slot is not mistaken for the operation before.
    generation: AtomicU32,
    /// When the operation started among all ([`ORDER`]).
    order: AtomicU64,
    /// The link: rank, peer, channel, direction ([`pack`]).
    link: AtomicU64,
    /// Steps of the operation.
    steps: AtomicU32,
    /// Steps finished.
    done: AtomicU32,
    /// The state of step `s` in byte `s % IN_FLIGHT`.
    waits: AtomicU64,
    /// Events so far (moves while the operation progresses).
    moves: AtomicU32,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            taken: AtomicU8::new(0),
            generation: AtomicU32::new(0),
            order: AtomicU64::new(0),
            link: AtomicU64::new(0),
            steps: AtomicU32::new(0),
            done: AtomicU32::new(0),
            waits: AtomicU64::new(0),
            moves: AtomicU32::new(0),
        }
    }

    /// One more event (one writer: the proxy thread of the slot's communicator).
    fn moved(&self) {
        self.moves
            .store(self.moves.load(Relaxed).wrapping_add(1), Relaxed);
    }

    fn set_wait(&self, step: u32, w: Wait) {
        let shift = (step % IN_FLIGHT) * 8;
        let old = self.waits.load(Relaxed);
        let new = (old & !(0xff << shift)) | (u64::from(w.code()) << shift);
        self.waits.store(new, Relaxed);
    }

    fn wait_of(&self, step: u32) -> Wait {
        let shift = (step % IN_FLIGHT) * 8;
        Wait::of_code(((self.waits.load(Relaxed) >> shift) & 0xff) as u8)
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// A link: `(rank, peer, channel, send)` in one word.
fn pack(rank: u32, peer: u32, channel: u8, send: bool) -> u64 {
    (u64::from(rank & 0xff_ffff) << 40)
        | (u64::from(peer & 0xff_ffff) << 16)
        | (u64::from(channel) << 1)
        | u64::from(send)
}

fn unpack(v: u64) -> (u32, u32, u8, bool) {
    (
        ((v >> 40) & 0xff_ffff) as u32,
        ((v >> 16) & 0xff_ffff) as u32,
        ((v >> 1) & 0xff) as u8,
        v & 1 == 1,
    )
}

/// Asks for the links (the hang watch is on): communicators of more than one node record
/// their proxy operations from then on.
pub fn enable() {
    ENABLED.store(true, Relaxed);
}

/// Whether the hang watch asked for the links ([`enable`]).
pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// Whether proxy operations are recorded now.
pub fn recording() -> bool {
    ENABLED.load(Relaxed) && MULTI_NODE.load(Relaxed)
}

/// Whether NCCL loaded the profiler (interface v4 or v5, NCCL 2.27 and later) for a
/// communicator of this process.
pub fn loaded() -> bool {
    LOADED.load(Relaxed)
}

/// Whether any proxy operation was seen in this process.
pub fn seen() -> bool {
    SEEN.load(Relaxed)
}

/// A communicator was set up over `nodes` nodes; returns whether links are recorded now.
pub(crate) fn communicator(nodes: i32) -> bool {
    LOADED.store(true, Relaxed);
    if nodes > 1 {
        MULTI_NODE.store(true, Relaxed);
    }
    recording()
}

/// A proxy operation started: its slot, or `None` when none is free or links are not
/// recorded.
pub(crate) fn op_start(rank: i32, peer: i32, channel: u8, send: bool, steps: i32) -> Option<usize> {
    if !recording() || rank < 0 || peer < 0 {
        return None;
    }
    SEEN.store(true, Relaxed);
    let start = CURSOR.fetch_add(1, Relaxed) as usize;
    for k in 0..SLOTS {
        let i = (start + k) % SLOTS;
        let s = &TABLE[i];
        if s.taken.load(Relaxed) != 0
            || s.taken
                .compare_exchange(0, 1, std::sync::atomic::Ordering::Acquire, Relaxed)
                .is_err()
        {
            continue;
        }
        s.link
            .store(pack(rank as u32, peer as u32, channel, send), Relaxed);
        s.steps.store(steps.max(0) as u32, Relaxed);
        s.done.store(0, Relaxed);
        s.waits.store(0, Relaxed);
        s.moves.store(0, Relaxed);
        s.order.store(ORDER.fetch_add(1, Relaxed), Relaxed);
        s.generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        return Some(i);
    }
    None
}

/// The operation in slot `i` stopped.
pub(crate) fn op_stop(i: usize) {
    if let Some(s) = TABLE.get(i) {
        s.taken.store(0, std::sync::atomic::Ordering::Release);
    }
}

/// Step `step` of the operation in slot `i` started.
pub(crate) fn step_start(i: usize, step: u32) {
    if let Some(s) = TABLE.get(i) {
        s.set_wait(step, Wait::Posted);
        s.moved();
    }
}

/// Step `step` of slot `i` entered NCCL's state `state`.
pub(crate) fn step_state(i: usize, step: u32, state: i32) {
    if let (Some(s), Some(w)) = (TABLE.get(i), Wait::of_nccl(state)) {
        s.set_wait(step, w);
        s.moved();
    }
}

/// Step `step` of slot `i` finished (steps finish in order).
pub(crate) fn step_stop(i: usize, step: u32) {
    if let Some(s) = TABLE.get(i) {
        let next = step.saturating_add(1);
        if next > s.done.load(Relaxed) {
            s.done.store(next, Relaxed);
        }
        s.moved();
    }
}

/// Where one link stands: its oldest live proxy operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The NCCL rank that reported it.
    pub rank: u32,
    /// The rank at the other end.
    pub peer: u32,
    /// NCCL's channel.
    pub channel: u8,
    /// Sends from `rank` to `peer` (else receives from `peer`).
    pub send: bool,
    /// The step it waits on (0-based; = steps finished).
    pub step: u32,
    /// The operation's steps.
    pub steps: u32,
    /// The state that step waits in.
    pub wait: Wait,
    /// How long the operation has not moved.
    pub still: Duration,
}

/// The watch's reader of the table: remembers when each slot last moved.
pub struct Sampler {
    last: Vec<(u32, u32, Instant)>,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::new()
    }
}

impl Sampler {
    /// A reader that has seen nothing yet.
    pub fn new() -> Sampler {
        Sampler { last: Vec::new() }
    }

    /// Every link with a live proxy operation: the oldest one's step, state and stillness.
    pub fn sample(&mut self) -> Vec<Link> {
        if !seen() {
            return Vec::new();
        }
        let now = Instant::now();
        if self.last.is_empty() {
            self.last = vec![(0, 0, now); SLOTS];
        }
        // link -> (order, its oldest live operation).
        let mut oldest: std::collections::BTreeMap<u64, (u64, Link)> = Default::default();
        for (i, s) in TABLE.iter().enumerate() {
            if s.taken.load(std::sync::atomic::Ordering::Acquire) == 0 {
                continue;
            }
            let generation = s.generation.load(std::sync::atomic::Ordering::Acquire);
            let moves = s.moves.load(Relaxed);
            let mark = &mut self.last[i];
            if mark.0 != generation || mark.1 != moves {
                *mark = (generation, moves, now);
            }
            let key = s.link.load(Relaxed);
            let order = s.order.load(Relaxed);
            let (rank, peer, channel, send) = unpack(key);
            let step = s.done.load(Relaxed);
            let steps = s.steps.load(Relaxed);
            let link = Link {
                rank,
                peer,
                channel,
                send,
                step,
                steps,
                wait: s.wait_of(step),
                still: now.saturating_duration_since(mark.2),
            };
            match oldest.get(&key) {
                Some((o, _)) if *o <= order => {}
                _ => {
                    oldest.insert(key, (order, link));
                }
            }
        }
        let mut links: Vec<Link> = oldest.into_values().map(|(_, l)| l).collect();
        links.sort_by_key(|l| (l.rank, l.peer, l.channel, l.send));
        links
    }
}

/// Back to a process that never enabled the links (tests only).
#[cfg(test)]
pub(crate) fn reset_for_tests() {
    MULTI_NODE.store(false, Relaxed);
    LOADED.store(false, Relaxed);
    ENABLED.store(false, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_pack_and_unpack() {
        for (r, p, c, s) in [
            (0, 1, 0, true),
            (2047, 3, 31, false),
            (0xff_ffff, 0, 255, true),
        ] {
            assert_eq!(unpack(pack(r, p, c, s)), (r, p, c, s));
        }
    }

    #[test]
    fn nccl_states_map_to_waits() {
        assert_eq!(Wait::of_nccl(9), Some(Wait::Send));
        assert_eq!(Wait::of_nccl(12), Some(Wait::RecvGpu));
        assert_eq!(Wait::of_nccl(20), Some(Wait::SendPeer));
        assert_eq!(Wait::of_nccl(3), None, "a proxy op state, not a step's");
        for w in Wait::ALL {
            assert_eq!(Wait::parse(w.word()), Some(w));
            assert_eq!(Wait::of_code(w.code()), w);
        }
        assert_eq!(Wait::parse("Sendwait"), None);
    }

    /// The proxy thread's calls as NCCL makes them, and what the watch's reader sees: the
    /// oldest operation of each link, its step and state, and how long it has not moved.
    #[test]
    fn the_sampler_reports_the_oldest_operation_of_each_link() {
        let _g = crate::test_lock();
        assert_eq!(
            op_start(2, 3, 1, true, 64),
            None,
            "not enabled: nothing kept"
        );
        enable();
        assert!(!communicator(1), "one node: nothing kept");
        assert_eq!(op_start(2, 3, 1, true, 64), None);
        assert!(communicator(2));
        let send = op_start(2, 3, 1, true, 64).unwrap();
        let later = op_start(2, 3, 1, true, 64).unwrap();
        let recv = op_start(2, 1, 1, false, 64).unwrap();
        for step in 0..41 {
            step_start(send, step);
            step_state(send, step, 8);
            step_state(send, step, 9);
            step_stop(send, step);
        }
        step_start(send, 41);
        step_state(send, 41, 8);
        step_state(send, 41, 20);
        step_state(send, 41, 9);
        step_start(send, 42);
        step_state(send, 42, 8);
        step_start(recv, 0);
        step_state(recv, 0, 10);
        let mut s = Sampler::new();
        let links = s.sample();
        assert_eq!(links.len(), 2, "{links:?}");
        let out = links.iter().find(|l| l.send).unwrap();
        assert_eq!(
            (
                out.rank,
                out.peer,
                out.channel,
                out.step,
                out.steps,
                out.wait
            ),
            (2, 3, 1, 41, 64, Wait::Send)
        );
        let inbound = links.iter().find(|l| !l.send).unwrap();
        assert_eq!((inbound.peer, inbound.wait), (1, Wait::Recv));
        // Nothing moves: stillness grows; a move resets it.
        std::thread::sleep(Duration::from_millis(30));
        let again = s.sample();
        assert!(again.iter().all(|l| l.still >= Duration::from_millis(30)));
        step_state(recv, 0, 11);
        let moved = s.sample();
        let inbound = moved.iter().find(|l| !l.send).unwrap();
        assert!(inbound.still < Duration::from_millis(30));
        assert_eq!(inbound.wait, Wait::RecvFlush);
        // The oldest stops: the later operation of that link is reported, not yet started.
        op_stop(send);
        let next = s.sample();
        let out = next.iter().find(|l| l.send).unwrap();
        assert_eq!((out.step, out.wait), (0, Wait::Queued));
        op_stop(later);
        op_stop(recv);
        assert!(s.sample().is_empty());
        reset_for_tests();
    }
}
