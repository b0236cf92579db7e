//! nccl-perf's benchmark core: a native reimplementation of NVIDIA's nccl-tests `*_perf`
//! benchmarks.
//!
//! Each binary is `nccl_perf_bench::main_for(&Collective)` (or [`main_with`] for a collective
//! configured at start): parse the nccl-tests command line, run the sweep on the GPUs, print the
//! nccl-tests table, exit with nccl-tests' exit codes. The `nccl-perf` binary is another crate's
//! (`nccl-perf-tool`: logs and JSON files to tables, plots and verdicts); none of its plotting
//! or man-page code is linked into the benchmarks.
//!
//! The crates this one builds on are re-exported under the module names they had when they
//! were modules of it ([`cli`], [`types`], [`locate`], [`report`], [`bootstrap`]), so that
//! `crate::report::…` paths keep meaning what they meant.
//!
//! Raw FFI lives in [`gpu`] (CUDA, NCCL, NVRTC), the one module allowed `unsafe_code` (the
//! workspace's lints deny it elsewhere); system calls go through `rustix`.

/// How the processes of a run meet (crate `nccl-perf-bootstrap`).
pub use nccl_perf_bootstrap as bootstrap;
pub mod collective;
pub mod error;
#[allow(unsafe_code)]
pub mod gpu;
mod host;
pub mod options;
pub mod runner;
mod sweep;
pub mod verify;

/// The command line's definitions and parser (crate `nccl-perf-cli`).
pub use nccl_perf_cli as cli;
/// Standard error, one write per message (crate `nccl-perf-cli`): `crate::eline!` everywhere.
pub use nccl_perf_cli::{eline, stderr};
/// Every environment variable of ours, defined once (crate `nccl-perf-facts`).
pub use nccl_perf_facts::environment;
// Numbers read as nccl-tests' C code reads them (crate `nccl-perf-cli`).
use nccl_perf_cli::cnum;
pub use nccl_perf_cli::program_name;
/// Datatypes and reduction operations (crate `nccl-perf-cli`).
pub use nccl_perf_cli::types;
/// `--locate`'s schedules, judgement and verdicts (crate `nccl-perf-locate`).
pub use nccl_perf_locate as locate;
/// The table, JSON and CSV the benchmarks write (crate `nccl-perf-report`).
pub use nccl_perf_report as report;

use error::code;
use options::OptionsError;
use std::process::ExitCode;

/// Turns any panic into one line on stderr, never a backtrace, and never a hang of threads
/// waiting for the panicking one (they stop as after any failed thread); the program then ends
/// with exit code 1 ([`main_for`] catches the panic).
fn install_panic_hook(program: String) {
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", error::source_file(l.file()), l.line()))
            .unwrap_or_default();
        crate::eline!(
            "{program}: internal error: {msg}{place} (a bug in nccl-perf; please report it)"
        );
        runner::interrupt::thread_failed(&error::Error::Panicked);
    }));
}

/// The command line of a run, parsed and validated; or the exit code of one that ends here
/// (`-h`, argument errors).
struct Startup {
    program: String,
    options: options::Options,
    args: Vec<String>,
}

fn startup() -> Result<Startup, ExitCode> {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let program = program_name(
        &argv
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    host::start_clock();
    host::set_program(&program);
    install_panic_hook(program.clone());
    let raw = match cli::parse(argv.iter().skip(1).cloned()) {
        Ok(r) => r,
        Err(msg) => return Err(before_meeting(&format!("{program}: {msg}"), code::ARGS)),
    };
    let parsed = match options::from_args(&raw) {
        Ok(p) => p,
        Err(OptionsError::Help) => {
            print!("{}", cli::usage(&program));
            return Err(ExitCode::from(code::OK));
        }
        Err(OptionsError::Version) => {
            println!(
                "{program} nccl-perf {} (nccl-tests version {})",
                env!("CARGO_PKG_VERSION"),
                nccl_perf_report::table::NCCL_TESTS_VERSION
            );
            return Err(ExitCode::from(code::OK));
        }
        Err(OptionsError::Invalid(msg)) if error::upstream_text(&msg) => {
            return Err(before_meeting(&msg, code::ARGS));
        }
        Err(OptionsError::Invalid(msg)) => {
            return Err(before_meeting(&format!("{program}: {msg}"), code::ARGS));
        }
        Err(OptionsError::Unsupported(msg)) => {
            let line = format!("{program}: {msg}");
            return Err(before_meeting(&line, code::NOT_IMPLEMENTED));
        }
    };
    for w in &parsed.warnings {
        crate::eline!("{program}: {w}");
    }
    for n in &parsed.notices {
        crate::eline!("{n}");
    }
    // Before any thread starts and before NCCL is loaded (the discover phase loads it).
    gpu::plugins::install(
        parsed.options.explain.is_some(),
        parsed.options.hang_timeout_s > 0.0,
    );
    let args = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    Ok(Startup {
        program,
        options: parsed.options,
        args,
    })
}

impl Startup {
    fn run_benchmark(self, coll: &dyn collective::Collective) -> ExitCode {
        // `--collectives`: those benchmarks in turn instead of the program's own.
        let listed = match collective::by_names(&self.options.collectives, &self.options) {
            Ok(l) => l,
            Err(e) => return before_meeting(&format!("{}: {e}", self.program), e.exit_code()),
        };
        let colls: Vec<&dyn collective::Collective> = match listed.is_empty() {
            true => vec![coll],
            false => listed.iter().map(|c| &**c).collect(),
        };
        match runner::run_benchmark(&self.options, &colls, &self.program, self.args) {
            Ok(c) => {
                if c != code::OK {
                    let host = host::short_hostname();
                    println!(
                        " .. {host} pid {}: Test failure {}:{}",
                        std::process::id(),
                        error::source_file(file!()),
                        line!()
                    );
                }
                ExitCode::from(c)
            }
            Err(e) => {
                e.report();
                ExitCode::from(e.exit_code())
            }
        }
    }
}

/// How long a process that leaves an argument error to another of its host waits before it
/// exits: a launcher that ends the job at the first failed process (mpirun) would otherwise
/// stop the one that says it before it could.
pub(crate) const LET_THE_FIRST_SPEAK: std::time::Duration = std::time::Duration::from_secs(1);

/// Ends on an error found before the processes meet (the command line, alltoallv's
/// environment): one `line` on stderr from the first process of each host
/// ([`bootstrap::speaks_for_its_host`]: the others were started alike and would repeat it),
/// `code` from every process.
fn before_meeting(line: &str, code: u8) -> ExitCode {
    if bootstrap::speaks_for_its_host() {
        crate::eline!("{line}");
    } else {
        std::thread::sleep(LET_THE_FIRST_SPEAK);
    }
    ExitCode::from(code)
}

/// The whole program of one `*_perf` binary.
pub fn main_for(coll: &dyn collective::Collective) -> ExitCode {
    unless_panic(|| match startup() {
        Ok(s) => s.run_benchmark(coll),
        Err(code) => code,
    })
}

/// `body`'s exit code, or 1 after a panic (which the panic hook reported).
fn unless_panic(body: impl FnOnce() -> ExitCode) -> ExitCode {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
        .unwrap_or(ExitCode::from(code::INTERNAL))
}

/// The whole program of a `*_perf` binary whose collective is configured at start (alltoallv's
/// environment): `make` runs once after the command line is validated; its error is one line on
/// stderr and its exit code (before any GPU work).
pub fn main_with<C: collective::Collective>(
    make: impl FnOnce(&options::Options) -> error::Result<C>,
) -> ExitCode {
    unless_panic(|| {
        let s = match startup() {
            Ok(s) => s,
            Err(code) => return code,
        };
        match make(&s.options) {
            Ok(coll) => s.run_benchmark(&coll),
            Err(e) => before_meeting(&format!("{}: {e}", s.program), e.exit_code()),
        }
    })
}
