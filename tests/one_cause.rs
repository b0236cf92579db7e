//! One message per cause, at any scale (docs/errors.md, "Where messages go"). A failure that
//! every process of a formed job meets (no libcuda, no GPU, no libnccl) is said once, by rank
//! 0, with the number of processes and their hosts; different causes each once; every process
//! ends with the job's exit code. An argument error, found before the processes meet, is said
//! by the first process of each host only. Real runs without a GPU: the stand-in CUDA and NCCL
//! libraries of `tests/fakes/` (built with `cc`), and this machine's missing libcuda under
//! Open MPI's `mpirun`. Every child runs under a deadline.

use crate::programs::{self, Outcome, fake_library, free_port, scratch};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const DEADLINE: Duration = Duration::from_secs(60);

/// Starts `n` processes of the benchmark with `args`, each with the environment `vars(rank)`,
/// and waits for them all (each under the deadline).
fn job(n: usize, args: &[&str], vars: impl Fn(usize) -> Vec<(String, String)>) -> Vec<Outcome> {
    let args = programs::args(args);
    let runs: Vec<_> = (0..n)
        .map(|r| {
            let vars = vars(r);
            let env: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            let c = programs::command(BIN, &args, &env);
            std::thread::spawn(move || programs::run(c, DEADLINE))
        })
        .collect();
    let outs: Vec<Outcome> = runs.into_iter().map(|t| t.join().unwrap()).collect();
    for o in &outs {
        assert!(!o.hung && !o.panicked(), "{}", o.all());
    }
    outs
}

/// A torchrun-style job of `n` processes meeting at `port` on this host.
fn torchrun(n: usize, port: u16, r: usize) -> Vec<(String, String)> {
    [
        ("RANK", r.to_string()),
        ("WORLD_SIZE", n.to_string()),
        ("LOCAL_RANK", r.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
        (
            "NCCL_PERF_RENDEZVOUS_KEY",
            "one-cause-test-key-0123456789".into(),
        ),
        ("NCCL_PERF_BOOTSTRAP_TIMEOUT", "30".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The stderr lines of every process, in rank order.
fn stderr_lines(outs: &[Outcome]) -> Vec<String> {
    outs.iter()
        .flat_map(|o| o.stderr.lines().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// This host's short name, as the lines name it.
fn short_host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    name.trim()
        .split('.')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Eight processes of one job: six see no GPU (the stand-in driver), two cannot load their
/// libnccl. Rank 0 says each cause once with its processes; nccl-tests' CUDA failure line
/// comes once on stdout with one trace line; every process ends with the job's code, the
/// higher of the two (3).
#[test]
fn two_causes_of_eight_processes_are_said_once_each_by_rank_zero() {
    let dir = scratch("one-cause-two");
    let Some(_) = fake_library(&dir, "fake_cuda.c", "libcuda.so.1", &["libcuda.so"], &[]) else {
        return;
    };
    let lib = dir.to_string_lossy().into_owned();
    let port = free_port();
    let outs = job(8, &["-b", "8", "-e", "8"], |r| {
        let mut v = torchrun(8, port, r);
        v.push(("LD_LIBRARY_PATH".into(), lib.clone()));
        match r {
            6 | 7 => v.push((
                "NCCL_PERF_LIBNCCL".into(),
                "/nonexistent/libnccl.so.2".into(),
            )),
            _ => v.push(("FAKE_CUDA_INIT".into(), "100".into())),
        }
        v
    });
    let all = || {
        outs.iter()
            .map(Outcome::all)
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    for o in &outs {
        assert_eq!(o.code, Some(3), "{}", all());
    }
    // Nothing from the others; rank 0's stderr: the open-rendezvous note aside, one line per
    // cause.
    for o in &outs[1..] {
        assert!(o.stderr.is_empty() && o.stdout.is_empty(), "{}", all());
    }
    let host = short_host();
    let lines = stderr_lines(&outs);
    assert_eq!(lines.len(), 2, "{}", all());
    assert!(
        lines[0].starts_with(&format!(
            "all_reduce_perf: 6 of 8 processes (ranks 0-5) on {host}: Test CUDA failure \
             src/gpu/driver.rs:"
        )) && lines[0].ends_with(" 'no CUDA-capable device is detected'"),
        "{}",
        all()
    );
    assert_eq!(
        lines[1..],
        [format!(
            "all_reduce_perf: 2 of 8 processes (ranks 6-7) on {host}: cannot load NCCL \
                 (tried /nonexistent/libnccl.so.2): /nonexistent/libnccl.so.2: cannot open \
                 shared object file: No such file or directory; check the path in \
                 NCCL_PERF_LIBNCCL"
        ),],
        "{}",
        all()
    );
    let out: Vec<&str> = outs[0].stdout.lines().collect();
    assert_eq!(out.len(), 2, "{}", all());
    assert!(
        out[0].starts_with(&format!("{host}: Test CUDA failure src/gpu/driver.rs:"))
            && out[0].ends_with(" 'no CUDA-capable device is detected'"),
        "{}",
        all()
    );
    assert!(
        out[1].starts_with(&format!(" .. {host} pid ")) && out[1].contains(": Test failure "),
        "{}",
        all()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An argument error (`-d fp64`), an environment error (`NCCL_PERF_BOOTSTRAP_TIMEOUT=abc`):
/// eight processes on two hosts (Slurm's variables: local ids 0-3 on each), found before they
/// meet. The first process of each host says it, once; every process exits 255.
#[test]
fn an_argument_error_is_said_once_per_host() {
    let slurm = |r: usize| -> Vec<(String, String)> {
        [
            ("SLURM_JOB_ID", "52".to_string()),
            ("SLURM_STEP_ID", "0".into()),
            ("SLURM_PROCID", r.to_string()),
            ("SLURM_NTASKS", "8".into()),
            ("SLURM_STEP_NUM_TASKS", "8".into()),
            ("SLURM_LOCALID", (r % 4).to_string()),
            ("SLURM_NODEID", (r / 4).to_string()),
            ("SLURM_STEP_NODELIST", "node[0-1]".into()),
            ("SLURM_STEP_TASKS_PER_NODE", "4(x2)".into()),
            ("NCCL_PERF_RENDEZVOUS", "127.0.0.1:9".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    };
    let cases: [(&[&str], &str, &str); 2] = [
        (
            &["-d", "fp64", "-b", "8", "-e", "8"],
            "",
            "all_reduce_perf: unknown datatype 'fp64' for -d (--datatype); valid: ",
        ),
        (
            &["-b", "8", "-e", "8"],
            "abc",
            "all_reduce_perf: NCCL_PERF_BOOTSTRAP_TIMEOUT='abc' is not a number of seconds",
        ),
    ];
    for (args, timeout, said) in cases {
        let outs = job(8, args, |r| {
            let mut v = slurm(r);
            if !timeout.is_empty() {
                v.push(("NCCL_PERF_BOOTSTRAP_TIMEOUT".into(), timeout.into()));
            }
            v
        });
        let all = || {
            outs.iter()
                .map(Outcome::all)
                .collect::<Vec<_>>()
                .join("\n----\n")
        };
        for (r, o) in outs.iter().enumerate() {
            assert_eq!(o.code, Some(255), "{}", all());
            let lines: Vec<&str> = o.stderr.lines().collect();
            match r % 4 {
                0 => assert!(lines.len() == 1 && lines[0].starts_with(said), "{}", all()),
                _ => assert!(lines.is_empty(), "{}", all()),
            }
        }
    }
}

/// The launch of `np` processes under Open MPI's `mpirun` (a real run), with its output.
fn mpirun(np: usize, args: &[&str]) -> Option<std::process::Output> {
    let mut c = programs::mpirun(BIN, np, 90)?;
    c.args(args)
        .env("NCCL_PERF_BOOTSTRAP_TIMEOUT", "60")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for k in [
        "LD_LIBRARY_PATH",
        "NCCL_PERF_BOOTSTRAP",
        "NCCL_PERF_RENDEZVOUS",
    ] {
        c.env_remove(k);
    }
    Some(c.output().expect("mpirun runs"))
}

/// Whether this machine has no CUDA driver library (a lone run says so): then a real run
/// under `mpirun` meets that cause in every process.
fn without_a_driver(dir: &Path) -> bool {
    let probe = programs::run(
        programs::command(
            BIN,
            &programs::args(&["-b", "8", "-e", "8"]),
            &[("LD_LIBRARY_PATH", &dir.to_string_lossy())],
        ),
        DEADLINE,
    );
    let missing = probe.code == Some(2) && probe.stderr.contains("cannot load libcuda.so.1");
    if !missing {
        eprintln!("skipped: this machine has a CUDA driver: {}", probe.all());
    }
    missing
}

/// `mpirun -np 32` of a real run where libcuda is missing: one line for the 32 processes
/// (`32 of 32 processes on <host>: cannot load libcuda.so.1 ...`), exit code 2.
#[test]
fn mpirun_thirty_two_processes_without_a_driver_say_it_once() {
    let dir = scratch("one-cause-mpirun");
    if !without_a_driver(&dir) {
        return;
    }
    let Some(o) = mpirun(32, &["-b", "8", "-e", "8"]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let said: Vec<&str> = err.lines().filter(|l| l.contains("libcuda")).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(
        said[0].starts_with(&format!(
            "all_reduce_perf: 32 of 32 processes on {}: cannot load libcuda.so.1 (the NVIDIA \
             driver library): ",
            short_host()
        )),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `mpirun -np 16` with `-d fp64`: the argument error from the first process of the one host;
/// the others, silent, wait a moment before leaving so that mpirun, which ends the job at the
/// first failed process, does not stop the one that says it (where the machine is so loaded
/// that it does, nothing is said twice either way).
#[test]
fn mpirun_sixteen_processes_with_an_argument_error_say_it_at_most_once() {
    let Some(o) = mpirun(16, &["-d", "fp64"]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(255), "{err}");
    let said = err.matches("unknown datatype 'fp64'").count();
    assert!(said <= 1, "{err}");
    assert!(
        err.lines()
            .filter(|l| l.contains("unknown datatype"))
            .all(|l| l.starts_with("all_reduce_perf: unknown datatype 'fp64' for -d")),
        "{err}"
    );
}
