//! The command line as nccl-tests v2.19.6 accepts it: GNU-style short and long options, each
//! (but `-h`) with a required value, unambiguous long-name prefixes, last occurrence wins, and
//! stray non-option words ignored. Values are kept as raw strings here; the benchmark core's
//! `options` gives them meaning.
//!
//! The crate is the benchmarks' command-line vocabulary, shared by the benchmark core, the
//! report reader (a `-J` file's `args`) and the `nccl-perf` tool (man pages, completions):
//! the options' one definition ([`OPTIONS`]), [`cnum`] (numbers read as nccl-tests' C code reads
//! them), [`types`] (datatypes and reduction operations) and [`program_name`]; and how the
//! programs speak back on standard error ([`stderr`], [`eline!`]).

use crate::types::{DataType, RedOp};
use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, Command, ValueHint};
use std::ffi::OsString;

mod spec;
pub mod types;

// Kept low (in facts) so that the bootstrap reads them without the command line's crates.
pub use nccl_perf_facts::{cnum, eline, stderr};

pub use spec::{DefaultValue, OPTIONS, Spec, Value, spec};

/// The program name as nccl-tests prints it: `argv[0]` after the last `/` or `\`.
pub fn program_name(argv0: &str) -> String {
    argv0
        .rsplit(['/', '\\'])
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("nccl-perf")
        .to_string()
}

/// The usage text printed by `-h`: nccl-tests' options in its layout (TAB-indented, trailing
/// spaces kept), then [`our_usage`].
pub fn usage(program: &str) -> String {
    let mut s = upstream_usage(program);
    s.push_str(&our_usage());
    s
}

/// nccl-tests' own usage text, line for line.
pub fn upstream_usage(program: &str) -> String {
    let mut s = format!("USAGE: {program} \n");
    for o in OPTIONS {
        let (Some(short), Some(text)) = (o.short, o.usage) else {
            continue;
        };
        match o.value {
            Value::Flag => s.push_str(&format!("\t[-{short},--{}]\n", o.long)),
            _ => s.push_str(&format!("\t[-{short},--{} {text}] \n", o.long)),
        }
    }
    s
}

/// What `-h` adds after nccl-tests' lines: where our programs differ from its text, and our
/// long-only options with their defaults.
pub fn our_usage() -> String {
    let mut s = String::from(
        "nccl-perf: -J also writes CSV (a name ending in .csv); -e defaults to 32M, so -b alone \
         above that needs -e too.\nnccl-perf's own options (long form only):\n",
    );
    for o in OPTIONS.iter().filter(|o| o.short.is_none()) {
        let name = match o.value_name() {
            Some(v) => format!("--{} <{v}>", o.long),
            None => format!("--{}", o.long),
        };
        // On stdout, as nccl-tests prints its usage: no line of ours may hold the words that
        // scrapers look for (DESIGN's stdout contract), so `bandwidth` reads `bw` here.
        let line = format!("\t[{name}] {}", o.documented_help());
        s.push_str(&nccl_perf_locate::output::scrub(&line));
        s.push('\n');
    }
    s
}

/// The parsed command line: the last raw value of each option that was given.
#[derive(Debug, Default, Clone)]
pub struct RawArgs {
    /// `-h` was given.
    pub help: bool,
    /// `--version` was given (ours; long form only).
    pub version: bool,
    /// `--dry-run` was given (ours; long form only, not in the upstream usage text).
    pub dry_run: bool,
    /// `--explain` was given (ours; long form only).
    pub explain: bool,
    /// `--health` was given (ours; long form only).
    pub health: bool,
    /// `--health-allow-unjudged` was given (ours; long form only).
    pub health_allow_unjudged: bool,
    /// (long name, raw value) of every option given, last occurrence only.
    pub values: Vec<(&'static str, OsString)>,
    /// Stray words that are not options (nccl-tests ignores them).
    pub ignored: Vec<OsString>,
}

impl RawArgs {
    /// The raw value of an option by long name, if given.
    pub fn get(&self, long: &str) -> Option<&OsString> {
        self.values.iter().find(|(l, _)| *l == long).map(|(_, v)| v)
    }
}

/// The parser: every option of [`OPTIONS`], plus a catch-all for stray words.
fn command() -> Command {
    let cmd = Command::new("nccl-perf")
        .no_binary_name(true)
        .disable_help_flag(true)
        .disable_version_flag(true)
        .infer_long_args(true)
        .args_override_self(true)
        .arg(
            Arg::new("ignored")
                .num_args(0..)
                .action(ArgAction::Append)
                .value_parser(clap::builder::OsStringValueParser::new()),
        );
    OPTIONS.iter().fold(cmd, |cmd, o| {
        let arg = Arg::new(o.long).long(o.long).help(o.documented_help());
        let arg = match o.short {
            Some(c) => arg.short(c),
            None => arg,
        };
        cmd.arg(match o.value_name() {
            None => arg.action(ArgAction::SetTrue),
            Some(name) => arg
                .value_name(name)
                .num_args(1)
                .allow_hyphen_values(true)
                .action(ArgAction::Set)
                .value_parser(clap::builder::OsStringValueParser::new()),
        })
    })
}

/// The parser's own clap definition, documented, for man pages and shell completions
/// (`nccl-perf man`, `nccl-perf completions`): the same options with their help texts, a binary
/// name, the datatype and op names as possible values, file names hinted, and without the
/// catch-all for stray words.
pub fn command_for_docs() -> Command {
    let types: Vec<&'static str> = DataType::ALL
        .iter()
        .map(|t| t.name())
        .chain(["all"])
        .collect();
    let ops: Vec<&'static str> = RedOp::ALL.iter().map(|o| o.name()).chain(["all"]).collect();
    command().no_binary_name(false).mut_args(|a| {
        let kind = spec(a.get_id().as_str()).map(|o| o.value);
        match kind {
            None => a.hide(true),
            Some(Value::DataType) => a.value_parser(PossibleValuesParser::new(types.clone())),
            Some(Value::Op) => a.value_parser(PossibleValuesParser::new(ops.clone())),
            Some(Value::File) => a.value_hint(ValueHint::FilePath),
            Some(Value::Schedule) => a.value_parser(PossibleValuesParser::new(
                nccl_perf_locate::schedule::Kind::ALL.map(|k| k.name()),
            )),
            Some(_) => a,
        }
    })
}

/// Why a command line cannot be parsed (each a one-line description).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// An option no benchmark has, and the closest one that exists, if any is close.
    #[error("unknown option '{0}' ({hint}run with -h for the list of options)", hint = did_you_mean(.1))]
    Unknown(String, Option<String>),
    /// An option without its value; the option as messages name it (`-n (--iters)`).
    #[error("option {0} requires a value")]
    MissingValue(String),
    /// An argument that is not UTF-8.
    #[error("an argument is not valid UTF-8")]
    NotUtf8,
    /// Anything else the parser refuses, in its words.
    #[error("{0}")]
    Other(String),
}

/// `did you mean --x? ` for a suggestion, nothing without one.
fn did_you_mean(suggested: &Option<String>) -> String {
    suggested
        .as_ref()
        .map(|s| format!("did you mean {s}? "))
        .unwrap_or_default()
}

/// Parses the arguments after the program name.
pub fn parse<I, T>(args: I) -> Result<RawArgs, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let matches = command().try_get_matches_from(args).map_err(describe)?;
    let mut raw = RawArgs {
        help: matches.get_flag("help"),
        version: matches.get_flag("version"),
        dry_run: matches.get_flag("dry-run"),
        explain: matches.get_flag("explain"),
        health: matches.get_flag("health"),
        health_allow_unjudged: matches.get_flag("health-allow-unjudged"),
        ..RawArgs::default()
    };
    for o in OPTIONS.iter().filter(|o| o.value != Value::Flag) {
        if let Some(v) = matches.get_one::<OsString>(o.long) {
            raw.values.push((o.long, v.clone()));
        }
    }
    if let Some(words) = matches.get_many::<OsString>("ignored") {
        raw.ignored = words.cloned().collect();
    }
    Ok(raw)
}

/// Turns a clap error into one naming the offending argument.
fn describe(e: clap::Error) -> ArgsError {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let suggested = match e.get(ContextKind::SuggestedArg) {
                Some(ContextValue::String(s)) => Some(s.clone()),
                Some(ContextValue::Strings(v)) => v.first().cloned(),
                _ => None,
            }
            // Only a near miss (a letter or two, or two swapped): clap's own measure also
            // offers --ngpus for --bogus.
            .filter(|s| strsim::damerau_levenshtein(s, &arg) <= 2);
            ArgsError::Unknown(arg, suggested)
        }
        ErrorKind::InvalidValue | ErrorKind::NoEquals if !arg.is_empty() => {
            // clap names the option `--long <long>`; say `-x (--long)` as the other messages do.
            let long = arg.trim_start_matches('-').split(' ').next().unwrap_or("");
            ArgsError::MissingValue(match spec(long) {
                Some(o) => o.flag_name(),
                None => format!("'{arg}'"),
            })
        }
        ErrorKind::InvalidUtf8 => ArgsError::NotUtf8,
        _ => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            ArgsError::Other(first.trim_start_matches("error: ").to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_names() {
        assert_eq!(
            program_name("/opt/nccl-tests/build/all_reduce_perf"),
            "all_reduce_perf"
        );
        assert_eq!(program_name("all_gather_perf"), "all_gather_perf");
        assert_eq!(program_name("C:\\x\\a.exe"), "a.exe");
        assert_eq!(program_name(""), "nccl-perf");
    }

    fn val(raw: &RawArgs, long: &str) -> Option<String> {
        raw.get(long).map(|v| v.to_string_lossy().into_owned())
    }

    #[test]
    fn getopt_forms() {
        let raw = parse(["-n5", "--warmup_iters=3", "-b", "1M", "--maxb", "2G"]).unwrap();
        assert_eq!(val(&raw, "iters").as_deref(), Some("5"));
        assert_eq!(val(&raw, "warmup_iters").as_deref(), Some("3"));
        assert_eq!(val(&raw, "minbytes").as_deref(), Some("1M"));
        assert_eq!(val(&raw, "maxbytes").as_deref(), Some("2G"));
    }

    #[test]
    fn negative_and_hyphen_values_and_last_wins() {
        let raw = parse(["-r", "-1", "-n", "3", "-n", "7"]).unwrap();
        assert_eq!(val(&raw, "root").as_deref(), Some("-1"));
        assert_eq!(val(&raw, "iters").as_deref(), Some("7"));
    }

    #[test]
    fn stray_words_are_collected_not_fatal() {
        // A real health checker passes "-w 50--iters 100": getopt reads -w "50--iters", "100" is stray.
        let raw = parse(["-w", "50--iters", "100", "-b", "8"]).unwrap();
        assert_eq!(val(&raw, "warmup_iters").as_deref(), Some("50--iters"));
        assert_eq!(raw.ignored, vec![OsString::from("100")]);
        assert_eq!(val(&raw, "minbytes").as_deref(), Some("8"));
    }

    #[test]
    fn unknown_and_missing_values_are_errors() {
        let e = parse(["--bogus", "1"]).unwrap_err().to_string();
        assert!(e.contains("--bogus"), "{e}");
        let e = parse(["-n"]).unwrap_err().to_string();
        assert_eq!(e, "option -n (--iters) requires a value");
        let e = parse(["-b", "8", "--cta_policy"]).unwrap_err().to_string();
        assert_eq!(e, "option -x (--cta_policy) requires a value");
        assert!(parse(["-q"]).is_err());
    }

    #[test]
    fn dry_run_is_a_long_flag_only() {
        assert!(parse(["--dry-run", "-b", "8"]).unwrap().dry_run);
        assert!(parse(["--dry"]).unwrap().dry_run);
        assert!(!parse(["-b", "8"]).unwrap().dry_run);
        assert!(parse(["--dry-run=1"]).is_err());
        assert!(!upstream_usage("x").contains("dry"));
        assert!(usage("x").contains("\t[--dry-run] "), "{}", usage("x"));
    }

    #[test]
    fn locate_options_are_long_only_and_keep_prefixes_of_upstream_options() {
        let raw = parse(["--locate", "quick", "--locate-json=l.json", "-b", "8"]).unwrap();
        assert_eq!(val(&raw, "locate").as_deref(), Some("quick"));
        assert_eq!(val(&raw, "locate-json").as_deref(), Some("l.json"));
        // An exact name wins over the longer names it begins.
        assert_eq!(
            val(&parse(["--locate", "full"]).unwrap(), "locate").as_deref(),
            Some("full")
        );
        // Upstream's options keep their usual prefixes: --min is -b, --local is -R.
        assert_eq!(
            val(&parse(["--min", "8"]).unwrap(), "minbytes").as_deref(),
            Some("8")
        );
        assert_eq!(
            val(&parse(["--local", "1"]).unwrap(), "local_register").as_deref(),
            Some("1")
        );
        assert_eq!(
            parse(["--locate"]).unwrap_err().to_string(),
            "option --locate requires a value"
        );
        assert_eq!(
            upstream_usage("x"),
            upstream_usage("x").replace("locate", "")
        );
        assert!(usage("x").contains("\t[--locate <SCHEDULE>] "));
    }

    #[test]
    fn ambiguous_prefix_is_an_error() {
        // --m could be minbytes, maxbytes or memory.
        assert!(parse(["--m", "1"]).is_err());
    }

    #[test]
    fn help_flag_and_usage_lists_every_option() {
        assert!(parse(["-h"]).unwrap().help);
        assert!(parse(["--help"]).unwrap().help);
        assert!(parse(["--version"]).unwrap().version);
        assert!(!parse(["-h"]).unwrap().version);
        let u = usage("all_reduce_perf");
        let upstream = upstream_usage("all_reduce_perf");
        assert!(u.starts_with(&upstream));
        assert!(u.starts_with("USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n"));
        for o in OPTIONS.iter().filter(|o| o.value != Value::Flag) {
            match o.short {
                Some(s) => assert!(
                    upstream.contains(&format!("[-{s},--{} ", o.long)),
                    "{}",
                    o.long
                ),
                None => {
                    assert!(!upstream.contains(o.long), "{} is ours", o.long);
                    assert!(u.contains(&format!("[--{} <", o.long)), "{}", o.long);
                }
            }
        }
        assert!(upstream.ends_with("\t[-h,--help]\n"));
        // Ours come after nccl-tests' lines, each on one line with its default.
        assert!(u.contains("[--locate-iters <N>] Timed operations per --locate group"));
        assert!(u.contains("(default 20)"));
        assert!(u.contains("-J also writes CSV"));
        // The stdout contract: the words scrapers look for only in nccl-tests' own lines.
        let ours = u.strip_prefix(upstream.as_str()).unwrap_or_default();
        assert!(!ours.to_ascii_lowercase().contains("bandwidth"), "{ours}");
        assert!(!ours.contains("FAILED"), "{ours}");
        assert!(ours.contains("expected bus bws per GPU model"), "{ours}");
    }

    #[test]
    fn a_typo_gets_the_closest_option() {
        let e = parse(["--dryrun"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown option '--dryrun' (did you mean --dry-run? run with -h for the list of options)"
        );
        let e = parse(["--itres", "5"]).unwrap_err().to_string();
        assert!(e.contains("did you mean --iters?"), "{e}");
        let e = parse(["--bogus", "1"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown option '--bogus' (run with -h for the list of options)"
        );
    }
}
