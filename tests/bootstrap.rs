//! Multi-process launches without a GPU: the built binary is started several times with
//! launcher environments (Slurm, torchrun, mpirun) and `--dry-run`, which bootstraps for real
//! and prints the plan. Every child runs under a deadline and is killed past it.

use crate::programs;

use std::collections::HashMap;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// Longest a child may run in these tests.
const DEADLINE: Duration = Duration::from_secs(60);

/// The binary with a clean environment plus `vars`.
fn command(vars: &[(&str, String)]) -> Command {
    command_with(vars, &[])
}

/// [`command`] with more arguments.
fn command_with(vars: &[(&str, String)], args: &[&str]) -> Command {
    let mut c = programs::program(BIN);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        // Numeric indexes: GPUs are "visible" but their identity is unknown, so the plan is the
        // same with or without GPUs on the test machine.
        .env("CUDA_VISIBLE_DEVICES", "0,1,2,3")
        .env("NCCL_PERF_BOOTSTRAP_TIMEOUT", "20")
        .args(["--dry-run", "-b", "1M", "-e", "4M", "-f", "2"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        c.env(k, v);
    }
    c
}

/// Waits for every child, killing those still running at the deadline.
fn wait_all(children: Vec<Child>) -> Vec<Output> {
    let start = Instant::now();
    let mut children: Vec<Option<Child>> = children.into_iter().map(Some).collect();
    while children
        .iter_mut()
        .flatten()
        .any(|c| matches!(c.try_wait(), Ok(None)))
    {
        if start.elapsed() > DEADLINE {
            for c in children.iter_mut().flatten() {
                let _ = c.kill();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    children
        .iter_mut()
        .map(|c| c.take().unwrap().wait_with_output().unwrap())
        .collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Starts one process per rank in `ranks`, each with `vars(rank)`.
fn launch(ranks: &[usize], vars: impl Fn(usize) -> Vec<(&'static str, String)>) -> Vec<Output> {
    let children = ranks
        .iter()
        .map(|&r| command(&vars(r)).spawn().expect("binary starts"))
        .collect();
    wait_all(children)
}

/// The one plan printed by all processes together: (rank, local rank) of each `#  Rank` line.
fn single_plan(outs: &[Output]) -> Vec<(usize, usize)> {
    for o in outs {
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    let printers: Vec<String> = outs
        .iter()
        .map(|o| text(&o.stdout))
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(
        printers.len(),
        1,
        "exactly one process prints: {printers:?}"
    );
    let plan = &printers[0];
    assert!(
        plan.starts_with("# nccl-perf dry run of all_reduce_perf"),
        "{plan}"
    );
    assert!(plan.lines().all(|l| l.starts_with('#')), "{plan}");
    assert!(plan.contains("= 4 ranks in 1 communicator(s)"), "{plan}");
    assert!(
        plan.contains("# Sizes: 3 from 1048576 to 4194304 bytes"),
        "{plan}"
    );
    plan.lines()
        .filter(|l| l.starts_with("#  Rank "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = |key: &str| {
                let i = w.iter().position(|x| *x == key).unwrap();
                w[i + 1].parse::<usize>().unwrap()
            };
            (at("Rank"), at("rank"))
        })
        .collect()
}

fn slurm(rank: usize, size: usize, port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("SLURM_PROCID", rank.to_string()),
        ("SLURM_NTASKS", size.to_string()),
        ("SLURM_STEP_NUM_TASKS", size.to_string()),
        ("SLURM_LOCALID", (rank % 2).to_string()),
        ("SLURM_JOB_ID", "4242".into()),
        ("SLURM_STEP_ID", "0".into()),
        ("SLURM_STEP_NODELIST", "localhost,node[02-03]".into()),
        ("SLURM_STEP_TASKS_PER_NODE", "2,1(x2)".into()),
        ("NCCL_PERF_RENDEZVOUS_PORT", port.to_string()),
    ]
}

#[test]
fn slurm_style_four_processes_print_one_plan() {
    let port = programs::free_port();
    let outs = launch(&[0, 1, 2, 3], |r| slurm(r, 4, port));
    assert_eq!(single_plan(&outs), [(0, 0), (1, 1), (2, 0), (3, 1)]);
}

#[test]
fn torchrun_style_four_processes_print_one_plan() {
    let port = programs::free_port();
    let outs = launch(&[0, 1, 2, 3], |r| {
        vec![
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "4".into()),
            ("LOCAL_RANK", r.to_string()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.to_string()),
        ]
    });
    assert_eq!(single_plan(&outs), [(0, 0), (1, 1), (2, 2), (3, 3)]);
}

#[test]
fn openmpi_style_without_local_rank_uses_the_host_hash() {
    let port = programs::free_port();
    let outs = launch(&[0, 1, 2, 3], |r| {
        vec![
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", "4".into()),
            ("NCCL_PERF_RENDEZVOUS", format!("127.0.0.1:{port}")),
            // An MPI build would otherwise take OMPI_* for MPI (there is no mpirun here).
            ("NCCL_PERF_BOOTSTRAP", "env".into()),
        ]
    });
    assert_eq!(single_plan(&outs), [(0, 0), (1, 1), (2, 2), (3, 3)]);
}

#[test]
fn locate_in_a_dry_run_shares_the_topology_and_shows_the_first_round() {
    // Four processes posing as four hosts (their own NCCL_HOSTID), as on the one-GPU machine.
    let port = programs::free_port();
    let children = (0..4)
        .map(|r| {
            let vars = vec![
                ("RANK", r.to_string()),
                ("WORLD_SIZE", "4".to_string()),
                ("LOCAL_RANK", "0".to_string()),
                ("MASTER_ADDR", "127.0.0.1".to_string()),
                ("MASTER_PORT", port.to_string()),
                ("NCCL_HOSTID", format!("vnode{r}")),
                ("NCCL_TESTS_DEVICE", "0".to_string()),
            ];
            command_with(&vars, &["--locate", "quick", "--locate-seed", "3"])
                .spawn()
                .expect("binary starts")
        })
        .collect();
    let outs = wait_all(children);
    for o in &outs {
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    let plan = text(&outs[0].stdout);
    assert!(
        plan.contains("# locate: schedule quick on 4 nodes x 1 GPUs (4 ranks); round 1: 2 groups"),
        "{plan}"
    );
    // Below 8 nodes quick runs full: round 1 pairs every node with another.
    let groups: Vec<&str> = plan
        .lines()
        .filter(|l| l.starts_with("# locate     1 pairs"))
        .collect();
    assert_eq!(groups.len(), 2, "{plan}");
    for g in &groups {
        assert!(g.contains("+vnode") && g.contains("(ranks "), "{g}");
    }
    assert!(plan.trim_end().ends_with("nothing was run"), "{plan}");
    assert!(outs[1..].iter().all(|o| o.stdout.is_empty()));
    // The four "hosts" share this machine's kernel boot id, and locate says so; where the
    // boot id cannot be read, no machine is known and nothing is said.
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let note = "# locate note: all 4 nodes run on one machine (one kernel boot id)";
    assert_eq!(plan.contains(note), !boot_id.is_empty(), "{plan}");
}

/// Every process of a launch missing `missing` fails within the timeout, naming it.
fn missing_rank_is_named(missing: usize) {
    let port = programs::free_port();
    let ranks: Vec<usize> = (0..4).filter(|r| *r != missing).collect();
    let start = Instant::now();
    let outs = launch(&ranks, |r| {
        let mut v = slurm(r, 4, port);
        v.push(("NCCL_PERF_BOOTSTRAP_TIMEOUT", "2".into()));
        v
    });
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    for o in &outs {
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(4), "{err}");
        assert!(err.contains(&format!("missing: rank {missing}")), "{err}");
        assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
    }
}

#[test]
fn a_missing_rank_makes_every_other_fail_in_time_naming_it() {
    missing_rank_is_named(3);
}

#[test]
fn a_missing_rank_0_is_named_too() {
    missing_rank_is_named(0);
}

/// `mpirun` with a clean launcher environment, or `None` (test skipped) where it is missing.
fn mpirun(np: usize, extra_env: &[(&str, &str)]) -> Option<Output> {
    mpirun_with(np, extra_env, &[])
}

/// [`mpirun`] with more arguments for the benchmark.
fn mpirun_with(np: usize, extra_env: &[(&str, &str)], args: &[&str]) -> Option<Output> {
    let mut c = programs::mpirun(BIN, np, 60)?;
    c.args(["--dry-run", "-b", "1M", "-e", "4M", "-f", "2"])
        .args(args);
    let vars: HashMap<String, String> = std::env::vars()
        .filter(|(k, _)| {
            !(k.starts_with("SLURM_")
                || k.starts_with("OMPI_COMM_WORLD")
                || k.starts_with("PMI")
                || k.starts_with("NCCL_")
                || ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"].contains(&k.as_str()))
        })
        .collect();
    c.env_clear()
        .envs(vars)
        .env("CUDA_VISIBLE_DEVICES", "0,1,2,3");
    for (k, v) in extra_env {
        c.env(k, v);
    }
    Some(c.output().expect("mpirun runs"))
}

/// With the launcher's wire-up set aside (`NCCL_PERF_BOOTSTRAP=env`; by default the build
/// without MPI meets through PMIx under mpirun, `engines.rs`), the OMPI variables alone give no
/// address: the diagnosis.
#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_under_mpirun_stops_with_the_diagnosis() {
    let Some(o) = mpirun(4, &[("NCCL_PERF_BOOTSTRAP", "env")]) else {
        return;
    };
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_ne!(o.status.code(), Some(0), "{out}{err}");
    assert!(!out.contains("dry run"), "it must not run twice: {out}");
    // The full diagnosis at most once (local rank 0 of the one node), a one-line pointer from
    // the others (before: the paragraph from every process). mpirun ends the job when the first
    // process exits non-zero, so some may be stopped before they print.
    let full = err.matches("Unset NCCL_PERF_BOOTSTRAP").count();
    let pointers = err
        .matches("local rank 0 on this node says how to fix it")
        .count();
    assert!(full <= 1 && full + pointers >= 1, "{err}");
    assert_eq!(
        err.matches("wrong launch").count(),
        full + pointers,
        "{err}"
    );
    assert!(
        err.contains("wrong launch")
            && err.contains("NCCL_PERF_BOOTSTRAP=env was asked for")
            && !err.contains("--features mpi"),
        "{err}"
    );
}

#[cfg(feature = "mpi")]
#[test]
fn mpirun_four_ranks_print_one_plan() {
    let Some(o) = mpirun(4, &[]) else { return };
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert_eq!(out.matches("# nccl-perf dry run").count(), 1, "{out}");
    assert!(out.contains("# Bootstrap: MPI"), "{out}");
    assert_eq!(single_plan(&[o]), [(0, 0), (1, 1), (2, 2), (3, 3)]);
}

#[cfg(feature = "mpi")]
#[test]
fn mpirun_locate_dry_run_shares_the_topology_over_mpi() {
    let Some(o) = mpirun_with(4, &[], &["--locate", "nodes"]) else {
        return;
    };
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("# locate: schedule nodes on 1 nodes x 4 GPUs (4 ranks); round 1: 1 groups"),
        "{out}"
    );
    assert!(out.contains("(ranks 0,1,2,3)"), "{out}");
}

#[cfg(feature = "mpi")]
#[test]
fn mpirun_split_groups_and_split_errors() {
    let Some(o) = mpirun(4, &[("NCCL_TESTS_SPLIT", "MOD 2")]) else {
        return;
    };
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("= 4 ranks in 2 communicator(s)"), "{out}");
    assert!(out.contains("#  Rank  1 Group  1"), "{out}");
    let Some(o) = mpirun(2, &[("NCCL_TESTS_SPLIT", "DIV 0")]) else {
        return;
    };
    assert_ne!(o.status.code(), Some(0));
    assert!(
        text(&o.stderr).contains("DIV 0 divides by zero"),
        "{}",
        text(&o.stderr)
    );
}

/// An MPMD launch under mpirun: ranks 0-1 run all_reduce_perf, rank 2 broadcast_perf with other
/// sizes. The gathered fingerprints stop it with exit 6, naming rank 2.
#[cfg(feature = "mpi")]
#[test]
fn mpirun_mpmd_with_another_binary_stops_naming_the_rank() {
    if Command::new("mpirun").arg("--version").output().is_err() {
        assert!(std::env::var("CI").is_err(), "mpirun is missing under CI");
        eprintln!("skipped: mpirun is not installed");
        return;
    }
    let bcast = env!("CARGO_BIN_EXE_broadcast_perf");
    let o = Command::new("timeout")
        .args(["60", "mpirun", "--allow-run-as-root", "--oversubscribe"])
        .args(["-np", "2"])
        .args(programs::program_words(BIN))
        .args(["--dry-run", "-b", "1M", "-e", "1M", ":", "-np", "1"])
        .args(programs::program_words(bcast))
        .args(["--dry-run", "-b", "2M", "-e", "2M"])
        .env("CUDA_VISIBLE_DEVICES", "0,1,2,3")
        .output()
        .expect("mpirun runs");
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(6), "{out}{err}");
    assert!(
        err.contains("rank 2 runs broadcast_perf -b 2M; rank 0 runs all_reduce_perf -b 1M"),
        "{err}"
    );
    assert!(!out.contains("consistent"), "{out}");
    // Every process knew: they left through MPI_Finalize, not MPI_Abort and its banner.
    assert!(!err.contains("MPI_ABORT"), "{err}");
    assert_eq!(err.matches("wrong launch").count(), 1, "{err}");
}
