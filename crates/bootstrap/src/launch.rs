//! Which launcher started this process, read from its environment: MPI (in builds with the `mpi`
//! feature), Slurm, torchrun / Kubernetes, OpenMPI or another PMI launcher with a rendezvous
//! address given by the user, or nothing (one process). Pure: the environment is a function
//! argument, so every rule is unit-tested.
//!
//! Precedence: `NCCL_PERF_BOOTSTRAP` if set; else MPI when built with it and an MPI launcher is
//! present; else the first launcher found in the order OpenMPI, torchrun/Kubernetes, Slurm, PMI;
//! else a single process.

use super::auth::Secret;
use super::nodelist;
use crate::error::{Error, Result};
use nccl_perf_facts::environment::{
    BOOTSTRAP, BOOTSTRAP_TIMEOUT, HEARTBEAT_TIMEOUT, RENDEZVOUS, RENDEZVOUS_BIND, RENDEZVOUS_KEY,
    RENDEZVOUS_KEY_FILE, RENDEZVOUS_PORT,
};
use std::net::IpAddr;
use std::time::Duration;

mod wire_up;
pub use wire_up::{EngineLaunch, Kind, env_local_rank, mpi_marker};

/// Reads one environment variable (`None` when unset or not UTF-8).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The bootstrap timeout when `NCCL_PERF_BOOTSTRAP_TIMEOUT` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The most processes a launch may have (a world size or rank beyond is a launcher error).
pub const MAX_WORLD: usize = 65536;

/// How this process will find its peers.
#[derive(Debug, Clone, PartialEq)]
pub enum Launch {
    /// No launcher: one process.
    Single,
    /// MPI (`mpirun`, `srun --mpi=...`); only in builds with the `mpi` feature.
    Mpi,
    /// A launcher's environment and a TCP rendezvous with rank 0.
    Tcp(TcpLaunch),
    /// The launcher's wire-up (PMI-1, PMIx) to start, then the TCP rendezvous.
    Engine(Box<EngineLaunch>),
}

/// A process started by a launcher that MPI does not handle (or in a build without MPI).
#[derive(Debug, Clone, PartialEq)]
pub struct TcpLaunch {
    /// Which launcher, for messages (`slurm`, `torchrun`, ...).
    pub launcher: &'static str,
    /// This process' rank.
    pub rank: usize,
    /// Number of processes.
    pub size: usize,
    /// Local rank when the launcher gives one (else computed from host hashes).
    pub local_rank: Option<usize>,
    /// Host of rank 0 (the others connect there).
    pub host: String,
    /// Port rank 0 listens on.
    pub port: u16,
    /// The host of every rank, where the launcher's variables tell (Slurm block distribution).
    pub expected_hosts: Option<Vec<String>>,
    /// The launcher's identity of this job step (empty when it gives none); part of the job
    /// key, so rank 0 refuses processes of another job.
    pub job: String,
    /// The user's secret (`NCCL_PERF_RENDEZVOUS_KEY`, `NCCL_PERF_RENDEZVOUS_KEY_FILE`).
    pub secret: Secret,
    /// Where rank 0 listens when not on the rendezvous address (`NCCL_PERF_RENDEZVOUS_BIND`).
    pub bind: Option<IpAddr>,
    /// How long to wait for the other processes.
    pub timeout: Duration,
    /// How long a process may stay silent (no message, no heartbeat) before the others name
    /// it as stopped (`NCCL_PERF_HEARTBEAT_TIMEOUT`); `None` sends and checks no heartbeats.
    pub silence: Option<Duration>,
}

/// Variables that only an MPI launcher sets.
const MPI_MARKERS: &[&str] = &["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"];

/// Decides how to bootstrap. `mpi_built`: this binary has the `mpi` feature.
pub fn detect(env: Env, mpi_built: bool) -> Result<Launch> {
    let timeout = timeout(env)?;
    let mode = env(BOOTSTRAP.name)
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match mode.as_str() {
        "" | "auto" => {}
        "single" => return Ok(Launch::Single),
        "mpi" if mpi_built => return Ok(Launch::Mpi),
        "pmi" | "pmix" => {
            let kind = if mode == "pmi" {
                Kind::Pmi1
            } else {
                Kind::Pmix
            };
            let offered = match kind {
                Kind::Pmi1 => env("PMI_FD").is_some() || env("PMI_PORT").is_some(),
                _ => env("PMIX_RANK").is_some() || env("PMIX_NAMESPACE").is_some(),
            };
            if !offered {
                return Err(Error::Launch(format!(
                    "NCCL_PERF_BOOTSTRAP={mode}, but the launcher did not set {}",
                    if kind == Kind::Pmi1 {
                        "PMI_FD or PMI_PORT (mpiexec.hydra, srun --mpi=pmi2 do)"
                    } else {
                        "PMIX_RANK/PMIX_NAMESPACE (Open MPI's mpirun, srun --mpi=pmix do)"
                    }
                )));
            }
            return engine_launch(env, timeout, kind, None).map(|e| Launch::Engine(Box::new(e)));
        }
        "pmi2" => {
            // A PMI-2 library run outside its launcher starts as a job of one: refuse that.
            let offered = ["PALS_RANKID", "PMI_FD", "PMI_PORT", "PMI_RANK"]
                .iter()
                .any(|v| env(v).is_some());
            if !offered {
                return Err(Error::Launch(
                    "NCCL_PERF_BOOTSTRAP=pmi2, but the launcher set none of PALS_RANKID, \
                     PMI_FD, PMI_PORT, PMI_RANK (PALS' mpiexec and aprun, srun --mpi=pmi2 do)"
                        .into(),
                ));
            }
            return engine_launch(env, timeout, Kind::Pmi2Lib, None)
                .map(|e| Launch::Engine(Box::new(e)));
        }
        "mpilib" => {
            return engine_launch(env, timeout, Kind::MpiLib, None)
                .map(|e| Launch::Engine(Box::new(e)));
        }
        "mpi" => {
            return Err(Error::Launch(
                "NCCL_PERF_BOOTSTRAP=mpi, but this binary was built without MPI \
                 (build it with `cargo build --features mpi`)"
                    .into(),
            ));
        }
        "env" => {
            not_a_rankless_size(env)?;
            return from_launcher(env, timeout, Asked::Forced)?
                .map(Launch::Tcp)
                .ok_or_else(|| {
                    Error::Launch(
                        "NCCL_PERF_BOOTSTRAP=env, but no launcher variables were found \
                         (SLURM_PROCID/SLURM_NTASKS, RANK/WORLD_SIZE, JOB_COMPLETION_INDEX/WORLD_SIZE, \
                         OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/PMI_SIZE)"
                            .into(),
                    )
                });
        }
        other => {
            return Err(Error::Usage(format!(
                "NCCL_PERF_BOOTSTRAP='{other}' is not one of auto, mpi, mpilib, pmi, pmi2, pmix, env, single"
            )));
        }
    }
    if mpi_built && MPI_MARKERS.iter().any(|m| env(m).is_some()) {
        return Ok(Launch::Mpi);
    }
    // The launcher's wire-up, unless the user named the rendezvous (that wins).
    let user_address = env(RENDEZVOUS.name).is_some_and(|v| !v.trim().is_empty());
    if !user_address && let Some(kind) = Kind::from_env(env) {
        // An MPI launcher with no wire-up we speak: its variables alone where they do (one
        // process, or Slurm's node list), else its MPI library.
        if kind == Kind::MpiLib {
            if let Ok(Some(t)) = from_launcher(env, timeout, Asked::auto(mpi_built))
                && (t.size <= 1 || !t.host.is_empty())
            {
                return Ok(Launch::Tcp(t));
            }
            return engine_launch(env, timeout, kind, None).map(|e| Launch::Engine(Box::new(e)));
        }
        let fallback = from_launcher(env, timeout, Asked::auto(mpi_built))
            .ok()
            .flatten()
            .filter(|t| t.size > 1 && !t.host.is_empty());
        return engine_launch(env, timeout, kind, fallback).map(|e| Launch::Engine(Box::new(e)));
    }
    match from_launcher(env, timeout, Asked::auto(mpi_built))? {
        Some(t) => Ok(Launch::Tcp(t)),
        None => not_a_lone_rank(env)
            .and_then(|()| not_a_rankless_size(env))
            .map(|()| Launch::Single),
    }
}

/// A launch through engine `kind`: the user's settings (secret, bind address, timeouts) and
/// the launcher's local rank; rank, size and rank 0's address come from the engine.
fn engine_launch(
    env: Env,
    timeout: Duration,
    kind: Kind,
    fallback: Option<TcpLaunch>,
) -> Result<EngineLaunch> {
    let secret = Secret::from_env(
        env(RENDEZVOUS_KEY.name).as_deref(),
        env(RENDEZVOUS_KEY_FILE.name).as_deref(),
    )
    .map_err(|e| Error::Usage(e.to_string()))?;
    let base = TcpLaunch {
        launcher: match kind {
            Kind::Pmi1 => "PMI-1",
            Kind::Pmix => "PMIx",
            Kind::Pmi2Lib => "PMI-2 library",
            Kind::MpiLib => "MPI library",
        },
        rank: 0,
        size: 0,
        local_rank: env_local_rank(env),
        host: String::new(),
        // Where rank 0 listens: NCCL_PERF_RENDEZVOUS_PORT, else a port the system picks.
        port: port_var(env, RENDEZVOUS_PORT.name)?.unwrap_or(0),
        expected_hosts: None,
        job: String::new(),
        secret,
        bind: bind_address(env)?,
        timeout,
        silence: silence(env)?,
    };
    Ok(EngineLaunch {
        kind,
        base,
        fallback,
    })
}

/// Variables that give a process' rank; one above 0 with no world to join is a launch where
/// each process would run alone as rank 0 (nccl-tests' "N × rank 0").
const RANK_VARS: &[&str] = &["SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"];

/// Refuses a single-process run when a launcher says this process is rank 1 or above.
fn not_a_lone_rank(env: Env) -> Result<()> {
    let Some((var, rank)) = RANK_VARS
        .iter()
        .find_map(|v| Some((*v, num(env, v).ok()??)).filter(|(_, r)| *r > 0))
    else {
        return Ok(());
    };
    let set: Vec<String> = [
        var,
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_NTASKS",
        "WORLD_SIZE",
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
    ]
    .iter()
    .filter_map(|v| env(v).map(|x| format!("{v}={}", super::peer_text::clean(&x, 40))))
    .collect();
    Err(Error::Launch(format!(
        "wrong launch: {var}={rank} says this process is rank {rank}, but the environment gives \
         no number of processes to meet ({}), so it would run alone as rank 0. Set the \
         launcher's size variable (SLURM_NTASKS, WORLD_SIZE, ...), or \
         NCCL_PERF_BOOTSTRAP=single to run one process on purpose",
        set.join(" ")
    )))
}

/// Each launcher's size variable and the rank variables that go with it: a size above 1 whose
/// rank is missing is a launch where every process would run alone as rank 0 of 1.
const SIZE_VARS: &[(&str, &[&str])] = &[
    ("WORLD_SIZE", &["RANK", "JOB_COMPLETION_INDEX"]),
    ("OMPI_COMM_WORLD_SIZE", &["OMPI_COMM_WORLD_RANK"]),
    ("PMI_SIZE", &["PMI_RANK"]),
];

/// Refuses a single-process run when a launcher says the job has more than one process but
/// gives this one no rank (`WORLD_SIZE=4` without `RANK`, an srun step without
/// `SLURM_PROCID`).
fn not_a_rankless_size(env: Env) -> Result<()> {
    let slurm = slurm_step_size(env)?.map(|n| {
        let var = if env("SLURM_STEP_NUM_TASKS").is_some() {
            "SLURM_STEP_NUM_TASKS"
        } else if env("SLURM_NTASKS").is_some() {
            "SLURM_NTASKS"
        } else {
            "SLURM_NPROCS"
        };
        (var, n, &["SLURM_PROCID"][..])
    });
    let mut sizes = Vec::new();
    for (var, ranks) in SIZE_VARS {
        if let Some(n) = num(env, var)? {
            sizes.push((*var, n, *ranks));
        }
    }
    let Some((var, size, ranks)) = sizes
        .into_iter()
        .chain(slurm)
        .find(|(_, n, ranks)| *n > 1 && ranks.iter().all(|r| env(r).is_none()))
    else {
        return Ok(());
    };
    let set: Vec<String> = [
        "MASTER_ADDR",
        "MASTER_PORT",
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "LOCAL_RANK",
    ]
    .iter()
    .filter_map(|v| env(v).map(|x| format!(" {v}={}", super::peer_text::clean(&x, 40))))
    .collect();
    Err(Error::Launch(format!(
        "wrong launch: {var}={size} says this job has {size} processes, but the environment \
         gives this one no rank ({} not set;{}), so it would run alone as rank 0 of 1. Set \
         the launcher's rank variable, or NCCL_PERF_BOOTSTRAP=single to run one process on \
         purpose",
        ranks.join(" or "),
        if set.is_empty() {
            " no other launcher variable".to_string()
        } else {
            set.concat()
        }
    )))
}

/// The number of processes of a Slurm job step: `SLURM_STEP_NUM_TASKS`, or with a step id
/// `SLURM_NTASKS` (`SLURM_NPROCS`). With a job id but no step, this is the batch script itself
/// (one process, whatever `SLURM_NTASKS` says the job may run): `None`.
fn slurm_step_size(env: Env) -> Result<Option<usize>> {
    Ok(match num(env, "SLURM_STEP_NUM_TASKS")? {
        Some(n) => Some(n),
        None if env("SLURM_JOB_ID").is_some() && env("SLURM_STEP_ID").is_none() => None,
        None => num(env, "SLURM_NTASKS")?.or(num(env, "SLURM_NPROCS")?),
    })
}

/// `NCCL_PERF_RENDEZVOUS_BIND`: the address rank 0 listens on, when not the rendezvous one.
fn bind_address(env: Env) -> Result<Option<IpAddr>> {
    match env(RENDEZVOUS_BIND.name).filter(|v| !v.trim().is_empty()) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            Error::Usage(format!(
                "NCCL_PERF_RENDEZVOUS_BIND='{v}' is not an IP address (e.g. 0.0.0.0 or 10.0.0.5)"
            ))
        }),
    }
}

/// `launcher:id1.id2`, or empty when the launcher gives no id.
fn identity(launcher: &str, ids: &[Option<String>]) -> String {
    let ids: Vec<&str> = ids
        .iter()
        .map(|i| i.as_deref().unwrap_or("").trim())
        .collect();
    if ids.iter().all(|i| i.is_empty()) {
        return String::new();
    }
    format!("{launcher}:{}", ids.join("."))
}

/// The number of processes an MPI-style launcher says it started, and its variable, if any.
/// Used to catch an MPI library that does not match the launcher (world size 1 under mpirun).
#[cfg(any(feature = "mpi", test))]
pub fn launcher_size(env: Env) -> Option<(&'static str, usize)> {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_NTASKS",
    ]
    .into_iter()
    .find_map(|v| Some((v, env(v)?.trim().parse().ok()?)))
}

/// The heartbeat timeout when `NCCL_PERF_HEARTBEAT_TIMEOUT` is not set.
pub const DEFAULT_SILENCE: Duration = Duration::from_secs(10);

/// `NCCL_PERF_HEARTBEAT_TIMEOUT` in seconds (fractions allowed), default 10; 0 turns the
/// heartbeats off.
pub fn silence(env: Env) -> Result<Option<Duration>> {
    let Some(v) = env(HEARTBEAT_TIMEOUT.name).filter(|v| !v.trim().is_empty()) else {
        return Ok(Some(DEFAULT_SILENCE));
    };
    match v.trim().parse::<f64>() {
        Ok(s) if (0.0..=1e7).contains(&s) => Ok((s > 0.0).then(|| Duration::from_secs_f64(s))),
        _ => Err(Error::Usage(format!(
            "{}='{v}' is not a number of seconds (0 turns heartbeats off)",
            HEARTBEAT_TIMEOUT.name
        ))),
    }
}

/// `NCCL_PERF_BOOTSTRAP_TIMEOUT` in seconds (fractions allowed), default 120.
pub fn timeout(env: Env) -> Result<Duration> {
    let Some(v) = env(BOOTSTRAP_TIMEOUT.name).filter(|v| !v.trim().is_empty()) else {
        return Ok(DEFAULT_TIMEOUT);
    };
    match v.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 1e7 => Ok(Duration::from_secs_f64(s)),
        _ => Err(Error::Usage(format!(
            "NCCL_PERF_BOOTSTRAP_TIMEOUT='{v}' is not a number of seconds above 0"
        ))),
    }
}

/// An unsigned number from the environment; junk is an error rather than a silent default.
fn num(env: Env, name: &str) -> Result<Option<usize>> {
    match env(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Usage(format!("{name}='{v}' is not a non-negative integer"))),
    }
}

/// Why a rendezvous address cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// No `:port`.
    #[error("'{0}' is not host:port")]
    NoPort(String),
    /// A port that is not 1..65535.
    #[error("'{0}': the port must be 1..65535")]
    BadPort(String),
    /// Nothing before the port.
    #[error("'{0}' has no host")]
    NoHost(String),
}

/// `host:port` or `[v6]:port`.
pub fn parse_address(s: &str) -> std::result::Result<(String, u16), AddressError> {
    let s = s.trim();
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| AddressError::NoPort(s.to_string()))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| AddressError::BadPort(s.to_string()))?;
    if host.is_empty() {
        return Err(AddressError::NoHost(s.to_string()));
    }
    Ok((host.to_string(), port))
}

fn port_var(env: Env, name: &str) -> Result<Option<u16>> {
    match env(name) {
        None => Ok(None),
        Some(v) => match v.trim().parse::<u16>() {
            Ok(p) if p != 0 => Ok(Some(p)),
            _ => Err(Error::Usage(format!(
                "{name}='{v}' is not a port (1..65535)"
            ))),
        },
    }
}

/// How the launcher's variables came to be read, for the message when they give no way to meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// `NCCL_PERF_BOOTSTRAP=env`: the user asked for them alone.
    Forced,
    /// Found on their own by a binary built without MPI.
    NoMpi,
    /// Found on their own by a binary built with MPI (no MPI launcher started it).
    MpiBuilt,
}

impl Asked {
    /// Found on their own (no `NCCL_PERF_BOOTSTRAP`).
    fn auto(mpi_built: bool) -> Asked {
        if mpi_built {
            Asked::MpiBuilt
        } else {
            Asked::NoMpi
        }
    }
}

/// Finds the launcher's variables. `asked`: how (for the message when a launcher started this
/// process without a rendezvous address).
fn from_launcher(env: Env, timeout: Duration, asked: Asked) -> Result<Option<TcpLaunch>> {
    let explicit = match env(RENDEZVOUS.name).filter(|v| !v.trim().is_empty()) {
        Some(v) => Some(
            parse_address(&v).map_err(|e| Error::Usage(format!("NCCL_PERF_RENDEZVOUS: {e}")))?,
        ),
        None => None,
    };
    let port_override = port_var(env, RENDEZVOUS_PORT.name)?;
    let silence = silence(env)?;
    let launch = |launcher, rank, size, local_rank, addr: Option<(String, u16)>, job: String| {
        let (host, port) = addr.unwrap_or_default();
        TcpLaunch {
            launcher,
            rank,
            size,
            local_rank,
            host,
            port,
            expected_hosts: None,
            job,
            secret: Secret::default(),
            bind: None,
            timeout,
            silence,
        }
    };
    let found = |mut t: TcpLaunch| -> Result<Option<TcpLaunch>> {
        if t.size > MAX_WORLD {
            return Err(Error::Launch(format!(
                "{}: {} processes is more than the {MAX_WORLD} this rendezvous supports",
                t.launcher, t.size
            )));
        }
        if t.size == 0 {
            return Err(Error::Launch(format!(
                "{}: the number of processes is 0 (it must be at least 1)",
                t.launcher
            )));
        }
        if t.rank >= t.size {
            return Err(Error::Launch(format!(
                "{}: rank {} is not below the number of processes {}",
                t.launcher, t.rank, t.size
            )));
        }
        if t.size > 1 && t.host.is_empty() {
            return Err(Error::Launch(no_rendezvous(&t, asked)));
        }
        if t.size > 1 {
            t.secret = Secret::from_env(
                env(RENDEZVOUS_KEY.name).as_deref(),
                env(RENDEZVOUS_KEY_FILE.name).as_deref(),
            )
            .map_err(|e| Error::Usage(e.to_string()))?;
            t.bind = bind_address(env)?;
        }
        Ok(Some(t))
    };

    if let (Some(rank), Some(size)) = (
        num(env, "OMPI_COMM_WORLD_RANK")?,
        num(env, "OMPI_COMM_WORLD_SIZE")?,
    ) {
        let local = num(env, "OMPI_COMM_WORLD_LOCAL_RANK")?;
        let job = identity("ompi", &[env("OMPI_MCA_ess_base_jobid")]);
        return found(launch("mpirun (OpenMPI)", rank, size, local, explicit, job));
    }
    let torch_rank = num(env, "RANK")?;
    let index = num(env, "JOB_COMPLETION_INDEX")?;
    if let (Some(rank), Some(size)) = (torch_rank.or(index), num(env, "WORLD_SIZE")?) {
        let launcher = if torch_rank.is_some() {
            "torchrun-style RANK/WORLD_SIZE"
        } else {
            "Kubernetes indexed job"
        };
        let addr = match (explicit, env("MASTER_ADDR").filter(|a| !a.is_empty())) {
            (Some(a), _) => Some(a),
            (None, Some(host)) => {
                // torchrun's own store listens on MASTER_PORT: take the next port then.
                let bump = u16::from(env("TORCHELASTIC_RUN_ID").is_some());
                let port = match port_override {
                    Some(p) => p,
                    None => port_var(env, "MASTER_PORT")?
                        .unwrap_or(29500)
                        .checked_add(bump)
                        .unwrap_or(29500),
                };
                Some((host, port))
            }
            (None, None) => None,
        };
        // torchrun's default run id, `none`, is the same for every job: no identity at all.
        let run_id = env("TORCHELASTIC_RUN_ID").filter(|id| id.trim() != "none");
        let job = identity("torch", &[run_id]);
        let local = num(env, "LOCAL_RANK")?;
        return found(launch(launcher, rank, size, local, addr, job));
    }
    // A real job step (srun) sets SLURM_STEP_NUM_TASKS, or at least SLURM_STEP_ID (then
    // SLURM_NTASKS counts); not the batch script itself.
    let slurm_size = slurm_step_size(env)?;
    if let (Some(rank), Some(size)) = (num(env, "SLURM_PROCID")?, slurm_size) {
        let nodes = [
            "SLURM_STEP_NODELIST",
            "SLURM_JOB_NODELIST",
            "SLURM_NODELIST",
        ]
        .iter()
        .find_map(|v| env(v).filter(|s| !s.trim().is_empty()));
        let job_id = env("SLURM_JOB_ID").unwrap_or_default();
        let step_id = env("SLURM_STEP_ID").unwrap_or_default();
        let addr = match (explicit, &nodes) {
            (Some(a), _) => Some(a),
            (None, Some(list)) => {
                let host = nodelist::first_host(list)
                    .map_err(|e| Error::Launch(format!("Slurm node list: {e}")))?;
                Some((
                    host,
                    port_override.unwrap_or_else(|| slurm_port(&job_id, &step_id)),
                ))
            }
            (None, None) => None,
        };
        let mut t = launch(
            "slurm",
            rank,
            size,
            num(env, "SLURM_LOCALID")?,
            addr,
            identity("slurm", &[env("SLURM_JOB_ID"), env("SLURM_STEP_ID")]),
        );
        t.expected_hosts = nodes.and_then(|list| slurm_hosts(env, &list, size));
        return found(t);
    }
    if let (Some(rank), Some(size)) = (num(env, "PMI_RANK")?, num(env, "PMI_SIZE")?) {
        let t = launch("PMI (mpiexec)", rank, size, None, explicit, String::new());
        return found(t);
    }
    if let Some(rank) = num(env, "PMIX_RANK")?.filter(|r| *r > 0) {
        let t = launch("PMIx", rank, rank + 1, None, None, String::new());
        return Err(Error::Launch(no_rendezvous(&t, asked)));
    }
    Ok(None)
}

/// The message for a multi-process launch that has no way to meet: the classic "N independent
/// rank-0 runs" of a binary without MPI under mpirun. Every process stops, but only the first
/// of each node (local rank 0; rank 0 where the launcher gives no local rank) says it in full:
/// the processes cannot talk yet, and 32 (or 1024) copies of one paragraph hide the point. The
/// others say in one line who explains.
fn no_rendezvous(t: &TcpLaunch, asked: Asked) -> String {
    let why = match asked {
        Asked::Forced => "NCCL_PERF_BOOTSTRAP=env was asked for",
        Asked::NoMpi => "this binary was built without MPI",
        Asked::MpiBuilt => "no MPI launcher started it",
    };
    let size = if t.launcher == "PMIx" {
        "several".to_string()
    } else {
        t.size.to_string()
    };
    let explains = match t.local_rank {
        Some(local) => (local == 0).then_some("local rank 0 on this node"),
        None => (t.rank == 0).then_some("rank 0"),
    };
    if explains.is_none() {
        let who = if t.local_rank.is_some() {
            "local rank 0 on this node"
        } else {
            "rank 0"
        };
        return format!(
            "wrong launch: rank {} of {size} cannot meet the others ({}; {why}, no \
             NCCL_PERF_RENDEZVOUS): {who} says how to fix it",
            t.rank, t.launcher
        );
    }
    let fix = match asked {
        // The default (auto) starts through the launcher's wire-up or MPI library.
        Asked::Forced => {
            "Unset NCCL_PERF_BOOTSTRAP (every build then starts through the launcher's wire-up \
             or its MPI library)"
        }
        Asked::NoMpi => "Either use a build with MPI (`cargo build --features mpi`)",
        Asked::MpiBuilt => "Either start it through an MPI launcher (mpirun, srun --mpi=pmix)",
    };
    format!(
        "wrong launch: {} started this process as rank {} of {size}, but {why} and no rendezvous \
         address is set, so each process would run alone as rank 0 of 1. {fix}, or give every \
         process NCCL_PERF_RENDEZVOUS=<host of rank 0>:<free port> (with mpirun: -x \
         NCCL_PERF_RENDEZVOUS=...)",
        t.launcher, t.rank
    )
}

/// A port derived from the job and step ids, so concurrent steps on one node do not collide:
/// 20000..29999 (below Linux' ephemeral range).
fn slurm_port(job: &str, step: &str) -> u16 {
    let h = job
        .bytes()
        .chain([b'.'])
        .chain(step.bytes())
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
    20000 + (h % 10000) as u16
}

/// Each rank's host under Slurm's block distribution (the default), when the variables tell.
fn slurm_hosts(env: Env, list: &str, size: usize) -> Option<Vec<String>> {
    let dist = env("SLURM_DISTRIBUTION").unwrap_or_default();
    if !(dist.is_empty() || dist.starts_with("block")) {
        return None;
    }
    let counts = env("SLURM_STEP_TASKS_PER_NODE").or_else(|| env("SLURM_TASKS_PER_NODE"))?;
    if size > MAX_WORLD {
        return None;
    }
    let hosts = nodelist::expand_hosts(list).ok()?;
    let counts = nodelist::expand_counts(&counts).ok()?;
    // Expand only a distribution of exactly `size` tasks (a junk count must not allocate).
    let total = counts.iter().try_fold(0usize, |a, &n| a.checked_add(n))?;
    if total != size {
        return None;
    }
    nodelist::block_hosts(&hosts, &counts)
}

#[cfg(test)]
mod tests;
