//! Text logs of nccl-tests and of our binaries back into [`Run`]s.
//!
//! A log may hold several tests (split on `Collective test starting`, or on the parameter line in
//! logs older than v2.16.7), lines of several processes (`srun -l` and `mpirun --tag-output`
//! prefixes: each process is read on its own), NCCL's `NCCL INFO` lines, launcher chatter and the
//! layouts of older nccl-tests versions (before v2.19.6: other number formats, column widths and
//! header spacing; no version line before v2.17.4, no `unalign:` field before v2.18.2). Lines
//! outside a test are ignored; inside one, a line that is part of no known section is kept as an
//! extra line (skip notes, failure messages) so that the test prints back unchanged.
//!
//! A constant text before every line (a document's indentation or quote marks, a launcher's
//! tag, a timestamp) is found from the lines only nccl-tests prints and taken off first
//! (`prefix::Prefixes`).
//!
//! A test ends with its footer, or with nccl-tests' failure lines (then it has rows but no
//! footer). A test that simply stops (end of file, or another test starting) is a truncated
//! log: it is kept with the rows read so far and [`TextDetails::stopped`] says where it stopped
//! (`health` reports it). A line inside a test that cannot be read (a row broken by interleaved
//! output) is kept in [`TextDetails::broken_lines`] with the reason; the other rows are read.
//!
//! Excerpts start a test wherever they start: at the device lines, the table header, a row
//! (the row's fields give the layout: `lines::columns_of_row`) or the footer. A log with no
//! test at all but a crash is one failed run (`crash`).

mod crash;
mod lines;
mod prefix;

/// A hang verdict as the reports keep it (the `-J` record's `line`): from `hang:` on, control
/// characters left out, at most 2,000 characters.
pub fn hang_line(text: &str) -> String {
    lines::hang_verdict(text).unwrap_or_else(|| {
        text.chars()
            .filter(|c| !c.is_control())
            .take(2000)
            .collect()
    })
}
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pasted;

use std::borrow::Cow;
use std::collections::HashMap;

use lines::{Columns, LineError};
use prefix::Stream;

use super::run::{ReadError, Run, Source, TextDetails, equivalent_args};
use super::{RunInfo, Summary};

/// True for nccl-tests' failure lines (`Test NCCL failure`, `Test CUDA failure`, the
/// ` .. host pid N: Test failure` trace) and crash lines (a signal, NCCL's fatal warnings).
pub fn is_failure_line(line: &str) -> bool {
    lines::is_failure(line)
}

/// How much a failure line says (0 most): nccl-tests' failure with NCCL's or CUDA's error
/// string, NCCL's fatal warning, a signal, then the trace that only says where.
pub fn failure_weight(line: &str) -> u8 {
    lines::failure_weight(line)
}

/// How lenient [`parse_log`] is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Accepted for compatibility: a test that stops without footer or failure lines (a log
    /// cut short) is always kept without summary, and `health` reports it.
    pub allow_partial: bool,
}

/// Device lines kept before an excerpt's table at most (a bound, not a limit a log reaches).
const MAX_PARTIAL: usize = 1024;

/// Who wrote a line: the constant prefix (without timestamps) and the launcher's stream.
type Writer = (String, Stream);

/// Reads every test of a log. `file` names it in the runs' [`Source`] and in errors.
pub fn parse_log(text: &str, file: &str, _options: &ParseOptions) -> Result<Vec<Run>, ReadError> {
    let mut order: Vec<Writer> = Vec::new();
    let mut streams: HashMap<Writer, Vec<(usize, Cow<str>)>> = HashMap::new();
    let mut count = 0;
    let text = text.strip_suffix('\n').unwrap_or(text);
    let raw_lines = || {
        text.split('\n')
            .map(|raw| raw.strip_suffix('\r').unwrap_or(raw))
    };
    let prefixes = prefix::Prefixes::learn(raw_lines());
    for (i, raw) in raw_lines().enumerate() {
        let (writer, rest) = prefixes.strip(raw);
        let (stream, line) = prefix::split_prefix(rest);
        let line = prefix::without_inner_tags(&writer, line);
        let stream = (writer, stream);
        if !streams.contains_key(&stream) {
            order.push(stream.clone());
        }
        streams.entry(stream).or_default().push((i + 1, line));
        count = i + 1;
    }
    let stripped = prefix::hashes_stripped(streams.values().flatten().map(|(_, l)| l.as_ref()));
    let mut runs = Vec::new();
    for stream in order {
        let mut parser = Parser::new(file);
        parser.hashes_stripped = stripped;
        for (n, line) in streams.get(&stream).map(Vec::as_slice).unwrap_or(&[]) {
            if stripped {
                parser.line(*n, &prefix::restore_hash(line))?;
            } else {
                parser.line(*n, &prefix::restore_anchor(line))?;
            }
        }
        runs.extend(parser.finish()?);
    }
    if runs.is_empty() {
        // No test at all, but the run's crash: a failed run, not unreadable input.
        let mut all: Vec<(usize, &str)> = streams
            .values()
            .flatten()
            .map(|(n, l)| (*n, l.as_ref()))
            .collect();
        all.sort_by_key(|(n, _)| *n);
        if let Some(run) = crash::failed_run(file, &all) {
            return Ok(vec![run]);
        }
        return Err(ReadError::whole(
            file,
            format!(
                "no nccl-tests output found in {count} lines (no header, table, row or footer \
                 of nccl-tests, and no failure or crash line)"
            ),
        ));
    }
    runs.sort_by_key(|r| r.source.first_line);
    Ok(runs)
}

/// Where a test is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// After `Collective test starting`, before `# Using devices`.
    Header,
    /// Device lines, up to the table header.
    Devices,
    /// Rows.
    Table,
    /// After `Out of bounds values`, waiting for `Avg bus bandwidth`.
    Footer,
    /// After `Avg bus bandwidth`: the closing lines.
    Closing,
    /// After the empty line (or `# error:` line) that ends a test.
    Done,
    /// After a failure line: more failure lines, then the test is over.
    Failed,
}

/// A test being read.
struct Test {
    run: Run,
    stage: Stage,
    columns: Columns,
    has_parameters: bool,
    /// The NCCL debug line just before, when the previous line was one: (line number, text).
    last_debug: Option<(usize, String)>,
}

/// What a line did to the current test.
enum Step {
    /// The line belongs to the test.
    Taken,
    /// The test was over before this line; read the line again outside any test.
    Over,
}

struct Parser<'a> {
    file: &'a str,
    version: Option<(usize, String)>,
    /// The program of the last command line seen outside a test (`mpirun ... all_reduce_perf
    /// -b 8`), for tests that do not name themselves (before v2.16.7).
    command: Option<String>,
    current: Option<Test>,
    last_line: usize,
    done: Vec<Run>,
    /// Device lines outside a test (an excerpt that starts at a later device line), for the next
    /// test that starts at its table (at most [`MAX_PARTIAL`], the last ones).
    partial_devices: Vec<crate::DeviceInfo>,
    /// The log's comment lines lost their `#` ([`prefix::hashes_stripped`]): an empty line in a
    /// test's header, device or closing lines was a `#` line.
    hashes_stripped: bool,
}

impl<'a> Parser<'a> {
    fn new(file: &'a str) -> Parser<'a> {
        Parser {
            file,
            version: None,
            command: None,
            current: None,
            last_line: 0,
            done: Vec::new(),
            hashes_stripped: false,
            partial_devices: Vec::new(),
        }
    }

    fn line(&mut self, n: usize, text: &str) -> Result<(), ReadError> {
        self.last_line = n;
        let in_header =
            |t: &Test| matches!(t.stage, Stage::Header | Stage::Devices | Stage::Closing);
        let text = if self.hashes_stripped
            && text.is_empty()
            && self.current.as_ref().is_some_and(in_header)
        {
            "#"
        } else {
            text
        };
        if let Some(mut test) = self.current.take() {
            match self.in_test(&mut test, text) {
                Ok(Step::Taken) => {
                    test.run.source.last_line = n;
                    self.current = Some(test);
                    return Ok(());
                }
                Ok(Step::Over) => self.close(test, n),
                Err(message) => {
                    Self::broken(&mut test, n, text, &message);
                    test.run.source.last_line = n;
                    self.current = Some(test);
                    return Ok(());
                }
            }
        }
        self.outside(n, text)
    }

    /// Keeps a line of `test` that cannot be read, with the reason, and goes on.
    fn broken(test: &mut Test, n: usize, text: &str, message: &LineError) {
        let at = test.run.rows.len();
        test.run.text.extra_lines.push((at, text.to_string()));
        test.run.text.broken_lines.push((n, message.to_string()));
    }

    fn finish(mut self) -> Result<Vec<Run>, ReadError> {
        if let Some(test) = self.current.take() {
            let end = self.last_line;
            self.close(test, end + 1);
        }
        Ok(self.done)
    }

    /// Ends `test` because line `next` (or the end of the file) does not belong to it. A test
    /// cut before its footer is kept with the rows read so far, and says where it stopped.
    fn close(&mut self, mut test: Test, next: usize) {
        let complete = matches!(test.stage, Stage::Closing | Stage::Done | Stage::Failed);
        if !complete {
            let last = test.run.source.last_line;
            let before = match test.stage {
                Stage::Header | Stage::Devices => {
                    "before the table header, during NCCL's set-up of the communicators"
                }
                Stage::Table if test.run.rows.is_empty() => {
                    "before the first row, during the first measurement"
                }
                _ => "before the footer",
            };
            test.run.text.stopped = Some(if next > self.last_line {
                format!("the log ends at line {last}, {before}")
            } else {
                format!(
                    "another test starts at line {next}, before the footer (or several \
                     processes write to the log without srun -l / mpirun --tag-output)"
                )
            });
        }
        let memory = test
            .run
            .summary
            .as_ref()
            .is_some_and(|s| s.memory_report.is_some());
        test.run.args = equivalent_args(&test.run.info, memory);
        self.done.push(test.run);
    }

    fn outside(&mut self, n: usize, text: &str) -> Result<(), ReadError> {
        if text.starts_with("# nccl-tests version ") {
            self.version = Some((n, text.to_string()));
        } else if let Some(program) = text.strip_prefix("# Collective test starting: ") {
            self.start(n, program.trim());
        } else if text.starts_with("# nThread ") {
            // Logs older than v2.16.7 start a test with its parameter line.
            let program = self.command.clone().unwrap_or_default();
            self.start(n, &program);
            if let Some(mut test) = self.current.take() {
                if let Err(m) = self.in_test(&mut test, text) {
                    Self::broken(&mut test, n, text, &m);
                }
                self.current = Some(test);
            }
        } else if text == "# Using devices" {
            // An excerpt that starts at the device lines (all of them follow; an excerpt that
            // starts at a later device line shows only some, and is read from its table).
            let program = self.command.clone().unwrap_or_default();
            self.start(n, &program);
            if let Some(mut test) = self.current.take() {
                test.run.text.no_header = true;
                test.has_parameters = true;
                test.stage = Stage::Devices;
                self.current = Some(test);
            }
        } else if text.starts_with('#') && text[1..].trim_start().starts_with("Rank ") {
            // A device line before an excerpt's table: some of the GPUs, kept aside.
            if let Ok(d) = lines::device(text) {
                if self.partial_devices.len() == MAX_PARTIAL {
                    self.partial_devices.remove(0);
                }
                self.partial_devices.push(d);
            }
        } else if lines::is_names_line(text) {
            // A table shown without the lines above it (an excerpt in a document or a ticket).
            self.start_excerpt(n, text, Stage::Devices, None);
        } else if let Some(columns) = lines::columns_of_row(text) {
            // Rows pasted without any header line: their shape gives the columns; the footer,
            // when it follows, judges them as any other.
            self.start_excerpt(n, text, Stage::Table, Some(columns));
        } else if lines::is_footer(text) {
            // A footer whose rows (and header) the log leaves out.
            self.start_excerpt(n, text, Stage::Table, None);
        } else if let Some(program) = lines::command_program(text) {
            self.command = Some(program);
        }
        Ok(())
    }

    /// Starts a test at line `n` that the log shows without its header lines (an excerpt of
    /// the table, of its rows or of its footer), in `stage`, and reads `text` in it.
    fn start_excerpt(&mut self, n: usize, text: &str, stage: Stage, columns: Option<Columns>) {
        let program = self.command.clone().unwrap_or_default();
        let partial = std::mem::take(&mut self.partial_devices);
        self.start(n, &program);
        let Some(test) = self.current.as_mut() else {
            return;
        };
        // Ranks 0 to N-1 each once: every device line is there (only the lines above
        // them were lost), so they are the run's devices.
        let mut ranks: Vec<i64> = partial.iter().map(|d| d.rank).collect();
        ranks.sort_unstable();
        if !ranks.is_empty() && ranks.iter().zip(0..).all(|(&r, i)| r == i) {
            test.run.devices = partial;
        } else {
            test.run.text.partial_devices = partial;
        }
        test.run.text.no_header = true;
        test.has_parameters = true;
        test.stage = stage;
        // Rows or a footer without the table header: `report` prints them under one.
        test.run.text.table_header |= stage == Stage::Table;
        if let Some(columns) = columns {
            use_columns(test, columns);
        }
        if let Err(m) = self.in_test_current(text)
            && let Some(test) = self.current.as_mut()
        {
            Self::broken(test, n, text, &m);
        }
    }

    fn in_test_current(&mut self, text: &str) -> Result<Step, LineError> {
        let Some(mut test) = self.current.take() else {
            return Ok(Step::Over);
        };
        let step = self.in_test(&mut test, text);
        self.current = Some(test);
        step
    }

    fn start(&mut self, n: usize, program: &str) {
        // Device lines before another kind of start belong to no excerpt.
        self.partial_devices.clear();
        let version = self.version.take();
        let first_line = version.as_ref().map_or(n, |(v, _)| *v);
        let nccl_version = version
            .as_ref()
            .and_then(|(_, l)| l.split_once("nccl-library="))
            .and_then(|(_, rest)| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .unwrap_or(0);
        let info = RunInfo {
            program: program.to_string(),
            ..RunInfo::default()
        };
        self.current = Some(Test {
            run: Run::from_log(
                info,
                nccl_version,
                Source {
                    file: self.file.to_string(),
                    first_line,
                    last_line: n,
                },
                TextDetails {
                    version_line: version.map(|(_, l)| l),
                    table_header: false,
                    ..TextDetails::default()
                },
            ),
            stage: Stage::Header,
            columns: Columns::default(),
            has_parameters: false,
            last_debug: None,
        });
    }

    /// One line inside `test`; `Err` is a message for line `n`.
    fn in_test(&self, test: &mut Test, text: &str) -> Result<Step, LineError> {
        let run = &mut test.run;
        // Rank 0's verdict comes first and says most; a pointer line only where it is missing.
        if let Some(h) = lines::hang_verdict(text)
            && run
                .text
                .hang
                .as_ref()
                .is_none_or(|old| !old.starts_with("hang: "))
        {
            run.text.hang = Some(h);
        }
        if let Some(w) = lines::wrong_place(text) {
            run.text.wrong_on = Some(w);
        }
        let extra = |run: &mut Run| {
            let at = run.rows.len();
            run.text.extra_lines.push((at, text.to_string()));
        };
        let after_debug = test.last_debug.take();
        if lines::is_nccl_debug(text) {
            // A header without `nccl-library=` (nccl-tests before 2.13): NCCL's own version
            // line says which library ran.
            if test.run.nccl_version == 0
                && let Some(code) = lines::nccl_version_code(text)
            {
                test.run.nccl_version = code;
            }
            test.last_debug = Some((self.last_line, text.to_string()));
            return Ok(Step::Taken);
        }
        let starts_test = text.starts_with("# nccl-tests version ")
            || text.starts_with("# Collective test starting: ")
            || (text.starts_with("# nThread ") && test.has_parameters);
        if starts_test {
            return Ok(Step::Over);
        }
        if test.stage == Stage::Done {
            return Ok(Step::Over);
        }
        if test.stage == Stage::Failed {
            // nccl-tests follows its GPU-count failure with this hint.
            if lines::is_failure(text)
                || text.starts_with("Please check the number of processes and GPUs")
            {
                extra(run);
                return Ok(Step::Taken);
            }
            return Ok(Step::Over);
        }
        if lines::is_failure(text) {
            extra(run);
            test.stage = Stage::Failed;
            return Ok(Step::Taken);
        }
        match test.stage {
            // An excerpt may leave out `# Using devices` (and a document the parameter line):
            // the table header ends the header.
            Stage::Header if lines::is_names_line(text) => {
                test.has_parameters = true;
                test.stage = Stage::Devices;
                self.in_test(test, text)
            }
            // An excerpt that leaves out the table header (rows follow the device lines), or
            // the whole table (the footer follows them).
            Stage::Header | Stage::Devices if lines::is_footer(text) => {
                test.stage = Stage::Table;
                self.in_test(test, text)
            }
            Stage::Devices if let Some(columns) = lines::columns_of_row(text) => {
                use_columns(test, columns);
                test.stage = Stage::Table;
                self.in_test(test, text)
            }
            Stage::Header => header_line(test, text),
            Stage::Devices => {
                if text
                    .trim_start_matches('#')
                    .trim_start()
                    .starts_with("Rank ")
                {
                    run.devices.push(lines::device(text)?);
                } else if let Some(rest) = text.strip_prefix("# Reducing maxBytes to ") {
                    let value = rest.split_whitespace().next().unwrap_or("");
                    run.text.memory_clamp =
                        Some(value.parse().map_err(|_| LineError::NotAnInteger {
                            what: "maxBytes".into(),
                            token: value.to_string(),
                        })?);
                } else if lines::is_names_line(text) {
                    use_columns(test, Columns::from_names(text));
                    test.run.text.table_header = true;
                    test.stage = Stage::Table;
                } else if !(text == "#" || text.starts_with('#') && text.contains("out-of-place")) {
                    extra(run);
                }
                Ok(Step::Taken)
            }
            Stage::Table => {
                let first = text.split_whitespace().next().unwrap_or("");
                if text.starts_with("# Out of bounds values") {
                    run.summary = Some(Summary {
                        oob_errors: lines::out_of_bounds(text)?,
                        avg_busbw: f64::NAN,
                        min_bw_ok: None,
                        last_error: String::new(),
                        memory_report: None,
                    });
                    test.stage = Stage::Footer;
                } else if text.starts_with("# Avg bus bandwidth") {
                    // A footer whose `Out of bounds values` line the log leaves out.
                    let (avg, ok) = lines::average(text)?;
                    run.summary = Some(Summary {
                        oob_errors: 0,
                        avg_busbw: avg,
                        min_bw_ok: ok,
                        last_error: String::new(),
                        memory_report: None,
                    });
                    run.text.footer_gap = Some("no '# Out of bounds values' line".into());
                    test.stage = Stage::Closing;
                } else if first.starts_with(|c: char| c.is_ascii_digit()) {
                    let row = lines::row(text, &test.columns, run.info.iters).map_err(|e| {
                        match &after_debug {
                            // The NCCL line starts with this row's first fields.
                            Some((m, debug)) if starts_like_a_row(debug) => {
                                LineError::Malformed(format!(
                                    "a row broken by interleaved output: line {m} ('{}') cut into \
                                 it ({e})",
                                    shorten_to(debug, 120)
                                ))
                            }
                            _ => e,
                        }
                    })?;
                    run.rows.push(row);
                } else if !(first.is_empty() || first == "#" && text.contains("(B)")) {
                    extra(run);
                }
                Ok(Step::Taken)
            }
            Stage::Footer => {
                if text.starts_with("# Avg bus bandwidth") {
                    let (avg, ok) = lines::average(text)?;
                    if let Some(s) = run.summary.as_mut() {
                        s.avg_busbw = avg;
                        s.min_bw_ok = ok;
                    }
                    test.stage = Stage::Closing;
                    Ok(Step::Taken)
                } else if text.trim().is_empty() {
                    Ok(Step::Taken)
                } else {
                    Err(LineError::Malformed(format!(
                        "expected '# Avg bus bandwidth' after '# Out of bounds values', found \
                         '{}'",
                        shorten(text)
                    )))
                }
            }
            Stage::Closing => Ok(closing_line(test, text)),
            Stage::Done | Stage::Failed => Ok(Step::Over),
        }
    }
}

/// Reads `test`'s rows with `columns` (from its table header, or from a row's shape).
fn use_columns(test: &mut Test, columns: Columns) {
    test.columns = columns;
    let run = &mut test.run;
    run.text.error_column = columns.error;
    run.info.report_cputime = columns.cputime;
    run.info.per_iter = columns.per_iter;
    run.info.report_timestamps = columns.timestamps;
}

/// A line between `Collective test starting` and `# Using devices`.
fn header_line(test: &mut Test, text: &str) -> Result<Step, LineError> {
    let run = &mut test.run;
    if text.starts_with("# nThread ") {
        let program = std::mem::take(&mut run.info.program);
        run.info = lines::parameters(text)?;
        run.info.program = program;
        test.has_parameters = true;
    } else if let Some(what) = text.strip_prefix("# Blocking Enabled: ") {
        // Older versions had one blocking mode (`-z 1`), worded "wait for completion and barrier after
        // each collective".
        run.info.blocking = if what.starts_with("wait and barrier after each inner")
            || what.starts_with("wait for completion and barrier after each collective")
        {
            1
        } else if what.starts_with("wait after each inner") {
            2
        } else {
            3
        };
    } else if let Some(rest) = text.strip_prefix("# Per-Iteration Report:") {
        run.info.per_iter = true;
        if let Some((_, k)) = rest.split_once("summary skips first ") {
            let k = k.split_whitespace().next().unwrap_or("");
            run.info.per_iter_skip = k.parse().map_err(|_| LineError::NotAnInteger {
                what: "skipped iterations".into(),
                token: k.to_string(),
            })?;
        }
    } else if text.starts_with("# Parallel Init Enabled") {
        run.info.parallel_init = true;
    } else if text == "# Using devices" {
        if !test.has_parameters {
            return Err(LineError::Malformed(
                "'# Using devices' before the '# nThread ...' parameter line".into(),
            ));
        }
        test.stage = Stage::Devices;
    } else if text != "#" && !(text.starts_with('#') && text.contains("out-of-place")) {
        let at = run.rows.len();
        run.text.extra_lines.push((at, text.to_string()));
    }
    Ok(Step::Taken)
}

/// The lines after `Avg bus bandwidth`: `#`, `Collective test concluded`, `GPU memory usage`,
/// `#`, then an empty line or `# error: ...`, the test's last line.
fn closing_line(test: &mut Test, text: &str) -> Step {
    let Some(summary) = test.run.summary.as_mut() else {
        return Step::Over;
    };
    if text == "#" || text.starts_with("# Collective test concluded") {
        return Step::Taken;
    }
    if text.starts_with("# GPU memory usage") {
        summary.memory_report = Some(lines::after_colon(text).to_string());
    } else if let Some(e) = text.strip_prefix("# error: ") {
        summary.last_error = e.to_string();
        test.stage = Stage::Done;
    } else if text.is_empty() {
        test.stage = Stage::Done;
    } else {
        return Step::Over;
    }
    Step::Taken
}

/// True for a line whose first two fields are integers (a row's size and count).
fn starts_like_a_row(text: &str) -> bool {
    let mut t = text.split_whitespace();
    let integer = |t: Option<&str>| t.is_some_and(|t| t.bytes().all(|b| b.is_ascii_digit()));
    integer(t.next()) && integer(t.next())
}

/// The first 60 characters of a line, for messages.
fn shorten(text: &str) -> String {
    shorten_to(text, 60)
}

/// The first `n` characters of a line, for messages.
fn shorten_to(text: &str, n: usize) -> String {
    let mut s: String = text.chars().take(n).collect();
    if s.len() < text.len() {
        s += "...";
    }
    s
}
