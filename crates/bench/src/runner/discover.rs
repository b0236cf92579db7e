//! Phase 2, discover: what the run has to work with. The CUDA driver and libnccl, and what the
//! loaded NCCL allows of the options (`version.rs`); the version line and the header; this
//! process' devices; every process' record, gathered by rank 0, which prints the device lines
//! from them and checks the launch before any communicator exists (`gather`, shared with
//! `--dry-run`); and the smallest compute capability and device memory over the job.

use super::output::Output;
use super::placement::{self, GpuRecord, ProcessRecord};
use super::version;
use crate::bootstrap::{Bootstrap, Reduce};
use crate::error::{Error, Result};
use crate::gpu::Register;
use crate::gpu::driver::{self, DeviceProps};
use crate::gpu::nccl::Nccl;
use crate::options::{Options, fingerprint};
use crate::report::{DeviceInfo, table};

/// One of this process' devices as probed: its ordinal and properties, read before anything is
/// created on it.
pub struct ProbedDevice {
    /// CUDA ordinal.
    pub ordinal: i64,
    /// Properties.
    pub props: DeviceProps,
}

/// Reads the properties of devices `base .. base + n`; fails like nccl-tests when there are too
/// few devices.
pub fn devices(base: i64, n: i64) -> Result<Vec<ProbedDevice>> {
    let found = driver::device_count()?;
    if base + n > found {
        return Err(Error::TooFewGpus {
            requested: base + n,
            found,
        });
    }
    (base..base + n)
        .map(|ordinal| {
            Ok(ProbedDevice {
                ordinal,
                props: driver::device_props(ordinal)?,
            })
        })
        .collect()
}

/// The discover phase's result, everything the later phases work with: libnccl and what it
/// allows, this process' probed devices and ranks, and the job-wide minima.
pub(super) struct Inventory {
    /// libnccl.
    pub nccl: &'static Nccl,
    /// Its version code (22803 for 2.28.3).
    pub nccl_version: i32,
    /// The options, with the datatypes the loaded NCCL has (`-d all` without fp8 before 2.24).
    pub options: Options,
    /// `-R` as the loaded NCCL supports it.
    pub register: Register,
    /// `-x` as the loaded NCCL supports it.
    pub cta_policy: Option<i64>,
    /// This process' devices, one per NCCL rank from `first_rank` on.
    pub devices: Vec<ProbedDevice>,
    /// Communicator size: the ranks of this process' split group.
    pub nranks: usize,
    /// This process' first NCCL rank in its communicator.
    pub first_rank: usize,
    /// The smallest compute capability of this process' devices.
    pub min_cc: (i32, i32),
    /// The smallest compute capability of every process' devices.
    pub global_cc: (i32, i32),
    /// The smallest device memory of every process' devices, in bytes.
    pub min_mem: u64,
    /// The device lines' contents, every rank's (world rank 0; empty elsewhere).
    pub device_infos: Vec<DeviceInfo>,
    /// Every process' record (world rank 0; empty elsewhere), for `--explain`'s rows.
    pub records: Vec<ProcessRecord>,
}

/// Runs the discover phase; prints the version line, the header and (world rank 0) the
/// device lines, and records the devices in the `-J` JSON document.
pub(super) fn discover(
    opts: &Options,
    boot: &dyn Bootstrap,
    out: &mut Output,
) -> Result<Inventory> {
    let program = out.info().program.clone();
    let (nccl, nccl_version, settings) = match libraries(opts) {
        Ok(found) => found,
        // Every process takes part in the agreement, this one with its problem: rank 0 says
        // each cause once for the job instead of every process its own line.
        Err(e) => {
            let agreed = gather(boot, &program, opts, None, Err::<(), _>(e), |_| Vec::new());
            return Err(agreed.err().unwrap_or_else(|| {
                Error::Internal("the launch was agreed for a process with a problem".into())
            }));
        }
    };
    for m in &settings.messages {
        crate::eline!("{m}");
    }
    let options = Options {
        types: settings.types,
        ..opts.clone()
    };
    let opts = &options;
    let per_process = opts.nthreads * opts.ngpus;
    // NCCL ranks count within the split group; device lines show world ranks;
    // NCCL rank = (group rank · threads + thread) · GPUs + GPU, as in nccl-tests.
    let group = boot.group();
    let nranks = group.size * per_process as usize;
    let first_rank = group.rank * per_process as usize;
    out.print(&table::version_line(nccl_version));
    out.print(&table::header(out.info()));

    let visible = driver::device_count()?;
    let forced = placement::parse_device(crate::environment::TESTS_DEVICE.get().as_deref())?;
    let mine = placement::place(boot.local_rank(), per_process, Some(visible), forced)
        .and_then(|p| devices(p.base, per_process));
    let (devices, records) = gather(boot, &program, opts, Some(visible), mine, |ds| {
        ds.iter().map(gpu_record).collect()
    })?;
    let infos: Vec<DeviceInfo> = records
        .iter()
        .flat_map(|r| r.device_infos(per_process))
        .collect();
    devices_and_rows(opts, &infos, &records, nccl_version, out)?;

    let min_cc = devices.iter().map(|d| d.props.cc).min().unwrap_or((0, 0));
    // fp8 needs every GPU of every process at compute capability 9.0 or above.
    let cc_code = f64::from(min_cc.0 * 100 + min_cc.1);
    let global_cc = boot.allreduce(cc_code, Reduce::Min)? as i32;
    let min_mem = devices.iter().map(|d| d.props.total_mem).min().unwrap_or(0);
    let min_mem = boot.allreduce(min_mem as f64, Reduce::Min)? as u64;
    Ok(Inventory {
        nccl,
        nccl_version,
        register: settings.register,
        cta_policy: settings.cta_policy,
        options,
        devices,
        nranks,
        first_rank,
        min_cc,
        global_cc: (global_cc / 100, global_cc % 100),
        min_mem,
        device_infos: infos,
        records,
    })
}

/// The CUDA driver initialised, libnccl loaded, its version and what it allows of the options.
fn libraries(opts: &Options) -> Result<(&'static Nccl, i32, version::Settings)> {
    driver::init()?;
    crate::host::trace("CUDA driver initialised");
    let nccl = Nccl::load()?;
    crate::host::trace("libnccl loaded");
    let nccl_version = nccl.version()?;
    let settings = version::settings(opts, nccl_version)?;
    Ok((nccl, nccl_version, settings))
}

/// The device lines, recorded in the JSON document too, and `--explain`'s rows kept (world
/// rank 0).
fn devices_and_rows(
    opts: &Options,
    infos: &[DeviceInfo],
    records: &[ProcessRecord],
    nccl_version: i32,
    out: &mut Output,
) -> Result<()> {
    for d in infos {
        out.print(&table::device_line(d));
    }
    out.start_json(infos, nccl_version);
    if let Some(x) = &opts.explain
        && out.printing()
    {
        out.explain_rows(super::explanation::Rows::new(
            x,
            infos,
            records,
            nccl_version,
        )?);
    }
    Ok(())
}

/// The head of a later section of a `--collectives` run, as [`discover`] printed the first's:
/// the version line, the header and the device lines (in its JSON document too), and its own
/// `--explain` rows.
pub(super) fn print_head(found: &Inventory, out: &mut Output) -> Result<()> {
    out.print(&table::version_line(found.nccl_version));
    out.print(&table::header(out.info()));
    devices_and_rows(
        &found.options,
        &found.device_infos,
        &found.records,
        found.nccl_version,
        out,
    )
}

/// A device as rank 0 sees it: identified by its PCI id.
fn gpu_record(d: &ProbedDevice) -> GpuRecord {
    let [domain, bus, device] = [d.props.pci.0, d.props.pci.1, d.props.pci.2];
    GpuRecord {
        device: d.ordinal,
        identity: Some(format!("{domain:04x}:{bus:02x}:{device:02x}")),
        pci: [domain, bus, device],
        name: d.props.name.clone(),
    }
}

/// Describes this process to rank 0 (`visible` GPUs, and the GPUs of `mine` or why it has
/// none) and learns the verdict on the whole launch ([`placement::agree`]); every process takes
/// part either way, so that none is left waiting. Returns `mine` with the records (all of them
/// at world rank 0, none elsewhere); this process' own problem comes first, then the launch's.
pub(super) fn gather<T>(
    boot: &dyn Bootstrap,
    program: &str,
    opts: &Options,
    visible: Option<i64>,
    mine: Result<T>,
    gpus: impl FnOnce(&T) -> Vec<GpuRecord>,
) -> Result<(T, Vec<ProcessRecord>)> {
    let per_process = opts.nthreads * opts.ngpus;
    let mut me = ProcessRecord::of_this_process(boot, visible, mine.as_ref().map(gpus));
    if let (Err(Error::TooFewGpus { .. }), Some(visible)) = (&mine, visible) {
        let hint =
            placement::too_few_hint(boot.local_rank(), boot.local_size(), per_process, visible);
        match boot.world_size() {
            // A process alone says it with its own error; in a job, rank 0 says it once.
            1 => crate::eline!("{}: {hint}", crate::host::short_hostname()),
            _ => me.hint = Some(hint),
        }
    }
    let verdict = placement::agree(boot, &me, &fingerprint::of_run(program, opts), per_process);
    // This process' own failure went into the agreement: where it ended with every process
    // knowing (Error::Agreed), so does this one; as rank 0 said it for the job where it did.
    // Where the agreement itself failed (a process lost), this process says its own.
    match (mine, verdict) {
        (Ok(m), Ok(v)) => Ok((m, v)),
        (_, Err(said @ Error::Agreed(_))) if said.said() => Err(said),
        (Err(e), Err(Error::Agreed(_))) => Err(Error::Agreed(Box::new(e))),
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
    }
}
