//! A tuner the user or the system configured, chained behind ours: NCCL calls our tuner, which
//! records NCCL's own cost table (while armed) and then hands the call to that tuner, so it
//! still decides as it would have. Its library is loaded once and never unloaded (NCCL may
//! call it until the process ends).
//!
//! The version called is the one NCCL would have picked from that library: through our v5
//! table (NCCL 2.28), its v5, else v4, else v3; through our v4 table (NCCL 2.24–2.27), its v4,
//! else v3; through our v3 table (NCCL 2.22–2.23), its v3. A library with only v2 (no cost
//! table) is not chained: `install` leaves it to NCCL. A library without a table that entry can
//! call (a v4-only tuner under NCCL 2.23, which NCCL itself would not have loaded) is not
//! called: ours serves that communicator alone ([`Chained::serves`]).

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

use libloading::Library;

use crate::abi::{INTERNAL_ERROR, Logger, NcclResult, TunerV3, TunerV4, TunerV5};

/// The chained tuner's tables, as found in its library.
pub struct Chained {
    /// The library's name as loaded.
    pub library: String,
    /// Its name for itself (the table's `name`).
    pub name: String,
    v5: Option<&'static TunerV5>,
    v4: Option<&'static TunerV4>,
    v3: Option<&'static TunerV3>,
}

// SAFETY: the tables are static data of a library that is never unloaded; they are only read.
unsafe impl Sync for Chained {}
// SAFETY: as above.
unsafe impl Send for Chained {}

static CHAINED: OnceLock<Chained> = OnceLock::new();

/// The chained tuner, if any.
pub fn chained() -> Option<&'static Chained> {
    CHAINED.get()
}

/// Loads `library` and chains its tuner behind ours; the error says why it cannot be (not
/// loadable, no table of v3 or later, another tuner chained already).
pub fn chain(library: &str) -> Result<&'static Chained, String> {
    if let Some(c) = CHAINED.get() {
        return if c.library == library {
            Ok(c)
        } else {
            Err(format!("the tuner of {} is chained already", c.library))
        };
    }
    let found = tables(library)?;
    Ok(CHAINED.get_or_init(|| found))
}

/// The tuner tables of `library`, loaded for good.
fn tables(library: &str) -> Result<Chained, String> {
    // SAFETY: loading runs the library's initializers, as NCCL's own load of it would.
    let lib =
        unsafe { Library::new(library) }.map_err(|e| format!("cannot load {library}: {e}"))?;
    // The library stays loaded for the process' life: NCCL may call the tuner until the end.
    let lib: &'static Library = Box::leak(Box::new(lib));
    /// A table by its symbol, as a `'static` reference into the never-unloaded library.
    fn table<T>(lib: &'static Library, symbol: &str) -> Option<&'static T> {
        // SAFETY: the symbol names a table of type `T` (the plugin ABI); the library is never
        // unloaded, so the reference stays valid.
        unsafe {
            lib.get::<*const T>(symbol.as_bytes())
                .ok()
                .map(|s| *s)
                .and_then(|p| p.as_ref())
        }
    }
    let v5 = table::<TunerV5>(lib, "ncclTunerPlugin_v5");
    let v4 = table::<TunerV4>(lib, "ncclTunerPlugin_v4");
    let v3 = table::<TunerV3>(lib, "ncclTunerPlugin_v3");
    if v5.is_none() && v4.is_none() && v3.is_none() {
        return Err(format!(
            "{library} has no tuner table of version 3 or later (ncclTunerPlugin_v3..v5)"
        ));
    }
    let name_ptr = v5
        .map(|t| t.name)
        .or(v4.map(|t| t.name))
        .or(v3.map(|t| t.name))
        .unwrap_or(std::ptr::null());
    // SAFETY: the table's name is a NUL-terminated string of the library (or null).
    let name = unsafe { crate::abi::text(name_ptr) }.unwrap_or_default();
    Ok(Chained {
        library: library.to_string(),
        name,
        v5,
        v4,
        v3,
    })
}

/// Which entry of ours NCCL called.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// `ncclTunerPlugin_v5` (NCCL 2.28 and later).
    V5,
    /// `ncclTunerPlugin_v4` (NCCL 2.24–2.27).
    V4,
    /// `ncclTunerPlugin_v3` (NCCL 2.22–2.23).
    V3,
}

/// One communicator's context: the chained tuner's own, and which of its tables serves it.
pub(crate) struct Context {
    inner: *mut c_void,
    version: u8,
}

impl Chained {
    /// The version NCCL would have picked from this library through `entry`.
    pub(crate) fn version(&self, entry: Entry) -> Option<u8> {
        match entry {
            Entry::V5 if self.v5.is_some() => Some(5),
            Entry::V5 | Entry::V4 if self.v4.is_some() => Some(4),
            _ if self.v3.is_some() => Some(3),
            _ => None,
        }
    }

    /// Whether NCCL, calling our `entry`, would have called a table of this library.
    pub(crate) fn serves(&self, entry: Entry) -> bool {
        self.version(entry).is_some()
    }

    /// The chained tuner's `init` for one communicator; our context for it in `out`.
    ///
    /// # Safety
    /// NCCL's arguments of our `init` (`v5_args` for the v5 entry: comm id, NVLink domain info,
    /// constants).
    pub(crate) unsafe fn init(
        &self,
        entry: Entry,
        out: *mut *mut c_void,
        ranks: usize,
        nodes: usize,
        log: Logger,
        v5_args: (u64, *mut c_void, *mut c_void),
    ) -> NcclResult {
        let Some(version) = self.version(entry) else {
            return INTERNAL_ERROR;
        };
        let mut inner = std::ptr::null_mut();
        // SAFETY: NCCL's arguments, passed on to the table NCCL would have called.
        let r = unsafe {
            match (version, self.v5, self.v4, self.v3) {
                (5, Some(t), _, _) => (t.init)(
                    &mut inner, v5_args.0, ranks, nodes, log, v5_args.1, v5_args.2,
                ),
                (4, _, Some(t), _) => (t.init)(ranks, nodes, log, &mut inner),
                (3, _, _, Some(t)) => (t.init)(ranks, nodes, log, &mut inner),
                _ => INTERNAL_ERROR,
            }
        };
        if r == 0 {
            let ctx = Box::new(Context { inner, version });
            // SAFETY: NCCL's out parameter (checked non-null by the caller).
            unsafe { *out = Box::into_raw(ctx).cast() };
        }
        r
    }

    /// The chained tuner's `getCollInfo`.
    ///
    /// # Safety
    /// `ctx` is a context from [`Chained::init`]; the rest are NCCL's arguments.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn get_coll_info(
        &self,
        ctx: *mut c_void,
        coll_type: c_int,
        bytes: usize,
        pipe_ops: c_int,
        table: *mut *mut f32,
        algos: c_int,
        protos: c_int,
        reg_buff: c_int,
        channels: *mut c_int,
    ) -> NcclResult {
        // SAFETY: `ctx` is null or a context our `init` made (`Box::into_raw`) that `finalize` has
        // not freed yet (NCCL finalizes after its last call).
        let Some(c) = (unsafe { ctx.cast::<Context>().as_ref() }) else {
            return INTERNAL_ERROR;
        };
        // SAFETY: NCCL's arguments, passed on with the chained tuner's own context.
        unsafe {
            match (c.version, self.v5, self.v4, self.v3) {
                (5, Some(t), _, _) => (t.get_coll_info)(
                    c.inner, coll_type, bytes, pipe_ops, table, algos, protos, reg_buff, channels,
                ),
                (4, _, Some(t), _) => (t.get_coll_info)(
                    c.inner, coll_type, bytes, pipe_ops, table, algos, protos, reg_buff, channels,
                ),
                (3, _, _, Some(t)) => (t.get_coll_info)(
                    c.inner, coll_type, bytes, pipe_ops, table, algos, protos, channels,
                ),
                _ => INTERNAL_ERROR,
            }
        }
    }

    /// The chained tuner's `finalize`/`destroy`; frees our context.
    ///
    /// # Safety
    /// `ctx` is a context from [`Chained::init`], finalized once.
    pub(crate) unsafe fn finalize(&self, ctx: *mut c_void) -> NcclResult {
        if ctx.is_null() {
            return 0;
        }
        // SAFETY: the box `init` made, finalized once.
        let c = unsafe { Box::from_raw(ctx.cast::<Context>()) };
        // SAFETY: the chained tuner's own context, finalized once.
        unsafe {
            match (c.version, self.v5, self.v4, self.v3) {
                (5, Some(t), _, _) => (t.finalize)(c.inner),
                (4, _, Some(t), _) => (t.destroy)(c.inner),
                (3, _, _, Some(t)) => (t.destroy)(c.inner),
                _ => 0,
            }
        }
    }
}

/// A chained tuner of these tables, as if found in `libnccl-tuner-x.so` (tests).
#[cfg(test)]
pub(crate) fn of_tables(
    v5: Option<&'static TunerV5>,
    v4: Option<&'static TunerV4>,
    v3: Option<&'static TunerV3>,
) -> Chained {
    Chained {
        library: "libnccl-tuner-x.so".into(),
        name: "x".into(),
        v5,
        v4,
        v3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_without_a_tuner_table_are_refused() {
        let e = tables("libc.so.6").err().unwrap();
        assert!(e.contains("no tuner table of version 3 or later"), "{e}");
        let e = tables("libnccl-perf-no-such-tuner.so").err().unwrap();
        assert!(
            e.starts_with("cannot load libnccl-perf-no-such-tuner.so"),
            "{e}"
        );
    }
}
