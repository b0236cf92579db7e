//! `--collectives`: several benchmarks in one launch. The start (bootstrap, `-J` files,
//! watchdog) and discovery (CUDA, libnccl, devices) run once; every collective is planned before
//! any communicator exists, so a list with one that cannot run this job fails at once; the
//! first section sets up the GPUs (communicators, buffers sized for the largest size, which no
//! collective's buffers exceed, kernels), and each section then plans, measures and finishes on
//! them, printing exactly what its own program prints: head (version line, header, device
//! lines), table, footer. The GPUs are torn down after the last section; the exit code is the
//! worst of the sections'. With `--health`, `health.rs` sums the sections up after the last.

use super::discover::{self, Inventory};
use super::output::Output;
use super::{finish, health, plan, setup, threads};
use crate::bootstrap::Bootstrap;
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::options::Options;

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
    let mut gpus: Option<Vec<Gpu>> = None;
    let mut worst = 0;
    let mut checks = Vec::new();
    for (i, (coll, out)) in colls.iter().zip(outs.iter_mut()).enumerate() {
        if i > 0 {
            out.open();
            discover::print_head(&found, out)?;
        }
        let ended = section(*coll, boot, &found, out, gpus.take())?;
        worst = worst.max(ended.code);
        gpus = Some(ended.gpus);
        checks.extend(ended.check);
    }
    crate::gpu::rank::destroy_all(gpus.unwrap_or_default())?;
    crate::host::trace("teardown done");
    match (&opts.health, outs.last_mut()) {
        (Some(h), Some(out)) if out.printing() => {
            Ok(worst.max(health::conclude(h, &found, checks, out)))
        }
        _ => Ok(worst),
    }
}

/// One section after its head: plan, set up (the first) or reuse the GPUs, measure, finish;
/// returns its exit code and the GPUs.
fn section(
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    found: &Inventory,
    out: &mut Output,
    gpus: Option<Vec<Gpu>>,
) -> Result<finish::Section> {
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
        .map(|_| health::threshold(&found.options));
    Ok(finish::finish_section(found.nccl, measured, out, threshold))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{AllGather, AllReduce, SendRecv};

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
