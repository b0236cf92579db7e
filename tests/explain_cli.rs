//! `--explain` without a GPU: every program exports the plugin tables where NCCL looks for them
//! (the dry run looks them up as NCCL does, `dlopen(NULL)` then `dlsym`), a plugin the user
//! configured is left in place and said, and the options are checked.

use crate::programs;

use std::process::Stdio;
use std::time::Duration;

/// NCCL's plugin variables, cleared so that the runner's environment does not leak in.
const PLUGIN_VARS: [&str; 4] = [
    "NCCL_PROFILER_PLUGIN",
    "NCCL_TUNER_PLUGIN",
    "NCCL_NET_PLUGIN",
    "NCCL_NET",
];

fn dry_run(bin: &str, extra: &[&str], env: &[(&str, &str)]) -> programs::Outcome {
    let mut c = programs::program(bin);
    c.args(["-b", "8", "-e", "1M", "--dry-run", "--explain"])
        .args(extra);
    c.env("NCCL_PERF_BOOTSTRAP", "single");
    for v in PLUGIN_VARS {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    programs::run(c, Duration::from_secs(60))
}

/// The dry run's "built in" means the program exports every table of
/// `nccl_perf_capture::install::EXPORTED` (profiler v1–v5, tuner v3–v5: NCCL 2.22 to 2.28+);
/// one missing would make it say which.
#[test]
fn every_program_exports_its_plugins_where_nccl_looks() {
    for bin in programs::BINARIES {
        let out = dry_run(bin, &[], &[]);
        assert_eq!(out.code, Some(0), "{bin}: {}{}", out.stdout, out.stderr);
        let last = out.stdout.lines().last().unwrap_or_default();
        assert_eq!(
            last,
            "# Explain: NCCL's profiler: built in; tuner: built in (NCCL 2.23 or later loads both, 2.22 the tuner)",
            "{bin}"
        );
    }
}

/// The root build.rs exports exactly the tables the dry run checks.
#[test]
fn build_rs_exports_what_install_checks() {
    let build = include_str!("../build.rs");
    let start = build.find("const EXPORTED").unwrap();
    let end = start + build[start..].find("];").unwrap();
    let listed: Vec<&str> = build[start..end].split('"').skip(1).step_by(2).collect();
    assert_eq!(listed, nccl_perf_capture::install::EXPORTED);
}

#[test]
fn a_configured_plugin_is_left_in_place_and_said() {
    let bin = env!("CARGO_BIN_EXE_all_reduce_perf");
    let out = dry_run(
        bin,
        &[],
        &[("NCCL_TUNER_PLUGIN", "/opt/vendor/libnccl-tuner-x.so")],
    );
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let last = out.stdout.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        "# Explain: NCCL's profiler: built in; tuner: not ours (NCCL_TUNER_PLUGIN=/opt/vendor/\
         libnccl-tuner-x.so is set: explain leaves that plugin in place (it does not load), so \
         NCCL's cost model is not shown) (NCCL 2.23 or later loads both, 2.22 the tuner)"
    );
    let out = dry_run(bin, &[], &[("NCCL_PROFILER_PLUGIN", "inspector")]);
    assert!(
        out.stdout.contains(
            "profiler: not ours (NCCL_PROFILER_PLUGIN=inspector is set: explain \
             leaves that plugin in place, so the algorithm, protocol, channels and transport \
             path are not shown); tuner: built in"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn explain_options_are_checked() {
    let bin = env!("CARGO_BIN_EXE_all_reduce_perf");
    let run = |args: &[&str]| {
        let mut c = programs::program(bin);
        c.args(args).env("NCCL_PERF_BOOTSTRAP", "single");
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        programs::run(c, Duration::from_secs(60))
    };
    let out = run(&["--explain-gate", "50", "--dry-run"]);
    assert_eq!(out.code, Some(255));
    assert_eq!(
        out.stderr.trim(),
        "all_reduce_perf: --explain-gate needs --explain"
    );
    let out = run(&["--explain-sku", "x.txt", "--dry-run"]);
    assert_eq!(
        out.stderr.trim(),
        "all_reduce_perf: --explain-sku needs --explain"
    );
    let out = run(&["--explain", "--explain-gate", "0", "--dry-run"]);
    assert_eq!(out.code, Some(255));
    assert!(
        out.stderr.contains("invalid value 0 for --explain-gate"),
        "{}",
        out.stderr
    );
    let out = run(&["--explain", "--explain-gate", "lots", "--dry-run"]);
    assert!(
        out.stderr
            .contains("invalid value 'lots' for --explain-gate"),
        "{}",
        out.stderr
    );
    // The table is read where a run reads it: a missing or broken file stops the dry run.
    let missing = programs::scratch("explain-sku-missing").join("none.txt");
    let out = dry_run(bin, &["--explain-sku", missing.to_str().unwrap()], &[]);
    assert_eq!(out.code, Some(255), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("--explain-sku: {}", missing.display())),
        "{}",
        out.stderr
    );
    let broken = programs::scratch("explain-sku-broken").join("sku.txt");
    std::fs::write(&broken, "this is not a table row\n").unwrap();
    let out = dry_run(bin, &["--explain-sku", broken.to_str().unwrap()], &[]);
    assert_eq!(out.code, Some(255), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("--explain-sku: {}:1: ", broken.display())),
        "{}",
        out.stderr
    );
}

#[test]
fn a_configured_tuner_is_chained_behind_ours() {
    let dir = programs::scratch("explain-chain");
    let Some(lib) = programs::fake_library(&dir, "fake_tuner.c", "libnccl-tuner-fake.so", &[], &[])
    else {
        return;
    };
    let lib = lib.to_str().unwrap();
    let out = dry_run(
        env!("CARGO_BIN_EXE_all_reduce_perf"),
        &[],
        &[("NCCL_TUNER_PLUGIN", lib)],
    );
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let last = out.stdout.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "# Explain: NCCL's profiler: built in; tuner: built in, chained \
             (NCCL_TUNER_PLUGIN={lib} is set: its tuner (fake-tuner from {lib}) is chained behind \
             explain's and still decides; NCCL's model is shown as NCCL computed it, before that \
             tuner's changes) (NCCL 2.23 or later loads both, 2.22 the tuner)"
        )
    );
}
