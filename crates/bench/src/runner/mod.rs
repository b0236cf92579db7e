//! A whole benchmark run, as the sequence of its phases, one file each; each phase hands the
//! next ones what it found in a small struct:
//!
//! 1. `start.rs`: join the job (bootstrap), create the `-J` file, start the watchdog; in the
//!    end, finalize the job or tell it about a failure (`Started`).
//! 2. `discover.rs`: CUDA, libnccl and its version rules (`version.rs`), the header, this
//!    process' devices, every process' record checked by rank 0, the device lines
//!    (`Inventory`).
//! 3. `plan.rs`: the memory clamp, the loops over datatypes, ops, roots and sizes, the buffer
//!    sizes, the validation kernels started (`Plan`).
//! 4. `setup.rs`: the NCCL id, communicators, buffers, registrations (`Ready`).
//! 5. `threads.rs`: the measurements on the `-t` threads, one by one by each thread's
//!    `worker/` (warm-up, timed loop, validation, graphs, `--explain`'s call; `engine.rs`,
//!    `per_iter.rs`), the rows (`Measured`).
//! 6. `finish.rs`: the summary, the GPUs torn down, the footer and the JSON, the exit code.
//!
//! With `--collectives`, `sections.rs` runs phases 3 to 6 once per collective on what phases 1,
//! 2 and the first set-up made (one context, one set of communicators and buffers).
//!
//! `--dry-run` (`dry_run.rs`) stops after the start: it checks the placement without CUDA,
//! plans the loops and prints the plan. Beside the phases: `output.rs` (stdout and the `-J`
//! file), `explanation.rs` (`--explain`'s rows and capture, made at discovery, filled by
//! `output.rs`, concluded at the finish), `placement.rs` (which GPUs each process drives, the launch checks), `causes.rs` (the
//! failures found there said once for the job, by rank 0), `sync.rs` (the
//! threads' rendezvous), `interrupt.rs` and `watchdog.rs` (stopping early), `fault.rs` (the
//! validation self-test), with the `test-hooks` feature `stall.rs`, and for unit tests
//! `fake_job.rs` (one process of a job, as a bootstrap).

mod causes;
pub mod discover;
mod dry_run;
mod engine;
mod explanation;
#[cfg(test)]
mod fake_job;
mod fault;
mod finish;
mod hang;
mod health;
pub mod interrupt;
mod locate;
mod output;
mod per_iter;
mod placement;
mod plan;
mod roots;
mod sections;
pub mod setup;
mod split_groups;
#[cfg(feature = "test-hooks")]
mod stall;
mod start;
mod sure_line;
mod sync;
mod threads;
mod version;
mod watchdog;
mod worker;
mod wrong_ranks;

pub use discover::ProbedDevice;
pub use engine::{Engine, Shape};
pub use setup::{BufferSizes, Gpu};
pub use sync::ThreadGroup;
pub use worker::Worker;

use crate::bootstrap::Bootstrap;
use crate::collective::Collective;
use crate::error::Result;
use crate::options::Options;
use output::Output;
use start::Started;

/// Runs the benchmark (or, with `--dry-run`, prints its plan) of each collective of `colls` in
/// turn (one, but with `--collectives`); returns the exit code of a run that reached its
/// footers (the worst of them), or the error that ended it (the job was told).
pub fn run_benchmark(
    opts: &Options,
    colls: &[&dyn Collective],
    program: &str,
    args: Vec<String>,
) -> Result<u8> {
    let sections = sections::names(opts, colls, program);
    start::start(opts, program, &sections, args, |started| match started {
        Started::DryRun(boot) => dry_run::check_and_plan(opts, colls, program, boot),
        Started::Run(boot, outs) => match (colls, outs) {
            ([coll], [out]) if opts.health.is_none() => benchmark(opts, *coll, boot, out),
            (colls, outs) => sections::run(opts, colls, boot, outs),
        },
    })
}

/// The phases after the start, in order.
fn benchmark(
    opts: &Options,
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    out: &mut Output,
) -> Result<u8> {
    let found = discover::discover(opts, boot, out)?;
    if let Some(l) = &found.options.locate {
        locate::check(l, found.nccl, found.nccl_version, boot)?;
    }
    let plan = plan::plan(coll, boot, &found, out)?;
    let ready = setup::set_up(boot, &found, &plan)?;
    let measured = threads::measure(coll, boot, &found, &plan, ready, out)?;
    if found.options.locate.is_none() {
        return finish::finish(found.nccl, measured, out);
    }
    let job_busbw = found
        .options
        .locate
        .as_ref()
        .and_then(|l| out.busbw_at(l.size_for(plan.max_bytes)));
    // After the table and its footer, before the teardown: locate runs on the GPUs the
    // benchmark set up (this process' one GPU: buffers and stream), with communicators of its
    // own.
    finish::finish_then(found.nccl, measured, out, |gpus| {
        let (Some(gpu), Some(device)) = (gpus.first(), found.devices.first()) else {
            return Err(crate::error::Error::Internal(
                "--locate: this process has no GPU".into(),
            ));
        };
        locate::run_locate(&locate::Job {
            opts: &found.options,
            coll,
            nccl: found.nccl,
            boot,
            gpu,
            place: locate::Place::here(device.ordinal, device.props.pci),
            max_bytes: plan.max_bytes,
            job_busbw,
        })
        .map(|l| l.code)
    })
}
