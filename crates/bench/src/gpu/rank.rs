//! One GPU driven by this process, as one NCCL rank: its context, stream, communicator, buffers,
//! registrations and validation kernels, and the order in which they are torn down.
//!
//! Orderly teardown ([`destroy_all`]) follows nccl-tests: every registration undone first (a
//! symmetric window belongs to every rank of the communicator), then per GPU the communicator
//! destroyed, the buffers freed and the stream destroyed. A [`Gpu`] dropped without it is on an
//! error path: its communicator is aborted (never destroyed: that may wait for the other
//! ranks), and its device memory is left to the driver, which reclaims it when the process
//! ends — freeing may wait for a GPU that is stuck, and other ranks (other threads' GPUs, peers
//! through registered buffers) may still reach it until their communicators are aborted too.
//! Nothing in that path waits for the GPU, so a run that fails still ends with its exit code
//! instead of hanging in teardown. (The watchdog's `_exit` runs no `Drop` at all, and libnccl
//! is never unloaded: NCCL's own threads may outlive an early error.)

use super::comm::{self, Communicator, Register};
use super::device::{Context, DeviceBuffer, Stream};
use super::kernel_image::KernelImage;
use super::kernels::Kernels;
use super::nccl::Nccl;
use crate::error::Result;
use crate::types::DataType;

/// Buffer sizes of one GPU.
#[derive(Debug, Clone, Copy)]
pub struct BufferSizes {
    /// Send and receive buffers, each.
    pub data: usize,
    /// Expected buffer (0 without validation).
    pub expected: usize,
}

/// One GPU driven by this process: everything a rank's operations use.
#[derive(Debug)]
pub struct Gpu {
    ordinal: i64,
    ctx: Context,
    rank: usize,
    comm: Communicator,
    send: DeviceBuffer,
    recv: DeviceBuffer,
    /// Empty without validation (or with nothing to validate).
    expected: DeviceBuffer,
    /// Empty until the kernels are loaded.
    counter: DeviceBuffer,
    kernels: Option<Kernels>,
    stream: Stream,
}

impl Gpu {
    /// Creates the stream and the send, receive (and, when `sizes.expected > 0`, expected)
    /// buffers of one GPU in its context, zeroed, for rank `rank` of `comm`.
    pub fn create(
        nccl: &'static Nccl,
        ordinal: i64,
        ctx: Context,
        comm: Communicator,
        rank: usize,
        sizes: BufferSizes,
        null_stream: bool,
    ) -> Result<Gpu> {
        ctx.make_current()?;
        let stream = Stream::create(ctx, null_stream)?;
        let send = DeviceBuffer::alloc_for_nccl(nccl, ctx, sizes.data)?;
        let recv = DeviceBuffer::alloc_for_nccl(nccl, ctx, sizes.data)?;
        // Only our checker reads it, never NCCL: a plain allocation.
        let expected = match sizes.expected {
            0 => DeviceBuffer::none(ctx),
            n => DeviceBuffer::alloc(ctx, n)?,
        };
        // Deterministic contents even without validation.
        send.whole().memset_async(0, &stream)?;
        recv.whole().memset_async(0, &stream)?;
        stream.synchronize()?;
        Ok(Gpu {
            ordinal,
            ctx,
            rank,
            comm,
            send,
            recv,
            expected,
            counter: DeviceBuffer::none(ctx),
            kernels: None,
            stream,
        })
    }

    /// Loads the validation kernels (for `types`) and allocates the mismatch counter.
    pub fn load_kernels(&mut self, image: &KernelImage, types: &[DataType]) -> Result<()> {
        self.ctx.make_current()?;
        self.counter = DeviceBuffer::alloc(self.ctx, 8)?;
        self.kernels = Some(image.load(types)?);
        Ok(())
    }

    /// CUDA ordinal.
    pub fn ordinal(&self) -> i64 {
        self.ordinal
    }

    /// Its primary context.
    #[inline]
    pub fn ctx(&self) -> Context {
        self.ctx
    }

    /// NCCL rank.
    #[inline]
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The stream every operation of this GPU runs on.
    #[inline]
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Its communicator.
    #[inline]
    pub fn comm(&self) -> &Communicator {
        &self.comm
    }

    /// Send buffer.
    #[inline]
    pub fn send(&self) -> &DeviceBuffer {
        &self.send
    }

    /// Receive buffer.
    #[inline]
    pub fn recv(&self) -> &DeviceBuffer {
        &self.recv
    }

    /// Expected-result buffer (validation only; empty otherwise).
    pub fn expected(&self) -> &DeviceBuffer {
        &self.expected
    }

    /// One u64 on the device for mismatch counts (once the validation kernels are loaded;
    /// empty before).
    pub fn counter(&self) -> &DeviceBuffer {
        &self.counter
    }

    /// Validation kernels (validation only).
    pub fn kernels(&self) -> Option<&Kernels> {
        self.kernels.as_ref()
    }

    /// Aborts the communicator (after a timeout, an asynchronous error or a signal); it is not
    /// used again. Does nothing the second time.
    pub fn abort(&mut self) {
        self.comm.abort();
    }

    /// Undoes the `-R` registrations of this GPU.
    fn deregister(&mut self) -> Result<()> {
        self.ctx.make_current()?;
        self.comm.deregister()
    }

    /// Destroys the communicator (after undoing `-R` registrations), frees the buffers and the
    /// stream; the GPU must be idle. With several GPUs use [`destroy_all`], which deregisters
    /// every GPU first.
    pub fn destroy(mut self) -> Result<()> {
        self.ctx.make_current()?;
        self.comm.destroy()?;
        self.expected.free()?;
        self.send.free()?;
        self.recv.free()?;
        self.counter.free()?;
        self.stream.destroy()
    }
}

impl Drop for Gpu {
    /// The error path (after [`Gpu::destroy`] everything is released already): abort the
    /// communicator and leave the device memory to the driver; see the module comment.
    fn drop(&mut self) {
        self.comm.abort();
        for b in [
            &mut self.send,
            &mut self.recv,
            &mut self.expected,
            &mut self.counter,
        ] {
            b.leak();
        }
    }
}

/// Registers every GPU's send and receive buffers (`bytes` long) with its communicator, all in
/// one NCCL group (symmetric windows are collective over the communicator's ranks).
pub fn register(nccl: &'static Nccl, gpus: &mut [Gpu], bytes: usize, how: Register) -> Result<()> {
    let mut ranks: Vec<_> = gpus
        .iter_mut()
        .map(|g| (g.ctx, &mut g.comm, [&g.send, &g.recv]))
        .collect();
    comm::register_all(nccl, &mut ranks, bytes, how)
}

/// Tears down every GPU as nccl-tests does: all registrations undone first (a
/// symmetric window belongs to every rank of the communicator), then each communicator
/// destroyed and its buffers and stream freed. The GPUs must be idle. On a failure the GPUs
/// not yet torn down take the error path (see the module comment).
pub fn destroy_all(mut gpus: Vec<Gpu>) -> Result<()> {
    for g in &mut gpus {
        g.deregister()?;
    }
    for g in gpus {
        g.destroy()?;
    }
    Ok(())
}
