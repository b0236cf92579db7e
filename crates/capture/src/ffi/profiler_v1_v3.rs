//! The profiler tables of NCCL 2.23–2.26 (`ncclProfiler_v3`, `_v2`, `_v1`;
//! [`abi_v1_v3`](super::abi_v1_v3) says which NCCL takes which): thin adapters that read each
//! version's descriptor into the [`Event`] the v4/v5 tables record, with the same mask, handle,
//! context and records ([`super::profiler`]).

use std::ffi::{c_char, c_int, c_void};

use super::abi::{self, INTERNAL_ERROR, NcclResult, SUCCESS, event};
use super::abi_v1_v3::{
    self as early, BodyV1, BodyV2, BodyV3, Descr, DescrV1, DescrV2, DescrV3, ProfilerEarly,
};
use super::profiler::{self, Event, Exported, NAME, finalize, record_state, stop};

/// The profiler table NCCL 2.26 takes first.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v3: Exported<ProfilerEarly<DescrV3>> = Exported(ProfilerEarly {
    name: NAME.as_ptr(),
    init,
    start_event: start_v3,
    stop_event: stop,
    record_event_state: record_state,
    finalize,
});

/// The profiler table NCCL 2.24 and 2.25 take first.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v2: Exported<ProfilerEarly<DescrV2>> = Exported(ProfilerEarly {
    name: NAME.as_ptr(),
    init,
    start_event: start_v2,
    stop_event: stop,
    record_event_state: record_state,
    finalize,
});

/// The profiler table of NCCL 2.23 (its only one).
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v1: Exported<ProfilerEarly<DescrV1>> = Exported(ProfilerEarly {
    name: NAME.as_ptr(),
    init,
    start_event: start_v1,
    stop_event: stop,
    record_event_state: record_state,
    finalize,
});

/// `init(context, activationMask)` of v1–v3. It never fails on NCCL's arguments: NCCL 2.23
/// answers a failed profiler `init` by dropping the profiler and then reads its name through
/// the dropped (null) table when the last communicator is destroyed.
unsafe extern "C" fn init(context: *mut *mut c_void, mask: *mut c_int) -> NcclResult {
    // SAFETY: NCCL's arguments.
    unsafe { profiler::init(context, mask) }
}

unsafe extern "C" fn start_v1(
    _context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const DescrV1,
) -> NcclResult {
    let read = |kind: u64, body: *const BodyV1| match kind {
        event::COLL => {
            // SAFETY: the type says the union holds a collective.
            let c = unsafe { early::coll_v1(body) };
            Event::Coll {
                func: early::by_index(&abi::FUNCS, c.func),
                algo: early::by_index(&abi::ALGORITHMS, c.algo),
                proto: early::by_index(&abi::PROTOCOLS, c.proto),
                channels: u32::from(c.n_max_channels),
            }
        }
        event::P2P => Event::P2p {
            // SAFETY: the type says the union holds a point-to-point operation.
            func: early::by_index(&abi::FUNCS, unsafe { early::p2p_v1(body) }.func),
            channels: None,
        },
        event::PROXY_OP => Event::ProxyOp,
        _ => Event::Other,
    };
    // SAFETY: NCCL's live descriptor and out parameter.
    unsafe { start(handle_out, descr, read) }
}

unsafe extern "C" fn start_v2(
    _context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const DescrV2,
) -> NcclResult {
    let read = |kind: u64, body: *const BodyV2| match kind {
        event::COLL => {
            // SAFETY: the type says the union holds a collective.
            let c = unsafe { early::coll_v2(body) };
            // SAFETY: NCCL's strings, valid for the call.
            unsafe { named(c.func, c.algo, c.proto, c.n_max_channels) }
        }
        event::P2P => Event::P2p {
            // SAFETY: a point-to-point operation; NCCL's string.
            func: unsafe { abi::text(early::p2p_v2(body).func) },
            channels: None,
        },
        event::PROXY_OP => Event::ProxyOp,
        _ => Event::Other,
    };
    // SAFETY: NCCL's live descriptor and out parameter.
    unsafe { start(handle_out, descr, read) }
}

unsafe extern "C" fn start_v3(
    _context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const DescrV3,
) -> NcclResult {
    let read = |kind: u64, body: *const BodyV3| match kind {
        event::COLL => {
            // SAFETY: the type says the union holds a collective.
            let c = unsafe { early::coll_v3(body) };
            // SAFETY: NCCL's strings, valid for the call.
            unsafe { named(c.func, c.algo, c.proto, c.n_max_channels) }
        }
        event::P2P => Event::P2p {
            // SAFETY: a point-to-point operation; NCCL's string.
            func: unsafe { abi::text(early::p2p_v3(body).func) },
            channels: None,
        },
        event::PROXY_OP => Event::ProxyOp,
        // SAFETY: the type says the union holds a network event.
        event::NET_PLUGIN => Event::Net(unsafe { early::net_v3(body) }.id),
        _ => Event::Other,
    };
    // SAFETY: NCCL's live descriptor and out parameter.
    unsafe { start(handle_out, descr, read) }
}

/// `startEvent` of every early version: a handle for every event (NCCL drops a collective's
/// children without one), and the event `read` makes of the descriptor's type and union kept
/// while armed.
///
/// # Safety
/// `descr` is null or NCCL's live descriptor; `handle_out` null or NCCL's out parameter.
unsafe fn start<B>(
    handle_out: *mut *mut c_void,
    descr: *const Descr<B>,
    read: impl FnOnce(u64, *const B) -> Event,
) -> NcclResult {
    if descr.is_null() {
        return INTERNAL_ERROR;
    }
    // SAFETY: the caller's contract.
    let (kind, rank, body) = unsafe {
        profiler::give_handle(handle_out);
        early::head(descr)
    };
    profiler::keep(rank, || read(u64::from(kind), body));
    SUCCESS
}

/// A collective whose descriptor names its function, algorithm and protocol (v2, v3).
///
/// # Safety
/// Each pointer is null or a NUL-terminated string live for the call.
unsafe fn named(
    func: *const c_char,
    algo: *const c_char,
    proto: *const c_char,
    channels: u8,
) -> Event {
    // SAFETY: the caller's contract.
    unsafe {
        Event::Coll {
            func: abi::text(func),
            algo: abi::text(algo),
            proto: abi::text(proto),
            channels: u32::from(channels),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi_v1_v3::{BodyV1, BodyV2, BodyV3, CollV1, CollV2, CollV3, P2pV1, P2pV2};
    use crate::test_lock;
    use nccl_perf_explain::observed::{Net, Path};
    use std::ptr::{null, null_mut};

    /// Drives a table as NCCL does: init hands the mask (0 until armed), one descriptor while
    /// armed; returns what was taken. `finalize`s the context.
    fn drive<D>(t: &ProfilerEarly<D>, descrs: &[D]) -> crate::Taken {
        let mask: &'static mut c_int = Box::leak(Box::new(-1));
        let mut ctx = null_mut();
        // SAFETY: our own table called as NCCL calls it: `ctx` and the leaked `mask` outlive
        // the plugin.
        assert_eq!(unsafe { (t.init)(&mut ctx, &mut *mask) }, SUCCESS);
        assert_eq!(*mask, 0, "the mask is empty while not armed");
        crate::arm();
        assert_ne!(*mask & event::COLL as c_int, 0);
        let mut h = null_mut();
        for d in descrs {
            // SAFETY: `ctx` is the context `init` made; `h` and `d` are live.
            assert_eq!(unsafe { (t.start_event)(ctx, &mut h, d) }, SUCCESS);
            assert!(!h.is_null(), "every event gets a handle");
        }
        let taken = crate::take();
        assert_eq!(*mask, 0, "disarmed again");
        // SAFETY: the context `init` made, finalized once.
        unsafe { (t.finalize)(ctx) };
        taken
    }

    #[test]
    fn v1_reads_enum_indexes() {
        let _g = test_lock();
        let coll = DescrV1 {
            kind: event::COLL as u8,
            parent: null_mut(),
            rank: 0,
            body: BodyV1 {
                coll: CollV1 {
                    name: null(),
                    comm_hash: 5,
                    seq_number: 1,
                    func: 4,
                    send_buff: null(),
                    recv_buff: null_mut(),
                    count: 256,
                    root: 0,
                    datatype: 7,
                    op: 0,
                    traffic_bytes: 1024,
                    n_max_channels: 4,
                    n_warps: 16,
                    algo: 0,
                    proto: 1,
                    is_collnet: 0,
                    is_nvls: 0,
                },
            },
        };
        let p2p = DescrV1 {
            kind: event::P2P as u8,
            parent: null_mut(),
            rank: 1,
            body: BodyV1 {
                p2p: P2pV1 {
                    name: null(),
                    comm_hash: 5,
                    func: 6,
                    buff: null_mut(),
                    datatype: 7,
                    count: 8,
                    peer: 0,
                },
            },
        };
        let taken = drive(&ncclProfiler_v1.0, &[coll, p2p]);
        assert_eq!(taken.colls[0].func, "AllReduce");
        let seen = taken.seen(0, || Net::Unreported).unwrap();
        assert_eq!(seen.algo.as_deref(), Some("Tree"));
        assert_eq!(seen.proto.as_deref(), Some("LL128"));
        assert_eq!(seen.channels, Some(4));
        assert_eq!(seen.path, Path::IntraNode);
        assert_eq!(taken.p2ps[0].func, "Send");
        let p = taken.seen(1, || Net::Unreported).unwrap();
        assert_eq!(p.channels, None, "v1 names no channels of a send");
    }

    #[test]
    fn v2_reads_names_after_the_traffic_bytes() {
        let _g = test_lock();
        let coll = DescrV2 {
            kind: event::COLL as u8,
            parent: null_mut(),
            rank: 2,
            body: BodyV2 {
                coll: CollV2 {
                    name: c"comm".as_ptr(),
                    comm_hash: 5,
                    seq_number: 1,
                    func: c"AllGather".as_ptr(),
                    send_buff: null(),
                    recv_buff: null_mut(),
                    count: 256,
                    root: 0,
                    datatype: c"ncclFloat32".as_ptr(),
                    traffic_bytes: 4096,
                    n_max_channels: 16,
                    n_warps: 16,
                    algo: c"RING".as_ptr(),
                    proto: c"SIMPLE".as_ptr(),
                },
            },
        };
        let op = DescrV2 {
            kind: event::PROXY_OP as u8,
            parent: null_mut(),
            rank: 2,
            body: BodyV2 {
                p2p: P2pV2 {
                    name: null(),
                    comm_hash: 0,
                    func: null(),
                    buff: null_mut(),
                    datatype: null(),
                    count: 0,
                    peer: 0,
                },
            },
        };
        let taken = drive(&ncclProfiler_v2.0, &[coll, op]);
        let seen = taken.seen(2, || Net::Socket).unwrap();
        assert_eq!(taken.colls[0].func, "AllGather");
        assert_eq!(seen.algo.as_deref(), Some("Ring"));
        assert_eq!(seen.proto.as_deref(), Some("Simple"));
        assert_eq!(seen.channels, Some(16));
        assert_eq!(seen.path, Path::Network(Net::Socket));
    }

    #[test]
    fn v3_reads_the_shorter_collective_and_network_events() {
        let _g = test_lock();
        let coll = DescrV3 {
            kind: event::COLL as u8,
            parent: null_mut(),
            rank: 0,
            body: BodyV3 {
                coll: CollV3 {
                    name: c"comm".as_ptr(),
                    comm_hash: 5,
                    seq_number: 1,
                    func: c"AllReduce".as_ptr(),
                    send_buff: null(),
                    recv_buff: null_mut(),
                    count: 256,
                    root: 0,
                    datatype: c"ncclFloat32".as_ptr(),
                    n_max_channels: 2,
                    n_warps: 16,
                    algo: c"NVLS_TREE".as_ptr(),
                    proto: c"LL".as_ptr(),
                },
            },
        };
        let net = DescrV3 {
            kind: event::NET_PLUGIN as u8,
            parent: null_mut(),
            rank: 0,
            body: BodyV3 {
                net: abi::NetPlugin {
                    id: abi::net_type::IB | 1,
                    data: null_mut(),
                },
            },
        };
        let taken = drive(&ncclProfiler_v3.0, &[coll, net]);
        let seen = taken.seen(0, || Net::Unreported).unwrap();
        assert_eq!(seen.algo.as_deref(), Some("NVLSTree"));
        assert_eq!(seen.proto.as_deref(), Some("LL"));
        assert_eq!(seen.channels, Some(2));
        assert_eq!(seen.path, Path::Network(Net::Ib));
    }

    #[test]
    fn null_pointers_are_refused_not_followed() {
        // SAFETY: null pointers on purpose: the plugin checks them and never follows them.
        unsafe {
            assert_eq!(
                (ncclProfiler_v1.0.init)(null_mut(), null_mut()),
                INTERNAL_ERROR
            );
            assert_eq!(
                (ncclProfiler_v1.0.start_event)(null_mut(), null_mut(), null()),
                INTERNAL_ERROR
            );
            assert_eq!(
                (ncclProfiler_v2.0.start_event)(null_mut(), null_mut(), null()),
                INTERNAL_ERROR
            );
            assert_eq!(
                (ncclProfiler_v3.0.start_event)(null_mut(), null_mut(), null()),
                INTERNAL_ERROR
            );
            assert_eq!((ncclProfiler_v3.0.finalize)(null_mut()), SUCCESS);
        }
    }

    /// Events before the window (mask 0: NCCL would not call; a late event) record nothing.
    #[test]
    fn nothing_is_recorded_while_not_armed() {
        let _g = test_lock();
        let _ = crate::take();
        let d = DescrV1 {
            kind: event::PROXY_OP as u8,
            parent: null_mut(),
            rank: 0,
            body: BodyV1 {
                p2p: P2pV1 {
                    name: null(),
                    comm_hash: 0,
                    func: 0,
                    buff: null_mut(),
                    datatype: 0,
                    count: 0,
                    peer: 0,
                },
            },
        };
        let mut h = null_mut();
        // SAFETY: `h` and `d` are live locals; the context is not read.
        unsafe { (ncclProfiler_v1.0.start_event)(null_mut(), &mut h, &d) };
        assert!(crate::take().net.is_empty());
    }
}
