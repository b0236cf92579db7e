//! A run read by the `nccl-perf` tool (from a log or a JSON file) written back as upstream's
//! JSON document, with what the schema cannot hold of a log in `nccl_perf_log` and the run's
//! health in `nccl_perf_problems`.

use super::{Device, ExtraLine, JsonReport, LogJson};
use crate::health;
use crate::run::Run;

/// Upstream's JSON document (schema 3, one line) for `run`. A run read from a log also
/// gets the `nccl_perf_log` object that keeps what the schema cannot hold, and a broken run
/// the `nccl_perf_problems` array; a benchmark's `--explain` record is kept.
pub fn document(run: &Run) -> String {
    let mut report = JsonReport::new(
        &run.info,
        &run.devices,
        run.nccl_version,
        run.start_time.clone(),
        run.args.clone(),
        run.env.clone(),
    );
    for r in &run.rows {
        report.add_row(r);
    }
    if !run.source.file.is_empty() && run.source.first_line > 0 {
        report.set_log(log_json(run));
    }
    report.set_problems(health::problem_lines(run));
    report.set_notes(health::notes(run));
    if let Some(x) = &run.explain {
        report.set_explain(x.clone());
    }
    match &run.summary {
        Some(s) => report.render(s, &run.end_time),
        None => report.render_aborted(),
    }
}

fn log_json(run: &Run) -> LogJson {
    LogJson {
        source: run.source.file.clone(),
        first_line: run.source.first_line,
        last_line: run.source.last_line,
        version_line: run.text.version_line.clone(),
        devices: run.devices.iter().map(Device::from).collect(),
        partial_devices: run.text.partial_devices.iter().map(Device::from).collect(),
        timestamps: run
            .rows
            .iter()
            .filter_map(|r| r.timestamp.clone())
            .collect(),
        memory_clamp: run.text.memory_clamp,
        memory_report: run.summary.as_ref().and_then(|s| s.memory_report.clone()),
        table_header: run.text.table_header,
        no_header: run.text.no_header,
        error_column: run.text.error_column,
        stopped: run.text.stopped.clone(),
        footer_gap: run.text.footer_gap.clone(),
        broken_lines: run
            .text
            .broken_lines
            .iter()
            .map(|(line, why)| super::schema::BrokenLine {
                line: *line,
                why: why.clone(),
            })
            .collect(),
        extra_lines: run
            .text
            .extra_lines
            .iter()
            .map(|(after_rows, text)| ExtraLine {
                after_rows: *after_rows,
                text: text.clone(),
            })
            .collect(),
    }
}
