//! `--collectives` without a GPU: the dry run plans every listed benchmark and names them in
//! order; a name that is no benchmark, an empty list, a collective that cannot run this job and
//! `--locate` beside it each end with one line and their exit code before anything runs.
//! (The runs themselves, section by section, are checked on a GPU: `ci/gpu-one-launch.sh`.)

use crate::programs;
use std::process::Output;

fn all_reduce(args: &[&str]) -> Output {
    programs::program(env!("CARGO_BIN_EXE_all_reduce_perf"))
        .args(args)
        .env("NCCL_PERF_BOOTSTRAP", "single")
        .output()
        .unwrap_or_else(|e| panic!("cannot run all_reduce_perf: {e}"))
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_dry_run_names_every_section_in_order() {
    let o = all_reduce(&[
        "--dry-run",
        "--collectives",
        "sendrecv_perf,all_gather",
        "-b",
        "8",
        "-e",
        "1M",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("# Collectives, one section each"))
        .unwrap_or_else(|| panic!("no collectives line in {out}"));
    assert!(line.ends_with(": sendrecv_perf all_gather_perf"), "{line}");
    // Without the option, the plan is the program's own and has no such line.
    let (plain, _) = text(&all_reduce(&["--dry-run", "-b", "8", "-e", "1M"]));
    assert!(!plain.contains("# Collectives"), "{plain}");
}

#[test]
fn bad_lists_stop_before_anything_runs_with_one_line() {
    let cases: [(&[&str], i32, &str); 4] = [
        (
            &["--collectives", "all_reduce,allreduce"],
            255,
            "'allreduce' is not a benchmark",
        ),
        (
            &["--collectives", ","],
            255,
            "--collectives needs at least one benchmark name",
        ),
        (
            &["--collectives", "all", "--locate", "nodes"],
            5,
            "--locate with --collectives runs once, on the first collective --health finds slow: add --health",
        ),
        (
            &["--collectives", "all", "-g", "3", "--dry-run"],
            5,
            "hypercube_perf needs a power-of-two number of ranks",
        ),
    ];
    for (args, code, says) in cases {
        let o = all_reduce(args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            !out.contains("# Collective test starting"),
            "{args:?}: {out}"
        );
    }
}

#[test]
fn the_health_preset_fills_in_what_the_command_line_leaves_out() {
    let (out, err) = text(&all_reduce(&["--health", "--dry-run"]));
    assert!(
        out.contains("order (the sizes, datatypes and ops below are the first's): all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf sendrecv_perf\n"),
        "{out}{err}"
    );
    assert!(
        out.contains("# Sizes: 14 from 1048576 to 8589934592 bytes:"),
        "{out}"
    );
    // What is given wins: sizes, and the list.
    let (out, _) = text(&all_reduce(&[
        "--health",
        "--dry-run",
        "-b",
        "8",
        "-e",
        "1K",
        "-f",
        "2",
        "--collectives",
        "sendrecv",
    ]));
    assert!(out.contains("# Sizes: 8 from 8 to 1024 bytes:"), "{out}");
    assert!(
        out.contains("sendrecv_perf\n") && !out.contains("all_gather_perf"),
        "{out}"
    );
    // A file that cannot be written stops the run before any GPU work, as -J's does.
    let r = all_reduce(&["--health", "--health-prom", "/nonexistent-folder/node.prom"]);
    let (out, err) = text(&r);
    assert_eq!(r.status.code(), Some(255), "{out}{err}");
    assert!(
        err.starts_with(
            "all_reduce_perf: --health-prom /nonexistent-folder/node.prom: cannot create the \
             output file ("
        ),
        "{err}"
    );
    for o in ["--health-json", "--health-prom"] {
        let r = all_reduce(&[o, "h.out"]);
        let (_, err) = text(&r);
        assert_eq!(r.status.code(), Some(255), "{o}: {err}");
        assert_eq!(err.trim(), format!("all_reduce_perf: {o} needs --health"));
    }
}

#[test]
fn a_health_check_takes_locate_and_plans_it_once() {
    let o = all_reduce(&["--health", "--locate", "nodes", "--dry-run"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert_eq!(out.matches("# locate: schedule nodes").count(), 1, "{out}");
    // Without --health, a list of collectives still refuses --locate (nothing decides which).
    let o = all_reduce(&["--collectives", "all_reduce,sendrecv", "--locate", "nodes"]);
    assert_eq!(o.status.code(), Some(5));
}
