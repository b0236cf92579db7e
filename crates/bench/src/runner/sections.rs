//! `--collectives`: several benchmarks in one launch. The start (bootstrap, `-J` files,
//! watchdog) and discovery (CUDA, libnccl, devices) run once; every collective is planned before
//! any communicator exists, so a list with one that cannot run this job fails at once; the
//! first section sets up the GPUs (communicators, buffers sized for the largest size, which no
//! collective's buffers exceed, kernels), and each section then plans, measures and finishes on
//! them, printing exactly what its own program prints: head (version line, header, device
//! lines), table, footer. The GPUs are torn down after the last section; the exit code is the
//! worst of the sections'. With `--health`, `health.rs` sums the sections up after the last;
//! with `--health --locate`, locate runs once before that, on the first collective found slow.

use super::discover::{self, Inventory};
use super::output::Output;
use super::{finish, health, locate, plan, setup, threads};
use crate::bootstrap::{Bootstrap, Reduce};
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::options::Options;
use nccl_perf_explain::baseline::Baseline;
use nccl_perf_explain::health::{Check, Verdict};

/// The program name of each section: `program` itself for a run of one collective (as the
/// program alone prints it), else each benchmark's `<name>_perf`.
pub(super) fn names(opts: &Options, colls: &[&dyn Collective], program: &str) -> Vec<String> {
    match (colls, opts.collectives.is_empty()) {
        ([_], true) => vec![program.to_string()],
        _ => colls.iter().map(|c| format!("{}_perf", c.name())).collect(),
    }
}

/// Runs every section on the GPUs the first one sets up; `outs` has one report per collective,
/// the first already holding what discovery printed.
pub(super) fn run(
    opts: &Options,
    colls: &[&dyn Collective],
    boot: &dyn Bootstrap,
    outs: &mut [Output],
) -> Result<u8> {
    if colls.len() != outs.len() {
        return Err(Error::Internal(format!(
            "{} collectives but {} reports",
            colls.len(),
            outs.len()
        )));
    }
    let found = discover::discover(opts, boot, &mut outs[0])?;
    if let Some(l) = &found.options.locate {
        locate::check(l, found.nccl, found.nccl_version, boot)?;
    }
    // Every collective's shape, before any communicator exists.
    for coll in colls {
        plan::loops(
            &found.options,
            *coll,
            found.nranks,
            found.global_cc,
            found.options.min_bytes,
            found.options.min_bytes.max(found.options.max_bytes),
        )?;
    }
    // `--baseline`, read where the summary is made, before any GPU work.
    let baseline = match (&opts.health, boot.world_rank()) {
        (Some(h), 0) => health::baseline(h)?,
        _ => None,
    };
    let mut gpus: Option<Vec<Gpu>> = None;
    let mut worst = 0;
    let mut checks = Vec::new();
    let mut max_bytes = Vec::new();
    for (i, (coll, out)) in colls.iter().zip(outs.iter_mut()).enumerate() {
        if i > 0 {
            out.open();
            discover::print_head(&found, out)?;
        }
        if let Some(h) = opts.health.as_ref().filter(|_| out.printing()) {
            health::track(h, &found, &out.info().program, &checks, coll.name());
        }
        let (ended, bytes) = section(*coll, boot, &found, out, gpus.take(), baseline.as_ref())?;
        worst = worst.max(ended.code);
        gpus = Some(ended.gpus);
        checks.extend(ended.check);
        max_bytes.push(bytes);
    }
    let gpus = gpus.unwrap_or_default();
    if let Some(l) = &found.options.locate {
        let slow = Slow {
            colls,
            checks: &mut checks,
            outs,
            max_bytes: &max_bytes,
        };
        worst = worst.max(locate_slow(l, slow, boot, &found, &gpus)?);
    }
    crate::gpu::rank::destroy_all(gpus)?;
    crate::host::trace("teardown done");
    match (&opts.health, outs.last_mut()) {
        (Some(h), Some(out)) if out.printing() => {
            Ok(worst.max(health::conclude(h, &found, checks, out)))
        }
        _ => Ok(worst),
    }
}

/// The sections as `--locate` after them needs them.
struct Slow<'a, 'c> {
    colls: &'a [&'c dyn Collective],
    /// World rank 0's checks (`--health`), in the order run; empty elsewhere.
    checks: &'a mut [Check],
    outs: &'a [Output],
    /// Each section's buffer size.
    max_bytes: &'a [u64],
}

/// `--health --locate`: locate runs once, on the first collective found slow (world rank 0
/// decides; every process learns which through the bootstrap), on the GPUs the sections used;
/// its suspects go into that collective's check. Returns locate's exit code (0 when nothing
/// was slow).
fn locate_slow(
    l: &crate::options::LocateOptions,
    s: Slow,
    boot: &dyn Bootstrap,
    found: &Inventory,
    gpus: &[Gpu],
) -> Result<u8> {
    let names: Vec<&str> = s.colls.iter().map(|c| c.name()).collect();
    let mine = match (boot.world_rank(), first_slow(s.checks, &names)) {
        (0, Some(i)) => (i + 1) as f64,
        _ => 0.0,
    };
    let pick = boot.allreduce(mine, Reduce::Max)? as usize;
    let (Some(i), Some(gpu), Some(device)) =
        (pick.checked_sub(1), gpus.first(), found.devices.first())
    else {
        return Ok(0);
    };
    let (Some(coll), Some(out), Some(max_bytes)) =
        (s.colls.get(i), s.outs.get(i), s.max_bytes.get(i))
    else {
        return Err(Error::Internal(format!(
            "--locate: no section {i} to locate"
        )));
    };
    let located = locate::run_locate(&locate::Job {
        opts: &found.options,
        coll: *coll,
        nccl: found.nccl,
        boot,
        gpu,
        place: locate::Place::here(device.ordinal, device.props.pci),
        max_bytes: *max_bytes,
        job_busbw: out.busbw_at(l.size_for(*max_bytes)),
    })?;
    if let Some(c) = s.checks.iter_mut().find(|c| c.collective == coll.name()) {
        c.suspects = Some(located.suspects);
    }
    Ok(located.code)
}

/// The index in `names` (the sections' collectives) of the first collective `checks` finds slow.
fn first_slow(checks: &[Check], names: &[&str]) -> Option<usize> {
    let slow = checks.iter().find(|c| c.verdict == Verdict::Slow)?;
    names.iter().position(|n| *n == slow.collective)
}

/// One section after its head: plan, set up (the first) or reuse the GPUs, measure, finish;
/// returns its exit code and the GPUs, and its buffers' size.
fn section(
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    found: &Inventory,
    out: &mut Output,
    gpus: Option<Vec<Gpu>>,
    baseline: Option<&Baseline>,
) -> Result<(finish::Section, u64)> {
    let first = gpus.is_none();
    let plan = plan::plan_with(coll, boot, found, out, first)?;
    let ready = match gpus {
        None => setup::set_up(boot, found, &plan)?,
        Some(g) => setup::reuse(found, &plan, g),
    };
    let measured = threads::measure(coll, boot, found, &plan, ready, out)?;
    let threshold = found
        .options
        .health
        .as_ref()
        .map(|_| (health::threshold(&found.options), baseline));
    let max_bytes = plan.max_bytes;
    #[allow(unused_mut)]
    let mut ended = finish::finish_section(found.nccl, measured, out, threshold);
    #[cfg(feature = "test-hooks")]
    if let Some(c) = &mut ended.check
        && crate::environment::TEST_SLOW.get().as_deref() == Some(coll.name())
    {
        c.verdict = Verdict::Slow;
    }
    Ok((ended, max_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{AllGather, AllReduce, SendRecv};

    #[test]
    fn locate_goes_to_the_first_collective_found_slow() {
        let check = |name: &str, verdict| Check {
            collective: name.into(),
            verdict,
            ..Check::default()
        };
        let names = ["all_reduce", "all_gather", "sendrecv"];
        let checks = [
            check("all_reduce", Verdict::Unknown),
            check("all_gather", Verdict::Slow),
            check("sendrecv", Verdict::Slow),
        ];
        assert_eq!(first_slow(&checks, &names), Some(1));
        let fine = [
            check("all_reduce", Verdict::Ok),
            check("sendrecv", Verdict::Wrong),
        ];
        assert_eq!(first_slow(&fine, &names), None);
        // Not world rank 0: no checks, nothing picked here (rank 0's pick is shared).
        assert_eq!(first_slow(&[], &names), None);
    }

    #[test]
    fn sections_are_named_by_their_programs() {
        let mut o = Options::default();
        assert_eq!(
            names(&o, &[&AllReduce], "all_reduce_perf_mpi"),
            ["all_reduce_perf_mpi"]
        );
        o.collectives = vec!["all_gather", "sendrecv"];
        assert_eq!(
            names(&o, &[&AllGather, &SendRecv], "all_reduce_perf"),
            ["all_gather_perf", "sendrecv_perf"]
        );
        o.collectives = vec!["all_reduce"];
        assert_eq!(names(&o, &[&AllReduce], "x"), ["all_reduce_perf"]);
    }
}
