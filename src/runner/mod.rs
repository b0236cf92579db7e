//! A whole benchmark run: libraries, devices, communicators and buffers, the per-thread test
//! loops over datatype → op → root → cycle → size, the footer and the exit code.

pub mod discover;
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
mod plan;
pub mod setup;
#[cfg(feature = "test-hooks")]
mod stall;
mod sync;
mod threads;
mod validate;
mod version;
mod watch;

pub use discover::Discovered;
pub use measure::{Engine, Shape, Worker};
pub use setup::{BufferSizes, Gpu};
pub use sync::ThreadGroup;

use crate::bootstrap::{self, Bootstrap};
use crate::collective::Collective;
use crate::error::{Error, Result, code};
use crate::gpu::kernel_image::KernelImage;
use crate::options::Options;
use crate::report::{RunInfo, Step, Summary, table};
use output::Output;
use setup::GpuPlan;
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

fn run_with(
    opts: &Options,
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    out: &mut Output,
) -> Result<u8> {
    let found = discover::discover(opts, boot, out)?;
    let opts = &found.options;
    let nccl = found.nccl;
    let nccl_version = found.nccl_version;
    let devices = &found.devices;
    let (nranks, first_rank, min_cc, global_cc, min_mem) = (
        found.nranks,
        found.first_rank,
        found.min_cc,
        found.global_cc,
        found.min_mem,
    );
    let group = boot.group();

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
    let plan = plan::loops(opts, coll, nranks, global_cc, lo, hi)?;

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
        cta_policy: found.cta_policy,
        sizes: plan::buffer_sizes(opts, hi),
        register: (found.register, hi as usize),
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
        let (mut gpus, memory) = setup::create_gpus(&gpu_plan, devices, first_rank)?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
