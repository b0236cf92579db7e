//! A PMI-2 client library opened at run time (never linked): Cray PMI's `libpmi2.so` under
//! PALS, Slurm's `libpmi2.so.0` under `srun --mpi=pmi2`. The prototypes are the PMI-2 API's
//! (`pmi2.h` of MPICH and Slurm): init, the job's id, put, fence, get, finalize, abort, each
//! returning 0 (`PMI2_SUCCESS`) or an error code. Every buffer the library writes into is ours,
//! zeroed and of the size we pass; what it says it wrote is checked by the caller
//! (`pmi2.rs`), never trusted.

use std::ffi::{CString, c_char, c_int};
use std::mem::ManuallyDrop;
use std::path::Path;

/// `PMI2_MAX_KEYLEN`: the longest key, counting its NUL.
pub const MAX_KEYLEN: usize = 64;
/// `PMI2_MAX_VALLEN`: the longest value, counting its NUL.
pub const MAX_VALLEN: usize = 1024;
/// `PMI2_ID_NULL`: no hint of which process put a key.
const ID_NULL: c_int = -1;

type InitFn = unsafe extern "C" fn(*mut c_int, *mut c_int, *mut c_int, *mut c_int) -> c_int;
type VoidFn = unsafe extern "C" fn() -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char) -> c_int;
type JobGetIdFn = unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
type PutFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type GetFn = unsafe extern "C" fn(
    *const c_char,
    c_int,
    *const c_char,
    *mut c_char,
    c_int,
    *mut c_int,
) -> c_int;

/// An opened PMI-2 library.
pub struct Pmi2 {
    init: InitFn,
    finalize: VoidFn,
    abort: AbortFn,
    job_get_id: JobGetIdFn,
    put: PutFn,
    fence: VoidFn,
    get: GetFn,
    /// Never closed: the library keeps its connection to the launcher open.
    _lib: ManuallyDrop<libloading::Library>,
}

// SAFETY: the structure holds function pointers and the library handle. It is moved once to
// the one thread that makes every PMI-2 call (`pmi2.rs`): the API promises no thread safety.
unsafe impl Send for Pmi2 {}

/// Why a PMI-2 call failed.
pub type Pmi2Result<T> = Result<T, String>;

fn status(what: &str, rc: c_int) -> Pmi2Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with PMI-2 error code {rc}"))
    }
}

/// `text` as a C string for the library: no NUL inside, shorter than `max` with its own.
fn c_text(what: &str, text: &str, max: usize) -> Pmi2Result<CString> {
    if text.len() >= max {
        return Err(format!(
            "a PMI-2 {what} of {} bytes is longer than the API's {}",
            text.len(),
            max - 1
        ));
    }
    CString::new(text).map_err(|_| format!("a PMI-2 {what} holds a NUL"))
}

impl Pmi2 {
    /// Opens the library at `path` and finds its functions (does not initialise it).
    pub fn open(path: &Path) -> Pmi2Result<Pmi2> {
        // SAFETY: loading a shared library runs its initialisers; a PMI-2 library's are its
        // own set-up, run once, as in any PMI-2 client.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol is the PMI-2 API's function of that name, whose C
                // prototype (pmi2.h) is the type it is read as.
                let got = unsafe { lib.get::<$ty>($name) };
                *got.map_err(|e| {
                    format!(
                        "{} has no {}: {e}",
                        path.display(),
                        String::from_utf8_lossy(&$name[..$name.len() - 1])
                    )
                })?
            }};
        }
        Ok(Pmi2 {
            init: sym!(b"PMI2_Init\0", InitFn),
            finalize: sym!(b"PMI2_Finalize\0", VoidFn),
            abort: sym!(b"PMI2_Abort\0", AbortFn),
            job_get_id: sym!(b"PMI2_Job_GetId\0", JobGetIdFn),
            put: sym!(b"PMI2_KVS_Put\0", PutFn),
            fence: sym!(b"PMI2_KVS_Fence\0", VoidFn),
            get: sym!(b"PMI2_KVS_Get\0", GetFn),
            _lib: ManuallyDrop::new(lib),
        })
    }

    /// `PMI2_Init`: connects to the launcher; this process' rank and the job's size, as the
    /// library gives them (checked by the caller).
    pub fn init(&self) -> Pmi2Result<(c_int, c_int)> {
        let (mut spawned, mut size, mut rank, mut appnum): (c_int, c_int, c_int, c_int) =
            (0, -1, -1, 0);
        // SAFETY: four ints for the library to set, alive across the call.
        let rc = unsafe { (self.init)(&mut spawned, &mut size, &mut rank, &mut appnum) };
        status("PMI2_Init", rc)?;
        Ok((rank, size))
    }

    /// `PMI2_Job_GetId` into a zeroed buffer of `PMI2_MAX_VALLEN` bytes, returned whole.
    pub fn job_id(&self) -> Pmi2Result<Vec<u8>> {
        let mut buf = vec![0u8; MAX_VALLEN];
        // SAFETY: the buffer holds as many bytes as the size passed; the library writes at
        // most that many.
        let rc = unsafe { (self.job_get_id)(buf.as_mut_ptr().cast(), MAX_VALLEN as c_int) };
        status("PMI2_Job_GetId", rc)?;
        Ok(buf)
    }

    /// `PMI2_KVS_Put` of `value` under `key` (both text).
    pub fn put(&self, key: &str, value: &str) -> Pmi2Result<()> {
        let k = c_text("key", key, MAX_KEYLEN)?;
        let v = c_text("value", value, MAX_VALLEN)?;
        // SAFETY: two NUL-terminated strings within the API's limits, alive across the call
        // (the library copies them).
        status("PMI2_KVS_Put", unsafe {
            (self.put)(k.as_ptr(), v.as_ptr())
        })
    }

    /// `PMI2_KVS_Fence`: commits the puts and waits for every process (blocks in the library).
    pub fn fence(&self) -> Pmi2Result<()> {
        // SAFETY: no arguments; the library is initialised.
        status("PMI2_KVS_Fence", unsafe { (self.fence)() })
    }

    /// `PMI2_KVS_Get` of `key`, put by `rank`, in this job's space: a zeroed buffer of
    /// `PMI2_MAX_VALLEN` bytes and the length the library reports (unchecked here).
    pub fn get(&self, rank: usize, key: &str) -> Pmi2Result<(Vec<u8>, c_int)> {
        let k = c_text("key", key, MAX_KEYLEN)?;
        let src = c_int::try_from(rank).unwrap_or(ID_NULL);
        let mut buf = vec![0u8; MAX_VALLEN];
        let mut len: c_int = 0;
        // SAFETY: NULL asks for this job's space; the key is a NUL-terminated string; the
        // buffer holds as many bytes as the size passed and `len` is an int to set.
        let rc = unsafe {
            (self.get)(
                std::ptr::null(),
                src,
                k.as_ptr(),
                buf.as_mut_ptr().cast(),
                MAX_VALLEN as c_int,
                &mut len,
            )
        };
        status(&format!("PMI2_KVS_Get({key})"), rc)?;
        Ok((buf, len))
    }

    /// `PMI2_Finalize` (the process goes on).
    pub fn finalize(&self) -> Pmi2Result<()> {
        // SAFETY: no arguments; called once, after init.
        status("PMI2_Finalize", unsafe { (self.finalize)() })
    }

    /// `PMI2_Abort` of the whole job with `msg` (does not return when it works).
    pub fn abort(&self, msg: &str) -> Pmi2Result<()> {
        let text = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: flag 1 (every process of the job) and a NUL-terminated message alive across
        // the call.
        status("PMI2_Abort", unsafe { (self.abort)(1, text.as_ptr()) })
    }
}
