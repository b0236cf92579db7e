//! The printing side of a run (world rank 0, thread 0 only): stdout lines, the JSON document or
//! CSV file, and the running average of bus bandwidth.

use crate::report::json::{self, JsonReport};
use crate::report::{DeviceInfo, RowResult, RunInfo, Summary, csv, format, table};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Where the report goes.
pub struct Output {
    info: RunInfo,
    /// Only world rank 0 prints; the others keep the average for their exit code.
    printing: bool,
    json: Option<(File, JsonReport)>,
    /// `-J file.csv`: records are written as rows complete, so a failed run keeps its rows.
    csv: Option<File>,
    busbw_sum: f64,
    halves: u64,
}

impl Output {
    /// A report for `info`, printed when `printing` (world rank 0); the JSON file (already
    /// opened) gets its document at the end.
    pub fn new(info: RunInfo, printing: bool) -> Output {
        Output {
            info,
            printing,
            json: None,
            csv: None,
            busbw_sum: 0.0,
            halves: 0,
        }
    }

    /// Starts the JSON document once the devices are known.
    pub fn start_json(
        &mut self,
        file: File,
        devices: &[DeviceInfo],
        nccl_version: i32,
        args: Vec<String>,
    ) {
        let env = json::filtered_env(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        );
        let report = JsonReport::new(
            &self.info,
            devices,
            nccl_version,
            crate::host::local_time(),
            args,
            env,
        );
        self.json = Some((file, report));
    }

    /// `-J file.csv`: creates the file as `-J file.json` would (exclusively, else `file.csv.N`),
    /// prints `# Writing CSV output to <path>` (or the skipping line) and writes the header.
    pub fn open_csv(&mut self, path: &Path) {
        match json::open_exclusive(path) {
            Ok((mut f, actual)) => {
                self.print(&csv::writing_line(&actual));
                let header = csv::header(csv::Columns::of(&self.info));
                if let Err(e) = f.write_all(header.as_bytes()) {
                    eprintln!("{}: could not write the CSV file: {e}", self.info.program);
                }
                self.csv = Some(f);
            }
            Err(_) => self.print(&csv::skipping_line(path)),
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
        let line = table::row(r, &self.info);
        self.print(&line);
        self.busbw_sum += r.out_of_place.busbw + r.in_place.busbw;
        self.halves += 2;
        if let Some((_, j)) = &mut self.json {
            j.add_row(r);
        }
        if let Some(f) = &mut self.csv {
            let record = csv::record(&self.info.program, r, csv::Columns::of(&self.info));
            let _ = f.write_all(record.as_bytes()).and_then(|_| f.flush());
        }
    }

    /// Average bus bandwidth over every printed half-row (`-nan` with none).
    pub fn average_busbw(&self) -> f64 {
        format::average(self.busbw_sum, self.halves)
    }

    /// Prints the footer and writes the JSON document.
    pub fn finish(&mut self, s: &Summary) {
        let text = table::footer(s, &self.info.program);
        self.print(&text);
        if let Some((mut f, j)) = self.json.take() {
            let doc = j.render(s, &crate::host::local_time());
            if let Err(e) = f.write_all(doc.as_bytes()).and_then(|_| f.flush()) {
                eprintln!("{}: could not write the JSON file: {e}", self.info.program);
            }
        }
    }

    /// Closes the JSON document of a run that failed before its footer.
    pub fn abort(&mut self) {
        if let Some((mut f, j)) = self.json.take() {
            let _ = f.write_all(j.render_aborted().as_bytes());
        }
    }
}
