//! What the locate tests (tests/locate_*.rs) share: a locate run on a model cluster with every
//! stdout line it would print, the named culprits, the configurations the GPU check uses, and a
//! topology whose host names hold the words scrapers look for.

use nccl_perf_locate::schedule::Kind;
use nccl_perf_locate::seam::RoundRunner;
use nccl_perf_locate::stats::Thresholds;
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::verdict::Culprit;
use nccl_perf_locate::{Config, Report, output, run_schedule};
use oracle::locate_model::ModelCluster;

/// Runs `kind` on `model`, collecting every stdout line locate would print.
pub fn locate(
    model: &mut dyn RoundRunner,
    topo: &Topology,
    config: &Config,
) -> (Report, Vec<String>) {
    let mut lines = vec![output::header()];
    let report = run_schedule(model, topo, config, &mut |rec, t| {
        lines.extend(output::group_lines(rec, t))
    })
    .expect("valid config");
    lines.extend(output::verdict_lines(&report, topo));
    (report, lines)
}

pub fn config(kind: Kind) -> Config {
    Config {
        schedule: kind,
        ..Config::default()
    }
}

/// A locate run on `model` and the culprits its verdicts name.
pub fn named(model: &mut ModelCluster, topo: &Topology, config: &Config) -> (Report, Vec<Culprit>) {
    let (report, _) = locate(model, topo, config);
    let named = report.verdicts.iter().map(|v| v.culprit.clone()).collect();
    (report, named)
}

/// The quick schedule with `seed` and a minimum drop of `min_drop`, as the GPU check runs it.
pub fn quick(seed: u64, min_drop: f64) -> Config {
    Config {
        seed,
        thresholds: Thresholds {
            min_drop,
            ..Thresholds::default()
        },
        ..config(Kind::Quick)
    }
}

/// Eight nodes whose host names hold the words scrapers look for.
pub fn hostile_topology() -> Topology {
    let ranks: Vec<(String, i32, String)> = (0..8)
        .flat_map(|n| {
            (0..4).map(move |g| {
                let host = match n {
                    1 => "FAILED-host".to_string(),
                    2 => "Bandwidth-node".to_string(),
                    _ => format!("h{n}"),
                };
                (host, g, format!("0000:{:02x}:00.0", 0x10 + g))
            })
        })
        .collect();
    Topology::from_ranks(&ranks).expect("topology")
}

/// The `# locate job:` line of a run's lines.
pub fn job_line(lines: &[String]) -> &str {
    lines
        .iter()
        .find(|l| l.starts_with("# locate job: "))
        .map(String::as_str)
        .expect("a job line")
}
