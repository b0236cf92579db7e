//! Per-GPU resources of a run: communicators, streams, buffers and their
//! registration (`-R`), the free-memory readings of `-M 1`, and their teardown.

use super::discover::Discovered;
use crate::error::Result;
use crate::gpu::driver;
use crate::gpu::kernel_image::KernelImage;
use crate::gpu::nccl::{Nccl, UniqueId};
use crate::gpu::{Communicator, Context, rank};
use crate::types::DataType;

pub use crate::gpu::{BufferSizes, Gpu, Register};

/// Creates one communicator per device (ranks `first_rank ..`) inside one NCCL group, with
/// `CTAPolicy` set when `cta_policy` is given (`-x`); returns each device's context with it.
pub fn init_comms(
    nccl: &'static Nccl,
    devices: &[Discovered],
    id: &UniqueId,
    nranks: usize,
    first_rank: usize,
    nccl_version: i32,
    cta_policy: Option<i64>,
) -> Result<Vec<(Context, Communicator)>> {
    let ctxs = devices
        .iter()
        .map(|d| Context::primary(d.ordinal))
        .collect::<Result<Vec<_>>>()?;
    let comms = Communicator::init_group(
        nccl,
        &ctxs,
        id,
        nranks,
        first_rank,
        nccl_version >= 22800,
        cta_policy,
    )?;
    Ok(ctxs.into_iter().zip(comms).collect())
}

/// Everything needed to set up GPUs, shared by the main thread (`-p 0`) or by every benchmark
/// thread (`-p 1`, each for its own GPUs).
pub struct GpuPlan<'a> {
    /// libnccl.
    pub nccl: &'static Nccl,
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
        ctxs.push(Context::primary(d.ordinal)?);
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
    rank::register(p.nccl, &mut gpus, p.register.1, p.register.0)?;
    let after_buffers = free(p.measure_memory)?;
    // Our own kernels and counter are not the user's buffers: loaded after the reading.
    if let Some(k) = p.kernels {
        for g in &mut gpus {
            g.load_kernels(k, p.types)?;
        }
    }
    if let Some(g) = gpus.first() {
        g.ctx().make_current()?;
    }
    let memory = SetupMemory {
        initialization: largest_drop(&before_init, &after_init),
        user_allocated: largest_drop(&after_init, &after_buffers),
    };
    Ok((gpus, memory))
}

/// Free memory of each context's device, in bytes.
pub fn free_memory(ctxs: &[Context]) -> Result<Vec<u64>> {
    let mut out = Vec::with_capacity(ctxs.len());
    for &c in ctxs {
        c.make_current()?;
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
