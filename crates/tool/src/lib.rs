//! The `nccl-perf` companion tool: turns text logs and `-J` JSON files of nccl-tests and of our
//! benchmarks into JSON, tables (text, CSV, Markdown), plots and regression verdicts, and
//! prints shell completions and man pages of itself and the benchmarks (`docs`). It needs
//! no GPU, and links none of the GPU code: it does not depend on the benchmark core (what it
//! documents of the benchmarks is `nccl-perf-cli`'s and `nccl-perf-facts`').
//!
//! Every input may be a text log or a JSON file (detected by its first character), and may hold
//! several tests. Exit codes: 0 success, 1 `compare` found a regression beyond
//! `--max-regression`, 2 invalid usage or an input that cannot be read, 3 a run is broken
//! ([`nccl_perf_report::health`]), 4 `compare` of runs that measured different things;
//! `health` exits as the benchmarks' `--health` does (0 healthy, 7 slow or wrong data, 4 hung,
//! 10 not judged: [`nccl_perf_explain::health::exit`]).

mod baseline;
mod compare;
mod docs;
mod error;
mod explain;
mod health_check;
pub mod locate_plot;
mod metric;
#[cfg(test)]
mod mutated;
mod plot;

use compare::{CompareOptions, Verdict, compare};
use error::ToolError;
use metric::{Half, Metric};
use plot::{PlotOptions, plot};

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches, Command};

use nccl_perf_report::formats;
use nccl_perf_report::health::{self, Check};
use nccl_perf_report::load::read_file;
use nccl_perf_report::parse::ParseOptions;
use nccl_perf_report::run::Run;

/// Exit code for a regression found by `compare`.
pub const EXIT_REGRESSION: u8 = 1;
/// Exit code for invalid usage or unreadable input.
pub const EXIT_ERROR: u8 = 2;
/// Exit code for a run that is itself broken (wrong data, FAILED footer, error lines, no
/// footer, no rows): `compare`'s BROKEN verdict, and `parse`/`report` of such a run.
pub const EXIT_BROKEN: u8 = 3;
/// Exit code for `compare` of runs that measured different things (MISMATCH).
pub const EXIT_MISMATCH: u8 = 4;

fn command() -> Command {
    let files = |name: &'static str, help: &'static str| {
        Arg::new(name)
            .help(help)
            .num_args(1..)
            .required(true)
            .action(ArgAction::Append)
    };
    let partial = Arg::new("partial")
        .long("partial")
        .action(ArgAction::SetTrue)
        .help("Accepted for compatibility: a test that a log cuts short is always kept with its rows (and reported as broken, exit 3)");
    let metric = Arg::new("metric")
        .long("metric")
        .value_parser(["busbw", "algbw", "time"])
        .default_value("busbw")
        .help("Quantity to use");
    let half = Arg::new("half")
        .long("half")
        .value_parser(["both", "out", "in"])
        .help("Out-of-place, in-place or both halves of each row (default both; plot: the out-of-place half alone for a run of one rank, whose in-place operations are no-ops)");
    Command::new("nccl-perf")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Tables, JSON, plots and regression checks from nccl-tests and nccl-perf results (no GPU needed)")
        .after_help("Inputs are text logs (nccl-tests, rccl-tests or our *_perf output; srun -l / mpirun --tag-output prefixes, and any constant prefix before every line such as indentation, quotes, launcher tags or timestamps, are read) or -J JSON files. Exit codes: 0 ok, 1 regression (compare), 2 usage or unreadable input, 3 a run is broken (wrong data, FAILED footer, error lines, no footer (a cut log), an unreadable line, no rows; parse and report still write their output), 4 the runs are not comparable (compare).")
        .subcommand_required(true)
        .subcommand(
            Command::new("parse")
                .about("Text logs to JSON in the -J schema, one document per test and line")
                .arg(files("LOG", "Text logs ('-' reads standard input)"))
                .arg(Arg::new("output").short('o').long("output").help("Write to this file instead of standard output"))
                .arg(partial.clone()),
        )
        .subcommand(
            Command::new("report")
                .about("Print results as the nccl-tests text table, CSV, Markdown or JSON")
                .arg(files("FILE", "JSON files or text logs"))
                .arg(
                    Arg::new("format")
                        .long("format")
                        .value_parser(formats::names())
                        .default_value(formats::ALL[0].name()),
                )
                .arg(
                    Arg::new("view")
                        .long("view")
                        .value_parser(["straggler", "nodes", "spikes"])
                        .help("Instead of the table, a view of per-iteration times (-I 1 runs' -J JSON): straggler ranks the processes furthest behind, nodes groups them by host, spikes finds iterations far above their row's median and says whether the job or one process spiked"),
                )
                .arg(
                    Arg::new("in-place")
                        .long("in-place")
                        .action(ArgAction::SetTrue)
                        .requires("view")
                        .help("--view: in-place halves instead of out-of-place ones"),
                )
                .arg(
                    Arg::new("threshold")
                        .long("threshold")
                        .value_name("FACTOR")
                        .value_parser(clap::value_parser!(f64))
                        .default_value("1.5")
                        .help("--view spikes: an iteration above this many times its row's median is a spike"),
                )
                .arg(
                    Arg::new("procs-per-node")
                        .long("procs-per-node")
                        .value_name("N")
                        .value_parser(clap::value_parser!(usize))
                        .requires("view")
                        .help("--view nodes: processes per node, in rank order, when the run does not name each process' host"),
                )
                .args(explain::args())
                .arg(partial.clone()),
        )
        .subcommand(
            Command::new("plot")
                .about("Plot bandwidth or time against message size (log2 axis), runs overlaid; or a --locate-json record (pair matrix and per-node bars)")
                .arg(files("RUN", "JSON files or text logs, one colour each, or one locate record"))
                .arg(Arg::new("output").short('o').long("output").required(true).help("Image to write: .svg or .png"))
                .arg(metric.clone())
                .arg(half.clone())
                .arg(Arg::new("size").long("size").default_value("1000x600").help("Image size WIDTHxHEIGHT in pixels"))
                .arg(Arg::new("log-y").long("log-y").action(ArgAction::SetTrue).help("Logarithmic y axis"))
                .arg(Arg::new("title").long("title").help("Chart title"))
                .arg(partial.clone()),
        )
        .subcommand(
            Command::new("compare")
                .about("Compare two results size by size; exit 1 when a size regresses beyond --max-regression")
                .arg(Arg::new("BASE").required(true).help("Baseline: JSON file or text log"))
                .arg(Arg::new("NEW").required(true).help("Result to check: JSON file or text log"))
                .arg(metric)
                .arg(half)
                .arg(
                    Arg::new("max-regression")
                        .long("max-regression")
                        .value_name("PCT")
                        .value_parser(clap::value_parser!(f64))
                        .help("Fail when a size is worse than the base by more than PCT percent"),
                )
                .arg(
                    Arg::new("min-size")
                        .long("min-size")
                        .value_name("BYTES")
                        .default_value("0")
                        .help("Sizes below this (K/M/G suffixes) never fail the check"),
                )
                .arg(
                    Arg::new("allow")
                        .long("allow")
                        .value_name("CHECK")
                        .action(ArgAction::Append)
                        .value_delimiter(',')
                        .value_parser(Check::ALL.map(Check::name))
                        .help("Accept what this check would refuse (repeatable, or comma-separated): wrong (#wrong > 0, Out of bounds FAILED), min-bw (Avg bus bandwidth FAILED), footer (no footer: crash or cut log), errors (NCCL/CUDA error lines), rows (no rows, or base sizes missing from new), ranks (different rank counts), collective (different collective, datatype or op)"),
                )
                .arg(partial.clone()),
        )
        .subcommand(
            health_check::command(files("FILE", "JSON files or text logs: the check's runs, one per collective")).arg(partial.clone()),
        )
        .subcommand(baseline::command(partial))
        .subcommand(docs::completions_command())
        .subcommand(docs::man_command())
}

/// The whole `nccl-perf` program.
pub fn main() -> ExitCode {
    let matches = match command().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_ERROR } else { 0 });
        }
    };
    match run_subcommand(&matches) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            nccl_perf_cli::eline!("nccl-perf: {message}");
            ExitCode::from(match message {
                ToolError::Broken(_) => EXIT_BROKEN,
                _ => EXIT_ERROR,
            })
        }
    }
}

fn run_subcommand(matches: &ArgMatches) -> Result<u8, ToolError> {
    let (name, m) = matches
        .subcommand()
        .ok_or_else(|| ToolError::Usage("a subcommand is required".into()))?;
    match name {
        "completions" => return docs::run_completions(m),
        "man" => return docs::run_man(m),
        _ => {}
    }
    let options = ParseOptions {
        allow_partial: m.get_flag("partial"),
    };
    let strings = |id: &str| -> Vec<String> {
        m.get_many::<String>(id)
            .map(|v| v.cloned().collect())
            .unwrap_or_default()
    };
    let load = |paths: &[String]| -> Result<Vec<Run>, ToolError> {
        let mut runs = Vec::new();
        for p in paths {
            runs.extend(read_file(p, &options)?);
        }
        Ok(runs)
    };
    match name {
        "parse" => {
            check_outputs([m.get_one::<String>("output")])?;
            let runs = load(&strings("LOG"))?;
            let text: String = runs
                .iter()
                .map(|r| nccl_perf_report::json::of_run::document(r) + "\n")
                .collect();
            emit(m.get_one::<String>("output"), &text)?;
            Ok(tell_problems(&runs))
        }
        "report" => {
            let runs = load(&strings("FILE"))?;
            if let Some(view) = m.get_one::<String>("view") {
                use nccl_perf_report::iterations::{View, ViewOptions, render};
                let options = ViewOptions {
                    view: View::parse(view).unwrap_or(View::Straggler),
                    in_place: m.get_flag("in-place"),
                    threshold: m.get_one::<f64>("threshold").copied().unwrap_or(1.5),
                    procs_per_node: m.get_one::<usize>("procs-per-node").copied(),
                };
                let text = render(&runs, &options).map_err(|e| ToolError::NoData(e.to_string()))?;
                emit(None, &text)?;
                return Ok(tell_problems(&runs));
            }
            let name = m.get_one::<String>("format").map_or("", String::as_str);
            let format = formats::by_name(name)
                .ok_or_else(|| ToolError::Usage(format!("--format {name}: not a format")))?;
            let text = if m.get_flag("explain") {
                explain::report(&runs, format, m.get_one::<String>("explain-sku"))?
            } else {
                format.render(&runs)
            };
            emit(None, &text)?;
            Ok(tell_problems(&runs))
        }
        "plot" => {
            let size = m
                .get_one::<String>("size")
                .map_or("1000x600", String::as_str);
            let paths = strings("RUN");
            if let Some(code) = plot_locate(&paths, m, image_size(size)?)? {
                return Ok(code);
            }
            let runs = load(&paths)?;
            let options = PlotOptions {
                output: m.get_one::<String>("output").cloned().unwrap_or_default(),
                metric: Metric::parse(m.get_one::<String>("metric").map_or("", String::as_str)),
                half: m.get_one::<String>("half").map(|h| Half::parse(h)),
                size: image_size(size)?,
                log_y: m.get_flag("log-y"),
                title: m.get_one::<String>("title").cloned(),
            };
            for note in plot(&runs, &options)? {
                nccl_perf_cli::eline!("nccl-perf: note: {note}");
            }
            nccl_perf_cli::eline!("nccl-perf: wrote {}", options.output);
            Ok(0)
        }
        "compare" => {
            let base_name = m.get_one::<String>("BASE").cloned().unwrap_or_default();
            let new_name = m.get_one::<String>("NEW").cloned().unwrap_or_default();
            let base = load(std::slice::from_ref(&base_name))?;
            let new = load(std::slice::from_ref(&new_name))?;
            let min_size = m.get_one::<String>("min-size").map_or("0", String::as_str);
            let options = CompareOptions {
                metric: Metric::parse(m.get_one::<String>("metric").map_or("", String::as_str)),
                half: Half::parse(m.get_one::<String>("half").map_or("", String::as_str)),
                max_regression: m.get_one::<f64>("max-regression").copied(),
                min_size: nccl_perf_cli::cnum::parse_size(min_size)
                    .map_err(|e| ToolError::Usage(format!("--min-size {min_size}: {e}")))?,
                allow: m
                    .get_many::<String>("allow")
                    .map(|v| v.filter_map(|n| Check::from_name(n)).collect())
                    .unwrap_or_default(),
            };
            let outcome = compare(&base, &new, (&base_name, &new_name), &options)?;
            emit(None, &outcome.text)?;
            Ok(match outcome.verdict {
                Verdict::Broken => EXIT_BROKEN,
                Verdict::Mismatch => EXIT_MISMATCH,
                Verdict::Regression => EXIT_REGRESSION,
                Verdict::Ok => 0,
            })
        }
        "health" => {
            check_outputs([m.get_one::<String>("json"), m.get_one::<String>("prom")])?;
            let baseline = m
                .get_one::<String>("baseline")
                .map(|p| {
                    nccl_perf_explain::baseline::format::load(Path::new(p))
                        .map_err(|e| ToolError::Usage(format!("--baseline: {e}")))
                })
                .transpose()?;
            let runs = load(&strings("FILE"))?;
            let threshold = health_check::threshold(m.get_one::<f64>("threshold").copied())?;
            let h = health_check::summary(
                &runs,
                threshold,
                m.get_one::<String>("explain-sku"),
                baseline.as_ref(),
            )?;
            if let Some(p) = m.get_one::<String>("json") {
                emit(Some(p), &format!("{}\n", h.json()))?;
            }
            if let Some(p) = m.get_one::<String>("prom") {
                emit(Some(p), &h.prometheus())?;
            }
            emit(None, &h.text())?;
            Ok(health_check::exit_code(
                &h,
                m.get_flag("allow-unjudged"),
                tell_problems(&runs),
            ))
        }
        "baseline" => {
            let out = m.get_one::<String>("output").filter(|o| o.as_str() != "-");
            check_outputs([out])?;
            let inputs = strings("FILE");
            let b = baseline::make(&inputs, &load)?;
            let text = nccl_perf_explain::baseline::format::write(&b, &inputs);
            emit(out, &text)?;
            if let Some(o) = out {
                nccl_perf_cli::eline!(
                    "nccl-perf: baseline: {} rows from {} input(s) written to {o}",
                    b.entries.len(),
                    inputs.len()
                );
            }
            Ok(0)
        }
        other => Err(ToolError::Usage(format!("unknown subcommand {other}"))),
    }
}

/// `plot` of a `--locate-json` record (the pair matrix as a heatmap and the bars per node or
/// rail): `None` when no input is one, so the runs are plotted as usual.
fn plot_locate(
    paths: &[String],
    m: &ArgMatches,
    size: (u32, u32),
) -> Result<Option<u8>, ToolError> {
    let mut locate = None;
    for p in paths.iter().filter(|p| p.as_str() != "-") {
        // Only the start of a file says what it is; a log is not read whole here.
        let head = std::fs::File::open(p)
            .and_then(|f| {
                let mut head = String::new();
                std::io::Read::read_to_string(&mut std::io::Read::take(f, 4096), &mut head)
                    .map(|_| head)
            })
            .unwrap_or_default();
        if nccl_perf_locate::json::is_locate(&head) {
            locate = Some(p.clone());
        }
    }
    let Some(path) = locate else {
        return Ok(None);
    };
    if paths.len() > 1 {
        return Err(ToolError::Usage(format!(
            "{path} is a locate record: plot it on its own (one image per record)"
        )));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ToolError::Read(nccl_perf_report::run::ReadError::whole(
            &path,
            format!("cannot read: {e}"),
        ))
    })?;
    let doc = nccl_perf_locate::json::read(&text).map_err(|source| ToolError::LocateRecord {
        path: path.clone(),
        source,
    })?;
    let output = m.get_one::<String>("output").cloned().unwrap_or_default();
    let notes = crate::locate_plot::plot(&doc, &output, size)?;
    for note in notes {
        nccl_perf_cli::eline!("nccl-perf: note: {note}");
    }
    nccl_perf_cli::eline!("nccl-perf: wrote {output}");
    Ok(Some(0))
}

/// Prints every problem of `runs` on stderr (one line each); [`EXIT_BROKEN`] when there is one.
fn tell_problems(runs: &[Run]) -> u8 {
    for note in runs.iter().flat_map(health::describe_notes) {
        nccl_perf_cli::eline!("nccl-perf: note: {note}");
    }
    let lines: Vec<String> = runs.iter().flat_map(health::describe).collect();
    for l in &lines {
        nccl_perf_cli::eline!("nccl-perf: {l}");
    }
    if lines.is_empty() { 0 } else { EXIT_BROKEN }
}

/// `WIDTHxHEIGHT` in pixels, each from 200 to 10000.
fn image_size(s: &str) -> Result<(u32, u32), ToolError> {
    let bad = || {
        ToolError::Usage(format!(
            "--size {s}: expected WIDTHxHEIGHT, e.g. 1000x600 (200 to 10000 each)"
        ))
    };
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (u32, u32) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if !(200..=10_000).contains(&w) || !(200..=10_000).contains(&h) {
        return Err(bad());
    }
    Ok((w, h))
}

/// Writes `text` to the file (replaced under `output_file`'s rules: never through a link or
/// into a pipe), or to standard output (a closed pipe is not an error).
fn emit(path: Option<&String>, text: &str) -> Result<(), ToolError> {
    match path {
        Some(p) => nccl_perf_report::output_file::replace(Path::new(p), text.as_bytes()).map_err(
            |source| ToolError::Write {
                path: p.clone(),
                source,
            },
        ),
        None => write_stdout(text.as_bytes()),
    }
}

/// Checks every output file of a command before any work ([`output_file::check_target`]):
/// a link, pipe or folder at one of them is said at once, and nothing is written.
///
/// [`output_file::check_target`]: nccl_perf_report::output_file::check_target
fn check_outputs<'a>(paths: impl IntoIterator<Item = Option<&'a String>>) -> Result<(), ToolError> {
    for p in paths.into_iter().flatten() {
        nccl_perf_report::output_file::check_target(Path::new(p)).map_err(|source| {
            ToolError::Write {
                path: p.clone(),
                source,
            }
        })?;
    }
    Ok(())
}

/// Writes bytes to standard output (a closed pipe is not an error).
pub(crate) fn write_stdout(bytes: &[u8]) -> Result<(), ToolError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(source) if source.kind() != std::io::ErrorKind::BrokenPipe => Err(ToolError::Write {
            path: "standard output".into(),
            source,
        }),
        _ => Ok(()),
    }
}
