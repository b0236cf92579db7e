use super::*;
use std::collections::HashMap;

fn detect_with(vars: &[(&str, &str)], mpi_built: bool) -> Result<Launch> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    detect(&|k: &str| map.get(k).cloned(), mpi_built)
}

fn tcp(vars: &[(&str, &str)]) -> TcpLaunch {
    match detect_with(vars, false) {
        Ok(Launch::Tcp(t)) => t,
        other => panic!("{other:?}"),
    }
}

fn launch_error(vars: &[(&str, &str)], mpi_built: bool) -> String {
    match detect_with(vars, mpi_built) {
        Err(Error::Launch(m)) => m,
        other => panic!("{other:?}"),
    }
}

#[test]
fn nothing_is_a_single_process() {
    assert_eq!(detect_with(&[], false).unwrap(), Launch::Single);
    assert_eq!(detect_with(&[], true).unwrap(), Launch::Single);
    // An indexed-job pod without WORLD_SIZE runs on its own (per-node health checks).
    assert_eq!(
        detect_with(&[("JOB_COMPLETION_INDEX", "3")], false).unwrap(),
        Launch::Single
    );
}

#[test]
fn slurm_rank_size_local_rank_and_first_host() {
    let t = tcp(&[
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "16"),
        ("SLURM_STEP_NUM_TASKS", "8"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_JOB_ID", "1234"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_STEP_NODELIST", "node[03-06],other"),
        ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1,1"),
    ]);
    assert_eq!(
        (t.launcher, t.rank, t.size, t.local_rank),
        ("slurm", 5, 8, Some(1))
    );
    assert_eq!(t.host, "node03");
    assert!((20000..30000).contains(&t.port), "{}", t.port);
    assert_eq!(t.job, "slurm:1234.0");
    assert_eq!(t.timeout, DEFAULT_TIMEOUT);
    assert_eq!(t.silence, Some(DEFAULT_SILENCE));
    let hosts = t.expected_hosts.unwrap();
    assert_eq!(hosts.len(), 8);
    assert_eq!((hosts[5].as_str(), hosts[7].as_str()), ("node05", "other"));
}

#[test]
fn slurm_port_is_stable_per_step_and_can_be_set() {
    let base = [
        ("SLURM_PROCID", "0"),
        ("SLURM_STEP_NUM_TASKS", "2"),
        ("SLURM_JOB_NODELIST", "n1"),
        ("SLURM_JOB_ID", "77"),
    ];
    assert_eq!(tcp(&base).port, tcp(&base).port);
    let mut other = base.to_vec();
    other.push(("SLURM_STEP_ID", "1"));
    assert_ne!(tcp(&base).port, tcp(&other).port);
    other.push(("NCCL_PERF_RENDEZVOUS_PORT", "31000"));
    assert_eq!(tcp(&other).port, 31000);
    assert_eq!(tcp(&other).size, 2);
}

#[test]
fn a_batch_script_is_one_process_whatever_the_job_size() {
    // sbatch --ntasks=8 running the binary in the script itself, not under srun.
    let batch = [
        ("SLURM_JOB_ID", "77"),
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_JOB_NODELIST", "n[1-2]"),
    ];
    assert_eq!(detect_with(&batch, false).unwrap(), Launch::Single);
    // Without a job id (a hand-made environment) SLURM_NTASKS counts.
    let t = tcp(&[
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_NODELIST", "a"),
    ]);
    assert_eq!(t.size, 2);
}

#[test]
fn one_slurm_task_needs_no_node_list() {
    let t = tcp(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")]);
    assert_eq!((t.rank, t.size), (0, 1));
}

#[test]
fn torchrun_and_indexed_jobs() {
    let t = tcp(&[
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29400"),
    ]);
    assert_eq!((t.rank, t.size, t.local_rank), (3, 4, Some(1)));
    assert_eq!((t.host.as_str(), t.port), ("10.0.0.1", 29400));
    // Under torchrun its own store holds MASTER_PORT.
    let t = tcp(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "29400"),
        ("TORCHELASTIC_RUN_ID", "x"),
    ]);
    assert_eq!(t.port, 29401);
    let t = tcp(&[
        ("JOB_COMPLETION_INDEX", "2"),
        ("WORLD_SIZE", "4"),
        ("MASTER_ADDR", "job-0.svc"),
    ]);
    assert_eq!(
        (t.launcher, t.rank, t.port),
        ("Kubernetes indexed job", 2, 29500)
    );
    let e = launch_error(&[("RANK", "1"), ("WORLD_SIZE", "2")], false);
    assert!(e.contains("NCCL_PERF_RENDEZVOUS"), "{e}");
}

#[test]
fn openmpi_without_mpi_needs_a_rendezvous() {
    let mpirun = [
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        // mpirun inside an sbatch script: Slurm's variables describe the batch step.
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "1"),
    ];
    // Without a wire-up we speak, the launcher's MPI library starts the job.
    match detect_with(&mpirun, false) {
        Ok(Launch::Engine(e)) => assert_eq!(e.kind, Kind::MpiLib),
        other => panic!("{other:?}"),
    }
    // Asked for the launcher's variables alone: the wrong launch it always was.
    let mut mpirun = mpirun.to_vec();
    mpirun.push(("NCCL_PERF_BOOTSTRAP", "env"));
    // Local rank 1: one line that points at the node's first process (which explains).
    let e = launch_error(&mpirun, false);
    assert_eq!(
        e,
        "wrong launch: rank 1 of 2 cannot meet the others (mpirun (OpenMPI); \
         NCCL_PERF_BOOTSTRAP=env was asked for, no NCCL_PERF_RENDEZVOUS): local rank 0 on this \
         node says how to fix it"
    );
    // The first of the node explains: unset the forced mode (the default starts through the
    // launcher's wire-up in every build), not another build.
    let mut first = mpirun.to_vec();
    first[2] = ("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    for mpi_built in [false, true] {
        let e = launch_error(&first, mpi_built);
        assert!(
            e.contains("rank 1 of 2")
                && e.contains("NCCL_PERF_BOOTSTRAP=env was asked for")
                && e.contains("Unset NCCL_PERF_BOOTSTRAP")
                && e.contains("NCCL_PERF_RENDEZVOUS=<host of rank 0>")
                && !e.contains("--features mpi")
                && !e.contains("without MPI"),
            "{e}"
        );
    }
    // Found on their own by a build without MPI (no wire-up to reach): another build helps.
    let e = launch_error(&[("RANK", "0"), ("WORLD_SIZE", "2")], false);
    assert!(
        e.contains("built without MPI") && e.contains("--features mpi"),
        "{e}"
    );
    let mut with = mpirun.to_vec();
    with.push(("NCCL_PERF_RENDEZVOUS", "node7:4000"));
    let t = tcp(&with);
    assert_eq!((t.rank, t.size, t.local_rank), (1, 2, Some(1)));
    assert_eq!((t.host.as_str(), t.port), ("node7", 4000));
    // One process under mpirun is fine as it is.
    let t = tcp(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1")]);
    assert_eq!(t.size, 1);
}

#[test]
fn mpi_builds_use_mpi_under_mpi_launchers() {
    let under = [("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "4")];
    assert_eq!(detect_with(&under, true).unwrap(), Launch::Mpi);
    assert_eq!(
        detect_with(
            &[
                ("PMIX_RANK", "0"),
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2")
            ],
            true
        )
        .unwrap(),
        Launch::Mpi
    );
    // Plain srun without PMI: the Slurm environment.
    let t = detect_with(
        &[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_NODELIST", "a"),
        ],
        true,
    )
    .unwrap();
    assert!(matches!(t, Launch::Tcp(_)), "{t:?}");
    let e = launch_error(
        &[
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "3"),
            ("NCCL_PERF_BOOTSTRAP", "env"),
        ],
        false,
    );
    assert!(e.contains("rank 0 of 3"), "{e}");
    // No local rank (PMIx, PMI): rank 0 explains, the others point at it.
    let e = launch_error(&[("PMIX_RANK", "2")], false);
    assert!(
        e.contains("rank 2 of several cannot meet") && e.contains("rank 0 says how"),
        "{e}"
    );
}

#[test]
fn explicit_mode_wins() {
    let slurm = [
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_NODELIST", "a"),
    ];
    let mut v = slurm.to_vec();
    v.push(("NCCL_PERF_BOOTSTRAP", "single"));
    assert_eq!(detect_with(&v, false).unwrap(), Launch::Single);
    v.pop();
    v.push(("NCCL_PERF_BOOTSTRAP", "mpi"));
    assert!(launch_error(&v, false).contains("--features mpi"));
    assert_eq!(detect_with(&v, true).unwrap(), Launch::Mpi);
    let e = launch_error(&[("NCCL_PERF_BOOTSTRAP", "env")], false);
    assert!(e.contains("no launcher variables"), "{e}");
    let mut env_mode = vec![
        ("NCCL_PERF_BOOTSTRAP", "env"),
        ("OMPI_COMM_WORLD_RANK", "0"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
    ];
    assert!(launch_error(&env_mode, true).contains("NCCL_PERF_BOOTSTRAP=env"));
    env_mode.push(("NCCL_PERF_RENDEZVOUS", "[::1]:5000"));
    assert!(matches!(detect_with(&env_mode, true), Ok(Launch::Tcp(t)) if t.host == "::1"));
    assert!(matches!(
        detect_with(&[("NCCL_PERF_BOOTSTRAP", "ssh")], false),
        Err(Error::Usage(_))
    ));
}

#[test]
fn bad_values_are_usage_errors() {
    for vars in [
        &[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")][..],
        &[("NCCL_PERF_BOOTSTRAP_TIMEOUT", "0")],
        &[("NCCL_PERF_BOOTSTRAP_TIMEOUT", "soon")],
        &[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("NCCL_PERF_RENDEZVOUS", "host"),
        ],
        &[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("NCCL_PERF_RENDEZVOUS", "h:0"),
        ],
        &[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "h"),
            ("MASTER_PORT", "x"),
        ],
    ] {
        assert!(
            matches!(detect_with(vars, false), Err(Error::Usage(_))),
            "{vars:?}"
        );
    }
    let e = launch_error(&[("RANK", "4"), ("WORLD_SIZE", "4")], false);
    assert!(e.contains("not below"), "{e}");
    let t = tcp(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("NCCL_PERF_BOOTSTRAP_TIMEOUT", "2.5"),
    ]);
    assert_eq!(t.timeout, Duration::from_millis(2500));
}

#[test]
fn the_heartbeat_timeout_is_seconds_and_0_turns_it_off() {
    let with = |v: &'static str| {
        tcp(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "h"),
            ("NCCL_PERF_HEARTBEAT_TIMEOUT", v),
        ])
        .silence
    };
    assert_eq!(with("2.5"), Some(Duration::from_millis(2500)));
    assert_eq!(with("0"), None);
    assert_eq!(with(" "), Some(DEFAULT_SILENCE));
    for bad in ["-1", "x", "nan", "1e9"] {
        let vars = [
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "h"),
            ("NCCL_PERF_HEARTBEAT_TIMEOUT", bad),
        ];
        assert!(
            matches!(detect_with(&vars, false), Err(Error::Usage(_))),
            "{bad}"
        );
    }
}

#[test]
fn launcher_size_reads_the_mpi_launchers_count() {
    let map: HashMap<&str, &str> = [("PMI_SIZE", "4"), ("SLURM_NTASKS", "8")].into();
    let env = |k: &str| map.get(k).map(|v| v.to_string());
    assert_eq!(launcher_size(&env), Some(("PMI_SIZE", 4)));
}

#[test]
fn a_launcher_rank_above_0_never_runs_alone() {
    // A step without SLURM_STEP_NUM_TASKS: SLURM_NTASKS counts.
    let t = tcp(&[
        ("SLURM_PROCID", "3"),
        ("SLURM_JOB_ID", "77"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_NODELIST", "n[1-2]"),
    ]);
    assert_eq!((t.rank, t.size, t.job.as_str()), (3, 4, "slurm:77.0"));
    // No size at all: stop, naming the variables.
    let m = launch_error(
        &[
            ("SLURM_PROCID", "3"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
        ],
        false,
    );
    assert!(
        m.contains("SLURM_PROCID=3") && m.contains("SLURM_JOB_ID=77"),
        "{m}"
    );
    let m = launch_error(&[("RANK", "2")], false);
    assert!(
        m.contains("RANK=2") && m.contains("NCCL_PERF_BOOTSTRAP=single"),
        "{m}"
    );
    assert_eq!(
        detect_with(&[("RANK", "2"), ("NCCL_PERF_BOOTSTRAP", "single")], false).unwrap(),
        Launch::Single
    );
    // Rank 0 of a batch script stays one process.
    assert_eq!(
        detect_with(&[("SLURM_PROCID", "0"), ("SLURM_JOB_ID", "7")], false).unwrap(),
        Launch::Single
    );
}

#[test]
fn a_launcher_size_above_1_without_a_rank_never_runs_alone() {
    // torchrun-style variables without RANK: every process would be a lone rank 0.
    let torch = [
        ("WORLD_SIZE", "4"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
    ];
    for mpi_built in [false, true] {
        let m = launch_error(&torch, mpi_built);
        assert!(
            m.starts_with("wrong launch: WORLD_SIZE=4 ")
                && m.contains("RANK or JOB_COMPLETION_INDEX not set")
                && m.contains("MASTER_ADDR=10.0.0.1")
                && m.contains("NCCL_PERF_BOOTSTRAP=single")
                && !m.contains('\n')
                && !m.contains("  "),
            "{m}"
        );
    }
    // Forced to the launcher's variables: the same cause, not "no launcher variables".
    let mut forced = torch.to_vec();
    forced.push(("NCCL_PERF_BOOTSTRAP", "env"));
    assert!(launch_error(&forced, false).contains("WORLD_SIZE=4 says"));
    // A Slurm step, Open MPI and PMI sizes without their rank (a rendezvous named, so no
    // wire-up or MPI library is tried).
    for (vars, var) in [
        (
            &[
                ("SLURM_JOB_ID", "7"),
                ("SLURM_STEP_ID", "0"),
                ("SLURM_NTASKS", "2"),
            ][..],
            "SLURM_NTASKS=2",
        ),
        (
            &[("SLURM_STEP_NUM_TASKS", "8")][..],
            "SLURM_STEP_NUM_TASKS=8",
        ),
        (
            &[("OMPI_COMM_WORLD_SIZE", "3")][..],
            "OMPI_COMM_WORLD_SIZE=3",
        ),
        (&[("PMI_SIZE", "2")][..], "PMI_SIZE=2"),
    ] {
        let mut v = vars.to_vec();
        v.push(("NCCL_PERF_RENDEZVOUS", "h:1234"));
        let m = launch_error(&v, false);
        assert!(m.starts_with(&format!("wrong launch: {var} says")), "{m}");
    }
    // A size of 1, a batch script's job size and a size on purpose stay one process.
    assert_eq!(
        detect_with(&[("WORLD_SIZE", "1")], false).unwrap(),
        Launch::Single
    );
    assert_eq!(
        detect_with(&[("SLURM_JOB_ID", "7"), ("SLURM_NTASKS", "8")], false).unwrap(),
        Launch::Single
    );
    let mut single = torch.to_vec();
    single.push(("NCCL_PERF_BOOTSTRAP", "single"));
    assert_eq!(detect_with(&single, false).unwrap(), Launch::Single);
}

#[test]
fn world_sizes_are_bounded_and_job_ids_kept() {
    for size in ["18446744073709551615", "100000000", "65537"] {
        let m = launch_error(
            &[("RANK", "0"), ("WORLD_SIZE", size), ("MASTER_ADDR", "h")],
            false,
        );
        assert!(m.contains("more than the 65536"), "{m}");
    }
    let t = tcp(&[("RANK", "1"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")]);
    assert_eq!(t.job, "", "torchrun without a run id gives no job identity");
    // torchrun's default run id is the same for every job: no identity either (but torchrun
    // set it, so its store still holds MASTER_PORT).
    let t = tcp(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "h"),
        ("TORCHELASTIC_RUN_ID", "none"),
    ]);
    assert_eq!((t.job.as_str(), t.port), ("", 29501));
    let t = tcp(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "h"),
        ("TORCHELASTIC_RUN_ID", "abc"),
        ("NCCL_PERF_RENDEZVOUS_KEY", "k"),
        ("NCCL_PERF_RENDEZVOUS_BIND", "0.0.0.0"),
    ]);
    assert_eq!(t.job, "torch:abc");
    assert!(t.secret.is_set());
    assert_eq!(t.bind, Some("0.0.0.0".parse().unwrap()));
    assert!(
        detect_with(
            &[
                ("RANK", "1"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("NCCL_PERF_RENDEZVOUS_BIND", "eth0"),
            ],
            false
        )
        .is_err()
    );
}
