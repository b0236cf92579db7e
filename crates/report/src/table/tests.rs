//! Unit tests of the text report with the spec's examples (the golden files are compared in
//! `tests/golden_format.rs`).

use super::*;
use crate::PerIterStats;
use crate::numbers::NO_ROWS_AVERAGE;

fn info() -> RunInfo {
    RunInfo {
        program: "all_reduce_perf".into(),
        ngpus: 8,
        min_bytes: 8,
        max_bytes: 134217728,
        step: Step::Factor(2),
        ..RunInfo::default()
    }
}

fn half(time_us: f64, algbw: f64, busbw: f64, wrong: Option<f64>) -> HalfResult {
    HalfResult {
        time_us,
        algbw,
        busbw,
        wrong,
        per_iter: None,
    }
}

fn row_result() -> RowResult {
    RowResult {
        size: 134217728,
        count: 33554432,
        dtype: "float".into(),
        op: "sum".into(),
        root: -1,
        out_of_place: half(1023.40, 131.15, 229.51, Some(0.0)),
        in_place: half(1019.80, 131.61, 230.32, Some(0.0)),
        timestamp: None,
        iterations: 20,
    }
}

fn summary() -> Summary {
    Summary {
        oob_errors: 0,
        avg_busbw: 87.6543,
        min_bw_ok: None,
        last_error: String::new(),
        memory_report: None,
    }
}

#[test]
fn version_line_names_both_projects() {
    let line = version_line(22905);
    let want = format!(
        "# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22905 (nccl-perf {})\n",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(line, want);
}

#[test]
fn header_default() {
    assert_eq!(
        header(&info()),
        "# Collective test starting: all_reduce_perf\n\
         # nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 \
         iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n\
         #\n\
         # Using devices\n"
    );
}

#[test]
fn header_optional_lines_keep_trailing_spaces() {
    let mut i = info();
    i.step = Step::Bytes(1048576);
    i.per_iter = true;
    i.per_iter_skip = 3;
    i.parallel_init = true;
    for (blocking, line) in [
        (
            1,
            "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n",
        ),
        (
            2,
            "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n",
        ),
        (
            3,
            "# Blocking Enabled: wait and barrier after each outer iteration (-n); \
             time excludes barrier \n",
        ),
    ] {
        i.blocking = blocking;
        let h = header(&i);
        assert!(h.contains("step: 1048576(bytes) "), "{h}");
        let want = format!(
            "{line}# Per-Iteration Report: CUDA event timing; i_* uses max over process rows; \
             summary skips first 3 iterations \n\
             # Parallel Init Enabled: threads call into NcclInitRank concurrently \n#\n"
        );
        assert!(h.contains(&want), "{h}");
    }
    // Other non-zero blocking values print nothing.
    i.blocking = 7;
    assert!(!header(&i).contains("Blocking"));
}

#[test]
fn device_line_layout() {
    let d = DeviceInfo {
        rank: 1,
        group: 0,
        pid: 4242,
        hostname: "dgx01".into(),
        device: 1,
        pci_domain: 0,
        pci_bus: 0x28,
        pci_device: 0,
        name: "NVIDIA H200".into(),
    };
    assert_eq!(
        device_line(&d),
        "#  Rank  1 Group  0 Pid   4242 on      dgx01 device  1 [0000:28:00] NVIDIA H200\n"
    );
}

#[test]
fn memory_clamp() {
    assert_eq!(
        memory_clamp_lines(48318382080),
        "#\n# Reducing maxBytes to 48318382080 due to memory limitation\n"
    );
}

const DEFAULT_TABLE_HEADER: &str = "#\n\
#                                                              out-of-place                       in-place          \n\
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong \n\
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         \n";

#[test]
fn table_header_default_and_cputime() {
    assert_eq!(table_header(&info()), DEFAULT_TABLE_HEADER);
    let mut i = info();
    i.report_cputime = true;
    let want = DEFAULT_TABLE_HEADER.replace("    time", " cputime");
    assert_eq!(table_header(&i), want);
}

#[test]
fn table_header_timestamps() {
    let mut i = info();
    i.report_timestamps = true;
    let h = table_header(&i);
    let lines: Vec<&str> = h.lines().collect();
    assert!(lines[2].ends_with("  #wrong           timestamp"), "{h}");
    assert!(
        lines[3].ends_with("(GB/s)           %Y-%m-%d %H:%M:%S"),
        "{h}"
    );
}

#[test]
fn table_header_per_iteration() {
    let mut i = info();
    i.per_iter = true;
    assert_eq!(
        table_header(&i),
        "#\n\
#                                                                 out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n\
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv% \n\
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%) \n"
    );
}

#[test]
fn row_default() {
    let line = row(&row_result(), &info());
    assert_eq!(
        line,
        "   134217728      33554432     float     sum      -1  1023.40  131.15  229.51       0  1019.80  131.61  230.32       0\n"
    );
    assert_eq!(line.split_whitespace().count(), 13);
}

#[test]
fn row_not_available_wrong_counts_and_empty_op() {
    let mut r = row_result();
    r.op = String::new();
    r.out_of_place.wrong = Some(1234567.0);
    r.in_place.wrong = None;
    assert_eq!(
        row(&r, &info()),
        "   134217728      33554432     float              -1  1023.40  131.15  229.51  1.23457e+06  1019.80  131.61  230.32    N/A\n"
    );
}

#[test]
fn row_per_iteration_and_timestamp() {
    let mut i = info();
    i.per_iter = true;
    i.report_timestamps = true;
    let stats = PerIterStats {
        skipped: 0,
        min_us: 6.88,
        max_us: 14.69,
        avg_us: 9.0,
        p50_us: 8.0,
        p95_us: 14.0,
        p99_us: 14.69,
        stdev_us: 1.9,
        cv_pct: 21.37,
        times_us: vec![],
        per_process_max_times_us: vec![],
    };
    let mut r = row_result();
    r.out_of_place.per_iter = Some(stats);
    r.timestamp = Some("2026-12-02 12:57:44".into());
    let line = row(&r, &i);
    assert!(
        line.contains("       0     6.88    14.69    14.69    21.37  1019.80"),
        "{line}"
    );
    assert!(line.ends_with("       0      nan      nan      nan      nan  2026-12-02 12:57:44\n"));
    assert_eq!(line.split_whitespace().count(), 23);
}

#[test]
fn footer_default_keeps_trailing_space() {
    assert_eq!(
        footer(&summary(), "all_reduce_perf"),
        "# Out of bounds values : 0 OK\n\
         # Avg bus bandwidth    : 87.6543 \n\
         #\n\
         # Collective test concluded: all_reduce_perf\n\
         #\n\
         \n"
    );
}

#[test]
fn footer_statuses_memory_and_error() {
    let mut s = summary();
    s.oob_errors = 3;
    s.avg_busbw = NO_ROWS_AVERAGE;
    s.min_bw_ok = Some(false);
    s.memory_report = Some(memory_report(580.0 * 1048576.0, 192.0 * 1048576.0, 0.0));
    s.last_error = "remote process exited".into();
    assert_eq!(
        footer(&s, "hypercube_perf"),
        "# Out of bounds values : 3 FAILED\n\
         # Avg bus bandwidth    : -nan FAILED\n\
         #\n\
         # Collective test concluded: hypercube_perf\n\
         # GPU memory usage     : Initialization 580 MB | User-Allocated 192 MB | \
         Collective 0.00 B | Total  772 MB\n\
         #\n\
         # error: remote process exited\n"
    );
    s.min_bw_ok = Some(true);
    assert!(footer(&s, "x").contains(": -nan OK\n"));
}

#[test]
fn memory_amounts() {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    assert_eq!(memory_amount(1.5 * GIB), "1.50 GB");
    assert_eq!(memory_amount(512.0 * 1048576.0), "512 MB");
    assert_eq!(memory_amount(12.0 * 1048576.0), "12.0 MB");
    assert_eq!(memory_amount(0.0), "0.00 B");
    assert_eq!(memory_amount(1023.0), "1023 B");
    assert_eq!(memory_amount(1024.0), "1.00 KB");
    assert_eq!(memory_amount(-2.0 * 1048576.0), "-2.00 MB");
    assert_eq!(memory_amount(-150.0 * GIB), "-150 GB");
}
