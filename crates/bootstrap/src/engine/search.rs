//! Which folders may lead to a launcher library (PMIx, PMI-2, MPI) that this process loads.
//!
//! A library's constructor runs in our process, so a folder that a stranger can write must not
//! lead to one, as `ld.so` ignores insecure paths for setuid programs:
//!
//! - A `PATH` entry leads to a library only when it is absolute: a relative one (`.`, `bin`, an
//!   empty one) names a folder under whatever the current directory is, a shared `/tmp` folder
//!   included. The same holds for a prefix from the environment (`OPAL_PREFIX`, `MPI_HOME`, ...).
//! - The folder that holds the launcher (`mpirun`, after its links) and the one that holds a
//!   library must be owned by root or by this user and writable by neither group nor others; so
//!   must the library file; the folders above them must be owned by root or this user and, when
//!   writable by others, sticky (`/tmp` itself may hold a folder of ours, not one of a stranger).
//!
//! What is skipped is said in one line ([`note`]). A library named outright
//! (`NCCL_PERF_PMIX_LIB`, `NCCL_PERF_MPI_LIB`, `NCCL_PERF_PMI2_LIB`) and a bare name (the loader's
//! own search, `LD_LIBRARY_PATH` and the loader cache) are the user's choice and not checked.

use crate::launch::Env;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why `dir`, a folder that would lead to a library, may not: `None` when it may. See the
/// module's rules; `last` is true for the folder that holds the file itself (then group- or
/// other-writable is refused even when sticky).
pub fn untrusted_folder(dir: &Path, last: bool) -> Option<String> {
    if !dir.is_absolute() {
        return Some("a relative folder (it depends on the current directory)".into());
    }
    let me = rustix::process::geteuid().as_raw();
    let mut at = Some(dir);
    let mut first = true;
    while let Some(d) = at {
        let meta = match std::fs::metadata(d) {
            Ok(m) => m,
            Err(e) => return Some(format!("{}: {e}", d.display())),
        };
        let mode = meta.mode();
        let shown = d.display();
        if meta.uid() != 0 && meta.uid() != me {
            return Some(format!(
                "{shown} is owned by another user (uid {})",
                meta.uid()
            ));
        }
        let writable_by_others = mode & 0o022 != 0;
        let sticky = mode & 0o1000 != 0;
        if writable_by_others && ((first && last) || !sticky) {
            return Some(format!(
                "{shown} is writable by others (mode {:o})",
                mode & 0o7777
            ));
        }
        first = false;
        at = d.parent();
    }
    None
}

/// Why the library file at `path` may not be loaded: `None` when it may (its real path's
/// folder passes [`untrusted_folder`], and the file is owned by root or this user and writable
/// by neither group nor others). A file that does not exist passes (there is nothing to load).
pub fn untrusted_library(path: &Path) -> Option<String> {
    let Ok(real) = std::fs::canonicalize(path) else {
        return None;
    };
    if let Some(why) = real.parent().and_then(|d| untrusted_folder(d, true)) {
        return Some(why);
    }
    let meta = std::fs::metadata(&real).ok()?;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != 0 && meta.uid() != me {
        return Some(format!(
            "{} is owned by another user (uid {})",
            real.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "{} is writable by others (mode {:o})",
            real.display(),
            meta.mode() & 0o7777
        ));
    }
    None
}

/// The prefix (the folder above `bin/`) of the first of `tools` found in an absolute, trusted
/// `PATH` entry, with a note for each entry skipped on the way (relative, or untrusted, where
/// one of `tools` is).
pub fn launcher_prefix(env: Env, tools: &[&str]) -> (Option<PathBuf>, Vec<String>) {
    let mut notes = Vec::new();
    let path = env("PATH").unwrap_or_default();
    for dir in path.split(':') {
        let Some(tool) = tools.iter().find(|t| Path::new(dir).join(t).is_file()) else {
            continue;
        };
        let m = Path::new(dir).join(tool);
        let shown = if dir.is_empty() { "(empty)" } else { dir };
        if !Path::new(dir).is_absolute() {
            notes.push(note(
                &format!("the PATH entry {shown} (where {tool} is)"),
                "a relative PATH entry (it depends on the current directory)",
            ));
            continue;
        }
        let real = std::fs::canonicalize(&m).unwrap_or(m);
        let bin = real.parent().unwrap_or(Path::new("/"));
        if let Some(why) =
            untrusted_folder(Path::new(dir), true).or_else(|| untrusted_folder(bin, true))
        {
            notes.push(note(&format!("{}", real.display()), &why));
            continue;
        }
        return (bin.parent().map(Path::to_path_buf), notes);
    }
    (None, notes)
}

/// Keeps the places that may be loaded: bare names (the loader's search), and absolute paths
/// whose library passes [`untrusted_library`]; a relative path or an untrusted library is
/// dropped with a note.
pub fn trusted_places(places: Vec<PathBuf>, notes: &mut Vec<String>) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(places.len());
    for p in places {
        let bare = p.components().count() == 1 && !p.as_os_str().is_empty();
        if bare {
            out.push(p);
        } else if !p.is_absolute() {
            notes.push(note(
                &p.display().to_string(),
                "a relative path (it depends on the current directory)",
            ));
        } else if let Some(why) = untrusted_library(&p) {
            notes.push(note(&p.display().to_string(), &why));
        } else {
            out.push(p);
        }
    }
    out
}

/// The one-line note for a place skipped in the search: `nccl-perf: note: <what> skipped in
/// the search for a launcher library: <why>`.
pub fn note(what: &str, why: &str) -> String {
    format!("nccl-perf: note: {what} skipped in the search for a launcher library: {why}")
}

/// Prints each of `notes` on stderr, once per process (the PMIx search and the MPI library's
/// after it walk the same `PATH`).
pub fn say_once(notes: &[String]) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    for n in notes {
        if !said.contains(n) {
            nccl_perf_facts::eline!("{n}");
            said.push(n.clone());
        }
    }
}

#[cfg(test)]
mod tests;
