//! Logs the reference folder does not show: launcher prefixes, NCCL INFO lines, several tests,
//! the layouts of older nccl-tests versions (other column widths and header spacing; no version
//! line before v2.17.4, no `unalign:` field before v2.18.2), and broken input.

use super::*;
use crate::Step;

/// A complete v2.19.6 test (one GPU, validation on), as nccl-tests prints it.
const V2_19_6: &str = "\
# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 4(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1402 on         vm device  0 [0000:00:06] NVIDIA H200
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
        1024           256     float     sum      -1     7.87    0.13    0.00       0     0.44    2.33    0.00       0
        4096          1024     float     sum      -1     7.07    0.58    0.00       0     0.35   11.73    0.00       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0 
#
# Collective test concluded: all_reduce_perf
#

";

fn parse(text: &str) -> Result<Vec<Run>, ReadError> {
    parse_log(text, "test.log", &ParseOptions::default())
}

fn one(text: &str) -> Run {
    let runs = parse(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs.len(), 1, "{runs:#?}");
    runs.into_iter().next().unwrap_or_else(|| unreachable!())
}

fn prefixed(prefix: &str, text: &str) -> String {
    text.lines().map(|l| format!("{prefix}{l}\n")).collect()
}

#[test]
fn a_plain_test_prints_back_unchanged() {
    let run = one(V2_19_6);
    assert_eq!(run.info.program, "all_reduce_perf");
    assert_eq!(run.nccl_version, 22803);
    assert_eq!(run.rows.len(), 2);
    assert_eq!((run.source.first_line, run.source.last_line), (1, 18));
    assert_eq!(
        run.to_text(),
        V2_19_6.trim_end_matches('\n').to_string() + "\n\n"
    );
}

#[test]
fn srun_label_prefixes_are_removed() {
    let mut log = prefixed("0: ", V2_19_6);
    // Another task prints only NCCL's lines; task 0 mixes some into its output too.
    log = log.replacen(
        "0: # Using devices\n",
        "1: vm:1403:1403 [1] NCCL INFO Bootstrap: Using eth0:10.0.0.2<0>\n0: # Using devices\n\
         0: vm:1402:1402 [0] NCCL INFO NCCL version 2.28.3+cuda13.0\n",
        1,
    );
    let run = one(&log);
    assert_eq!(run.to_text(), one(V2_19_6).to_text());
}

#[test]
fn srun_label_padded_prefixes() {
    let run = one(&prefixed(" 3: ", V2_19_6));
    assert_eq!(run.rows.len(), 2);
}

#[test]
fn mpirun_tag_output_splits_processes() {
    // Two ranks that did not form one job (launcher/MPI mismatch) each print a whole test,
    // interleaved line by line.
    let a: Vec<String> = prefixed("[1,0]<stdout>:", V2_19_6)
        .lines()
        .map(String::from)
        .collect();
    let b: Vec<String> = prefixed("[1,1]<stdout>:", V2_19_6)
        .lines()
        .map(String::from)
        .collect();
    let mut log = String::new();
    for (x, y) in a.iter().zip(&b) {
        log += &format!("{x}\n{y}\n");
    }
    let runs = parse(&log).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].to_text(), runs[1].to_text());
    assert_eq!(
        (runs[0].source.first_line, runs[1].source.first_line),
        (1, 2)
    );
}

#[test]
fn nccl_info_lines_inside_the_table_are_skipped() {
    let log = V2_19_6.replacen(
        "        4096 ",
        "vm:1402:1410 [0] NCCL INFO Channel 00/32 : 0\nvm:1402:1410 [0] NCCL WARN Cuda failure 'x'\n        4096 ",
        1,
    );
    let run = one(&log);
    assert_eq!(run.rows.len(), 2);
    assert!(run.text.extra_lines.is_empty());
}

#[test]
fn several_tests_in_one_log() {
    let second = V2_19_6.replace("all_reduce_perf", "all_gather_perf");
    let log = format!("launcher says hello\n{V2_19_6}# time -v: noise\n{second}");
    let runs = parse(&log).unwrap_or_else(|e| panic!("{e}"));
    let programs: Vec<&str> = runs.iter().map(|r| r.info.program.as_str()).collect();
    assert_eq!(programs, ["all_reduce_perf", "all_gather_perf"]);
    assert_eq!(runs[0].source.first_line, 2);
    assert_eq!(runs[1].source.first_line, 21);
}

#[test]
fn legacy_v2_13_layout() {
    // No version line, no starting/concluded lines, no `unalign:`, bus id only, `%6.2f`
    // bandwidths and `%5g` #wrong, narrower #wrong header columns.
    let log = "\
# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#   Rank  0 Group  0 Pid  12345 on    dgx-a01 device  0 [0x07] NVIDIA A100-SXM4-80GB
#   Rank  1 Group  0 Pid  12345 on    dgx-a01 device  1 [0x0f] NVIDIA A100-SXM4-80GB
#
#                                                       out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
           8             2     float     sum      -1    28.41    0.00    0.00      0    27.95    0.00    0.00      0
   134217728      33554432     float     sum      -1    12345  10.87   10.87      0  10000.0  13.42   13.42      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 6.0725 
#
";
    let run = one(log);
    assert_eq!(run.info.program, "");
    assert_eq!(run.info.warmup_iters, 5);
    assert_eq!(run.info.step, Step::Factor(2));
    assert_eq!(run.devices.len(), 2);
    assert_eq!(run.devices[1].pci_bus, 0x0f);
    assert_eq!(run.rows[1].out_of_place.time_us, 12345.0);
    assert_eq!(run.rows[1].in_place.time_us, 10000.0);
    let s = run.summary.as_ref().unwrap_or_else(|| unreachable!());
    assert_eq!(s.avg_busbw, 6.0725);
    // Printed back in the v2.19.6 layout.
    assert!(run.to_text().contains(
        "   134217728      33554432     float     sum      -1  12345.0   10.87   10.87       0  10000.0   13.42   13.42       0\n"
    ));
}

#[test]
fn legacy_header_without_group_graph_or_agg_iters() {
    let log = "\
# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  12345 on      node1 device  0 [0x1a] Tesla V100-SXM2-32GB
#
#                                                     out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.01   0.00   0.00      0    10.02   0.00   0.00      0
          16             4     float     sum      -1    10.11   0.00   0.00      0    10.12   0.00   0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0 
";
    let run = one(log);
    assert_eq!(run.devices[0].group, 0);
    assert_eq!(run.devices[0].name, "Tesla V100-SXM2-32GB");
    assert_eq!((run.info.agg_iters, run.info.graph), (1, 0));
    assert_eq!(run.rows.len(), 2);
}

#[test]
fn v2_17_layout_overflowing_columns() {
    // v2.17.3–v2.19.5 print 9999.996 µs as `10000.00`, one character too wide.
    let log = V2_19_6.replace("     7.07    0.58    0.00", " 10000.00    0.58    0.00");
    let run = one(&log);
    assert_eq!(run.rows[1].out_of_place.time_us, 10000.0);
}

#[test]
fn n_a_timestamp_and_per_iteration_columns() {
    let log = "\
# Collective test starting: sendrecv_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
# Per-Iteration Report: CUDA event timing; i_* uses max over process rows; summary skips first 2 iterations 
#
# Using devices
#  Rank  0 Group  0 Pid   2015 on         vm device  0 [0000:00:06] NVIDIA H200
#
#                                                                 out-of-place (+ per-iteration)                                in-place (+ per-iteration)
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)   %Y-%m-%d %H:%M:%S
           8             2     float     sum      -1    10.15    0.00    0.00       0     6.88    14.69    14.69    21.37     2.32    0.00    0.00    N/A     1.54     4.74     4.74    31.93  2026-12-02 12:57:44
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0 
#
# Collective test concluded: sendrecv_perf
#

";
    let run = one(log);
    assert!(run.info.per_iter && run.info.report_timestamps);
    assert_eq!(run.info.per_iter_skip, 2);
    let r = &run.rows[0];
    assert_eq!(r.in_place.wrong, None);
    assert_eq!(r.out_of_place.wrong, Some(0.0));
    assert_eq!(r.timestamp.as_deref(), Some("2026-12-02 12:57:44"));
    assert_eq!(
        r.out_of_place.per_iter.as_ref().map(|p| p.cv_pct),
        Some(21.37)
    );
    assert_eq!(run.to_text(), log);
}

#[test]
fn failure_lines_end_a_test_without_footer() {
    let cut = V2_19_6.split("# Out of bounds").next().unwrap_or_default();
    let log = format!(
        "{cut}vm: Test NCCL failure all_reduce.cu:507 'invalid argument'\n .. vm pid 1350: Test failure common.cu:597\nafterwards\n"
    );
    let run = one(&log);
    assert!(run.summary.is_none());
    assert_eq!(run.text.extra_lines.len(), 2);
    assert_eq!(run.to_text(), log.trim_end_matches("afterwards\n"));
}

#[test]
fn truncated_log_keeps_its_rows_and_says_where_it_stopped() {
    let cut: String = V2_19_6.lines().take(11).map(|l| format!("{l}\n")).collect();
    let runs = parse(&cut).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs[0].rows.len(), 1);
    assert!(runs[0].summary.is_none());
    let stopped = runs[0].text.stopped.clone().unwrap_or_default();
    assert!(stopped.contains("the log ends at line 11"), "{stopped}");
    // --partial is accepted and changes nothing.
    let partial = parse_log(
        &cut,
        "t",
        &ParseOptions {
            allow_partial: true,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(partial[0].rows, runs[0].rows);
}

#[test]
fn a_new_test_inside_an_unfinished_one_is_reported() {
    let cut: String = V2_19_6.lines().take(11).map(|l| format!("{l}\n")).collect();
    let runs = parse(&format!("{cut}{V2_19_6}")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs.len(), 2);
    let stopped = runs[0].text.stopped.clone().unwrap_or_default();
    assert!(
        stopped.contains("another test starts at line 12"),
        "{stopped}"
    );
    assert!(runs[1].text.stopped.is_none());
}

#[test]
fn broken_rows_name_line_and_column_and_keep_the_others() {
    let rows = one(V2_19_6).rows.len();
    let bad = V2_19_6.replacen("     7.07 ", "     x.07 ", 1);
    let run = one(&bad);
    assert_eq!(run.rows.len(), rows - 1);
    assert_eq!(run.text.broken_lines[0].0, 12);
    assert!(
        run.text.broken_lines[0]
            .1
            .contains("out-of-place time 'x.07'"),
        "{:?}",
        run.text.broken_lines
    );
    assert_eq!(run.to_text(), bad, "the broken line prints back");

    let short = V2_19_6.replacen("0.35   11.73    0.00       0", "0.35", 1);
    let run = one(&short);
    assert_eq!(run.text.broken_lines[0].0, 12);
    assert!(run.text.broken_lines[0].1.contains("this line has 10"));

    let cut_exp = V2_19_6.replacen("     7.07 ", "-1.5e+0 ", 1);
    assert!(!one(&cut_exp).text.broken_lines.is_empty());

    let bad_header = V2_19_6.replacen("nGpus 1", "nGpus one", 1);
    assert_eq!(one(&bad_header).text.broken_lines[0].0, 3);
}

#[test]
fn a_row_cut_by_an_nccl_line_names_that_line() {
    let lines: Vec<&str> = V2_19_6.lines().collect();
    let row = lines[11];
    let (head, tail) = row.split_at(row.find("-1").unwrap_or(0) + 2);
    let mut broken: Vec<String> = lines[..11].iter().map(|l| l.to_string()).collect();
    broken.push(format!(
        "{head}vm:1402:1410 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"
    ));
    broken.push(tail.to_string());
    broken.extend(lines[12..].iter().map(|l| l.to_string()));
    let run = one(&(broken.join("\n") + "\n"));
    assert_eq!(run.rows.len(), one(V2_19_6).rows.len() - 1);
    assert!(run.summary.is_some());
    let (n, why) = &run.text.broken_lines[0];
    assert_eq!(*n, 13);
    assert!(why.contains("interleaved output: line 12 ("), "{why}");
    assert!(why.contains("NCCL INFO"), "{why}");
}

#[test]
fn rccl_bus_ids_with_a_pci_function() {
    let d = lines::device(
        "#   Rank  0 Pid  56417 on c42f4555f685 device  0 [0002:00:00.0] AMD Instinct MI300X VF",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((d.pci_domain, d.pci_bus, d.pci_device), (2, 0, 0));
    assert_eq!(d.name, "AMD Instinct MI300X VF");
}

#[test]
fn a_constant_prefix_on_every_line_is_found() {
    let cases = [
        ("    ", "4-space Markdown indentation"),
        ("\t", "a tab"),
        ("> ", "a quote"),
        ("(head, rank=0, pid=3808) ", "Ray / SkyPilot"),
        (
            "[pod/nccl-launcher-x7k2p/launcher] ",
            "kubectl logs --prefix",
        ),
        ("node-17: ", "pdsh"),
    ];
    let want = one(V2_19_6);
    for (prefix, what) in cases {
        let log: String = V2_19_6.lines().map(|l| format!("{prefix}{l}\n")).collect();
        let run = one(&log);
        assert_eq!(run.rows, want.rows, "{what}");
        assert_eq!(run.devices, want.devices, "{what}");
        assert!(run.summary.is_some(), "{what}");
    }
    // A timestamp changes from line to line.
    let log: String = V2_19_6
        .lines()
        .enumerate()
        .map(|(i, l)| {
            format!(
                "2024-05-01T10:00:{:02}.{:06}Z {l}\n",
                i % 60,
                i * 7919 % 1_000_000
            )
        })
        .collect();
    let run = one(&log);
    assert_eq!(run.rows, want.rows);
    // Ray's tag before mpirun --tag-output.
    let log: String = V2_19_6
        .lines()
        .map(|l| format!("(head, rank=0, pid=3808) [1,0]<stdout>:{l}\n"))
        .collect();
    assert_eq!(one(&log).rows, want.rows);
}

#[test]
fn a_prefix_is_found_on_an_excerpt_of_the_table_alone() {
    // Intel MPI's -prepend-rank (`[0] `) before a table pasted without the lines above it.
    let from = V2_19_6.find("#       size").unwrap_or(0);
    let to = V2_19_6.find("# Out of bounds").unwrap_or(V2_19_6.len());
    for prefix in ["[0] ", "[0]"] {
        let run = one(&prefixed(prefix, &V2_19_6[from..to]));
        assert_eq!(run.rows, one(V2_19_6).rows, "{prefix:?}");
    }
}

#[test]
fn a_rank_tag_inside_a_row_is_taken_out() {
    // MPICH / Intel MPI `-prepend-rank` tags every piece a process writes: nccl-tests prints a
    // row in pieces (NVIDIA/nccl issue 1453 shows `sum      -1[0]    1626.5 ...`).
    let log: String = V2_19_6
        .lines()
        .map(|l| {
            if l.starts_with('#') || l.is_empty() {
                format!("[0] {l}\n")
            } else {
                let (head, tail) = l.split_at(52);
                let (mid, last) = tail.split_at(32);
                format!("[0]{head}[0]{mid}[0]{last}\n")
            }
        })
        .collect();
    let run = one(&log);
    assert_eq!(run.rows, one(V2_19_6).rows);
    assert!(run.summary.is_some());
}

#[test]
fn a_log_that_lost_its_hashes_is_read_whatever_each_line_is_indented_by() {
    // Before: a footer indented by two or more blanks, or indentation that differed from line
    // to line, was not recognised, and a complete run was called cut short.
    let want = one(V2_19_6);
    for (n, indent) in [["  ", "  "], ["    ", "  "], ["", "   "], ["\t", " "]]
        .iter()
        .enumerate()
    {
        let log: String = V2_19_6
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let text = l.strip_prefix('#').unwrap_or(l);
                // Every other line, and the footer, indented differently.
                let pad = if i % 2 == 0 || text.trim_start().starts_with("Avg") {
                    indent[0]
                } else {
                    indent[1]
                };
                format!("{pad}{text}\n")
            })
            .collect();
        let run = one(&log);
        assert_eq!(run.rows, want.rows, "case {n}");
        assert!(run.summary.is_some(), "case {n}: the footer was not found");
    }
}

#[test]
fn nccls_version_line_fills_the_version_a_header_lacks() {
    use super::lines::nccl_version_code;
    assert_eq!(
        nccl_version_code("node1:20:20 [0] NCCL INFO NCCL version 2.18.3+cuda12.2"),
        Some(21803)
    );
    assert_eq!(
        nccl_version_code("h:1:1 [0] NCCL INFO NCCL version 2.7.8+cuda11.0"),
        Some(2708)
    );
    assert_eq!(
        nccl_version_code("h:1:1 [0] NCCL INFO NCCL version 2.x"),
        None
    );
    assert_eq!(
        nccl_version_code("h:1:1 [0] NCCL INFO Bootstrap : Using eth0"),
        None
    );
    // A v2.19.6 log whose header lost `nccl-library=` (as nccl-tests before 2.13 print it),
    // with NCCL's INFO lines mixed in: the version comes from NCCL's line.
    let log = V2_19_6
        .replace(" nccl-headers=22803 nccl-library=22803", "")
        .replacen(
            "#\n# Using devices",
            "#\nvm:1:1 [0] NCCL INFO NCCL version 2.28.3+cuda13.0\n# Using devices",
            1,
        );
    assert_ne!(log, V2_19_6);
    assert_eq!(one(&log).nccl_version, 22803);
    // The header's own figure wins where it is there.
    let log = V2_19_6.replacen(
        "#\n# Using devices",
        "#\nvm:1:1 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n# Using devices",
        1,
    );
    assert_eq!(one(&log).nccl_version, 22803);
}

#[test]
fn a_row_is_never_given_a_hash() {
    for line in [
        "        1024           256     float     sum      -1     7.87    0.13    0.00       0",
        "mpirun -np 2 ./all_reduce_perf -b 8",
        " .. vm pid 12: Test failure common.cu:1454",
        "vm:12:12 [0] NCCL INFO Channel 00/32 : 0 1",
        "",
        "# nThread 1",
    ] {
        assert_eq!(prefix::restore_hash(line), line);
    }
    // In a log that has its other `#`s, only lines no other program prints get theirs back.
    let device = "  Rank  0 Group  0 Pid   6899 on host device  0 [0000:04:00] NVIDIA H100";
    assert_eq!(prefix::restore_anchor(device), format!("#{device}"));
    let parameters = "nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor)";
    assert_eq!(
        prefix::restore_anchor(parameters),
        format!("# {parameters}")
    );
    for line in [
        "Rank 0: starting",
        "Using devices 0-7 for the job",
        "        1024           256     float     sum      -1     7.87",
        "#  Rank  0 Group  0 Pid 1 on h device 0 [0x00] X",
    ] {
        assert_eq!(prefix::restore_anchor(line), line);
    }
    assert_eq!(prefix::restore_hash(" Using devices"), "# Using devices");
    assert_eq!(prefix::restore_hash("Using devices"), "# Using devices");
    assert_eq!(prefix::restore_hash("  Rank  0 Group"), "#  Rank  0 Group");
    assert_eq!(
        prefix::restore_hash(" Collective test concluded: all_reduce_perf"),
        "# Collective test concluded: all_reduce_perf"
    );
}

#[test]
fn an_excerpt_from_the_device_lines_keeps_its_devices() {
    let from = V2_19_6.find("# Using devices").unwrap_or(0);
    let run = one(&V2_19_6[from..]);
    assert_eq!(run.devices, one(V2_19_6).devices);
    assert_eq!(run.rows, one(V2_19_6).rows);
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    let e = parse("hello\nworld\n").expect_err("garbage");
    assert!(
        e.message.contains("no nccl-tests output found in 2 lines"),
        "{e}"
    );
    // Deterministic pseudo-random bytes, and every prefix of a real test.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let bytes: Vec<u8> = (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 97) as u8 + 10
        })
        .collect();
    let noise = String::from_utf8_lossy(&bytes);
    let _ = parse(&noise);
    let _ = parse(&format!("{V2_19_6}{noise}"));
    for cut in 0..V2_19_6.len() {
        if V2_19_6.is_char_boundary(cut) {
            let _ = parse(&V2_19_6[..cut]);
        }
    }
}

#[test]
fn prefix_detection_leaves_rows_alone() {
    use prefix::{Stream, split_prefix};
    assert_eq!(split_prefix("12: # x"), (Stream::Srun(12), "# x"));
    assert_eq!(split_prefix("0:"), (Stream::Srun(0), ""));
    assert_eq!(
        split_prefix("[1,3]<stderr>:text"),
        (Stream::Mpi(1, 3), "text")
    );
    assert_eq!(
        split_prefix("[1,3]<stdout>: # x"),
        (Stream::Mpi(1, 3), "# x")
    );
    let row = "           8             2     float     sum      -1     4.76";
    assert_eq!(split_prefix(row), (Stream::Plain, row));
    assert_eq!(
        split_prefix("vm:1402:1402 [0] NCCL INFO"),
        (Stream::Plain, "vm:1402:1402 [0] NCCL INFO")
    );
}

#[test]
fn a_hung_run_keeps_rank_0s_verdict_over_the_pointer_lines() {
    let cut: String = V2_19_6.lines().take(11).map(|l| format!("{l}\n")).collect();
    let log = format!(
        "{cut}[vnode1] vnode1: bootstrap: rank 0 stopped the run: the run hung at operation 30 (culprit: rank 2); rank 0 (vnode0) printed the verdict\n\
         vnode0: hang: rank 2 (vnode2, pid 77) never started operation 30 of the run (all_reduce float sum 1048576 B out-of-place, timed iteration 25 of 200) that 3 other ranks started; its host thread is enqueuing, stalled for 10 s\x1b[2J\n\
           rank 0 (vnode0, pid 75), NCCL rank 0: enqueued 203, finished 3\n\
         vnode3: bootstrap: rank 0 stopped the run: the run hung at operation 30 (culprit: rank 2)\n"
    );
    let runs = parse(&log).unwrap_or_else(|e| panic!("{e}"));
    let hang = runs[0].text.hang.clone().unwrap_or_default();
    assert!(
        hang.starts_with("hang: rank 2 (vnode2, pid 77) never started operation 30 "),
        "{hang}"
    );
    assert!(!hang.contains('\x1b'), "{hang}");
    // A leaf's pointer line alone still says the run hung.
    let leaf = format!(
        "{cut}vnode3: bootstrap: rank 0 stopped the run: the run hung at operation 30 (culprit: rank 2)\n"
    );
    let runs = parse(&leaf).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        runs[0].text.hang.as_deref(),
        Some("the run hung at operation 30 (culprit: rank 2)")
    );
    // An ordinary run has none.
    assert_eq!(one(V2_19_6).text.hang, None);
}

#[test]
fn nccl_perf_s_wrong_data_line_gives_its_place_and_nothing_else_does() {
    let w = lines::wrong_place;
    assert_eq!(
        w("all_reduce_perf: wrong data on rank 5 (node2) (4 measurement(s) out of bounds)")
            .as_deref(),
        Some("rank 5 (node2)")
    );
    assert_eq!(
        w("[vnode0] x_perf: wrong data on up to 2 ranks at once between rank 3 (a) and rank 12 (b) (1 measurement(s) out of bounds)\r")
            .as_deref(),
        Some("up to 2 ranks at once between rank 3 (a) and rank 12 (b)")
    );
    for other in [
        "all_reduce_perf: wrong data on rank 5 (node2)",
        "all_reduce_perf: wrong data on rank 5 (node2) (four measurement(s) out of bounds)",
        "all_reduce_perf: wrong data on rank 5 (node2) ( measurement(s) out of bounds)",
        "all_reduce_perf: wrong data on everything (4 measurement(s) out of bounds)",
        "wrong data on rank 5 (node2) (4 measurement(s) out of bounds)",
    ] {
        assert_eq!(w(other), None, "{other}");
    }
    // A hostile line: no control characters, bounded.
    let long = format!(
        "p: wrong data on rank 1 (\x1b[2J{}) (1 measurement(s) out of bounds)",
        "h".repeat(5000)
    );
    let place = w(&long).unwrap_or_default();
    assert!(
        place.chars().count() == 300 && !place.contains('\x1b'),
        "{place}"
    );
    // Read inside a test, where rank 0's stderr meets the table.
    let log = V2_19_6.replace(
        "# Out of bounds values",
        "all_reduce_perf: wrong data on rank 0 (vm) (1 measurement(s) out of bounds)\n# Out of bounds values",
    );
    assert_eq!(one(&log).text.wrong_on.as_deref(), Some("rank 0 (vm)"));
    assert_eq!(one(V2_19_6).text.wrong_on, None);
}
