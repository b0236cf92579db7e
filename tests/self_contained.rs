//! The repository is self-contained: no file of it (tests, build steps, scripts, docs) points at
//! the `shared` folder that sits beside the development checkout, so a fresh clone has all a
//! test needs. `ci/fresh-copy-test.sh` proves the same by running `cargo test` in a copy of the
//! committed tree; this test names the offending file and line at once.

use std::path::{Path, PathBuf};

/// Folders that are not part of the source tree.
fn skipped(dir: &Path) -> bool {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "target" || name == ".git"
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.is_dir() {
            if !skipped(&path) {
                files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

#[test]
fn no_file_reaches_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(root, &mut all);
    assert!(
        all.iter().any(|p| p.ends_with("tests/golden/README.md")),
        "walked {} files under {} without finding tests/golden/README.md",
        all.len(),
        root.display()
    );
    // Spelled in two pieces so that this file does not match itself.
    let needles = [format!("../{}", "shared"), format!("/work/{}", "shared")];
    let mut hits = Vec::new();
    for path in &all {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue; // binary data (plots, fonts) holds no paths
        };
        for (n, line) in text.lines().enumerate() {
            if needles.iter().any(|w| line.contains(w.as_str())) {
                hits.push(format!("{}:{}: {line}", path.display(), n + 1));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "files that point outside the repository:\n{}",
        hits.join("\n")
    );
}
