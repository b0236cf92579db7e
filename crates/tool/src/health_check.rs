//! `nccl-perf health`: a health check's summary from its logs or `-J` files (ours, a
//! `--collectives` launch's sections, or nccl-tests' programs run one after the other): per
//! collective the busbw at the largest size against explain's expected figure, a verdict, and
//! the overall verdict; as `#` lines, JSON and the Prometheus text format (docs/health.md).

use clap::{Arg, Command};
use nccl_perf_explain::baseline::Baseline;
use nccl_perf_explain::health::{Check, DEFAULT_THRESHOLD, Health, exit};
use nccl_perf_report::DeviceInfo;
use nccl_perf_report::run::Run;

use crate::error::ToolError;

/// The subcommand's definition.
pub fn command(files: Arg) -> Command {
    Command::new("health")
        .about("A health check's summary: per collective the busbw against a baseline of your known-good runs (--baseline) or the expected figure for the GPU model, a verdict, and one overall verdict; also as JSON and in the Prometheus text format (exit 0 healthy, 7 slow or wrong data, 4 hung, 10 not judged, 3 a run it cannot trust; the codes of --health)")
        .arg(files)
        .arg(
            Arg::new("threshold")
                .long("threshold")
                .value_name("PERCENT")
                .value_parser(clap::value_parser!(f64))
                .default_value("90")
                .help("A collective below this percentage of its expected busbw is slow"),
        )
        .arg(Arg::new("json").long("json").value_name("FILE").help("Also write the summary as JSON to this file"))
        .arg(
            Arg::new("prom")
                .long("prom")
                .value_name("FILE")
                .help("Also write the summary in the Prometheus text format to this file (for node_exporter's textfile collector: name it *.prom)"),
        )
        .arg(
            Arg::new("baseline")
                .long("baseline")
                .value_name("FILE")
                .help("Judge each collective first against this baseline of known-good runs (made by nccl-perf baseline), size by size; a baseline for another GPU model or job shape is said in one line and not used"),
        )
        .arg(
            Arg::new("allow-unjudged")
                .long("allow-unjudged")
                .action(clap::ArgAction::SetTrue)
                .help("Exit 0 when the worst outcome is a collective that could not be judged, instead of 10"),
        )
        .arg(
            Arg::new("explain-sku")
                .long("explain-sku")
                .value_name("FILE")
                .help("A SKU table of your own for the expected figures (docs/explain.md)"),
        )
}

/// The summary of `runs`.
pub fn summary(
    runs: &[Run],
    threshold: f64,
    sku: Option<&String>,
    baseline: Option<&Baseline>,
) -> Result<Health, ToolError> {
    let skus = crate::explain::table(sku)?;
    let checks = runs
        .iter()
        .map(|r| {
            let (seen, x) = crate::explain::explained(r, &skus);
            let wrong = r.summary.as_ref().map_or(0, |s| s.oob_errors);
            let check = Check::judged(&seen, &x, wrong, threshold, baseline);
            let check = match &r.text.wrong_on {
                Some(w) if wrong > 0 => check.wrong_on(w, &wrong_nodes(w, &r.devices)),
                _ => check,
            };
            match &r.text.hang {
                Some(line) => check.hung_by(line),
                None => check,
            }
        })
        .collect();
    let first = runs.iter().flat_map(|r| r.devices.first()).next();
    // The job's nodes from the run that names the most ranks (every section has the same).
    let hosts = runs
        .iter()
        .max_by_key(|r| r.devices.len())
        .map(|r| {
            r.devices
                .iter()
                .map(|d| d.hostname.as_str())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    Ok(Health::new(
        checks,
        threshold,
        first.map_or("", |d| d.hostname.as_str()),
        first.map_or("", |d| d.name.as_str()),
    )
    .with_nodes(hosts))
}

/// The nodes a placed wrong-data line names (`rank 5 (node2)`, `... between rank 3 (node1)
/// and rank 12 (node2)`): those of the device lines from its first rank to its last, else
/// the hosts it names.
fn wrong_nodes(place: &str, devices: &[DeviceInfo]) -> Vec<String> {
    let mut ranks: Vec<i64> = Vec::new();
    let mut named: Vec<String> = Vec::new();
    for part in place.split("rank ").skip(1) {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(r) = digits.parse::<i64>() {
            ranks.push(r);
        }
        let host = part[digits.len()..]
            .strip_prefix(" (")
            .and_then(|h| h.split_once(')'))
            .map(|(h, _)| h.to_string());
        if let Some(h) = host.filter(|h| !h.is_empty() && !named.contains(h)) {
            named.push(h);
        }
    }
    let (Some(&lo), Some(&hi)) = (ranks.iter().min(), ranks.iter().max()) else {
        return named;
    };
    let hosts = nccl_perf_report::hosts_of_ranks(devices, lo, hi);
    if hosts.is_empty() { named } else { hosts }
}

/// The exit code of a summary, `--health`'s ([`nccl_perf_explain::health::exit`]): 0
/// healthy, 7 slow or wrong data, 4 hung, 10 not judged (0 with `allow_unjudged`); `problems`
/// (3 when a run cannot be trusted, else 0) where the verdict is no worse than not judged.
pub fn exit_code(h: &Health, allow_unjudged: bool, problems: u8) -> u8 {
    match (h.exit_code(allow_unjudged), problems) {
        (exit::HEALTHY | exit::NOT_JUDGED, p) if p != 0 => p,
        (c, _) => c,
    }
}

/// The threshold given, checked.
pub fn threshold(given: Option<f64>) -> Result<f64, ToolError> {
    match given.unwrap_or(DEFAULT_THRESHOLD) {
        t if t > 0.0 && t <= 100.0 => Ok(t),
        t => Err(ToolError::Usage(format!(
            "--threshold {t}: give a percentage above 0 and at most 100"
        ))),
    }
}
