//! Real runs as they end: NCCL's last error after a complete run (a note, not a failure) and
//! a cut run (marked in the legend, named on stderr).

use super::{read, reference, scratch, stdout};
use crate::programs::tool;
use std::path::PathBuf;

/// A real run under NCCL 2.32.3 (PyPI's nvidia-nccl-cu12 wheel, pruned to sm_90, loaded with
/// NCCL_PERF_LIBNCCL): all_reduce at 4 ranks posing as hosts on one H100, validated, whose
/// last line is NCCL's last error message, as nccl-tests prints it
/// (docs/results/h100x1/nccl-2.32.3/README.md).
const NCCL_2_32_RUN: &str = "docs/results/h100x1/nccl-2.32.3/all_reduce_n4.out";
const NCCL_2_32_LAST_ERROR: &str =
    "# error: RMA/Socket : rma_socket requires GDRCopy; and GDR Copy is not available";

#[test]
fn nccls_last_error_after_a_complete_run_is_a_note_not_a_failure() {
    // Before: report and compare called every run under NCCL 2.32 BROKEN (exit 3).
    let dir = scratch("last-error");
    let log = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(NCCL_2_32_RUN);
    let text = read(&log);
    assert!(text.trim_end().ends_with(NCCL_2_32_LAST_ERROR), "{text}");
    let log = log.to_string_lossy().into_owned();
    let out = tool(&["report", &log]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("note: ") && err.contains("rma_socket requires GDRCopy"),
        "{err}"
    );
    // The text keeps the line; the JSON carries it as a note, not a problem.
    assert!(stdout(&out).contains(NCCL_2_32_LAST_ERROR));
    let json = stdout(&tool(&["parse", &log]));
    assert!(
        json.contains("\"nccl_perf_notes\":[\"NCCL's last error message"),
        "{json}"
    );
    assert!(!json.contains("nccl_perf_problems"), "{json}");
    // compare against itself: OK, with the notes.
    let out = tool(&["compare", &log, &log]);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("# note: new ") && report.contains("rma_socket"),
        "{report}"
    );
    // The same line on a run that did not complete still fails it (no footer).
    let cut: String = text
        .lines()
        .filter(|l| !l.starts_with("# Out of bounds") && !l.starts_with("# Avg bus"))
        .map(|l| format!("{l}\n"))
        .collect();
    let cut_log = dir.join("cut.out");
    std::fs::write(&cut_log, cut).unwrap();
    let out = tool(&["report", &cut_log.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn a_cut_run_is_marked_in_the_legend_and_named_on_stderr() {
    // Before: a cut or failed run was drawn like any other, without a word.
    let dir = scratch("plot-cut");
    let full = reference("ar_sweep.out");
    let text = read(&full);
    let cut: String = text
        .lines()
        .take_while(|l| !l.starts_with("# Out of bounds"))
        .map(|l| format!("{l}\n"))
        .collect();
    let cut_path = dir.join("cut.out");
    std::fs::write(&cut_path, cut).unwrap();
    let svg = dir.join("cut.svg");
    let out = tool(&[
        "plot",
        &full.to_string_lossy(),
        &cut_path.to_string_lossy(),
        "-o",
        &svg.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cut: no footer") && err.contains("marked 'cut short' in the legend"),
        "{err}"
    );
    let image = read(&svg);
    assert!(
        image.contains("cut (cut short) out-of-place"),
        "no mark in the legend"
    );
    assert!(
        !image.contains("ar_sweep (cut short)"),
        "the sound run was marked"
    );
}
