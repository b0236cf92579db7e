//! `nccl-perf baseline`: a baseline from known-good runs (logs of nccl-tests or ours, `-J`
//! files) and baseline files merged, written as the versioned text `nccl-perf health
//! --baseline` and `--health --baseline` read (docs/health.md "Baselines").

use clap::{Arg, ArgAction, Command};
use nccl_perf_explain::baseline::{Baseline, format};
use nccl_perf_report::run::Run;

use crate::error::ToolError;

/// The subcommand's definition.
pub fn command(partial: Arg) -> Command {
    Command::new("baseline")
        .about("A baseline from known-good runs: per collective, job shape (GPU model, ranks, nodes, GPUs per node), size and in/out of place, the median busbw of the runs and their spread; baseline files given as input are merged in (exit 3 when an input run cannot be trusted)")
        .arg(
            Arg::new("FILE")
                .help("Known-good runs (text logs or -J JSON, several collectives each if they hold several) and baseline files to merge")
                .num_args(1..)
                .required(true)
                .action(ArgAction::Append),
        )
        .arg(
            Arg::new("output")
                .short('o')
                .long("output")
                .value_name("FILE")
                .required(true)
                .help("Write the baseline to this file (- for standard output)"),
        )
        .arg(partial)
}

/// Reads the runs of some files (the tool's own loader, with its `--partial`).
pub type Loader<'a> = &'a dyn Fn(&[String]) -> Result<Vec<Run>, ToolError>;

/// The baseline of `paths`: baseline files parsed and merged, every other file's runs added
/// through `load` (each run one value per size and place). A run with a problem (wrong data,
/// errors, no footer) makes no baseline: `Err` names it.
pub fn make(paths: &[String], load: Loader) -> Result<Baseline, ToolError> {
    let mut b = Baseline::default();
    for p in paths {
        let text = (p != "-")
            .then(|| std::fs::read_to_string(p).ok())
            .flatten();
        if let Some(t) = text.filter(|t| format::is_baseline(t)) {
            b.merge(format::parse(&t, p).map_err(|e| ToolError::Usage(e.to_string()))?);
            continue;
        }
        for run in load(std::slice::from_ref(p))? {
            let problems = nccl_perf_report::health::describe(&run);
            if let Some(first) = problems.first() {
                return Err(ToolError::Broken(format!(
                    "{p}: not a known-good run, so no baseline is made from it: {first}"
                )));
            }
            let seen = crate::explain::recorded(&run)
                .map_or_else(|| crate::explain::observed(&run), |(r, _)| r);
            b.add_run(&seen)
                .map_err(|e| ToolError::Usage(format!("{p}: {e}")))?;
        }
    }
    if b.entries.is_empty() {
        return Err(ToolError::Usage("no rows to make a baseline of".into()));
    }
    Ok(b)
}
