//! Every shell script of the repository through `bash -n` and shellcheck (skipped with a
//! message where shellcheck is not installed), the programs they name installed, and the
//! sbatch scripts asking Slurm for what their launch needs.

use std::path::PathBuf;
use std::process::Command;

use crate::shipped::*;

// ---------------------------------------------------------------------------------------------
// Shell scripts

/// Every shell script in the repository: (path, written for this issue and held to shellcheck's
/// every level rather than warnings and errors).
fn scripts() -> Vec<(PathBuf, bool)> {
    let mut out = vec![(root().join(".ci/run"), false)];
    for e in std::fs::read_dir(root().join("ci")).expect("ci") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "sh") {
            let strict = [
                "install-layout.sh",
                "check-install.sh",
                "cross.sh",
                "arm64.sh",
                "slurm.sh",
            ]
            .iter()
            .any(|n| p.ends_with(n));
            out.push((p, strict));
        }
    }
    out.push((root().join("docker/sshd.sh"), true));
    // The seeds' recipe tests (tests/recipes.rs): the launcher stand-ins and the output checks.
    out.push((root().join("tests/recipes/launch.sh"), true));
    out.push((root().join("tests/recipes/checks.sh"), true));
    for dir in ["slurm", "mpirun", "kubernetes"] {
        for e in std::fs::read_dir(root().join("examples").join(dir)).expect("examples") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "sh" || x == "sbatch") {
                out.push((p, true));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn scripts_pass_bash_n_and_name_installed_programs() {
    let all = scripts();
    assert!(all.len() >= 6, "{all:?}");
    for (p, strict) in &all {
        ok(Command::new("bash").arg("-n").arg(p));
        let text = std::fs::read_to_string(p).expect("read");
        assert!(text.starts_with("#!"), "{}: no #! line", p.display());
        if *strict && p.starts_with(root().join("examples")) {
            assert!(is_executable(p), "{} is not executable", p.display());
            // The default folder and benchmark are the layout's.
            assert!(
                text.contains("NCCL_TESTS_BUILD=\"${NCCL_TESTS_BUILD:-/opt/nccl-tests/build}\"")
            );
            assert!(text.contains("BENCH=\"${BENCH:-all_reduce_perf}\""));
            assert!(!text.contains("NCCL_NVLS_ENABLE"));
        }
    }
    assert_paths_installed(
        "the examples' default",
        "/opt/nccl-tests/build/all_reduce_perf",
    );
}

#[test]
fn scripts_pass_shellcheck() {
    if Command::new("shellcheck")
        .arg("--version")
        .output()
        .is_err()
    {
        // .ci/run installs it; elsewhere it may be missing.
        assert!(
            std::env::var_os("CI").is_none(),
            "shellcheck is not installed: under CI it must be (.ci/run installs it)"
        );
        eprintln!("skipped: shellcheck is not installed (apt-get install shellcheck)");
        return;
    }
    for (p, strict) in scripts() {
        let mut c = Command::new("shellcheck");
        if !strict {
            c.arg("--severity=warning");
        }
        ok(c.arg(&p));
    }
}

/// The mpirun example adds nothing for nccl-perf to nccl-tests' mpirun line: the default build
/// starts through mpirun's own wire-up (tests/engines.rs, tests/recipes.rs run that), so no
/// rendezvous address is made up; one the user gives is passed on.
#[test]
fn mpirun_example_needs_no_rendezvous_address() {
    let text = std::fs::read_to_string(root().join("examples/mpirun/all_reduce.sh")).expect("read");
    assert!(
        !text.contains("-x NCCL_PERF_RENDEZVOUS="),
        "a default address"
    );
    assert!(
        !text.contains("first_host"),
        "an address made from the hosts"
    );
    assert!(text.contains(
        "if [ -n \"${NCCL_PERF_RENDEZVOUS:-}\" ]; then\n  MPIRUN+=(-x NCCL_PERF_RENDEZVOUS)\nfi"
    ));
    let mpirun: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("MPIRUN=(mpirun"))
        .take_while(|l| !l.starts_with("if "))
        .collect();
    assert_eq!(
        mpirun,
        [
            "MPIRUN=(mpirun -np \"$np\" -H \"$HOSTS\" --bind-to none",
            "  -x PATH -x NCCL_DEBUG=\"${NCCL_DEBUG:-WARN}\")"
        ],
        "nccl-tests' mpirun line, nothing of nccl-perf's"
    );
}

#[test]
fn sbatch_scripts_ask_slurm_for_what_their_launch_needs() {
    let mpi =
        std::fs::read_to_string(root().join("examples/slurm/all_reduce_mpi.sbatch")).expect("read");
    assert!(mpi.contains("srun --mpi=pmix"));
    // The default build under srun --mpi: no MPI build asked for, and the _mpi names answer.
    assert!(!mpi.contains("ci/install-layout.sh --mpi"), "{mpi}");
    assert_paths_installed(
        "the _mpi name the sbatch script mentions",
        "/opt/nccl-tests/build/all_gather_perf_mpi",
    );
    let env =
        std::fs::read_to_string(root().join("examples/slurm/all_reduce_env.sbatch")).expect("read");
    assert!(env.contains("SRUN=(srun --cpu-bind=none)") && !env.contains("srun --mpi"));
    for text in [&mpi, &env] {
        for key in ["--nodes=", "--ntasks-per-node=", "--gpus-per-node="] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("#SBATCH {key}"))),
                "#SBATCH {key}"
            );
        }
        assert!(text.contains("--dry-run"));
    }
}
