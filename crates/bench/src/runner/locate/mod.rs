//! The locate phase (`--locate`, docs/locate.md), after the table: every rank learns where every
//! rank is (host, device, PCI id: the topology), then runs locate's schedule round by round on
//! its GPU ([`gpu`]), sharing each round's reports with every rank ([`rounds`], [`share`]), so
//! that every rank plans the same next round. World rank 0 prints the `# locate` lines as rounds
//! complete and the verdict, and writes `--locate-json`.
//!
//! How it ends: 0 when nobody is named, 9 ([`crate::error::code::SUSPECTS`]) when a suspect is;
//! a process that stopped answering is named as hung first, then the run ends with the
//! bootstrap's error as any run that lost a process does.

mod gpu;
mod rounds;
mod share;
mod window;

use crate::bootstrap::{Bootstrap, peer_text};
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::gpu::nccl::Nccl;
use crate::locate::topology::Topology;
use crate::locate::{json, output};
use crate::options::{LocateOptions, Options};
use crate::types::RedOp;
use gpu::{GpuLocal, Plan};
use rounds::Rounds;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How much longer than a round's deadline the exchange after it may have to wait for the
/// slowest rank: aborting a hung group and letting its GPU drain.
const EXCHANGE_MARGIN: Duration = Duration::from_secs(15);

/// Checks, before the benchmark runs, that `--locate` can run here: the loaded NCCL has
/// `ncclCommSplit`, the whole job is one communicator (no `NCCL_TESTS_SPLIT`), the bootstrap
/// waits long enough for a round that runs to its deadline, and (world rank 0) the
/// `--locate-json` folder is writable.
pub fn check(l: &LocateOptions, nccl: &Nccl, version: i32, boot: &dyn Bootstrap) -> Result<()> {
    if nccl.ncclCommSplit.is_none() || nccl.ncclCommInitRankConfig.is_none() {
        return Err(Error::Unsupported(format!(
            "--locate needs ncclCommSplit (NCCL 2.18 or later); the loaded NCCL is {} ({})",
            super::version::version_name(version),
            nccl.path
        )));
    }
    let group = boot.group();
    if group.size != boot.world_size() {
        return Err(Error::Usage(format!(
            "--locate splits the whole job into groups itself; it cannot run on the groups of {} \
             or {}: unset them",
            crate::environment::TESTS_SPLIT.name,
            crate::environment::TESTS_SPLIT_MASK.name
        )));
    }
    if boot.world_rank() == 0 {
        check_json(l)?;
    }
    if let Some(limit) = boot.wait_limit()
        && boot.world_size() > 1
        && l.deadline + EXCHANGE_MARGIN > limit
    {
        return Err(Error::Usage(format!(
            "--locate-deadline {} s: after a round the processes wait for each other up to {} \
             ({} s); give it at least {} s more than the deadline, or a shorter deadline",
            l.deadline.as_secs_f64(),
            crate::environment::BOOTSTRAP_TIMEOUT.name,
            limit.as_secs_f64(),
            EXCHANGE_MARGIN.as_secs()
        )));
    }
    Ok(())
}

/// Checks that `--locate-json` can be written (its folder exists and is writable), on world
/// rank 0 before the benchmark runs.
fn check_json(l: &LocateOptions) -> Result<()> {
    match &l.json {
        Some(p) => super::output::check_target(p).map_err(|e| match e {
            Error::Usage(m) => Error::Usage(
                m.replacen("-J ", "--locate-json ", 1)
                    .replace("leave out -J", "leave out --locate-json"),
            ),
            e => e,
        }),
        None => Ok(()),
    }
}

/// Where this process' GPU is, as the topology names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Place {
    /// The host as NCCL sees it: `NCCL_HOSTID` when set, else the host name.
    pub host: String,
    /// CUDA device index.
    pub device: i32,
    /// PCI bus id, `0000:1b:00.0`.
    pub pci: String,
    /// The kernel's boot id: nodes that are containers of one host, or ranks posing as hosts,
    /// share it (empty when unknown or from an older peer).
    #[serde(default)]
    pub machine: String,
}

impl Place {
    /// This process' place, for its GPU `device` at PCI `(domain, bus, device)`.
    pub fn here(device: i64, pci: (u32, u32, u32)) -> Place {
        let host = crate::environment::HOSTID
            .get()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(crate::host::short_hostname);
        Place {
            host,
            device: i32::try_from(device).unwrap_or(-1),
            pci: format!("{:04x}:{:02x}:{:02x}.0", pci.0, pci.1, pci.2),
            machine: crate::bootstrap::local::boot_id(),
        }
    }
}

/// Every rank's place, shared with every rank, as a topology (nodes in the order of their first
/// rank) that knows which nodes share a machine.
pub fn topology(boot: &dyn Bootstrap, here: &Place) -> Result<Topology> {
    let texts = boot.allgather(serde_json::to_string(here).unwrap_or_default())?;
    let places: Vec<Place> = texts
        .iter()
        .enumerate()
        .map(|(rank, t)| {
            serde_json::from_str(t).map_err(|_| {
                Error::Internal(format!(
                    "rank {rank} sent an unreadable place: {}",
                    peer_text::clean(t, 80)
                ))
            })
        })
        .collect::<Result<_>>()?;
    let machines: Vec<String> = places
        .iter()
        .map(|p| peer_text::clean(&p.machine, 64))
        .collect();
    let ranks: Vec<(String, i32, String)> = places
        .into_iter()
        .map(|p| (p.host, p.device, p.pci))
        .collect();
    Topology::from_ranks(&ranks)
        .map(|t| t.with_machines(&machines))
        .map_err(|e| Error::Internal(format!("locate topology: {e}")))
}

/// `--dry-run --locate`: every rank's place shared as in a run (without CUDA: no PCI ids), and
/// for world rank 0 the lines saying what locate would do: the nodes it sees and the groups of
/// its first round.
pub fn dry_run(l: &LocateOptions, boot: &dyn Bootstrap, device: i64) -> Result<Vec<String>> {
    let here = Place {
        pci: String::new(),
        ..Place::here(device, (0, 0, 0))
    };
    let topo = topology(boot, &here)?;
    let th = l.thresholds;
    let mut schedule = l.schedule.build(&topo, l.seed);
    let cx = crate::locate::schedule::Context {
        topo: &topo,
        history: &[],
        th: &th,
    };
    let first = schedule.next_round(&cx);
    let mut lines = vec![format!(
        "# locate: schedule {} on {} nodes x {} GPUs ({} ranks); round 1: {}",
        l.schedule.name(),
        topo.nodes(),
        topo.rails(),
        topo.world(),
        first
            .as_ref()
            .map_or("nothing to run".to_string(), |r| format!(
                "{} groups",
                r.groups.len()
            ))
    )];
    if let Some(note) = crate::locate::evidence::machines_note(&topo) {
        lines.push(output::scrub(&format!("# locate note: {note}")));
    }
    if let Some(round) = first {
        for (i, g) in round.groups.iter().enumerate().take(l.lines) {
            let ranks: Vec<String> = g.ranks.iter().map(|r| r.to_string()).collect();
            lines.push(output::scrub(&format!(
                "# locate     1 {:<6} {:>5}  {} (ranks {})",
                round.phase.name(),
                i,
                g.subject.describe(&topo),
                ranks.join(",")
            )));
        }
        if round.groups.len() > l.lines {
            lines.push(format!(
                "# locate     ... and {} more groups",
                round.groups.len() - l.lines
            ));
        }
    }
    Ok(lines)
}

/// What the locate phase needs of the run.
pub struct Job<'a> {
    /// The options (`--locate` set).
    pub opts: &'a Options,
    /// The collective.
    pub coll: &'a dyn Collective,
    /// libnccl.
    pub nccl: &'static Nccl,
    /// The processes.
    pub boot: &'a dyn Bootstrap,
    /// This process' one GPU, set up by the benchmark (buffers, stream).
    pub gpu: &'a Gpu,
    /// Where it is.
    pub place: Place,
    /// The buffers' size (`-e` after the memory clamp).
    pub max_bytes: u64,
    /// This rank's busbw of the table's row nearest the locate size, GB/s.
    pub job_busbw: Option<f64>,
}

/// The header's words for `--locate-window` (nothing when it is off).
fn window_words(window: f64) -> String {
    if window > 0.0 {
        format!(" or more (a window of {window} s at least)")
    } else {
        String::new()
    }
}

/// Runs locate after the table; the exit code (0, or 9 when a suspect is named).
pub fn run_locate(job: &Job) -> Result<Located> {
    let Some(l) = &job.opts.locate else {
        return Ok(Located::default());
    };
    let printing = job.boot.world_rank() == 0;
    let topo = topology(job.boot, &job.place)?;
    let coll = job.coll;
    let bytes = l.size_for(job.max_bytes);
    let dt = job
        .opts
        .types
        .first()
        .copied()
        .unwrap_or(crate::types::DataType::Float);
    let op = job
        .opts
        .ops
        .first()
        .copied()
        .filter(|o| o.nccl_builtin().is_some())
        .unwrap_or(RedOp::Sum);
    // Rank 0's value on every rank (with `-a 0` the ranks' own values differ, and every rank
    // must plan the same rounds).
    let shared = job
        .boot
        .allgather(job.job_busbw.map_or("none".into(), |v| v.to_string()))?;
    let job_busbw = shared.first().and_then(|v| v.parse::<f64>().ok());
    let plan = Plan {
        coll,
        dt,
        op,
        bytes,
        max_bytes: job.max_bytes,
        unalign: job.opts.unalign.max(0) as u64,
        warmup: u32::try_from(job.opts.warmup_iters).unwrap_or(1),
        iters: l.iters,
        window: l.window,
        job_busbw,
    };
    let busbw = |n: usize, seconds: f64| {
        let s = crate::runner::Shape::of(coll, n, job.max_bytes, dt, op, 0, bytes);
        let (b, factor) = coll.bandwidth(&s.counts, dt.size(), n);
        b / 1e9 / seconds * factor
    };
    let local = GpuLocal::new(job.nccl, job.boot, job.gpu, plan, &busbw);
    let mut rounds = Rounds::new(local, job.boot, job.opts.average, &busbw);
    if printing {
        say(&[format!(
            "# locate: schedule {}, {} nodes, {} ranks, {} B of {} {} per group, {} timed \
             operations{}, deadline {} s",
            l.schedule.name(),
            topo.nodes(),
            topo.world(),
            bytes,
            dt.name(),
            coll.name(),
            l.iters,
            window_words(l.window),
            l.deadline.as_secs_f64()
        )]);
        say(&[output::header()]);
    }
    let config = crate::locate::Config {
        job_busbw,
        ..l.config()
    };
    let report = crate::locate::run_schedule(&mut rounds, &topo, &config, &mut |rec, t| {
        if printing {
            say(&output::round_lines(rec, t, l.lines));
        }
    })
    .map_err(|e| Error::Usage(format!("--locate: {e}")))?;
    let (local, fatal) = rounds.into_parts();
    // The verdict first: after a lost process the watchdog ends this one soon.
    if printing {
        say(&output::verdict_lines(&report, &topo));
        if let Some(path) = &l.json {
            let doc = json::LocateJson {
                collective: Some(coll.name().to_string()),
                datatype: Some(dt.name().to_string()),
                bytes: Some(bytes),
                ..json::document(&report, &topo)
            };
            let written = write_json(path, &doc)?;
            say(&[format!("# locate record: {}", written.display())]);
        }
    }
    if let Some(e) = fatal {
        // The communicators are aborted as they go: an orderly teardown could wait for a
        // process that is gone.
        drop(local);
        return Err(e);
    }
    local.close()?;
    Ok(Located {
        code: report.exit_code(),
        suspects: report
            .verdicts
            .iter()
            .map(|v| v.culprit.describe(&topo))
            .collect(),
    })
}

/// What a locate run ended with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Located {
    /// Its exit code (5 when a suspect is named).
    pub code: u8,
    /// The suspects, as the `# locate suspect:` lines name them.
    pub suspects: Vec<String>,
}

/// Prints lines on stdout at once (a run that is cut short keeps the rounds printed so far).
fn say(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    let _ = out.flush();
}

/// Writes the record to `path` (never over an existing file: `path.0`, `path.1`, ... as `-J`
/// does); the path written.
fn write_json(path: &Path, doc: &json::LocateJson) -> Result<PathBuf> {
    let cannot = |why: &dyn std::fmt::Display| {
        Error::Internal(format!(
            "--locate-json {}: cannot write the record ({why})",
            path.display()
        ))
    };
    let (mut file, actual) =
        crate::report::output_file::create_exclusive(path).map_err(|e| cannot(&e))?;
    let text = serde_json::to_string_pretty(doc).map_err(|e| cannot(&e))?;
    file.write_all(text.as_bytes())
        .and_then(|_| file.write_all(b"\n"))
        .and_then(|_| file.flush())
        .map_err(|e| cannot(&e))?;
    Ok(actual)
}
