//! The MPI library the launcher came with, opened at run time (`ffi/mpi.rs`), never linked,
//! and used only to start: for launchers whose PMIx or PMI-1 we cannot reach (Open MPI builds
//! that bundle PMIx inside `libopen-pal`, Cray/HPE MPICH). Puts are kept here; a fence is two
//! `MPI_Allgather`s (every record's length, then the records padded to the longest), after
//! which every process reads any other's record. All MPI calls run on one helper thread (the
//! one that initialised MPI, as `MPI_THREAD_FUNNELED` asks), each given up at the deadline:
//! the process then reports and exits, and the launcher ends the rest of the job (an MPI call
//! may wait forever for a peer that died).

use super::Engine;
use super::ffi::mpi::{Abi, Mpi};
use super::on_thread::OnThread;
use crate::error::{Error, Result};
use crate::launch::Env;
use nccl_perf_facts::environment::MPI_LIB;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Open MPI's library.
pub const OPEN_MPI_LIB: &str = "libmpi.so.40";
/// The MPICH ABI's library (MPICH, Intel MPI, Cray MPICH, MVAPICH) and Debian's name of it.
pub const MPICH_LIBS: [&str; 2] = ["libmpi.so.12", "libmpich.so.12"];
/// How the engine names itself for the dry run's bootstrap line, by ABI.
pub const OPEN_MPI: &str = "MPI library (Open MPI)";
/// As [`OPEN_MPI`], for the MPICH ABI.
pub const MPICH: &str = "MPI library (MPICH ABI)";
/// The longest record a process may publish.
const MAX_RECORD: u64 = 1 << 16;

/// The library names to try, the launcher's own family first.
fn names(env: Env) -> Vec<&'static str> {
    if env("OMPI_COMM_WORLD_SIZE").is_some() || env("OPAL_PREFIX").is_some() {
        vec![OPEN_MPI_LIB, MPICH_LIBS[0], MPICH_LIBS[1]]
    } else {
        vec![MPICH_LIBS[0], MPICH_LIBS[1], OPEN_MPI_LIB]
    }
}

/// Where the library is looked for, in order: `NCCL_PERF_MPI_LIB` alone when set; else the
/// loader's own search (the bare names), then `lib/`, `lib64/`, `lib/<multiarch>/` and
/// `lib/release/` under `$OPAL_PREFIX`, `$MPI_HOME`, `$I_MPI_ROOT` and the folder above the
/// `mpirun` or `mpiexec` found in an absolute `PATH` entry. Places a stranger could have
/// planted are left out ([`super::search`]).
#[cfg(test)]
pub fn library_places(env: Env) -> Vec<PathBuf> {
    library_search(env).0
}

/// [`library_places`] and a note for each place left out ([`super::search`]).
pub fn library_search(env: Env) -> (Vec<PathBuf>, Vec<String>) {
    if let Some(p) = env(MPI_LIB.name).filter(|p| !p.trim().is_empty()) {
        return (vec![PathBuf::from(p)], Vec::new());
    }
    let names = names(env);
    let mut out: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
    let mut prefixes: Vec<PathBuf> = ["OPAL_PREFIX", "MPI_HOME", "I_MPI_ROOT"]
        .iter()
        .filter_map(|v| env(v).filter(|p| !p.is_empty()).map(PathBuf::from))
        .collect();
    let (prefix, mut notes) = super::search::launcher_prefix(env, &["mpirun", "mpiexec"]);
    prefixes.extend(prefix);
    let arch = format!("{}-linux-gnu", std::env::consts::ARCH);
    for p in prefixes {
        for sub in ["lib", "lib64", &format!("lib/{arch}"), "lib/release"] {
            for n in &names {
                let f = p.join(sub).join(n);
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
    }
    let out = super::search::trusted_places(out, &mut notes);
    (out, notes)
}

/// The library the launcher's family uses, for messages.
fn wanted(env: Env) -> &'static str {
    names(env)[0]
}

/// Whether `msg` is an engine's "no library found" (a launcher's variables may still do):
/// `<variable> is set but ... found (...)`, the variable one word (not a longer message that
/// quotes one).
pub fn not_found(msg: &str) -> bool {
    matches!(msg.split_once(" is set but "), Some((head, tail)) if !head.contains(' ') && tail.contains(" found ("))
}

/// The library another engine looked for first and did not find (PMIx's, the PMI-2 one).
#[derive(Debug, Clone, Copy)]
pub struct Before<'a> {
    /// Its file name.
    pub lib: &'a str,
    /// The variable that names it.
    pub var: &'a str,
    /// Where it was looked for.
    pub tried: &'a [String],
}
/// Finds and opens the library: its handle and path, or what was tried.
fn find(env: Env) -> std::result::Result<(Mpi, String), Vec<String>> {
    super::first_opened(library_search(env), Mpi::open)
}

/// The error for a library not found: `why` is what made us look (a launcher's variable or
/// the forced mode), `before` the library another engine looked for first, if it did.
fn missing(env: Env, why: &str, before: Option<Before>, tried: &[String]) -> Error {
    let lib = wanted(env);
    let (what, mut places, set) = match before {
        Some(b) => (
            format!("neither {} nor {lib} was", b.lib),
            b.tried.to_vec(),
            format!("{}=/path/to/{}, ", b.var, b.lib),
        ),
        None => (format!("{lib} was not"), Vec::new(), String::new()),
    };
    places.extend_from_slice(tried);
    Error::Launch(format!(
        "{why} is set but {what} found ({}); set {set}{}=/path/to/{lib} or \
         NCCL_PERF_RENDEZVOUS=host:port",
        places.join("; "),
        MPI_LIB.name
    ))
}

/// A session of the MPI library.
pub struct MpiLibEngine {
    lib: OnThread<Mpi>,
    abi: Abi,
    path: String,
    rank: usize,
    size: usize,
    job: String,
    deadline: Instant,
    /// This engine initialised MPI (then it finalizes it).
    ours: bool,
    finalized: bool,
    aborted: bool,
    pending: Vec<(String, Vec<u8>)>,
    records: Vec<Vec<u8>>,
}

impl MpiLibEngine {
    /// Finds and opens the library, initialises MPI and reads rank and size. `why` names
    /// what asked for it (for messages); `before`: another engine's library was looked for
    /// first and not found.
    pub fn open(
        env: Env,
        deadline: Instant,
        why: &str,
        before: Option<Before>,
    ) -> Result<MpiLibEngine> {
        let (lib, path) = find(env).map_err(|t| missing(env, why, before, &t))?;
        let abi = lib.abi();
        let lib = OnThread::start(lib, "MPI", "nccl-perf-mpi")?;
        let job = [
            "PMIX_NAMESPACE",
            "OMPI_MCA_ess_base_jobid",
            "PALS_APID",
            "PMI_JOBID",
        ]
        .iter()
        .find_map(|v| env(v).filter(|x| !x.is_empty()))
        .map(|id| format!("mpi:{}", crate::peer_text::clean(&id, 80)))
        .unwrap_or_default();
        let mut e = MpiLibEngine {
            lib,
            abi,
            path,
            rank: 0,
            size: 0,
            job,
            deadline,
            ours: false,
            finalized: false,
            aborted: false,
            pending: Vec::new(),
            records: Vec::new(),
        };
        let (ours, (rank, size)) = e.call("MPI_Init", |m| Ok((m.init()?, m.rank_size()?)))?;
        (e.ours, e.rank, e.size) = (ours, rank, size);
        if size == 0 || size > crate::launch::MAX_WORLD || rank >= size {
            return Err(Error::Launch(format!(
                "{}: rank {rank} of size {size} is not a launch",
                e.name()
            )));
        }
        super::agrees_with_launcher(&e.name(), env, rank, size, MPI_LIB.name)?;
        Ok(e)
    }

    /// Runs `f` on the MPI thread, giving up at the deadline.
    fn call<T: Send + 'static>(
        &self,
        what: &str,
        f: impl FnOnce(&Mpi) -> std::result::Result<T, String> + Send + 'static,
    ) -> Result<T> {
        self.lib.call(&self.name(), self.deadline, what, f)
    }
}

/// Every put of a process as one record: `key=hex` lines.
pub fn encode(puts: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut s = String::new();
    for (k, v) in puts {
        s.push_str(&format!("{k}={}\n", super::pmi1::hex(v)));
    }
    s.into_bytes()
}

/// The value under `key` in a record.
pub fn lookup(record: &[u8], key: &str) -> Option<Vec<u8>> {
    String::from_utf8_lossy(record)
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .and_then(super::pmi1::unhex)
}

/// Two allgathers: every record's length, then the records padded to the longest.
fn gather(m: &Mpi, mine: Vec<u8>, size: usize) -> std::result::Result<Vec<Vec<u8>>, String> {
    let mut lens = vec![0u8; 8 * size];
    m.allgather(&(mine.len() as u64).to_le_bytes(), &mut lens, size)?;
    let lens: Vec<u64> = lens
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    let longest = lens.iter().copied().max().unwrap_or(0);
    if longest > MAX_RECORD {
        return Err(format!("a process published {longest} bytes"));
    }
    let longest = longest as usize;
    if longest == 0 {
        return Ok(vec![Vec::new(); size]);
    }
    let mut padded = mine;
    padded.resize(longest, 0);
    let mut all = vec![0u8; longest * size];
    m.allgather(&padded, &mut all, size)?;
    Ok(all
        .chunks_exact(longest)
        .zip(lens)
        .map(|(c, n)| c[..n as usize].to_vec())
        .collect())
}

impl Engine for MpiLibEngine {
    fn name(&self) -> String {
        let abi = match self.abi {
            Abi::OpenMpi => "Open MPI",
            Abi::Mpich => "MPICH ABI",
        };
        format!("MPI library ({abi}: {})", self.path)
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn job(&self) -> String {
        self.job.clone()
    }
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.pending.push((key.to_string(), value.to_vec()));
        Ok(())
    }
    fn fence(&mut self) -> Result<()> {
        let mine = encode(&std::mem::take(&mut self.pending));
        let size = self.size;
        self.records = self.call("MPI_Allgather", move |m| gather(m, mine, size))?;
        Ok(())
    }
    fn get(&mut self, rank: usize, key: &str) -> Result<Vec<u8>> {
        self.records
            .get(rank)
            .and_then(|r| lookup(r, key))
            .ok_or_else(|| {
                Error::Launch(format!("{}: rank {rank} published no {key}", self.name()))
            })
    }
    fn finalize(&mut self) -> Result<()> {
        if !self.ours || self.finalized || self.aborted {
            return Ok(());
        }
        self.call("MPI_Finalize", |m| m.finalize())?;
        self.finalized = true;
        Ok(())
    }
    fn grace(&mut self, d: Duration) {
        self.deadline = self.deadline.max(Instant::now() + d);
    }
    fn abort(&mut self, code: i32, _msg: &str) {
        if self.finalized || std::mem::replace(&mut self.aborted, true) {
            return;
        }
        let _ = self.call("MPI_Abort", move |m| m.abort(code));
    }
}

#[cfg(test)]
mod tests;
