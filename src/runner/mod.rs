//! A whole benchmark run: libraries, devices, communicators and buffers, the per-thread test
//! loops over datatype → op → root → cycle → size, the footer and the exit code.

mod dry_run;
mod fault;
mod graph;
pub mod interrupt;
mod measure;
mod op;
#[allow(unsafe_code)]
mod output;
mod per_iter;
mod placement;
pub mod setup;
#[cfg(feature = "test-hooks")]
mod stall;
mod sync;
mod threads;
mod validate;
mod watch;

pub use measure::{Engine, Shape, Worker};
pub use setup::{BufferSizes, Discovered, Gpu};
pub use sync::ThreadGroup;

use crate::bootstrap::{self, Bootstrap, Reduce};
use crate::collective::Collective;
use crate::error::{Error, Result, code};
use crate::gpu::kernel_image::KernelImage;
use crate::gpu::{driver, nccl::Nccl};
use crate::options::{Options, Roots};
use crate::report::{self, RunInfo, Step, Summary, table};
use crate::types::{DataType, RedOp};
use output::Output;
use setup::{GpuPlan, Register};
use std::ops::Not;
use threads::{ThreadGpus, run_threads};

/// The parameters shown in the header, from the options (sizes before the memory clamp).
pub fn run_info(o: &Options, program: &str) -> RunInfo {
    RunInfo {
        program: program.to_string(),
        nthreads: o.nthreads,
        ngpus: o.ngpus,
        min_bytes: o.min_bytes,
        max_bytes: o.max_bytes,
        step: if o.step_factor > 1 {
            Step::Factor(o.step_factor)
        } else {
            Step::Bytes(o.step_bytes)
        },
        warmup_iters: o.warmup_iters,
        iters: o.iters,
        agg_iters: o.agg_iters,
        check: o.check,
        graph: o.graph.number(),
        unalign: o.unalign,
        blocking: o.blocking.number(),
        per_iter: o.per_iter,
        per_iter_skip: o.per_iter_skip,
        parallel_init: o.parallel_init,
        report_cputime: o.report_cputime,
        report_timestamps: o.report_timestamps,
    }
}

/// What the per-thread loops iterate over.
struct Plan {
    types: Vec<DataType>,
    ops: Vec<RedOp>,
    roots: Vec<usize>,
    sizes: Vec<u64>,
    ladder: Vec<u64>,
    /// `-d all` / `-o all`: a combination the loaded NCCL rejects is skipped, not fatal.
    skippable: bool,
}

fn plan(
    o: &Options,
    coll: &dyn Collective,
    nranks: usize,
    min_cc: (i32, i32),
    lo: u64,
    hi: u64,
) -> Result<Plan> {
    coll.check_shape(nranks, lo, hi)?;
    let mut types = o.types.clone();
    if o.all_types && min_cc < (9, 0) {
        types.retain(|t| !t.is_fp8());
    }
    let loops_ops = coll.op_column().loops();
    let ops = if loops_ops {
        o.ops.clone()
    } else {
        vec![RedOp::Sum]
    };
    let roots = if coll.rooted() {
        roots(o.roots, nranks)?
    } else {
        vec![0]
    };
    Ok(Plan {
        types,
        ops,
        roots,
        sizes: crate::sweep::sizes(lo, hi, o.step_bytes, o.step_factor),
        ladder: crate::sweep::warmup_sizes(lo, hi),
        // Only a loop over several types or ops can skip: an explicit combination that NCCL
        // rejects stays an error.
        skippable: o.all_types || (loops_ops && o.ops.len() > 1),
    })
}

/// The roots a rooted collective runs with: `-r R` (R must be a rank of the communicator) or
/// every rank in order (`-r -1` / `-r all`).
fn roots(r: Roots, nranks: usize) -> Result<Vec<usize>> {
    match r {
        Roots::All => Ok((0..nranks).collect()),
        Roots::One(r) if r >= 0 && (r as usize) < nranks => Ok(vec![r as usize]),
        Roots::One(r) => Err(Error::Usage(format!(
            "invalid root {r} for -r (--root): the communicator has {nranks} rank{}, so the root must be {}, or -1 (or all) for every root in turn",
            if nranks == 1 { "" } else { "s" },
            match nranks {
                1 => "0".to_string(),
                n => format!("0..{}", n - 1),
            }
        ))),
    }
}

/// Runs the benchmark (or, with `--dry-run`, prints its plan); returns the exit code of a run
/// that reached its footer. Bootstraps first, whatever the launcher; world rank 0 then creates
/// the `-J` file (a path that cannot be written ends the run before any GPU work). A run that
/// fails after that lets the bootstrap end the job (MPI aborts it; TCP tells the others).
pub fn run(opts: &Options, coll: &dyn Collective, program: &str, args: Vec<String>) -> Result<u8> {
    fault::init(program)?;
    let boot = bootstrap::connect(&bootstrap::fingerprint::Fingerprint::of_run(program, opts))?;
    // A panic (reported by the panic hook) still ends the job as a failure does.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        start(opts, coll, program, &*boot, args)
    }))
    .unwrap_or(Err(Error::Panicked));
    match result {
        Ok(code) => {
            boot.finalize()?;
            Ok(code)
        }
        Err(e) => {
            // NCCL may notice a dead peer (or time out waiting for it) before the watchdog
            // does: give the bootstrap a moment to name the process that left.
            if e.may_follow_a_lost_peer()
                && let Some(lost) = boot.lost_peer(LOST_PEER_WAIT)
            {
                boot.fail(&lost);
                return Err(Error::AfterLostPeer {
                    failure: Box::new(e),
                    lost: Box::new(lost),
                });
            }
            boot.fail(&e);
            Err(e)
        }
    }
}

/// How long a process whose NCCL call failed waits to learn whether another process left the
/// run (rank 0 notices within 100 ms and tells the others).
const LOST_PEER_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

fn start(
    opts: &Options,
    coll: &dyn Collective,
    program: &str,
    boot: &dyn Bootstrap,
    args: Vec<String>,
) -> Result<u8> {
    let output = opts.output_file.as_ref().filter(|_| boot.world_rank() == 0);
    if opts.dry_run {
        if let Some(o) = output {
            output::check_target(&o.path)?;
        }
        return watch::guard(boot, None, || {
            #[cfg(feature = "test-hooks")]
            stall::pause(boot, program);
            dry_run::run(opts, coll, program, boot)
        });
    }
    let target = match output {
        Some(o) => {
            let (target, line) = output::create_target(o, &run_info(opts, program), args)?;
            print!("{line}");
            Some(target)
        }
        None => None,
    };
    let json = match &target {
        Some(output::Target::Json(j)) => Some(j.clone()),
        _ => None,
    };
    // A lost process or a stop signal ends the run from the watchdog, JSON closed.
    watch::guard(boot, json, || {
        #[cfg(feature = "test-hooks")]
        stall::pause(boot, program);
        run_gpus(opts, coll, program, boot, target)
    })
}

fn run_gpus(
    opts: &Options,
    coll: &dyn Collective,
    program: &str,
    boot: &dyn Bootstrap,
    target: Option<output::Target>,
) -> Result<u8> {
    interrupt::install();
    let printing = boot.world_rank() == 0;
    let mut out = Output::new(run_info(opts, program), printing, target);
    let result = run_with(opts, coll, boot, &mut out);
    if result.is_err() {
        out.abort();
    }
    result
}

/// `-R`, `-x`, `-D`, `-V` and `-d` as the loaded NCCL supports them.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    register: Register,
    cta_policy: Option<i64>,
    /// The datatypes to run: `-d all` without fp8 before NCCL 2.24.
    types: Vec<DataType>,
    /// Upstream's messages for what was changed or ignored (stderr, every process).
    messages: Vec<String>,
}

/// Applies nccl-tests' version rules (spec §2.2, §2.3): `-D` and `-V` need NCCL 2.28 (exit
/// 255), `-R` is ignored before 2.19 and `-R 2` falls back to local registration before 2.27,
/// `-x` is ignored before 2.27 and values above 1 before 2.28; `-d all` has no fp8 types before
/// 2.24 and an explicit fp8 type is refused there (exit 5; NCCL would reject it). The messages
/// are upstream's; they go to stderr rather than stdout, where their length would make them
/// look like table rows.
fn version_settings(o: &Options, version: i32) -> Result<Settings> {
    if o.device_impl.is_some() && version < 22800 {
        return Err(Error::Usage(
            "Option -D (device implementation) requires NCCL >= 2.28.0".into(),
        ));
    }
    if o.device_cta_count.is_some() && version < 22800 {
        return Err(Error::Usage(
            "Option -V (device CTA count) requires NCCL >= 2.28.0".into(),
        ));
    }
    let fp8 = version >= 22400;
    if !fp8
        && !o.all_types
        && let Some(t) = o.types.iter().find(|t| t.is_fp8())
    {
        return Err(Error::Unsupported(format!(
            "-d {} needs NCCL 2.24 or later, but the loaded NCCL is {}",
            t.name(),
            version_name(version)
        )));
    }
    let types = o
        .types
        .iter()
        .copied()
        .filter(|t| fp8 || !t.is_fp8())
        .collect();
    let mut messages = Vec::new();
    let register = match o.register {
        Register::Off => Register::Off,
        _ if version < 21900 => {
            messages
                .push("Option -R (register) is not supported before NCCL 2.19. Ignoring".into());
            Register::Off
        }
        Register::Symmetric if version >= 22700 => Register::Symmetric,
        Register::Symmetric => {
            messages.push(
                "Option -R 2 (symmetric) is not supported before NCCL 2.27. Defaulting to local registration"
                    .into(),
            );
            Register::Local
        }
        Register::Local => Register::Local,
    };
    let cta_policy = match o.cta_policy {
        Some(_) if version < 22700 => {
            messages
                .push("Option -x (cta_policy) is not supported before NCCL 2.27. Ignoring".into());
            None
        }
        Some(p) if p > 1 && version < 22800 => {
            messages.push(format!(
                "Option -x (cta_policy) {p} is not supported before NCCL 2.28. Ignoring"
            ));
            None
        }
        p => p,
    };
    Ok(Settings {
        register,
        cta_policy,
        types,
        messages,
    })
}

/// `2.19.3` for the version code 21903.
fn version_name(code: i32) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

/// Per-GPU buffer sizes for a largest size of `hi` bytes.
fn buffer_sizes(opts: &Options, hi: u64) -> BufferSizes {
    BufferSizes {
        data: (hi + 8 * opts.unalign as u64) as usize,
        expected: if opts.check > 0 { hi as usize } else { 0 },
    }
}

/// This process' description for rank 0, and its devices unless it has a problem.
fn describe_process(
    boot: &dyn Bootstrap,
    per_process: i64,
    visible: Option<i64>,
    devices: &Result<Vec<setup::Discovered>>,
) -> placement::ProcessRecord {
    let gpus = match devices {
        Ok(ds) => ds
            .iter()
            .map(|d| placement::GpuRecord {
                device: d.ordinal,
                identity: Some(format!(
                    "{:04x}:{:02x}:{:02x}",
                    d.props.pci.0, d.props.pci.1, d.props.pci.2
                )),
                pci: [d.props.pci.0, d.props.pci.1, d.props.pci.2],
                name: d.props.name.clone(),
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    if let (Err(Error::TooFewGpus { .. }), Some(v)) = (devices, visible) {
        eprintln!(
            "{}: {}",
            crate::host::short_hostname(),
            placement::too_few_hint(boot.local_rank(), boot.local_size(), per_process, v)
        );
    }
    placement::ProcessRecord {
        world_rank: boot.world_rank(),
        group: boot.group().color,
        host: crate::host::short_hostname(),
        host_hash: bootstrap::local::this_host_hash(),
        pid: std::process::id(),
        local_rank: boot.local_rank(),
        visible,
        gpus,
        problem: devices.as_ref().err().map(|e| e.to_string()),
    }
}

fn run_with(
    opts: &Options,
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    out: &mut Output,
) -> Result<u8> {
    driver::init()?;
    crate::host::trace("CUDA driver initialised");
    let nccl = Nccl::load()?;
    crate::host::trace("libnccl loaded");
    let nccl_version = nccl.version()?;
    let settings = &version_settings(opts, nccl_version)?;
    for m in &settings.messages {
        eprintln!("{m}");
    }
    let narrowed = Options {
        types: settings.types.clone(),
        ..opts.clone()
    };
    let opts = &narrowed;
    let per_process = opts.nthreads * opts.ngpus;
    // NCCL ranks count within the split group; device lines show world ranks (spec §3.3, §6.2).
    let group = boot.group();
    let nranks = group.size * per_process as usize;
    let first_rank = group.rank * per_process as usize;
    out.print(&table::version_line(nccl_version));
    out.print(&table::header(out.info()));

    let visible = driver::device_count()?;
    let forced = placement::parse_device(crate::environment::TESTS_DEVICE.get().as_deref())?;
    let devices = placement::place(boot.local_rank(), per_process, Some(visible), forced)
        .and_then(|p| setup::discover(p.base, per_process));
    let me = describe_process(boot, per_process, Some(visible), &devices);
    let run = bootstrap::fingerprint::Fingerprint::of_run(&out.info().program, opts);
    let verdict = placement::agree(boot, &me, &run, per_process);
    let devices = devices?;
    let records = verdict?;
    let infos: Vec<report::DeviceInfo> = records
        .iter()
        .flat_map(|r| r.device_infos(per_process))
        .collect();
    for d in &infos {
        out.print(&table::device_line(d));
    }
    out.start_json(&infos, nccl_version);
    let min_cc = devices.iter().map(|d| d.props.cc).min().unwrap_or((0, 0));
    // fp8 needs every GPU of every process at compute capability 9.0 or above.
    let cc_code = f64::from(min_cc.0 * 100 + min_cc.1);
    let global_cc = boot.allreduce(cc_code, Reduce::Min)? as i32;
    let global_cc = (global_cc / 100, global_cc % 100);
    let min_mem = devices.iter().map(|d| d.props.total_mem).min().unwrap_or(0);
    let min_mem = boot.allreduce(min_mem as f64, Reduce::Min)? as u64;

    let (lo, hi, reduced) =
        crate::sweep::clamp(opts.min_bytes, opts.max_bytes, min_mem, opts.check > 0);
    if reduced {
        out.print(&table::memory_clamp_lines(hi));
    }
    let kernels = match opts.check > 0 {
        true => Some(KernelImage::start(
            min_cc,
            opts.types.clone(),
            boot.world_rank() == 0,
        )),
        false => None,
    };
    let plan = plan(opts, coll, nranks, global_cc, lo, hi)?;

    // The first process of each group creates the id; the bootstrap hands it to its group.
    let mut id = crate::gpu::nccl::UniqueId { internal: [0; 128] };
    if group.rank == 0 {
        id = nccl.unique_id()?;
    }
    let mut bytes: [u8; 128] = id.internal.map(|c| c as u8);
    boot.broadcast_id(&mut bytes)?;
    id.internal = bytes.map(|b| b as std::ffi::c_char);
    boot.barrier()?;
    crate::host::trace("devices discovered");

    let gpu_plan = GpuPlan {
        nccl,
        id,
        nranks,
        nccl_version,
        cta_policy: settings.cta_policy,
        sizes: buffer_sizes(opts, hi),
        register: (settings.register, hi as usize),
        null_stream: opts.stream_null,
        kernels: kernels.as_ref(),
        types: &plan.types,
        measure_memory: opts.memory_report,
    };
    let per_thread = opts.ngpus as usize;
    let starts: Vec<ThreadGpus> = if opts.parallel_init {
        devices
            .chunks(per_thread)
            .enumerate()
            .map(|(t, d)| ThreadGpus::Init(d, first_rank + t * per_thread))
            .collect()
    } else {
        let (mut gpus, memory) = setup::create_gpus(&gpu_plan, &devices, first_rank)?;
        crate::host::trace("communicators created, buffers allocated, kernels loaded");
        let mut starts = Vec::new();
        let mut memory = Some(memory);
        while !gpus.is_empty() {
            let rest = gpus.split_off(per_thread.min(gpus.len()));
            starts.push(ThreadGpus::Ready(gpus, memory.take()));
            gpus = rest;
        }
        starts
    };
    out.print(&table::table_header(out.info()));

    let group = ThreadGroup::new(opts.nthreads as usize, boot);
    let engine = Engine {
        opts,
        coll,
        nccl,
        group: &group,
        nranks,
        max_bytes: hi,
        world_size: boot.world_size(),
    };
    let (oob, gpus, memory) = run_threads(&engine, &plan, &gpu_plan, starts, out)?;
    crate::host::trace("all measurements done");

    let avg = out.average_busbw();
    let min_bw_ok = min_bw_verdict(avg, crate::environment::TESTS_MIN_BW.get().as_deref());
    let summary = Summary {
        oob_errors: oob,
        avg_busbw: avg,
        min_bw_ok,
        last_error: nccl.last_error(),
        memory_report: memory.map(|[a, b, c]| table::memory_report(a, b, c)),
    };
    crate::gpu::rank::destroy_all(gpus)?;
    out.finish(&summary);
    crate::host::trace("teardown done");
    Ok(final_code(oob, min_bw_ok))
}

/// The `NCCL_TESTS_MIN_BW` verdict on the average bus bandwidth: `None` when the variable is
/// unset or blank, else whether the average is not below 0.9 × its value (C `atof`). nccl-tests
/// checks `avg < 0.9 × min`, so a NaN average (no rows) passes.
fn min_bw_verdict(avg: f64, min_bw: Option<&str>) -> Option<bool> {
    min_bw
        .filter(|v| !v.trim().is_empty())
        .map(|v| (avg < 0.9 * crate::cnum::atof(v)).not())
}

/// The exit code of a run that reached its footer: 7 with wrong data or a failed
/// `NCCL_TESTS_MIN_BW` check, else 0.
fn final_code(oob_errors: u64, min_bw_ok: Option<bool>) -> u8 {
    if oob_errors > 0 || min_bw_ok == Some(false) {
        code::NUM_RESULTS
    } else {
        code::OK
    }
}

/// The op column of a row.
fn label(coll: &dyn Collective, op: RedOp) -> &'static str {
    coll.op_column().label(op)
}

/// The comment printed instead of the rows of a combination the loaded NCCL rejects (`-d all`,
/// `-o all`): names the datatype (and the op where it is looped), never the words `bandwidth`
/// or `FAILED`.
fn skip_line(coll: &dyn Collective, dt: DataType, op: RedOp) -> String {
    let what = if coll.op_column().loops() {
        format!("{} {}", dt.name(), op.name())
    } else {
        dt.name().to_string()
    };
    format!("# Skipping {what}: the loaded NCCL rejects this combination (invalid argument)\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{AllGather, AllReduce};

    #[test]
    fn min_bw_fails_below_ninety_percent_with_exit_7() {
        assert_eq!(min_bw_verdict(10.0, None), None);
        assert_eq!(min_bw_verdict(10.0, Some("  ")), None);
        assert_eq!(min_bw_verdict(90.0, Some("100")), Some(true));
        assert_eq!(min_bw_verdict(89.99, Some("100")), Some(false));
        assert_eq!(min_bw_verdict(5.0, Some("100GB/s")), Some(false));
        assert_eq!(min_bw_verdict(0.0, Some("abc")), Some(true));
        assert_eq!(min_bw_verdict(f64::NAN, Some("100")), Some(true));
        assert_eq!(final_code(0, None), 0);
        assert_eq!(final_code(0, Some(true)), 0);
        assert_eq!(final_code(0, Some(false)), 7);
        assert_eq!(final_code(2, Some(true)), 7);
        let s = Summary {
            oob_errors: 0,
            avg_busbw: 89.0,
            min_bw_ok: min_bw_verdict(89.0, Some("100")),
            last_error: String::new(),
            memory_report: None,
        };
        assert!(
            table::footer(&s, "all_reduce_perf").contains("# Avg bus bandwidth    : 89 FAILED\n")
        );
    }

    #[test]
    fn version_rules_of_registration_cta_policy_and_device_options() {
        let o = |f: fn(&mut Options)| {
            let mut o = Options::default();
            f(&mut o);
            o
        };
        let sym = o(|o| o.register = Register::Symmetric);
        let s = version_settings(&sym, 22803).unwrap();
        assert_eq!((s.register, s.messages.len()), (Register::Symmetric, 0));
        let s = version_settings(&sym, 22605).unwrap();
        assert_eq!(s.register, Register::Local);
        assert_eq!(
            s.messages,
            [
                "Option -R 2 (symmetric) is not supported before NCCL 2.27. Defaulting to local registration"
            ]
        );
        assert_eq!(
            version_settings(&o(|o| o.register = Register::Local), 21900)
                .unwrap()
                .register,
            Register::Local
        );
        assert_eq!(
            version_settings(&Options::default(), 22803)
                .unwrap()
                .register,
            Register::Off
        );
        let zero = o(|o| o.cta_policy = Some(2));
        assert_eq!(version_settings(&zero, 22803).unwrap().cta_policy, Some(2));
        let s = version_settings(&zero, 22703).unwrap();
        assert_eq!(s.cta_policy, None);
        assert_eq!(
            s.messages,
            ["Option -x (cta_policy) 2 is not supported before NCCL 2.28. Ignoring"]
        );
        let eff = o(|o| o.cta_policy = Some(1));
        assert_eq!(version_settings(&eff, 22703).unwrap().cta_policy, Some(1));
        assert_eq!(version_settings(&eff, 22605).unwrap().cta_policy, None);
        let e = version_settings(&o(|o| o.device_impl = Some(0)), 22703).unwrap_err();
        assert_eq!(e.exit_code(), 255);
        assert_eq!(
            e.to_string(),
            "Option -D (device implementation) requires NCCL >= 2.28.0"
        );
        let e = version_settings(&o(|o| o.device_cta_count = Some(16)), 22703).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Option -V (device CTA count) requires NCCL >= 2.28.0"
        );
        assert!(version_settings(&o(|o| o.device_cta_count = Some(16)), 22800).is_ok());
    }

    #[test]
    fn version_rules_before_nccl_2_19_and_2_24() {
        let mut o = Options {
            register: Register::Symmetric,
            ..Options::default()
        };
        let s = version_settings(&o, 21701).unwrap();
        assert_eq!(s.register, Register::Off);
        assert_eq!(
            s.messages,
            ["Option -R (register) is not supported before NCCL 2.19. Ignoring"]
        );
        o.register = Register::Local;
        assert_eq!(version_settings(&o, 21805).unwrap().register, Register::Off);
        assert_eq!(
            version_settings(&o, 21903).unwrap().register,
            Register::Local
        );
        // -d all: fp8 only from 2.24 on.
        let all = Options {
            types: DataType::ALL.to_vec(),
            all_types: true,
            ..Options::default()
        };
        assert_eq!(version_settings(&all, 22304).unwrap().types.len(), 10);
        assert_eq!(version_settings(&all, 22400).unwrap().types.len(), 12);
        // An explicit fp8 type: refused before 2.24 (exit 5), kept after.
        let f8 = Options {
            types: vec![DataType::F8e5m2],
            ..Options::default()
        };
        let e = version_settings(&f8, 21701).unwrap_err();
        assert_eq!(e.exit_code(), 5);
        assert_eq!(
            e.to_string(),
            "-d f8e5m2 needs NCCL 2.24 or later, but the loaded NCCL is 2.17.1"
        );
        assert_eq!(
            version_settings(&f8, 22803).unwrap().types,
            [DataType::F8e5m2]
        );
        assert_eq!(version_name(22803), "2.28.3");
    }

    #[test]
    fn plan_filters_fp8_below_sm90_and_keeps_explicit_types() {
        let mut o = Options {
            types: DataType::ALL.to_vec(),
            all_types: true,
            ..Options::default()
        };
        let p = plan(&o, &AllReduce, 1, (8, 0), 8, 8).unwrap();
        assert_eq!(p.types.len(), 10);
        assert!(p.skippable);
        let p = plan(&o, &AllReduce, 1, (9, 0), 8, 8).unwrap();
        assert_eq!(p.types.len(), 12);
        o.types = vec![DataType::F8e4m3];
        o.all_types = false;
        let p = plan(&o, &AllReduce, 1, (8, 0), 8, 8).unwrap();
        assert_eq!(p.types, vec![DataType::F8e4m3]);
        assert!(!p.skippable);
    }

    #[test]
    fn non_reductions_run_once_and_print_none() {
        let o = Options {
            ops: RedOp::ALL.to_vec(),
            ..Options::default()
        };
        let p = plan(&o, &AllGather, 4, (9, 0), 1 << 20, 4 << 20).unwrap();
        assert_eq!(p.ops.len(), 1);
        assert_eq!(p.roots, vec![0]);
        assert_eq!(p.sizes, vec![1 << 20, 2 << 20, 3 << 20, 4 << 20]);
        assert_eq!(label(&AllGather, RedOp::Max), "none");
        assert_eq!(label(&AllReduce, RedOp::Max), "max");
    }

    #[test]
    fn roots_of_rooted_collectives() {
        use crate::collective::{Broadcast, Gather, Reduce, Scatter};
        let mut o = Options::default();
        for coll in [&Broadcast as &dyn Collective, &Reduce, &Gather, &Scatter] {
            o.roots = Roots::One(2);
            assert_eq!(plan(&o, coll, 4, (9, 0), 8, 8).unwrap().roots, vec![2]);
            o.roots = Roots::All;
            assert_eq!(
                plan(&o, coll, 4, (9, 0), 8, 8).unwrap().roots,
                vec![0, 1, 2, 3]
            );
        }
        // Non-rooted collectives ignore -r (the root column prints -1).
        o.roots = Roots::One(7);
        assert_eq!(
            plan(&o, &AllReduce, 2, (9, 0), 8, 8).unwrap().roots,
            vec![0]
        );
    }

    #[test]
    fn a_root_outside_the_communicator_is_a_usage_error() {
        let o = Options {
            roots: Roots::One(4),
            ..Options::default()
        };
        let e = plan(&o, &crate::collective::Reduce, 4, (9, 0), 8, 8)
            .err()
            .unwrap();
        assert_eq!(e.exit_code(), 255);
        assert_eq!(
            e.to_string(),
            "invalid root 4 for -r (--root): the communicator has 4 ranks, so the root must be 0..3, or -1 (or all) for every root in turn"
        );
        let o = Options {
            roots: Roots::One(1),
            ..o
        };
        let e = plan(&o, &crate::collective::Gather, 1, (9, 0), 8, 8)
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("the communicator has 1 rank, so the root must be 0,"),
            "{e}"
        );
    }

    #[test]
    fn hypercube_needs_a_power_of_two_before_anything_runs() {
        use crate::collective::Hypercube;
        let o = Options::default();
        let e = plan(&o, &Hypercube, 6, (9, 0), 8, 8).err().unwrap();
        assert_eq!(e.exit_code(), 5);
        assert!(!e.on_stdout());
        let p = plan(&o, &Hypercube, 8, (9, 0), 8, 8).unwrap();
        assert_eq!((p.ops.len(), label(&Hypercube, p.ops[0])), (1, ""));
    }

    #[test]
    fn skipping_needs_a_loop_over_types_or_ops() {
        use crate::collective::{Broadcast, Hypercube, SendRecv};
        let all_ops = Options {
            ops: RedOp::ALL.to_vec(),
            ..Options::default()
        };
        let all_types = Options {
            types: DataType::ALL.to_vec(),
            all_types: true,
            ..Options::default()
        };
        let skippable =
            |o: &Options, c: &dyn Collective| plan(o, c, 2, (9, 0), 8, 8).unwrap().skippable;
        // -o all loops only where the op loop runs.
        assert!(skippable(&all_ops, &AllReduce));
        assert!(skippable(&all_ops, &SendRecv));
        assert!(!skippable(&all_ops, &Broadcast));
        assert!(!skippable(&all_ops, &Hypercube));
        // -d all loops everywhere.
        for c in [
            &AllReduce as &dyn Collective,
            &Broadcast,
            &SendRecv,
            &Hypercube,
        ] {
            assert!(skippable(&all_types, c), "{}", c.name());
            assert!(!skippable(&Options::default(), c), "{}", c.name());
        }
    }

    #[test]
    fn skip_lines_name_the_combination() {
        use crate::collective::{AllToAllV, Hypercube, SendRecv};
        let prod = skip_line(&AllReduce, DataType::F8e4m3, RedOp::Prod);
        assert_eq!(
            prod,
            "# Skipping f8e4m3 prod: the loaded NCCL rejects this combination (invalid argument)\n"
        );
        assert!(
            skip_line(&SendRecv, DataType::Half, RedOp::Avg).starts_with("# Skipping half avg: ")
        );
        for c in [
            &AllGather as &dyn Collective,
            &Hypercube,
            &AllToAllV::generated(1.0),
        ] {
            let l = skip_line(c, DataType::F8e5m2, RedOp::Max);
            assert!(l.starts_with("# Skipping f8e5m2: "), "{l}");
            assert!(!l.contains("bandwidth") && !l.contains("FAILED"));
        }
    }

    #[test]
    fn header_info_uses_unclamped_sizes() {
        let o = Options {
            step_factor: 2,
            ..Options::default()
        };
        let i = run_info(&o, "all_reduce_perf");
        assert_eq!(i.step, Step::Factor(2));
        assert_eq!(i.max_bytes, 32 << 20);
    }
}
