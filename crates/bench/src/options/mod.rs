//! Validated benchmark options: raw command-line strings turned into numbers the way nccl-tests
//! reads them (strtol-style integers, K/M/G sizes), with strict errors where leniency would run the
//! wrong benchmark and warnings where upstream silently tolerated junk.

mod collectives;
mod explain;
pub mod fingerprint;
mod health;
mod locate;
mod modes;

pub use explain::ExplainOptions;
pub use health::HealthOptions;
pub use locate::{DEFAULT_SIZE_CAP, LocateOptions, window_iters};
pub use modes::{Average, Blocking, Graph};

use crate::cli::{DefaultValue, RawArgs, spec};
use crate::cnum::{parse_size, strtol};
use crate::report::formats::{self, Format};
use crate::types::{DataType, RedOp, Register};
use std::path::PathBuf;

/// Which roots a rooted collective runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    /// One root.
    One(i64),
    /// Every root in turn (`-r -1` or `-r all`).
    All,
}

/// Everything a run needs to know from the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// `-t`: threads per process.
    pub nthreads: i64,
    /// `-g`: GPUs per thread.
    pub ngpus: i64,
    /// `-b`: first size in bytes.
    pub min_bytes: u64,
    /// `-e`: last size in bytes (inclusive).
    pub max_bytes: u64,
    /// `-i`: additive step (used when `step_factor` ≤ 1).
    pub step_bytes: u64,
    /// `-f`: multiplicative step if > 1.
    pub step_factor: u64,
    /// `-n`: timed iterations.
    pub iters: i64,
    /// `-m`: operations aggregated per timed iteration.
    pub agg_iters: i64,
    /// `-w`: warm-up operations per warm-up size.
    pub warmup_iters: i64,
    /// `-N`: sweep repetitions; `None` = until interrupted.
    pub run_cycles: Option<u64>,
    /// `-c`: validation iterations per measurement (0 = off).
    pub check: i64,
    /// `-o`: ops to run, in order.
    pub ops: Vec<RedOp>,
    /// `-d`: datatypes to run, in order.
    pub types: Vec<DataType>,
    /// `-d all` was given (fp8 is dropped on GPUs below compute capability 9.0).
    pub all_types: bool,
    /// `-r`.
    pub roots: Roots,
    /// `-z`: when the timed loop waits and meets the other ranks.
    pub blocking: Blocking,
    /// `-y 1`: use the legacy NULL stream.
    pub stream_null: bool,
    /// `-T`: wait timeout in seconds (0 = off).
    pub timeout_s: i64,
    /// `-G`: CUDA graph launches.
    pub graph: Graph,
    /// `-C 1`: report CPU enqueue time.
    pub report_cputime: bool,
    /// `-S 1`: timestamp column.
    pub report_timestamps: bool,
    /// `-J`: JSON output path.
    pub output_file: Option<OutputFile>,
    /// `-a`: how the ranks' times become the one reported.
    pub average: Average,
    /// `-R`: buffer registration, as requested (the loaded NCCL may allow less).
    pub register: Register,
    /// `-M 1`: memory report.
    pub memory_report: bool,
    /// `-u`: misalign buffers by this many elements.
    pub unalign: i64,
    /// `-I 1`: per-iteration timing.
    pub per_iter: bool,
    /// `-K`: leading samples excluded from per-iteration statistics.
    pub per_iter_skip: i64,
    /// `-p 1`: each thread initialises its own communicators.
    pub parallel_init: bool,
    /// `-x`: `ncclConfig_t.CTAPolicy` (`None`: not set, NCCL's default).
    pub cta_policy: Option<i64>,
    /// `-D`: device-API implementation, when given (only 0, NCCL's own, runs here).
    pub device_impl: Option<i64>,
    /// `-V`: CTAs of a device-API implementation, when given (1..=128).
    pub device_cta_count: Option<i64>,
    /// `--dry-run`: bootstrap, print the plan, load nothing on a GPU.
    pub dry_run: bool,
    /// `--locate` and its options: name the slow node, GPU, rail or link after the table.
    pub locate: Option<LocateOptions>,
    /// `--explain` and its options: what NCCL did and should reach, after the table.
    pub explain: Option<ExplainOptions>,
    /// `--collectives`: the benchmarks this launch runs in turn (names of the benchmark table);
    /// empty: the program's own collective alone.
    pub collectives: Vec<&'static str>,
    /// `--health` and its files: the check's summary after the last section.
    pub health: Option<HealthOptions>,
    /// `--stop-when-sure`: stop a size's timed iterations once the 95 % confidence half-width
    /// of the mean is within this percentage of it.
    pub stop_when_sure: Option<f64>,
    /// `--hang-timeout`: the hang watch's least stall limit in seconds (0: off).
    pub hang_timeout_s: f64,
}

/// The hang watch's least stall limit when `--hang-timeout` is not given, in seconds.
pub const DEFAULT_HANG_TIMEOUT_S: f64 = 60.0;

impl Default for Options {
    /// The options of an empty command line: every option at its default in
    /// [`crate::cli::OPTIONS`].
    fn default() -> Self {
        from_args(&RawArgs::default())
            .map(|p| p.options)
            .expect("the defaults of cli::OPTIONS are valid options (a unit test reads them)")
    }
}

/// The outcome of option parsing that is not a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionsError {
    /// Print usage and exit 0.
    Help,
    /// Print the version line and exit 0.
    Version,
    /// A one-line message; exit 255 like nccl-tests' argument errors.
    Invalid(String),
    /// A recognised option whose behaviour this build does not implement yet (exit 5).
    Unsupported(String),
}

/// Parsed options plus the warnings to print on stderr before running.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The validated options.
    pub options: Options,
    /// Non-fatal notes of our own (lenient parses, ignored words), printed after the program
    /// name.
    pub warnings: Vec<String>,
    /// nccl-tests' own post-parse messages (an option disabled or reset), printed verbatim on
    /// stderr as upstream does.
    pub notices: Vec<String>,
}

struct Reader<'a> {
    raw: &'a RawArgs,
    warnings: Vec<String>,
}

impl Reader<'_> {
    /// The value given for `long`, if any.
    fn given(&self, long: &str) -> Result<Option<String>, OptionsError> {
        match self.raw.get(long) {
            None => Ok(None),
            Some(v) => v.to_str().map(|v| Some(v.to_owned())).ok_or_else(|| {
                OptionsError::Invalid(format!(
                    "the value of {} is not valid UTF-8",
                    flag_name(long)
                ))
            }),
        }
    }

    /// The value given for `long`, else its default value in [`crate::cli::OPTIONS`] (`None`
    /// for an option that is unset by default).
    fn text(&self, long: &str) -> Result<Option<String>, OptionsError> {
        Ok(self.given(long)?.or_else(|| match spec(long)?.default {
            DefaultValue::Value(v) => Some(v.to_string()),
            DefaultValue::Unset(_) => None,
        }))
    }

    /// An integer option read like strtol, with junk after the number warned about; `None`
    /// when neither given nor set by default.
    fn int_if_set(&mut self, long: &str) -> Result<Option<i64>, OptionsError> {
        let Some(s) = self.text(long)? else {
            return Ok(None);
        };
        let flag = flag_name(long);
        match strtol(&s) {
            None => Err(OptionsError::Invalid(format!(
                "invalid value '{s}' for {flag}: not a number"
            ))),
            Some((None, _)) | Some((Some(i64::MIN..=-2147483649 | 2147483648..=i64::MAX), _)) => {
                Err(OptionsError::Invalid(format!(
                    "invalid value '{s}' for {flag}: out of range"
                )))
            }
            Some((Some(v), rest)) => {
                if !rest.trim().is_empty() {
                    self.warnings.push(format!(
                        "warning: {flag} '{s}' read as {v}; ignoring the trailing '{rest}'"
                    ));
                }
                Ok(Some(v))
            }
        }
    }

    /// An integer option that has a default.
    fn int(&mut self, long: &str) -> Result<i64, OptionsError> {
        self.int_if_set(long)?
            .ok_or_else(|| OptionsError::Invalid(format!("{} needs a value", flag_name(long))))
    }

    /// An integer option that must be ≥ `min`.
    fn int_at_least(&mut self, long: &str, min: i64) -> Result<i64, OptionsError> {
        let v = self.int(long)?;
        if v < min {
            return Err(OptionsError::Invalid(format!(
                "invalid value {v} for {}: must be at least {min}",
                flag_name(long)
            )));
        }
        Ok(v)
    }

    /// A 0/1 switch: anything but 0 is on.
    fn switch(&mut self, long: &str) -> Result<bool, OptionsError> {
        Ok(self.int(long)? != 0)
    }

    /// A size option; `what` names it in messages as nccl-tests does.
    fn size(&mut self, long: &str, what: &str) -> Result<u64, OptionsError> {
        let s = self.text(long)?.unwrap_or_default();
        parse_size(&s)
            .map_err(|e| OptionsError::Invalid(format!("invalid size specified for '{what}': {e}")))
    }
}

/// `-x (--long)` for messages.
fn flag_name(long: &str) -> String {
    spec(long).map_or_else(|| format!("--{long}"), |o| o.flag_name())
}

fn parse_types(s: &str) -> Result<(Vec<DataType>, bool), OptionsError> {
    if s == "all" {
        return Ok((DataType::ALL.to_vec(), true));
    }
    DataType::from_name(s)
        .map(|t| (vec![t], false))
        .ok_or_else(|| {
            let names: Vec<_> = DataType::ALL.iter().map(|t| t.name()).collect();
            OptionsError::Invalid(format!(
                "unknown datatype '{s}' for -d (--datatype); valid: {} all",
                names.join(" ")
            ))
        })
}

fn parse_ops(s: &str) -> Result<Vec<RedOp>, OptionsError> {
    if s == "all" {
        return Ok(RedOp::ALL.to_vec());
    }
    RedOp::from_name(s).map(|o| vec![o]).ok_or_else(|| {
        OptionsError::Invalid(format!(
            "unknown op '{s}' for -o (--op); valid: sum prod max min avg mulsum all"
        ))
    })
}

/// Validates a parsed command line.
pub fn from_args(raw: &RawArgs) -> Result<Parsed, OptionsError> {
    if raw.help {
        return Err(OptionsError::Help);
    }
    if raw.version {
        return Err(OptionsError::Version);
    }
    let raw = &health::with_preset(raw);
    let mut r = Reader {
        raw,
        warnings: Vec::new(),
    };
    for word in &raw.ignored {
        r.warnings.push(format!(
            "warning: ignoring stray argument '{}'",
            word.to_string_lossy()
        ));
    }
    let nthreads = r.int_at_least("nthreads", 1)?;
    let ngpus = r.int_at_least("ngpus", 1)?;
    let min_bytes = r.size("minbytes", "minbytes")?;
    let max_bytes = r.size("maxbytes", "maxbytes")?;
    let step_bytes = r.size("stepbytes", "stepBytes")?;
    let step_factor = r.int_at_least("stepfactor", 0)? as u64;
    let iters = r.int_at_least("iters", 1)?;
    let agg_iters = r.int_at_least("agg_iters", 1)?;
    let warmup_iters = r.int_at_least("warmup_iters", 0)?;
    let check = r.int_at_least("check", 0)?;
    let average = r.int("average")?;
    let unalign = r.int_at_least("unalign", 0)?;
    let cycles = r.int("run_cycles")?;
    let stream_null = r.switch("stream_null")?;
    let report_cputime = r.switch("report_cputime")?;
    let report_timestamps = r.switch("report_timestamps")?;
    let timeout_s = r.int_at_least("timeout", 0)?;
    let blocking = r.int("blocking")?;
    let blocking = Blocking::from_number(blocking).unwrap_or_else(|| {
        r.warnings.push(format!(
            "warning: -z {blocking} is not 0..3; treated as -z 2 (wait after each operation, no barrier)"
        ));
        Blocking::EachOperation
    });
    let average = Average::from_number(average).ok_or_else(|| {
        OptionsError::Invalid(format!(
            "invalid value {average} for -a (--average): use 0 (rank 0), 1 (mean), 2 (min) or 3 (max)"
        ))
    })?;
    let (types, all_types) = parse_types(&r.text("datatype")?.unwrap_or_default())?;
    let ops = parse_ops(&r.text("op")?.unwrap_or_default())?;
    let roots = match r.text("root")? {
        Some(s) if s.trim() == "all" => Roots::All,
        _ => match r.int("root")? {
            -1 => Roots::All,
            v if v < 0 => {
                return Err(OptionsError::Invalid(format!(
                    "invalid root {v} for -r (--root): use a rank, or -1 for every root"
                )));
            }
            v => Roots::One(v),
        },
    };
    let output_file = match r.text("output_file")? {
        Some(s) => Some(output_file(&s)?),
        None => None,
    };
    let graph = Graph::from_number(r.int("cudagraph")?);
    let parallel_init = r.switch("parallel_init")?;
    let memory_report = r.switch("memory")?;
    let register = r.int("local_register")?;
    let register = Register::from_number(register).ok_or_else(|| {
        OptionsError::Invalid(format!(
            "invalid value {register} for -R (--local_register): use 0 (off), 1 (local) or 2 (symmetric)"
        ))
    })?;
    let cta_policy = r.int_if_set("cta_policy")?.filter(|p| *p >= 0);
    let per_iter = r.int("per_iter_timing")?;
    let per_iter_skip = r.int("per_iter_skip")?;
    let device_impl = r.int_if_set("device_implementation")?;
    let mut notices = Vec::new();
    let device_cta_count = r.int_if_set("device_cta_count")?.map(|v| {
        if (1..=128).contains(&v) {
            v
        } else {
            notices.push(format!(
                "device_cta_count (-V) must be positive and less than 128, got {v}. Using default value 16."
            ));
            16
        }
    });
    let locate = locate::read(&mut r, nthreads, ngpus, max_bytes)?;
    let explain = explain::read(&mut r)?;
    let collectives = collectives::read(&mut r)?;
    let health = health::read(&mut r)?;
    let stop_when_sure = locate::number(&mut r, "stop-when-sure")?;
    let hang_timeout_s = locate::number(&mut r, "hang-timeout")?.unwrap_or(DEFAULT_HANG_TIMEOUT_S);
    if !(0.0..=1e6).contains(&hang_timeout_s) {
        return Err(OptionsError::Invalid(format!(
            "invalid value {hang_timeout_s} for --hang-timeout: give seconds from 0 (off) to 1000000"
        )));
    }
    if let Some(p) = stop_when_sure
        && !(p > 0.0 && p <= 50.0)
    {
        return Err(OptionsError::Invalid(format!(
            "invalid value {p} for --stop-when-sure: give a percentage above 0, at most 50"
        )));
    }
    if !collectives.is_empty() && locate.is_some() && health.is_none() {
        return Err(OptionsError::Unsupported(
            "--locate with --collectives runs once, on the first collective --health finds slow: add --health, or run --locate in a launch of one collective".into(),
        ));
    }
    let mut o = Options {
        nthreads,
        ngpus,
        min_bytes,
        max_bytes,
        step_bytes,
        step_factor,
        iters,
        agg_iters,
        warmup_iters,
        run_cycles: u64::try_from(cycles).ok().filter(|&c| c > 0),
        check,
        ops,
        types,
        all_types,
        roots,
        blocking,
        stream_null,
        timeout_s,
        graph,
        report_cputime,
        report_timestamps,
        output_file,
        average,
        register,
        memory_report,
        unalign,
        per_iter: false,
        per_iter_skip,
        parallel_init,
        cta_policy,
        device_impl,
        device_cta_count,
        dry_run: raw.dry_run,
        locate,
        explain,
        collectives,
        health,
        stop_when_sure,
        hang_timeout_s,
    };
    check_gpus_per_process(&o)?;
    let e_left_out = raw.get("maxbytes").is_none();
    let b_text = raw
        .get("minbytes")
        .map(|b| b.to_string_lossy().into_owned());
    check_sizes(&o, e_left_out.then_some(b_text).flatten().as_deref())?;
    post_parse(&mut o, per_iter, &mut notices)?;
    Ok(Parsed {
        options: o,
        warnings: r.warnings,
        notices,
    })
}

/// nccl-tests' checks after parsing (in upstream's order; the size check comes first):
/// `-D` without `-R 2` stops, incompatible `-I`/`-G`/`-z 3`/`-K` settings are disabled with
/// upstream's message. Beyond upstream: `-D > 0` (device-API kernels) is not implemented here,
/// and `-G` cannot capture the legacy NULL stream of `-y 1`.
fn post_parse(
    o: &mut Options,
    per_iter: i64,
    notices: &mut Vec<String>,
) -> Result<(), OptionsError> {
    let device_impl = o.device_impl.unwrap_or(0);
    if device_impl > 0 && o.register != Register::Symmetric {
        return Err(OptionsError::Invalid(
            "device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)"
                .into(),
        ));
    }
    o.per_iter = per_iter == 1;
    if per_iter != 0 && per_iter != 1 {
        notices.push("per-iteration timing (-I) only supports 0=off or 1=on. Disabling.".into());
    }
    if o.per_iter && o.graph.is_on() {
        notices.push(
            "per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling."
                .into(),
        );
        o.per_iter = false;
    }
    if o.blocking.each_iteration() && o.graph.is_on() {
        notices.push(
            "blocking mode (-z 3) is incompatible with CUDA graph mode (-G). Disabling.".into(),
        );
        o.blocking = Blocking::Off;
    }
    if o.per_iter_skip < 0 || o.per_iter_skip >= o.iters {
        notices.push(format!(
            "per-iteration skip (-K) must be between 0 and {}. Disabling.",
            o.iters - 1
        ));
        o.per_iter_skip = 0;
    }
    if o.per_iter_skip > 0 && !o.per_iter {
        notices.push(
            "per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.".into(),
        );
        o.per_iter_skip = 0;
    }
    if device_impl > 0 {
        return Err(OptionsError::Unsupported(format!(
            "-D {device_impl} (--device_implementation): the device-API implementations (CUDA kernels on NCCL's device API: LSA, multimem, GIN) are not built into nccl-perf; run without -D (NCCL's own implementation)"
        )));
    }
    if o.stop_when_sure.is_some() {
        let with = match () {
            _ if o.graph.is_on() => Some("-G (--cudagraph)"),
            _ if o.per_iter => Some("-I 1 (--per_iter_timing)"),
            _ if o.blocking != Blocking::Off => Some("-z (--blocking) other than 0"),
            _ => None,
        };
        if let Some(w) = with {
            return Err(OptionsError::Invalid(format!(
                "--stop-when-sure times batches of iterations between two host waits: it does not combine with {w}; drop one of them"
            )));
        }
    }
    if o.graph.is_on() && o.stream_null {
        return Err(OptionsError::Invalid(
            "-G (--cudagraph) cannot capture the legacy NULL stream of -y 1 (--stream_null); drop one of them"
                .into(),
        ));
    }
    Ok(())
}

/// The most GPUs one process may drive (`-t` × `-g`). No machine has that many; the limit keeps
/// every later product (ranks, device indexes, per-process memory) far from overflow, and an
/// absurd `-g 5000000` ends here instead of allocating a record per requested GPU.
pub const MAX_GPUS_PER_PROCESS: i64 = 1 << 20;

/// Rejects `-t` × `-g` beyond [`MAX_GPUS_PER_PROCESS`] (exit 5, like the GPU count check that
/// smaller absurd values reach).
fn check_gpus_per_process(o: &Options) -> Result<(), OptionsError> {
    let per_process = o.nthreads.saturating_mul(o.ngpus);
    if per_process > MAX_GPUS_PER_PROCESS {
        return Err(OptionsError::Unsupported(format!(
            "-t {} x -g {} = {per_process} GPUs per process: more than nccl-perf can drive \
             ({MAX_GPUS_PER_PROCESS}); lower -t/-g",
            o.nthreads, o.ngpus
        )));
    }
    Ok(())
}

/// `-J`: the file the results also go to, and its format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFile {
    /// The path as given (numbered alternatives are tried when it exists).
    pub path: PathBuf,
    /// Its format, from the name.
    pub format: OutputFormat,
}

/// The format of the `-J` file: the report's formats that a run writes as it goes (each
/// named, with its file-name ending, in `report::formats` only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// A name ending in `.json` (any case): upstream's JSON document.
    Json,
    /// A name ending in `.csv` (any case): one record per row.
    Csv,
}

impl OutputFormat {
    /// Every `-J` format (JSON, upstream's, first).
    pub const ALL: [OutputFormat; 2] = [OutputFormat::Json, OutputFormat::Csv];

    /// The report's format this is (its name, label and file-name ending).
    pub fn format(self) -> &'static dyn Format {
        match self {
            OutputFormat::Json => &formats::Json,
            OutputFormat::Csv => &formats::Csv,
        }
    }

    /// The format a file name asks for, if any.
    pub fn of(name: &str) -> Option<OutputFormat> {
        OutputFormat::ALL
            .into_iter()
            .find(|f| f.format().names_file(name))
    }
}

/// `-J`: a file name ending in `.json` or `.csv` (any case). nccl-tests silently writes nothing
/// for other names; a run whose results would silently go nowhere is an error here.
fn output_file(s: &str) -> Result<OutputFile, OptionsError> {
    // `.json`, `.csv`: the file-name endings of the report's formats.
    let suffixes: Vec<&str> = OutputFormat::ALL
        .iter()
        .filter_map(|f| f.format().file_suffix())
        .collect();
    if s.is_empty() {
        return Err(OptionsError::Invalid(format!(
            "-J (--output_file) needs a file name ending in {}",
            suffixes.join(" or ")
        )));
    }
    let format = OutputFormat::of(s).ok_or_else(|| {
        let named: Vec<String> = suffixes.iter().map(|x| format!("<name>{x}")).collect();
        OptionsError::Invalid(format!(
            "-J (--output_file) '{s}': only {} output are supported; name the file {}",
            suffixes.join(" and "),
            named.join(" or ")
        ))
    })?;
    Ok(OutputFile {
        path: PathBuf::from(s),
        format,
    })
}

/// Rejects size sweeps that are inverted or would never end. `b_alone`: the `-b` text when
/// `-e` was left out (then an inverted sweep is most likely `-b` alone above `-e`'s default).
fn check_sizes(o: &Options, b_alone: Option<&str>) -> Result<(), OptionsError> {
    if o.min_bytes > o.max_bytes {
        // nccl-tests' line, then (on a line of its own) why, when -e was left to its default.
        let why = b_alone.map_or(String::new(), |b| {
            format!(
                "\nnccl-perf: -e (--maxbytes) was not given and defaults to 32M ({}): give it as \
                 well, e.g. -b {b} -e {b}",
                o.max_bytes
            )
        });
        return Err(OptionsError::Invalid(format!(
            "invalid sizes for 'minbytes' and 'maxbytes': {} > {}{why}",
            o.min_bytes, o.max_bytes
        )));
    }
    if o.step_factor > 1 && o.min_bytes == 0 {
        return Err(OptionsError::Invalid(
            "-b 0 with -f: a size of 0 multiplied by the step factor never grows; start at -b 1 or more"
                .into(),
        ));
    }
    if o.step_factor <= 1 && o.step_bytes == 0 && o.min_bytes < o.max_bytes {
        return Err(OptionsError::Invalid(
            "-i 0: an additive step of 0 bytes never reaches -e; give -i > 0 or -f > 1".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
