//! Phase 4, set up: the GPUs' resources. The group's NCCL id is made and shared, then each GPU
//! gets its communicator, stream, buffers and their registration (`-R`) and the validation
//! kernels, with the free-memory readings of `-M 1` between the steps; by the main thread
//! (`-p 0`) or, with `-p 1`, by each benchmark thread for its own GPUs (`ThreadGpus`). The GPU
//! layer's types tear them down when dropped (`gpu::rank`).

use super::discover::{Inventory, ProbedDevice};
use super::plan::Plan;
use super::roots;
use crate::bootstrap::Bootstrap;
use crate::error::Result;
use crate::gpu::driver;
use crate::gpu::kernel_image::KernelImage;
use crate::gpu::nccl::{Nccl, UniqueId};
use crate::gpu::{Communicator, Context, rank};
use crate::types::DataType;

pub use crate::gpu::{BufferSizes, Gpu, Register};

/// What a benchmark thread starts with.
pub(super) enum ThreadGpus<'d> {
    /// GPUs set up by the main thread (`-p 0`), with that setup's `-M` figures for thread 0.
    Ready(Vec<Gpu>, Option<SetupMemory>),
    /// Devices the thread sets up itself (`-p 1`), NCCL ranks from the given one on.
    Init(&'d [ProbedDevice], usize),
}

/// What the measure phase starts with: one start per benchmark thread, and what setting up
/// GPUs takes (for the threads that do it themselves).
pub(super) struct Ready<'a> {
    /// How GPUs are set up.
    pub gpu_plan: GpuPlan<'a>,
    /// Per thread, in thread order: its GPUs, or the devices it sets up.
    pub starts: Vec<ThreadGpus<'a>>,
}

/// Runs the set-up phase: the first process of each group creates the NCCL id and the bootstrap
/// hands it to the group; with `-p 0` this thread then sets up every GPU of the process.
pub(super) fn set_up<'a>(
    boot: &dyn Bootstrap,
    found: &'a Inventory,
    plan: &'a Plan,
) -> Result<Ready<'a>> {
    let opts = &found.options;
    let ids = make_ids(boot, found)?;
    boot.barrier()?;
    crate::host::trace("devices discovered");

    let gpu_plan = gpu_plan(found, plan, ids);
    let per_thread = opts.ngpus as usize;
    let first_rank = found.first_rank;
    let starts: Vec<ThreadGpus> = if opts.parallel_init {
        found
            .devices
            .chunks(per_thread)
            .enumerate()
            .map(|(t, d)| ThreadGpus::Init(d, first_rank + t * per_thread))
            .collect()
    } else {
        let (gpus, memory) = create_gpus(&gpu_plan, &found.devices, first_rank)?;
        crate::host::trace("communicators created, buffers allocated, kernels loaded");
        per_thread_starts(gpus, per_thread, Some(memory))
    };
    Ok(Ready { gpu_plan, starts })
}

/// The group's NCCL ids, made and shared: one, by the group's first process (`ncclCommInitRank`),
/// or several (`roots`), each by the process that holds its first rank.
fn make_ids(boot: &dyn Bootstrap, found: &Inventory) -> Result<Vec<UniqueId>> {
    let scalable = found.nccl.ncclCommInitRankScalable.is_some();
    let setting = crate::environment::INIT_ROOTS.get();
    let (count, note) = roots::count(found.nranks, setting.as_deref(), scalable)?;
    if let Some(n) = note.filter(|_| boot.world_rank() == 0) {
        crate::eline!("nccl-perf: note: {n}");
    }
    let to_id = |bytes: [u8; 128]| UniqueId {
        internal: bytes.map(|b| b as std::ffi::c_char),
    };
    if count == 1 {
        let mut bytes = [0u8; 128];
        if boot.group().rank == 0 {
            bytes = found.nccl.unique_id()?.internal.map(|c| c as u8);
        }
        boot.broadcast_id(&mut bytes)?;
        return Ok(vec![to_id(bytes)]);
    }
    let held = roots::held(found.first_rank, found.devices.len(), found.nranks, count);
    let mut mine = Vec::with_capacity(held.len());
    for (j, _) in held {
        mine.push((j as u32, found.nccl.unique_id()?.internal.map(|c| c as u8)));
    }
    let shared = boot.share_ids(&mine, count)?;
    crate::host::trace(&format!("{count} NCCL ids shared"));
    Ok(shared.into_iter().map(to_id).collect())
}

/// A later section of a `--collectives` run starts on the GPUs the first one set up (NCCL rank
/// order, communicators open, buffers allocated and registered, kernels loaded), handed to the
/// benchmark threads as `-p 0` hands them; nothing is created.
pub(super) fn reuse<'a>(found: &'a Inventory, plan: &'a Plan, gpus: Vec<Gpu>) -> Ready<'a> {
    Ready {
        gpu_plan: gpu_plan(found, plan, Vec::new()),
        starts: per_thread_starts(gpus, found.options.ngpus as usize, None),
    }
}

/// What setting up this process' GPUs takes, for the communicators of `ids`.
fn gpu_plan<'a>(found: &'a Inventory, plan: &'a Plan, ids: Vec<UniqueId>) -> GpuPlan<'a> {
    GpuPlan {
        nccl: found.nccl,
        ids,
        nranks: found.nranks,
        nccl_version: found.nccl_version,
        cta_policy: found.cta_policy,
        sizes: plan.buffers,
        register: (found.register, plan.max_bytes as usize),
        null_stream: found.options.stream_null,
        kernels: plan.kernels.as_ref(),
        types: &plan.loops.types,
        measure_memory: found.options.memory_report,
    }
}

/// `gpus` (rank order) cut into each thread's `per_thread`, the set-up's `-M` figures with
/// thread 0.
fn per_thread_starts<'d>(
    mut gpus: Vec<Gpu>,
    per_thread: usize,
    mut memory: Option<SetupMemory>,
) -> Vec<ThreadGpus<'d>> {
    let mut starts = Vec::new();
    while !gpus.is_empty() {
        let rest = gpus.split_off(per_thread.max(1).min(gpus.len()));
        starts.push(ThreadGpus::Ready(gpus, memory.take()));
        gpus = rest;
    }
    starts
}

/// Creates one communicator per device (ranks `first_rank ..`) inside one NCCL group, from the
/// group's `ids` (several: `ncclCommInitRankScalable`), with `CTAPolicy` set when `cta_policy`
/// is given (`-x`); returns each device's context with it.
pub fn init_comms(
    nccl: &'static Nccl,
    devices: &[ProbedDevice],
    ids: &[UniqueId],
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
        ids,
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
    /// The group's NCCL ids (one: `ncclCommInitRank`; several: `ncclCommInitRankScalable`).
    pub ids: Vec<UniqueId>,
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
    devices: &[ProbedDevice],
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
        &p.ids,
        p.nranks,
        first_rank,
        p.nccl_version,
        p.cta_policy,
    )?;
    crate::host::trace(&format!("communicators created ({} NCCL ids)", p.ids.len()));
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
