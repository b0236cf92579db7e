//! Run-time compilation (NVRTC) and launching of the data-generation and checking kernels.
//!
//! Streams and contexts are opaque driver handles that this code never dereferences; the driver
//! validates them, so the functions taking them stay safe.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::driver::{self, CUdeviceptr, CUfunction, CUstream, Module};
use crate::error::{Error, Result};
use crate::types::{DataType, RedOp};
use crate::verify::kernels as names;
use std::collections::HashMap;
use std::ffi::c_void;

/// Compiles the kernel source to PTX for a compute capability. Needs no GPU context, so it can
/// run on a background thread while communicators are being created.
pub fn compile(cc: (i32, i32)) -> Result<Vec<u8>> {
    // SAFETY: only probes whether the library can be opened.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::Kernels(
            "cannot load libnvrtc (CUDA's run-time compiler), which builds the validation kernels: add the CUDA toolkit's lib folder to LD_LIBRARY_PATH, or pass -c 0 to run without validation".into(),
        ));
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![format!("--gpu-architecture=compute_{}{}", cc.0, cc.1)],
        name: Some("verifiable.cu".into()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(names::SOURCE, opts).map_err(|e| {
        // One line: the compile log's newlines (escaped or not) become spaces.
        let detail = format!("{e:?}").replace("\\n", " ").replace('\n', " ");
        Error::Kernels(format!(
            "NVRTC could not compile the validation kernels ({detail}); pass -c 0 to run without validation"
        ))
    })?;
    let mut image = ptx.to_src().into_bytes();
    image.push(0);
    Ok(image)
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

impl Kernels {
    /// Loads the compiled image into the current context and looks up the kernels of `types`.
    pub fn load(image: &[u8], types: &[DataType]) -> Result<Kernels> {
        let module = Module::load(image)?;
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
        buf: CUdeviceptr,
        count: u64,
        ix0: u64,
        op: Option<RedOp>,
        rn: u32,
        rme: u32,
        seed: u64,
        s: CUstream,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let f = lookup(&self.input, dt)?;
        let (op, rn, rme) = (int(names::op_code(op)), int(rn as i32), int(rme as i32));
        // SAFETY: parameters match `np_input_<type>(void*, u64, u64, int, int, int, u64)`.
        unsafe { launch(f, count, s, &mut [buf, count, ix0, op, rn, rme, seed]) }
    }

    /// Fills `count` elements at `buf` with the expected results.
    #[allow(clippy::too_many_arguments)]
    pub fn fill_expected(
        &self,
        dt: DataType,
        buf: CUdeviceptr,
        count: u64,
        ix0: u64,
        op: Option<RedOp>,
        rn: u32,
        seed: u64,
        s: CUstream,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let f = lookup(&self.expected, dt)?;
        let (op, rn) = (int(names::op_code(op)), int(rn as i32));
        // SAFETY: parameters match `np_expected_<type>(void*, u64, u64, int, int, u64)`.
        unsafe { launch(f, count, s, &mut [buf, count, ix0, op, rn, seed]) }
    }

    /// Adds to the device counter at `counter` the number of elements of `got` that differ from
    /// `want` by more than `tol` units of the last place.
    #[allow(clippy::too_many_arguments)]
    pub fn count_mismatches(
        &self,
        dt: DataType,
        got: CUdeviceptr,
        want: CUdeviceptr,
        count: u64,
        tol: u64,
        counter: CUdeviceptr,
        s: CUstream,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let f = lookup(&self.mismatch, dt)?;
        // SAFETY: parameters match `np_mismatch_<bits>(const void*, const void*, u64, u64, u64*)`.
        unsafe { launch(f, count, s, &mut [got, want, count, tol, counter]) }
    }
}

#[cfg(test)]
mod tests {
    use super::{compile, int};

    /// Needs libnvrtc on the loader path (no GPU): skipped with a message otherwise.
    #[test]
    fn kernels_compile_with_nvrtc_where_present() {
        // SAFETY: only probes whether the library can be opened.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: libnvrtc not found");
            return;
        }
        let ptx = compile((9, 0)).expect("NVRTC compiles the kernels");
        let text = String::from_utf8_lossy(&ptx);
        assert!(
            text.contains(".entry np_input_float"),
            "PTX lacks the kernels"
        );
        assert_eq!(ptx.last(), Some(&0), "the image must be NUL-terminated");
    }

    #[test]
    fn int_parameters_sit_in_the_first_four_bytes() {
        assert_eq!(int(-1).to_le_bytes()[..4], (-1i32).to_le_bytes());
        assert_eq!(int(72).to_le_bytes()[..4], 72i32.to_le_bytes());
        assert_eq!(int(-1) >> 32, 0);
    }
}
