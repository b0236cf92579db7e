//! Environment faults without a GPU: the binaries started with stand-in CUDA, NCCL and NVRTC
//! libraries (`tests/fakes/*.c`, built with the C compiler at test time and put first on
//! `LD_LIBRARY_PATH` or named by `NCCL_PERF_LIBNCCL`). Missing libraries, libraries too old
//! (a symbol absent), no GPU, too few GPUs and a GPU too small for `-e`: each ends with one
//! clear message and its documented exit code, never a panic or backtrace (the children run
//! with `RUST_BACKTRACE=1`), within a deadline.

use crate::programs::{Outcome, args, command, fake_library, run, scratch};
use std::path::{Path, PathBuf};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_all_reduce_perf");
const DEADLINE: Duration = Duration::from_secs(30);

/// A folder with a stand-in libcuda (`too_old`: without cuStreamQuery and cuMemGetInfo_v2).
fn fake_cuda(dir: &Path, too_old: bool) -> Option<()> {
    let defines: &[&str] = if too_old { &["-DFAKE_TOO_OLD"] } else { &[] };
    fake_library(dir, "fake_cuda.c", "libcuda.so.1", &["libcuda.so"], defines).map(|_| ())
}

/// A stand-in libnccl.so.2 (`only_version`: exporting ncclGetVersion alone).
fn fake_nccl(dir: &Path, only_version: bool) -> Option<PathBuf> {
    let defines: &[&str] = if only_version {
        &["-DFAKE_ONLY_VERSION"]
    } else {
        &[]
    };
    fake_library(dir, "fake_nccl.c", "libnccl.so.2", &[], defines)
}

/// Runs the binary with `LD_LIBRARY_PATH=dir` and `env`.
fn run_with(dir: &Path, a: &[&str], env: &[(&str, &str)]) -> Outcome {
    let lib_path = dir.to_string_lossy().into_owned();
    let mut vars = vec![("LD_LIBRARY_PATH", lib_path.as_str())];
    vars.extend_from_slice(env);
    let o = run(command(BIN, &args(a), &vars), DEADLINE);
    assert!(!o.hung, "hung: {}", o.all());
    assert!(!o.panicked(), "panicked: {}", o.all());
    o
}

/// No table, no bandwidth line: a failure must not look like a (partial) result.
fn no_table(o: &Outcome) {
    assert!(
        !o.stdout.contains("(elements)") && !o.stdout.contains("Avg bus bandwidth"),
        "{}",
        o.all()
    );
}

#[test]
fn no_cuda_capable_device_is_a_cuda_failure_line_exit_2() {
    let dir = scratch("env-nodev");
    let Some(()) = fake_cuda(&dir, false) else {
        return;
    };
    let o = run_with(&dir, &["-b", "8", "-e", "8"], &[("FAKE_CUDA_INIT", "100")]);
    assert_eq!(o.code, Some(2), "{}", o.all());
    // nccl-tests' greppable line on stdout, then the trace line.
    let first = o.stdout.lines().next().unwrap_or_default();
    assert!(
        first.contains(": Test CUDA failure src/gpu/driver.rs:")
            && first.ends_with(" 'no CUDA-capable device is detected'"),
        "{}",
        o.all()
    );
    assert!(o.stdout.contains(" pid "), "{}", o.all());
    assert!(o.stderr.is_empty(), "{}", o.all());
    no_table(&o);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_driver_too_old_names_the_missing_entry_points_exit_2() {
    let dir = scratch("env-oldcuda");
    let Some(()) = fake_cuda(&dir, true) else {
        return;
    };
    let o = run_with(&dir, &["-b", "8", "-e", "8"], &[]);
    assert_eq!(o.code, Some(2), "{}", o.all());
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.all());
    assert!(
        o.stderr.contains("libcuda.so")
            && o.stderr
                .contains("lacks cuStreamQuery, cuMemGetInfo_v2: the NVIDIA driver is too old"),
        "{}",
        o.all()
    );
    assert!(o.stdout.is_empty(), "{}", o.all());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Only where the machine has no libcuda of its own (a fake folder cannot hide the loader
/// cache's copy).
#[test]
fn a_missing_driver_library_is_one_line_exit_2() {
    let dir = scratch("env-nocuda");
    let o = run_with(&dir, &["-b", "8", "-e", "8"], &[]);
    if o.code != Some(2) || !o.stderr.contains("cannot load libcuda.so.1") {
        eprintln!("skipped: this machine has a CUDA driver: {}", o.all());
        return;
    }
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.all());
    assert!(o.stdout.is_empty(), "{}", o.all());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_or_too_old_nccl_is_one_line_exit_3() {
    let dir = scratch("env-nccl");
    let Some(()) = fake_cuda(&dir, false) else {
        return;
    };
    let o = run_with(
        &dir,
        &["-b", "8", "-e", "8"],
        &[("NCCL_PERF_LIBNCCL", "/nonexistent/libnccl.so.2")],
    );
    assert_eq!(o.code, Some(3), "{}", o.all());
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.all());
    assert!(
        o.stderr
            .starts_with("all_reduce_perf: cannot load NCCL (tried /nonexistent/libnccl.so.2)"),
        "{}",
        o.all()
    );
    assert!(o.stderr.contains("check the path in NCCL_PERF_LIBNCCL"));

    let old = fake_nccl(&dir, true).unwrap();
    let o = run_with(
        &dir,
        &["-b", "8", "-e", "8"],
        &[("NCCL_PERF_LIBNCCL", &old.to_string_lossy())],
    );
    assert_eq!(o.code, Some(3), "{}", o.all());
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.all());
    assert!(
        o.stderr.starts_with(&format!(
            "all_reduce_perf: {} lacks ncclGetUniqueId, ncclCommInitRank,",
            old.display()
        )) && o.stderr.contains("this NCCL is too old"),
        "{}",
        o.all()
    );
    assert!(o.stdout.is_empty(), "{}", o.all());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An older NCCL (the stand-in reporting 2.17.1): the version line names it, the options it
/// lacks are ignored with upstream's messages (stderr) or refused with its exit codes, and the
/// run goes on to the stand-in driver's failure.
#[test]
fn an_older_nccl_gates_the_options_by_its_version() {
    let dir = scratch("env-oldnccl");
    let (Some(()), Some(nccl)) = (fake_cuda(&dir, false), fake_nccl(&dir, false)) else {
        return;
    };
    let nccl = nccl.to_string_lossy().into_owned();
    let env = |v: &'static str| {
        [
            ("NCCL_PERF_LIBNCCL", nccl.clone()),
            ("FAKE_CUDA_COUNT", "1".into()),
            ("FAKE_NCCL_VERSION", v.into()),
        ]
    };
    let go = |a: &[&str], v: &'static str| {
        let e = env(v);
        let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
        run_with(&dir, a, &e)
    };
    let o = go(
        &["-b", "1M", "-e", "1M", "-c", "0", "-R", "2", "-x", "1"],
        "21701",
    );
    assert!(o.stdout.contains(" nccl-library=21701 "), "{}", o.all());
    assert_eq!(
        o.stderr,
        "Option -R (register) is not supported before NCCL 2.19. Ignoring\n\
         Option -x (cta_policy) is not supported before NCCL 2.27. Ignoring\n",
        "{}",
        o.all()
    );
    assert_eq!(o.code, Some(2), "{}", o.all());
    assert!(o.stdout.contains("Test CUDA failure"), "{}", o.all());
    let o = go(&["-b", "1M", "-e", "1M", "-c", "0", "-R", "2"], "22304");
    assert_eq!(
        o.stderr,
        "Option -R 2 (symmetric) is not supported before NCCL 2.27. Defaulting to local registration\n",
        "{}",
        o.all()
    );
    let o = go(&["-b", "1M", "-e", "1M", "-d", "f8e4m3"], "22304");
    assert_eq!(o.code, Some(5), "{}", o.all());
    assert_eq!(
        o.stderr.trim_end(),
        "all_reduce_perf: -d f8e4m3 needs NCCL 2.24 or later, but the loaded NCCL is 2.23.4",
        "{}",
        o.all()
    );
    no_table(&o);
    // The current version takes all of them (and fails later, at the stand-in driver).
    let o = go(
        &["-b", "1M", "-e", "1M", "-c", "0", "-R", "2", "-x", "1"],
        "22803",
    );
    assert!(o.stderr.is_empty(), "{}", o.all());
    assert_eq!(o.code, Some(2), "{}", o.all());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Absurd `-g` (and plain no GPU) end at nccl-tests' GPU count check: its lines on stdout, a
/// hint on stderr, exit code 5.
#[test]
fn too_few_gpus_is_the_gpu_count_check_exit_5() {
    let dir = scratch("env-fewgpus");
    let (Some(()), Some(nccl)) = (fake_cuda(&dir, false), fake_nccl(&dir, false)) else {
        return;
    };
    let nccl = nccl.to_string_lossy().into_owned();
    for (g, count) in [("100000", "0"), ("1", "0"), ("2", "1")] {
        let o = run_with(
            &dir,
            &["-b", "8", "-e", "8", "-g", g],
            &[("NCCL_PERF_LIBNCCL", &nccl), ("FAKE_CUDA_COUNT", count)],
        );
        assert_eq!(o.code, Some(5), "{}", o.all());
        assert!(
            o.stdout.contains(&format!(
                "Invalid number of GPUs: {g} requested but only {count} were found."
            )),
            "{}",
            o.all()
        );
        assert!(o.stderr.contains("hint: "), "{}", o.all());
        no_table(&o);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run that reaches the kernel compiler with libnvrtc missing (here), or too old (the
/// stand-in): one stderr note names the bundled PTX instead, and the run goes on (to the
/// stand-in driver's failure). On the way, a GPU too small for `-e` is handled by the memory
/// clamp, as nccl-tests does.
#[test]
fn without_a_usable_nvrtc_the_bundled_ptx_is_taken_and_the_memory_clamp() {
    let dir = scratch("env-nvrtc");
    let (Some(()), Some(nccl)) = (fake_cuda(&dir, false), fake_nccl(&dir, false)) else {
        return;
    };
    let nccl = nccl.to_string_lossy().into_owned();
    let env = [
        ("NCCL_PERF_LIBNCCL", nccl.as_str()),
        ("FAKE_CUDA_COUNT", "1"),
        // 4 GiB: keep 1 GiB + 1 GiB back, a third of the rest per buffer.
        ("FAKE_CUDA_MEM", "4294967296"),
    ];
    let bundled =
        "; using the bundled PTX (compute_75, made by NVRTC 11.8) through the driver's JIT";
    let o = run_with(&dir, &["-b", "1M", "-e", "8G", "-f", "2"], &env);
    assert!(
        o.stdout.contains(" device  0 [0000:01:00] Fake GPU\n"),
        "{}",
        o.all()
    );
    assert!(
        o.stdout
            .contains("#\n# Reducing maxBytes to 715827882 due to memory limitation\n"),
        "{}",
        o.all()
    );
    // The stand-in driver fails to create a stream, whichever way the kernels come.
    assert_eq!(o.code, Some(2), "{}", o.all());
    assert!(o.stdout.contains("Test CUDA failure"), "{}", o.all());
    no_table(&o);
    if nccl_perf_bench::gpu::kernels::probe_nvrtc().is_err() {
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.all());
        assert!(
            o.stderr.trim_end().ends_with(&format!(
                ": validation kernels: cannot load libnvrtc (CUDA's run-time compiler){bundled}"
            )),
            "{}",
            o.all()
        );
    }
    // Validation off: no kernels at all, no note.
    let o = run_with(&dir, &["-b", "1M", "-e", "1M", "-c", "0"], &env);
    assert_eq!(o.code, Some(2), "{}", o.all());
    assert!(
        o.stdout.contains("Test CUDA failure") && o.stdout.contains("'unknown error'"),
        "{}",
        o.all()
    );
    assert!(!o.stderr.contains("validation kernels"), "{}", o.all());

    // An NVRTC without the entry points we call (first on the search path).
    fake_library(&dir, "fake_nvrtc.c", "libnvrtc.so", &[], &[]).unwrap();
    let o = run_with(&dir, &["-b", "1M", "-e", "1M"], &env);
    assert_eq!(o.code, Some(2), "{}", o.all());
    assert!(o.stdout.contains("Test CUDA failure"), "{}", o.all());
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.all());
    assert!(
        o.stderr
            .contains("libnvrtc.so lacks nvrtcCreateProgram, nvrtcCompileProgram,")
            && o.stderr.contains("this NVRTC is too old")
            && o.stderr.trim_end().ends_with(bundled),
        "{}",
        o.all()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
