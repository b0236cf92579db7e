//! The profiler plugin (`ncclProfiler_v5` for NCCL 2.28, `ncclProfiler_v4` for 2.27): it
//! keeps the activation mask at 0 except while [`crate::arm`]ed, and then records collectives
//! (algorithm, protocol, channels), point-to-point operations (channels), proxy operations and
//! the network transports' events ([`crate::store`]).
//!
//! Every event gets the same non-null handle (NCCL parents child events on it); stopping and
//! state changes are ignored. No callback allocates except to copy a record while armed, and
//! none can panic across the C boundary.

use std::ffi::{c_char, c_int, c_void};

use super::window;
use crate::abi::{
    self, Body, DescrV4, DescrV5, INTERNAL_ERROR, Logger, NcclResult, ProfilerV4, ProfilerV5,
    SUCCESS, event, net_type,
};
use crate::links;
use crate::store::{self, CollSeen, P2pSeen};

/// A plugin table NCCL finds by `dlsym`: the C struct itself, shareable because it is never
/// written.
#[repr(transparent)]
pub struct Exported<T>(pub T);
// SAFETY: the tables hold function pointers and a pointer to a static string; nothing in them
// is ever written.
unsafe impl<T> Sync for Exported<T> {}

pub(crate) const NAME: &std::ffi::CStr = c"nccl-perf-explain";

/// The profiler table of NCCL 2.28.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v5: Exported<ProfilerV5> = Exported(ProfilerV5 {
    name: NAME.as_ptr(),
    init: init_v5,
    start_event: start_v5,
    stop_event: stop,
    record_event_state: record_state,
    finalize,
});

/// The profiler table of NCCL 2.27.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v4: Exported<ProfilerV4> = Exported(ProfilerV4 {
    name: NAME.as_ptr(),
    init: init_v4,
    start_event: start_v4,
    stop_event: stop,
    record_event_state: record_state,
    finalize,
});

/// The handle every event gets but the proxy's, which name their slot ([`Handle`]). A `u64`,
/// so that its address ends in two zero bits, which no slot handle has.
static HANDLE: u64 = 0;

fn handle() -> *mut c_void {
    (&raw const HANDLE).cast_mut().cast()
}

/// What a handle NCCL hands back names: a proxy operation's slot in [`links`], one of its
/// steps, or nothing of ours. Slot handles are numbers, never dereferenced (NCCL only hands
/// them back): `slot << 2 | 1` for an operation, `(slot << 26 | step) << 2 | 2` for a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handle {
    Op(usize),
    Step(usize, u32),
    Other,
}

/// The bits of a step number a step handle keeps.
const STEP_BITS: u32 = 24;

impl Handle {
    fn op(slot: usize) -> *mut c_void {
        std::ptr::without_provenance_mut((slot << 2) | 1)
    }

    fn step(slot: usize, step: u32) -> *mut c_void {
        let s = (step & ((1 << STEP_BITS) - 1)) as usize;
        std::ptr::without_provenance_mut((((slot << 26) | s) << 2) | 2)
    }

    fn of(p: *const c_void) -> Handle {
        let v = p.addr();
        match v & 3 {
            1 => Handle::Op(v >> 2),
            2 => Handle::Step(v >> 28, ((v >> 2) & ((1 << STEP_BITS) - 1)) as u32),
            _ => Handle::Other,
        }
    }
}

/// The context of one communicator: the address of NCCL's mask variable.
struct Context {
    mask: usize,
}

/// Registers NCCL's mask variable and makes the communicator's context (every version's
/// `init`).
///
/// # Safety
/// `context` is null or NCCL's out parameter; `mask` is null or NCCL's mask variable.
pub(crate) unsafe fn init(context: *mut *mut c_void, mask: *mut c_int) -> NcclResult {
    if context.is_null() {
        return INTERNAL_ERROR;
    }
    window::register_mask(mask);
    let ctx = Box::new(Context {
        mask: mask as usize,
    });
    // SAFETY: `context` is NCCL's out parameter, checked non-null.
    unsafe { *context = Box::into_raw(ctx).cast() };
    SUCCESS
}

unsafe extern "C" fn init_v5(
    context: *mut *mut c_void,
    _comm_id: u64,
    mask: *mut c_int,
    _name: *const c_char,
    nodes: c_int,
    _ranks: c_int,
    _rank: c_int,
    _log: Logger,
) -> NcclResult {
    links::communicator(nodes);
    // SAFETY: NCCL's arguments.
    unsafe { init(context, mask) }
}

unsafe extern "C" fn init_v4(
    context: *mut *mut c_void,
    mask: *mut c_int,
    _name: *const c_char,
    _hash: u64,
    nodes: c_int,
    _ranks: c_int,
    _rank: c_int,
    _log: Logger,
) -> NcclResult {
    links::communicator(nodes);
    // SAFETY: NCCL's arguments.
    unsafe { init(context, mask) }
}

pub(crate) unsafe extern "C" fn finalize(context: *mut c_void) -> NcclResult {
    if !context.is_null() {
        // SAFETY: `context` is the box `init` made for this communicator, finalized once.
        let ctx = unsafe { Box::from_raw(context.cast::<Context>()) };
        window::unregister_mask(ctx.mask);
    }
    SUCCESS
}

/// One event as any profiler version describes it, read only while armed.
pub(crate) enum Event {
    /// A collective: NCCL's function, algorithm and protocol names, channels.
    Coll {
        func: Option<String>,
        algo: Option<String>,
        proto: Option<String>,
        channels: u32,
    },
    /// A point-to-point operation (`Send`, `Recv`); channels from profiler v4 on.
    P2p {
        func: Option<String>,
        channels: Option<u32>,
    },
    /// A proxy operation: the data went through the network.
    ProxyOp,
    /// A network transport's event, with its id (the top bits name the transport).
    Net(i64),
    /// Anything else (groups, proxy steps).
    Other,
}

/// Hands NCCL the event handle.
///
/// # Safety
/// `handle_out` is null or NCCL's out parameter.
pub(crate) unsafe fn give_handle(handle_out: *mut *mut c_void) {
    if !handle_out.is_null() {
        // SAFETY: NCCL's out parameter, checked non-null.
        unsafe { *handle_out = handle() };
    }
}

/// Records one event from `rank` while armed; `read` reads it from NCCL's descriptor and runs
/// only then.
pub(crate) fn keep(rank: c_int, read: impl FnOnce() -> Event) {
    store::record(|t| match read() {
        Event::Coll {
            func,
            algo,
            proto,
            channels,
        } => t.push_coll(CollSeen {
            rank,
            func: func.unwrap_or_default(),
            algo: algo.map(|a| abi::canonical(a, &abi::ALGORITHMS)),
            proto: proto.map(|p| abi::canonical(p, &abi::PROTOCOLS)),
            channels,
        }),
        Event::P2p { func, channels } => t.push_p2p(P2pSeen {
            rank,
            func: func.unwrap_or_default(),
            channels,
        }),
        Event::ProxyOp => {
            if let Some(n) = t.net_of(rank) {
                n.proxy_ops += 1;
            }
        }
        Event::Net(id) => {
            if let Some(n) = t.net_of(rank) {
                match id & !((1i64 << net_type::VERSION_BITS) - 1) {
                    net_type::IB => n.ib += 1,
                    net_type::SOCKET => n.socket += 1,
                    _ => n.other += 1,
                }
            }
        }
        Event::Other => {}
    });
}

/// Records one event of type `kind` from `rank` whose union (v4/v5 layout) is at `body`, its
/// parent's handle `parent`: proxy operations and steps in [`links`] (whatever the window),
/// everything in the window's store while armed.
///
/// # Safety
/// `body` points into NCCL's live descriptor of that type; `handle_out` is null or NCCL's out
/// parameter.
unsafe fn start(
    handle_out: *mut *mut c_void,
    kind: u64,
    rank: c_int,
    parent: *const c_void,
    body: *const Body,
) {
    let mine = if kind == event::PROXY_OP {
        // SAFETY: the caller's contract; the type says the union holds a proxy operation.
        let op = unsafe { abi::read_proxy_op(body) };
        links::op_start(rank, op.peer, op.channel_id, op.is_send != 0, op.n_steps).map(Handle::op)
    } else if kind == event::PROXY_STEP {
        match Handle::of(parent) {
            Handle::Op(slot) => {
                // SAFETY: as above, a proxy step.
                let step = unsafe { abi::read_proxy_step(body) }.step.max(0) as u32;
                links::step_start(slot, step);
                Some(Handle::step(slot, step))
            }
            _ => None,
        }
    } else {
        None
    };
    match (mine, handle_out.is_null()) {
        // SAFETY: NCCL's out parameter, checked non-null.
        (Some(h), false) => unsafe { *handle_out = h },
        // SAFETY: the caller's contract.
        _ => unsafe { give_handle(handle_out) },
    }
    keep(rank, || {
        if kind == event::COLL {
            // SAFETY: the caller's contract; the type says the union holds a collective.
            let c = unsafe { abi::read_coll(body) };
            // SAFETY: NCCL's strings, valid for the call.
            let (func, algo, proto) =
                unsafe { (abi::text(c.func), abi::text(c.algo), abi::text(c.proto)) };
            Event::Coll {
                func,
                algo,
                proto,
                channels: u32::from(c.n_channels),
            }
        } else if kind == event::P2P {
            // SAFETY: as above, a point-to-point operation.
            let p = unsafe { abi::read_p2p(body) };
            Event::P2p {
                // SAFETY: NCCL's string.
                func: unsafe { abi::text(p.func) },
                channels: Some(u32::from(p.n_channels)),
            }
        } else if kind == event::PROXY_OP {
            Event::ProxyOp
        } else if kind == event::NET_PLUGIN {
            // SAFETY: as above, a network event.
            Event::Net(unsafe { abi::read_net(body) }.id)
        } else {
            Event::Other
        }
    });
}

unsafe extern "C" fn start_v5(
    _context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const DescrV5,
) -> NcclResult {
    if descr.is_null() {
        return INTERNAL_ERROR;
    }
    // SAFETY: NCCL's live descriptor; fields read in place.
    unsafe {
        let kind = (&raw const (*descr).kind).read();
        let rank = (&raw const (*descr).rank).read();
        let parent = (&raw const (*descr).parent).read();
        start(handle_out, kind, rank, parent, &raw const (*descr).body);
    }
    SUCCESS
}

unsafe extern "C" fn start_v4(
    _context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const DescrV4,
) -> NcclResult {
    if descr.is_null() {
        return INTERNAL_ERROR;
    }
    // SAFETY: NCCL's live descriptor; fields read in place.
    unsafe {
        let kind = u64::from((&raw const (*descr).kind).read());
        let rank = (&raw const (*descr).rank).read();
        let parent = (&raw const (*descr).parent).read();
        start(handle_out, kind, rank, parent, &raw const (*descr).body);
    }
    SUCCESS
}

pub(crate) unsafe extern "C" fn stop(handle: *mut c_void) -> NcclResult {
    match Handle::of(handle) {
        Handle::Op(slot) => links::op_stop(slot),
        Handle::Step(slot, step) => links::step_stop(slot, step),
        Handle::Other => {}
    }
    SUCCESS
}

pub(crate) unsafe extern "C" fn record_state(
    handle: *mut c_void,
    state: c_int,
    _args: *const c_void,
) -> NcclResult {
    if let Handle::Step(slot, step) = Handle::of(handle) {
        links::step_state(slot, step, state);
    }
    SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{Coll, NetPlugin};
    use crate::test_lock;
    use std::ptr::null_mut;

    /// A communicator of `nodes` nodes set up through the v5 table as NCCL sets it up, its
    /// mask variable starting at `mask` (leaked: the window keeps its address, as NCCL's global
    /// it would be).
    fn init_v5(nodes: c_int, mask: c_int) -> (*mut c_void, &'static mut c_int) {
        let mask: &'static mut c_int = Box::leak(Box::new(mask));
        let mut ctx = null_mut();
        // SAFETY: our own table called as NCCL calls it: `ctx` and the leaked `mask` outlive the
        // plugin, the pointers left null are ones it accepts null.
        let r = unsafe {
            (ncclProfiler_v5.0.init)(
                &mut ctx,
                7,
                &mut *mask,
                std::ptr::null(),
                nodes,
                4,
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(r, SUCCESS);
        (ctx, mask)
    }

    fn coll_descr(rank: c_int) -> DescrV5 {
        DescrV5 {
            kind: event::COLL,
            parent: null_mut(),
            rank,
            body: Body {
                coll: Coll {
                    seq_number: 1,
                    func: c"AllReduce".as_ptr(),
                    send_buff: std::ptr::null(),
                    recv_buff: null_mut(),
                    count: 1024,
                    root: 0,
                    datatype: c"ncclFloat32".as_ptr(),
                    n_channels: 8,
                    n_warps: 16,
                    algo: c"RING".as_ptr(),
                    proto: c"LL128".as_ptr(),
                },
            },
        }
    }

    /// Drives the v5 table as NCCL does: init hands the mask, which stays 0 until armed; an
    /// armed window records the collective and the socket transport's events.
    #[test]
    fn v5_records_only_while_armed() {
        let _g = test_lock();
        let t = &ncclProfiler_v5.0;
        let (ctx, mask) = init_v5(1, -1);
        assert_eq!(*mask, 0, "the mask is empty while not armed");
        let mut h = null_mut();
        let d = coll_descr(0);
        // SAFETY: `ctx` is the context `init` made; `h` and `d` are live locals.
        unsafe { (t.start_event)(ctx, &mut h, &d) };
        assert!(!h.is_null());
        assert!(
            crate::take().colls.is_empty(),
            "nothing recorded while not armed"
        );

        crate::arm();
        assert_ne!(*mask & event::COLL as c_int, 0);
        // SAFETY: as above.
        unsafe { (t.start_event)(ctx, &mut h, &d) };
        let net = DescrV5 {
            kind: event::NET_PLUGIN,
            parent: null_mut(),
            rank: 0,
            body: Body {
                net: NetPlugin {
                    id: net_type::SOCKET | 1,
                    data: null_mut(),
                },
            },
        };
        let op = DescrV5 {
            kind: event::PROXY_OP,
            parent: null_mut(),
            rank: 0,
            body: Body {
                net: NetPlugin {
                    id: 0,
                    data: null_mut(),
                },
            },
        };
        // SAFETY: `ctx` is the context `init` made; `h`, `op` and `net` are live locals.
        unsafe {
            (t.start_event)(ctx, &mut h, &op);
            (t.start_event)(ctx, &mut h, &net);
        }
        let taken = crate::take();
        assert_eq!(*mask, 0, "disarmed again");
        let seen = taken
            .seen(0, || nccl_perf_explain::observed::Net::Unreported)
            .unwrap();
        assert_eq!(seen.algo.as_deref(), Some("Ring"));
        assert_eq!(seen.proto.as_deref(), Some("LL128"));
        assert_eq!(seen.channels, Some(8));
        assert_eq!(
            seen.path,
            nccl_perf_explain::observed::Path::Network(nccl_perf_explain::observed::Net::Socket)
        );
        // SAFETY: the context `init` made, finalized once.
        unsafe { (t.finalize)(ctx) };
        crate::arm();
        assert_eq!(*mask, 0, "a finalized communicator's mask is left alone");
        let _ = crate::take();
    }

    #[test]
    fn v4_reads_the_one_byte_type() {
        let _g = test_lock();
        let t = &ncclProfiler_v4.0;
        let mask: &'static mut c_int = Box::leak(Box::new(0));
        let mut ctx = null_mut();
        // SAFETY: our own table called as NCCL calls it: `ctx` and the leaked `mask` outlive the
        // plugin.
        unsafe {
            (t.init)(
                &mut ctx,
                &mut *mask,
                std::ptr::null(),
                9,
                1,
                1,
                0,
                std::ptr::null(),
            )
        };
        let v5 = coll_descr(3);
        let d = DescrV4 {
            kind: event::COLL as u8,
            parent: null_mut(),
            rank: 3,
            body: v5.body,
        };
        crate::arm();
        let mut h = null_mut();
        // SAFETY: `ctx` is the context `init` made; `h` and `d` are live locals.
        unsafe { (t.start_event)(ctx, &mut h, &d) };
        let seen = crate::take()
            .seen(3, || nccl_perf_explain::observed::Net::Unreported)
            .unwrap();
        assert_eq!(seen.algo.as_deref(), Some("Ring"));
        assert_eq!(seen.path, nccl_perf_explain::observed::Path::IntraNode);
        // SAFETY: the context `init` made, finalized once.
        unsafe { (t.finalize)(ctx) };
    }

    #[test]
    fn null_pointers_are_refused_not_followed() {
        let t = &ncclProfiler_v5.0;
        // SAFETY: null pointers on purpose: the plugin checks them and never follows them.
        unsafe {
            assert_eq!(
                (t.init)(
                    null_mut(),
                    0,
                    null_mut(),
                    std::ptr::null(),
                    1,
                    1,
                    0,
                    std::ptr::null()
                ),
                INTERNAL_ERROR
            );
            assert_eq!(
                (t.start_event)(null_mut(), null_mut(), std::ptr::null()),
                INTERNAL_ERROR
            );
            assert_eq!((t.finalize)(null_mut()), SUCCESS);
        }
    }

    #[test]
    fn handles_name_their_slot_and_step() {
        assert_eq!(Handle::of(Handle::op(0)), Handle::Op(0));
        assert_eq!(Handle::of(Handle::op(8191)), Handle::Op(8191));
        assert_eq!(Handle::of(Handle::step(8191, 41)), Handle::Step(8191, 41));
        assert_eq!(
            Handle::of(Handle::step(3, 0xff_ffff)),
            Handle::Step(3, 0xff_ffff)
        );
        assert_eq!(Handle::of(handle()), Handle::Other);
        assert_eq!(Handle::of(std::ptr::null()), Handle::Other);
        assert!(!Handle::op(0).is_null());
    }

    /// NCCL's proxy thread through the v5 table in a two-node communicator: the operation and
    /// step handles lead back to their slot, and the watch's reader sees the send stuck in
    /// SendWait at step 1 of 4.
    #[test]
    fn v5_proxy_events_reach_the_links() {
        let _g = test_lock();
        crate::links::enable();
        let t = &ncclProfiler_v5.0;
        let (ctx, mask) = init_v5(2, 0);
        let want = (event::PROXY_OP | event::PROXY_STEP) as c_int;
        assert_eq!(*mask, want, "two nodes: proxy events on while not armed");
        let op = DescrV5 {
            kind: event::PROXY_OP,
            parent: null_mut(),
            rank: 2,
            body: Body {
                proxy_op: abi::ProxyOp {
                    pid: 1,
                    channel_id: 1,
                    peer: 3,
                    n_steps: 4,
                    chunk_size: 1 << 19,
                    is_send: 1,
                },
            },
        };
        let mut op_h = null_mut();
        // SAFETY: `ctx` from `init`; live locals.
        unsafe { (t.start_event)(ctx, &mut op_h, &op) };
        assert!(matches!(Handle::of(op_h), Handle::Op(_)));
        for step in 0..2 {
            let d = DescrV5 {
                kind: event::PROXY_STEP,
                parent: op_h,
                rank: 2,
                body: Body {
                    proxy_step: abi::ProxyStep { step },
                },
            };
            let mut h = null_mut();
            // SAFETY: as above; the handles are the plugin's own.
            unsafe {
                (t.start_event)(ctx, &mut h, &d);
                (t.record_event_state)(h, 8, std::ptr::null());
                (t.record_event_state)(h, 9, std::ptr::null());
                if step == 0 {
                    (t.stop_event)(h);
                }
            }
        }
        let links = crate::links::Sampler::new().sample();
        let l = links
            .iter()
            .find(|l| l.rank == 2 && l.send)
            .expect("the send");
        assert_eq!(
            (l.peer, l.channel, l.step, l.steps, l.wait),
            (3, 1, 1, 4, crate::links::Wait::Send)
        );
        // SAFETY: as above.
        unsafe {
            (t.stop_event)(op_h);
            (t.finalize)(ctx);
        }
        assert!(
            crate::links::Sampler::new()
                .sample()
                .iter()
                .all(|l| !(l.rank == 2 && l.send))
        );
        crate::links::reset_for_tests();
    }
}
