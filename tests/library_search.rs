//! The launcher-library search (PMIx, MPI) against a library planted by another user: a
//! relative `PATH` entry, or a folder others can write, never leads to a library
//! (`crates/bootstrap/src/engine/search.rs`). The planted library's constructor leaves a mark;
//! the mark must never appear.

use crate::programs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds a stand-in `name` into `dir` whose constructor creates `mark`, with PMIx's and MPI's
/// entry points failing; false (with a message) without a C compiler, which fails under CI.
fn planted_library(dir: &Path, name: &str, mark: &Path) -> bool {
    let cc = programs::c_compiler();
    let Some(cc) = cc else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no C compiler: under CI it must be installed (.ci/run installs g++)"
        );
        eprintln!("skipped: no C compiler to build a planted library");
        return false;
    };
    std::fs::create_dir_all(dir).unwrap();
    let src = dir.join("planted.c");
    let mut c = format!(
        "#include <stdio.h>\n#include <stddef.h>\n\
         __attribute__((constructor)) static void planted(void) {{\n\
         FILE *f = fopen(\"{}\", \"w\"); if (f) fclose(f); }}\n\
         int PMIx_Init(void *p, void *i, size_t n) {{ return -31; }}\n\
         int MPI_Init_thread(void *a, void *b, int r, int *p) {{ return 1; }}\n",
        mark.display()
    );
    for f in ["Finalize", "Abort", "Put", "Commit", "Fence", "Get"] {
        c.push_str(&format!("int PMIx_{f}(void) {{ return -1; }}\n"));
    }
    std::fs::write(&src, c).unwrap();
    let built = Command::new(cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join(name))
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    assert!(built, "building the planted library failed");
    true
}

/// `<root>/shared/mpirun` (an empty script) and `<root>/lib/<lib>` planted, `<root>/shared`
/// with `mode`; the mark's path.
fn plant(root: &Path, lib: &str, mode: u32) -> Option<PathBuf> {
    let shared = root.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let mpirun = shared.join("mpirun");
    std::fs::write(&mpirun, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&mpirun, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mark = root.join("constructor-ran");
    if !planted_library(&root.join("lib"), lib, &mark) {
        return None;
    }
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).unwrap();
    Some(mark)
}

/// all_reduce_perf as a rank of a PMIx launch (or through the MPI library), started in `cwd`
/// with `path` as `PATH`; its stderr.
fn run(cwd: &Path, path: &str, extra: &[(&str, &str)]) -> String {
    let mut c = programs::program(env!("CARGO_BIN_EXE_all_reduce_perf"));
    c.arg("--dry-run")
        .current_dir(cwd)
        .env_remove("NCCL_PERF_PMIX_LIB")
        .env_remove("NCCL_PERF_MPI_LIB")
        .env_remove("OPAL_PREFIX")
        .env_remove("MPI_HOME")
        .env_remove("I_MPI_ROOT")
        .env("PATH", path)
        .env("PMIX_RANK", "0")
        .env("PMIX_NAMESPACE", "planted");
    for (k, v) in extra {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn a_relative_path_entry_never_leads_to_a_library() {
    let root = programs::scratch("search-relative");
    let Some(mark) = plant(&root, "libpmix.so.2", 0o755) else {
        return;
    };
    for path in [".", "./", "shared"] {
        let cwd = if path.starts_with("shared") {
            root.clone()
        } else {
            root.join("shared")
        };
        let err = run(&cwd, path, &[]);
        assert!(
            !mark.exists(),
            "the planted library was loaded (PATH={path}): {err}"
        );
        assert!(
            err.contains("skipped in the search for a launcher library: a relative PATH entry"),
            "PATH={path}: {err}"
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_folder_others_can_write_never_leads_to_a_library() {
    for (lib, extra) in [
        ("libpmix.so.2", vec![]),
        (
            "libmpi.so.40",
            vec![
                ("NCCL_PERF_BOOTSTRAP", "mpilib"),
                ("OMPI_COMM_WORLD_SIZE", "1"),
            ],
        ),
    ] {
        let root = programs::scratch(&format!("search-shared-{lib}"));
        // A shared, sticky, world-writable folder, as /tmp is.
        let Some(mark) = plant(&root, lib, 0o1777) else {
            return;
        };
        let path = root.join("shared").display().to_string();
        let err = run(&root, &path, &extra);
        assert!(!mark.exists(), "the planted {lib} was loaded: {err}");
        assert!(
            err.contains("skipped in the search for a launcher library:")
                && err.contains("is writable by others (mode 1777)"),
            "{lib}: {err}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}

#[test]
fn a_library_file_others_can_write_is_not_loaded() {
    // The folders are ours and closed, but the library itself is writable by anyone.
    let root = programs::scratch("search-file");
    let Some(mark) = plant(&root, "libpmix.so.2", 0o755) else {
        return;
    };
    let lib = root.join("lib/libpmix.so.2");
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).unwrap();
    let path = root.join("shared").display().to_string();
    let err = run(&root, &path, &[]);
    assert!(!mark.exists(), "the planted library was loaded: {err}");
    assert!(
        err.contains("libpmix.so.2 is writable by others (mode 666)"),
        "{err}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}
