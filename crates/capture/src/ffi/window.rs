//! The recording window: [`arm`] and [`take`], and NCCL's activation mask variables (one per
//! NCCL library; each communicator's `init` hands its address), which they set. Above the
//! [`store`](crate::store) the plugins record into: it opens and closes the store's window and
//! writes the masks through their raw pointers.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::abi::event;
use crate::store::{self, Taken};

/// The activation mask while armed: collectives, point-to-point operations, proxy operations
/// and steps (network events are their children), network events.
const ACTIVE_MASK: i32 =
    (event::COLL | event::P2P | event::PROXY_OP | event::PROXY_STEP | event::NET_PLUGIN) as i32;

/// NCCL's activation mask variables (one per NCCL library; each `init` hands its address) and
/// how many communicators registered each.
static MASKS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts recording: the plugins record from the next NCCL call on.
pub fn arm() {
    store::open();
    set_masks(ACTIVE_MASK);
}

/// The mask while not armed: proxy operations and steps where the hang watch records the
/// links ([`crate::links`]), else nothing.
fn idle_mask() -> i32 {
    if crate::links::recording() {
        (event::PROXY_OP | event::PROXY_STEP) as i32
    } else {
        0
    }
}

/// Stops recording and returns what was seen since [`arm`].
pub fn take() -> Taken {
    set_masks(idle_mask());
    let mut taken = store::close();
    taken.profiler_loaded = !lock(&MASKS).is_empty();
    taken
}

/// The mask NCCL should see now (for a communicator created while armed).
pub(crate) fn mask_now() -> i32 {
    if store::armed() {
        ACTIVE_MASK
    } else {
        idle_mask()
    }
}

/// Remembers NCCL's mask variable at `ptr` (a communicator's `init`).
pub(crate) fn register_mask(ptr: *mut i32) {
    if ptr.is_null() {
        return;
    }
    let mut masks = lock(&MASKS);
    match masks.iter_mut().find(|(p, _)| *p == ptr as usize) {
        Some((_, n)) => *n += 1,
        None => masks.push((ptr as usize, 1)),
    }
    store_mask(ptr, mask_now());
}

/// Forgets one registration of NCCL's mask variable at `ptr` (a communicator's `finalize`).
pub(crate) fn unregister_mask(ptr: usize) {
    let mut masks = lock(&MASKS);
    if let Some(i) = masks.iter().position(|(p, _)| *p == ptr) {
        masks[i].1 -= 1;
        if masks[i].1 == 0 {
            masks.swap_remove(i);
        }
    }
}

fn set_masks(value: i32) {
    for &(p, _) in lock(&MASKS).iter() {
        store_mask(p as *mut i32, value);
    }
}

/// Writes `value` into NCCL's activation mask at `ptr` (arming and disarming).
fn store_mask(ptr: *mut i32, value: i32) {
    // SAFETY: `ptr` is NCCL's mask variable, handed to `init` and valid while the library is
    // loaded (it is a global of libnccl, which stays loaded for the program's life); NCCL
    // reads it with relaxed atomic loads, so it is written atomically.
    unsafe { AtomicI32::from_ptr(ptr) }.store(value, Ordering::Relaxed);
}
