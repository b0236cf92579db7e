//! The generated completions (every shell) and man pages cover every program and option.

use std::process::Command;

use nccl_perf_cli::OPTIONS;

use crate::shipped::*;

// ---------------------------------------------------------------------------------------------
// Completions and man pages

#[test]
fn completions_of_every_shell_cover_every_option() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = ok(Command::new(TOOL).args(["completions", shell]));
        for name in benchmark_names().into_iter().chain(["nccl-perf"]) {
            assert!(script.contains(name), "{shell}: no {name}");
        }
        for long in OPTIONS.iter().map(|o| o.long) {
            let needle = if shell == "fish" {
                format!("-l {long}")
            } else {
                format!("--{long}")
            };
            assert!(script.contains(&needle), "{shell}: no {needle}");
        }
        for word in [
            "parse",
            "report",
            "plot",
            "compare",
            "--max-regression",
            "man",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
        if shell == "bash" {
            let tmp = TempDir::new("bash");
            let f = tmp.0.join("c.bash");
            std::fs::write(&f, &script).expect("write");
            ok(Command::new("bash").arg("-n").arg(&f));
            // Sourced, it registers every program.
            let registered = ok(Command::new("bash")
                .arg("-c")
                .arg(format!("source {}; complete -p | wc -l", f.display())));
            assert_eq!(registered.trim(), "12");
        }
    }
    // Installed names with a suffix get completions under those names.
    let script = ok(Command::new(TOOL).args(["completions", "bash", "--suffix", "_mpi"]));
    assert!(
        script.contains("complete -F _all_reduce_perf_mpi")
            || script.contains("all_reduce_perf_mpi")
    );
    // One file per program, named as the shell looks them up.
    let tmp = TempDir::new("zsh");
    ok(Command::new(TOOL)
        .args(["completions", "zsh", "--dir"])
        .arg(&tmp.0)
        .args(["nccl-perf", "all_reduce_perf_mpi"]));
    assert!(tmp.0.join("_nccl-perf").is_file());
    assert!(tmp.0.join("_all_reduce_perf_mpi").is_file());
    let out = run(Command::new(TOOL).args(["completions", "bash", "bogus_name"]));
    assert_eq!(out.status.code(), Some(2));
}

/// Roff text with the escapes of option names undone (`\-` → `-`).
fn unroff(s: &str) -> String {
    s.replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "")
        .replace("\\fI", "")
}

#[test]
fn man_pages_cover_every_program_and_option() {
    let tmp = TempDir::new("man");
    ok(Command::new(TOOL).args(["man", "--dir"]).arg(&tmp.0));
    let mut pages: Vec<String> = std::fs::read_dir(&tmp.0)
        .expect("pages")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let subcommands = [
        "parse",
        "report",
        "plot",
        "compare",
        "health",
        "baseline",
        "completions",
        "man",
    ];
    let mut expected: Vec<String> = benchmark_names()
        .into_iter()
        .chain(["nccl-perf"])
        .map(|n| format!("{n}.1"))
        .chain(subcommands.iter().map(|s| format!("nccl-perf-{s}.1")))
        .collect();
    expected.sort();
    assert_eq!(pages, expected);

    for name in benchmark_names() {
        let page = unroff(&std::fs::read_to_string(tmp.0.join(format!("{name}.1"))).expect("page"));
        assert!(page.starts_with(".ie") || page.contains(&format!(".TH {name} 1")));
        for o in OPTIONS {
            let flags = match o.short {
                Some(short) => format!("-{short}, --{}", o.long),
                None => format!("--{}", o.long),
            };
            assert!(page.contains(&flags), "{name}: {flags}");
        }
        for word in [
            "--dry-run",
            ".SH ENVIRONMENT",
            "NCCL_PERF_BOOTSTRAP",
            "JOB_COMPLETION_INDEX",
            ".SH \"EXIT STATUS\"",
        ] {
            assert!(page.contains(word), "{name}: no {word}");
        }
        assert_eq!(
            page.contains("NCCL_TESTS_ALLTOALLV_SPREAD"),
            name == "alltoallv_perf"
        );
    }
    let tool = unroff(&std::fs::read_to_string(tmp.0.join("nccl-perf.1")).expect("page"));
    for sub in subcommands {
        assert!(tool.contains(&format!("nccl-perf-{sub}(1)")), "{sub}");
    }
    let compare =
        unroff(&std::fs::read_to_string(tmp.0.join("nccl-perf-compare.1")).expect("page"));
    for opt in [
        "--max-regression",
        "--min-size",
        "--metric",
        "--half",
        "--partial",
    ] {
        assert!(compare.contains(opt), "compare page: {opt}");
    }

    // One page on stdout, under an installed name; groff (where present) reads it cleanly.
    let page = ok(Command::new(TOOL).args(["man", "all_reduce_perf_mpi"]));
    assert!(page.contains(".TH all_reduce_perf_mpi 1"), "{page}");
    if Command::new("groff").arg("--version").output().is_ok() {
        let f = tmp.0.join("one.1");
        std::fs::write(&f, &page).expect("write");
        let out = ok(Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(&f));
        assert!(out.is_empty(), "{out}");
    }
    let out = run(Command::new(TOOL).args(["man", "nope"]));
    assert_eq!(out.status.code(), Some(2));
}
