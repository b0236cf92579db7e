//! The profiler ABI of NCCL 2.23–2.26 (profiler v1, v2, v3), written from NCCL's public plugin
//! headers at tags v2.23.4-1 (`src/include/nccl_profiler.h`: v1), v2.24.3-1 and v2.25.1-1
//! (`nccl_profiler.h`: v2, v1) and v2.26.5-1 (`src/include/plugin/profiler/profiler_v1.h`,
//! `_v2.h`, `_v3.h`).
//!
//! What NCCL looks up (`dlsym` on the library its variable names; `STATIC_PLUGIN` is
//! `dlopen(NULL)`, the program itself, accepted by every one of these versions):
//!
//! | NCCL | profiler tables, in order | tuner tables, in order |
//! | --- | --- | --- |
//! | 2.22 | none (no profiler interface) | `ncclTunerPlugin_v3`, `_v2` |
//! | 2.23 | `ncclProfiler_v1` | `ncclTunerPlugin_v3`, `_v2` |
//! | 2.24, 2.25 | `ncclProfiler_v2`, `_v1` | `ncclTunerPlugin_v4`, `_v3`, `_v2` |
//! | 2.26 | `ncclProfiler_v3`, `_v2`, `_v1` | `ncclTunerPlugin_v4`, `_v3`, `_v2` |
//!
//! The three tables have one shape ([`ProfilerEarly`]): `init(context, activationMask)`, no
//! communicator details. NCCL keeps the mask in one variable of the library and loads it
//! (relaxed atomic) per kernel plan (2.23–2.25, `ncclProfilerStartGroupEvent`) or per task
//! (2.26, `src/enqueue.cc`), so an empty mask keeps NCCL silent between armed windows, as with
//! v4/v5. Collective events come only under a group event with a non-null handle (ours always
//! is).
//!
//! The descriptors differ in the collective and point-to-point members of their union:
//!
//! * v1 (2.23): function, data type, algorithm and protocol are one-byte enum indexes
//!   (`ncclFunc_t`, `NCCL_ALGO_*`, `NCCL_PROTO_*`); `op`, `trafficBytes`, `isCollnet`,
//!   `isNvls` follow.
//! * v2 (2.24–2.25): the same fields as names (`"AllReduce"`, `"RING"`, `"SIMPLE"`), `op` gone.
//! * v3 (2.26): v2 without `trafficBytes`; the union gains kernel-channel and network-plugin
//!   members (the network member is v4's: an id whose top bits name the transport).
//!
//! The channel count is `nMaxChannels`, the channels NCCL gave the collective. No version before
//! v4 (NCCL 2.27) names the channels of a point-to-point operation. Every member starts with
//! the communicator's name and hash, which v4 dropped. As in [`super::abi`], only the members
//! read are declared, and descriptors are read field by field in place.

use std::ffi::{c_char, c_int, c_void};
use std::ptr::addr_of;

use super::abi::{NcclResult, NetPlugin};

/// The collective member of profiler v1's union (NCCL 2.23).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV1 {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub seq_number: u64,
    pub func: u8,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: u8,
    pub op: u32,
    pub traffic_bytes: usize,
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: u8,
    pub proto: u8,
    pub is_collnet: c_int,
    pub is_nvls: c_int,
}

/// The point-to-point member of profiler v1's union: enum indexes, no channels.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV1 {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub func: u8,
    pub buff: *mut c_void,
    pub datatype: u8,
    pub count: usize,
    pub peer: c_int,
}

/// The collective member of profiler v2's union (NCCL 2.24–2.25): names, `trafficBytes`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV2 {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub traffic_bytes: usize,
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// The collective member of profiler v3's union (NCCL 2.26): v2's without `trafficBytes`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV3 {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// The point-to-point member of profiler v2's and v3's unions: names, no channels.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV2 {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
}

/// The members of profiler v1's union that we read.
#[repr(C)]
pub union BodyV1 {
    pub coll: CollV1,
    pub p2p: P2pV1,
}

/// The members of profiler v2's union that we read.
#[repr(C)]
pub union BodyV2 {
    pub coll: CollV2,
    pub p2p: P2pV2,
}

/// The members of profiler v3's union that we read.
#[repr(C)]
pub union BodyV3 {
    pub coll: CollV3,
    pub p2p: P2pV2,
    pub net: NetPlugin,
}

/// An event descriptor of profiler v1–v3: a one-byte type, the parent, the rank, the union.
#[repr(C)]
pub struct Descr<B> {
    pub kind: u8,
    pub parent: *mut c_void,
    pub rank: c_int,
    pub body: B,
}

/// `ncclProfilerEventDescr_v1_t`.
pub type DescrV1 = Descr<BodyV1>;
/// `ncclProfilerEventDescr_v2_t`.
pub type DescrV2 = Descr<BodyV2>;
/// `ncclProfilerEventDescr_v3_t`.
pub type DescrV3 = Descr<BodyV3>;

/// The profiler table of v1, v2 and v3 (`ncclProfiler_v1_t` …), descriptor type `D`.
#[repr(C)]
pub struct ProfilerEarly<D> {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(*mut *mut c_void, *mut c_int) -> NcclResult,
    pub start_event: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *const D) -> NcclResult,
    pub stop_event: unsafe extern "C" fn(*mut c_void) -> NcclResult,
    pub record_event_state: unsafe extern "C" fn(*mut c_void, c_int, *const c_void) -> NcclResult,
    pub finalize: unsafe extern "C" fn(*mut c_void) -> NcclResult,
}

/// The type, rank and address of the union of a live descriptor, read in place.
///
/// # Safety
/// `descr` points to a live descriptor.
pub unsafe fn head<B>(descr: *const Descr<B>) -> (u8, c_int, *const B) {
    // SAFETY: the caller's contract; each field is read in place.
    unsafe {
        (
            addr_of!((*descr).kind).read(),
            addr_of!((*descr).rank).read(),
            addr_of!((*descr).body),
        )
    }
}

/// The member `field` of a union at `body`, copied.
macro_rules! member {
    ($name:ident, $body:ty, $field:ident, $ty:ty) => {
        /// The member of the union at `body` (copied).
        ///
        /// # Safety
        /// `body` points into a live descriptor whose type says the union holds this member.
        pub unsafe fn $name(body: *const $body) -> $ty {
            // SAFETY: the caller's contract; only the member's own bytes are read.
            unsafe { addr_of!((*body).$field).read() }
        }
    };
}

member!(coll_v1, BodyV1, coll, CollV1);
member!(p2p_v1, BodyV1, p2p, P2pV1);
member!(coll_v2, BodyV2, coll, CollV2);
member!(p2p_v2, BodyV2, p2p, P2pV2);
member!(coll_v3, BodyV3, coll, CollV3);
member!(p2p_v3, BodyV3, p2p, P2pV2);
member!(net_v3, BodyV3, net, NetPlugin);

/// The name at `index` in `table` (profiler v1's enum indexes); `None` past its end (NCCL's
/// "undefined" is -1, 255 in the byte).
pub fn by_index(table: &[&str], index: u8) -> Option<String> {
    table.get(usize::from(index)).map(|s| (*s).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// The offsets NCCL's headers give on x86-64 and aarch64 (LP64).
    #[test]
    fn layouts_match_the_c_headers() {
        assert_eq!(offset_of!(DescrV1, rank), 16);
        assert_eq!(offset_of!(DescrV1, body), 24);
        assert_eq!(offset_of!(DescrV2, body), 24);
        assert_eq!(offset_of!(DescrV3, body), 24);
        assert_eq!(offset_of!(CollV1, func), 24);
        assert_eq!(offset_of!(CollV1, root), 56);
        assert_eq!(offset_of!(CollV1, datatype), 60);
        assert_eq!(offset_of!(CollV1, op), 64);
        assert_eq!(offset_of!(CollV1, n_max_channels), 80);
        assert_eq!(offset_of!(CollV1, algo), 82);
        assert_eq!(offset_of!(CollV1, proto), 83);
        assert_eq!(offset_of!(CollV1, is_nvls), 88);
        assert_eq!(offset_of!(P2pV1, func), 16);
        assert_eq!(offset_of!(P2pV1, datatype), 32);
        assert_eq!(offset_of!(P2pV1, peer), 48);
        assert_eq!(offset_of!(CollV2, datatype), 64);
        assert_eq!(offset_of!(CollV2, n_max_channels), 80);
        assert_eq!(offset_of!(CollV2, algo), 88);
        assert_eq!(offset_of!(CollV2, proto), 96);
        assert_eq!(offset_of!(CollV3, n_max_channels), 72);
        assert_eq!(offset_of!(CollV3, algo), 80);
        assert_eq!(offset_of!(CollV3, proto), 88);
        assert_eq!(offset_of!(P2pV2, peer), 48);
        assert_eq!(std::mem::size_of::<ProfilerEarly<DescrV1>>(), 6 * 8);
    }

    #[test]
    fn indexes_name_or_nothing() {
        use super::super::abi::{ALGORITHMS, PROTOCOLS};
        assert_eq!(by_index(&ALGORITHMS, 1).as_deref(), Some("Ring"));
        assert_eq!(by_index(&ALGORITHMS, 6).as_deref(), Some("PAT"));
        assert_eq!(by_index(&PROTOCOLS, 2).as_deref(), Some("Simple"));
        assert_eq!(by_index(&ALGORITHMS, 255), None);
    }
}
