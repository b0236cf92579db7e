//! Helpers shared by the tests that start the benchmark binaries as a user would: how to start
//! them (directly, or through an emulator when the tests run for another architecture), runs
//! under a deadline, panic detection, and stand-in CUDA/NCCL/NVRTC libraries built at test time.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every benchmark binary.
pub const BINARIES: &[&str] = &[
    env!("CARGO_BIN_EXE_all_reduce_perf"),
    env!("CARGO_BIN_EXE_all_gather_perf"),
    env!("CARGO_BIN_EXE_broadcast_perf"),
    env!("CARGO_BIN_EXE_reduce_scatter_perf"),
    env!("CARGO_BIN_EXE_reduce_perf"),
    env!("CARGO_BIN_EXE_alltoall_perf"),
    env!("CARGO_BIN_EXE_alltoallv_perf"),
    env!("CARGO_BIN_EXE_scatter_perf"),
    env!("CARGO_BIN_EXE_gather_perf"),
    env!("CARGO_BIN_EXE_sendrecv_perf"),
    env!("CARGO_BIN_EXE_hypercube_perf"),
];

/// What a finished (or killed) child left.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code; `None` when killed by a signal (the deadline, or a crash).
    pub code: Option<i32>,
    /// Its stdout, lossily decoded.
    pub stdout: String,
    /// Its stderr, lossily decoded.
    pub stderr: String,
    /// How long it ran.
    pub elapsed: Duration,
    /// It was still running at the deadline and was killed.
    pub hung: bool,
}

impl Outcome {
    /// stdout then stderr, for assertion messages.
    pub fn all(&self) -> String {
        format!(
            "exit {:?} after {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }

    /// True when the stderr shows a Rust panic, a backtrace or our panic hook's line.
    pub fn panicked(&self) -> bool {
        let e = &self.stderr;
        e.contains("panicked")
            || e.contains("stack backtrace")
            || e.contains("RUST_BACKTRACE")
            || e.contains("internal error:")
    }
}

/// The command prefix that starts our built programs, from `NCCL_PERF_TEST_RUNNER` (split on
/// white space); empty when unset, the native case.
///
/// When the tests are built for another architecture (`ci/arm64.sh`: aarch64 under
/// `qemu-aarch64 -L SYSROOT`, cargo's `runner`), the test process itself runs in the emulator,
/// and an emulated process cannot exec a foreign binary: every program the tests start — a
/// benchmark, `nccl-perf`, one handed to `timeout`, `mpirun` or a script — goes through this
/// prefix. Host tools (`bash`, `mpirun`, `cc`) start as they are. The prefix's program is
/// found on this process' `PATH` now, so that a test that gives a child another `PATH` (a
/// relative one, in the library-search tests) still starts it.
pub fn runner() -> Vec<OsString> {
    let mut words: Vec<OsString> = std::env::var("NCCL_PERF_TEST_RUNNER")
        .unwrap_or_default()
        .split_whitespace()
        .map(OsString::from)
        .collect();
    if let Some(first) = words.first_mut()
        && let Some(found) = on_path(first)
    {
        *first = found.into_os_string();
    }
    words
}

/// `name` as an absolute path found on this process' `PATH` (`None` for a path already, or
/// when not found).
fn on_path(name: &OsStr) -> Option<PathBuf> {
    if name.to_string_lossy().contains('/') {
        return None;
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `Command` for one of our programs, through [`runner`] when there is one.
pub fn program(bin: impl AsRef<OsStr>) -> Command {
    let words = program_words(bin);
    let mut c = Command::new(&words[0]);
    c.args(&words[1..]);
    c
}

/// The words that start `bin` on another program's command line (`timeout 60 WORDS...`,
/// `mpirun -np 4 WORDS...`): the runner's, then `bin`.
pub fn program_words(bin: impl AsRef<OsStr>) -> Vec<OsString> {
    let mut words = runner();
    words.push(bin.as_ref().to_os_string());
    words
}

/// Makes `link` start `bin` for the scripts a test runs: a symlink natively, a two-line shell
/// script through [`runner`] otherwise.
pub fn program_link(bin: &Path, link: &Path) {
    let runner = runner();
    if runner.is_empty() {
        std::os::unix::fs::symlink(bin, link).unwrap_or_else(|e| panic!("{}: {e}", link.display()));
        return;
    }
    let quote = |w: &OsStr| format!("'{}'", w.to_string_lossy().replace('\'', "'\\''"));
    let words: Vec<String> = runner
        .iter()
        .map(|w| quote(w))
        .chain([quote(bin.as_os_str())])
        .collect();
    std::fs::write(
        link,
        format!("#!/bin/sh\nexec {} \"$@\"\n", words.join(" ")),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", link.display()));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(link, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A child process: the binary with a clean environment (PATH, `RUST_BACKTRACE=1`) plus `env`.
pub fn command(bin: &str, args: &[OsString], env: &[(&str, &str)]) -> Command {
    let mut c = program(bin);
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// `timeout SECS mpirun --allow-run-as-root --oversubscribe -np NP <bin>` (the benchmark's
/// words under the runner), or `None`, said, where Open MPI's `mpirun` is not installed: under
/// CI (`CI` set) that fails the test instead.
pub fn mpirun(bin: &str, np: usize, secs: u32) -> Option<Command> {
    if Command::new("mpirun").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "mpirun is not installed: under CI it must be (.ci/run installs openmpi-bin)"
        );
        eprintln!("skipped: mpirun is not installed (.ci/run installs openmpi-bin)");
        return None;
    }
    let mut c = Command::new("timeout");
    c.arg(secs.to_string())
        .args(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string())
        .args(program_words(bin));
    Some(c)
}

/// Runs a command, killing it at `deadline`.
pub fn run(mut c: Command, deadline: Duration) -> Outcome {
    let start = Instant::now();
    let mut child = c.spawn().expect("the binary starts");
    // Drain the pipes on threads so a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let mut hung = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > deadline {
            hung = true;
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    Outcome {
        code: status.code(),
        stdout: String::from_utf8_lossy(&t_out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
        elapsed,
        hung,
    }
}

/// Runs the `nccl-perf` tool with `args` (through the runner, if any), checking that it did not
/// panic; stdout, stderr and exit code.
pub fn tool(args: &[&str]) -> std::process::Output {
    let out = program(env!("CARGO_BIN_EXE_nccl-perf"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run nccl-perf: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out
}

/// Arguments from plain strings.
pub fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

/// A fresh, empty folder for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nccl-perf-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The C compiler for the stand-in libraries, if any: `NCCL_PERF_TEST_CC` when set (a cross
/// compiler when the tests run for another architecture: the libraries are loaded by our
/// programs), else `cc`, `gcc` or `clang`.
pub fn c_compiler() -> Option<String> {
    if let Ok(cc) = std::env::var("NCCL_PERF_TEST_CC")
        && !cc.is_empty()
    {
        return Some(cc);
    }
    ["cc", "gcc", "clang"]
        .into_iter()
        .map(String::from)
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// Builds `tests/fakes/<source>` into `<dir>/<name>` as a shared library (with `defines`, e.g.
/// `-DFAKE_TOO_OLD`), plus symlinks `aliases` to it. `None` (test skipped) without a compiler.
pub fn fake_library(
    dir: &Path,
    source: &str,
    name: &str,
    aliases: &[&str],
    defines: &[&str],
) -> Option<PathBuf> {
    let Some(cc) = c_compiler() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no C compiler (cc, gcc or clang): under CI there must be one (.ci/run installs g++)"
        );
        eprintln!("skipped: no C compiler (cc, gcc or clang) to build the stand-in libraries");
        return None;
    };
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fakes")
        .join(source);
    let out = dir.join(name);
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O0", "-o"])
        .arg(&out)
        .arg(&src)
        .args(defines)
        .status()
        .expect("the C compiler runs");
    assert!(status.success(), "building {} failed", src.display());
    for a in aliases {
        std::os::unix::fs::symlink(name, dir.join(a)).unwrap();
    }
    Some(out)
}

/// A port for a test's rendezvous: free now, and below the kernel's range of ephemeral ports,
/// so that no connection made meanwhile (this test's other processes connecting, a parallel
/// test) can take it as its local port before rank 0 listens. Calls in one process walk
/// through the ports from a start the process id picks.
pub fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (base, span) = (10_000, ephemeral.saturating_sub(10_000).max(1000));
    let start = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = (base + start.wrapping_add(n) % span).min(65535) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between {base} and {}", base + span);
}

/// Serializes the tests that arm `--explain`'s process-wide plugins (`nccl_perf_capture::arm`
/// and `take` keep one window for the whole test program).
pub fn capture_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}
