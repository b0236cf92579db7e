//! Engines: the wire-up a launcher already runs (PMI-1 under `mpiexec.hydra` and `srun
//! --mpi=pmi2`, PMIx under Open MPI's `mpirun` and `srun --mpi=pmix`, the PMI-2 library under
//! Cray's PALS, the MPI library where none of these is reached), spoken or loaded at run
//! time and used only to start: rank 0 listens on a port of its own choosing, publishes where
//! it listens and a fresh one-time token through the engine, a fence makes it visible, and
//! every process joins our authenticated TCP rendezvous with them (`form`). Later collectives
//! and heartbeats stay on our own connections. The unsafe code (the inherited socket, the
//! libraries) is fenced in `ffi.rs`.

#[allow(unsafe_code)]
mod ffi;
mod mpilib;
mod on_thread;
mod pmi1;
mod pmi2;
mod pmix;
pub mod search;
#[cfg(test)]
mod test_env;

pub(crate) use pmi1::{hex, unhex};

use crate::error::{Error, Result};
pub use crate::launch::Kind;
use crate::launch::{Env, TcpLaunch};
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A connected stream with a bound on every read and write.
pub trait Conn: Read + Write + Send {
    /// Every read and write from now on gives up after `d`.
    fn set_timeouts(&self, d: Duration) -> std::io::Result<()>;
}

impl Conn for UnixStream {
    fn set_timeouts(&self, d: Duration) -> std::io::Result<()> {
        let d = Some(d.max(Duration::from_millis(1)));
        self.set_read_timeout(d)?;
        self.set_write_timeout(d)
    }
}

impl Conn for TcpStream {
    fn set_timeouts(&self, d: Duration) -> std::io::Result<()> {
        let d = Some(d.max(Duration::from_millis(1)));
        self.set_read_timeout(d)?;
        self.set_write_timeout(d)
    }
}

/// What the processes of a job need of a launcher's wire-up to start.
pub trait Engine {
    /// The engine and where it was reached, for messages.
    fn name(&self) -> String;
    /// This process' rank.
    fn rank(&self) -> usize;
    /// Number of processes.
    fn size(&self) -> usize;
    /// The launcher's identity of the job (its key-value space or namespace).
    fn job(&self) -> String;
    /// Publishes `value` under `key` for this process (visible to others after [`Engine::fence`]).
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()>;
    /// Commits this process' puts and waits for every process to do so.
    fn fence(&mut self) -> Result<()>;
    /// What `rank` published under `key`.
    fn get(&mut self, rank: usize, key: &str) -> Result<Vec<u8>>;
    /// Leaves the engine cleanly (the process goes on).
    fn finalize(&mut self) -> Result<()>;
    /// Asks the launcher to end the whole job with `code`.
    fn abort(&mut self, code: i32, msg: &str);
    /// Gives the waits from now on at least `d` more (a goodbye after the deadline ran out).
    fn grace(&mut self, d: Duration);
}

/// The first of `places` that `open` opens, with its path; else what each place gave (a path
/// that does not exist, or why it did not open). Absolute paths are checked for existence
/// first; bare names go to the loader's search.
fn first_opened<L>(
    (places, notes): (Vec<std::path::PathBuf>, Vec<String>),
    open: impl Fn(&std::path::Path) -> std::result::Result<L, String>,
) -> std::result::Result<(L, String), Vec<String>> {
    search::say_once(&notes);
    let mut tried = Vec::new();
    for p in &places {
        if p.is_absolute() && !p.exists() {
            tried.push(p.display().to_string());
            continue;
        }
        match open(p) {
            Ok(l) => return Ok((l, p.display().to_string())),
            Err(e) => tried.push(e),
        }
    }
    Err(tried)
}

/// Checks the rank and size a launcher library gave (`engine` names it) against what the
/// launcher's own variables say, where it set them: a library of another launcher or MPI
/// initialises a job of one (each process a lone rank 0) and must not pass for this launch.
/// `lib_var` is the variable that names the right library.
fn agrees_with_launcher(
    engine: &str,
    env: Env,
    rank: usize,
    size: usize,
    lib_var: &str,
) -> Result<()> {
    let said = |vars: &[&'static str]| {
        vars.iter().find_map(|v| {
            let n = env(v)?.trim().parse::<usize>().ok()?;
            Some((*v, n))
        })
    };
    let sizes = said(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]).filter(|(_, n)| *n != size);
    let ranks =
        said(&["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PALS_RANKID"]).filter(|(_, n)| *n != rank);
    match sizes.or(ranks) {
        None => Ok(()),
        Some((var, n)) => Err(Error::Launch(format!(
            "{engine}: the library says rank {rank} of {size} process(es) but the launcher set \
             {var}={n} (a library of another launcher or MPI?); set {lib_var} to the launcher's own"
        ))),
    }
}

/// How long a goodbye (finalize, abort) may take after a failure.
const GOODBYE: Duration = Duration::from_secs(1);

/// Whether `err` says only that the engine's library is not installed (then a launcher's own
/// variables may still do).
pub fn unavailable(err: &Error) -> bool {
    matches!(err, Error::Launch(m) if m.starts_with(pmix::NOT_FOUND) || mpilib::not_found(m))
}

/// Opens the engine `kind` of this process' launcher; every wait ends by `deadline`.
pub fn open(kind: Kind, env: Env, deadline: Instant) -> Result<Box<dyn Engine>> {
    match kind {
        Kind::Pmi1 => open_pmi1(env, deadline),
        Kind::Pmix => open_pmix(env, deadline),
        Kind::Pmi2Lib => open_pmi2(env, deadline),
        Kind::MpiLib => {
            let why = crate::launch::mpi_marker(env).unwrap_or("NCCL_PERF_BOOTSTRAP=mpilib");
            mpilib::MpiLibEngine::open(env, deadline, why, None).map(|e| Box::new(e) as _)
        }
    }
}

/// The MPI library, opened because `why` (an MPI launcher's variable) is set.
fn open_mpilib(
    env: Env,
    deadline: Instant,
    why: &str,
    before: Option<mpilib::Before>,
) -> Result<Box<dyn Engine>> {
    mpilib::MpiLibEngine::open(env, deadline, why, before).map(|e| Box::new(e) as _)
}

/// PMIx; where its library is missing, or found but does not start (an Open MPI with PMIx
/// inside its own libraries beside a system `libpmix.so.2` of another version), and an MPI
/// launcher's variable is set, the MPI library.
fn open_pmix(env: Env, deadline: Instant) -> Result<Box<dyn Engine>> {
    let marker = crate::launch::mpi_marker(env);
    match (pmix::find(env), marker) {
        (Ok(lib), _) => or_mpilib(
            pmix::PmixEngine::start(lib, env, deadline).map(|e| Box::new(e) as _),
            marker,
            |why| open_mpilib(env, deadline, why, None),
        ),
        (Err(tried), Some(why)) => {
            let before = mpilib::Before {
                lib: pmix::PMIX_LIB_NAME,
                var: nccl_perf_facts::environment::PMIX_LIB.name,
                tried: &tried,
            };
            open_mpilib(env, deadline, why, Some(before))
        }
        (Err(_), None) => pmix::PmixEngine::open(env, deadline).map(|e| Box::new(e) as _),
    }
}

/// The PMI-2 library (Cray PMI under PALS); as for PMIx, the MPI library where it is missing
/// or does not start and an MPI launcher's variable (`PALS_RANKID`) is set.
fn open_pmi2(env: Env, deadline: Instant) -> Result<Box<dyn Engine>> {
    let marker = crate::launch::mpi_marker(env);
    match (pmi2::find(env), marker) {
        (Ok((lib, path)), _) => or_mpilib(
            pmi2::Pmi2Engine::start(lib, path, env, deadline).map(|e| Box::new(e) as _),
            marker,
            |why| open_mpilib(env, deadline, why, None),
        ),
        (Err(tried), Some(why)) => {
            let before = mpilib::Before {
                lib: pmi2::PMI2_LIBS[0],
                var: nccl_perf_facts::environment::PMI2_LIB.name,
                tried: &tried,
            };
            open_mpilib(env, deadline, why, Some(before))
        }
        (Err(tried), None) => Err(pmi2::missing("NCCL_PERF_BOOTSTRAP=pmi2", &tried)),
    }
}

/// After an engine whose library was found (`first`): itself when it started; else, when the
/// library refused (not a timeout: no time is left for another) and an MPI launcher's
/// variable `marker` is set, the MPI library (`mpi`), rank 0 saying why. Both failing: one
/// line naming both.
fn or_mpilib(
    first: Result<Box<dyn Engine>>,
    marker: Option<&str>,
    mpi: impl FnOnce(&str) -> Result<Box<dyn Engine>>,
) -> Result<Box<dyn Engine>> {
    let err = match first {
        Ok(e) => return Ok(e),
        Err(e) => e,
    };
    let why = match (&err, marker) {
        (Error::Launch(_), Some(why)) => why,
        _ => return Err(err),
    };
    match mpi(why) {
        Ok(e) => {
            if e.rank() == 0 {
                nccl_perf_facts::eline!(
                    "nccl-perf: note: {err}; starting through the {} instead ({why} is set)",
                    e.name()
                );
            }
            Ok(e)
        }
        Err(Error::Launch(m)) => Err(Error::Launch(format!(
            "{err}; then the MPI library ({why} is set): {m}"
        ))),
        Err(other) => Err(other),
    }
}

/// The launcher name a formed job reports (the dry run's bootstrap line), from the engine's.
fn launcher_of(name: &str) -> &'static str {
    if name.starts_with("PMIx") {
        "PMIx"
    } else if name.starts_with("PMI-2 library") {
        pmi2::PMI2
    } else if name.starts_with("MPI library (Open MPI") {
        mpilib::OPEN_MPI
    } else if name.starts_with("MPI library") {
        mpilib::MPICH
    } else {
        "PMI-1"
    }
}

fn open_pmi1(env: Env, deadline: Instant) -> Result<Box<dyn Engine>> {
    let num = |k: &str| -> Result<Option<usize>> {
        match env(k) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                Error::Launch(format!(
                    "PMI-1: {k}='{}' is not a number",
                    crate::peer_text::clean(&v, 40)
                ))
            }),
        }
    };
    let (rank, size) = (num("PMI_RANK")?, num("PMI_SIZE")?);
    if let Some(fd) = env("PMI_FD") {
        let n: i32 = fd.trim().parse().map_err(|_| {
            Error::Launch(format!(
                "PMI-1: PMI_FD='{}' is not a file descriptor",
                crate::peer_text::clean(&fd, 40)
            ))
        })?;
        let owned = ffi::adopt_socket(n).map_err(|e| {
            Error::Launch(format!(
                "PMI-1: {e}; set NCCL_PERF_RENDEZVOUS=host:port or NCCL_PERF_BOOTSTRAP=env to meet without it"
            ))
        })?;
        let conn = Box::new(UnixStream::from(owned));
        let p = pmi1::Pmi1::start(conn, format!("PMI_FD={n}"), rank, size, None, deadline)?;
        return Ok(Box::new(p));
    }
    let port = env("PMI_PORT").unwrap_or_default();
    let (host, p) = crate::launch::parse_address(&port)
        .map_err(|e| Error::Launch(format!("PMI-1: PMI_PORT: {e}")))?;
    let left = deadline.saturating_duration_since(Instant::now());
    let addrs = crate::tcp::resolve_all(&host, p)
        .map_err(|e| Error::Launch(format!("PMI-1: cannot resolve PMI_PORT={port}: {e}")))?;
    let mut last = String::from("no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, left.max(Duration::from_millis(10))) {
            Ok(s) => {
                let id = env("PMI_ID");
                let origin = format!("PMI_PORT={}", crate::peer_text::clean(&port, 80));
                let p = pmi1::Pmi1::start(
                    Box::new(s),
                    origin,
                    rank,
                    size,
                    Some(id.as_deref().unwrap_or("0")),
                    deadline,
                )?;
                return Ok(Box::new(p));
            }
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    Err(Error::Launch(format!(
        "PMI-1: cannot connect to PMI_PORT={port} ({last})"
    )))
}

/// The key rank 0 publishes its rendezvous under.
const KEY: &str = "rv";
/// The first word of what rank 0 publishes (its format's version).
const TAG: &str = "nccl-perf-rv1";

/// Where rank 0 listens and the one-time token, as published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// Rank 0's host name.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Addresses of its interfaces, tried after what `host` resolves to.
    pub addrs: Vec<IpAddr>,
    /// The token (hex), the job's secret.
    pub token: String,
}

impl Published {
    /// The published text.
    pub fn encode(&self) -> String {
        let addrs: Vec<String> = self.addrs.iter().map(|a| a.to_string()).collect();
        format!(
            "{TAG} port={} host={} addrs={} token={}",
            self.port,
            self.host,
            addrs.join(","),
            self.token
        )
    }

    /// Reads rank 0's publication: its address, or the error it could not listen with.
    pub fn decode(text: &str) -> std::result::Result<Published, String> {
        let mut w = text.split_ascii_whitespace();
        if w.next() != Some(TAG) {
            return Err("not nccl-perf's rendezvous record".into());
        }
        let (mut host, mut port, mut addrs, mut token) = (None, None, Vec::new(), None);
        for word in w {
            match word.split_once('=') {
                Some(("error", e)) => {
                    let bytes = pmi1::unhex(e).unwrap_or_default();
                    return Err(format!(
                        "rank 0 could not listen: {}",
                        crate::peer_text::clean(&String::from_utf8_lossy(&bytes), 300)
                    ));
                }
                Some(("host", h)) if !h.is_empty() => host = Some(crate::peer_text::host(h)),
                Some(("port", p)) => port = p.parse::<u16>().ok().filter(|p| *p != 0),
                Some(("addrs", a)) => {
                    addrs = a
                        .split(',')
                        .filter_map(|x| x.parse().ok())
                        .take(16)
                        .collect();
                }
                Some(("token", t))
                    if t.len() >= 32 && t.len() <= 128 && pmi1::unhex(t).is_some() =>
                {
                    token = Some(t.to_string());
                }
                _ => {}
            }
        }
        match (host, port, token) {
            (Some(host), Some(port), Some(token)) => Ok(Published {
                host,
                port,
                addrs,
                token,
            }),
            _ => Err(format!(
                "an incomplete record: '{}'",
                crate::peer_text::clean(text, 200)
            )),
        }
    }

    fn error(msg: &str) -> String {
        format!("{TAG} error={}", pmi1::hex(msg.as_bytes()))
    }
}

/// What formation gives the TCP rendezvous.
pub struct Formed {
    /// The launch, rank and size from the engine, rank 0's address and the token as secret.
    pub launch: TcpLaunch,
    /// Rank 0's listening sockets (already bound: the port was chosen by the system).
    pub listeners: Option<Vec<TcpListener>>,
    /// Rank 0's published interface addresses (the others try them after its host name).
    pub addrs: Vec<IpAddr>,
}

/// Forms the job through `engine`: rank 0 listens on a port the system picks and publishes it
/// with a fresh token; a fence; the others read it. The engine is finalized before returning,
/// also on failure (the caller reports the error and exits), or aborted where it cannot be.
pub fn form(engine: &mut dyn Engine, base: &TcpLaunch) -> Result<Formed> {
    let r = form_inner(engine, base);
    if r.is_err() {
        engine.grace(GOODBYE);
    }
    match (r, engine.finalize()) {
        (Ok(f), Ok(())) => Ok(f),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), Ok(())) => Err(e),
        // The engine is past a clean goodbye: ask the launcher to end the job, so that nobody
        // waits for this process. The launcher may kill this process at once: say why first.
        // Said once: the caller ends with it without saying it again.
        (Err(e), Err(_)) => {
            nccl_perf_facts::eline!("{}: {e}", crate::local::short_hostname());
            engine.grace(GOODBYE);
            engine.abort(1, &e.to_string());
            Err(Error::Said(Box::new(e)))
        }
    }
}

fn form_inner(engine: &mut dyn Engine, base: &TcpLaunch) -> Result<Formed> {
    let (rank, size) = (engine.rank(), engine.size());
    let mut launch = base.clone();
    launch.launcher = launcher_of(&engine.name());
    launch.rank = rank;
    launch.size = size;
    launch.job = engine.job();
    if size <= 1 {
        return Ok(Formed {
            launch,
            listeners: None,
            addrs: Vec::new(),
        });
    }
    let mut listeners = None;
    let published = if rank == 0 {
        match crate::tcp::listen_any_port(base.bind, base.port) {
            Ok((ls, port)) => {
                let token =
                    pmi1::hex(&crate::auth::nonce().map_err(|e| Error::Internal(e.to_string()))?);
                let p = Published {
                    host: full_hostname(),
                    port,
                    addrs: own_addresses(base.bind),
                    token,
                };
                listeners = Some(ls);
                engine.put(KEY, p.encode().as_bytes())?;
                engine.fence()?;
                p
            }
            Err(e) => {
                engine.put(KEY, Published::error(&e.to_string()).as_bytes())?;
                engine.fence()?;
                return Err(e);
            }
        }
    } else {
        engine.fence()?;
        let bytes = engine.get(0, KEY)?;
        Published::decode(&String::from_utf8_lossy(&bytes)).map_err(|why| {
            Error::Launch(format!("{}: rank 0's rendezvous: {why}", engine.name()))
        })?
    };
    launch.host = published.host.clone();
    launch.port = published.port;
    launch.secret = base.secret.with_token(published.token.as_bytes());
    Ok(Formed {
        launch,
        listeners,
        addrs: published.addrs,
    })
}

/// This host's name as the system has it (not shortened: other hosts resolve it).
fn full_hostname() -> String {
    let uts = rustix::system::uname();
    let n = uts.nodename().to_string_lossy().into_owned();
    if n.is_empty() { "localhost".into() } else { n }
}

/// The addresses rank 0 publishes beside its name: the one `bind` names, else the addresses
/// its name resolves to that are not loopback, and the source address of its default route
/// (found by connecting a UDP socket, which sends nothing).
fn own_addresses(bind: Option<IpAddr>) -> Vec<IpAddr> {
    if let Some(ip) = bind.filter(|ip| !ip.is_unspecified()) {
        return vec![ip];
    }
    let mut out: Vec<IpAddr> = crate::tcp::resolve_all(&full_hostname(), 1)
        .unwrap_or_default()
        .into_iter()
        .map(|a| a.ip())
        .filter(|ip| !ip.is_loopback())
        .collect();
    for probe in ["192.0.2.1:9", "[2001:db8::1]:9"] {
        let any = if probe.starts_with('[') {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        };
        if let Ok(s) = std::net::UdpSocket::bind(any)
            && s.connect(probe).is_ok()
            && let Ok(a) = s.local_addr()
            && !a.ip().is_unspecified()
            && !a.ip().is_loopback()
            && !out.contains(&a.ip())
        {
            out.push(a.ip());
        }
    }
    out.truncate(8);
    out
}

#[cfg(test)]
mod tests;
