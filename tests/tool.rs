//! The `nccl-perf` tool against the nccl-tests v2.19.6 reference outputs: every file parses and
//! prints back byte for byte (through the JSON document), `report` of the upstream JSON file
//! matches its log token for token, and the binary's subcommands keep their exit codes and
//! write real images.
//!
//! By subject: `round_trips`, `command_line`, `real_runs`, `plots` and `per_iteration`; the
//! helpers they share are here.

mod command_line;
mod per_iteration;
mod plots;
mod real_runs;
mod round_trips;

use crate::reference_outputs;

use std::path::{Path, PathBuf};
use std::process::Output;

fn reference(name: &str) -> PathBuf {
    reference_outputs::reference_dir().join(name)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fresh scratch folder for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nccl-perf-tool-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Lines that no test owns: the recorder's, and messages printed before a test starts.
fn outside_any_test(line: &str) -> bool {
    line.starts_with("### ")
        || line.starts_with("# time -v:")
        || line.starts_with("# Writing JSON output to ")
        || line.starts_with("invalid type ")
}
