//! The printing side of a run (world rank 0, thread 0 only): the header's parameters
//! ([`run_info`]), stdout lines, the JSON document or CSV file, the running average of bus
//! bandwidth and `--explain`'s rows ([`super::explanation::Rows`], kept as data).
//!
//! The `-J` file is created before any GPU work ([`create_target`]), so a path that cannot be
//! written stops the run at once (exit 255) instead of after a long benchmark. A JSON file holds
//! a complete, well-formed document from the moment it is created: the document of a run that
//! stopped early (devices and rows known so far, no footer keys) is rewritten when the devices
//! are known, and replaced by the full document at the end; a run stopped by a lost rank or a
//! signal rewrites it with the rows completed (see `watchdog.rs`).

use crate::error::{Error, Result};
use crate::options::{Options, OutputFile, OutputFormat};
use crate::report::json::{self, JsonReport};
use crate::report::split::SplitGroup;
use crate::report::{DeviceInfo, RowResult, RunInfo, Step, Summary, csv, numbers, table};
use nccl_perf_explain::observed::Seen;
use std::fs::File;
use std::io::{Seek, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The `-J` output of world rank 0.
pub enum Target {
    /// `-J file.json`: the document, shared with the watchdog.
    Json(JsonFile),
    /// `-J file.csv`: records are appended as rows complete, so a failed run keeps its rows;
    /// with the columns of its header.
    Csv(File, csv::Columns),
}

/// Creates the `-J` file (never overwriting: `file.json.0`, `.1`, … if it exists), writes its
/// first content (the JSON document so far, or the CSV header) and returns it with the
/// `# Writing ... output to <path>` line. A file that cannot be created is an argument error.
pub fn create_target(
    output: &OutputFile,
    info: &RunInfo,
    args: Vec<String>,
    explain: bool,
) -> Result<(Target, String)> {
    let path = &output.path;
    let (mut file, actual) =
        crate::report::output_file::create_exclusive(path).map_err(|e| cannot_write(path, &e))?;
    let writing = output.format.format().writing_line(&actual);
    if output.format == OutputFormat::Csv {
        let columns = csv::Columns {
            explain,
            ..csv::Columns::of(info)
        };
        file.write_all(csv::header(columns).as_bytes())
            .and_then(|_| file.flush())
            .map_err(|e| cannot_write(&actual, &e))?;
        return Ok((Target::Csv(file, columns), writing));
    }
    let env = json::filtered_env(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    );
    let report = JsonReport::new(info, &[], 0, crate::host::local_time(), args, env);
    let doc = JsonFile(Arc::new(Mutex::new(Some((file, report)))));
    doc.rewrite(|r| Some(r.render_aborted()))
        .map_err(|e| cannot_write(&actual, &e))?;
    Ok((Target::Json(doc), writing))
}

/// The `-J` file of one section of a `--collectives` run: the benchmark's name (`program`
/// without `_perf`) before the file's ending, so `results.json` gives `results.all_reduce.json`,
/// `results.all_gather.json`, ..., each the document its own program writes.
pub fn section_file(o: &OutputFile, program: &str) -> OutputFile {
    let name = program.strip_suffix("_perf").unwrap_or(program);
    let file = o.path.file_name().map(|f| f.to_string_lossy().into_owned());
    let file = file.unwrap_or_default();
    let with = match file.rsplit_once('.') {
        Some((stem, ending)) if !stem.is_empty() => format!("{stem}.{name}.{ending}"),
        _ => format!("{file}.{name}"),
    };
    OutputFile {
        path: o.path.with_file_name(with),
        format: o.format,
    }
}

/// `--dry-run`: checks that the `-J` file could be created (its folder exists and is writable)
/// without creating it.
pub fn check_target(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let problem = match std::fs::metadata(dir) {
        Err(e) => Some(e.to_string()),
        Ok(m) if !m.is_dir() => Some(format!("{} is not a folder", dir.display())),
        Ok(_) => {
            use rustix::fs::{Access, access};
            access(dir, Access::WRITE_OK | Access::EXEC_OK)
                .err()
                .map(|e| std::io::Error::from(e).to_string())
        }
    };
    match problem {
        None => Ok(()),
        Some(why) => Err(cannot_write(path, &why)),
    }
}

fn cannot_write(path: &Path, why: &dyn std::fmt::Display) -> Error {
    Error::Usage(format!(
        "-J {}: cannot create the output file ({why}); give a writable path or leave out -J",
        path.display()
    ))
}

/// The parameters shown in the header, from the options (sizes before the memory clamp).
/// Every option is named, field by field: a new option does not compile until it is shown or
/// said not to be (`_`: the header and the JSON `config` show what nccl-tests shows, no more).
pub(super) fn run_info(o: &Options, program: &str) -> RunInfo {
    let Options {
        nthreads,
        ngpus,
        min_bytes,
        max_bytes,
        step_bytes,
        step_factor,
        iters,
        agg_iters,
        warmup_iters,
        run_cycles: _,
        check,
        ops: _,
        types: _,
        all_types: _,
        roots: _,
        blocking,
        stream_null: _,
        timeout_s: _,
        graph,
        report_cputime,
        report_timestamps,
        output_file: _,
        average: _,
        register: _,
        memory_report: _,
        unalign,
        per_iter,
        per_iter_skip,
        parallel_init,
        cta_policy: _,
        device_impl: _,
        device_cta_count: _,
        dry_run: _,
        locate: _,
        explain: _,
        collectives: _,
        health: _,
        stop_when_sure: _,
        hang_timeout_s: _,
    } = o;
    RunInfo {
        program: program.to_string(),
        nthreads: *nthreads,
        ngpus: *ngpus,
        min_bytes: *min_bytes,
        max_bytes: *max_bytes,
        step: if *step_factor > 1 {
            Step::Factor(*step_factor)
        } else {
            Step::Bytes(*step_bytes)
        },
        warmup_iters: *warmup_iters,
        iters: *iters,
        agg_iters: *agg_iters,
        check: *check,
        graph: graph.number(),
        unalign: *unalign,
        blocking: blocking.number(),
        per_iter: *per_iter,
        per_iter_skip: *per_iter_skip,
        parallel_init: *parallel_init,
        report_cputime: *report_cputime,
        report_timestamps: *report_timestamps,
    }
}

/// The `-J` JSON document and its file, shared between the printing thread and the watchdog.
/// Each write replaces the whole file with a complete document; after [`JsonFile::finish`] or
/// [`JsonFile::abort`] it is closed and later calls do nothing.
#[derive(Clone)]
pub struct JsonFile(Arc<Mutex<Option<(File, JsonReport)>>>);

impl JsonFile {
    /// Runs `f` on the report and, when it returns a document, replaces the file's content.
    fn rewrite(&self, f: impl FnOnce(&mut JsonReport) -> Option<String>) -> std::io::Result<()> {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some((file, report)) = guard.as_mut() else {
            return Ok(());
        };
        let Some(doc) = f(report) else {
            return Ok(());
        };
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(doc.as_bytes())?;
        file.flush()
    }

    fn close(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Records the devices and the NCCL version, and rewrites the file.
    fn set_devices(&self, info: &RunInfo, devices: &[DeviceInfo], nccl_version: i32) {
        let r = self.rewrite(|r| {
            r.set_devices(info, devices, nccl_version);
            Some(r.render_aborted())
        });
        if let Err(e) = r {
            crate::eline!(
                "{}: could not write the {} file: {e}",
                info.program,
                OutputFormat::Json.format().label()
            );
        }
    }

    /// Records `--explain`'s object (in memory; the file is rewritten at the end).
    fn set_explain(&self, explain: serde_json::Value) {
        let _ = self.rewrite(|r| {
            r.set_explain(explain);
            None
        });
    }

    /// Adds a row (in memory; the file is rewritten at the end).
    fn add_row(&self, row: &RowResult) {
        let _ = self.rewrite(|r| {
            r.add_row(row);
            None
        });
    }

    /// Records each split group's own result in the document.
    fn set_split_groups(&self, groups: Vec<SplitGroup>) {
        let _ = self.rewrite(|r| {
            r.set_split_groups(groups);
            None
        });
    }

    /// Writes the complete document and closes the file.
    fn finish(&self, s: &Summary, program: &str) {
        let end = crate::host::local_time();
        if let Err(e) = self.rewrite(|r| Some(r.render(s, &end))) {
            let label = OutputFormat::Json.format().label();
            crate::eline!("{program}: could not write the {label} file: {e}");
        }
        self.close();
    }

    /// Records the hang watch's verdict (`nccl_perf_hang`; written by [`JsonFile::abort`]).
    pub fn set_hang(&self, record: serde_json::Value) {
        let _ = self.rewrite(|r| {
            r.set_hang(record);
            None
        });
    }

    /// Writes the document of a run that stopped before its footer (rows so far) and closes
    /// the file.
    pub fn abort(&self) {
        let _ = self.rewrite(|r| Some(r.render_aborted()));
        self.close();
    }
}

/// Where the report goes.
pub struct Output {
    info: RunInfo,
    /// Only world rank 0 prints; the others keep the average for their exit code.
    printing: bool,
    json: Option<JsonFile>,
    /// `-J file.csv`: records are written as rows complete, so a failed run keeps its rows.
    csv: Option<(File, csv::Columns)>,
    busbw_sum: f64,
    halves: u64,
    /// `--explain` at world rank 0: the rows and what NCCL reported for them.
    explained: Option<super::explanation::Rows>,
    /// Each row's size and out-of-place busbw, for `--locate`'s comparison of the job with
    /// its groups.
    sizes: Vec<(u64, f64)>,
    /// What opens this section before its version line (a later `--collectives` section's
    /// `# Writing ... output to` line); empty for the first.
    opening: String,
    /// `--stop-when-sure`: what the halves used and reached.
    sure: super::sure_line::Tally,
}

impl Output {
    /// A report for `info`, printed when `printing` (world rank 0), into the `-J` file made by
    /// [`create_target`] if any.
    pub fn new(info: RunInfo, printing: bool, target: Option<Target>) -> Output {
        let (json, csv) = match target {
            Some(Target::Json(j)) => (Some(j), None),
            Some(Target::Csv(f, c)) => (None, Some((f, c))),
            None => (None, None),
        };
        Output {
            info,
            printing,
            json,
            csv,
            busbw_sum: 0.0,
            halves: 0,
            explained: None,
            sizes: Vec::new(),
            opening: String::new(),
            sure: Default::default(),
        }
    }

    /// Records what `--stop-when-sure` used for row `r`'s halves (nothing without it).
    pub fn sure(&mut self, r: &RowResult, halves: [Option<super::sure_line::Sure>; 2], cap: i64) {
        self.sure.add(r.size, halves, cap);
    }

    /// The line after the footer of a `--stop-when-sure` run (empty without it).
    pub fn sure_line(&self) -> String {
        self.sure.line()
    }

    /// This report with `text` printed first when its section opens ([`Output::open`]).
    pub fn opening(self, text: String) -> Output {
        Output {
            opening: text,
            ..self
        }
    }

    /// Prints what opens the section (see [`Output::opening`]).
    pub fn open(&mut self) {
        let text = std::mem::take(&mut self.opening);
        self.print(&text);
    }

    /// The JSON document, for the watchdog.
    pub fn json(&self) -> Option<JsonFile> {
        self.json.clone()
    }

    /// Whether this process prints (world rank 0).
    pub fn printing(&self) -> bool {
        self.printing
    }

    /// Keeps the rows for `--explain` (world rank 0 only: the others print nothing).
    pub fn explain_rows(&mut self, rows: super::explanation::Rows) {
        if self.printing {
            self.explained = Some(rows);
        }
    }

    /// Whether this process explains (world rank 0 with `--explain`).
    pub fn explaining(&self) -> bool {
        self.explained.is_some()
    }

    /// The rows kept for `--explain`, if any.
    pub fn explained(&self) -> Option<&super::explanation::Rows> {
        self.explained.as_ref()
    }

    /// Records `--explain`'s object in the JSON document (`nccl_perf_explain`).
    pub fn set_explain_json(&mut self, explain: serde_json::Value) {
        if let Some(j) = &self.json {
            j.set_explain(explain);
        }
    }

    /// Records the devices and NCCL version in the JSON document once they are known.
    pub fn start_json(&mut self, devices: &[DeviceInfo], nccl_version: i32) {
        if let Some(j) = &self.json {
            j.set_devices(&self.info, devices, nccl_version);
        }
    }

    /// Prints text as is (world rank 0 only).
    pub fn print(&mut self, text: &str) {
        if !self.printing {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// The run's parameters.
    pub fn info(&self) -> &RunInfo {
        &self.info
    }

    /// Prints a row, records it in the JSON document and in the average.
    pub fn row(&mut self, r: &RowResult) {
        self.row_with(r, &Default::default());
    }

    /// [`Output::row`] with what NCCL reported for each half (`--explain`): kept for the
    /// explanation and written in the CSV file's explain columns.
    pub fn row_explained(&mut self, r: &RowResult, seen: [Option<Seen>; 2]) {
        let cells = [Seen::cells(seen[0].as_ref()), Seen::cells(seen[1].as_ref())];
        self.row_with(r, &cells);
        if let Some(x) = &mut self.explained {
            x.add(r, seen);
        }
    }

    fn row_with(&mut self, r: &RowResult, cells: &[[String; 5]; 2]) {
        let line = table::row(r, &self.info);
        self.print(&line);
        self.busbw_sum += r.out_of_place.busbw + r.in_place.busbw;
        self.halves += 2;
        // One entry per size, the latest row's (bounded by the sweep's sizes, also with -N 0).
        match self.sizes.iter_mut().find(|(s, _)| *s == r.size) {
            Some(e) => e.1 = r.out_of_place.busbw,
            None => self.sizes.push((r.size, r.out_of_place.busbw)),
        }
        if let Some(j) = &self.json {
            j.add_row(r);
        }
        if let Some((f, columns)) = &mut self.csv {
            let record = if columns.explain {
                csv::record_explained(&self.info.program, r, *columns, cells)
            } else {
                csv::record(&self.info.program, r, *columns)
            };
            if let Err(e) = f.write_all(record.as_bytes()).and_then(|_| f.flush()) {
                // Said once, as the JSON file's failures are; the rows after it are not
                // written (the file may end inside a record).
                crate::eline!(
                    "{}: could not write the {} file: {e}",
                    self.info.program,
                    OutputFormat::Csv.format().label()
                );
                self.csv = None;
            }
        }
    }

    /// Average bus bandwidth over every printed half-row (`-nan` with none).
    pub fn average_busbw(&self) -> f64 {
        numbers::average(self.busbw_sum, self.halves)
    }

    /// The out-of-place busbw of the row of the largest size not above `bytes` (else of the
    /// smallest row): the whole job's measurement nearest to `--locate`'s size.
    pub fn busbw_at(&self, bytes: u64) -> Option<f64> {
        let below = self
            .sizes
            .iter()
            .filter(|(s, _)| *s <= bytes)
            .max_by_key(|(s, _)| *s);
        below
            .or_else(|| self.sizes.iter().min_by_key(|(s, _)| *s))
            .map(|(_, b)| *b)
            .filter(|b| b.is_finite() && *b > 0.0)
    }

    /// Keeps each split group's own result for the JSON document (`nccl_perf_split_groups`).
    pub fn set_split_groups(&mut self, groups: Vec<SplitGroup>) {
        if let (Some(j), false) = (&self.json, groups.is_empty()) {
            j.set_split_groups(groups);
        }
    }

    /// Prints the footer and writes the JSON document.
    pub fn finish(&mut self, s: &Summary) {
        let text = table::footer(s, &self.info.program);
        self.print(&text);
        if let Some(j) = self.json.take() {
            j.finish(s, &self.info.program);
        }
    }

    /// Closes the JSON document of a run that failed before its footer.
    pub fn abort(&mut self) {
        if let Some(j) = self.json.take() {
            j.abort();
        }
    }
}

#[cfg(test)]
mod tests;
