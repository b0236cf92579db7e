//! Per-GPU resources of a run: device discovery, communicators, streams and buffers, and their
//! teardown.

use crate::error::{Error, Result};
use crate::gpu::driver::{self, CUcontext, CUdeviceptr, CUstream, DeviceProps};
use crate::gpu::kernels::Kernels;
use crate::gpu::nccl::{Comm, Config, Nccl, UniqueId};
use crate::report::DeviceInfo;

/// One GPU driven by this process.
pub struct Gpu {
    /// CUDA ordinal.
    pub ordinal: i64,
    /// Its primary context.
    pub ctx: CUcontext,
    /// The stream every operation of this GPU runs on.
    pub stream: CUstream,
    /// Its communicator.
    pub comm: Comm,
    /// NCCL rank.
    pub rank: usize,
    /// Send buffer (`bytes` long).
    pub send: CUdeviceptr,
    /// Receive buffer (`bytes` long).
    pub recv: CUdeviceptr,
    /// Expected-result buffer (validation only, else 0).
    pub expected: CUdeviceptr,
    /// One u64 on the device for mismatch counts (validation only, else 0).
    pub counter: CUdeviceptr,
    /// Validation kernels (validation only).
    pub kernels: Option<Kernels>,
    /// Whether buffers came from `ncclMemAlloc`.
    nccl_alloc: bool,
}

// SAFETY: the raw handles are driver/NCCL objects used by exactly one thread at a time (the
// thread that owns this GPU); moving them between threads is allowed by CUDA and NCCL.
unsafe impl Send for Gpu {}

/// A device as discovered, before anything is created on it.
pub struct Discovered {
    /// CUDA ordinal.
    pub ordinal: i64,
    /// Properties.
    pub props: DeviceProps,
}

/// Reads the properties of devices `base .. base + n`; fails like nccl-tests when there are too
/// few devices.
pub fn discover(base: i64, n: i64) -> Result<Vec<Discovered>> {
    let found = driver::device_count()?;
    if base + n > found {
        return Err(Error::TooFewGpus {
            requested: base + n,
            found,
        });
    }
    (base..base + n)
        .map(|ordinal| {
            Ok(Discovered {
                ordinal,
                props: driver::device_props(ordinal)?,
            })
        })
        .collect()
}

/// The device line of GPU `i` of this process.
pub fn device_info(d: &Discovered, rank: i64, hostname: &str) -> DeviceInfo {
    DeviceInfo {
        rank,
        group: 0,
        pid: std::process::id(),
        hostname: hostname.to_string(),
        device: d.ordinal,
        pci_domain: d.props.pci.0,
        pci_bus: d.props.pci.1,
        pci_device: d.props.pci.2,
        name: d.props.name.clone(),
    }
}

/// Creates one communicator per device (ranks `first_rank ..`) inside one NCCL group.
pub fn init_comms(
    nccl: &Nccl,
    devices: &[Discovered],
    id: &UniqueId,
    nranks: usize,
    first_rank: usize,
    nccl_version: i32,
) -> Result<Vec<(CUcontext, Comm)>> {
    let mut comms = vec![std::ptr::null_mut(); devices.len()];
    let mut ctxs = Vec::with_capacity(devices.len());
    // SAFETY: group calls bracket the init calls below.
    nccl.check(unsafe { (nccl.ncclGroupStart)() })?;
    let mut result = Ok(());
    for (i, d) in devices.iter().enumerate() {
        let ctx = match driver::primary_context(d.ordinal).and_then(|c| {
            driver::set_current(c)?;
            Ok(c)
        }) {
            Ok(c) => c,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        ctxs.push(ctx);
        let rank = (first_rank + i) as i32;
        let r = match nccl.ncclCommInitRankConfig {
            Some(f) => {
                let mut cfg = Config::new();
                if nccl_version >= 22800 {
                    cfg.nvlink_centric_sched = 1;
                }
                // SAFETY: valid out pointer, id and config.
                unsafe { f(&mut comms[i], nranks as i32, *id, rank, &mut cfg) }
            }
            // SAFETY: valid out pointer and id.
            None => unsafe { (nccl.ncclCommInitRank)(&mut comms[i], nranks as i32, *id, rank) },
        };
        if let Err(e) = nccl.check(r) {
            result = Err(e);
            break;
        }
    }
    // SAFETY: closes the group opened above.
    let end = nccl.check(unsafe { (nccl.ncclGroupEnd)() });
    result?;
    end?;
    Ok(ctxs.into_iter().zip(comms).collect())
}

fn alloc(nccl: &Nccl, bytes: usize) -> Result<(CUdeviceptr, bool)> {
    if let Some(f) = nccl.ncclMemAlloc {
        let mut p = std::ptr::null_mut();
        // SAFETY: valid out pointer; allocates on the current device.
        nccl.check(unsafe { f(&mut p, bytes.max(1)) })?;
        return Ok((p as CUdeviceptr, true));
    }
    Ok((driver::malloc(bytes)?, false))
}

/// Buffer sizes of one GPU.
#[derive(Debug, Clone, Copy)]
pub struct BufferSizes {
    /// Send and receive buffers, each.
    pub data: usize,
    /// Expected buffer (0 without validation).
    pub expected: usize,
}

impl Gpu {
    /// Creates the stream and buffers of one GPU in its (current) context.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        nccl: &Nccl,
        ordinal: i64,
        ctx: CUcontext,
        comm: Comm,
        rank: usize,
        sizes: BufferSizes,
        null_stream: bool,
        kernel_image: Option<&[u8]>,
        types: &[crate::types::DataType],
    ) -> Result<Gpu> {
        driver::set_current(ctx)?;
        let stream = driver::create_stream(null_stream)?;
        let mut gpu = Gpu {
            ordinal,
            ctx,
            stream,
            comm,
            rank,
            send: 0,
            recv: 0,
            expected: 0,
            counter: 0,
            kernels: None,
            nccl_alloc: false,
        };
        (gpu.send, gpu.nccl_alloc) = alloc(nccl, sizes.data)?;
        (gpu.recv, _) = alloc(nccl, sizes.data)?;
        if let Some(image) = kernel_image {
            (gpu.expected, _) = alloc(nccl, sizes.expected)?;
            gpu.counter = driver::malloc(8)?;
            gpu.kernels = Some(Kernels::load(image, types)?);
        }
        // Deterministic contents even without validation.
        driver::memset_async(gpu.send, 0, sizes.data, stream)?;
        driver::memset_async(gpu.recv, 0, sizes.data, stream)?;
        driver::synchronize(stream)?;
        Ok(gpu)
    }

    /// Destroys the communicator, frees the buffers and the stream.
    pub fn destroy(self, nccl: &Nccl) -> Result<()> {
        driver::set_current(self.ctx)?;
        // SAFETY: the communicator is idle and not used afterwards.
        nccl.check(unsafe { (nccl.ncclCommDestroy)(self.comm) })?;
        for p in [self.send, self.recv, self.expected] {
            if p == 0 {
                continue;
            }
            match (self.nccl_alloc, nccl.ncclMemFree) {
                // SAFETY: `p` came from ncclMemAlloc and is idle.
                (true, Some(f)) => nccl.check(unsafe { f(p as *mut _) })?,
                _ => driver::free(p)?,
            }
        }
        if self.counter != 0 {
            driver::free(self.counter)?;
        }
        driver::destroy_stream(self.stream)
    }
}
