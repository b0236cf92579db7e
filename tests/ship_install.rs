//! `cargo install` and `ci/install-layout.sh`: `cargo install` builds every program with and
//! without MPI, and install-layout.sh, run against the debug binaries, puts them where
//! nccl-tests builds them (name suffixes, links, the `_mpi` names, the common paths, its
//! errors).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::shipped::*;

// ---------------------------------------------------------------------------------------------
// cargo install

#[test]
fn cargo_install_builds_every_program_with_and_without_mpi() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = ok(Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root()));
    let meta: serde_json::Value = serde_json::from_str(&out).expect("cargo metadata JSON");
    let package = meta["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "nccl-perf"))
        .expect("package nccl-perf");
    let mut bins = BTreeSet::new();
    for t in package["targets"].as_array().expect("targets") {
        if t["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "bin"))
        {
            let name = t["name"].as_str().expect("name").to_string();
            // `cargo install` skips a binary whose required features are off.
            let required = t["required-features"].as_array().map_or(0, Vec::len);
            assert_eq!(required, 0, "{name} has required-features");
            bins.insert(name);
        }
    }
    let mut expected: BTreeSet<String> = benchmark_names().iter().map(|s| s.to_string()).collect();
    expected.insert("nccl-perf".into());
    assert_eq!(bins, expected, "cargo install would install these programs");

    // The `mpi` feature only adds a dependency (to the benchmark core): it gates no binary.
    let features = &package["features"]["mpi"];
    assert_eq!(features, &serde_json::json!(["nccl-perf-bench/mpi"]));

    // Every src/bin file is a listed benchmark (a new one needs an entry in collective::all).
    let mut files = BTreeSet::new();
    for e in std::fs::read_dir(root().join("src/bin")).expect("src/bin") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".rs") {
            files.insert(stem.to_string());
        }
    }
    assert_eq!(files, expected);
}

// ---------------------------------------------------------------------------------------------
// ci/install-layout.sh

#[test]
fn install_layout_puts_programs_where_nccl_tests_builds_them() {
    let tmp = TempDir::new("layout");
    let prefix = tmp.0.join("opt/nccl-tests");
    let prefix_s = prefix.to_str().expect("utf-8 path");
    let from = bin_dir();
    ok(layout_script()
        .args(["--from", from.to_str().expect("utf-8")])
        .arg(prefix_s));
    let printed = layout_print(&[prefix_s]);
    assert_eq!(printed.len(), benchmark_names().len() + 1);
    for (path, name) in printed
        .iter()
        .zip(benchmark_names().into_iter().chain(["nccl-perf"]))
    {
        assert_eq!(*path, format!("{prefix_s}/build/{name}"));
        assert!(is_executable(Path::new(path)), "{path} not installed");
    }
    // What the job scripts then call runs, under its nccl-tests name.
    let usage = ok(Command::new(prefix.join("build/all_gather_perf")).arg("-h"));
    assert!(usage.starts_with("USAGE: all_gather_perf \n"), "{usage}");
    let version = ok(Command::new(prefix.join("build/nccl-perf")).arg("--version"));
    assert!(version.starts_with("nccl-perf "), "{version}");
    // Installing again over it replaces the files.
    ok(layout_script()
        .args(["--from", from.to_str().expect("utf-8"), "--no-tool"])
        .arg(prefix_s));
}

#[test]
fn install_layout_name_suffix_and_symlinks() {
    let tmp = TempDir::new("suffix");
    let prefix = tmp.0.join("third_party/nccl-tests");
    let prefix_s = prefix.to_str().expect("utf-8 path");
    let from = bin_dir();
    // NAME_SUFFIX in the environment, as nccl-tests' make variable.
    ok(layout_script()
        .env("NAME_SUFFIX", "_mpi")
        .args(["--from", from.to_str().expect("utf-8"), "--symlink"])
        .arg(prefix_s));
    for name in benchmark_names() {
        let p = prefix.join(format!("build/{name}_mpi"));
        let target = std::fs::read_link(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(target, from.join(name));
        assert!(!prefix.join(format!("build/{name}")).exists());
    }
    assert!(
        prefix.join("build/nccl-perf").exists(),
        "the tool keeps its name"
    );
    let usage = ok(Command::new(prefix.join("build/reduce_scatter_perf_mpi")).arg("-h"));
    assert!(
        usage.starts_with("USAGE: reduce_scatter_perf_mpi \n"),
        "{usage}"
    );

    // --suffix and --build-dir, printed.
    let printed = layout_print(&["--suffix", ".x", "--build-dir", "bin", "/p"]);
    assert_eq!(printed[0], "/p/bin/all_reduce_perf.x");
    assert_eq!(printed[11], "/p/bin/nccl-perf");
}

#[test]
fn install_layout_mpi_names_only_an_mpi_build() {
    let tmp = TempDir::new("mpi");
    let prefix = tmp.0.join("opt/nccl-tests");
    let out = run(layout_script()
        .args(["--mpi", "--from", bin_dir().to_str().expect("utf-8")])
        .arg(&prefix));
    if cfg!(feature = "mpi") {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(is_executable(&prefix.join("build/all_reduce_perf_mpi")));
    } else {
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("built without MPI"),
            "{}",
            text(&out.stderr)
        );
        assert!(!prefix.join("build").exists(), "nothing installed");
    }
    assert_eq!(
        layout_print(&["--mpi", "/opt/nccl-tests"])[0],
        "/opt/nccl-tests/build/all_reduce_perf_mpi"
    );
}

#[test]
fn install_layout_errors_are_one_line_and_exit_2() {
    let tmp = TempDir::new("errors");
    for args in [
        vec!["--from", "/nonexistent/release", "/tmp/x"],
        vec!["--bogus"],
        vec!["--mpi", "--suffix", "_x", "--print"],
        vec!["--build-dir", "/abs", "--print"],
        vec!["--destdir", "/tmp/x", "--print", "relative/prefix"],
        vec!["--both-names", "--suffix", ".x", "--print"],
        vec!["--from", tmp.0.to_str().expect("utf-8"), "/tmp/x"],
    ] {
        let out = run(layout_script().args(&args));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("install-layout: "), "{err}");
    }
    let help = ok(layout_script().arg("--help"));
    assert!(help.contains("PREFIX/build/all_reduce_perf"), "{help}");
}

/// install-layout.sh --common for real, into a staging folder with the debug binaries: every
/// common path runs the program it names, under both names (`_mpi` too, whichever the build:
/// the default build starts under mpirun as the MPI build does); the links are relative (they
/// hold once the tree is copied to /).
#[test]
fn install_layout_common_paths_for_real() {
    let tmp = TempDir::new("common");
    let stage = tmp.0.join("stage");
    let out = run(layout_script()
        .args(["--from", bin_dir().to_str().expect("utf-8"), "--common"])
        .arg("--destdir")
        .arg(&stage)
        .arg("/opt/nccl-tests"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(", 11 other names,"),
        "{}",
        text(&out.stderr)
    );
    for common in COMMON_DIRS {
        let dir = stage.join(common.trim_start_matches('/'));
        for name in benchmark_names() {
            assert!(
                is_executable(&dir.join(name)),
                "{}",
                dir.join(name).display()
            );
            let mpi_name = dir.join(format!("{name}_mpi"));
            assert!(is_executable(&mpi_name), "{}", mpi_name.display());
        }
        assert!(is_executable(&dir.join("nccl-perf")));
        if *common != "/opt/nccl-tests/build" && *common != "/usr/local/bin" {
            let link = std::fs::read_link(&dir).expect("a link");
            assert!(
                link.is_relative(),
                "{} -> {}",
                dir.display(),
                link.display()
            );
        }
    }
    let bin = stage.join("usr/local/bin/all_gather_perf");
    assert!(std::fs::read_link(&bin).expect("a link").is_relative());
    let usage = ok(Command::new(&bin).arg("-h"));
    assert!(usage.starts_with("USAGE: all_gather_perf \n"), "{usage}");
    let usage =
        ok(Command::new(stage.join("third_party/nccl-tests/build/sendrecv_perf_mpi")).arg("-h"));
    assert!(usage.starts_with("USAGE: sendrecv_perf_mpi \n"), "{usage}");
    let mpi_name = stage.join("opt/nccl-tests/build/sendrecv_perf_mpi");
    assert_eq!(
        std::fs::read_link(&mpi_name).expect("a link"),
        Path::new("sendrecv_perf"),
        "the _mpi name is the same program"
    );
    // Programs installed under the _mpi names first (an MPI build, `--mpi`; here
    // `--suffix _mpi`) are kept when the default build's --both-names comes after them.
    let both = tmp.0.join("both");
    let prefix = both.join("opt/nccl-tests");
    ok(layout_script()
        .args([
            "--from",
            bin_dir().to_str().expect("utf-8"),
            "--suffix",
            "_mpi",
        ])
        .arg(&prefix));
    let out = run(layout_script()
        .args(["--from", bin_dir().to_str().expect("utf-8"), "--both-names"])
        .arg(&prefix));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("(11 programs already there kept)"),
        "{}",
        text(&out.stderr)
    );
    for name in benchmark_names() {
        for n in [name.to_string(), format!("{name}_mpi")] {
            let p = prefix.join("build").join(&n);
            assert!(
                is_executable(&p) && !p.is_symlink(),
                "{} is a program of its own",
                p.display()
            );
        }
    }
    // A real folder where a link would go is never replaced.
    let blocked = tmp.0.join("blocked");
    std::fs::create_dir_all(blocked.join("opt/nccl_tests/build")).expect("mkdir");
    let out = run(layout_script()
        .args(["--from", bin_dir().to_str().expect("utf-8"), "--common"])
        .arg("--destdir")
        .arg(&blocked)
        .arg("/opt/nccl-tests"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is not a symlink"),
        "{}",
        text(&out.stderr)
    );
}
