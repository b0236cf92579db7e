//! The parts of NCCL's profiler and tuner plugin ABI that the plugins use, written from NCCL's
//! public plugin headers (`src/include/plugin/profiler/profiler_v4.h`, `profiler_v5.h`,
//! `tuner/tuner_v4.h`, `tuner_v5.h`, `nccl_profiler.h`, `nccl_tuner.h`; NCCL 2.27–2.28).
//!
//! Event descriptors are read field by field through raw pointers ([`read_coll`] and the
//! like): the unions below declare only the members we read, so a descriptor is never viewed
//! as a whole Rust value larger than NCCL's.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::addr_of;

/// `ncclResult_t`: 0 is success.
pub type NcclResult = c_int;
/// `ncclSuccess`.
pub const SUCCESS: NcclResult = 0;
/// `ncclInternalError`, returned when NCCL hands the plugin a null pointer it needs.
pub const INTERNAL_ERROR: NcclResult = 3;

/// `ncclDebugLogger_t` (unused: the plugins do not log).
pub type Logger = *const c_void;

/// Event type bits of the activation mask (`nccl_profiler.h`).
pub mod event {
    /// A collective (algorithm, protocol, channels).
    pub const COLL: u64 = 1 << 1;
    /// A point-to-point operation (channels).
    pub const P2P: u64 = 1 << 2;
    /// A proxy operation: NCCL's proxy thread moved data over the network.
    pub const PROXY_OP: u64 = 1 << 3;
    /// A proxy step (parent of network plugin events).
    pub const PROXY_STEP: u64 = 1 << 4;
    /// An event of a network transport (NCCL's IB or socket transport, or a net plugin).
    pub const NET_PLUGIN: u64 = 1 << 7;
}

/// The top 16 bits of a network event's id name its transport (`NCCL_PROFILER_NET_TYPE_*`).
pub mod net_type {
    /// Bits of the id that hold the version; the rest is the type.
    pub const VERSION_BITS: u32 = 16;
    /// NCCL's InfiniBand/RoCE transport (`net_ib`).
    pub const IB: i64 = 1 << VERSION_BITS;
    /// NCCL's socket transport (`net_socket`).
    pub const SOCKET: i64 = 2 << VERSION_BITS;
}

/// The collective member of the descriptor union (v4; v5 appends a field we do not read).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Coll {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// The point-to-point member (v4; v5 appends a field we do not read).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2p {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub n_channels: u8,
}

/// The network plugin member.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetPlugin {
    pub id: i64,
    pub data: *mut c_void,
}

/// The proxy operation member (v4 and v5 alike): one channel's sends to, or receives from,
/// one peer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOp {
    pub pid: c_int,
    pub channel_id: u8,
    pub peer: c_int,
    pub n_steps: c_int,
    pub chunk_size: c_int,
    pub is_send: c_int,
}

/// The proxy step member.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyStep {
    pub step: c_int,
}

/// The members of the descriptor union that we read.
#[repr(C)]
pub union Body {
    pub coll: Coll,
    pub p2p: P2p,
    pub proxy_op: ProxyOp,
    pub proxy_step: ProxyStep,
    pub net: NetPlugin,
}

/// `ncclProfilerEventDescr_v4_t`: the type is one byte.
#[repr(C)]
pub struct DescrV4 {
    pub kind: u8,
    pub parent: *mut c_void,
    pub rank: c_int,
    pub body: Body,
}

/// `ncclProfilerEventDescr_v5_t`: the type is 64 bits; the union starts where v4's does.
#[repr(C)]
pub struct DescrV5 {
    pub kind: u64,
    pub parent: *mut c_void,
    pub rank: c_int,
    pub body: Body,
}

/// Profiler v4 (NCCL 2.27).
#[repr(C)]
pub struct ProfilerV4 {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(
        *mut *mut c_void,
        *mut c_int,
        *const c_char,
        u64,
        c_int,
        c_int,
        c_int,
        Logger,
    ) -> NcclResult,
    pub start_event:
        unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *const DescrV4) -> NcclResult,
    pub stop_event: unsafe extern "C" fn(*mut c_void) -> NcclResult,
    pub record_event_state: unsafe extern "C" fn(*mut c_void, c_int, *const c_void) -> NcclResult,
    pub finalize: unsafe extern "C" fn(*mut c_void) -> NcclResult,
}

/// Profiler v5 (NCCL 2.28): `init` takes the communicator id first.
#[repr(C)]
pub struct ProfilerV5 {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(
        *mut *mut c_void,
        u64,
        *mut c_int,
        *const c_char,
        c_int,
        c_int,
        c_int,
        Logger,
    ) -> NcclResult,
    pub start_event:
        unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *const DescrV5) -> NcclResult,
    pub stop_event: unsafe extern "C" fn(*mut c_void) -> NcclResult,
    pub record_event_state: unsafe extern "C" fn(*mut c_void, c_int, *const c_void) -> NcclResult,
    pub finalize: unsafe extern "C" fn(*mut c_void) -> NcclResult,
}

/// `getCollInfo` of tuner v4 and v5: `(context, collType, nBytes, numPipeOps, collCostTable,
/// numAlgo, numProto, regBuff, nChannels)`. The cost table is a `numAlgo × numProto` array of
/// floats (µs; negative: not possible), passed as `float**`.
pub type GetCollInfo = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    usize,
    c_int,
    *mut *mut f32,
    c_int,
    c_int,
    c_int,
    *mut c_int,
) -> NcclResult;

/// `getCollInfo` of tuner v3: v4's without `regBuff`.
pub type GetCollInfoV3 = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    usize,
    c_int,
    *mut *mut f32,
    c_int,
    c_int,
    *mut c_int,
) -> NcclResult;

/// Tuner v3 (NCCL 2.23–2.25 load it first; later ones still do): v4's calls, `getCollInfo`
/// without `regBuff`.
#[repr(C)]
pub struct TunerV3 {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(usize, usize, Logger, *mut *mut c_void) -> NcclResult,
    pub get_coll_info: GetCollInfoV3,
    pub destroy: unsafe extern "C" fn(*mut c_void) -> NcclResult,
}

/// Tuner v4 (NCCL 2.26–2.27): `init(nRanks, nNodes, logger, context)`.
#[repr(C)]
pub struct TunerV4 {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(usize, usize, Logger, *mut *mut c_void) -> NcclResult,
    pub get_coll_info: GetCollInfo,
    pub destroy: unsafe extern "C" fn(*mut c_void) -> NcclResult,
}

/// Tuner v5 (NCCL 2.28): `init(context, commId, nRanks, nNodes, logger, nvlDomainInfo,
/// constants)`.
#[repr(C)]
pub struct TunerV5 {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(
        *mut *mut c_void,
        u64,
        usize,
        usize,
        Logger,
        *mut c_void,
        *mut c_void,
    ) -> NcclResult,
    pub get_coll_info: GetCollInfo,
    pub finalize: unsafe extern "C" fn(*mut c_void) -> NcclResult,
}

/// NCCL's algorithm names by index in the cost table (`NCCL_ALGO_*`, `nccl_tuner.h`), spelled
/// as NCCL's documentation and `NCCL_ALGO` spell them (the profiler's events say `RING`,
/// `NVLS_TREE`: [`canonical`] maps those here).
pub const ALGORITHMS: [&str; 7] = [
    "Tree",
    "Ring",
    "CollNetDirect",
    "CollNetChain",
    "NVLS",
    "NVLSTree",
    "PAT",
];

/// NCCL's protocol names by index (`NCCL_PROTO_*`).
pub const PROTOCOLS: [&str; 3] = ["LL", "LL128", "Simple"];

/// `name` as spelled in `table` ([`ALGORITHMS`] or [`PROTOCOLS`]) when it is one of them but
/// for case and underscores (`RING` → `Ring`, `NVLS_TREE` → `NVLSTree`, `SIMPLE` → `Simple`);
/// otherwise unchanged.
pub fn canonical(name: String, table: &[&str]) -> String {
    table
        .iter()
        .find(|t| nccl_perf_explain::observed::same_name(t, Some(&name)))
        .map_or(name, |t| (*t).to_string())
}

/// `ncclFunc_t` names by value (`nccl_common.h`).
pub const FUNCS: [&str; 11] = [
    "Broadcast",
    "Reduce",
    "AllGather",
    "ReduceScatter",
    "AllReduce",
    "SendRecv",
    "Send",
    "Recv",
    "AlltoAll",
    "Scatter",
    "Gather",
];

/// Longest name kept from NCCL's strings (they are short constants; a guard, not a limit).
const MAX_NAME: usize = 64;

/// A NUL-terminated string from NCCL, copied (lossily, at most `MAX_NAME` bytes); `None`
/// for a null pointer.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string valid for the call.
pub unsafe fn text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    let cut = &bytes[..bytes.len().min(MAX_NAME)];
    Some(String::from_utf8_lossy(cut).into_owned())
}

/// The collective member of a descriptor's union.
///
/// # Safety
/// `body` points into a live descriptor whose type is a collective.
pub unsafe fn read_coll(body: *const Body) -> Coll {
    // SAFETY: the caller's contract; only the member's own bytes are read.
    unsafe { addr_of!((*body).coll).read() }
}

/// The point-to-point member of a descriptor's union.
///
/// # Safety
/// `body` points into a live descriptor whose type is a point-to-point operation.
pub unsafe fn read_p2p(body: *const Body) -> P2p {
    // SAFETY: the caller's contract.
    unsafe { addr_of!((*body).p2p).read() }
}

/// The proxy operation member of a descriptor's union.
///
/// # Safety
/// `body` points into a live descriptor whose type is a proxy operation.
pub unsafe fn read_proxy_op(body: *const Body) -> ProxyOp {
    // SAFETY: the caller's contract.
    unsafe { addr_of!((*body).proxy_op).read() }
}

/// The proxy step member of a descriptor's union.
///
/// # Safety
/// `body` points into a live descriptor whose type is a proxy step.
pub unsafe fn read_proxy_step(body: *const Body) -> ProxyStep {
    // SAFETY: the caller's contract.
    unsafe { addr_of!((*body).proxy_step).read() }
}

/// The network plugin member of a descriptor's union.
///
/// # Safety
/// `body` points into a live descriptor whose type is a network plugin event.
pub unsafe fn read_net(body: *const Body) -> NetPlugin {
    // SAFETY: the caller's contract.
    unsafe { addr_of!((*body).net).read() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// NCCL 2.28's profiler spells algorithms and protocols as `ncclAlgoToString` does.
    #[test]
    fn profiler_names_map_to_the_cost_table_names() {
        let a = |n: &str| canonical(n.to_string(), &ALGORITHMS);
        let p = |n: &str| canonical(n.to_string(), &PROTOCOLS);
        assert_eq!(a("RING"), "Ring");
        assert_eq!(a("TREE"), "Tree");
        assert_eq!(a("COLLNET_DIRECT"), "CollNetDirect");
        assert_eq!(a("NVLS_TREE"), "NVLSTree");
        assert_eq!(a("PAT"), "PAT");
        assert_eq!(a("Unknown"), "Unknown");
        assert_eq!(p("SIMPLE"), "Simple");
        assert_eq!(p("LL128"), "LL128");
        assert_eq!(p("ll"), "LL");
    }

    /// The offsets NCCL's headers give on x86-64 and aarch64 (LP64).
    #[test]
    fn layouts_match_the_c_headers() {
        assert_eq!(offset_of!(DescrV4, parent), 8);
        assert_eq!(offset_of!(DescrV4, rank), 16);
        assert_eq!(offset_of!(DescrV4, body), 24);
        assert_eq!(offset_of!(DescrV5, body), 24);
        assert_eq!(offset_of!(Coll, count), 32);
        assert_eq!(offset_of!(Coll, root), 40);
        assert_eq!(offset_of!(Coll, datatype), 48);
        assert_eq!(offset_of!(Coll, n_channels), 56);
        assert_eq!(offset_of!(Coll, algo), 64);
        assert_eq!(offset_of!(Coll, proto), 72);
        assert_eq!(offset_of!(P2p, peer), 32);
        assert_eq!(offset_of!(P2p, n_channels), 36);
        assert_eq!(offset_of!(ProxyOp, channel_id), 4);
        assert_eq!(offset_of!(ProxyOp, peer), 8);
        assert_eq!(offset_of!(ProxyOp, n_steps), 12);
        assert_eq!(offset_of!(ProxyOp, is_send), 20);
        assert_eq!(size_of::<ProfilerV5>(), 6 * 8);
        assert_eq!(size_of::<TunerV5>(), 4 * 8);
    }

    #[test]
    fn text_copies_and_bounds() {
        // SAFETY: `text` takes null.
        assert_eq!(unsafe { text(std::ptr::null()) }, None);
        // SAFETY: a C string literal, NUL-terminated.
        assert_eq!(unsafe { text(c"Ring".as_ptr()) }.as_deref(), Some("Ring"));
        let long = std::ffi::CString::new("x".repeat(500)).unwrap();
        assert_eq!(
            // SAFETY: a live `CString`, NUL-terminated.
            unsafe { text(long.as_ptr()) }.map(|s| s.len()),
            Some(MAX_NAME)
        );
    }
}
