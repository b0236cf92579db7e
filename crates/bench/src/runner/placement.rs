//! Which GPUs each process drives, and the checks that stop a wrong launch before NCCL does
//! (or hangs): too few GPUs for the processes on a host, two ranks on one GPU.
//!
//! Everything but [`agree`] is pure. Each process describes itself in a [`ProcessRecord`];
//! rank 0 gathers them, prints the device lines from them and checks the whole launch, and
//! every process learns the verdict before any communicator exists.

use crate::bootstrap::fingerprint::{self, Fingerprint};
use crate::bootstrap::{Bootstrap, Reduce, peer_text};
use crate::error::{Error, Result};
use crate::report::DeviceInfo;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Where the first GPU index of a process comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `NCCL_TESTS_DEVICE`.
    Override,
    /// nccl-tests' formula: local rank × GPUs per process.
    Formula,
    /// The process sees exactly its own GPUs (Slurm `--gpus-per-task`, one pod per rank): the
    /// formula would point past them, so it starts at 0.
    OwnShare,
}

/// The first CUDA device of this process and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// First device index; the process uses `base .. base + per_process`.
    pub base: i64,
    /// Why.
    pub source: Source,
}

/// Chooses the devices of a process: local rank `local_rank` on its host, `per_process` GPUs
/// each (`-t` × `-g`), `visible` devices (unknown without CUDA), and `NCCL_TESTS_DEVICE`
/// (`forced`), which always wins. A host with more processes than GPUs fails on the processes
/// that run out; [`agree`] then stops them all.
pub fn place(
    local_rank: usize,
    per_process: i64,
    visible: Option<i64>,
    forced: Option<i64>,
) -> Result<Placement> {
    let too_few = |base: i64, found: i64| Error::TooFewGpus {
        requested: base + per_process,
        found,
    };
    if let Some(base) = forced {
        return match visible {
            Some(v) if base + per_process > v => Err(too_few(base, v)),
            _ => Ok(Placement {
                base,
                source: Source::Override,
            }),
        };
    }
    let base = local_rank as i64 * per_process;
    match visible {
        None => Ok(Placement {
            base,
            source: Source::Formula,
        }),
        Some(v) if base + per_process <= v => Ok(Placement {
            base,
            source: Source::Formula,
        }),
        // Each process sees only its own GPUs. (Processes that really share them are caught
        // by the duplicate check at rank 0.)
        Some(v) if v == per_process => Ok(Placement {
            base: 0,
            source: Source::OwnShare,
        }),
        Some(v) => Err(too_few(base, v)),
    }
}

/// A one-line hint for a process that has too few GPUs.
pub fn too_few_hint(
    local_rank: usize,
    local_size: usize,
    per_process: i64,
    visible: i64,
) -> String {
    format!(
        "hint: {local_size} process(es) on this host x {per_process} GPU(s) each need {} GPUs, \
         {visible} visible (this is local rank {local_rank}); start fewer processes per host, \
         lower -t/-g, or give each process its own GPUs (CUDA_VISIBLE_DEVICES, --gpus-per-task)",
        local_size as i64 * per_process
    )
}

/// `NCCL_TESTS_DEVICE` as nccl-tests reads it (an integer ≥ 0); unset or empty is `None`.
pub fn parse_device(value: Option<&str>) -> Result<Option<i64>> {
    match value {
        Some(v) if !v.trim().is_empty() => match crate::cnum::strtol(v) {
            Some((Some(d), _)) if d >= 0 => Ok(Some(d)),
            _ => Err(Error::Usage(format!(
                "NCCL_TESTS_DEVICE='{v}' is not a device index"
            ))),
        },
        _ => Ok(None),
    }
}

/// GPUs a process would see, known without loading CUDA: the entries of
/// `CUDA_VISIBLE_DEVICES` (up to the first invalid one, as CUDA reads it), else the GPUs the
/// NVIDIA driver lists in `/proc` (`gpus_in_proc`); unknown without either.
pub fn visible_without_cuda(cuda_visible: Option<&str>, gpus_in_proc: Option<i64>) -> Option<i64> {
    match cuda_visible {
        Some(list) => Some(visible_entries(list).len() as i64),
        None => gpus_in_proc,
    }
}

fn visible_entries(list: &str) -> Vec<&str> {
    list.split(',')
        .map(str::trim)
        .take_while(|e| {
            e.starts_with("GPU-")
                || e.starts_with("MIG-")
                || (!e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect()
}

/// What identifies device `ordinal` on its host without CUDA, when that is certain: the
/// ordinal itself when `CUDA_VISIBLE_DEVICES` is unset and GPUs exist, a GPU/MIG UUID from it.
/// Plain indexes in `CUDA_VISIBLE_DEVICES` are not certain (Slurm's cgroups renumber them).
pub fn identity_without_cuda(
    ordinal: i64,
    cuda_visible: Option<&str>,
    visible: Option<i64>,
) -> Option<String> {
    match cuda_visible {
        None => visible.map(|_| format!("device {ordinal}")),
        Some(list) => visible_entries(list)
            .get(usize::try_from(ordinal).ok()?)
            .filter(|e| e.starts_with("GPU-") || e.starts_with("MIG-"))
            .map(|e| e.to_string()),
    }
}

/// One GPU of a process as rank 0 sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuRecord {
    /// CUDA ordinal in its process.
    pub device: i64,
    /// What makes it unique on its host (PCI id with CUDA); `None` when unknown.
    pub identity: Option<String>,
    /// PCI domain, bus, device (zeros without CUDA).
    pub pci: [u32; 3],
    /// CUDA device name (empty without CUDA).
    pub name: String,
}

/// One process as rank 0 sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// World rank.
    pub world_rank: usize,
    /// Split colour.
    pub group: i64,
    /// Short host name.
    pub host: String,
    /// Host hash (same host ⇔ same hash).
    pub host_hash: u64,
    /// The running kernel's boot id: one machine whatever its host name or `NCCL_HOSTID` (ranks
    /// posing as hosts share it), for `--explain`; empty when unknown.
    #[serde(default)]
    pub machine: String,
    /// Process id.
    pub pid: u32,
    /// Local rank.
    pub local_rank: usize,
    /// GPUs visible to it, when known.
    pub visible: Option<i64>,
    /// The GPUs it would use.
    pub gpus: Vec<GpuRecord>,
    /// Why it cannot run, if it cannot.
    pub problem: Option<String>,
}

impl ProcessRecord {
    /// This process as it describes itself to rank 0: its `gpus`, or the problem that keeps it
    /// from running (then no GPUs).
    pub fn of_this_process(
        boot: &dyn Bootstrap,
        visible: Option<i64>,
        gpus: std::result::Result<Vec<GpuRecord>, &Error>,
    ) -> ProcessRecord {
        let (gpus, problem) = match gpus {
            Ok(gpus) => (gpus, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        ProcessRecord {
            world_rank: boot.world_rank(),
            group: boot.group().color,
            host: crate::host::short_hostname(),
            host_hash: crate::bootstrap::local::this_host_hash(),
            machine: crate::bootstrap::local::boot_id(),
            pid: std::process::id(),
            local_rank: boot.local_rank(),
            visible,
            gpus,
            problem,
        }
    }

    /// The device lines of this process: rank = world rank × GPUs per process + index.
    pub fn device_infos(&self, per_process: i64) -> Vec<DeviceInfo> {
        self.gpus
            .iter()
            .enumerate()
            .map(|(i, g)| DeviceInfo {
                rank: self.world_rank as i64 * per_process + i as i64,
                group: self.group,
                pid: self.pid,
                hostname: self.host.clone(),
                device: g.device,
                pci_domain: g.pci[0],
                pci_bus: g.pci[1],
                pci_device: g.pci[2],
                name: g.name.clone(),
            })
            .collect()
    }
}

/// Everything wrong with a launch: each process' own problem, and GPUs used by two ranks.
pub fn problems(records: &[ProcessRecord], per_process: i64) -> Vec<String> {
    let mut out: Vec<String> = records
        .iter()
        .filter_map(|r| {
            let p = r.problem.as_ref()?;
            Some(format!(
                "process {} (pid {} on {}): {}",
                r.world_rank,
                r.pid,
                r.host,
                p.replace('\n', " ")
            ))
        })
        .collect();
    let mut owner: HashMap<(u64, &str), (i64, &ProcessRecord)> = HashMap::new();
    for r in records {
        for (i, g) in r.gpus.iter().enumerate() {
            let Some(id) = g.identity.as_deref() else {
                continue;
            };
            let rank = r.world_rank as i64 * per_process + i as i64;
            match owner.get(&(r.host_hash, id)) {
                Some((first, fr)) => out.push(format!(
                    "ranks {first} (pid {}) and {rank} (pid {}) would both use GPU {id} on {} \
                     (device {} in each); NCCL refuses two ranks on one GPU. Give each process \
                     its own GPUs or start fewer processes per host",
                    fr.pid, r.pid, r.host, g.device
                )),
                None => {
                    owner.insert((r.host_hash, id), (rank, r));
                }
            }
        }
    }
    out
}

/// What each process sends rank 0: its record and what it runs.
#[derive(Serialize, Deserialize)]
struct Gathered {
    record: ProcessRecord,
    run: Fingerprint,
}

/// Gathers every record at rank 0, which checks the launch; every process then learns whether
/// anyone found a problem. Rank 0 gets all records; the others an empty list. Errors: rank 0
/// describes every problem; the others say that rank 0 stopped the run. A process that runs
/// another program, version or options than rank 0 (`run`) is the one problem named: nothing
/// else about such a launch is worth reading.
pub fn agree(
    boot: &dyn Bootstrap,
    mine: &ProcessRecord,
    run: &Fingerprint,
    per_process: i64,
) -> Result<Vec<ProcessRecord>> {
    let text = serde_json::to_string(&Gathered {
        record: mine.clone(),
        run: run.clone(),
    })
    .map_err(|e| Error::Internal(e.to_string()))?;
    let gathered = boot.gather(text)?;
    let root = boot.world_rank() == 0;
    let parsed: Vec<Gathered> = gathered
        .iter()
        .map(|t| serde_json::from_str(t))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| {
            Error::Launch(
                "wrong launch: a process sent a description rank 0 cannot read (another nccl-perf version?)"
                    .into(),
            )
        })?;
    let mismatch = parsed.iter().enumerate().skip(1).find_map(|(i, g)| {
        fingerprint::difference(0, run, i, &Fingerprint::from_peer(g.run.0.clone()))
    });
    let records: Vec<ProcessRecord> = parsed.into_iter().map(|g| clean(g.record)).collect();
    let found = match (&mismatch, root) {
        (Some(m), _) => vec![m.clone()],
        (None, true) => problems(&records, per_process),
        (None, false) => Vec::new(),
    };
    let bad = if root {
        !found.is_empty()
    } else {
        mine.problem.is_some()
    };
    let any = boot.allreduce(if bad { 1.0 } else { 0.0 }, Reduce::Max)? > 0.0;
    if !any {
        return Ok(records);
    }
    // From here every process knows that the launch stops: the job may end in order.
    after_agreement(boot, mine, root, mismatch, found).map_err(|e| Error::Agreed(Box::new(e)))
}

/// The failure each process reports once every process knows that the launch stops.
fn after_agreement(
    boot: &dyn Bootstrap,
    mine: &ProcessRecord,
    root: bool,
    mismatch: Option<String>,
    found: Vec<String>,
) -> Result<Vec<ProcessRecord>> {
    if boot.world_size() == 1 {
        return Err(Error::Launch(found.join("\n")));
    }
    if !root {
        return Err(Error::Launch(
            "stopping: rank 0 found a problem with this launch (see its error output)".into(),
        ));
    }
    if let Some(m) = mismatch {
        return Err(Error::Launch(format!("wrong launch: {m}")));
    }
    let summary = format!(
        "wrong launch, {} problem(s) across the {} processes:\n  {}",
        found.len(),
        boot.world_size(),
        found.join("\n  ")
    );
    if mine.problem.is_some() {
        // The caller reports this process' own error; the summary must not be lost.
        crate::eline!("{}: {summary}", mine.host);
    }
    Err(Error::Launch(summary))
}

/// A record from another process, safe to print: its texts cleaned of control characters.
fn clean(mut r: ProcessRecord) -> ProcessRecord {
    r.host = peer_text::host(&r.host);
    r.machine = peer_text::clean(&r.machine, 64);
    r.problem = r.problem.map(|p| peer_text::clean(&p, 1000));
    for g in &mut r.gpus {
        g.name = peer_text::clean(&g.name, 128);
        g.identity = g.identity.take().map(|i| peer_text::clean(&i, 128));
    }
    r
}

#[cfg(test)]
mod tests;
