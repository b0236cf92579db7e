//! `nccl-perf report --explain`: what can be judged from a log or a JSON file alone. The run
//! becomes an [`observed::Run`] (collective from the program name, ranks, nodes from the
//! device lines' host names, GPU names, rows), NCCL's view is [`Capture::FromLog`] and the
//! hardware is not read; `nccl_perf_explain::explain` compares what is left with the SKU
//! table and says what it cannot know.

use std::collections::BTreeMap;

use clap::{Arg, ArgAction};

use nccl_perf_explain::observed::{self, Capture, RankDevice};
use nccl_perf_explain::{Explanation, Hardware, SkuTable, explain};
use nccl_perf_report::formats::Format;
use nccl_perf_report::health;
use nccl_perf_report::run::Run;

use crate::error::ToolError;

/// `report`'s `--explain` and `--explain-sku`.
pub fn args() -> [Arg; 2] {
    [
        Arg::new("explain")
            .long("explain")
            .action(ArgAction::SetTrue)
            .conflicts_with("view")
            .help("After each run, '#' lines explaining it: what can be judged from the log alone (GPU model, ranks, nodes, sizes) against the SKU table of published busbw figures and the GPU's datasheet links, and what a log cannot tell (NCCL's algorithm, protocol, path and cost model); text and markdown put them after each run's table, json and csv on standard error (docs/explain.md)"),
        Arg::new("explain-sku")
            .long("explain-sku")
            .value_name("FILE")
            .requires("explain")
            .help("--explain: a SKU table of your own, extending the built-in one (or replacing it: 'builtin | no'); format in docs/explain.md"),
    ]
}

/// `report --explain`'s standard output: each run's report followed by its explanation (text;
/// Markdown in a fenced block), or for JSON and CSV the report alone with the explanations on
/// standard error so that the document stays whole.
pub fn report(
    runs: &[Run],
    format: &dyn Format,
    sku: Option<&String>,
) -> Result<String, ToolError> {
    let skus = table(sku)?;
    if !matches!(format.name(), "text" | "markdown") {
        for run in runs {
            nccl_perf_cli::stderr::write(&text(run, &skus));
        }
        return Ok(format.render(runs));
    }
    let mut out = String::new();
    for run in runs {
        out += &format.render(std::slice::from_ref(run));
        let lines = text(run, &skus);
        // In Markdown `# ` lines would be headings: a fenced block keeps them text.
        if format.name() == "markdown" {
            out += &format!("\n```text\n{lines}```\n");
        } else {
            out += &lines;
        }
    }
    Ok(out)
}

/// The SKU table: `--explain-sku`'s file, else the built-in one.
pub fn table(sku: Option<&String>) -> Result<SkuTable, ToolError> {
    match sku {
        Some(path) => SkuTable::load(std::path::Path::new(path))
            .map_err(|e| ToolError::Usage(format!("--explain-sku: {e}"))),
        None => Ok(SkuTable::builtin()),
    }
}

/// The note every explanation of a log carries.
pub const NOT_READ: &str = "hardware not read: explaining a log (GPU links from the SKU \
                            table's datasheet rows where the GPU is known)";

/// The run and hardware a benchmark's `--explain` record holds (`nccl_perf_explain` of its
/// `-J` JSON: NCCL's choices and model as captured, the hardware as read on the run's node),
/// when the record is there and readable.
pub fn recorded(run: &Run) -> Option<(observed::Run, Hardware)> {
    let x = run.explain.as_ref()?;
    let mut seen: observed::Run = serde_json::from_value(x.get("run")?.clone()).ok()?;
    let hw = x
        .get("hardware")
        .and_then(|h| serde_json::from_value(h.clone()).ok())
        .unwrap_or_default();
    seen.notes.push(
        "explained from the run's own --explain record: NCCL's choices and model as captured, \
         the hardware as read on its node then"
            .into(),
    );
    Some((seen, hw))
}

/// `run` as explain sees it.
pub fn observed(run: &Run) -> observed::Run {
    let program = run.info.program.as_str();
    let mut collective = program
        .strip_suffix("_mpi")
        .unwrap_or(program)
        .strip_suffix("_perf")
        .unwrap_or(program)
        .to_string();
    let mut notes = Vec::new();
    let nranks = match health::ranks(run) {
        Some(n) => n,
        None => match health::ranks_from_bandwidth(run) {
            Some(n) => {
                let lines = match health::ranks_at_least(run) {
                    Some(least) => format!("shows only device lines up to rank {}", least - 1),
                    None => "has no device lines".to_string(),
                };
                notes.push(format!(
                    "the log {lines}: {n} ranks inferred from busbw/algbw of its largest row \
                     (printed to two decimals, so approximate)"
                ));
                n
            }
            None => {
                if let Some(least) = health::ranks_at_least(run) {
                    notes.push(format!(
                        "the excerpt starts at a later device line: at least {least} ranks (rank \
                         {} is shown), and busbw/algbw does not give a count that agrees",
                        least - 1
                    ));
                }
                0
            }
        },
    };
    if let Some((program, why)) = health::inferred_program(run) {
        collective = program.trim_end_matches("_perf").to_string();
        notes.push(why);
    }
    // Upstream's JSON keeps one device per process: each stands for this many ranks.
    let per_device = if run.devices.is_empty() {
        1
    } else {
        (nranks / run.devices.len()).max(1)
    };
    let mut per_host: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &run.devices {
        *per_host.entry(d.hostname.as_str()).or_default() += per_device;
    }
    let u32_of = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let rows = run
        .rows
        .iter()
        .flat_map(|r| {
            [(&r.out_of_place, false), (&r.in_place, true)].map(|(h, in_place)| observed::Row {
                bytes: r.size,
                in_place,
                time_us: h.time_us,
                algbw: h.algbw,
                busbw: h.busbw,
                seen: None,
            })
        })
        .collect();
    observed::Run {
        collective,
        nranks: u32_of(nranks),
        nnodes: u32_of(per_host.len()),
        ranks_per_node: u32_of(per_host.values().copied().max().unwrap_or(0)),
        nccl_version: run.nccl_version,
        // An excerpt's few device lines still name the GPU model.
        gpu_names: if run.devices.is_empty() {
            &run.text.partial_devices
        } else {
            &run.devices
        }
        .iter()
        .map(|d| d.name.clone())
        .collect(),
        rank_devices: run
            .devices
            .iter()
            .map(|d| RankDevice {
                host: d.hostname.clone(),
                pci_bus_id: format!(
                    "{:04x}:{:02x}:{:02x}",
                    d.pci_domain, d.pci_bus, d.pci_device
                ),
                device: Some(d.device),
            })
            .collect(),
        rows,
        capture: Capture::FromLog,
        notes,
    }
}

/// `run` as explain saw it, and its explanation: from the run's own `--explain` record when it
/// has one, else from the table alone.
pub fn explained(run: &Run, skus: &SkuTable) -> (observed::Run, Explanation) {
    let (seen, hw) = recorded(run).unwrap_or_else(|| {
        let hw = Hardware {
            notes: vec![NOT_READ.to_string()],
            ..Hardware::default()
        };
        (observed(run), hw)
    });
    let x = explain(&seen, &hw, skus);
    (seen, x)
}

/// The explanation of `run`, as `# ` lines.
pub fn text(run: &Run, skus: &SkuTable) -> String {
    let (_, x) = explained(run, skus);
    // As the benchmarks print them: no `bandwidth` or `FAILED` in lines of ours (a SKU file's
    // text could hold them), so a report stays scrapable like the log it came from.
    x.to_text()
        .lines()
        .map(|l| nccl_perf_locate::output::scrub(l) + "\n")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A benchmark's JSON with its `--explain` record is explained from that record: NCCL's
    /// choices come back, and a broken record falls back to what the table alone tells.
    #[test]
    fn a_recorded_explanation_is_used() {
        let seen = observed::Run {
            collective: "all_reduce".into(),
            nranks: 4,
            nnodes: 4,
            ranks_per_node: 1,
            nccl_version: 22803,
            rows: vec![observed::Row {
                bytes: 1 << 30,
                in_place: false,
                time_us: 1000.0,
                algbw: 1.07,
                busbw: 1.61,
                seen: Some(observed::Seen {
                    algo: Some("Ring".into()),
                    proto: Some("Simple".into()),
                    channels: Some(2),
                    path: observed::Path::Network(observed::Net::Socket),
                    model: None,
                }),
            }],
            capture: Capture::Live {
                profiler: true,
                tuner: true,
                notes: Vec::new(),
            },
            ..observed::Run::default()
        };
        let record = serde_json::json!({ "run": seen, "hardware": Hardware::default() });
        let mut run = nccl_perf_report::json::read::read_documents(
            include_str!("../../../tests/golden/nccl-tests-2.19.6-h200/ar_json.json"),
            "ar_json.json",
        )
        .unwrap()
        .remove(0);
        run.explain = Some(record);
        let t = text(&run, &SkuTable::builtin());
        assert!(
            t.contains("Ring/Simple, 2 channels, network: sockets"),
            "{t}"
        );
        assert!(
            t.contains("explained from the run's own --explain record"),
            "{t}"
        );
        run.explain = Some(serde_json::json!({ "run": "not a run" }));
        let t = text(&run, &SkuTable::builtin());
        assert!(t.contains("are not in a log"), "{t}");
    }
    use nccl_perf_report::parse::{ParseOptions, parse_log};

    const LOG: &str = "\
# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   6899 on a device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   6900 on a device  1 [0000:05:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   6733 on b device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   6734 on b device  1 [0000:05:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
  1073741824     268435456     float     sum      -1   6759.0  158.86  238.29      0   6737.4  159.37  239.06      0
  2147483648     536870912     float     sum      -1    12646  169.81  254.72      0    12641  169.88  254.82      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 246.7
#
";

    #[test]
    fn a_log_becomes_an_observed_run() {
        let runs = parse_log(LOG, "x.log", &ParseOptions::default()).unwrap();
        let o = observed(&runs[0]);
        assert_eq!((o.nranks, o.nnodes, o.ranks_per_node), (4, 2, 2));
        assert_eq!(o.rows.len(), 4);
        assert_eq!(o.rank_devices[2].pci_bus_id, "0000:04:00");
        assert_eq!(o.gpu_names[0], "NVIDIA H100 80GB HBM3");
        let t = text(&runs[0], &SkuTable::builtin());
        assert!(t.contains("# explain: "), "{t}");
        assert!(t.contains("2 node(s)"), "{t}");
        assert!(t.contains("# verdict: "), "{t}");
    }
}
