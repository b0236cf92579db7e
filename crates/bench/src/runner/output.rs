//! The printing side of a run (world rank 0, thread 0 only): stdout lines, the JSON document or
//! CSV file, and the running average of bus bandwidth.
//!
//! The `-J` file is created before any GPU work ([`create_target`]), so a path that cannot be
//! written stops the run at once (exit 255) instead of after a long benchmark. A JSON file holds
//! a complete, well-formed document from the moment it is created: the document of a run that
//! stopped early (devices and rows known so far, no footer keys) is rewritten when the devices
//! are known, and replaced by the full document at the end; a run stopped by a lost rank or a
//! signal rewrites it with the rows completed (see `watch.rs`).

use crate::error::{Error, Result};
use crate::options::{OutputFile, OutputFormat};
use crate::report::json::{self, JsonReport};
use crate::report::split::SplitGroup;
use crate::report::{DeviceInfo, RowResult, RunInfo, Summary, csv, format, table};
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
    let (mut file, actual) = json::open_exclusive(path).map_err(|e| cannot_write(path, &e))?;
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
            eprintln!(
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
            eprintln!("{program}: could not write the {label} file: {e}");
        }
        self.close();
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
    explained: Option<super::explain::Rows>,
    /// Each row's size and out-of-place busbw, for `--locate`'s comparison of the job with
    /// its groups.
    sizes: Vec<(u64, f64)>,
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
        }
    }

    /// Whether this process prints (world rank 0).
    pub fn printing(&self) -> bool {
        self.printing
    }

    /// Keeps the rows for `--explain` (world rank 0 only: the others print nothing).
    pub fn explain_rows(&mut self, rows: super::explain::Rows) {
        if self.printing {
            self.explained = Some(rows);
        }
    }

    /// Whether this process explains (world rank 0 with `--explain`).
    pub fn explaining(&self) -> bool {
        self.explained.is_some()
    }

    /// The rows kept for `--explain`, if any.
    pub fn explained(&mut self) -> Option<&mut super::explain::Rows> {
        self.explained.as_mut()
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
                eprintln!(
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
        format::average(self.busbw_sum, self.halves)
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
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::report::HalfResult;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("nccl-perf-out-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn out(p: &Path) -> OutputFile {
        OutputFile {
            path: p.to_path_buf(),
            format: OutputFormat::of(&p.to_string_lossy()).unwrap_or(OutputFormat::Json),
        }
    }

    fn info() -> RunInfo {
        crate::runner::launch::run_info(&Options::default(), "all_reduce_perf")
    }

    fn parsed(path: &Path) -> serde_json::Value {
        let text = std::fs::read_to_string(path).unwrap();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    fn row() -> RowResult {
        let half = HalfResult {
            time_us: 10.0,
            algbw: 1.0,
            busbw: 1.0,
            wrong: Some(0.0),
            per_iter: None,
        };
        RowResult {
            size: 1024,
            count: 256,
            dtype: "float".into(),
            op: "sum".into(),
            root: -1,
            out_of_place: half.clone(),
            in_place: half,
            timestamp: None,
            iterations: 20,
        }
    }

    #[test]
    fn the_job_busbw_for_locate_is_the_row_nearest_below_its_size() {
        let mut o = Output::new(info(), false, None);
        assert_eq!(o.busbw_at(1 << 20), None);
        for (size, busbw) in [(1024, 1.0), (4096, 4.0), (16384, 16.0)] {
            let mut r = row();
            r.size = size;
            r.out_of_place.busbw = busbw;
            o.row(&r);
        }
        assert_eq!(o.busbw_at(8192), Some(4.0));
        assert_eq!(o.busbw_at(1 << 30), Some(16.0));
        assert_eq!(o.busbw_at(16), Some(1.0));
    }

    #[test]
    fn the_json_file_is_well_formed_at_every_stage() {
        let d = dir("stages");
        let p = d.join("r.json");
        let (target, line) =
            create_target(&out(&p), &info(), vec!["all_reduce_perf".into()], false).unwrap();
        assert_eq!(line, format!("# Writing JSON output to {}\n", p.display()));
        // Created before any GPU work: already a complete document, without devices.
        let v = parsed(&p);
        assert_eq!(v["config"]["devices"], serde_json::json!([]));
        assert!(v.get("end_time").is_none());
        let Target::Json(watchdog) = &target else {
            panic!("not JSON")
        };
        let watchdog = watchdog.clone();
        let mut out = Output::new(info(), false, Some(target));
        let dev = DeviceInfo {
            rank: 0,
            group: 0,
            pid: 7,
            hostname: "n1".into(),
            device: 0,
            pci_domain: 0,
            pci_bus: 0x18,
            pci_device: 0,
            name: "NVIDIA H200".into(),
        };
        out.start_json(&[dev], 22803);
        let v = parsed(&p);
        assert_eq!(v["nccl_version"], 22803);
        assert_eq!(v["config"]["devices"][0]["hostname"], "n1");
        out.row(&row());
        // A lost rank or a signal: the watchdog closes the document with the rows so far.
        watchdog.abort();
        let v = parsed(&p);
        assert_eq!(v["results"].as_array().unwrap().len(), 1);
        assert!(v.get("out_of_bounds").is_none());
        // Closed: the printing thread's later calls change nothing.
        out.row(&row());
        out.abort();
        assert_eq!(parsed(&p)["results"].as_array().unwrap().len(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_finished_run_replaces_the_document() {
        let d = dir("finish");
        let p = d.join("r.json");
        // An existing file is never overwritten.
        std::fs::write(&p, "keep").unwrap();
        let (target, line) = create_target(&out(&p), &info(), vec![], false).unwrap();
        assert!(line.ends_with("r.json.0\n"), "{line}");
        let mut out = Output::new(info(), false, Some(target));
        out.row(&row());
        out.finish(&Summary {
            oob_errors: 0,
            avg_busbw: 1.0,
            min_bw_ok: None,
            last_error: String::new(),
            memory_report: None,
        });
        let v = parsed(&d.join("r.json.0"));
        assert_eq!(v["out_of_bounds"]["okay"], "true");
        assert!(v["end_time"].is_string());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "keep");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn csv_gets_its_header_at_creation() {
        let d = dir("csv");
        let p = d.join("r.csv");
        let (target, line) = create_target(&out(&p), &info(), vec![], false).unwrap();
        assert!(matches!(target, Target::Csv(..)));
        assert!(line.starts_with("# Writing CSV output to "));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("collective,size,count,"), "{text}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A CSV record that cannot be written is said on stderr (as the JSON file's failures are)
    /// and ends the records rather than leave a broken one followed by more.
    #[test]
    fn a_csv_write_error_stops_the_records() {
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("skipped: no /dev/full");
            return;
        };
        let mut o = Output::new(
            info(),
            false,
            Some(Target::Csv(full, csv::Columns::default())),
        );
        o.row(&row());
        assert!(o.csv.is_none());
        o.row(&row());
        assert_eq!(o.halves, 4);
    }

    #[test]
    fn unwritable_paths_are_argument_errors() {
        let p = Path::new("/nonexistent/dir/x.json");
        let e = create_target(&out(p), &info(), vec![], false)
            .err()
            .unwrap();
        assert_eq!(e.exit_code(), 255);
        let msg = e.to_string();
        assert!(
            msg.starts_with("-J /nonexistent/dir/x.json: cannot create the output file (")
                && !msg.contains('\n'),
            "{msg}"
        );
        assert_eq!(check_target(p).err().unwrap().exit_code(), 255);
        let d = dir("check");
        assert!(check_target(&d.join("x.json")).is_ok());
        // A file where the folder should be.
        std::fs::write(d.join("f"), "").unwrap();
        let e = check_target(&d.join("f/x.json")).err().unwrap();
        assert!(e.to_string().contains("is not a folder"), "{e}");
        assert!(check_target(Path::new("x.json")).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
