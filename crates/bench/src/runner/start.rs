//! Phase 1, start: this process joins the job and the run is made safe to stop. Bootstraps
//! (whatever the launcher); world rank 0 creates the `-J` file, so a path that cannot be
//! written ends the run before any GPU work; the watchdog runs beside the later phases (a lost
//! process or a stop signal ends the run with the JSON document closed). When the later phases
//! fail or panic, the bootstrap ends the job (MPI aborts it; TCP tells the others), naming a
//! process that left first when there is one; when they succeed, it is finalized.

use super::output::{self, Output};
#[cfg(feature = "test-hooks")]
use super::stall;
use super::{fault, watchdog};
use crate::bootstrap::{self, Bootstrap};
use crate::error::{Error, Result};
use crate::options::{Options, fingerprint};
use std::time::Duration;

/// How long a process whose NCCL call failed waits to learn whether another process left the
/// run (rank 0 notices within 100 ms and tells the others).
const LOST_PEER_WAIT: Duration = Duration::from_secs(3);

/// What the later phases get from the start.
pub(super) enum Started<'a> {
    /// `--dry-run`: the bootstrap only (the `-J` folder was checked, nothing created).
    DryRun(&'a dyn Bootstrap),
    /// A benchmark: the bootstrap and one report per section (stdout at world rank 0, the
    /// `-J` file), in the order of the sections.
    Run(&'a dyn Bootstrap, &'a mut [Output]),
}

/// Launches: runs `phases` with what it needs inside the job and under the watchdog; returns
/// their exit code, or their error after the job was told. `sections`: the program name of
/// each section the run prints (one, `program`, but with `--collectives`).
pub(super) fn start(
    opts: &Options,
    program: &str,
    sections: &[String],
    args: Vec<String>,
    phases: impl FnOnce(Started) -> Result<u8>,
) -> Result<u8> {
    let boot = meet(opts, program).map_err(|e| {
        // A bad value of the environment, found before the processes meet: the first process
        // of each host says it (as for the command line's errors, lib.rs).
        if e.exit_code() != crate::error::code::ARGS || bootstrap::speaks_for_its_host() {
            return e;
        }
        std::thread::sleep(crate::LET_THE_FIRST_SPEAK);
        Error::Said(Box::new(e))
    })?;
    // A panic (reported by the panic hook) still ends the job as a failure does.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        guarded(opts, program, sections, &*boot, args, phases)
    }))
    .unwrap_or(Err(Error::Panicked));
    match result {
        Ok(code) => {
            boot.finalize()?;
            Ok(code)
        }
        // Every process knows: each reports its own line and leaves in order (under MPI,
        // MPI_Finalize rather than MPI_Abort and a banner per process).
        Err(e @ Error::Agreed(_)) => {
            let _ = boot.finalize();
            Err(e)
        }
        Err(e) => {
            // NCCL may notice a dead peer (or time out waiting for it) before the watchdog
            // does: give the bootstrap a moment to name the process that left.
            if e.may_follow_a_lost_peer()
                && let Some(lost) = boot.lost_peer(LOST_PEER_WAIT).map(Error::from)
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

/// The checks of the environment before the processes meet, then the meeting.
fn meet(opts: &Options, program: &str) -> Result<Box<dyn Bootstrap>> {
    fault::init(program)?;
    // A bad NCCL_PERF_INIT_ROOTS stops the run before anybody meets or touches a GPU.
    super::roots::count(1, crate::environment::INIT_ROOTS.get().as_deref(), true)?;
    Ok(bootstrap::connect(&fingerprint::of_run(program, opts))?)
}

/// Creates (or, for a dry run, checks) the `-J` target of each section at world rank 0 and
/// runs `phases` under the watchdog; a run that fails closes the JSON documents with the rows
/// completed.
fn guarded(
    opts: &Options,
    program: &str,
    sections: &[String],
    boot: &dyn Bootstrap,
    args: Vec<String>,
    phases: impl FnOnce(Started) -> Result<u8>,
) -> Result<u8> {
    // The test hooks name the program.
    #[cfg(not(feature = "test-hooks"))]
    let _ = program;
    let output = opts.output_file.as_ref().filter(|_| boot.world_rank() == 0);
    // --health's files are written after the last section: a folder that cannot take them
    // ends the run now, as -J's does.
    if let Some(h) = opts.health.as_ref().filter(|_| boot.world_rank() == 0) {
        for (option, path) in [("--health-json", &h.json), ("--health-prom", &h.prom)] {
            if let Some(p) = path {
                crate::report::output_file::check_target(p).map_err(|e| {
                    Error::Usage(format!("{option} {}: cannot write it: {e}", p.display()))
                })?;
                output::check_target(p).map_err(|e| match e {
                    Error::Usage(m) => Error::Usage(
                        m.replacen("-J ", &format!("{option} "), 1)
                            .replace("leave out -J", &format!("leave out {option}")),
                    ),
                    e => e,
                })?;
            }
        }
    }
    if opts.dry_run {
        if let Some(o) = output {
            output::check_target(&o.path)?;
        }
        return watchdog::guard(boot, Vec::new(), None, || {
            #[cfg(feature = "test-hooks")]
            stall::pause(boot, program);
            phases(Started::DryRun(boot))
        });
    }
    let printing = boot.world_rank() == 0;
    let mut outs = Vec::with_capacity(sections.len());
    for (i, name) in sections.iter().enumerate() {
        let info = output::run_info(opts, name);
        let target = match output {
            Some(o) => {
                let o = match sections.len() {
                    1 => o.clone(),
                    _ => output::section_file(o, name),
                };
                let (target, line) =
                    output::create_target(&o, &info, args.clone(), opts.explain.is_some())?;
                // The first section's line comes first, as a program alone prints it; the
                // others open their sections.
                if i == 0 {
                    print!("{line}");
                    Some((target, String::new()))
                } else {
                    Some((target, line))
                }
            }
            None => None,
        };
        let (target, opening) = target.map_or((None, String::new()), |(t, l)| (Some(t), l));
        outs.push(Output::new(info, printing, target).opening(opening));
    }
    let json = outs.iter().filter_map(Output::json).collect();
    // A lost process or a stop signal ends the run from the watchdog, JSON closed.
    let hang = super::hang::Watch::new(opts.hang_timeout_s);
    watchdog::guard(boot, json, hang, || {
        #[cfg(feature = "test-hooks")]
        stall::pause(boot, program);
        let result = phases(Started::Run(boot, &mut outs));
        if result.is_err() {
            for out in &mut outs {
                out.abort();
            }
        }
        result
    })
}
