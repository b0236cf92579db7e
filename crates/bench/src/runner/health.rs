//! `--health`'s summary after the last section (world rank 0): one `# health:` line per
//! collective and the overall verdict on stdout, the JSON and Prometheus files, and the exit
//! code it adds (`nccl_perf_explain::health::exit`: 7 slow or wrong data, 10 not judged).

use super::discover::Inventory;
use super::output::Output;
use crate::error::code;
use crate::options::{HealthOptions, Options};
use nccl_perf_explain::baseline::{Baseline, format};
use nccl_perf_explain::health::{Check, DEFAULT_THRESHOLD, Health};
use std::sync::Mutex;

/// What `--health` knows while its sections run (world rank 0), so that a run the hang watch
/// ends still gives its verdict and files.
struct Pending {
    h: HealthOptions,
    threshold: f64,
    gpu: String,
    program: String,
    checks: Vec<Check>,
    current: String,
    hosts: Vec<String>,
}

static PENDING: Mutex<Option<Pending>> = Mutex::new(None);

/// Before each section (world rank 0): the checks of the sections done, and the collective
/// about to run.
pub(super) fn track(
    h: &HealthOptions,
    found: &Inventory,
    program: &str,
    checks: &[Check],
    current: &str,
) {
    let gpu = found.device_infos.first().map_or("", |d| d.name.as_str());
    if let Ok(mut p) = PENDING.lock() {
        *p = Some(Pending {
            h: h.clone(),
            threshold: threshold(&found.options),
            gpu: gpu.to_string(),
            program: program.to_string(),
            checks: checks.to_vec(),
            current: current.to_string(),
            hosts: hosts(found),
        });
    }
}

/// The hang watch ended the run with verdict `line`: where `--health` runs (world rank 0), the
/// summary with the collective that hung as `hung` is written to its files, and its `# health:`
/// lines are returned for stdout; `None` elsewhere.
pub(super) fn on_hang(line: &str) -> Option<String> {
    let p = PENDING.lock().ok()?.take()?;
    let mut checks = p.checks;
    checks.push(Check::hung(&p.current, line));
    let summary = Health::new(checks, p.threshold, &crate::host::short_hostname(), &p.gpu)
        .with_nodes(p.hosts.iter().map(String::as_str));
    for (path, text) in [
        (&p.h.json, format!("{}\n", summary.json())),
        (&p.h.prom, summary.prometheus()),
    ] {
        if let Some(path) = path
            && let Err(e) = crate::report::output_file::replace(path, text.as_bytes())
        {
            crate::eline!("{}: cannot write {}: {e}", p.program, path.display());
        }
    }
    Some(summary.text())
}

/// Each rank's host name, in rank order (the device lines').
fn hosts(found: &Inventory) -> Vec<String> {
    found
        .device_infos
        .iter()
        .map(|d| d.hostname.clone())
        .collect()
}

/// `--baseline`'s file, read at world rank 0 before any section runs (an error names the file
/// and the line; exit 255 as for any argument).
pub(super) fn baseline(h: &HealthOptions) -> crate::error::Result<Option<Baseline>> {
    h.baseline
        .as_ref()
        .map(|p| {
            format::load(p).map_err(|e| crate::error::Error::Usage(format!("--baseline: {e}")))
        })
        .transpose()
}

/// The percentage of the expected busbw below which a collective is slow: `--explain-gate`'s
/// when given, else 90.
pub(super) fn threshold(opts: &Options) -> f64 {
    opts.explain
        .as_ref()
        .and_then(|x| x.gate)
        .unwrap_or(DEFAULT_THRESHOLD)
}

/// Prints the summary of `checks` after the last section and writes its files; returns the
/// exit code it gives (the verdict's: 0 healthy, 7 slow or wrong data, 10 not judged unless
/// `--health-allow-unjudged`). A file that cannot be written is said on stderr and makes the
/// exit code 7 too, so that automation does not read an old file as this check's.
pub(super) fn conclude(
    h: &HealthOptions,
    found: &Inventory,
    checks: Vec<Check>,
    out: &mut Output,
) -> u8 {
    let gpu = found.device_infos.first().map_or("", |d| d.name.as_str());
    let summary = Health::new(
        checks,
        threshold(&found.options),
        &crate::host::short_hostname(),
        gpu,
    )
    .with_nodes(found.device_infos.iter().map(|d| d.hostname.as_str()));
    out.print(&summary.text());
    let mut written = true;
    let mut write = |path: &Option<std::path::PathBuf>, text: String| {
        if let Some(p) = path
            && let Err(e) = crate::report::output_file::replace(p, text.as_bytes())
        {
            crate::eline!("{}: cannot write {}: {e}", out.info().program, p.display());
            written = false;
        }
    };
    write(&h.json, format!("{}\n", summary.json()));
    write(&h.prom, summary.prometheus());
    match (summary.exit_code(h.allow_unjudged), written) {
        (c, true) => c,
        (c, false) => c.max(code::NUM_RESULTS),
    }
}
