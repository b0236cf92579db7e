//! Our own loader for libnccl. cudarc's never tries `libnccl.so.2`, the only name runtime-only
//! images ship, and panics when the library is missing; this one finds it, honours an explicit
//! path, and reports a missing library or symbol as a one-line error.
//!
//! [`Nccl`] is the *sys* layer (the raw entry points, for the GPU layer and the benchmarks'
//! bare loops) plus the *result* layer ([`Nccl::check`]) and the safe calls that take no
//! handle ([`Nccl::version`], [`Nccl::unique_id`], [`Nccl::group`]). Communicators and the
//! calls on them are in [`super::comm`] and [`super::op`].
//!
//! Results, datatypes and ops are plain `c_int`s: PreMulSum op ids are created at run time, so a
//! Rust enum there would be undefined behaviour.

use crate::error::{Error, Result, code};
use cudarc::nccl::sys::{ncclComm_t, ncclUniqueId};
use libloading::Library;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::Location;

pub use cudarc::nccl::sys::ncclComm_t as Comm;
pub use cudarc::nccl::sys::ncclUniqueId as UniqueId;

/// Environment variable naming an explicit libnccl path.
pub const LIB_ENV: &str = crate::environment::LIBNCCL.name;

/// Library names tried, in order, when no explicit path is given.
pub const LIB_NAMES: &[&str] = &["libnccl.so.2", "libnccl.so"];

type Stream = *mut c_void;
type Ptr = *const c_void;
type MutPtr = *mut c_void;

/// `ncclConfig_t` as NCCL 2.28 lays it out (the fields nccl-tests sets, and those before them).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Config {
    size: usize,
    magic: u32,
    version: u32,
    /// `blocking`: 0 makes the communicator's calls return `ncclInProgress` instead of waiting
    /// (see [`IN_PROGRESS`]).
    pub blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
    split_share: c_int,
    traffic_class: c_int,
    comm_name: *const c_char,
    collnet_enable: c_int,
    /// `CTAPolicy` (NCCL ≥ 2.27).
    pub cta_policy: c_int,
    shrink_share: c_int,
    nvls_ctas: c_int,
    n_channels_per_net_peer: c_int,
    /// `nvlinkCentricSched` (NCCL ≥ 2.28).
    pub nvlink_centric_sched: c_int,
}

const UNDEF_INT: c_int = c_int::MIN;

/// `ncclInProgress`: a call on a nonblocking communicator (or its split) goes on in the
/// background; `ncclCommGetAsyncError` says when it is done.
pub const IN_PROGRESS: c_int = 7;

/// `NCCL_SPLIT_NOCOLOR`: the colour of a rank that takes part in a split without joining a
/// communicator.
pub const SPLIT_NOCOLOR: c_int = -1;

/// `NCCL_WIN_COLL_SYMMETRIC`: a window registered for symmetric collectives (`-R 2`).
pub const WIN_COLL_SYMMETRIC: c_int = 0x01;

impl Config {
    /// `NCCL_CONFIG_INITIALIZER` for the 2.28 layout: every field "undefined" (NCCL's defaults).
    pub fn new() -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: 0xcafe_beef,
            version: 22803,
            blocking: UNDEF_INT,
            cga_cluster_size: UNDEF_INT,
            min_ctas: UNDEF_INT,
            max_ctas: UNDEF_INT,
            net_name: std::ptr::null(),
            split_share: UNDEF_INT,
            traffic_class: UNDEF_INT,
            comm_name: std::ptr::null(),
            collnet_enable: UNDEF_INT,
            cta_policy: UNDEF_INT,
            shrink_share: UNDEF_INT,
            nvls_ctas: UNDEF_INT,
            n_channels_per_net_peer: UNDEF_INT,
            nvlink_centric_sched: UNDEF_INT,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::new()
    }
}

macro_rules! nccl_api {
    (
        required { $($name:ident : fn($($arg:ty),*) -> $ret:ty;)* }
        optional { $($oname:ident : fn($($oarg:ty),*) -> $oret:ty;)* }
    ) => {
        /// The libnccl entry points, resolved once at start.
        #[allow(non_snake_case)]
        pub struct Nccl {
            /// Never closed: NCCL's own threads (the bootstrap root thread `ncclGetUniqueId`
            /// starts, proxy threads) may still run when a run ends early, and unmapping their
            /// code under them is a crash at exit instead of the run's exit code.
            _lib: std::mem::ManuallyDrop<Library>,
            /// Path or name the library was loaded from.
            pub path: String,
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                pub $name: unsafe extern "C" fn($($arg),*) -> $ret,
            )*
            $(
                #[doc = concat!("`", stringify!($oname), "`, if this libnccl has it")]
                pub $oname: Option<unsafe extern "C" fn($($oarg),*) -> $oret>,
            )*
        }

        impl Nccl {
            #[allow(non_snake_case)]
            fn resolve(lib: Library, path: String) -> Result<Nccl> {
                // SAFETY: looks symbols up without calling them.
                let find = |n: &str| unsafe { lib.get::<*const c_void>(n.as_bytes()) }
                    .ok()
                    .map(|s| *s);
                let required = [$(stringify!($name)),*];
                let missing = crate::gpu::driver::missing_symbols(&find, &required);
                if !missing.is_empty() {
                    let file = crate::gpu::driver::library_path(&find, &["ncclGetVersion"])
                        .filter(|f| *f != path)
                        .map(|f| format!("{path} ({f})"))
                        .unwrap_or_else(|| path.clone());
                    return Err(Error::Library {
                        what: format!(
                            "{file} lacks {}: this NCCL is too old (or not NCCL); nccl-perf needs NCCL 2.17 or later",
                            missing.join(", ")
                        ),
                        code: code::NCCL,
                    });
                }
                // SAFETY: each symbol is declared with NCCL's C signature.
                unsafe {
                    $(
                        let $name = *lib
                            .get::<unsafe extern "C" fn($($arg),*) -> $ret>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                            .map_err(|_| Error::Library {
                                what: format!("{path} lacks {}", stringify!($name)),
                                code: code::NCCL,
                            })?;
                    )*
                    $(
                        let $oname = lib
                            .get::<unsafe extern "C" fn($($oarg),*) -> $oret>(
                                concat!(stringify!($oname), "\0").as_bytes(),
                            )
                            .ok()
                            .map(|s| *s);
                    )*
                    Ok(Nccl { _lib: std::mem::ManuallyDrop::new(lib), path, $($name,)* $($oname,)* })
                }
            }

            /// Forgets the optional entry point `name` (unknown names are ignored).
            fn forget(&mut self, name: &str) {
                match name {
                    $(stringify!($oname) => self.$oname = None,)*
                    _ => {}
                }
            }

            /// The names of the optional entry points.
            #[cfg(test)]
            fn optional_names() -> &'static [&'static str] {
                &[$(stringify!($oname)),*]
            }
        }
    };
}

nccl_api! {
    required {
        ncclGetVersion: fn(*mut c_int) -> c_int;
        ncclGetUniqueId: fn(*mut ncclUniqueId) -> c_int;
        ncclCommInitRank: fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int) -> c_int;
        ncclCommDestroy: fn(ncclComm_t) -> c_int;
        ncclCommAbort: fn(ncclComm_t) -> c_int;
        ncclCommGetAsyncError: fn(ncclComm_t, *mut c_int) -> c_int;
        ncclGetErrorString: fn(c_int) -> *const c_char;
        ncclGroupStart: fn() -> c_int;
        ncclGroupEnd: fn() -> c_int;
        ncclAllReduce: fn(Ptr, MutPtr, usize, c_int, c_int, ncclComm_t, Stream) -> c_int;
        ncclAllGather: fn(Ptr, MutPtr, usize, c_int, ncclComm_t, Stream) -> c_int;
        ncclReduceScatter: fn(Ptr, MutPtr, usize, c_int, c_int, ncclComm_t, Stream) -> c_int;
        ncclBroadcast: fn(Ptr, MutPtr, usize, c_int, c_int, ncclComm_t, Stream) -> c_int;
        ncclReduce: fn(Ptr, MutPtr, usize, c_int, c_int, c_int, ncclComm_t, Stream) -> c_int;
        ncclSend: fn(Ptr, usize, c_int, c_int, ncclComm_t, Stream) -> c_int;
        ncclRecv: fn(MutPtr, usize, c_int, c_int, ncclComm_t, Stream) -> c_int;
    }
    optional {
        ncclCommInitRankConfig: fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int, *mut Config) -> c_int;
        ncclCommInitRankScalable: fn(*mut ncclComm_t, c_int, c_int, c_int, *mut ncclUniqueId, *mut Config) -> c_int;
        ncclGetLastError: fn(ncclComm_t) -> *const c_char;
        ncclRedOpCreatePreMulSum: fn(*mut c_int, MutPtr, c_int, c_int, ncclComm_t) -> c_int;
        ncclRedOpDestroy: fn(c_int, ncclComm_t) -> c_int;
        ncclMemAlloc: fn(*mut MutPtr, usize) -> c_int;
        ncclMemFree: fn(MutPtr) -> c_int;
        ncclAlltoAll: fn(Ptr, MutPtr, usize, c_int, ncclComm_t, Stream) -> c_int;
        ncclGather: fn(Ptr, MutPtr, usize, c_int, c_int, ncclComm_t, Stream) -> c_int;
        ncclScatter: fn(Ptr, MutPtr, usize, c_int, c_int, ncclComm_t, Stream) -> c_int;
        ncclCommRegister: fn(ncclComm_t, MutPtr, usize, *mut MutPtr) -> c_int;
        ncclCommDeregister: fn(ncclComm_t, MutPtr) -> c_int;
        ncclCommWindowRegister: fn(ncclComm_t, MutPtr, usize, *mut MutPtr, c_int) -> c_int;
        ncclCommWindowDeregister: fn(ncclComm_t, MutPtr) -> c_int;
        ncclCommSplit: fn(ncclComm_t, c_int, c_int, *mut ncclComm_t, *mut Config) -> c_int;
    }
}

/// The NCCL release (major·10000 + minor·100 + patch) that introduced each optional entry point
/// we call. A library older than that is treated as lacking it even where it exports the name
/// (a pre-release or vendor build), so every feature follows the loaded version, as nccl-tests'
/// version checks do, and nothing calls an entry point newer than the library's version.
pub const SINCE: &[(&str, i32)] = &[
    ("ncclRedOpCreatePreMulSum", 21100),
    ("ncclRedOpDestroy", 21100),
    ("ncclGetLastError", 21300),
    ("ncclCommSplit", 21800),
    ("ncclCommInitRankConfig", 21400),
    ("ncclCommInitRankScalable", 22300),
    ("ncclMemAlloc", 21900),
    ("ncclMemFree", 21900),
    ("ncclCommRegister", 21900),
    ("ncclCommDeregister", 21900),
    ("ncclCommWindowRegister", 22700),
    ("ncclCommWindowDeregister", 22700),
    ("ncclAlltoAll", 22800),
    ("ncclGather", 22800),
    ("ncclScatter", 22800),
];

/// The optional entry points a library of `version` is too old for.
pub fn too_new_for(version: i32) -> impl Iterator<Item = &'static str> {
    SINCE
        .iter()
        .filter(move |(_, since)| version < *since)
        .map(|(name, _)| *name)
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl").field("path", &self.path).finish()
    }
}

// SAFETY: the function pointers and the library handle may be used from any thread; NCCL's own
// thread-safety rules are kept by the callers.
unsafe impl Send for Nccl {}
// SAFETY: as above; the struct is immutable after loading.
unsafe impl Sync for Nccl {}

impl Nccl {
    /// Loads libnccl from `NCCL_PERF_LIBNCCL` if set, else `libnccl.so.2`, else `libnccl.so`.
    /// The library stays loaded for the rest of the process (see `_lib`), so the entry points
    /// are `'static`: owned communicators and buffers keep a reference for their `Drop`.
    pub fn load() -> Result<&'static Nccl> {
        let explicit = std::env::var(LIB_ENV).ok().filter(|p| !p.is_empty());
        let candidates: Vec<String> = match &explicit {
            Some(p) => vec![p.clone()],
            None => LIB_NAMES.iter().map(|s| s.to_string()).collect(),
        };
        let mut last_err = String::new();
        for name in &candidates {
            // SAFETY: loading libnccl runs its (well-behaved) initialisers.
            match unsafe { Library::new(name) } {
                Ok(lib) => {
                    let mut nccl = Nccl::resolve(lib, name.clone())?;
                    let version = nccl.version()?;
                    for f in too_new_for(version) {
                        nccl.forget(f);
                    }
                    return Ok(Box::leak(Box::new(nccl)));
                }
                Err(e) => last_err = e.to_string(),
            }
        }
        let hint = if explicit.is_some() {
            format!("check the path in {LIB_ENV}")
        } else {
            format!(
                "install NCCL (package libnccl2 or the nvidia-nccl pip wheel), add its folder to LD_LIBRARY_PATH, or set {LIB_ENV}=/path/to/libnccl.so.2"
            )
        };
        Err(Error::Library {
            what: format!(
                "cannot load NCCL (tried {}): {last_err}; {hint}",
                candidates.join(", ")
            ),
            code: code::NCCL,
        })
    }

    /// `ncclGetVersion` as major·10000 + minor·100 + patch.
    pub fn version(&self) -> Result<i32> {
        let mut v = 0;
        // SAFETY: valid out pointer.
        self.check(unsafe { (self.ncclGetVersion)(&mut v) })?;
        Ok(v)
    }

    /// The error string of an NCCL result code.
    pub fn error_string(&self, r: c_int) -> String {
        // SAFETY: NCCL returns a static string for any code.
        let p = unsafe { (self.ncclGetErrorString)(r) };
        if p.is_null() {
            return format!("NCCL error {r}");
        }
        // SAFETY: non-null, NUL-terminated static string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// `ncclGetLastError(NULL)`, or "" if unavailable.
    pub fn last_error(&self) -> String {
        let Some(f) = self.ncclGetLastError else {
            return String::new();
        };
        // SAFETY: NULL comm is allowed; the string is owned by NCCL.
        let p = unsafe { f(std::ptr::null_mut()) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-null, NUL-terminated.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// A new unique id (`ncclGetUniqueId`): what every rank of a communicator is created from.
    /// Also starts NCCL's bootstrap root thread in this process.
    #[track_caller]
    pub fn unique_id(&self) -> Result<UniqueId> {
        let mut id = UniqueId { internal: [0; 128] };
        // SAFETY: a valid out pointer.
        self.check(unsafe { (self.ncclGetUniqueId)(&mut id) })?;
        Ok(id)
    }

    /// Runs `f` inside an NCCL group (`ncclGroupStart` … `ncclGroupEnd`). The group is closed
    /// whatever `f` returns; `f`'s error comes first, then the group end's.
    #[inline]
    #[track_caller]
    pub fn group<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        // SAFETY: opens a group that is closed below on every path.
        self.check(unsafe { (self.ncclGroupStart)() })?;
        let r = f();
        // SAFETY: closes the group opened above.
        let end = self.check(unsafe { (self.ncclGroupEnd)() });
        let v = r?;
        end.map(|_| v)
    }

    /// Converts an NCCL result into ours, recording the caller's location.
    #[track_caller]
    #[inline]
    pub fn check(&self, r: c_int) -> Result<()> {
        if r == 0 {
            return Ok(());
        }
        Err(Error::Nccl {
            site: Location::caller(),
            code: r,
            msg: self.error_string(r),
            last: self.last_error(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_layout_matches_nccl_2_28() {
        // size_t, 2×uint, 4×int, ptr, 2×int, ptr, 6×int → 80 bytes on 64-bit Linux.
        assert_eq!(std::mem::size_of::<Config>(), 80);
        let c = Config::new();
        assert_eq!(c.magic, 0xcafebeef);
        assert_eq!(c.nvlink_centric_sched, c_int::MIN);
    }

    #[test]
    fn optional_entry_points_follow_the_loaded_version() {
        // Every optional entry point has its release, and only those.
        let mut names: Vec<&str> = SINCE.iter().map(|(n, _)| *n).collect();
        names.sort();
        let mut optional = Nccl::optional_names().to_vec();
        optional.sort();
        assert_eq!(names, optional);
        assert_eq!(too_new_for(22803).count(), 0);
        assert_eq!(
            too_new_for(22703).collect::<Vec<_>>(),
            ["ncclAlltoAll", "ncclGather", "ncclScatter"]
        );
        let old: Vec<_> = too_new_for(21701).collect();
        assert!(old.contains(&"ncclMemAlloc") && old.contains(&"ncclCommRegister"));
        assert!(!old.contains(&"ncclCommInitRankConfig") && !old.contains(&"ncclGetLastError"));
        assert!(old.contains(&"ncclCommSplit"));
        assert!(!too_new_for(21800).any(|n| n == "ncclCommSplit"));
        assert_eq!(too_new_for(21900).count(), 6);
    }

    #[test]
    fn missing_explicit_library_is_a_clean_error() {
        // SAFETY: only this test reads or writes the variable.
        unsafe { std::env::set_var(LIB_ENV, "/nonexistent/libnccl.so.2") };
        let err = Nccl::load().expect_err("must fail");
        // SAFETY: as above.
        unsafe { std::env::remove_var(LIB_ENV) };
        assert_eq!(err.exit_code(), 3);
        let msg = err.to_string();
        assert!(
            msg.contains("/nonexistent/libnccl.so.2") && msg.contains(LIB_ENV),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
    }
}
