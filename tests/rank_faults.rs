//! Rank faults without a GPU: a job of several processes (torchrun-style environment, TCP
//! rendezvous; `mpirun` with `--features mpi`) in which one process is killed while the others
//! are busy. The test hook `NCCL_PERF_TEST_PAUSE_MS` (cargo feature `test-hooks`, which this
//! test requires) makes every process wait after the bootstrap as if running on its GPUs, where
//! only the watchdog can notice a lost peer. The survivors must
//! stop within seconds with a message naming the lost rank, exit non-zero, and leave a
//! well-formed `-J` JSON file; a stop signal must close the JSON file too. A process that is
//! stopped (SIGSTOP) rather than killed is named too, by its missing heartbeats.

use crate::programs;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// How long a survivor may take to stop (the watchdog needs about 2 s).
const STOP_WITHIN: Duration = Duration::from_secs(15);

/// One process of a job, its stderr in `dir/err<rank>`.
struct Proc {
    rank: usize,
    child: Child,
    err: PathBuf,
}

impl Proc {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }
}

fn spawn(dir: &Path, rank: usize, env: &[(&str, String)], args: &[&str]) -> Proc {
    let err = dir.join(format!("err{rank}"));
    let mut c = programs::program(BIN);
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_BACKTRACE", "1")
        .env("NCCL_PERF_TEST_PAUSE_MS", "60000")
        .env("NCCL_PERF_BOOTSTRAP_TIMEOUT", "30")
        .env("NCCL_PERF_HEARTBEAT_TIMEOUT", "2")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(File::create(dir.join(format!("out{rank}"))).unwrap())
        .stderr(File::create(&err).unwrap());
    for (k, v) in env {
        c.env(k, v);
    }
    Proc {
        rank,
        child: c.spawn().expect("the binary starts"),
        err,
    }
}

/// Waits until every process says it pauses (the bootstrap is done), or fails the test.
fn wait_for_stall(procs: &[Proc]) {
    let start = Instant::now();
    while !procs.iter().all(|p| p.stderr().contains("pauses for")) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the job did not start: {:?}",
            procs.iter().map(Proc::stderr).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `p` (killing it past `limit`): (exit code, elapsed).
fn wait(p: &mut Proc, limit: Duration) -> (Option<i32>, Duration) {
    let start = Instant::now();
    loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            return (s.code(), start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = p.child.kill();
            let _ = p.child.wait();
            panic!(
                "rank {} did not stop within {limit:?}: {}",
                p.rank,
                p.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn torchrun(rank: usize, size: usize, port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", size.to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
    ]
}

/// The `-J` file parses as JSON (an early-stopped document: no footer keys).
fn well_formed(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("the JSON file exists");
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(v["version"], 3, "{text}");
    assert!(v["results"].is_array(), "{text}");
    v
}

/// Kills `victim` in a job of `size` and checks every survivor: exit code 1 and the last line
/// of stderr holding `expect(rank, victim)`.
fn kill_one(size: usize, victim: usize, expect: impl Fn(usize, usize) -> String) {
    fault_one(size, victim, "-KILL", 1, |r, v| vec![expect(r, v)])
}

/// Sends `sig` to `victim` in a job of `size` and checks every survivor: exit code `code` and
/// the last line of stderr holding each of `expect(rank, victim)` (`{pid}`: the victim's).
fn fault_one(
    size: usize,
    victim: usize,
    sig: &str,
    code: i32,
    expect: impl Fn(usize, usize) -> Vec<String>,
) {
    let dir = programs::scratch(&format!("rank-fault-{size}-{victim}{sig}"));
    let port = programs::free_port();
    let mut procs: Vec<Proc> = (0..size)
        .map(|r| {
            spawn(
                &dir,
                r,
                &torchrun(r, size, port),
                &["-b", "8", "-e", "8", "-J", "r.json"],
            )
        })
        .collect();
    wait_for_stall(&procs);
    let victim_pid = procs[victim].child.id();
    signal(victim_pid, sig);
    for p in procs.iter_mut().filter(|p| p.rank != victim) {
        let (got, took) = wait(p, STOP_WITHIN);
        let err = p.stderr();
        assert_eq!(got, Some(code), "rank {}: {err}", p.rank);
        assert!(!err.contains("panicked"), "{err}");
        let last = err.lines().last().unwrap_or_default();
        for want in expect(p.rank, victim) {
            let want = want.replace("{pid}", &victim_pid.to_string());
            assert!(
                last.contains(&want),
                "rank {}: '{want}' not in: {err}",
                p.rank
            );
        }
        eprintln!("rank {} stopped after {took:?}: {last}", p.rank);
    }
    // A stopped victim is still there: end it.
    let _ = procs[victim].child.kill();
    let _ = procs[victim].child.wait();
    // Rank 0 created the JSON file before the stall; it is well-formed whoever died.
    let v = well_formed(&dir.join("r.json"));
    assert_eq!(v["results"].as_array().unwrap().len(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_killed_rank_stops_the_others_naming_it() {
    kill_one(4, 2, |rank, victim| {
        let lost = format!("rank {victim} (pid {{pid}} on ");
        if rank == 0 {
            format!("bootstrap: {lost}")
        } else {
            format!("bootstrap: rank 0 stopped the run: {lost}")
        }
    });
}

#[test]
fn a_killed_rank_0_stops_the_others_naming_it() {
    kill_one(3, 0, |_, _| {
        "lost the connection to rank 0 at 127.0.0.1:".into()
    });
}

#[test]
fn a_stopped_rank_stops_the_others_naming_it() {
    fault_one(4, 2, "-STOP", 4, |rank, victim| {
        let lost = format!("rank {victim} (pid {{pid}} on ");
        vec![
            if rank == 0 {
                format!("bootstrap: {lost}")
            } else {
                format!("bootstrap: rank 0 stopped the run: {lost}")
            },
            "not even a heartbeat: its process is stopped (SIGSTOP".into(),
        ]
    });
}

#[test]
fn a_stopped_rank_0_stops_the_others_naming_it() {
    fault_one(3, 0, "-STOP", 4, |_, _| {
        vec![
            "bootstrap: rank 0 at 127.0.0.1:".into(),
            "not even a heartbeat: its process is stopped (SIGSTOP".into(),
        ]
    });
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn a_stop_signal_closes_the_json_file() {
    let dir = programs::scratch("rank-signal");
    for (sig, code, name) in [("-TERM", 143, "SIGTERM"), ("-INT", 130, "SIGINT")] {
        let json = format!("{name}.json");
        let mut p = spawn(&dir, 0, &[], &["-b", "8", "-e", "8", "-J", &json]);
        wait_for_stall(std::slice::from_ref(&p));
        signal(p.child.id(), sig);
        let (got, _) = wait(&mut p, STOP_WITHIN);
        let err = p.stderr();
        assert_eq!(got, Some(code), "{err}");
        assert!(
            err.contains("stopped by signal") && err.contains(name),
            "{err}"
        );
        well_formed(&dir.join(&json));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `mpirun` ends the job when a process dies: the survivors get SIGTERM, close their JSON file
/// and exit; mpirun names the dead rank.
#[cfg(feature = "mpi")]
#[test]
fn mpirun_a_killed_rank_ends_the_job_with_a_closed_json_file() {
    if Command::new("mpirun").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "mpirun is not installed: under CI it must be (.ci/run installs openmpi-bin)"
        );
        eprintln!("skipped: mpirun is not installed");
        return;
    }
    let dir = programs::scratch("rank-kill-mpi");
    let err = dir.join("err");
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe", "-np", "3"])
        .args([
            "-x",
            "NCCL_PERF_TEST_PAUSE_MS=60000",
            "-x",
            "RUST_BACKTRACE=1",
        ])
        .args(programs::program_words(BIN))
        .args(["-b", "8", "-e", "8", "-J", "r.json"])
        .env_remove("NCCL_PERF_BOOTSTRAP")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(File::create(dir.join("out")).unwrap())
        .stderr(File::create(&err).unwrap());
    let mut job = Proc {
        rank: 0,
        child: c.spawn().expect("mpirun starts"),
        err,
    };
    // The pid of rank 1 from its pause line.
    let start = Instant::now();
    let pid = loop {
        let text = job.stderr();
        let found = text.lines().find_map(|l| {
            let rest = l.split("rank 1 pid ").nth(1)?;
            rest.split_whitespace().next()?.parse::<u32>().ok()
        });
        if let (Some(pid), 3) = (found, text.matches("pauses for").count()) {
            break pid;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    signal(pid, "-KILL");
    let (code, _) = wait(&mut job, Duration::from_secs(30));
    let text = job.stderr();
    assert_ne!(code, Some(0), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(
        text.contains("rank 1"),
        "mpirun names the dead rank: {text}"
    );
    well_formed(&dir.join("r.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The build without MPI under a launcher's wire-up (`mpirun`: PMIx; `mpiexec.hydra`: PMI-1):
/// rank 1 killed while the others pause after the bootstrap; the job ends (our watchdog names
/// the rank, or the launcher ends the others first and names the process), rank 0's `-J` file
/// closed. `launcher`: its words up to the process-count option.
#[cfg(not(feature = "mpi"))]
fn engine_job_with_a_killed_rank(launcher: &[&str], package: &str) {
    if Command::new(launcher[0]).arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is not installed: under CI it must be (.ci/run installs {package})",
            launcher[0]
        );
        eprintln!("skipped: {} is not installed", launcher[0]);
        return;
    }
    let dir = programs::scratch(&format!("rank-kill-{}", launcher[0]));
    let err = dir.join("err");
    let mut c = Command::new("timeout");
    c.arg("60")
        .args(launcher)
        .arg("3")
        .args(programs::program_words(BIN))
        .args(["-b", "8", "-e", "8", "-J", "r.json"])
        .env_remove("NCCL_PERF_BOOTSTRAP")
        .env_remove("NCCL_PERF_RENDEZVOUS")
        .env("NCCL_PERF_TEST_PAUSE_MS", "60000")
        .env("NCCL_PERF_HEARTBEAT_TIMEOUT", "2")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(File::create(dir.join("out")).unwrap())
        .stderr(File::create(&err).unwrap());
    let mut job = Proc {
        rank: 0,
        child: c.spawn().expect("the launcher starts"),
        err,
    };
    let start = Instant::now();
    let pid = loop {
        let text = job.stderr();
        let found = text.lines().find_map(|l| {
            let rest = l.split("rank 1 pid ").nth(1)?;
            rest.split_whitespace().next()?.parse::<u32>().ok()
        });
        if let (Some(pid), 3) = (found, text.matches("pauses for").count()) {
            break pid;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    signal(pid, "-KILL");
    let (code, took) = wait(&mut job, Duration::from_secs(30));
    let text = job.stderr();
    assert_ne!(code, Some(0), "{text}");
    assert_ne!(code, Some(124), "the launcher hung: {text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(
        text.contains("rank 1") || text.contains(&pid.to_string()),
        "the dead process is named: {text}"
    );
    assert!(took < STOP_WITHIN, "{took:?}: {text}");
    well_formed(&dir.join("r.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(not(feature = "mpi"))]
#[test]
fn hydra_a_killed_rank_is_named_and_ends_the_job() {
    engine_job_with_a_killed_rank(&["mpiexec.hydra", "-n"], "mpich");
}

#[cfg(not(feature = "mpi"))]
#[test]
fn mpirun_without_mpi_a_killed_rank_is_named_and_ends_the_job() {
    engine_job_with_a_killed_rank(
        &["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"],
        "openmpi-bin",
    );
}
