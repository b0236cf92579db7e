//! The default build (no MPI linked) under launchers that run a wire-up of their own: Open
//! MPI's `mpirun` (PMIx, through the `libpmix.so.2` it uses) and MPICH's `mpiexec.hydra`
//! (PMI-1 over the socket in `PMI_FD`; PMI-2 through Slurm's `libpmi2.so.0`, which speaks
//! Hydra's PMI-2 too), 4 and 16 processes with `--dry-run`, which meets for real and prints
//! the plan. Under `CI=true` a missing launcher fails the test; elsewhere it is skipped with a
//! message. (The MPI build uses MPI under these launchers: `bootstrap.rs`.)

#![cfg(not(feature = "mpi"))]

use crate::programs;

use std::collections::HashMap;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// Whether `tool` runs here; under CI it must.
pub(crate) fn have(tool: &str, package: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{tool} is not installed: under CI it must be (.ci/run installs {package})"
    );
    eprintln!("skipped: {tool} is not installed (.ci/run installs {package})");
    false
}

/// `launcher` (its words, ending with the process-count option) with `np` processes of the
/// benchmark in a dry run, under `timeout`, in a clean launcher environment plus `env`.
pub(crate) fn run(launcher: &[&str], np: usize, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new("timeout");
    c.arg("90")
        .args(launcher)
        .arg(np.to_string())
        .args(programs::program_words(BIN))
        .args(["--dry-run", "-b", "1M", "-e", "4M", "-f", "2"])
        .args(args);
    let vars: HashMap<String, String> = std::env::vars()
        .filter(|(k, _)| {
            !(k.starts_with("SLURM_")
                || k.starts_with("OMPI_")
                || k.starts_with("PMI")
                || k.starts_with("HYDRA_")
                || k.starts_with("NCCL_")
                || ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"].contains(&k.as_str()))
        })
        .collect();
    c.env_clear()
        .envs(vars)
        .env("CUDA_VISIBLE_DEVICES", "0")
        .env("NCCL_PERF_BOOTSTRAP_TIMEOUT", "60")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the launcher runs")
}

pub(crate) const MPIRUN: &[&str] = &["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"];
pub(crate) const HYDRA: &[&str] = &["mpiexec.hydra", "-n"];

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The job printed one plan of `np` processes, met through `engine`, each with its own rank
/// and local rank (one host).
pub(crate) fn one_plan(o: &Output, np: usize, engine: &str) {
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert_eq!(out.matches("# nccl-perf dry run").count(), 1, "{out}");
    assert!(out.contains(&format!("# Bootstrap: {engine} ")), "{out}");
    assert!(
        out.contains(&format!("Processes {np} x threads 1 x GPUs 1 = {np} ranks")),
        "{out}"
    );
    let mut ranks: Vec<(usize, usize)> = out
        .lines()
        .filter(|l| l.starts_with("#  Rank "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = |key: &str| {
                let i = w.iter().position(|x| *x == key).unwrap();
                w[i + 1].parse::<usize>().unwrap()
            };
            (at("Rank"), at("rank"))
        })
        .collect();
    ranks.sort();
    assert_eq!(ranks, (0..np).map(|r| (r, r)).collect::<Vec<_>>(), "{out}");
    // The engine's one-time token is the job's secret: no "open rendezvous" note.
    assert!(!err.contains("is open to any process"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn mpirun_four_processes_meet_through_pmix() {
    if have("mpirun", "openmpi-bin") {
        one_plan(&run(MPIRUN, 4, &[], &[]), 4, "PMIx");
    }
}

#[test]
fn mpirun_sixteen_processes_meet_through_pmix() {
    if have("mpirun", "openmpi-bin") {
        one_plan(&run(MPIRUN, 16, &[], &[]), 16, "PMIx");
    }
}

#[test]
fn mpiexec_hydra_four_processes_meet_through_pmi1() {
    if have("mpiexec.hydra", "mpich") {
        one_plan(&run(HYDRA, 4, &[], &[]), 4, "PMI-1");
    }
}

#[test]
fn mpiexec_hydra_sixteen_processes_meet_through_pmi1() {
    if have("mpiexec.hydra", "mpich") {
        one_plan(&run(HYDRA, 16, &[], &[]), 16, "PMI-1");
    }
}

#[test]
fn mpiexec_hydra_pmi_port_model_meets_through_pmi1() {
    // PMI_PORT=host:port and PMI_ID instead of an inherited socket: the process connects and
    // says who it is; rank and size come from the launcher's answer.
    if have("mpiexec.hydra", "mpich") {
        one_plan(
            &run(&["mpiexec.hydra", "-pmi-port", "-n"], 4, &[], &[]),
            4,
            "PMI-1",
        );
    }
}

#[test]
fn missing_pmix_and_mpi_libraries_are_one_line_naming_what_to_set() {
    // Without libpmix.so.2 the MPI library starts the job (`mpilib.rs`); without both, one
    // line names both and what to set.
    if !have("mpirun", "openmpi-bin") {
        return;
    }
    let (pmix, mpi) = ("/nonexistent/libpmix.so.2", "/nonexistent/libmpi.so.40");
    let launcher = [
        MPIRUN[0],
        MPIRUN[1],
        MPIRUN[2],
        "-x",
        "NCCL_PERF_PMIX_LIB",
        "-x",
        "NCCL_PERF_MPI_LIB",
        "-np",
    ];
    let env = [("NCCL_PERF_PMIX_LIB", pmix), ("NCCL_PERF_MPI_LIB", mpi)];
    let o = run(&launcher, 2, &env, &[]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_ne!(o.status.code(), Some(0), "{out}{err}");
    assert!(!out.contains("dry run"), "{out}");
    let line = err
        .lines()
        .find(|l| {
            l.contains("OMPI_COMM_WORLD_SIZE is set but neither libpmix.so.2 nor libmpi.so.40")
        })
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains(pmix)
            && line.contains(mpi)
            && line.contains("NCCL_PERF_MPI_LIB=")
            && line.contains("NCCL_PERF_RENDEZVOUS="),
        "{line}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn the_users_rendezvous_and_forced_modes_still_win() {
    if !have("mpiexec.hydra", "mpich") {
        return;
    }
    // NCCL_PERF_BOOTSTRAP=env: the launcher's variables only, as before engines: Hydra's
    // PMI_RANK/PMI_SIZE without an address is the wrong launch it always was. Once in six runs
    // of the suite beside `stress --cpu 2`, Hydra gave back no stderr at all (its own launch
    // cut short when a process ended first): a second launch then, never a third.
    let mut o = run(HYDRA, 2, &[("NCCL_PERF_BOOTSTRAP", "env")], &[]);
    if o.stderr.is_empty() {
        eprintln!(
            "hydra returned no stderr (exit {:?}, stdout {:?}): launching again",
            o.status.code(),
            text(&o.stdout)
        );
        o = run(HYDRA, 2, &[("NCCL_PERF_BOOTSTRAP", "env")], &[]);
    }
    let err = text(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("wrong launch"),
        "stderr {err:?}, stdout {:?}",
        text(&o.stdout)
    );
    // NCCL_PERF_BOOTSTRAP=pmix where the launcher serves PMI-1 only: one line.
    let o = run(HYDRA, 2, &[("NCCL_PERF_BOOTSTRAP", "pmix")], &[]);
    let err = text(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("NCCL_PERF_BOOTSTRAP=pmix, but the launcher did not set"),
        "{err}"
    );
}

/// An MPMD launch whose second program never reaches the engine's fence: the benchmark stops
/// by its bootstrap timeout with one line naming the engine, exit 4.
fn a_process_that_never_arrives(launcher: &str, np: &str, engine: &str) {
    let mut words = vec![launcher];
    if launcher == "mpirun" {
        words.extend([
            "--allow-run-as-root",
            "--oversubscribe",
            "-x",
            "NCCL_PERF_BOOTSTRAP_TIMEOUT",
        ]);
    }
    let line = never_arriving(&words, np, &[]);
    assert!(line.contains(engine), "{line}");
}

/// An MPMD launch by `launcher` (its words) whose second program (`sleep 6`) never joins, with
/// a bootstrap timeout of 2 s and `env` set: the run must end with exit 4 and one line saying
/// what timed out, which is returned.
pub(crate) fn never_arriving(launcher: &[&str], np: &str, env: &[(&str, &str)]) -> String {
    let mut c = Command::new("timeout");
    c.arg("60")
        .args(launcher)
        .args([np, "1"])
        .args(programs::program_words(BIN))
        .args([
            "--dry-run",
            "-b",
            "8",
            "-e",
            "8",
            ":",
            np,
            "1",
            "sleep",
            "6",
        ])
        .env("NCCL_PERF_BOOTSTRAP_TIMEOUT", "2")
        .env_remove("NCCL_PERF_BOOTSTRAP")
        .env_remove("NCCL_PERF_RENDEZVOUS")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .envs(env.iter().copied());
    let o = c.output().expect("the launcher runs");
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(4), "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("timed out"))
        .unwrap_or_else(|| panic!("{out}{err}"));
    assert!(line.contains("NCCL_PERF_BOOTSTRAP_TIMEOUT"), "{line}");
    line.to_string()
}

#[test]
fn mpirun_a_process_that_never_arrives_ends_by_the_timeout() {
    if have("mpirun", "openmpi-bin") {
        a_process_that_never_arrives("mpirun", "-np", "PMIx (namespace");
    }
}

#[test]
fn mpiexec_hydra_a_process_that_never_arrives_ends_by_the_timeout() {
    if have("mpiexec.hydra", "mpich") {
        a_process_that_never_arrives("mpiexec.hydra", "-n", "PMI-1 (PMI_FD=");
    }
}

/// Whether our programs run under an emulator; then `what` is skipped, with a message.
pub(crate) fn emulated(what: &str) -> bool {
    let e = std::env::var_os("NCCL_PERF_TEST_RUNNER").is_some_and(|v| !v.is_empty());
    if e {
        eprintln!("skipped under NCCL_PERF_TEST_RUNNER: {what}");
    }
    e
}

/// Slurm's PMI-2 client library (Debian's libpmi2-0) where it is installed; under CI it must be.
fn pmi2_library() -> Option<String> {
    let p = format!("/usr/lib/{}-linux-gnu/libpmi2.so.0", std::env::consts::ARCH);
    if std::path::Path::new(&p).exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{p} is not installed: under CI it must be (.ci/run installs libpmi2-0)"
    );
    eprintln!("skipped: {p} is not installed (.ci/run installs libpmi2-0)");
    None
}

/// `mpiexec.hydra` with `NCCL_PERF_BOOTSTRAP=pmi2`: every process loads the PMI-2 library
/// (the engine Cray's PALS gets) and Hydra serves its PMI-2 wire protocol.
fn hydra_through_the_pmi2_library(np: usize) {
    if emulated("the PMI-2 library (none in the sysroot)") || !have("mpiexec.hydra", "mpich") {
        return;
    }
    let Some(lib) = pmi2_library() else {
        return;
    };
    let env = [
        ("NCCL_PERF_BOOTSTRAP", "pmi2"),
        ("NCCL_PERF_PMI2_LIB", lib.as_str()),
    ];
    one_plan(&run(HYDRA, np, &env, &[]), np, "PMI-2 library");
}

#[test]
fn mpiexec_hydra_four_processes_meet_through_the_pmi2_library() {
    hydra_through_the_pmi2_library(4);
}

#[test]
fn mpiexec_hydra_sixteen_processes_meet_through_the_pmi2_library() {
    hydra_through_the_pmi2_library(16);
}

#[test]
fn pals_without_a_pmi2_or_mpi_library_is_one_line_naming_both() {
    // Cray's PALS (its rank variable, no PMIx or PMI-1 wire-up): the PMI-2 library, then the
    // MPI library (Cray MPICH); neither there: exit 6 and one line naming both and what to set.
    let (pmi2, mpi) = ("/nonexistent/libpmi2.so", "/nonexistent/libmpi.so.12");
    let c = programs::command(
        BIN,
        &programs::args(&["--dry-run", "-b", "8", "-e", "8"]),
        &[
            ("PALS_RANKID", "0"),
            ("PALS_LOCAL_RANKID", "0"),
            ("NCCL_PERF_PMI2_LIB", pmi2),
            ("NCCL_PERF_MPI_LIB", mpi),
            ("CUDA_VISIBLE_DEVICES", "0"),
        ],
    );
    let o = programs::run(c, std::time::Duration::from_secs(60));
    assert_eq!(o.code, Some(6), "{}", o.all());
    assert!(
        !o.panicked() && !o.stdout.contains("dry run"),
        "{}",
        o.all()
    );
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", o.all());
    assert!(
        lines[0].contains("PALS_RANKID is set but neither libpmi2.so nor libmpi.so.12 was found")
            && lines[0].contains(&format!("({pmi2}; {mpi})"))
            && lines[0].contains("NCCL_PERF_PMI2_LIB=")
            && lines[0].contains("NCCL_PERF_MPI_LIB=")
            && lines[0].contains("NCCL_PERF_RENDEZVOUS="),
        "{}",
        lines[0]
    );
}
