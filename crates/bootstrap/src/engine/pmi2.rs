//! PMI-2 through the launcher's own library, opened at run time (`ffi/pmi2.rs`): Cray PMI's
//! `libpmi2.so` under PALS (HPE/Cray `aprun`, PALS' `mpiexec`), or any `libpmi2` whose
//! launcher serves it (Slurm's `libpmi2.so.0` under `srun --mpi=pmi2`, asked for with
//! `NCCL_PERF_BOOTSTRAP=pmi2`). Init, the job's id, put, fence, get, finalize, abort. Values
//! travel hex-encoded, in pieces that fit `PMI2_MAX_VALLEN`; a value read back is taken only
//! up to the buffer we gave and the length the library reports is checked against it.
//!
//! Every call runs on one helper thread (the API promises no thread safety) and is given up
//! at the deadline: `PMI2_Init` and `PMI2_KVS_Fence` block inside the library until every
//! process arrives, and nothing in the API bounds them, so the caller stops waiting, reports
//! and exits, leaving that thread blocked (as the PMIx and MPI library engines do).

use super::Engine;
use super::ffi::pmi2::{MAX_KEYLEN, MAX_VALLEN, Pmi2};
use super::on_thread::OnThread;
use crate::error::{Error, Result};
use crate::launch::Env;
use nccl_perf_facts::environment::PMI2_LIB;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How the engine names its launcher (the dry run's bootstrap line).
pub const PMI2: &str = "PMI-2 library";
/// The library's names: the development link (Cray PE ships it), then the runtime's.
pub const PMI2_LIBS: [&str; 2] = ["libpmi2.so", "libpmi2.so.0"];
/// Where Cray's programming environment installs Cray PMI.
const CRAY_PMI: &str = "/opt/cray/pe/pmi/default";
/// The most pieces one value is put in.
const MAX_PIECES: usize = 16;
/// Hex characters per piece, leaving room for the piece count and the NUL.
const PIECE: usize = MAX_VALLEN - 64;

/// Where the library is looked for, in order: `NCCL_PERF_PMI2_LIB` alone when set; else the
/// loader's own search (the bare names), then `lib/` and `lib64/` under `$CRAY_PMI_PREFIX` and
/// Cray's `/opt/cray/pe/pmi/default`. Places a stranger could have planted are left out
/// ([`super::search`]).
#[cfg(test)]
pub fn library_places(env: Env) -> Vec<PathBuf> {
    library_search(env).0
}

/// [`library_places`] and a note for each place left out ([`super::search`]).
pub fn library_search(env: Env) -> (Vec<PathBuf>, Vec<String>) {
    if let Some(p) = env(PMI2_LIB.name).filter(|p| !p.trim().is_empty()) {
        return (vec![PathBuf::from(p)], Vec::new());
    }
    let mut out: Vec<PathBuf> = PMI2_LIBS.iter().map(PathBuf::from).collect();
    let mut prefixes: Vec<PathBuf> = env("CRAY_PMI_PREFIX")
        .filter(|p| !p.trim().is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    prefixes.push(PathBuf::from(CRAY_PMI));
    for p in prefixes {
        for sub in ["lib", "lib64"] {
            for n in PMI2_LIBS {
                let f = p.join(sub).join(n);
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
    }
    let mut notes = Vec::new();
    let out = super::search::trusted_places(out, &mut notes);
    (out, notes)
}

/// Finds and opens the library: its handle and path, or what was tried.
pub fn find(env: Env) -> std::result::Result<(Pmi2, String), Vec<String>> {
    super::first_opened(library_search(env), Pmi2::open)
}

/// The error for a library not found: `why` is what made us look (`PALS_RANKID`, or the
/// forced mode). Worded as the MPI library's ("... is set but ... was not found (...)"), so
/// that [`super::unavailable`] knows it.
pub fn missing(why: &str, tried: &[String]) -> Error {
    Error::Launch(format!(
        "{why} is set but {} was not found ({}); set {}=/path/to/{} or \
         NCCL_PERF_RENDEZVOUS=host:port",
        PMI2_LIBS[0],
        tried.join("; "),
        PMI2_LIB.name,
        PMI2_LIBS[0]
    ))
}

/// The text of a value the library wrote into `buf`, reporting `len` bytes: up to its NUL,
/// which must lie inside the buffer; a length that is negative (the library's "it needs
/// more") or past the buffer is an error.
pub fn value_text(buf: &[u8], len: i32) -> std::result::Result<String, String> {
    let n = usize::try_from(len).map_err(|_| {
        format!(
            "the value needs {} bytes, more than the {} given",
            i64::from(len).unsigned_abs(),
            buf.len()
        )
    })?;
    if n > buf.len() {
        return Err(format!(
            "the library reports {n} bytes written into {}",
            buf.len()
        ));
    }
    let end = buf
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| format!("the value fills all {} bytes with no end", buf.len()))?;
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// `value` as the pieces put: the first `<count>:<hex>`, the others `<hex>`.
pub fn pieces(value: &[u8]) -> std::result::Result<Vec<String>, String> {
    let hex = super::pmi1::hex(value);
    let chunks: Vec<&str> = if hex.is_empty() {
        vec![""]
    } else {
        hex.as_bytes()
            .chunks(PIECE)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect()
    };
    if chunks.len() > MAX_PIECES {
        return Err(format!(
            "a value of {} bytes is longer than {} pieces of PMI-2's {MAX_VALLEN}",
            value.len(),
            MAX_PIECES
        ));
    }
    Ok(chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i == 0 {
                format!("{}:{c}", chunks.len())
            } else {
                c.to_string()
            }
        })
        .collect())
}

/// The number of pieces and the first one's hex, from the first piece read back.
pub fn first_piece(text: &str) -> Option<(usize, &str)> {
    let (n, hex) = text.split_once(':')?;
    let n: usize = n.parse().ok()?;
    (1..=MAX_PIECES).contains(&n).then_some((n, hex))
}

/// The job-wide key of `key`'s piece `i` put by `rank` (PMI-2's space is the job's).
pub fn full_key(rank: usize, key: &str, i: usize) -> std::result::Result<String, String> {
    let k = if i == 0 {
        format!("nccl-perf-{rank}-{key}")
    } else {
        format!("nccl-perf-{rank}-{key}-{i}")
    };
    if k.len() >= MAX_KEYLEN {
        return Err(format!("the PMI-2 key '{k}' is too long"));
    }
    Ok(k)
}

/// A session of the PMI-2 library.
pub struct Pmi2Engine {
    lib: OnThread<Pmi2>,
    path: String,
    rank: usize,
    size: usize,
    job: String,
    deadline: Instant,
    done: bool,
}

impl Pmi2Engine {
    /// Initialises the opened library `lib` (found at `path`) and reads rank, size and the
    /// job's id. A size that disagrees with the launcher's `PMI_SIZE` is refused (a library
    /// that does not belong to this launcher runs as a job of one).
    pub fn start(lib: Pmi2, path: String, env: Env, deadline: Instant) -> Result<Pmi2Engine> {
        let lib = OnThread::start(lib, "PMI-2", "nccl-perf-pmi2")?;
        let mut e = Pmi2Engine {
            lib,
            path,
            rank: 0,
            size: 0,
            job: String::new(),
            deadline,
            done: false,
        };
        let (rank, size, id) = e.call("PMI2_Init", |l| {
            let (rank, size) = l.init()?;
            let id = l.job_id()?;
            Ok((rank, size, value_text(&id, 0)?))
        })?;
        let (rank, size) = match (usize::try_from(rank), usize::try_from(size)) {
            (Ok(r), Ok(s)) if s > 0 && s <= crate::launch::MAX_WORLD && r < s => (r, s),
            _ => {
                return Err(Error::Launch(format!(
                    "{}: rank {rank} of size {size} is not a launch",
                    e.name()
                )));
            }
        };
        super::agrees_with_launcher(&e.name(), env, rank, size, PMI2_LIB.name)?;
        (e.rank, e.size) = (rank, size);
        e.job = format!("pmi2:{}", crate::peer_text::clean(&id, 80));
        Ok(e)
    }

    /// Runs `f` on the PMI-2 thread, giving up at the deadline.
    fn call<T: Send + 'static>(
        &self,
        what: &str,
        f: impl FnOnce(&Pmi2) -> std::result::Result<T, String> + Send + 'static,
    ) -> Result<T> {
        self.lib.call(&self.name(), self.deadline, what, f)
    }
}

impl Engine for Pmi2Engine {
    fn name(&self) -> String {
        format!("PMI-2 library ({})", self.path)
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
        let rank = self.rank;
        let key = key.to_string();
        let parts = pieces(value).map_err(|e| Error::Internal(format!("PMI-2: {e}")))?;
        self.call("PMI2_KVS_Put", move |l| {
            for (i, p) in parts.iter().enumerate() {
                l.put(&full_key(rank, &key, i)?, p)?;
            }
            Ok(())
        })
    }
    fn fence(&mut self) -> Result<()> {
        self.call("PMI2_KVS_Fence", |l| l.fence())
    }
    fn get(&mut self, rank: usize, key: &str) -> Result<Vec<u8>> {
        let k = key.to_string();
        let hex = self.call("PMI2_KVS_Get", move |l| {
            let read = |i: usize| -> std::result::Result<String, String> {
                let full = full_key(rank, &k, i)?;
                let (buf, len) = l.get(rank, &full)?;
                value_text(&buf, len).map_err(|e| format!("PMI2_KVS_Get({full}): {e}"))
            };
            let first = read(0)?;
            let (n, head) = first_piece(&first)
                .ok_or_else(|| format!("rank {rank}'s {k} is not nccl-perf's record"))?;
            let mut hex = head.to_string();
            for i in 1..n {
                hex.push_str(&read(i)?);
            }
            Ok(hex)
        })?;
        super::pmi1::unhex(&hex).ok_or_else(|| {
            Error::Launch(format!("{}: rank {rank}'s {key} is not hex", self.name()))
        })
    }
    fn finalize(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        self.call("PMI2_Finalize", |l| l.finalize())
    }
    fn grace(&mut self, d: Duration) {
        self.deadline = self.deadline.max(Instant::now() + d);
    }
    fn abort(&mut self, _code: i32, msg: &str) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let m = msg.to_string();
        let _ = self.call("PMI2_Abort", move |l| l.abort(&m));
    }
}

#[cfg(test)]
mod tests;
