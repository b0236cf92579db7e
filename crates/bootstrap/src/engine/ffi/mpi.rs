//! An MPI library opened at run time (never linked), only to start: init, rank, size, an
//! allgather of bytes, finalize, abort. Two ABIs, told apart by the library found: Open MPI's
//! (`libmpi.so.40`), whose handles are the addresses of global objects (`MPI_COMM_WORLD` is
//! `&ompi_mpi_comm_world`, `MPI_BYTE` is `&ompi_mpi_byte`, Open MPI's `mpi.h`), and MPICH's
//! (`libmpi.so.12`, `libmpich.so.12`: MPICH, Intel MPI, Cray MPICH, MVAPICH), whose handles are
//! integers (`MPI_COMM_WORLD` 0x44000000, `MPI_BYTE` 0x4c00010d, MPICH's `mpi.h`). The function
//! prototypes are the MPI standard's C bindings.

use std::ffi::{c_char, c_int, c_void};
use std::mem::ManuallyDrop;
use std::path::Path;

/// Which C ABI the library speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abi {
    /// Open MPI's: handles are pointers to the library's global objects.
    OpenMpi,
    /// MPICH's: handles are `int` constants.
    Mpich,
}

/// MPICH's `MPI_COMM_WORLD`.
pub const MPICH_COMM_WORLD: c_int = 0x4400_0000;
/// MPICH's `MPI_BYTE`.
pub const MPICH_BYTE: c_int = 0x4c00_010d;
/// `MPI_THREAD_FUNNELED` in both ABIs (only the thread that initialised MPI calls it).
const THREAD_FUNNELED: c_int = 1;

type InitializedFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type InitThreadFn =
    unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char, c_int, *mut c_int) -> c_int;
type FinalizeFn = unsafe extern "C" fn() -> c_int;
type CommIntFn<H> = unsafe extern "C" fn(H, *mut c_int) -> c_int;
type AbortFn<H> = unsafe extern "C" fn(H, c_int) -> c_int;
type AllgatherFn<H> =
    unsafe extern "C" fn(*const c_void, c_int, H, *mut c_void, c_int, H, H) -> c_int;

/// The calls that take handles, typed for one ABI's handle `H`, and the two handles used.
struct Calls<H> {
    comm_rank: CommIntFn<H>,
    comm_size: CommIntFn<H>,
    abort: AbortFn<H>,
    allgather: AllgatherFn<H>,
    world: H,
    byte: H,
}

enum Handles {
    OpenMpi(Calls<*mut c_void>),
    Mpich(Calls<c_int>),
}

/// Runs `$body` with `$c` bound to the calls of whichever ABI the library has.
macro_rules! with_calls {
    ($self:ident, |$c:ident| $body:expr) => {
        match &$self.handles {
            Handles::OpenMpi($c) => $body,
            Handles::Mpich($c) => $body,
        }
    };
}

/// An opened MPI library.
pub struct Mpi {
    initialized: InitializedFn,
    init_thread: InitThreadFn,
    finalize: FinalizeFn,
    handles: Handles,
    /// Never closed: an MPI library keeps state (and may keep threads) after finalize.
    _lib: ManuallyDrop<libloading::Library>,
}

// SAFETY: the structure holds function pointers, handles that are constants or addresses of
// the library's global objects (never dereferenced here), and the library handle. It is moved
// once to the one thread that makes every MPI call (`mpilib.rs`), as MPI_THREAD_FUNNELED asks.
unsafe impl Send for Mpi {}

/// Why an MPI call failed.
pub type MpiResult<T> = Result<T, String>;

fn status(what: &str, rc: c_int) -> MpiResult<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with MPI error code {rc}"))
    }
}

impl Mpi {
    /// Opens the library at `path` (global symbols: Open MPI's plugins resolve against it),
    /// tells its ABI and finds its functions and handles (does not initialise it).
    pub fn open(path: &Path) -> MpiResult<Mpi> {
        use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
        // SAFETY: loading a shared library runs its initialisers; an MPI library's are its
        // own set-up, run once, as in any MPI program.
        let lib: libloading::Library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?
            .into();
        let missing = |name: &[u8], e: libloading::Error| {
            format!(
                "{} has no {}: {e}",
                path.display(),
                String::from_utf8_lossy(&name[..name.len() - 1])
            )
        };
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol is the MPI standard's C function of that name, whose
                // prototype in this ABI is the type it is read as.
                let got = unsafe { lib.get::<$ty>($name) };
                *got.map_err(|e| missing($name, e))?
            }};
        }
        macro_rules! address {
            ($name:literal) => {{
                // SAFETY: only the address of the global object is taken (the handle Open
                // MPI's mpi.h makes of it); the object is never read here.
                let got = unsafe { lib.get::<*mut c_void>($name) };
                *got.map_err(|e| missing($name, e))?
            }};
        }
        // SAFETY: looking a symbol up only; its presence tells Open MPI's ABI.
        let ompi = unsafe { lib.get::<*mut c_void>(b"ompi_mpi_comm_world\0") }.is_ok();
        let handles = if ompi {
            Handles::OpenMpi(Calls {
                comm_rank: sym!(b"MPI_Comm_rank\0", CommIntFn<*mut c_void>),
                comm_size: sym!(b"MPI_Comm_size\0", CommIntFn<*mut c_void>),
                abort: sym!(b"MPI_Abort\0", AbortFn<*mut c_void>),
                allgather: sym!(b"MPI_Allgather\0", AllgatherFn<*mut c_void>),
                world: address!(b"ompi_mpi_comm_world\0"),
                byte: address!(b"ompi_mpi_byte\0"),
            })
        } else {
            Handles::Mpich(Calls {
                comm_rank: sym!(b"MPI_Comm_rank\0", CommIntFn<c_int>),
                comm_size: sym!(b"MPI_Comm_size\0", CommIntFn<c_int>),
                abort: sym!(b"MPI_Abort\0", AbortFn<c_int>),
                allgather: sym!(b"MPI_Allgather\0", AllgatherFn<c_int>),
                world: MPICH_COMM_WORLD,
                byte: MPICH_BYTE,
            })
        };
        Ok(Mpi {
            initialized: sym!(b"MPI_Initialized\0", InitializedFn),
            init_thread: sym!(b"MPI_Init_thread\0", InitThreadFn),
            finalize: sym!(b"MPI_Finalize\0", FinalizeFn),
            handles,
            _lib: ManuallyDrop::new(lib),
        })
    }

    /// The library's ABI.
    pub fn abi(&self) -> Abi {
        match self.handles {
            Handles::OpenMpi(_) => Abi::OpenMpi,
            Handles::Mpich(_) => Abi::Mpich,
        }
    }

    /// Initialises MPI (funneled: this thread makes every call) unless the program already
    /// did; says whether this call initialised it (then [`Mpi::finalize`] is ours to call).
    pub fn init(&self) -> MpiResult<bool> {
        let mut flag: c_int = 0;
        // SAFETY: `flag` is an int for the library to set; callable before MPI_Init.
        status("MPI_Initialized", unsafe { (self.initialized)(&mut flag) })?;
        if flag != 0 {
            return Ok(false);
        }
        let mut provided: c_int = 0;
        // SAFETY: NULL argc/argv are allowed by the standard; `provided` is an int to set.
        let rc = unsafe {
            (self.init_thread)(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                THREAD_FUNNELED,
                &mut provided,
            )
        };
        status("MPI_Init_thread", rc)?;
        Ok(true)
    }

    /// This process' rank and the size of `MPI_COMM_WORLD`.
    pub fn rank_size(&self) -> MpiResult<(usize, usize)> {
        let (mut rank, mut size): (c_int, c_int) = (-1, 0);
        // SAFETY: the world handle of this ABI and ints for the library to set.
        let (r1, r2) = with_calls!(self, |c| unsafe {
            (
                (c.comm_rank)(c.world, &mut rank),
                (c.comm_size)(c.world, &mut size),
            )
        });
        status("MPI_Comm_rank", r1)?;
        status("MPI_Comm_size", r2)?;
        match (usize::try_from(rank), usize::try_from(size)) {
            (Ok(r), Ok(s)) => Ok((r, s)),
            _ => Err(format!("MPI gave rank {rank} of size {size}")),
        }
    }

    /// `MPI_Allgather` of `send.len()` bytes from every process into `out` (`size` times as
    /// long), over `MPI_COMM_WORLD`.
    pub fn allgather(&self, send: &[u8], out: &mut [u8], size: usize) -> MpiResult<()> {
        let n = c_int::try_from(send.len()).map_err(|_| "an MPI record is too long".to_string())?;
        if out.len() != send.len() * size {
            return Err("MPI_Allgather: the buffer does not fit the job".into());
        }
        // SAFETY: `send` holds `n` bytes and `out` `n` bytes for each of the `size` processes
        // of the world communicator; both live across the call, which does not keep them.
        let rc = with_calls!(self, |c| unsafe {
            (c.allgather)(
                send.as_ptr().cast(),
                n,
                c.byte,
                out.as_mut_ptr().cast(),
                n,
                c.byte,
                c.world,
            )
        });
        status("MPI_Allgather", rc)
    }

    /// `MPI_Finalize` (the process goes on; no MPI call may follow).
    pub fn finalize(&self) -> MpiResult<()> {
        // SAFETY: no arguments; called once, after init, from the initialising thread.
        status("MPI_Finalize", unsafe { (self.finalize)() })
    }

    /// `MPI_Abort` of the whole world with `code`.
    pub fn abort(&self, code: i32) -> MpiResult<()> {
        // SAFETY: the world handle of this ABI.
        let rc = with_calls!(self, |c| unsafe { (c.abort)(c.world, code) });
        status("MPI_Abort", rc)
    }
}

#[cfg(test)]
mod tests;
