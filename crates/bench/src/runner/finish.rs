//! Phase 6, finish: the run's summary (wrong data, average bus bandwidth and the
//! `NCCL_TESTS_MIN_BW` verdict, NCCL's last error, the `-M 1` figures), the GPUs torn down, the
//! footer printed and the `-J` document completed, and the exit code.

use super::explanation::Conclusion;
use super::output::Output;
use super::threads::Measured;
use crate::error::{Result, code};
use crate::gpu::Gpu;
use crate::gpu::nccl::Nccl;
use crate::report::split::{self, SplitGroup};
use crate::report::{Summary, table};
use nccl_perf_explain::baseline::Baseline;
use nccl_perf_explain::health::Check;
use std::ops::Not;

/// Runs the finish phase; returns the exit code of a run that reached its footer.
pub(super) fn finish(nccl: &Nccl, measured: Measured, out: &mut Output) -> Result<u8> {
    let (explained, gate_failed) = explain(out);
    let (summary, code) = summarize(nccl, &measured, out);
    crate::gpu::rank::destroy_all(measured.gpus)?;
    footer(out, &summary, measured.split_groups);
    out.print(&explained);
    crate::host::trace("teardown done");
    Ok(with_gate(code, gate_failed))
}

/// The finish of one section of a `--collectives` run: the summary, the footer, the JSON
/// document and the explanation, as [`finish`] gives them, but the GPUs are handed back for the
/// next section (torn down after the last one).
pub(super) fn finish_section(
    nccl: &Nccl,
    mut measured: Measured,
    out: &mut Output,
    health: Option<(f64, Option<&Baseline>)>,
) -> Section {
    let conclusion = conclusion(out);
    let (explained, gate_failed) = conclusion
        .as_ref()
        .map_or((String::new(), false), |c| (c.text.clone(), c.gate_failed));
    let (summary, code) = summarize(nccl, &measured, out);
    footer(out, &summary, std::mem::take(&mut measured.split_groups));
    out.print(&explained);
    // `--health` judges the section by the threshold alone, not by `--explain-gate`.
    let check = health.zip(conclusion).map(|((threshold, baseline), c)| {
        let (run, x) = &c.explained;
        let c = Check::judged(run, x, summary.oob_errors, threshold, baseline);
        match &measured.wrong_place {
            Some(p) => c.wrong_on(&p.text, &p.hosts),
            None => c,
        }
    });
    Section {
        code: if health.is_some() {
            code
        } else {
            with_gate(code, gate_failed)
        },
        gpus: measured.gpus,
        check,
    }
}

/// What a section of a `--collectives` run ends with.
pub(super) struct Section {
    /// Its exit code.
    pub code: u8,
    /// The GPUs, for the next section.
    pub gpus: Vec<Gpu>,
    /// With `--health`, at world rank 0: its check.
    pub check: Option<Check>,
}

/// After the table, at world rank 0 with `--explain`: the explanation (returned, printed after
/// the footer) recorded in the JSON document; `true` in the second place when `--explain-gate`
/// fails.
fn explain(out: &mut Output) -> (String, bool) {
    conclusion(out).map_or((String::new(), false), |c| (c.text, c.gate_failed))
}

/// The explanation of the run (world rank 0 with `--explain`), recorded in the JSON document.
fn conclusion(out: &mut Output) -> Option<Conclusion> {
    let program = out.info().program.clone();
    let c = super::explanation::conclude(out.explained()?, &program);
    out.set_explain_json(c.json.clone());
    Some(c)
}

/// The exit code with `--explain-gate`'s verdict: 7 when it failed (and nothing else did).
fn with_gate(code: u8, gate_failed: bool) -> u8 {
    if code == code::OK && gate_failed {
        code::NUM_RESULTS
    } else {
        code
    }
}

/// The footer and the JSON document; then, after the table, each split group's own result.
fn footer(out: &mut Output, summary: &Summary, groups: Vec<SplitGroup>) {
    let lines = split::lines(&groups);
    out.set_split_groups(groups);
    out.finish(summary);
    out.print(&lines);
    let sure = out.sure_line();
    out.print(&sure);
}

/// The finish phase with `after` between the footer and the teardown: a phase that prints after
/// the table and needs the GPUs (`--locate`). The benchmark's exit code wins over `after`'s;
/// a failure of `after` leaves the GPUs to the error path (their communicators aborted).
pub(super) fn finish_then(
    nccl: &Nccl,
    mut measured: Measured,
    out: &mut Output,
    after: impl FnOnce(&[Gpu]) -> Result<u8>,
) -> Result<u8> {
    let (explained, gate_failed) = explain(out);
    let (summary, code) = summarize(nccl, &measured, out);
    let code = with_gate(code, gate_failed);
    footer(out, &summary, std::mem::take(&mut measured.split_groups));
    out.print(&explained);
    let later = after(&measured.gpus)?;
    crate::gpu::rank::destroy_all(measured.gpus)?;
    crate::host::trace("teardown done");
    Ok(if code != code::OK { code } else { later })
}

/// The run's summary and the exit code it gives.
///
/// The summary's last error stays empty, as nccl-tests 2.19.6 has it on Linux: its own weak
/// `ncclGetLastError` (returning "") is linked into the program ahead of NCCL's, so its last
/// line after a complete run is always empty and its JSON `errors` holds `""` (seen beside
/// NCCL 2.32.3, which leaves a message on every run: docs/results/h100x1/nccl-matrix/).
/// NCCL's own message goes to stderr as a note instead ([`last_error_note`]).
fn summarize(nccl: &Nccl, measured: &Measured, out: &Output) -> (Summary, u8) {
    let oob = measured.oob_errors;
    let avg = out.average_busbw();
    let min_bw_ok = min_bw_verdict(avg, crate::environment::TESTS_MIN_BW.get().as_deref());
    if let Some(note) = out
        .printing()
        .then(|| last_error_note(&nccl.last_error()))
        .flatten()
    {
        crate::eline!("{note}");
    }
    if let Some(place) = measured.wrong_place.as_ref().filter(|_| out.printing()) {
        crate::eline!(
            "{}: wrong data on {} ({oob} measurement(s) out of bounds)",
            out.info().program,
            place.text
        );
    }
    let summary = Summary {
        oob_errors: oob,
        avg_busbw: avg,
        min_bw_ok,
        last_error: String::new(),
        memory_report: measured
            .memory
            .map(|[a, b, c]| table::memory_report(a, b, c)),
    };
    (summary, final_code(oob, min_bw_ok))
}

/// The stderr line for NCCL's last error message after a run that reached its footer, if NCCL
/// left one (NCCL 2.32 does on every run: `rma_socket requires GDRCopy`).
fn last_error_note(message: &str) -> Option<String> {
    let message = message.trim();
    (!message.is_empty()).then(|| {
        format!(
            "nccl-perf: note: NCCL's last error message (not a failure by itself; nccl-tests \
             prints none): {message}"
        )
    })
}

/// The `NCCL_TESTS_MIN_BW` verdict on the average bus bandwidth: `None` when the variable is
/// unset or blank, else whether the average is not below 0.9 × its value (C `atof`). nccl-tests
/// checks `avg < 0.9 × min`, so a NaN average (no rows) passes.
fn min_bw_verdict(avg: f64, min_bw: Option<&str>) -> Option<bool> {
    min_bw
        .filter(|v| !v.trim().is_empty())
        .map(|v| (avg < 0.9 * crate::cnum::atof(v)).not())
}

/// The exit code of a run that reached its footer: 7 with wrong data or a failed
/// `NCCL_TESTS_MIN_BW` check, else 0.
fn final_code(oob_errors: u64, min_bw_ok: Option<bool>) -> u8 {
    if oob_errors > 0 || min_bw_ok == Some(false) {
        code::NUM_RESULTS
    } else {
        code::OK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccls_last_error_is_a_note_on_stderr_not_the_last_line() {
        assert_eq!(last_error_note(""), None);
        assert_eq!(last_error_note("  \n"), None);
        let note = last_error_note(
            "RMA/Socket : rma_socket requires GDRCopy; and GDR Copy is not available\n",
        )
        .unwrap();
        assert!(note.starts_with("nccl-perf: note: NCCL's last error message"));
        assert!(note.ends_with("GDR Copy is not available"), "{note}");
    }

    #[test]
    fn min_bw_fails_below_ninety_percent_with_exit_7() {
        assert_eq!(min_bw_verdict(10.0, None), None);
        assert_eq!(min_bw_verdict(10.0, Some("  ")), None);
        assert_eq!(min_bw_verdict(90.0, Some("100")), Some(true));
        assert_eq!(min_bw_verdict(89.99, Some("100")), Some(false));
        assert_eq!(min_bw_verdict(5.0, Some("100GB/s")), Some(false));
        assert_eq!(min_bw_verdict(0.0, Some("abc")), Some(true));
        assert_eq!(min_bw_verdict(f64::NAN, Some("100")), Some(true));
        assert_eq!(final_code(0, None), 0);
        assert_eq!(final_code(0, Some(true)), 0);
        assert_eq!(final_code(0, Some(false)), 7);
        assert_eq!(final_code(2, Some(true)), 7);
        let s = Summary {
            oob_errors: 0,
            avg_busbw: 89.0,
            min_bw_ok: min_bw_verdict(89.0, Some("100")),
            last_error: String::new(),
            memory_report: None,
        };
        assert!(
            table::footer(&s, "all_reduce_perf").contains("# Avg bus bandwidth    : 89 FAILED\n")
        );
    }
}
