//! PMIx through the launcher's own `libpmix.so.2`, opened at run time (`ffi.rs`): init, the
//! job's size, put, commit and a fence that collects the data, get, finalize, abort. Each call
//! that waits on other processes runs on a helper thread and is given up at the deadline (a
//! PMIx server may wait forever for a process that never comes); the process then reports and
//! exits, leaving that thread behind.

use super::Engine;
use super::ffi::Pmix;
use crate::error::{Error, Result};
use crate::launch::Env;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Instant;

/// The library's file name.
pub const PMIX_LIB_NAME: &str = "libpmix.so.2";

/// How the error for a library that is not there begins.
pub const NOT_FOUND: &str = "PMIX_RANK is set but";

/// Where the library is looked for, in order: `NCCL_PERF_PMIX_LIB` alone when set; else the
/// loader's own search (the bare name), `$OPAL_PREFIX/lib`, and the `lib/` beside the `mpirun`
/// found in an absolute `PATH` entry (with Debian's `pmix2/lib` under its multiarch folder).
/// Places a stranger could have planted are left out ([`super::search`]).
#[cfg(test)]
pub fn library_places(env: Env) -> Vec<PathBuf> {
    library_search(env).0
}

/// [`library_places`] and a note for each place left out ([`super::search`]).
pub fn library_search(env: Env) -> (Vec<PathBuf>, Vec<String>) {
    if let Some(p) =
        env(nccl_perf_facts::environment::PMIX_LIB.name).filter(|p| !p.trim().is_empty())
    {
        return (vec![PathBuf::from(p)], Vec::new());
    }
    let mut out = vec![PathBuf::from(PMIX_LIB_NAME)];
    let mut prefixes = Vec::new();
    if let Some(p) = env("OPAL_PREFIX").filter(|p| !p.is_empty()) {
        prefixes.push(PathBuf::from(p));
    }
    let (prefix, mut notes) = super::search::launcher_prefix(env, &["mpirun"]);
    prefixes.extend(prefix);
    let arch = format!("{}-linux-gnu", std::env::consts::ARCH);
    for p in prefixes {
        for sub in [
            "lib".to_string(),
            "lib64".into(),
            format!("lib/{arch}"),
            format!("lib/{arch}/pmix2/lib"),
        ] {
            let f = p.join(sub).join(PMIX_LIB_NAME);
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    let out = super::search::trusted_places(out, &mut notes);
    (out, notes)
}

/// Opens the first library of [`library_places`] that opens; else what was tried.
pub fn find(env: Env) -> std::result::Result<Pmix, Vec<String>> {
    super::first_opened(library_search(env), Pmix::open).map(|(l, _)| l)
}

/// A PMIx session.
pub struct PmixEngine {
    lib: Arc<Pmix>,
    nspace: String,
    rank: usize,
    size: usize,
    deadline: Instant,
    done: bool,
}

impl PmixEngine {
    /// Finds and opens the library, initialises it and reads the job's size.
    pub fn open(env: Env, deadline: Instant) -> Result<PmixEngine> {
        let lib = find(env).map_err(|tried| {
            Error::Launch(format!(
                "{NOT_FOUND} {PMIX_LIB_NAME} was not found ({}); set {}=/path/to/{PMIX_LIB_NAME} \
                 or NCCL_PERF_RENDEZVOUS=host:port",
                tried.join("; "),
                nccl_perf_facts::environment::PMIX_LIB.name
            ))
        })?;
        PmixEngine::start(lib, env, deadline)
    }

    /// Initialises the opened library `lib` and reads the job's size.
    pub fn start(lib: Pmix, env: Env, deadline: Instant) -> Result<PmixEngine> {
        let mut e = PmixEngine {
            lib: Arc::new(lib),
            nspace: env("PMIX_NAMESPACE").unwrap_or_default(),
            rank: 0,
            size: 0,
            deadline,
            done: false,
        };
        let (nspace, rank) = e.call("PMIx_Init", |l| l.init())?;
        e.nspace = nspace;
        e.rank = rank as usize;
        let size = e
            .call("PMIx_Get(pmix.job.size)", |l| {
                l.get_number("pmix.job.size", false)
            })
            .or_else(|_| {
                e.call("PMIx_Get(pmix.univ.size)", |l| {
                    l.get_number("pmix.univ.size", false)
                })
            })?;
        e.size = usize::try_from(size).unwrap_or(usize::MAX);
        if e.size == 0 || e.size > crate::launch::MAX_WORLD || e.rank >= e.size {
            return Err(Error::Launch(format!(
                "PMIx: rank {} of size {} is not a launch",
                e.rank, e.size
            )));
        }
        Ok(e)
    }

    /// Runs `f` on a helper thread, giving up at the deadline.
    fn call<T: Send + 'static>(
        &self,
        what: &str,
        f: impl FnOnce(&Pmix) -> std::result::Result<T, String> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::channel();
        let lib = Arc::clone(&self.lib);
        std::thread::Builder::new()
            .name("nccl-perf-pmix".into())
            .spawn(move || {
                let _ = tx.send(f(&lib));
            })
            .map_err(|e| Error::Internal(format!("PMIx: cannot start a thread: {e}")))?;
        let left = self.deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Error::Launch(format!(
                "PMIx (namespace {}): {e}",
                self.nspace
            ))),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Peers {
                msg: format!(
                    "PMIx (namespace {}): timed out in {what} (NCCL_PERF_BOOTSTRAP_TIMEOUT): a \
                     process of the job did not arrive",
                    self.nspace
                ),
                timed_out: true,
                lost: Vec::new(),
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(Error::Internal(format!("PMIx: {what}'s thread failed")))
            }
        }
    }
}

impl Engine for PmixEngine {
    fn name(&self) -> String {
        format!("PMIx (namespace {})", self.nspace)
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn job(&self) -> String {
        format!("pmix:{}", self.nspace)
    }
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        let (k, v) = (format!("nccl-perf.{key}"), super::pmi1::hex(value));
        self.call("PMIx_Put", move |l| l.put(&k, &v))
    }
    fn fence(&mut self) -> Result<()> {
        self.call("PMIx_Commit", |l| l.commit())?;
        self.call("PMIx_Fence", |l| l.fence())
    }
    fn get(&mut self, rank: usize, key: &str) -> Result<Vec<u8>> {
        let k = format!("nccl-perf.{key}");
        let r = u32::try_from(rank).unwrap_or(u32::MAX);
        let text = self.call("PMIx_Get", move |l| l.get_string(r, &k))?;
        super::pmi1::unhex(&text)
            .ok_or_else(|| Error::Launch(format!("PMIx: rank {rank}'s {key} is not hex")))
    }
    fn finalize(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        self.call("PMIx_Finalize", |l| l.finalize())
    }
    fn grace(&mut self, d: std::time::Duration) {
        self.deadline = self.deadline.max(Instant::now() + d);
    }
    fn abort(&mut self, code: i32, msg: &str) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let m = msg.to_string();
        let _ = self.call("PMIx_Abort", move |l| l.abort(code, &m));
    }
}
