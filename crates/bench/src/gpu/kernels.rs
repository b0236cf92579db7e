//! Run-time compilation (NVRTC) and launching of the data-generation and checking kernels. The
//! launches take checked [`Span`]s of device memory, each at least as long as the elements the
//! kernel reaches.

use super::device::{Span, Stream};
use super::driver::{self, CUfunction, CUstream, Module};
use crate::error::{Error, Result};
use crate::types::{DataType, RedOp};
use crate::verify::kernel_source as names;
use std::collections::HashMap;
use std::ffi::c_void;

/// What NVRTC built: the image and a description for the note a run prints
/// (`NVRTC 13.0, sm_90`).
pub struct Compiled {
    /// A cubin, or NUL-terminated PTX.
    pub image: Vec<u8>,
    /// The NVRTC version and the architecture the image is for.
    pub what: String,
}

/// Compiles the kernel source for a compute capability: to a cubin for `sm_XY` (nothing left
/// for the driver to compile at load), or to PTX for `compute_XY` where this NVRTC does not know
/// the GPU's architecture. Needs no GPU context, so it runs on a background thread while the
/// communicators are being created.
///
/// Only the kernels of `types` are compiled (the checkers of every width always are).
pub fn compile(cc: (i32, i32), types: &[DataType]) -> Result<Compiled> {
    let cubin_ok = probe_nvrtc()?;
    let mut opts = vec!["-DNP_SOME".to_string()];
    opts.extend(types.iter().map(|t| format!("-DNP_T_{}=1", t.name())));
    let arch = |kind: &str| {
        let mut o = opts.clone();
        o.push(format!("--gpu-architecture={kind}_{}{}", cc.0, cc.1));
        o
    };
    let version = nvrtc_version();
    let made = |image, kind: &str| Compiled {
        image,
        what: format!("NVRTC {version}, {kind}_{}{}", cc.0, cc.1),
    };
    let image = match cubin_ok.then(|| nvrtc(&arch("sm"), true)) {
        Some(Ok(cubin)) => Ok(made(cubin, "sm")),
        _ => nvrtc(&arch("compute"), false).map(|ptx| made(ptx, "compute")),
    };
    crate::host::trace("validation kernels compiled (background thread)");
    image
}

/// `major.minor` of the loaded NVRTC (after [`probe_nvrtc`] succeeded).
fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: probe_nvrtc checked that the symbol exists; valid out pointers.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    match r.result() {
        Ok(()) => format!("{major}.{minor}"),
        Err(_) => "(unknown version)".into(),
    }
}

/// The NVRTC entry points the compile step calls to build PTX. cudarc resolves each on first
/// use and panics when one is missing, so [`probe_nvrtc`] checks them first.
pub const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
    "nvrtcDestroyProgram",
];

/// The entry points for a cubin (NVRTC 11.1 and later); without them the kernels are built as
/// PTX for the driver to finish.
pub const NVRTC_CUBIN_SYMBOLS: &[&str] = &["nvrtcGetCUBINSize", "nvrtcGetCUBIN"];

/// Checks that libnvrtc loads and has what we call; returns whether it can also make cubins.
/// A missing library or symbol is an error saying so (the run then takes the bundled PTX),
/// never a cudarc panic.
pub fn probe_nvrtc() -> Result<bool> {
    // SAFETY: only probes whether the library can be opened.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::Kernels(
            "cannot load libnvrtc (CUDA's run-time compiler)".into(),
        ));
    }
    // SAFETY: the library is present (checked above), so cudarc's loader finds it instead of
    // panicking; looking a symbol up calls nothing.
    let lib = unsafe { cudarc::nvrtc::sys::culib() };
    let find = |n: &str| {
        // SAFETY: as above.
        unsafe { lib.get::<*const c_void>(n.as_bytes()) }
            .ok()
            .map(|s| *s)
    };
    let missing = driver::missing_symbols(&find, NVRTC_SYMBOLS);
    if !missing.is_empty() {
        return Err(Error::Kernels(format!(
            "{} lacks {}: this NVRTC is too old (or not CUDA's)",
            driver::library_path(&find, &["nvrtcVersion"]).unwrap_or_else(|| "libnvrtc".into()),
            missing.join(", ")
        )));
    }
    Ok(driver::missing_symbols(&find, NVRTC_CUBIN_SYMBOLS).is_empty())
}

/// One NVRTC compilation of the kernel source: the cubin, or the NUL-terminated PTX.
fn nvrtc(opts: &[String], cubin: bool) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result, sys};
    let fail =
        |what: String| Error::Kernels(format!("NVRTC could not compile the kernels ({what})"));
    let src = std::ffi::CString::new(names::SOURCE).map_err(|e| fail(e.to_string()))?;
    let prog =
        result::create_program(&src, Some(c"verifiable.cu")).map_err(|e| fail(format!("{e:?}")))?;
    // SAFETY: `prog` is live until destroyed below; buffers are sized from NVRTC's answers.
    let out = unsafe {
        let compiled = result::compile_program(prog, opts).map_err(|e| {
            let log = result::get_program_log(prog)
                .map(|l| {
                    let bytes: Vec<u8> = l
                        .iter()
                        .take_while(|c| **c != 0)
                        .map(|c| *c as u8)
                        .collect();
                    String::from_utf8_lossy(&bytes).replace('\n', " ")
                })
                .unwrap_or_default();
            fail(format!("{e:?} with {}: {}", opts.join(" "), log.trim()))
        });
        compiled.and_then(|_| {
            if cubin {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| fail(format!("{e:?}")))?;
                let mut image = vec![0u8; size];
                sys::nvrtcGetCUBIN(prog, image.as_mut_ptr() as *mut std::ffi::c_char)
                    .result()
                    .map_err(|e| fail(format!("{e:?}")))?;
                Ok(image)
            } else {
                let ptx = result::get_ptx(prog).map_err(|e| fail(format!("{e:?}")))?;
                let mut image: Vec<u8> = ptx
                    .iter()
                    .take_while(|c| **c != 0)
                    .map(|c| *c as u8)
                    .collect();
                image.push(0);
                Ok(image)
            }
        })
    };
    // SAFETY: created above, not used afterwards.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// An `int` kernel parameter in a 64-bit slot: its four bytes first (little-endian x86-64).
fn int(v: i32) -> u64 {
    u64::from(v as u32)
}

/// Launches `f` over `count` elements on `s`. Every parameter of these kernels is a 64-bit value
/// (pointer or u64) or an `int`; each is passed as the address of a 64-bit slot, which for an
/// `int` holds it in its first four bytes (see [`int`]).
///
/// # Safety
/// `values` must match the kernel's parameter list in number and order.
unsafe fn launch(f: CUfunction, count: u64, s: CUstream, values: &mut [u64]) -> Result<()> {
    let (grid, block) = names::launch_dims(count);
    let mut params: Vec<*mut c_void> = values
        .iter_mut()
        .map(|v| v as *mut u64 as *mut c_void)
        .collect();
    // SAFETY: forwarded to the caller.
    unsafe { driver::launch(f, grid, block, s, &mut params) }
}

/// The kernels of one GPU, loaded into its context.
#[derive(Debug)]
pub struct Kernels {
    _module: Module,
    input: HashMap<DataType, CUfunction>,
    expected: HashMap<DataType, CUfunction>,
    mismatch: HashMap<DataType, CUfunction>,
}

// SAFETY: function handles are plain driver handles, usable from any thread whose current
// context is the module's.
unsafe impl Send for Kernels {}
// SAFETY: as above; nothing is mutated after loading.
unsafe impl Sync for Kernels {}

fn lookup(map: &HashMap<DataType, CUfunction>, dt: DataType) -> Result<CUfunction> {
    map.get(&dt)
        .copied()
        .ok_or_else(|| Error::Internal(format!("no kernel loaded for {}", dt.name())))
}

/// `span` holds `count` elements of `dt`, or says why not.
fn holds(span: &Span, count: u64, dt: DataType) -> Result<()> {
    let need = count.checked_mul(dt.size() as u64);
    if need.is_some_and(|n| n <= span.len() as u64) {
        return Ok(());
    }
    Err(Error::Internal(format!(
        "a kernel over {count} {} elements was given {} bytes",
        dt.name(),
        span.len()
    )))
}

impl Kernels {
    /// Loads the compiled image into the current context and looks up the kernels of `types`.
    ///
    /// # Safety
    /// `image` must be a complete cubin or a NUL-terminated PTX text (as [`compile`] and the
    /// bundled PTX make them).
    pub unsafe fn load(image: &[u8], types: &[DataType]) -> Result<Kernels> {
        // SAFETY: forwarded to the caller.
        let module = unsafe { Module::load(image) }?;
        let mut k = Kernels {
            input: HashMap::new(),
            expected: HashMap::new(),
            mismatch: HashMap::new(),
            _module: module,
        };
        for &dt in types {
            k.input
                .insert(dt, k._module.function(&names::input_kernel(dt))?);
            k.expected
                .insert(dt, k._module.function(&names::expected_kernel(dt))?);
            k.mismatch
                .insert(dt, k._module.function(&names::mismatch_kernel(dt))?);
        }
        Ok(k)
    }

    /// Fills `count` elements at `buf` with the inputs of rank `rme` of `rn`.
    #[allow(clippy::too_many_arguments)]
    pub fn fill_input(
        &self,
        dt: DataType,
        buf: Span,
        count: u64,
        ix0: u64,
        op: Option<RedOp>,
        rn: u32,
        rme: u32,
        seed: u64,
        s: &Stream,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        holds(&buf, count, dt)?;
        let f = lookup(&self.input, dt)?;
        let (op, rn, rme) = (int(names::op_code(op)), int(rn as i32), int(rme as i32));
        let buf = buf.addr();
        // SAFETY: parameters match `np_input_<type>(void*, u64, u64, int, int, int, u64)`, and
        // the kernel writes `count` elements at `buf`, which the span holds.
        unsafe {
            launch(
                f,
                count,
                s.as_raw(),
                &mut [buf, count, ix0, op, rn, rme, seed],
            )
        }
    }

    /// Fills `count` elements at `buf` with the expected results.
    #[allow(clippy::too_many_arguments)]
    pub fn fill_expected(
        &self,
        dt: DataType,
        buf: Span,
        count: u64,
        ix0: u64,
        op: Option<RedOp>,
        rn: u32,
        seed: u64,
        s: &Stream,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        holds(&buf, count, dt)?;
        let f = lookup(&self.expected, dt)?;
        let (op, rn) = (int(names::op_code(op)), int(rn as i32));
        let buf = buf.addr();
        // SAFETY: parameters match `np_expected_<type>(void*, u64, u64, int, int, u64)`, and
        // the kernel writes `count` elements at `buf`, which the span holds.
        unsafe { launch(f, count, s.as_raw(), &mut [buf, count, ix0, op, rn, seed]) }
    }

    /// Adds to the device counter `counter` (one u64) the number of the `count` elements of
    /// `got` that differ from `want` by more than `tol` units of the last place.
    #[allow(clippy::too_many_arguments)]
    pub fn count_mismatches(
        &self,
        dt: DataType,
        got: Span,
        want: Span,
        count: u64,
        tol: u64,
        counter: Span,
        s: &Stream,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        holds(&got, count, dt)?;
        holds(&want, count, dt)?;
        holds(&counter, 1, DataType::Uint64)?;
        let f = lookup(&self.mismatch, dt)?;
        let (got, want, counter) = (got.addr(), want.addr(), counter.addr());
        // SAFETY: parameters match `np_mismatch_<bits>(const void*, const void*, u64, u64, u64*)`;
        // the kernel reads `count` elements of each span and adds to the counter, all held.
        unsafe { launch(f, count, s.as_raw(), &mut [got, want, count, tol, counter]) }
    }
}

#[cfg(test)]
mod tests {
    use super::{compile, int};
    use crate::types::DataType;

    /// Needs libnvrtc on the loader path (no GPU): skipped with a message otherwise.
    #[test]
    fn kernels_compile_with_nvrtc_where_present() {
        // SAFETY: only probes whether the library can be opened.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: libnvrtc not found");
            return;
        }
        let t = std::time::Instant::now();
        let built = compile((9, 0), &[DataType::Float]).expect("NVRTC compiles the kernels");
        assert!(built.what.starts_with("NVRTC ") && built.what.ends_with(", sm_90"));
        let cubin = built.image;
        eprintln!(
            "float kernels compiled in {:.2} s",
            t.elapsed().as_secs_f64()
        );
        assert_eq!(&cubin[..4], b"\x7fELF", "a cubin is an ELF image");
        let names = String::from_utf8_lossy(&cubin);
        assert!(names.contains("np_input_float") && names.contains("np_mismatch_64"));
        assert!(!names.contains("np_input_half"), "only the wanted types");
        let all = ["--gpu-architecture=compute_90".to_string()];
        let ptx = super::nvrtc(&all, false).expect("PTX too");
        let text = String::from_utf8_lossy(&ptx);
        for t in DataType::ALL {
            assert!(
                text.contains(&format!(".entry np_expected_{}", t.name())),
                "{t:?}"
            );
        }
        assert_eq!(ptx.last(), Some(&0), "PTX must be NUL-terminated");
        assert!(super::nvrtc(&["--gpu-architecture=bogus".to_string()], true).is_err());
    }

    #[test]
    fn int_parameters_sit_in_the_first_four_bytes() {
        assert_eq!(int(-1).to_le_bytes()[..4], (-1i32).to_le_bytes());
        assert_eq!(int(72).to_le_bytes()[..4], 72i32.to_le_bytes());
        assert_eq!(int(-1) >> 32, 0);
    }
}
