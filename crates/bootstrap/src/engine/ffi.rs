//! The engines' one fence of `unsafe` code: taking over the socket a PMI launcher hands down
//! (`PMI_FD`), and PMIx's client library, opened with `dlopen` at run time (libloading), its
//! structures written here from PMIx's public header `pmix_common.h` (stable since PMIx 3.2.5;
//! `tests.rs` checks them against the header with the C compiler where it is installed).
//! An MPI library opened the same way is `ffi/mpi.rs`, a PMI-2 library `ffi/pmi2.rs`.
//! Everything here is called from safe wrappers (`pmix.rs`, `pmi1.rs`, `mpilib.rs`,
//! `pmi2.rs`); no pointer leaves.

pub mod mpi;
pub mod pmi2;

use std::ffi::{CStr, CString, c_char, c_int};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

/// Takes over the inherited socket `fd` (`PMI_FD`). Refuses a descriptor that is not open or
/// not a socket (a stale variable must not make us write to some file), standard input, output
/// and error (a launcher never hands those down as its socket; standard error may well be a
/// socket, journald's, and taking it would lose every error line), and a descriptor that is the
/// same socket as one of them.
pub fn adopt_socket(fd: i32) -> Result<OwnedFd, String> {
    if fd < 0 {
        return Err(format!("PMI_FD={fd} is not a file descriptor"));
    }
    if fd <= 2 {
        let name = ["standard input", "standard output", "standard error"][fd as usize];
        return Err(format!(
            "PMI_FD={fd} is this process' {name}, not a launcher's socket (a stale PMI_FD?)"
        ));
    }
    // Only a descriptor this process has open is looked at at all.
    let link = format!("/proc/self/fd/{fd}");
    let target = std::fs::read_link(&link)
        .map_err(|e| format!("PMI_FD={fd} is not an open file descriptor here ({e})"))?;
    if !target.to_string_lossy().starts_with("socket:") {
        return Err(format!(
            "PMI_FD={fd} is not a socket (it is {})",
            target.display()
        ));
    }
    for std_fd in 0..=2 {
        if std::fs::read_link(format!("/proc/self/fd/{std_fd}")).is_ok_and(|t| t == target) {
            return Err(format!(
                "PMI_FD={fd} is the same socket as this process' descriptor {std_fd} (standard \
                 input, output or error), not a launcher's own (a stale PMI_FD?)"
            ));
        }
    }
    // SAFETY: the descriptor is open in this process (its /proc entry exists) and is a socket
    // the launcher handed to us for this one purpose; nothing else in the program uses it, so
    // owning it (closing it when done) is sound.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `PMIX_MAX_NSLEN + 1`.
const NSLEN: usize = 256;
/// `PMIX_MAX_KEYLEN + 1`.
const KEYLEN: usize = 512;
/// `PMIX_RANK_WILDCARD`: every process of a namespace.
const RANK_WILDCARD: u32 = u32::MAX - 1;
/// `PMIX_BOOL`, `PMIX_STRING`, `PMIX_UINT16`, `PMIX_UINT32` (pmix_data_type_t).
const T_BOOL: u16 = 1;
const T_STRING: u16 = 3;
const T_UINT16: u16 = 13;
const T_UINT32: u16 = 14;
/// `PMIX_GLOBAL` (pmix_scope_t): visible to every process, local or remote.
const SCOPE_GLOBAL: u8 = 3;

/// `pmix_proc_t`: a namespace and a rank.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Proc {
    pub(super) nspace: [c_char; NSLEN],
    pub(super) rank: u32,
}

/// The data of a `pmix_value_t` (a union of 24 bytes, 8-aligned: the members used here and
/// the widest).
#[repr(C)]
#[derive(Clone, Copy)]
pub union Data {
    flag: bool,
    uint16: u16,
    uint32: u32,
    string: *mut c_char,
    widest: [u64; 3],
}

/// `pmix_value_t`: a type tag and its data.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Value {
    pub(super) kind: u16,
    pub(super) data: Data,
}

/// `pmix_info_t`: a key, directives and a value.
#[repr(C)]
pub struct Info {
    pub(super) key: [c_char; KEYLEN],
    pub(super) flags: u32,
    pub(super) value: Value,
}

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;

/// An opened PMIx client library and this process' identity in it.
pub struct Pmix {
    init: InitFn,
    finalize: FinalizeFn,
    abort: AbortFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    get: GetFn,
    me: std::sync::OnceLock<Proc>,
    /// Kept open as long as the functions above may be called (never closed before exit: a
    /// PMIx library leaves threads running).
    _lib: libloading::Library,
}

// SAFETY: the structure holds plain function pointers, a plain-data `Proc` and the library
// handle; PMIx's client API may be called from any thread (it serialises through its own
// progress thread).
unsafe impl Send for Pmix {}
// SAFETY: as for `Send`: no method takes `&mut self` state that is not copied first.
unsafe impl Sync for Pmix {}

/// Why a PMIx call failed: the function and its status code.
pub type PmixResult<T> = Result<T, String>;

fn status(what: &str, rc: c_int) -> PmixResult<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with PMIx status {rc}"))
    }
}

fn c_key(key: &str) -> PmixResult<CString> {
    if key.len() >= KEYLEN {
        return Err(format!("the PMIx key '{key}' is too long"));
    }
    CString::new(key).map_err(|_| format!("the PMIx key '{key}' holds a NUL"))
}

impl Pmix {
    /// Opens the library at `path` and finds its functions (does not initialise it).
    pub fn open(path: &Path) -> PmixResult<Pmix> {
        // SAFETY: loading a shared library runs its initialisers; libpmix's are the library's
        // own set-up, run once, as in any PMIx client.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol is PMIx's public client function of that name, whose C
                // prototype (pmix.h, stable since PMIx 2) is the type it is read as.
                let f: libloading::Symbol<$ty> = unsafe { lib.get($name) }.map_err(|e| {
                    format!(
                        "{} has no {}: {e}",
                        path.display(),
                        String::from_utf8_lossy(&$name[..$name.len() - 1])
                    )
                })?;
                *f
            }};
        }
        Ok(Pmix {
            init: sym!(b"PMIx_Init\0", InitFn),
            finalize: sym!(b"PMIx_Finalize\0", FinalizeFn),
            abort: sym!(b"PMIx_Abort\0", AbortFn),
            put: sym!(b"PMIx_Put\0", PutFn),
            commit: sym!(b"PMIx_Commit\0", CommitFn),
            fence: sym!(b"PMIx_Fence\0", FenceFn),
            get: sym!(b"PMIx_Get\0", GetFn),
            me: std::sync::OnceLock::new(),
            _lib: lib,
        })
    }

    /// `PMIx_Init`: connects to the launcher's PMIx server; returns this process' namespace
    /// and rank.
    pub fn init(&self) -> PmixResult<(String, u32)> {
        let mut me = Proc {
            nspace: [0; NSLEN],
            rank: 0,
        };
        // SAFETY: `me` is a valid pmix_proc_t for the library to fill; no info array.
        let rc = unsafe { (self.init)(&mut me, std::ptr::null_mut(), 0) };
        status("PMIx_Init", rc)?;
        let _ = self.me.set(me);
        Ok((nspace_text(&me), me.rank))
    }

    /// This process (a zero namespace before `init`).
    fn me(&self) -> Proc {
        self.me.get().copied().unwrap_or(Proc {
            nspace: [0; NSLEN],
            rank: 0,
        })
    }

    fn job(&self) -> Proc {
        Proc {
            nspace: self.me().nspace,
            rank: RANK_WILDCARD,
        }
    }

    /// A number the job holds (`pmix.job.size`, `pmix.univ.size`) or this process does
    /// (`pmix.lrank`, with `own`).
    pub fn get_number(&self, key: &str, own: bool) -> PmixResult<u64> {
        let who = if own { self.me() } else { self.job() };
        let k = c_key(key)?;
        let mut out: *mut Value = std::ptr::null_mut();
        // SAFETY: `who` and `k` live across the call, no info array, and `out` is where the
        // library stores a value it allocates.
        let rc = unsafe { (self.get)(&who, k.as_ptr(), std::ptr::null(), 0, &mut out) };
        status(&format!("PMIx_Get({key})"), rc)?;
        if out.is_null() {
            return Err(format!("PMIx_Get({key}) returned no value"));
        }
        // SAFETY: on success `out` points to a pmix_value_t the library filled; the member
        // read is the one its type tag names. (The small value is left to the library: PMIx
        // 3 has no function to free it.)
        let v = unsafe { *out };
        // SAFETY: as above: each arm reads the member of the tag it matched.
        unsafe {
            match v.kind {
                T_UINT32 => Ok(u64::from(v.data.uint32)),
                T_UINT16 => Ok(u64::from(v.data.uint16)),
                other => Err(format!(
                    "PMIx_Get({key}) returned type {other}, not a number"
                )),
            }
        }
    }

    /// `PMIx_Put` of a string in the global scope.
    pub fn put(&self, key: &str, value: &str) -> PmixResult<()> {
        let k = c_key(key)?;
        let text = CString::new(value).map_err(|_| "a PMIx value holds a NUL".to_string())?;
        let mut v = Value {
            kind: T_STRING,
            data: Data {
                string: text.as_ptr().cast_mut(),
            },
        };
        // SAFETY: key, value and the string it points to live across the call; PMIx copies
        // the value (PMIx_Put does not keep the caller's pointers).
        let rc = unsafe { (self.put)(SCOPE_GLOBAL, k.as_ptr(), &mut v) };
        status("PMIx_Put", rc)
    }

    /// `PMIx_Commit`.
    pub fn commit(&self) -> PmixResult<()> {
        // SAFETY: no arguments; the library is initialised.
        status("PMIx_Commit", unsafe { (self.commit)() })
    }

    /// `PMIx_Fence` over the whole namespace, collecting the data put so far.
    pub fn fence(&self) -> PmixResult<()> {
        let job = self.job();
        let mut info = Info {
            key: [0; KEYLEN],
            flags: 0,
            value: Value {
                kind: T_BOOL,
                data: Data { widest: [0; 3] },
            },
        };
        for (d, s) in info.key.iter_mut().zip(b"pmix.collect") {
            *d = *s as c_char;
        }
        info.value.data.flag = true;
        // SAFETY: one pmix_proc_t and one pmix_info_t, both alive across the call.
        let rc = unsafe { (self.fence)(&job, 1, &info, 1) };
        status("PMIx_Fence", rc)
    }

    /// `PMIx_Get` of a string another process put.
    pub fn get_string(&self, rank: u32, key: &str) -> PmixResult<String> {
        let who = Proc {
            nspace: self.me().nspace,
            rank,
        };
        let k = c_key(key)?;
        let mut out: *mut Value = std::ptr::null_mut();
        // SAFETY: as in `get_number`.
        let rc = unsafe { (self.get)(&who, k.as_ptr(), std::ptr::null(), 0, &mut out) };
        status(&format!("PMIx_Get({key} of rank {rank})"), rc)?;
        if out.is_null() {
            return Err(format!("PMIx_Get({key}) returned no value"));
        }
        // SAFETY: the library filled `*out`; a string-typed value holds a NUL-terminated
        // string or NULL, which is checked.
        unsafe {
            let v = *out;
            if v.kind != T_STRING || v.data.string.is_null() {
                return Err(format!(
                    "PMIx_Get({key}) returned type {}, not a string",
                    v.kind
                ));
            }
            Ok(CStr::from_ptr(v.data.string).to_string_lossy().into_owned())
        }
    }

    /// `PMIx_Finalize`.
    pub fn finalize(&self) -> PmixResult<()> {
        // SAFETY: no info array; the library is initialised.
        status("PMIx_Finalize", unsafe {
            (self.finalize)(std::ptr::null(), 0)
        })
    }

    /// `PMIx_Abort` of the whole namespace with `code` and `msg`.
    pub fn abort(&self, code: i32, msg: &str) -> PmixResult<()> {
        let text = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        let mut job = self.job();
        // SAFETY: the message and the one pmix_proc_t live across the call.
        let rc = unsafe { (self.abort)(code, text.as_ptr(), &mut job, 1) };
        status("PMIx_Abort", rc)
    }
}

fn nspace_text(p: &Proc) -> String {
    let bytes: Vec<u8> = p
        .nspace
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests;
