//! The default build started through the launcher's own MPI library, opened at run time
//! (`NCCL_PERF_BOOTSTRAP=mpilib`, or PMIx's library missing under Open MPI's `mpirun`): Open
//! MPI's `libmpi.so.40` under `mpirun` and MPICH's `libmpich.so.12` under `mpiexec.hydra`, 4
//! and 16 processes with `--dry-run`. Under `CI=true` a missing launcher fails the test;
//! elsewhere it is skipped with a message. Under an emulator (`NCCL_PERF_TEST_RUNNER`, arm64
//! under qemu) the 16-process and MPICH cases are skipped with a message: Open MPI's start is
//! slow there, and the sysroot holds no MPICH (the host's is another architecture).

#![cfg(not(feature = "mpi"))]

use crate::engines::{HYDRA, MPIRUN, have, one_plan, run, text};
use std::process::Command;

const OPEN_MPI: &str = "MPI library (Open MPI)";
const MPICH: &str = "MPI library (MPICH ABI)";

/// Whether our programs run under an emulator; then `what` is skipped, with a message.
fn emulated(what: &str) -> bool {
    let e = std::env::var_os("NCCL_PERF_TEST_RUNNER").is_some_and(|v| !v.is_empty());
    if e {
        eprintln!("skipped under NCCL_PERF_TEST_RUNNER: {what}");
    }
    e
}

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
