//! The default build started through the launcher's own MPI library, opened at run time
//! (`NCCL_PERF_BOOTSTRAP=mpilib`, or PMIx's library missing under Open MPI's `mpirun`): Open
//! MPI's `libmpi.so.40` under `mpirun` and MPICH's `libmpich.so.12` under `mpiexec.hydra`, 4
//! and 16 processes with `--dry-run`. Under `CI=true` a missing launcher fails the test;
//! elsewhere it is skipped with a message. Under an emulator (`NCCL_PERF_TEST_RUNNER`, arm64
//! under qemu) the 16-process and MPICH cases are skipped with a message: Open MPI's start is
//! slow there, and the sysroot holds no MPICH (the host's is another architecture).

#![cfg(not(feature = "mpi"))]

use crate::engines::{HYDRA, MPIRUN, emulated, have, one_plan, run, text};
use std::process::Command;

const OPEN_MPI: &str = "MPI library (Open MPI)";
const MPICH: &str = "MPI library (MPICH ABI)";

/// `mpirun` passing `vars` on to its processes.
fn mpirun_with(vars: &[&'static str]) -> Vec<&'static str> {
    let mut l = MPIRUN[..MPIRUN.len() - 1].to_vec();
    for v in vars {
        l.extend(["-x", v]);
    }
    l.push("-np");
    l
}

#[test]
fn mpirun_four_processes_meet_through_open_mpis_library() {
    if have("mpirun", "openmpi-bin") {
        let l = mpirun_with(&["NCCL_PERF_BOOTSTRAP"]);
        let o = run(&l, 4, &[("NCCL_PERF_BOOTSTRAP", "mpilib")], &[]);
        one_plan(&o, 4, OPEN_MPI);
    }
}

#[test]
fn mpirun_sixteen_processes_meet_through_open_mpis_library() {
    if have("mpirun", "openmpi-bin") && !emulated("16 processes starting Open MPI") {
        let l = mpirun_with(&["NCCL_PERF_BOOTSTRAP"]);
        let o = run(&l, 16, &[("NCCL_PERF_BOOTSTRAP", "mpilib")], &[]);
        one_plan(&o, 16, OPEN_MPI);
    }
}

#[test]
fn without_libpmix_mpirun_falls_back_to_open_mpis_library() {
    // As under Open MPI builds that bundle PMIx inside their own libraries.
    if have("mpirun", "openmpi-bin") {
        let l = mpirun_with(&["NCCL_PERF_PMIX_LIB"]);
        let env = [("NCCL_PERF_PMIX_LIB", "/nonexistent/libpmix.so.2")];
        one_plan(&run(&l, 4, &env, &[]), 4, OPEN_MPI);
    }
}

/// MPICH's library where its runtime is installed (Debian names it `libmpich.so.12`).
fn mpich_library() -> Option<String> {
    let o = Command::new("dpkg")
        .args(["-L", "libmpich12"])
        .output()
        .ok()?;
    text(&o.stdout)
        .lines()
        .find(|l| l.ends_with("/libmpich.so.12") || l.ends_with("/libmpich.so.12.2.2"))
        .map(|l| l.trim().to_string())
        .or_else(|| {
            let p = format!(
                "/usr/lib/{}-linux-gnu/libmpich.so.12",
                std::env::consts::ARCH
            );
            std::path::Path::new(&p).exists().then_some(p)
        })
}

fn hydra_through_mpichs_library(np: usize) {
    // The emulator first: nothing is started for a case that is skipped there.
    if emulated("MPICH's library (none in the sysroot)") || !have("mpiexec.hydra", "mpich") {
        return;
    }
    let Some(lib) = mpich_library() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "libmpich12 is not installed: under CI it must be (.ci/run installs mpich)"
        );
        eprintln!("skipped: libmpich12 is not installed");
        return;
    };
    let env = [
        ("NCCL_PERF_BOOTSTRAP", "mpilib"),
        ("NCCL_PERF_MPI_LIB", lib.as_str()),
    ];
    one_plan(&run(HYDRA, np, &env, &[]), np, MPICH);
}

#[test]
fn mpiexec_hydra_four_processes_meet_through_mpichs_library() {
    hydra_through_mpichs_library(4);
}

#[test]
fn mpiexec_hydra_sixteen_processes_meet_through_mpichs_library() {
    hydra_through_mpichs_library(16);
}

/// An MPMD launch whose second program never initialises MPI: MPI_Init waits for it until the
/// bootstrap timeout, then one line names the engine and the run ends with exit 4.
fn a_process_that_never_arrives(launcher: &[&str], np: &str, lib: Option<&str>, engine: &str) {
    let mut env = vec![("NCCL_PERF_BOOTSTRAP", "mpilib")];
    if let Some(l) = lib {
        env.push(("NCCL_PERF_MPI_LIB", l));
    }
    let line = crate::engines::never_arriving(launcher, np, &env);
    assert!(line.contains(engine) && line.contains("MPI_Init"), "{line}");
}

#[test]
fn mpirun_a_process_that_never_arrives_ends_by_the_timeout() {
    if have("mpirun", "openmpi-bin") {
        let l = [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-x",
            "NCCL_PERF_BOOTSTRAP_TIMEOUT",
            "-x",
            "NCCL_PERF_BOOTSTRAP",
        ];
        a_process_that_never_arrives(&l, "-np", None, "MPI library (Open MPI");
    }
}

#[test]
fn mpiexec_hydra_a_process_that_never_arrives_ends_by_the_timeout() {
    if emulated("MPICH's library (none in the sysroot)") || !have("mpiexec.hydra", "mpich") {
        return;
    }
    if let Some(lib) = mpich_library() {
        a_process_that_never_arrives(&["mpiexec.hydra"], "-n", Some(&lib), "MPI library (MPICH");
    }
}

/// A library with PMIx's client functions whose `PMIx_Init` refuses (status -31, as a
/// `libpmix.so.2` of another version than the launcher's PMIx server may), built with the C
/// compiler into a folder of its own; `None` (with a message) without one.
fn refusing_pmix_library() -> Option<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("nccl-perf-refusing-pmix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("pmix.c");
    let lib = dir.join("libpmix.so.2");
    let mut c = String::from(
        "#include <stddef.h>\nint PMIx_Init(void *p, void *i, size_t n) { return -31; }\n",
    );
    for f in ["Finalize", "Abort", "Put", "Commit", "Fence", "Get"] {
        c.push_str(&format!("int PMIx_{f}(void) {{ return -1; }}\n"));
    }
    std::fs::write(&src, c).unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        assert!(
            std::env::var_os("CI").is_none(),
            "no C compiler: under CI it must be installed (.ci/run installs g++)"
        );
        eprintln!("skipped: no C compiler to build a refusing PMIx library");
        return None;
    }
    Some(lib)
}

#[test]
fn a_pmix_library_that_refuses_gives_way_to_open_mpis_library() {
    // libpmix.so.2 found but PMIx_Init failing (Open MPI with its own PMIx inside, a system
    // PMIx of another version): the MPI library starts the job; rank 0 says why, once.
    if emulated("a host-built library") || !have("mpirun", "openmpi-bin") {
        return;
    }
    let Some(lib) = refusing_pmix_library() else {
        return;
    };
    let lib = lib.display().to_string();
    let l = mpirun_with(&["NCCL_PERF_PMIX_LIB"]);
    let o = run(&l, 4, &[("NCCL_PERF_PMIX_LIB", &lib)], &[]);
    one_plan(&o, 4, OPEN_MPI);
    let err = text(&o.stderr);
    let note = "PMIx_Init failed with PMIx status -31; starting through the MPI library (Open MPI";
    assert_eq!(err.matches(note).count(), 1, "{err}");
    // Neither starts: one line naming both.
    let l = mpirun_with(&["NCCL_PERF_PMIX_LIB", "NCCL_PERF_MPI_LIB"]);
    let env = [
        ("NCCL_PERF_PMIX_LIB", lib.as_str()),
        ("NCCL_PERF_MPI_LIB", "/nonexistent/libmpi.so.40"),
    ];
    let o = run(&l, 2, &env, &[]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_ne!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        !out.contains("dry run") && !err.contains("panicked"),
        "{out}{err}"
    );
    let line = err
        .lines()
        .find(|l| l.contains("PMIx_Init failed with PMIx status -31; then the MPI library"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("(OMPI_COMM_WORLD_SIZE is set)")
            && line.contains("libmpi.so.40 was not found (/nonexistent/libmpi.so.40)"),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(std::path::Path::new(&lib).parent().unwrap());
}
