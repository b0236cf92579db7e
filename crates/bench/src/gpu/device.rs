//! The safe layer over the CUDA driver: owned types for what a run creates on a GPU — contexts,
//! streams, device memory, timing events and executable graphs — each released by `Drop`, with
//! checked views ([`Span`]) for everything that reads or writes device memory.
//!
//! Teardown order and the error path are decided one level up, by [`super::rank::Gpu`]: a
//! buffer a communicator may still use is freed only after that communicator is gone, and never
//! while the GPU may be stuck (freeing device memory can wait for the device).

use super::driver::{self, CUcontext, CUdeviceptr, CUevent, CUgraphExec, CUstream};
use super::nccl::Nccl;
use crate::error::{Error, Result};
use std::ffi::c_void;
use std::marker::PhantomData;
#[cfg(feature = "test-hooks")]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "test-hooks")]
use std::time::{Duration, Instant};

/// A device's primary context: the one the CUDA runtime, and so NCCL, uses. Retained for the
/// life of the process, so a copy never dangles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context(CUcontext);

// SAFETY: a primary context is a process-wide driver object that any thread may make current.
unsafe impl Send for Context {}
// SAFETY: as above; the handle itself is never written.
unsafe impl Sync for Context {}

impl Context {
    /// Retains the primary context of device `ordinal`.
    pub fn primary(ordinal: i64) -> Result<Context> {
        driver::primary_context(ordinal).map(Context)
    }

    /// Makes this context current on the calling thread.
    #[inline]
    pub fn make_current(self) -> Result<()> {
        // SAFETY: the handle comes from `primary_context` and is retained for the process.
        unsafe { driver::set_current(self.0) }
    }

    /// The raw driver handle (for code that calls the driver itself).
    pub fn as_raw(self) -> CUcontext {
        self.0
    }
}

/// A stream of one context (non-blocking), or the legacy NULL stream (`-y 1`). Destroyed when
/// dropped; `cuStreamDestroy` returns at once even while work is pending (the driver releases
/// the stream when that work is done), so dropping never waits for the GPU.
#[derive(Debug)]
pub struct Stream {
    raw: CUstream,
    ctx: Context,
    /// False once destroyed (and always for the NULL stream, which is not ours to destroy).
    owned: bool,
}

// SAFETY: a stream may be used from any thread whose current context is its own; one thread at a
// time uses it (the thread that owns its GPU).
unsafe impl Send for Stream {}

impl Stream {
    /// Creates a non-blocking stream in `ctx` (made current), or takes the NULL stream.
    pub fn create(ctx: Context, null_stream: bool) -> Result<Stream> {
        ctx.make_current()?;
        let raw = driver::create_stream(null_stream)?;
        Ok(Stream {
            raw,
            ctx,
            owned: !raw.is_null(),
        })
    }

    /// Whether all work enqueued so far has finished (`cuStreamQuery`); never blocks.
    #[inline]
    pub fn is_done(&self) -> Result<bool> {
        // SAFETY: the stream is live while `self` is.
        unsafe { driver::stream_done(self.raw) }
    }

    /// Blocks until all work enqueued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream is live while `self` is.
        unsafe { driver::synchronize(self.raw) }
    }

    /// Destroys the stream now, reporting a failure (dropping ignores it). Its context must be
    /// current. Afterwards the handle is the NULL stream's, so nothing can reach the destroyed
    /// one. Does nothing the second time.
    pub fn destroy(&mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        if !std::mem::take(&mut self.owned) {
            return Ok(());
        }
        // SAFETY: created by `create_stream`; the handle is gone from `self`, never used again.
        unsafe { driver::destroy_stream(raw) }
    }

    /// Starts capturing this stream's work into a graph (thread-local capture mode: only this
    /// thread's unsafe CUDA calls are refused meanwhile). The driver refuses the NULL stream.
    #[track_caller]
    pub fn begin_capture(&self) -> Result<()> {
        // SAFETY: a live stream; the driver answers the NULL stream with an error.
        unsafe { driver::begin_capture(self.raw) }
    }

    /// Ends the capture begun by [`Stream::begin_capture`] on this thread and instantiates the
    /// graph. The graph borrows the stream, and through it the GPU whose buffers and
    /// communicator the captured work uses, so none of them can go away while it exists.
    #[track_caller]
    pub fn end_capture(&self) -> Result<GraphExec<'_>> {
        // SAFETY: a live stream; ending a capture that is not active is an error, not UB.
        let raw = unsafe { driver::end_capture_and_instantiate(self.raw) }?;
        Ok(GraphExec {
            raw,
            _stream: PhantomData,
        })
    }

    /// Ends a capture that failed part-way and drops whatever was captured (best effort).
    pub fn abandon_capture(&self) {
        // SAFETY: a live stream.
        unsafe { driver::abandon_capture(self.raw) }
    }

    /// Test hook (feature `test-hooks`): holds the stream for `ms` milliseconds (or until
    /// [`release_holds`]) with a host function, so that it is really busy while nothing else is
    /// affected.
    #[cfg(feature = "test-hooks")]
    pub fn hold(&self, ms: u64) -> Result<()> {
        // SAFETY: the argument is a plain integer carried in the pointer, never dereferenced;
        // `hold` calls no CUDA function.
        unsafe { driver::launch_host_func(self.raw, hold, ms as usize as *mut c_void) }
    }

    /// The raw driver handle (for code that calls NCCL or the driver itself).
    pub fn as_raw(&self) -> CUstream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned && self.ctx.make_current().is_ok() {
            let _ = self.destroy();
        }
    }
}

/// Set by [`release_holds`]: every [`Stream::hold`] ends now.
#[cfg(feature = "test-hooks")]
static HOLDS_RELEASED: AtomicBool = AtomicBool::new(false);

/// Ends every [`Stream::hold`] at once (a timeout or a signal), so that aborting the
/// communicators never waits for one.
#[cfg(feature = "test-hooks")]
pub fn release_holds() {
    HOLDS_RELEASED.store(true, Ordering::Relaxed);
}

/// The host function of [`Stream::hold`]: sleeps until `ms` (the pointer's value) elapsed or
/// [`release_holds`].
#[cfg(feature = "test-hooks")]
unsafe extern "C" fn hold(arg: *mut c_void) {
    let ms = arg as usize as u64;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(ms) && !HOLDS_RELEASED.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Who allocated a [`DeviceBuffer`], and so who frees it.
#[derive(Debug, Clone, Copy)]
enum Allocator {
    /// `cuMemAlloc`.
    Driver,
    /// `ncclMemAlloc` (freed with `ncclMemFree`).
    Nccl(&'static Nccl),
}

/// Device memory of one context, freed when dropped (with the allocator that made it). The
/// bytes are only reached through checked [`Span`]s, or by NCCL calls bound against the
/// buffer's range (`super::op`).
#[derive(Debug)]
pub struct DeviceBuffer {
    /// 0 once freed or given up.
    ptr: CUdeviceptr,
    len: usize,
    ctx: Context,
    from: Allocator,
}

impl DeviceBuffer {
    /// `bytes` bytes from the driver (`cuMemAlloc`; at least one byte is allocated) in `ctx`,
    /// which must be current.
    pub fn alloc(ctx: Context, bytes: usize) -> Result<DeviceBuffer> {
        Ok(DeviceBuffer {
            ptr: driver::malloc(bytes)?,
            len: bytes,
            ctx,
            from: Allocator::Driver,
        })
    }

    /// No memory at all (a buffer a run without validation does not need): only empty spans.
    pub fn none(ctx: Context) -> DeviceBuffer {
        DeviceBuffer {
            ptr: 0,
            len: 0,
            ctx,
            from: Allocator::Driver,
        }
    }

    /// `bytes` bytes from `ncclMemAlloc` where the loaded NCCL has it (memory NCCL can register
    /// and reach from peers), else from the driver; `ctx` must be current.
    pub fn alloc_for_nccl(nccl: &'static Nccl, ctx: Context, bytes: usize) -> Result<DeviceBuffer> {
        let Some(f) = nccl.ncclMemAlloc else {
            return DeviceBuffer::alloc(ctx, bytes);
        };
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out pointer; allocates on the current device.
        nccl.check(unsafe { f(&mut p, bytes.max(1)) })?;
        Ok(DeviceBuffer {
            ptr: p as CUdeviceptr,
            len: bytes,
            ctx,
            from: Allocator::Nccl(nccl),
        })
    }

    /// The device address of the first byte (0 once freed).
    #[inline]
    pub fn addr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Usable length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no usable bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the memory came from `ncclMemAlloc`.
    pub fn is_nccl_memory(&self) -> bool {
        matches!(self.from, Allocator::Nccl(_))
    }

    /// The `len` bytes at device address `addr`, checked to lie inside this buffer. An empty
    /// span is allowed anywhere (nothing is ever read or written through it).
    pub fn span(&self, addr: CUdeviceptr, len: usize) -> Result<Span<'_>> {
        let inside = addr
            .checked_sub(self.ptr)
            .and_then(|off| off.checked_add(len as u64))
            .is_some_and(|end| end <= self.len as u64);
        if len > 0 && (self.ptr == 0 || !inside) {
            return Err(Error::Internal(format!(
                "device range {addr:#x}+{len} lies outside its buffer {:#x}+{}",
                self.ptr, self.len
            )));
        }
        Ok(Span {
            addr,
            len,
            _buf: PhantomData,
        })
    }

    /// The whole buffer.
    pub fn whole(&self) -> Span<'_> {
        Span {
            addr: self.ptr,
            len: if self.ptr == 0 { 0 } else { self.len },
            _buf: PhantomData,
        }
    }

    /// Frees the memory now, reporting a failure (dropping ignores it). The memory must be
    /// idle (this may wait for the device) and its context current. Does nothing the second
    /// time.
    pub fn free(&mut self) -> Result<()> {
        let p = std::mem::take(&mut self.ptr);
        if p == 0 {
            return Ok(());
        }
        match (self.from, self.nccl_mem_free()) {
            (Allocator::Nccl(nccl), Some(f)) => {
                // SAFETY: from ncclMemAlloc; `ptr` is now 0, so it is never used again.
                let r = unsafe { f(p as *mut c_void) };
                nccl.check(r)
            }
            // SAFETY: from cuMemAlloc (or from an ncclMemAlloc without ncclMemFree, which a
            // loaded NCCL never is: both came in 2.19); `ptr` is now 0, never used again.
            _ => unsafe { driver::free(p) },
        }
    }

    /// `ncclMemFree` for memory from `ncclMemAlloc`.
    fn nccl_mem_free(&self) -> Option<unsafe extern "C" fn(*mut c_void) -> std::ffi::c_int> {
        match self.from {
            Allocator::Nccl(nccl) => nccl.ncclMemFree,
            Allocator::Driver => None,
        }
    }

    /// Gives the memory up without freeing it: the driver reclaims it when the process ends.
    /// For the error path, where the GPU may be stuck (freeing would wait for it) or other
    /// ranks may still reach the memory.
    pub fn leak(&mut self) {
        self.ptr = 0;
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ptr != 0 && self.ctx.make_current().is_ok() {
            let _ = self.free();
        }
    }
}

/// A checked range of a [`DeviceBuffer`]: every device access made through it stays inside
/// the buffer, which it borrows.
#[derive(Debug, Clone, Copy)]
pub struct Span<'a> {
    addr: CUdeviceptr,
    len: usize,
    _buf: PhantomData<&'a DeviceBuffer>,
}

impl Span<'_> {
    /// Device address of the first byte.
    #[inline]
    pub fn addr(&self) -> CUdeviceptr {
        self.addr
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the span is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills the span with `value`, asynchronously on `stream` (nothing for an empty span).
    pub fn memset_async(&self, value: u8, stream: &Stream) -> Result<()> {
        // SAFETY: the span lies inside a live buffer; the stream is live.
        unsafe { driver::memset_async(self.addr, value, self.len, stream.raw) }
    }

    /// Copies `src` (of the same length) into this span, asynchronously on `stream`.
    pub fn copy_from_async(&self, src: &Span, stream: &Stream) -> Result<()> {
        if src.len != self.len {
            return Err(Error::Internal(format!(
                "device copy of {} bytes into {} bytes",
                src.len, self.len
            )));
        }
        // SAFETY: both spans lie inside live buffers; the stream is live.
        unsafe { driver::copy_async(self.addr, src.addr, self.len, stream.raw) }
    }

    /// Copies the span into `dst`, which must be exactly as long (synchronous).
    pub fn copy_to_host<T: bytemuck::Pod>(&self, dst: &mut [T]) -> Result<()> {
        if std::mem::size_of_val(dst) != self.len {
            return Err(Error::Internal(format!(
                "device read of {} bytes into {} bytes",
                self.len,
                std::mem::size_of_val(dst)
            )));
        }
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: the span holds exactly `size_of_val(dst)` bytes of a live buffer.
        unsafe { driver::copy_to_host(dst, self.addr) }
    }
}

/// Timing events of one context (`-I 1`), destroyed when dropped. `cuEventDestroy` returns at
/// once even for an event still pending, so dropping never waits for the GPU.
#[derive(Debug)]
pub struct TimingEvents {
    ctx: Context,
    events: Vec<CUevent>,
}

// SAFETY: events may be recorded and read from any thread whose current context is theirs; one
// thread at a time uses them.
unsafe impl Send for TimingEvents {}

impl TimingEvents {
    /// `count` events that record timing in `ctx` (made current).
    #[track_caller]
    pub fn create(ctx: Context, count: usize) -> Result<TimingEvents> {
        ctx.make_current()?;
        // Filled one by one, so that Drop frees what was made if a later one fails.
        let mut t = TimingEvents {
            ctx,
            events: Vec::with_capacity(count),
        };
        for _ in 0..count {
            t.events.push(driver::create_timing_event()?);
        }
        Ok(t)
    }

    /// Records event `index` on `stream` (which must belong to the same context).
    #[inline]
    #[track_caller]
    pub fn record(&self, index: usize, stream: &Stream) -> Result<()> {
        let e = self.event(index)?;
        // SAFETY: a live event of this set and a live stream.
        unsafe { driver::record_event(e, stream.raw) }
    }

    /// Waits until event `index` (recorded) has completed.
    #[track_caller]
    pub fn wait(&self, index: usize) -> Result<()> {
        let e = self.event(index)?;
        // SAFETY: a live event of this set.
        unsafe { driver::sync_event(e) }
    }

    /// Milliseconds between events `start` and `end`, both recorded and complete.
    #[track_caller]
    pub fn elapsed_ms(&self, start: usize, end: usize) -> Result<f32> {
        let (a, b) = (self.event(start)?, self.event(end)?);
        // SAFETY: two live events of this set.
        unsafe { driver::elapsed_ms(a, b) }
    }

    /// Their context.
    pub fn ctx(&self) -> Context {
        self.ctx
    }

    #[inline]
    fn event(&self, index: usize) -> Result<CUevent> {
        self.events
            .get(index)
            .copied()
            .ok_or_else(|| Error::Internal(format!("no timing event {index}")))
    }
}

impl Drop for TimingEvents {
    fn drop(&mut self) {
        if self.ctx.make_current().is_err() {
            return;
        }
        for &e in &self.events {
            // SAFETY: created by `create_timing_event`, not used after this.
            let _ = unsafe { driver::destroy_event(e) };
        }
    }
}

/// An executable graph captured from a [`Stream`] ([`Stream::end_capture`]), freed when
/// dropped (a launch still running finishes; CUDA frees the graph afterwards).
#[derive(Debug)]
pub struct GraphExec<'s> {
    raw: CUgraphExec,
    _stream: PhantomData<&'s Stream>,
}

impl GraphExec<'_> {
    /// Launches the graph on `stream`.
    #[inline]
    #[track_caller]
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        // SAFETY: a live graph whose work uses the borrowed GPU's live buffers and
        // communicator; a live stream.
        unsafe { driver::launch_graph(self.raw, stream.raw) }
    }
}

impl Drop for GraphExec<'_> {
    fn drop(&mut self) {
        // SAFETY: instantiated by `end_capture`, not launched after this.
        let _ = unsafe { driver::destroy_graph(self.raw) };
    }
}

#[cfg(test)]
mod tests;
