//! Logs as launchers and documents show them: `srun -l` and `mpirun --tag-output` prefixes on
//! every line, NCCL INFO lines inside the table, and excerpts that start at `# Using devices`.

use super::{logs, read, scratch, text, write};
use crate::programs::tool;
use nccl_perf_report::health;
use nccl_perf_report::parse::{ParseOptions, parse_log};

/// What goes before line `i` of a log.
type Prefix = Box<dyn Fn(usize) -> String>;

/// A real log with every line prefixed, as documents and launchers show them.
fn prefixed(prefix: impl Fn(usize) -> String, body: &str) -> String {
    body.lines()
        .enumerate()
        .map(|(i, l)| format!("{}{l}\n", prefix(i)))
        .collect()
}

#[test]
fn a_constant_prefix_on_every_line_is_taken_off() {
    let body = read("gcp-a3mega-mpirun-16.log");
    let plain = parse_log(&body, "a3", &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch("prefixes");
    let cases: Vec<(&str, Prefix)> = vec![
        ("markdown-4-spaces", Box::new(|_| "    ".to_string())),
        ("tab", Box::new(|_| "\t".to_string())),
        ("quote", Box::new(|_| "> ".to_string())),
        (
            "ray",
            Box::new(|_| "(head, rank=0, pid=3808) [1,0]<stdout>:".to_string()),
        ),
        (
            "kubectl-prefix",
            Box::new(|_| "[pod/nccl-tests-launcher-6xq2v/mpi-launcher] ".to_string()),
        ),
        (
            "stern",
            Box::new(|_| "nccl-tests-launcher-6xq2v mpi-launcher ".to_string()),
        ),
        ("pdsh", Box::new(|_| "ztan-mig-235z: ".to_string())),
        (
            "timestamp",
            Box::new(|i| {
                format!(
                    "2024-11-05T18:{:02}:{:02}.{:09}Z ",
                    i / 60,
                    i % 60,
                    i * 7919
                )
            }),
        ),
    ];
    for (name, prefix) in cases {
        let log = prefixed(prefix, &body);
        let runs = parse_log(&log, name, &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(runs.len(), 1, "{name}");
        assert_eq!(runs[0].rows, plain[0].rows, "{name}");
        assert_eq!(runs[0].devices, plain[0].devices, "{name}");
        assert!(health::problems(&runs[0]).is_empty(), "{name}");
        let path = write(&dir, &format!("{name}.log"), &log);
        let out = tool(&["report", &path]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out));
    }
}

#[test]
fn a_row_broken_by_an_nccl_line_names_it_and_keeps_the_others() {
    let dir = scratch("interleaved");
    // nccl-tests prints a row's size, count, type, redop and root before it times the
    // collective: NCCL's lazy connection lines land inside the row.
    let body = read("gcp-a3mega-mpirun-16.log").replacen(
        "     2097152        524288     float     sum      -1",
        "     2097152        524288     float     sum      -1ztan-mig-235z:6899:7012 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/GPUDirectTCPX/0\n",
        1,
    );
    assert_ne!(body, read("gcp-a3mega-mpirun-16.log"));
    let log = write(&dir, "interleaved.log", &body);
    let out = tool(&["parse", &log]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(
        t.contains("unreadable line 43: a row broken by interleaved output: line 42 ("),
        "{t}"
    );
    assert!(t.contains("NCCL INFO Channel 00/0"), "{t}");
    let json = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        json.matches("\"size\":").count(),
        30,
        "the other 30 rows are kept"
    );
    let base = logs().join("gcp-a3mega-mpirun-16.log");
    let out = tool(&["compare", &base.to_string_lossy(), &log]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(t.contains("# problem: new "), "{t}");
}

#[test]
fn an_excerpt_from_using_devices_keeps_its_rank_count() {
    let dir = scratch("excerpt");
    let body = read("rccl-issue-1562-mi300x-vf-pci-function.log");
    let from = body.find("# Using devices").unwrap_or(0);
    let eight = write(&dir, "eight.log", &body[from..]);
    // The same excerpt as if the run had a second node: device lines for ranks 8 to 15.
    let more: String = (8..16)
        .map(|r| {
            format!(
                "#   Rank {r:2} Pid  61000 on other-node device  {} [0002:00:00.0] AMD Instinct MI300X VF\n",
                r - 8
            )
        })
        .collect();
    let sixteen_body = body[from..].replacen("MI300X VF\n#\n", &format!("MI300X VF\n{more}#\n"), 1);
    let sixteen = write(&dir, "sixteen.log", &sixteen_body);
    let out = tool(&["compare", &sixteen, &eight]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(t.contains("# problem: ranks: base 16, new 8"), "{t}");

    // A table without its device lines (an excerpt from the table header): the rank count
    // comes from busbw/algbw, 16, and is checked.
    let bare = logs().join("aws-eks-mpijob-tag-output.log");
    let out = tool(&["compare", &eight, &bare.to_string_lossy()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(
        t.contains("# note: new has no device lines: 16 rank(s) inferred from busbw/algbw"),
        "{t}"
    );
    assert!(t.contains("# problem: ranks: base 8, new 16"), "{t}");
}
