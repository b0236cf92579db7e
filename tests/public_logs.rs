//! `nccl-perf parse`, `report` and `compare` on real nccl-tests logs published by others
//! (`tests/logs/`, each with its source in `tests/logs/SOURCES.md`): older layouts (`error`
//! column, no `redop`/`root` columns), `srun -l` and `mpirun --tag-output` prefixes, NCCL INFO
//! lines inside the table, excerpts that start at the table header, and broken runs made
//! from them (wrong data, FAILED footer, error lines, a cut log, fewer rows, other ranks).
//!
//! By subject: `layouts` (every public log and what must be read from it), `prefixes`
//! (launchers' line prefixes, NCCL lines in the table, excerpts), `broken_runs` (`compare` on
//! runs made broken, the real cause of a failure), `copies` (logs without their hashes, in
//! a container's JSON log, with a byte order mark or in UTF-16) and `pasted` (rows without a
//! header, trimmed tables, a crash and no table, footers in part, echoed commands:
//! `tests/logs/pasted/`); the helpers they share are here.

mod broken_runs;
mod copies;
mod layouts;
mod pasted;
mod prefixes;

use crate::programs::tool;

use std::path::{Path, PathBuf};
use std::process::Output;

fn logs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/logs")
}

fn read(name: &str) -> String {
    let path = logs().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nccl-perf-logs-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.to_string_lossy().into_owned()
}

/// Every nccl-tests 2.19.6 log of tests/golden with a table (a footer): (name, text), by name.
fn golden_tables() -> Vec<(String, String)> {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/nccl-tests-2.19.6-h200");
    let mut names: Vec<String> = std::fs::read_dir(&golden)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".out"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let body =
                std::fs::read_to_string(golden.join(&name)).unwrap_or_else(|e| panic!("{e}"));
            (name, body)
        })
        .filter(|(_, body)| body.contains("# Avg bus bandwidth"))
        .collect()
}

/// `report` on `body` written to `dir/name`: (exit code, stdout, stderr).
fn report(dir: &Path, name: &str, body: &str) -> (Option<i32>, String, String) {
    let path = write(dir, name, body);
    let out = tool(&["report", &path]);
    let err = String::from_utf8_lossy(&out.stderr).replace(&path, "LOG");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        err,
    )
}
