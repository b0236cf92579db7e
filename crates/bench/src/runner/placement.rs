//! Which GPUs each process drives, and the checks that stop a wrong launch before NCCL does
//! (or hangs): too few GPUs for the processes on a host, two ranks on one GPU.
//!
//! Everything but [`agree`] is pure. Each process describes itself in a [`ProcessRecord`];
//! rank 0 gathers them, prints the device lines from them and checks the whole launch, and
//! every process learns the verdict before any communicator exists.

use super::causes;
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
    /// The exit code of its problem.
    #[serde(default)]
    pub code: Option<u8>,
    /// nccl-tests' line for its problem on stdout, where nccl-tests prints it there.
    #[serde(default)]
    pub stdout: Option<String>,
    /// A hint on its problem (too few GPUs: how many processes of its host need how many).
    #[serde(default)]
    pub hint: Option<String>,
}

impl ProcessRecord {
    /// This process as it describes itself to rank 0: its `gpus`, or the problem that keeps it
    /// from running (then no GPUs).
    pub fn of_this_process(
        boot: &dyn Bootstrap,
        visible: Option<i64>,
        gpus: std::result::Result<Vec<GpuRecord>, &Error>,
    ) -> ProcessRecord {
        let host = crate::host::short_hostname();
        let (gpus, problem, code, stdout) = match gpus {
            Ok(gpus) => (gpus, None, None, None),
            Err(e) => (
                Vec::new(),
                Some(e.to_string()),
                Some(e.exit_code()),
                e.on_stdout().then(|| e.render(&host)),
            ),
        };
        ProcessRecord {
            world_rank: boot.world_rank(),
            group: boot.group().color,
            host,
            host_hash: crate::bootstrap::local::this_host_hash(),
            machine: crate::bootstrap::local::boot_id(),
            pid: std::process::id(),
            local_rank: boot.local_rank(),
            visible,
            gpus,
            problem,
            code,
            stdout,
            hint: None,
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
    out.extend(shared_gpus(records, per_process));
    out
}

/// The GPUs that two ranks of a host would use, one line each.
pub fn shared_gpus(records: &[ProcessRecord], per_process: i64) -> Vec<String> {
    let mut out = Vec::new();
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
/// anyone found a problem, and the job's exit code. Rank 0 gets all records; the others an
/// empty list. Errors, once every process knows ([`Error::Agreed`]): in a job of several
/// processes rank 0 says each cause once for the job (`causes.rs`) and every process ends with
/// [`Error::SaidByRankZero`] and the job's code (the highest of the causes'); a process alone
/// gets its problems as one error. A process that runs another program, version or options
/// than rank 0 (`run`) is the one problem named: nothing else about such a launch is worth
/// reading.
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
    // The job's exit code, 0 when the launch is sound: rank 0 knows every process' cause;
    // the others bring their own, so that a lost rank 0 still leaves them a code.
    let own = mine.problem.as_ref().map_or(0, |_| cause_code(mine));
    let code = match root {
        true => job_code(&records, own, per_process, mismatch.is_some()),
        false => own,
    };
    let code = boot.allreduce(f64::from(code), Reduce::Max)?;
    if code <= 0.0 {
        return Ok(records);
    }
    // From here every process knows that the launch stops: the job may end in order.
    let e = match boot.world_size() {
        1 => Error::Launch(found.join("\n")),
        _ => {
            let code = code.min(255.0) as u8;
            if root {
                say_once(boot, per_process, mismatch, &records);
            }
            Error::SaidByRankZero(code)
        }
    };
    Err(Error::Agreed(Box::new(e)))
}

/// The exit code of a process' problem (a wrong launch where the record does not say).
fn cause_code(r: &ProcessRecord) -> u8 {
    r.code.unwrap_or(crate::error::code::INVALID_USAGE)
}

/// Rank 0's exit code for the job: the highest code of the processes' problems, and 6 (a
/// wrong launch) for a problem of the launch as a whole: processes that run something else,
/// a GPU that two ranks would use. 0 for none.
fn job_code(records: &[ProcessRecord], own: u8, per_process: i64, mismatch: bool) -> u8 {
    let whole = mismatch || !shared_gpus(records, per_process).is_empty();
    records
        .iter()
        .filter(|r| r.problem.is_some())
        .map(cause_code)
        .chain([own, u8::from(whole) * crate::error::code::INVALID_USAGE])
        .max()
        .unwrap_or(0)
}

/// Rank 0 of a job that stops at the agreement says why, once for the job ([`once_lines`]).
fn say_once(
    boot: &dyn Bootstrap,
    per_process: i64,
    mismatch: Option<String>,
    records: &[ProcessRecord],
) {
    let (out, err) = once_lines(boot.world_size(), per_process, mismatch, records);
    for line in out {
        println!("{line}");
    }
    for line in err {
        crate::eline!("{line}");
    }
}

/// What rank 0 says (stdout lines, stderr lines) when the agreement stops a job of `world`
/// processes: the process that runs something else (nothing else about such a launch is worth
/// reading); or each cause the processes met once, with their count and hosts (`causes.rs`;
/// nccl-tests' line for it once on stdout, one trace line after them), then each GPU that two
/// ranks would use.
fn once_lines(
    world: usize,
    per_process: i64,
    mismatch: Option<String>,
    records: &[ProcessRecord],
) -> (Vec<String>, Vec<String>) {
    let host = crate::host::short_hostname();
    if let Some(m) = mismatch {
        return (Vec::new(), vec![format!("{host}: wrong launch: {m}")]);
    }
    let causes = causes::group(records.iter().filter_map(|r| {
        Some(causes::Met {
            rank: r.world_rank,
            host: &r.host,
            problem: r.problem.as_deref()?,
            code: cause_code(r),
            stdout: r.stdout.as_deref(),
            hint: r.hint.as_deref(),
        })
    }));
    let mut out: Vec<String> = causes.iter().filter_map(|c| c.stdout.clone()).collect();
    if !out.is_empty() {
        out.push(format!(
            " .. {host} pid {}: Test failure {}:{}",
            std::process::id(),
            crate::error::source_file(file!()),
            line!()
        ));
    }
    let mut err = Vec::new();
    for c in &causes {
        err.push(c.line(crate::host::program(), world));
        err.extend(c.hint.clone());
    }
    for shared in shared_gpus(records, per_process) {
        err.push(format!("{host}: wrong launch: {shared}"));
    }
    (out, err)
}

/// A peer's text of a few lines (nccl-tests' GPU count check has two), each line cleaned.
fn clean_lines(text: &str, max: usize) -> String {
    text.lines()
        .take(4)
        .map(|l| peer_text::clean(l, max))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A record from another process, safe to print: its texts cleaned of control characters.
fn clean(mut r: ProcessRecord) -> ProcessRecord {
    r.host = peer_text::host(&r.host);
    r.machine = peer_text::clean(&r.machine, 64);
    r.problem = r.problem.map(|p| clean_lines(&p, 1000));
    r.stdout = r.stdout.map(|p| clean_lines(&p, 1000));
    r.hint = r.hint.map(|p| peer_text::clean(&p, 1000));
    for g in &mut r.gpus {
        g.name = peer_text::clean(&g.name, 128);
        g.identity = g.identity.take().map(|i| peer_text::clean(&i, 128));
    }
    r
}

#[cfg(test)]
mod tests;
