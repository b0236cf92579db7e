//! `--explain`'s data in a run (docs/explain.md), in one place: the rows kept with what NCCL
//! reported ([`Rows`], made at discovery, filled by the printing side), what this process can
//! capture ([`capture`], [`dry_run_line`]) and the explanation made of them after the footer
//! ([`conclude`]). The phases hand these along; nothing here calls back into the runner. The
//! untimed call that NCCL's plugins record is the worker's (`worker/explain_call.rs`).

use super::placement::ProcessRecord;
use crate::error::{Error, Result};
use crate::options::ExplainOptions;
use crate::report::{DeviceInfo, RowResult};
use nccl_perf_explain::Hardware;
use nccl_perf_explain::observed::{self, Capture, RankDevice, Row, Seen};
use nccl_perf_explain::sku::SkuTable;
use std::path::Path;
use std::time::Duration;

/// The rows of the run at world rank 0, with what NCCL reported for each half.
pub struct Rows {
    devices: Vec<DeviceInfo>,
    /// Each rank's machine and GPU.
    rank_devices: Vec<RankDevice>,
    nccl_version: i32,
    rows: Vec<Row>,
    /// The table of expected bus bandwidths (`--explain-sku`, else the built-in one).
    skus: SkuTable,
    /// `--explain-gate`.
    gate: Option<f64>,
    /// Rows not kept beyond [`MAX_ROWS`].
    left_out: u64,
}

/// At most this many half-rows are kept for the explanation.
const MAX_ROWS: usize = 1 << 16;

impl Rows {
    /// Rows of a run on `devices` (every rank's device line) with NCCL `nccl_version`; reads
    /// `--explain-sku`'s table (an error names the file and the line).
    pub fn new(
        x: &ExplainOptions,
        devices: &[DeviceInfo],
        records: &[ProcessRecord],
        nccl_version: i32,
    ) -> Result<Rows> {
        let skus = table(x)?;
        let rank_devices = records
            .iter()
            .flat_map(|r| {
                r.gpus.iter().map(|g| RankDevice {
                    host: if r.machine.is_empty() {
                        r.host.clone()
                    } else {
                        r.machine.clone()
                    },
                    pci_bus_id: g.identity.clone().unwrap_or_default(),
                    device: Some(g.device),
                })
            })
            .collect();
        Ok(Rows {
            devices: devices.to_vec(),
            rank_devices,
            nccl_version,
            rows: Vec::new(),
            skus,
            gate: x.gate,
            left_out: 0,
        })
    }

    /// Keeps a printed row and what NCCL reported for its out-of-place and in-place halves (the
    /// first [`MAX_ROWS`] halves: `-N 0` repeats the sweep until stopped).
    pub fn add(&mut self, r: &RowResult, seen: [Option<Seen>; 2]) {
        if self.rows.len() >= MAX_ROWS {
            self.left_out += 1;
            return;
        }
        let [oop, ip] = seen;
        for (half, in_place, seen) in [(&r.out_of_place, false, oop), (&r.in_place, true, ip)] {
            self.rows.push(Row {
                bytes: r.size,
                in_place,
                time_us: half.time_us,
                algbw: half.algbw,
                busbw: half.busbw,
                seen,
            });
        }
    }

    /// The run as explain sees it, for `program` (`all_reduce_perf`).
    pub fn run(&self, program: &str) -> observed::Run {
        let mut per_host: std::collections::BTreeMap<&str, u32> = Default::default();
        for d in &self.devices {
            *per_host.entry(&d.hostname).or_default() += 1;
        }
        observed::Run {
            collective: program.strip_suffix("_perf").unwrap_or(program).to_string(),
            nranks: self.devices.len() as u32,
            nnodes: per_host.len() as u32,
            ranks_per_node: per_host.values().copied().max().unwrap_or(0),
            nccl_version: self.nccl_version,
            gpu_names: self.devices.iter().map(|d| d.name.clone()).collect(),
            rank_devices: self.rank_devices.clone(),
            rows: self.rows.clone(),
            capture: capture(self.nccl_version),
            notes: if self.left_out > 0 {
                vec![format!(
                    "the first {MAX_ROWS} half-rows are explained; {} later row(s) are not",
                    self.left_out
                )]
            } else {
                Vec::new()
            },
        }
    }

    /// The PCI address of world rank 0's GPU (`0000:18:00.0`), where the hardware is read.
    pub fn first_pci(&self) -> Option<String> {
        self.devices.first().map(|d| {
            format!(
                "{:04x}:{:02x}:{:02x}.0",
                d.pci_domain, d.pci_bus, d.pci_device
            )
        })
    }
}

/// `text`'s lines as the stdout contract wants ours: each starts with `#` (text from the
/// environment or a SKU file cannot start a line of its own), and the words nccl-tests scrapers
/// look for are replaced (`bandwidth` → `bw`, `FAILED` → `failed`), as locate's lines are.
fn stdout_safe(text: &str) -> String {
    text.lines()
        .map(|l| {
            let l = crate::locate::output::scrub(l);
            if l.starts_with('#') {
                l + "\n"
            } else {
                format!("# {l}\n")
            }
        })
        .collect()
}

/// `--explain-sku`'s table, else the built-in one; an error names the file and the line.
fn table(x: &ExplainOptions) -> Result<SkuTable> {
    match &x.sku {
        None => Ok(SkuTable::builtin()),
        // The error names the file (and the line).
        Some(path) => SkuTable::load(path).map_err(|e| Error::Usage(format!("--explain-sku: {e}"))),
    }
}

/// The dry run's check of `--explain-sku` (world rank 0, which reads it in a run).
pub fn check_table(x: &ExplainOptions) -> Result<()> {
    table(x).map(|_| ())
}

/// The explanation of a run, made after its table at world rank 0.
pub struct Conclusion {
    /// The explanation as `#` lines, printed after the footer.
    pub text: String,
    /// Whether `--explain-gate` fails.
    pub gate_failed: bool,
    /// `--explain`'s object in the `-J` JSON document (`nccl_perf_explain`).
    pub json: serde_json::Value,
    /// The run as explain saw it, and its explanation (for `--health`'s summary).
    pub explained: (
        nccl_perf_explain::observed::Run,
        nccl_perf_explain::Explanation,
    ),
}

/// The explanation of `rows` for `program` (`all_reduce_perf`): the hardware read, the rows
/// explained, `--explain-gate` applied.
pub fn conclude(rows: &Rows, program: &str) -> Conclusion {
    let run = rows.run(program);
    let hw = probe_within(rows.first_pci(), PROBE_DEADLINE);
    let x = nccl_perf_explain::explain(&run, &hw, &rows.skus);
    let gate = rows.gate;
    let failed = gate_fails(gate, x.percent_of_expected);
    let mut text = x.to_text();
    if let Some(g) = gate {
        text.push_str(&match (x.percent_of_expected, failed) {
            (Some(p), true) => format!("# Explain gate: not met: {p:.0} % of expected, below {g} %\n"),
            (Some(p), false) => format!("# Explain gate: met: {p:.0} % of expected, at least {g} %\n"),
            (None, _) => format!(
                "# Explain gate: not met: no expected figure to compare with (--explain-gate {g} needs one)\n"
            ),
        });
    }
    // The stdout contract: no line of ours says `bandwidth` or `FAILED` (a SKU file's text, a
    // device name or a verdict could).
    let text = stdout_safe(&text);
    let json = serde_json::json!({
        "lines": x.lines,
        "verdict": x.verdict,
        "rows": x.rows,
        "percent_of_expected": x.percent_of_expected,
        "gate": gate,
        "gate_failed": gate.map(|_| failed),
        "hardware": hw,
        "run": run,
    });
    Conclusion {
        text,
        gate_failed: failed,
        json,
        explained: (run, x),
    }
}

/// How long the hardware read (NVML, sysfs) may take before explain goes on without it.
const PROBE_DEADLINE: Duration = Duration::from_secs(15);

/// The hardware of this node (the GPU at `pci`), read on a thread of its own so that a driver
/// that does not answer (a GPU in a bad state can hang NVML) cannot hang the run: after
/// `deadline` the explanation goes on without it, and says so.
fn probe_within(pci: Option<String>, deadline: Duration) -> Hardware {
    within(deadline, move || {
        nccl_perf_explain::hardware::probe(pci.as_deref(), Path::new("/sys"))
    })
}

/// `read`'s hardware, or a note when it takes longer than `deadline` (its thread is left to
/// finish or to end with the process).
fn within(deadline: Duration, read: impl FnOnce() -> Hardware + Send + 'static) -> Hardware {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("explain-probe".into())
        .spawn(move || {
            let _ = tx.send(read());
        });
    let why = match spawned {
        Err(e) => format!("hardware not read: no thread for it ({e})"),
        Ok(_) => match rx.recv_timeout(deadline) {
            Ok(hw) => return hw,
            Err(_) => format!(
                "hardware not read: NVML and sysfs did not answer within {} s",
                deadline.as_secs_f64()
            ),
        },
    };
    Hardware {
        notes: vec![why],
        ..Hardware::default()
    }
}

/// Whether `--explain-gate` fails: below the gate, or nothing to compare with.
fn gate_fails(gate: Option<f64>, percent: Option<f64>) -> bool {
    match (gate, percent) {
        (None, _) => false,
        (Some(g), Some(p)) => p < g,
        (Some(_), None) => true,
    }
}

/// What explain could capture in this process, with NCCL `version` (`ncclGetVersion`).
///
/// NCCL loads plugins from the program itself (`STATIC_PLUGIN`) from 2.22 on: the tuner with
/// NCCL's cost table from 2.22 (v3), the profiler from 2.23 (v1; v2 from 2.24, v3 in 2.26, v4
/// from 2.27; `crates/capture/src/ffi/abi_v1_v3.rs` has each version's tables). Before 2.22
/// there is nothing to read: no profiler, and tuners (2.19–2.21, v1/v2) that get no cost table
/// and load only from a library file.
pub fn capture(version: i32) -> Capture {
    match nccl_perf_capture::installed() {
        Some(i) => capture_with(version, i),
        None => Capture::Unavailable("the plugins were not installed at start-up".into()),
    }
}

/// [`capture`] with what `install` did (`i`).
fn capture_with(version: i32, i: &nccl_perf_capture::Installed) -> Capture {
    let name = super::version::version_name(version);
    if version < 22200 {
        return Capture::Unavailable(format!(
            "NCCL {name} has no plugin interface explain can read (a tuner given NCCL's cost \
             model came with 2.22, the profiler with 2.23), so the algorithm, protocol, \
             transport and NCCL's model are not shown"
        ));
    }
    let mut notes: Vec<String> = [&i.profiler, &i.tuner, &i.chained]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let mut profiler = i.profiler.is_none();
    if profiler && version < 22300 {
        profiler = false;
        notes.push(format!(
            "NCCL {name} has no profiler interface (NCCL 2.23 added it): the algorithm, \
             protocol, channels and transport are not shown"
        ));
    }
    Capture::Live {
        profiler,
        tuner: i.tuner.is_none(),
        notes,
    }
}

/// The dry run's line about the plugins.
pub fn dry_run_line() -> String {
    let Some(i) = nccl_perf_capture::installed() else {
        return String::new();
    };
    let say = |kind: &str, note: &Option<String>| match note {
        None => format!("{kind}: built in"),
        Some(n) => format!("{kind}: not ours ({n})"),
    };
    let tuner = match (&i.tuner, &i.chained) {
        (None, Some(c)) => format!("tuner: built in, chained ({c})"),
        _ => say("tuner", &i.tuner),
    };
    stdout_safe(&format!(
        "# Explain: NCCL's {}; {tuner} (NCCL 2.23 or later loads both, 2.22 the tuner)\n",
        say("profiler", &i.profiler),
    ))
}

#[cfg(test)]
mod tests;
