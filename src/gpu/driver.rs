//! The CUDA driver calls a run needs, checked and turned into [`Error`]s. Thin on purpose: the
//! timed loop hands raw streams and device pointers to NCCL, so nothing here tracks them.
//!
//! Streams and contexts are opaque driver handles that this code never dereferences; the driver
//! validates them, so the functions taking them stay safe.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::error::{Error, Result};
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;
use std::ffi::c_void;

pub use sys::{CUcontext, CUdeviceptr, CUfunction, CUstream};

/// The driver error's description, as `cudaGetErrorString` would give it.
fn describe(e: DriverError) -> String {
    match e.error_string() {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => format!("{:?}", e.0),
    }
}

/// Converts a driver result into ours, recording the caller's location.
#[track_caller]
pub fn check<T>(r: std::result::Result<T, DriverError>) -> Result<T> {
    r.map_err(|e| Error::cuda(describe(e)))
}

/// Every driver entry point this module calls through cudarc (directly or inside its `result`
/// wrappers). cudarc resolves each on first use and **panics** when one is missing, so
/// [`init`] checks them all first. Keep in step with the calls below.
pub const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8Async",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpyDtoH_v2",
    "cuMemGetInfo_v2",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuLaunchKernel",
];

/// Loads libcuda, checks that it has every entry point we call, and initialises the driver.
/// A missing library or symbol is one clear error (exit code 2), never a cudarc panic.
pub fn init() -> Result<()> {
    // SAFETY: only probes whether the library can be opened.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::Library {
            what: "cannot load libcuda.so.1 (the NVIDIA driver library): is the NVIDIA driver installed and visible in this container (LD_LIBRARY_PATH, --gpus)?".into(),
            code: crate::error::code::CUDA,
        });
    }
    // SAFETY: the library is present (checked above), so cudarc's loader finds it instead of
    // panicking; looking a symbol up calls nothing.
    let lib = unsafe { sys::culib() };
    // SAFETY: as above.
    let find = |n: &str| {
        unsafe { lib.get::<*const c_void>(n.as_bytes()) }
            .ok()
            .map(|s| *s)
    };
    let missing = missing_symbols(&find, REQUIRED_SYMBOLS);
    if !missing.is_empty() {
        return Err(Error::Library {
            what: format!(
                "{} lacks {}: the NVIDIA driver is too old (or this is not the real libcuda); install a current NVIDIA driver",
                library_path(&find, &["cuInit", "cuDriverGetVersion"])
                    .unwrap_or_else(|| "libcuda".into()),
                missing.join(", ")
            ),
            code: crate::error::code::CUDA,
        });
    }
    check(cu::init())
}

/// Looks a symbol up in a loaded library without calling it.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<*const c_void>;

/// The names of `names` that `find` does not resolve.
pub fn missing_symbols<'a>(find: Lookup, names: &[&'a str]) -> Vec<&'a str> {
    names
        .iter()
        .copied()
        .filter(|n| find(n).is_none())
        .collect()
}

/// The file a library was loaded from, found through one of its symbols (`dladdr`).
pub fn library_path(find: Lookup, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| {
        let addr = find(n)?;
        // SAFETY: Dl_info is plain data; all-zero is a valid value.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: `addr` is an address inside a loaded library; `info` is a valid out pointer.
        if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
            return None;
        }
        // SAFETY: dladdr returned a NUL-terminated file name owned by the loader.
        let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
        Some(name.to_string_lossy().into_owned())
    })
}

/// Number of visible CUDA devices.
pub fn device_count() -> Result<i64> {
    check(cu::device::get_count()).map(i64::from)
}

/// What the report and the memory clamp need to know about a device.
#[derive(Debug, Clone)]
pub struct DeviceProps {
    /// CUDA device name.
    pub name: String,
    /// PCI domain, bus, device.
    pub pci: (u32, u32, u32),
    /// Total global memory in bytes.
    pub total_mem: u64,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
}

/// Reads a device's properties.
pub fn device_props(ordinal: i64) -> Result<DeviceProps> {
    let dev = check(cu::device::get(ordinal as i32))?;
    let attr = |a| {
        // SAFETY: `dev` is a valid device handle and `a` a valid attribute.
        check(unsafe { cu::device::get_attribute(dev, a) })
    };
    use sys::CUdevice_attribute as A;
    Ok(DeviceProps {
        name: check(cu::device::get_name(dev))?,
        pci: (
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)? as u32,
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)? as u32,
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)? as u32,
        ),
        // SAFETY: valid device handle.
        total_mem: check(unsafe { cu::device::total_mem(dev) })? as u64,
        cc: (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
    })
}

/// The primary context of a device (the one the CUDA runtime, and so NCCL, uses).
pub fn primary_context(ordinal: i64) -> Result<CUcontext> {
    let dev = check(cu::device::get(ordinal as i32))?;
    // SAFETY: valid device handle; the context is retained for the life of the process.
    check(unsafe { cu::primary_ctx::retain(dev) })
}

/// Makes a context current on the calling thread.
pub fn set_current(ctx: CUcontext) -> Result<()> {
    // SAFETY: `ctx` comes from `primary_context`.
    check(unsafe { cu::ctx::set_current(ctx) })
}

/// A non-blocking stream in the current context, or the legacy NULL stream.
pub fn create_stream(null_stream: bool) -> Result<CUstream> {
    if null_stream {
        return Ok(cu::stream::null());
    }
    check(cu::stream::create(cu::stream::StreamKind::NonBlocking))
}

/// Destroys a stream made by [`create_stream`].
pub fn destroy_stream(s: CUstream) -> Result<()> {
    if s.is_null() {
        return Ok(());
    }
    // SAFETY: `s` was created by `create_stream` and is no longer used.
    check(unsafe { cu::stream::destroy(s) })
}

/// Whether all work on the stream is done (`cuStreamQuery`); errors are real failures.
#[inline]
pub fn stream_done(s: CUstream) -> Result<bool> {
    // SAFETY: `s` is a live stream of the current context.
    match unsafe { sys::cuStreamQuery(s) } {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        e => check(e.result()).map(|_| false),
    }
}

/// Blocks until the stream is idle.
pub fn synchronize(s: CUstream) -> Result<()> {
    // SAFETY: `s` is a live stream of the current context.
    check(unsafe { cu::stream::synchronize(s) })
}

/// Plain device allocation (used when NCCL's allocator is not available).
pub fn malloc(bytes: usize) -> Result<CUdeviceptr> {
    // SAFETY: allocation in the current context.
    check(unsafe { cu::malloc_sync(bytes.max(1)) })
}

/// Frees memory from [`malloc`].
pub fn free(p: CUdeviceptr) -> Result<()> {
    // SAFETY: `p` came from `malloc` and is no longer in use.
    check(unsafe { cu::free_sync(p) })
}

/// Fills `bytes` bytes at `p` with `value`, asynchronously on `s`.
pub fn memset_async(p: CUdeviceptr, value: u8, bytes: usize, s: CUstream) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: the caller passes a range inside one of its allocations.
    check(unsafe { cu::memset_d8_async(p, value, bytes, s) })
}

/// Copies device memory to device memory, asynchronously on `s`.
pub fn copy_async(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, s: CUstream) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: both ranges lie inside the caller's allocations.
    check(unsafe { cu::memcpy_dtod_async(dst, src, bytes, s) })
}

/// Copies device memory into a host slice (synchronous).
pub fn copy_to_host<T: bytemuck::Pod>(dst: &mut [T], src: CUdeviceptr) -> Result<()> {
    // SAFETY: `src` holds at least `dst.len()` elements.
    check(unsafe { cu::memcpy_dtoh_sync(dst, src) })
}

/// Free and total memory of the current device.
pub fn mem_info() -> Result<(u64, u64)> {
    check(cu::mem_get_info()).map(|(f, t)| (f as u64, t as u64))
}

/// Loads a PTX or cubin image into the current context and looks up functions in it.
pub struct Module(sys::CUmodule);

impl Module {
    /// Loads a NUL-terminated PTX text or a cubin image.
    pub fn load(image: &[u8]) -> Result<Module> {
        // SAFETY: `image` is a complete PTX (NUL-terminated) or cubin image.
        check(unsafe { cu::module::load_data(image.as_ptr() as *const c_void) }).map(Module)
    }

    /// A kernel by its `extern "C"` name.
    pub fn function(&self, name: &str) -> Result<CUfunction> {
        let cname = std::ffi::CString::new(name).map_err(|e| Error::Internal(e.to_string()))?;
        // SAFETY: the module is loaded; the name is NUL-terminated.
        check(unsafe { cu::module::get_function(self.0, cname) })
    }
}

/// Launches a kernel with the given parameter pointers on `s`.
///
/// # Safety
/// `params` must match the kernel's parameter list in number, order and type, and every device
/// pointer passed must stay valid until the kernel has run.
pub unsafe fn launch(
    f: CUfunction,
    grid: u32,
    block: u32,
    s: CUstream,
    params: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: forwarded to the caller.
    check(unsafe { cu::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, s, params) })
}

pub use sys::{CUevent, CUgraphExec};

/// Creates an event that records timing (`-I 1`; cudarc's default disables timing).
#[track_caller]
pub fn create_timing_event() -> Result<CUevent> {
    check(cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT))
}

/// Records `e` on stream `s`.
#[inline]
#[track_caller]
pub fn record_event(e: CUevent, s: CUstream) -> Result<()> {
    // SAFETY: `e` comes from `create_timing_event` and `s` is a live stream of its context.
    check(unsafe { cu::event::record(e, s) })
}

/// Milliseconds between two completed events of one stream.
#[track_caller]
pub fn elapsed_ms(start: CUevent, end: CUevent) -> Result<f32> {
    // SAFETY: both events were created by `create_timing_event`, recorded, and are complete.
    check(unsafe { cu::event::elapsed(start, end) })
}

/// Destroys an event from [`create_timing_event`].
pub fn destroy_event(e: CUevent) -> Result<()> {
    // SAFETY: `e` is not used afterwards.
    check(unsafe { cu::event::destroy(e) })
}

/// Starts capturing the work enqueued on `s` into a graph, in thread-local mode: only this
/// thread's potentially unsafe CUDA calls are forbidden while it lasts, so other benchmark
/// threads (and NCCL's own threads) keep working.
#[track_caller]
pub fn begin_capture(s: CUstream) -> Result<()> {
    // SAFETY: `s` is a live, non-NULL stream of the current context.
    check(unsafe {
        cu::stream::begin_capture(
            s,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
    })
}

/// Ends the capture on `s`, instantiates the captured graph and frees the graph itself (the
/// executable graph keeps what it needs). The capture is ended even when instantiation fails.
#[track_caller]
pub fn end_capture_and_instantiate(s: CUstream) -> Result<CUgraphExec> {
    // SAFETY: `s` is capturing (begun by `begin_capture` on this thread).
    let graph = check(unsafe { cu::stream::end_capture(s) })?;
    // SAFETY: `graph` was just captured; it is destroyed once, here.
    let exec = check(unsafe { cu::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) });
    // SAFETY: as above.
    let destroyed = check(unsafe { cu::graph::destroy(graph) });
    let exec = exec?;
    destroyed?;
    Ok(exec)
}

/// Ends a capture that failed part-way and drops whatever was captured (best effort: the
/// stream is left usable, errors are ignored since the caller already has one).
pub fn abandon_capture(s: CUstream) {
    // SAFETY: ending a capture that may or may not be active; the graph, if any, is freed.
    if let Ok(graph) = unsafe { cu::stream::end_capture(s) }
        && !graph.is_null()
    {
        // SAFETY: the graph was returned by the capture above and is not used afterwards.
        let _ = unsafe { cu::graph::destroy(graph) };
    }
}

/// Launches an executable graph on `s`.
#[inline]
#[track_caller]
pub fn launch_graph(g: CUgraphExec, s: CUstream) -> Result<()> {
    // SAFETY: `g` comes from `end_capture_and_instantiate` and `s` is a live stream.
    check(unsafe { cu::graph::launch(g, s) })
}

/// Frees an executable graph (its launches may still be running).
pub fn destroy_graph(g: CUgraphExec) -> Result<()> {
    // SAFETY: `g` is not launched again.
    check(unsafe { cu::graph::exec_destroy(g) })
}

/// Enqueues a host function on `s`: the stream waits until it returns.
///
/// # Safety
/// `arg` must stay valid until `f` has run, and `f` must not call CUDA.
pub unsafe fn launch_host_func(
    s: CUstream,
    f: unsafe extern "C" fn(*mut c_void),
    arg: *mut c_void,
) -> Result<()> {
    // SAFETY: forwarded to the caller.
    check(unsafe { cu::stream::launch_host_function(s, f, arg) })
}
