//! The safe layer over NCCL communicators: creation of a process' communicators in one group,
//! buffer registration (`-R`), the asynchronous error check, and teardown — an orderly
//! [`Communicator::destroy`], or `ncclCommAbort` when a communicator is dropped (the error
//! path: abort never waits for the other ranks, `ncclCommDestroy` may).

use super::device::{Context, DeviceBuffer};
use super::nccl::{Comm, Config, IN_PROGRESS, Nccl, SPLIT_NOCOLOR, UniqueId, WIN_COLL_SYMMETRIC};
use crate::error::{Error, Result};
use std::ffi::{c_int, c_void};

pub use crate::types::Register;

/// One registration of a buffer with a communicator. It belongs to its communicator: undone by
/// [`Communicator::deregister`] (before the communicator is destroyed, on every rank first when
/// windows are symmetric), or released with the communicator by `ncclCommAbort` on the error
/// path — never on its own, since a window is collective over the communicator's ranks.
#[derive(Debug, Clone, Copy)]
struct Registration {
    handle: *mut c_void,
    window: bool,
}

/// Where a communicator stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Usable; dropping it aborts it.
    Live,
    /// Destroyed or aborted: the handle is freed and never passed to NCCL again.
    Gone,
}

/// An NCCL communicator (one rank), destroyed by [`Communicator::destroy`] or aborted when
/// dropped.
#[derive(Debug)]
pub struct Communicator {
    raw: Comm,
    nccl: &'static Nccl,
    nranks: usize,
    state: State,
    registrations: Vec<Registration>,
}

// SAFETY: an NCCL communicator may be used from any thread, one thread at a time (the thread that
// owns its GPU); the registration handles are opaque values only NCCL reads.
unsafe impl Send for Communicator {}

impl Communicator {
    /// Creates one communicator per context (ranks `first_rank ..` of `nranks`) inside one NCCL
    /// group, making each context current before its call: from one id with
    /// `ncclCommInitRankConfig` (or `ncclCommInitRank`), from several with
    /// `ncclCommInitRankScalable`. `nvlink_centric` and `cta_policy` set those `ncclConfig_t`
    /// fields (where a config is taken). On failure the communicators already begun are aborted.
    pub fn init_group(
        nccl: &'static Nccl,
        ctxs: &[Context],
        ids: &[UniqueId],
        nranks: usize,
        first_rank: usize,
        nvlink_centric: bool,
        cta_policy: Option<i64>,
    ) -> Result<Vec<Communicator>> {
        let Some(id) = ids.first() else {
            return Err(Error::Internal(
                "no NCCL id to create communicators from".into(),
            ));
        };
        let scalable = match (ids.len(), nccl.ncclCommInitRankScalable) {
            (1, _) => None,
            (_, Some(f)) => Some(f),
            (n, None) => {
                return Err(Error::Unsupported(format!(
                    "{n} NCCL ids need ncclCommInitRankScalable, which {} lacks (NCCL 2.23 or later)",
                    nccl.path
                )));
            }
        };
        let mut ids = ids.to_vec();
        let mut raw: Vec<Comm> = vec![std::ptr::null_mut(); ctxs.len()];
        let made = nccl.group(|| {
            for (i, ctx) in ctxs.iter().enumerate() {
                ctx.make_current()?;
                let rank = (first_rank + i) as c_int;
                let mut cfg = Config::new();
                if nvlink_centric {
                    cfg.nvlink_centric_sched = 1;
                }
                if let Some(p) = cta_policy {
                    cfg.cta_policy = p as c_int;
                }
                let n = nranks as c_int;
                let r = match (scalable, nccl.ncclCommInitRankConfig) {
                    // SAFETY: a valid out pointer, `ids.len()` ids and a config.
                    (Some(f), _) => unsafe {
                        f(
                            &mut raw[i],
                            n,
                            rank,
                            ids.len() as c_int,
                            ids.as_mut_ptr(),
                            &mut cfg,
                        )
                    },
                    // SAFETY: a valid out pointer, id and config.
                    (None, Some(f)) => unsafe { f(&mut raw[i], n, *id, rank, &mut cfg) },
                    // SAFETY: a valid out pointer and id.
                    (None, None) => unsafe { (nccl.ncclCommInitRank)(&mut raw[i], n, *id, rank) },
                };
                nccl.check(r)?;
            }
            Ok(())
        });
        // Owned from here on, so that a failure aborts what NCCL began (NCCL leaves a failed
        // rank's handle null).
        let comms: Vec<Communicator> = raw
            .into_iter()
            .map(|raw| Communicator {
                raw,
                nccl,
                nranks,
                state: if raw.is_null() {
                    State::Gone
                } else {
                    State::Live
                },
                registrations: Vec::new(),
            })
            .collect();
        made.map(|_| comms)
    }

    /// Creates this process' one rank (`rank` of `nranks`) of a nonblocking communicator
    /// (`ncclConfig_t.blocking = 0`) on `ctx`'s GPU: NCCL sets it up in the background, and
    /// [`Communicator::progress`] says when it is ready (abort it when that takes too long).
    /// Its calls, and the splits made from it, return before they are done in the same way.
    /// Needs `ncclCommInitRankConfig` (NCCL 2.14).
    pub fn init_nonblocking(
        nccl: &'static Nccl,
        ctx: &Context,
        id: &UniqueId,
        nranks: usize,
        rank: usize,
    ) -> Result<Communicator> {
        let init = nccl.ncclCommInitRankConfig.ok_or_else(|| {
            Error::Unsupported(format!(
                "{} has no ncclCommInitRankConfig (needs NCCL 2.14 or later)",
                nccl.path
            ))
        })?;
        ctx.make_current()?;
        let mut raw: Comm = std::ptr::null_mut();
        let mut cfg = Config::new();
        cfg.blocking = 0;
        // SAFETY: a valid out pointer, id and config; NCCL sets `raw` before it returns.
        let r = unsafe { init(&mut raw, nranks as c_int, *id, rank as c_int, &mut cfg) };
        // Owned at once, so that a failure aborts what NCCL began.
        let comm = Communicator {
            raw,
            nccl,
            nranks,
            state: if raw.is_null() {
                State::Gone
            } else {
                State::Live
            },
            registrations: Vec::new(),
        };
        if r != IN_PROGRESS {
            nccl.check(r)?;
        }
        comm.live()?;
        Ok(comm)
    }

    /// Where the last call on a nonblocking communicator stands (its creation, a split, an
    /// operation): [`Progress::Ready`], [`Progress::Pending`], or the error NCCL ran into, after
    /// which the communicator can only be aborted.
    #[track_caller]
    pub fn progress(&self) -> Result<Progress> {
        match self.async_error()? {
            0 => Ok(Progress::Ready),
            IN_PROGRESS => Ok(Progress::Pending),
            r => Err(self.nccl.check(r).err().unwrap_or_else(|| {
                Error::Internal(format!("NCCL result {r} is and is not an error"))
            })),
        }
    }

    /// Starts `ncclCommSplit`: every rank of this communicator calls it, those of one
    /// `colour` (≥ 0) get a communicator of `members` ranks ordered by `key`, and those with
    /// `None` take part without joining one. The children are nonblocking. On a nonblocking
    /// communicator the split goes on in the background: poll the [`Split`] (dropping it
    /// unfinished aborts this communicator, the only way to stop a split). Needs
    /// `ncclCommSplit` (NCCL 2.18).
    pub fn split(&mut self, colour: Option<u32>, key: usize, members: usize) -> Result<Split<'_>> {
        self.live()?;
        let split = self.nccl.ncclCommSplit.ok_or_else(|| {
            Error::Unsupported(format!(
                "{} has no ncclCommSplit (needs NCCL 2.18 or later)",
                self.nccl.path
            ))
        })?;
        let colour = match colour {
            Some(c) => c_int::try_from(c)
                .map_err(|_| Error::Internal(format!("split colour {c} is beyond an int")))?,
            None => SPLIT_NOCOLOR,
        };
        // NCCL writes the child's handle into the slot when the split ends, maybe from its own
        // thread: the slot is on the heap and outlives the split (see `Split`'s drop).
        let mut slot = Box::new(std::ptr::null_mut::<cudarc::nccl::sys::ncclComm>());
        let mut cfg = Config::new();
        cfg.blocking = 0;
        // SAFETY: a live communicator, a slot that lives until the split is over, a valid config.
        let r = unsafe { split(self.raw, colour, key as c_int, &mut *slot, &mut cfg) };
        let mut s = Split {
            parent: self,
            slot,
            members,
            over: false,
        };
        if r != IN_PROGRESS && r != 0 {
            // Nothing goes on in the background after a refused call.
            s.over = true;
            s.parent.nccl.check(r)?;
        }
        Ok(s)
    }

    /// The raw handle (for the benchmarks' bare loops, which call NCCL themselves); null once
    /// destroyed or aborted.
    pub fn as_raw(&self) -> Comm {
        self.raw
    }

    /// The libnccl it was created with.
    pub(super) fn nccl(&self) -> &'static Nccl {
        self.nccl
    }

    /// Number of ranks.
    pub fn nranks(&self) -> usize {
        self.nranks
    }

    /// Whether the communicator can still be used (neither destroyed nor aborted).
    pub fn is_live(&self) -> bool {
        self.state == State::Live
    }

    /// `ncclCommGetAsyncError`: 0 (success), 7 (`ncclInProgress`) or the error a background
    /// operation ran into.
    #[track_caller]
    pub fn async_error(&self) -> Result<c_int> {
        self.live()?;
        let mut state = 0;
        // SAFETY: a live communicator and a valid out pointer.
        let r = unsafe { (self.nccl.ncclCommGetAsyncError)(self.raw, &mut state) };
        self.nccl.check(r)?;
        Ok(state)
    }

    /// `ncclCommAbort`: stops whatever the communicator runs, without waiting for the other
    /// ranks, and frees it. Does nothing once destroyed or aborted.
    pub fn abort(&mut self) {
        if self.state != State::Live {
            return;
        }
        self.state = State::Gone;
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // Released by NCCL with the communicator.
        self.registrations.clear();
        // SAFETY: a live communicator; gone from `self` now, so the handle is never used again.
        let _ = unsafe { (self.nccl.ncclCommAbort)(raw) };
    }

    /// Undoes this communicator's registrations, in the order they were made (its GPU's
    /// context must be current). They are forgotten first, so a failure is not retried by
    /// teardown.
    pub fn deregister(&mut self) -> Result<()> {
        for r in std::mem::take(&mut self.registrations) {
            let f = if r.window {
                self.nccl.ncclCommWindowDeregister
            } else {
                self.nccl.ncclCommDeregister
            };
            let Some(f) = f else { continue };
            if r.handle.is_null() || self.state != State::Live {
                continue;
            }
            // SAFETY: a handle the matching register call returned on this live communicator.
            self.nccl.check(unsafe { f(self.raw, r.handle) })?;
        }
        Ok(())
    }

    /// Destroys the communicator (`ncclCommDestroy`) after undoing its registrations; its
    /// GPU's context must be current and its work finished. Does nothing once destroyed or
    /// aborted.
    pub fn destroy(&mut self) -> Result<()> {
        self.deregister()?;
        if self.state != State::Live {
            return Ok(());
        }
        self.state = State::Gone;
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: a live communicator; gone from `self` now, so the handle is never used again.
        let r = unsafe { (self.nccl.ncclCommDestroy)(raw) };
        self.nccl.check(r)
    }

    fn live(&self) -> Result<()> {
        match self.state {
            State::Live => Ok(()),
            State::Gone => Err(Error::Internal(
                "an NCCL communicator was used after it was destroyed or aborted".into(),
            )),
        }
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Where a nonblocking communicator's last call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Done: the communicator takes the next call.
    Ready,
    /// Still going on in the background.
    Pending,
}

/// An `ncclCommSplit` under way ([`Communicator::split`]): poll it until it gives the new
/// communicator. Dropped unfinished (a deadline passed), it aborts the parent, which stops the
/// split; the parent cannot be used again.
#[derive(Debug)]
pub struct Split<'p> {
    parent: &'p mut Communicator,
    slot: Box<Comm>,
    members: usize,
    over: bool,
}

impl Split<'_> {
    /// Polls once: `None` while the split goes on; when it is over, this rank's new
    /// communicator (`None` for a rank without colour). An error means the split failed: the
    /// parent can then only be aborted (drop the `Split`, then abort it).
    pub fn poll(&mut self) -> Result<Option<Option<Communicator>>> {
        if self.over {
            return Err(Error::Internal(
                "a communicator split was polled after it ended".into(),
            ));
        }
        let state = self.parent.async_error()?;
        if state == IN_PROGRESS {
            return Ok(None);
        }
        self.over = true;
        let child = self.take();
        if state != 0 {
            // `child` (if NCCL made one) is aborted as it goes.
            drop(child);
            return Err(self.parent.nccl.check(state).err().unwrap_or_else(|| {
                Error::Internal(format!("NCCL result {state} is and is not an error"))
            }));
        }
        Ok(Some(child))
    }

    /// The communicator NCCL wrote into the slot, owned (so that dropping it aborts it).
    fn take(&mut self) -> Option<Communicator> {
        // SAFETY: the split is over, so NCCL no longer writes the slot (it stored the handle with
        // release ordering before the parent's state, read above or joined by the abort, left
        // "in progress").
        let raw = unsafe { std::ptr::read_volatile(&*self.slot) };
        *self.slot = std::ptr::null_mut();
        (!raw.is_null()).then(|| Communicator {
            raw,
            nccl: self.parent.nccl,
            nranks: self.members,
            state: State::Live,
            registrations: Vec::new(),
        })
    }
}

impl Drop for Split<'_> {
    fn drop(&mut self) {
        if self.over {
            return;
        }
        // Aborting the parent stops the split and joins NCCL's thread for it; what that thread
        // made of the child is aborted too.
        self.parent.abort();
        self.over = true;
        drop(self.take());
    }
}

/// Registers each communicator's pair of buffers (`bytes` long; the buffers must outlive the
/// registration, which [`super::rank::Gpu`] guarantees) in one NCCL group: symmetric windows
/// are collective over the communicator's ranks. Each context is made current before its calls.
/// What was registered is recorded even after a failure, so that teardown undoes it.
pub(super) fn register_all(
    nccl: &'static Nccl,
    ranks: &mut [(Context, &mut Communicator, [&DeviceBuffer; 2])],
    bytes: usize,
    how: Register,
) -> Result<()> {
    let missing = |name: &str, flag: u8, need: &str| {
        Error::Unsupported(format!(
            "-R {flag}: {} has no {name} (needs NCCL {need} or later)",
            nccl.path
        ))
    };
    type Reg = dyn Fn(Comm, *mut c_void, *mut *mut c_void) -> c_int;
    let (call, window): (Box<Reg>, bool) = match how {
        Register::Off => return Ok(()),
        Register::Local => {
            let reg = nccl
                .ncclCommRegister
                .ok_or_else(|| missing("ncclCommRegister", 1, "2.19"))?;
            nccl.ncclCommDeregister
                .ok_or_else(|| missing("ncclCommDeregister", 1, "2.19"))?;
            (
                Box::new(move |c, p, h| {
                    // SAFETY: `p` is a live allocation of at least `bytes` bytes, `c` a live
                    // communicator, `h` a valid out pointer that stays valid until the group
                    // ends.
                    unsafe { reg(c, p, bytes, h) }
                }),
                false,
            )
        }
        Register::Symmetric => {
            let reg = nccl
                .ncclCommWindowRegister
                .ok_or_else(|| missing("ncclCommWindowRegister", 2, "2.27"))?;
            nccl.ncclCommWindowDeregister
                .ok_or_else(|| missing("ncclCommWindowDeregister", 2, "2.27"))?;
            (
                Box::new(move |c, p, h| {
                    // SAFETY: as above.
                    unsafe { reg(c, p, bytes, h, WIN_COLL_SYMMETRIC) }
                }),
                true,
            )
        }
    };
    for (_, comm, bufs) in ranks.iter() {
        comm.live()?;
        if bufs.iter().any(|b| b.addr() == 0 || b.len() < bytes) {
            return Err(Error::Internal(format!(
                "registering {bytes} bytes of a smaller buffer"
            )));
        }
    }
    // NCCL may write a handle only at ncclGroupEnd (window registration is deferred to the end
    // of the group), so the handles live here, neither moved nor resized, until the group is
    // closed and they are read.
    let mut handles = vec![[std::ptr::null_mut::<c_void>(); 2]; ranks.len()];
    let slots = handles.as_mut_ptr();
    let result = nccl.group(|| {
        for (i, (ctx, comm, bufs)) in ranks.iter().enumerate() {
            ctx.make_current()?;
            // SAFETY: `i` is in bounds, and `handles` is untouched until read after the group.
            let h = unsafe { &mut *slots.add(i) };
            nccl.check(call(comm.raw, bufs[0].addr() as *mut c_void, &mut h[0]))?;
            nccl.check(call(comm.raw, bufs[1].addr() as *mut c_void, &mut h[1]))?;
        }
        Ok(())
    });
    for ((_, comm, _), h) in ranks.iter_mut().zip(handles) {
        comm.registrations
            .extend(h.map(|handle| Registration { handle, window }));
    }
    result
}
