//! Per-GPU resources of a run: device discovery, communicators, streams, buffers and their
//! registration (`-R`), the free-memory readings of `-M 1`, and their teardown.

use crate::error::{Error, Result};
use crate::gpu::driver::{self, CUcontext, CUdeviceptr, CUstream, DeviceProps};
use crate::gpu::kernel_image::KernelImage;
use crate::gpu::kernels::Kernels;
use crate::gpu::nccl::{self, Comm, Config, Nccl, UniqueId};
use crate::types::DataType;
use std::ffi::c_void;

/// How the send and receive buffers are registered with the communicator (`-R`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Register {
    /// `-R 0`.
    Off,
    /// `-R 1`: `ncclCommRegister`.
    Local,
    /// `-R 2`: `ncclCommWindowRegister` with `NCCL_WIN_COLL_SYMMETRIC` (NCCL ≥ 2.27).
    Symmetric,
}

/// The registration handles of one GPU's send and receive buffers.
#[derive(Debug, Clone, Copy)]
enum Handles {
    None,
    Local([*mut c_void; 2]),
    Window([*mut c_void; 2]),
}

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
    /// `-R` registrations, undone before the communicator is destroyed.
    handles: Handles,
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

/// Creates one communicator per device (ranks `first_rank ..`) inside one NCCL group, with
/// `CTAPolicy` set when `cta_policy` is given (`-x`).
pub fn init_comms(
    nccl: &Nccl,
    devices: &[Discovered],
    id: &UniqueId,
    nranks: usize,
    first_rank: usize,
    nccl_version: i32,
    cta_policy: Option<i64>,
) -> Result<Vec<(CUcontext, Comm)>> {
    let mut comms = vec![std::ptr::null_mut(); devices.len()];
    let mut ctxs = Vec::with_capacity(devices.len());
    nccl.group(|| {
        for (i, d) in devices.iter().enumerate() {
            let ctx = driver::primary_context(d.ordinal)?;
            driver::set_current(ctx)?;
            ctxs.push(ctx);
            let rank = (first_rank + i) as i32;
            let r = match nccl.ncclCommInitRankConfig {
                Some(f) => {
                    let mut cfg = Config::new();
                    if nccl_version >= 22800 {
                        cfg.nvlink_centric_sched = 1;
                    }
                    if let Some(p) = cta_policy {
                        cfg.cta_policy = p as std::ffi::c_int;
                    }
                    // SAFETY: valid out pointer, id and config.
                    unsafe { f(&mut comms[i], nranks as i32, *id, rank, &mut cfg) }
                }
                // SAFETY: valid out pointer and id.
                None => unsafe { (nccl.ncclCommInitRank)(&mut comms[i], nranks as i32, *id, rank) },
            };
            nccl.check(r)?;
        }
        Ok(())
    })?;
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
    /// Creates the stream and the send, receive (and, when `sizes.expected > 0`, expected)
    /// buffers of one GPU in its context.
    pub fn create(
        nccl: &Nccl,
        ordinal: i64,
        ctx: CUcontext,
        comm: Comm,
        rank: usize,
        sizes: BufferSizes,
        null_stream: bool,
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
            handles: Handles::None,
        };
        (gpu.send, gpu.nccl_alloc) = alloc(nccl, sizes.data)?;
        (gpu.recv, _) = alloc(nccl, sizes.data)?;
        if sizes.expected > 0 {
            // Only our checker reads it, never NCCL: a plain allocation.
            gpu.expected = driver::malloc(sizes.expected)?;
        }
        // Deterministic contents even without validation.
        driver::memset_async(gpu.send, 0, sizes.data, stream)?;
        driver::memset_async(gpu.recv, 0, sizes.data, stream)?;
        driver::synchronize(stream)?;
        Ok(gpu)
    }

    /// Loads the validation kernels (for `types`) and allocates the mismatch counter.
    pub fn load_kernels(&mut self, image: &KernelImage, types: &[DataType]) -> Result<()> {
        driver::set_current(self.ctx)?;
        self.counter = driver::malloc(8)?;
        self.kernels = Some(image.load(types)?);
        Ok(())
    }

    /// Destroys the communicator (after undoing `-R` registrations), frees the buffers and the
    /// stream. With several GPUs use [`destroy_all`], which deregisters every GPU first.
    pub fn destroy(mut self, nccl: &Nccl) -> Result<()> {
        driver::set_current(self.ctx)?;
        deregister(nccl, &mut self)?;
        // SAFETY: the communicator is idle and not used afterwards.
        nccl.check(unsafe { (nccl.ncclCommDestroy)(self.comm) })?;
        if self.expected != 0 {
            driver::free(self.expected)?;
        }
        for p in [self.send, self.recv] {
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

/// Registers every GPU's send and receive buffers (`bytes` long) with its communicator, all in
/// one NCCL group (symmetric windows are collective over the communicator's ranks).
pub fn register(nccl: &Nccl, gpus: &mut [Gpu], bytes: usize, how: Register) -> Result<()> {
    let missing = |name: &str, flag: u8, need: &str| {
        Error::Unsupported(format!(
            "-R {flag}: {} has no {name} (needs NCCL {need} or later)",
            nccl.path
        ))
    };
    match how {
        Register::Off => Ok(()),
        Register::Local => {
            let reg = nccl
                .ncclCommRegister
                .ok_or_else(|| missing("ncclCommRegister", 1, "2.19"))?;
            nccl.ncclCommDeregister
                .ok_or_else(|| missing("ncclCommDeregister", 1, "2.19"))?;
            // SAFETY: `p` is a live allocation of at least `bytes` bytes; `h` a valid out
            // pointer that stays valid until the group ends.
            register_with(nccl, gpus, |c, p, h| unsafe { reg(c, p, bytes, h) }, false)
        }
        Register::Symmetric => {
            let reg = nccl
                .ncclCommWindowRegister
                .ok_or_else(|| missing("ncclCommWindowRegister", 2, "2.27"))?;
            nccl.ncclCommWindowDeregister
                .ok_or_else(|| missing("ncclCommWindowDeregister", 2, "2.27"))?;
            let flags = nccl::WIN_COLL_SYMMETRIC;
            // SAFETY: as above.
            register_with(
                nccl,
                gpus,
                |c, p, h| unsafe { reg(c, p, bytes, h, flags) },
                true,
            )
        }
    }
}

fn register_with(
    nccl: &Nccl,
    gpus: &mut [Gpu],
    call: impl Fn(Comm, *mut c_void, *mut *mut c_void) -> std::ffi::c_int,
    window: bool,
) -> Result<()> {
    // NCCL may write a handle only at ncclGroupEnd (window registration is deferred to the end
    // of the group), so the handles live here, never moved, until the group is closed.
    let mut handles = vec![[std::ptr::null_mut::<c_void>(); 2]; gpus.len()];
    let slots = handles.as_mut_ptr();
    let result = nccl.group(|| {
        for (i, g) in gpus.iter().enumerate() {
            driver::set_current(g.ctx)?;
            // SAFETY: `i` is in bounds and `handles` is neither moved nor resized until it is
            // read after the group; nothing else touches it meanwhile.
            let h = unsafe { &mut *slots.add(i) };
            nccl.check(call(g.comm, g.send as *mut c_void, &mut h[0]))?;
            nccl.check(call(g.comm, g.recv as *mut c_void, &mut h[1]))?;
        }
        Ok(())
    });
    // Recorded even after a failure, so that teardown undoes what was registered.
    for (g, h) in gpus.iter_mut().zip(handles) {
        g.handles = if window {
            Handles::Window(h)
        } else {
            Handles::Local(h)
        };
    }
    result
}

/// Undoes the `-R` registrations of one GPU (once: the handles are forgotten).
fn deregister(nccl: &Nccl, g: &mut Gpu) -> Result<()> {
    let (handles, f) = match std::mem::replace(&mut g.handles, Handles::None) {
        Handles::None => return Ok(()),
        Handles::Local(h) => (h, nccl.ncclCommDeregister),
        Handles::Window(h) => (h, nccl.ncclCommWindowDeregister),
    };
    let Some(f) = f else { return Ok(()) };
    driver::set_current(g.ctx)?;
    for h in handles.into_iter().filter(|h| !h.is_null()) {
        // SAFETY: `h` was returned by the matching register call on this communicator.
        nccl.check(unsafe { f(g.comm, h) })?;
    }
    Ok(())
}

/// Tears down every GPU as nccl-tests does (spec §6.8): all registrations undone first (a
/// symmetric window belongs to every rank of the communicator), then each communicator
/// destroyed and its buffers and stream freed.
pub fn destroy_all(nccl: &Nccl, mut gpus: Vec<Gpu>) -> Result<()> {
    for g in &mut gpus {
        deregister(nccl, g)?;
    }
    for g in gpus {
        g.destroy(nccl)?;
    }
    Ok(())
}

/// Everything needed to set up GPUs, shared by the main thread (`-p 0`) or by every benchmark
/// thread (`-p 1`, each for its own GPUs).
pub struct GpuPlan<'a> {
    /// libnccl.
    pub nccl: &'a Nccl,
    /// The group's NCCL id.
    pub id: UniqueId,
    /// Communicator size.
    pub nranks: usize,
    /// Runtime NCCL version code.
    pub nccl_version: i32,
    /// `-x` (already checked against the NCCL version).
    pub cta_policy: Option<i64>,
    /// Buffer sizes.
    pub sizes: BufferSizes,
    /// `-R` (already checked against the NCCL version) and the registered length.
    pub register: (Register, usize),
    /// `-y 1`.
    pub null_stream: bool,
    /// The validation kernels, compiled in the background (validation only).
    pub kernels: Option<&'a KernelImage>,
    /// Datatypes the kernels are loaded for.
    pub types: &'a [DataType],
    /// `-M 1`: read free memory around each step.
    pub measure_memory: bool,
}

/// The `-M 1` figures of one setup, in bytes: the largest drop of free memory over the GPUs
/// set up, during communicator creation and during buffer allocation plus registration.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SetupMemory {
    /// Communicator creation.
    pub initialization: f64,
    /// Buffers and their registration.
    pub user_allocated: f64,
}

/// Sets up `devices` (NCCL ranks `first_rank ..`): contexts, communicators, streams, buffers,
/// registrations, validation kernels; reading free memory between the steps with `-M 1`.
pub fn create_gpus(
    p: &GpuPlan,
    devices: &[Discovered],
    first_rank: usize,
) -> Result<(Vec<Gpu>, SetupMemory)> {
    let mut ctxs = Vec::with_capacity(devices.len());
    for d in devices {
        ctxs.push(driver::primary_context(d.ordinal)?);
    }
    let free = |on: bool| {
        if on {
            free_memory(&ctxs)
        } else {
            Ok(Vec::new())
        }
    };
    let before_init = free(p.measure_memory)?;
    let comms = init_comms(
        p.nccl,
        devices,
        &p.id,
        p.nranks,
        first_rank,
        p.nccl_version,
        p.cta_policy,
    )?;
    let after_init = free(p.measure_memory)?;
    let mut gpus = Vec::with_capacity(devices.len());
    for (i, (d, (ctx, comm))) in devices.iter().zip(comms).enumerate() {
        gpus.push(Gpu::create(
            p.nccl,
            d.ordinal,
            ctx,
            comm,
            first_rank + i,
            p.sizes,
            p.null_stream,
        )?);
    }
    register(p.nccl, &mut gpus, p.register.1, p.register.0)?;
    let after_buffers = free(p.measure_memory)?;
    // Our own kernels and counter are not the user's buffers: loaded after the reading.
    if let Some(k) = p.kernels {
        for g in &mut gpus {
            g.load_kernels(k, p.types)?;
        }
    }
    if let Some(g) = gpus.first() {
        driver::set_current(g.ctx)?;
    }
    let memory = SetupMemory {
        initialization: largest_drop(&before_init, &after_init),
        user_allocated: largest_drop(&after_init, &after_buffers),
    };
    Ok((gpus, memory))
}

/// Free memory of each context's device, in bytes.
pub fn free_memory(ctxs: &[CUcontext]) -> Result<Vec<u64>> {
    let mut out = Vec::with_capacity(ctxs.len());
    for &c in ctxs {
        driver::set_current(c)?;
        out.push(driver::mem_info()?.0);
    }
    Ok(out)
}

/// The largest decrease of free memory from `before` to `after` over the devices (negative
/// when every device gained memory; 0 with no readings).
pub fn largest_drop(before: &[u64], after: &[u64]) -> f64 {
    before
        .iter()
        .zip(after)
        .map(|(&b, &a)| b as f64 - a as f64)
        .reduce(f64::max)
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_drop_is_the_largest_over_devices() {
        assert_eq!(largest_drop(&[100, 200], &[40, 190]), 60.0);
        assert_eq!(largest_drop(&[100], &[150]), -50.0);
        assert_eq!(largest_drop(&[], &[]), 0.0);
    }
}
