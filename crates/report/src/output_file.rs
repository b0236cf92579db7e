//! Every output file of the project is written here, under the same rules.
//!
//! A file we write may sit in a folder others can write too (`/tmp`, a group-writable textfile
//! collector folder), and the program writing it may run as root (a health cron). So:
//!
//! - **Nothing is written through a symbolic link, into a hard link or into a named pipe.** An
//!   existing output path must be a regular file; a symbolic link, a FIFO, a socket, a device or
//!   a folder there is refused at once with one line ([`check_target`]), before any work.
//! - **A file is replaced, never rewritten in place** ([`replace`]): the new content goes to a
//!   temporary file with an unpredictable name, created exclusively in the same folder (`O_EXCL`,
//!   which never follows a symbolic link), and is then renamed over the path. A reader (a
//!   Prometheus textfile collector) never sees half a file, and a rename replaces the directory
//!   entry, so a link planted at the path after the check is replaced, not followed.
//! - **A writer that needs a path of its own** (the plotting backends open their file by name)
//!   gets one inside a private folder (mode 0700, created exclusively beside the target), and the
//!   finished file is renamed out of it ([`Staged`]).
//! - **A file that must not replace anything** (`-J`, `--locate-json`) is created exclusively,
//!   with numbered alternatives when the name is taken ([`create_exclusive`]).

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hash, Hasher};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How many numbered alternatives (`file.json.0`, `file.json.1`, …) [`create_exclusive`] tries.
const MAX_ALTERNATIVES: u32 = 10_000;

/// How many temporary names [`replace`] and [`Staged::new`] try before giving up (another
/// process would have to guess 64 random bits to take one).
const TEMP_ATTEMPTS: u32 = 16;

/// Checks what is at `path` now without following a symbolic link: nothing, or a regular file,
/// is fine; anything else is an error whose message says what is there, in a few words
/// (`is a named pipe (FIFO), not a regular file`), ready to follow `cannot write PATH: `.
pub fn check_target(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_symlink() {
        "is a symbolic link, which is never written through (remove it, or name the file it points to)"
    } else if t.is_dir() {
        "is a folder, not a regular file"
    } else if t.is_fifo() {
        "is a named pipe (FIFO), not a regular file"
    } else if t.is_socket() {
        "is a socket, not a regular file"
    } else if t.is_block_device() || t.is_char_device() {
        "is a device, not a regular file"
    } else {
        "is not a regular file"
    };
    Err(io::Error::new(io::ErrorKind::InvalidInput, what))
}

/// Replaces the file at `path` with `bytes` (or creates it): after [`check_target`], through a
/// temporary file with an unpredictable name created exclusively in the same folder, synced and
/// renamed over `path`. On any error the temporary file is removed and `path` is unchanged.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    check_target(path)?;
    let (mut file, tmp) = create_temp(path, |p| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(NOFOLLOW)
            .open(p)
    })?;
    let written = file
        .write_all(bytes)
        .and_then(|_| file.sync_all())
        .and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A path of its own for a writer that opens its file by name (a plotting backend): inside a
/// private folder created exclusively beside the target. [`Staged::commit`] renames the
/// finished file over the target; dropping it without a commit removes what was staged.
#[derive(Debug)]
pub struct Staged {
    target: PathBuf,
    dir: PathBuf,
    file: PathBuf,
}

impl Staged {
    /// Checks the target ([`check_target`]) and creates the private folder.
    pub fn new(target: &Path) -> io::Result<Staged> {
        check_target(target)?;
        let ((), dir) = create_temp(target, |p| std::fs::DirBuilder::new().mode(0o700).create(p))?;
        let name = target
            .file_name()
            .map_or_else(|| "output".into(), |n| n.to_os_string());
        let file = dir.join(name);
        Ok(Staged {
            target: target.to_path_buf(),
            dir,
            file,
        })
    }

    /// The path to write (same file name as the target, so a backend that picks its format by
    /// the extension picks the same one).
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// Renames the staged file over the target. The staged file must be a regular file.
    pub fn commit(self) -> io::Result<()> {
        let meta = std::fs::symlink_metadata(&self.file)?;
        if !meta.file_type().is_file() {
            return Err(io::Error::other("the staged output is not a regular file"));
        }
        std::fs::rename(&self.file, &self.target)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Creates `path` exclusively (it must not exist yet, not even as a symbolic link); if it
/// exists, tries `path.0`, `path.1`, … Returns the open file and the path actually created. Any
/// error other than "already exists" is returned at once.
pub fn create_exclusive(path: &Path) -> io::Result<(File, PathBuf)> {
    let create = |p: &Path| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(NOFOLLOW)
            .open(p)
    };
    match create(path) {
        Ok(file) => return Ok((file, path.to_path_buf())),
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        Err(_) => {}
    }
    for i in 0..MAX_ALTERNATIVES {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{i}"));
        let candidate = PathBuf::from(name);
        match create(&candidate) {
            Ok(file) => return Ok((file, candidate)),
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            Err(_) => {}
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} and its {MAX_ALTERNATIVES} numbered alternatives all exist",
            path.display()
        ),
    ))
}

/// `O_NOFOLLOW`: `O_EXCL` already refuses a symbolic link at the path; this says so twice.
const NOFOLLOW: i32 = libc::O_NOFOLLOW;

/// Creates something (`make`) under an unpredictable name `.NAME.RANDOM.tmp` beside `target`,
/// trying new names while the name is taken; returns what `make` returned and the name.
fn create_temp<T>(
    target: &Path,
    make: impl Fn(&Path) -> io::Result<T>,
) -> io::Result<(T, PathBuf)> {
    let folder = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = target
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let mut last = None;
    for _ in 0..TEMP_ATTEMPTS {
        let name = format!(".{base}.{:016x}.tmp", unpredictable());
        let p = folder.join(name);
        match make(&p) {
            Ok(made) => return Ok((made, p)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

/// 64 bits nobody else can predict: SipHash under the process' random keys (drawn by the
/// standard library from the operating system) over the pid, the time and a counter.
fn unpredictable() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    std::process::id().hash(&mut h);
    COUNTER.fetch_add(1, Ordering::Relaxed).hash(&mut h);
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        t.as_nanos().hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests;
