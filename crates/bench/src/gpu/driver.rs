//! The *result* layer over the CUDA driver: each call a run needs, checked and turned into an
//! [`Error`]. Thin on purpose; the owned, safe types are in [`super::device`].
//!
//! A function that takes a raw handle (context, stream, event, graph) or a device address is an
//! `unsafe fn`: the driver trusts them, and a stale or made-up one is undefined behaviour. The
//! functions that only create something (a context retained for the process, a stream, an
//! allocation) or read device properties are safe.

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
            what: missing_driver(crate::host::in_container()),
            code: crate::error::code::CUDA,
        });
    }
    // SAFETY: the library is present (checked above), so cudarc's loader finds it instead of
    // panicking; looking a symbol up calls nothing.
    let lib = unsafe { sys::culib() };
    let find = |n: &str| {
        // SAFETY: as above.
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

/// The line for a libcuda that cannot be loaded: in a container, whether the engine passed the
/// driver in; on a host of its own, whether the driver is installed where the loader looks.
pub fn missing_driver(in_container: bool) -> String {
    let ask = if in_container {
        "is the NVIDIA driver installed on the host and visible in this container \
         (LD_LIBRARY_PATH, --gpus)?"
    } else {
        "is the NVIDIA driver installed (does nvidia-smi work?) and its library on the \
         loader's path (ldconfig, LD_LIBRARY_PATH)?"
    };
    format!("cannot load libcuda.so.1 (the NVIDIA driver library): {ask}")
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
///
/// # Safety
/// `ctx` must come from [`primary_context`].
pub unsafe fn set_current(ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller passes a context from `primary_context` (see `# Safety`).
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
///
/// # Safety
/// `s` must come from [`create_stream`] and not be used afterwards.
pub unsafe fn destroy_stream(s: CUstream) -> Result<()> {
    if s.is_null() {
        return Ok(());
    }
    // SAFETY: the caller's stream from `create_stream`, not used afterwards (see `# Safety`).
    check(unsafe { cu::stream::destroy(s) })
}

/// Whether all work on the stream is done (`cuStreamQuery`); errors are real failures.
///
/// # Safety
/// `s` must be a live stream (or the NULL stream).
#[inline]
pub unsafe fn stream_done(s: CUstream) -> Result<bool> {
    // SAFETY: the caller passes a live stream (see `# Safety`).
    match unsafe { sys::cuStreamQuery(s) } {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        e => check(e.result()).map(|_| false),
    }
}

/// Blocks until the stream is idle.
///
/// # Safety
/// `s` must be a live stream (or the NULL stream).
pub unsafe fn synchronize(s: CUstream) -> Result<()> {
    // SAFETY: the caller passes a live stream (see `# Safety`).
    check(unsafe { cu::stream::synchronize(s) })
}

/// Plain device allocation (used when NCCL's allocator is not available).
pub fn malloc(bytes: usize) -> Result<CUdeviceptr> {
    // SAFETY: allocation in the current context.
    check(unsafe { cu::malloc_sync(bytes.max(1)) })
}

/// Frees memory from [`malloc`].
///
/// # Safety
/// `p` must come from [`malloc`], be idle and not be used afterwards.
pub unsafe fn free(p: CUdeviceptr) -> Result<()> {
    // SAFETY: the caller's idle allocation from `malloc`, not used afterwards (see `# Safety`).
    check(unsafe { cu::free_sync(p) })
}

/// Fills `bytes` bytes at `p` with `value`, asynchronously on `s`.
///
/// # Safety
/// The `bytes` bytes at `p` must lie inside one live allocation, and `s` must be a live stream.
pub unsafe fn memset_async(p: CUdeviceptr, value: u8, bytes: usize, s: CUstream) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: the caller passes a range inside one live allocation (see `# Safety`).
    check(unsafe { cu::memset_d8_async(p, value, bytes, s) })
}

/// Copies device memory to device memory, asynchronously on `s`.
///
/// # Safety
/// Both ranges of `bytes` bytes must lie inside live allocations, and `s` must be a live
/// stream.
pub unsafe fn copy_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    s: CUstream,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: the caller passes ranges inside live allocations (see `# Safety`).
    check(unsafe { cu::memcpy_dtod_async(dst, src, bytes, s) })
}

/// Copies device memory into a host slice (synchronous).
///
/// # Safety
/// `src` must be the start of at least `size_of_val(dst)` bytes of one live allocation.
pub unsafe fn copy_to_host<T: bytemuck::Pod>(dst: &mut [T], src: CUdeviceptr) -> Result<()> {
    // SAFETY: the caller passes the start of at least `size_of_val(dst)` device bytes.
    check(unsafe { cu::memcpy_dtoh_sync(dst, src) })
}

/// Free and total memory of the current device.
pub fn mem_info() -> Result<(u64, u64)> {
    check(cu::mem_get_info()).map(|(f, t)| (f as u64, t as u64))
}

/// Loads a PTX or cubin image into the current context and looks up functions in it.
#[derive(Debug)]
pub struct Module(sys::CUmodule);

impl Module {
    /// Loads a NUL-terminated PTX text or a cubin image into the current context. The module
    /// is never unloaded: its context lives as long as the process.
    ///
    /// # Safety
    /// `image` must be a complete cubin or a NUL-terminated PTX text: the driver reads it
    /// without knowing its length.
    pub unsafe fn load(image: &[u8]) -> Result<Module> {
        // SAFETY: the caller passes a complete image (see `# Safety`).
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
///
/// # Safety
/// `e` must come from [`create_timing_event`] and be live; `s` must be a live stream.
#[inline]
#[track_caller]
pub unsafe fn record_event(e: CUevent, s: CUstream) -> Result<()> {
    // SAFETY: the caller passes a live event and stream (see `# Safety`).
    check(unsafe { cu::event::record(e, s) })
}

/// Waits until `e` (recorded) has completed.
///
/// # Safety
/// `e` must come from [`create_timing_event`] and be live.
#[track_caller]
pub unsafe fn sync_event(e: CUevent) -> Result<()> {
    // SAFETY: the caller passes a live event (see `# Safety`).
    check(unsafe { cu::event::synchronize(e) })
}

/// Milliseconds between two completed events of one stream.
///
/// # Safety
/// Both events must come from [`create_timing_event`] and be live.
#[track_caller]
pub unsafe fn elapsed_ms(start: CUevent, end: CUevent) -> Result<f32> {
    // SAFETY: the caller passes two live events (see `# Safety`); an unrecorded or pending one
    // is an error, not undefined behaviour.
    check(unsafe { cu::event::elapsed(start, end) })
}

/// Destroys an event from [`create_timing_event`].
///
/// # Safety
/// `e` must come from [`create_timing_event`] and not be used afterwards.
pub unsafe fn destroy_event(e: CUevent) -> Result<()> {
    // SAFETY: the caller's event, not used afterwards (see `# Safety`).
    check(unsafe { cu::event::destroy(e) })
}

/// Starts capturing the work enqueued on `s` into a graph, in thread-local mode: only this
/// thread's potentially unsafe CUDA calls are forbidden while it lasts, so other benchmark
/// threads (and NCCL's own threads) keep working.
///
/// # Safety
/// `s` must be a live stream of the current context (the NULL stream is refused with an error).
#[track_caller]
pub unsafe fn begin_capture(s: CUstream) -> Result<()> {
    // SAFETY: the caller passes a live stream (see `# Safety`).
    check(unsafe {
        cu::stream::begin_capture(
            s,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
    })
}

/// Ends the capture on `s`, instantiates the captured graph and frees the graph itself (the
/// executable graph keeps what it needs). The capture is ended even when instantiation fails.
///
/// # Safety
/// `s` must be a live stream that this thread is capturing.
#[track_caller]
pub unsafe fn end_capture_and_instantiate(s: CUstream) -> Result<CUgraphExec> {
    // SAFETY: the caller passes a live stream this thread captures (see `# Safety`).
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
///
/// # Safety
/// `s` must be a live stream.
pub unsafe fn abandon_capture(s: CUstream) {
    // SAFETY: the caller passes a live stream; ending a capture that may or may not be active
    // is allowed, and the graph, if any, is freed.
    if let Ok(graph) = unsafe { cu::stream::end_capture(s) }
        && !graph.is_null()
    {
        // SAFETY: the graph was returned by the capture above and is not used afterwards.
        let _ = unsafe { cu::graph::destroy(graph) };
    }
}

/// Launches an executable graph on `s`.
///
/// # Safety
/// `g` must come from [`end_capture_and_instantiate`] and be live, and so must every
/// buffer and communicator its captured work uses; `s` must be a live stream.
#[inline]
#[track_caller]
pub unsafe fn launch_graph(g: CUgraphExec, s: CUstream) -> Result<()> {
    // SAFETY: the caller passes a live graph, whose work uses live objects, and a live stream.
    check(unsafe { cu::graph::launch(g, s) })
}

/// Frees an executable graph (its launches may still be running).
///
/// # Safety
/// `g` must come from [`end_capture_and_instantiate`] and not be used afterwards.
pub unsafe fn destroy_graph(g: CUgraphExec) -> Result<()> {
    // SAFETY: the caller's graph, not launched again (see `# Safety`).
    check(unsafe { cu::graph::exec_destroy(g) })
}

/// Enqueues a host function on `s`: the stream waits until it returns.
///
/// # Safety
/// `arg` must stay valid until `f` has run, and `f` must not call CUDA.
#[cfg(feature = "test-hooks")]
pub unsafe fn launch_host_func(
    s: CUstream,
    f: unsafe extern "C" fn(*mut c_void),
    arg: *mut c_void,
) -> Result<()> {
    // SAFETY: forwarded to the caller.
    check(unsafe { cu::stream::launch_host_function(s, f, arg) })
}

#[cfg(test)]
mod tests {
    /// "Container" only where one was detected.
    #[test]
    fn a_missing_driver_says_container_only_in_one() {
        let inside = super::missing_driver(true);
        let outside = super::missing_driver(false);
        assert!(inside.starts_with("cannot load libcuda.so.1 ") && inside.contains("container"));
        assert!(outside.starts_with("cannot load libcuda.so.1 ") && !outside.contains("container"));
        assert!(outside.contains("nvidia-smi"), "{outside}");
    }
}
