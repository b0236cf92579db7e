//! The command line as nccl-tests v2.19.6 accepts it: GNU-style short and long options, each
//! (but `-h`) with a required value, unambiguous long-name prefixes, last occurrence wins, and
//! stray non-option words ignored. Values are kept as raw strings here; `options` gives them
//! meaning.

use clap::{Arg, ArgAction, Command};
use std::ffi::OsString;

/// Every value-taking option: (short, long, usage text after `-x,--long `).
pub const OPTIONS: &[(char, &str, &str)] = &[
    ('t', "nthreads", "<num threads>"),
    ('g', "ngpus", "<gpus per thread>"),
    ('b', "minbytes", "<min size in bytes>"),
    ('e', "maxbytes", "<max size in bytes>"),
    ('i', "stepbytes", "<increment size>"),
    ('f', "stepfactor", "<increment factor>"),
    ('n', "iters", "<iteration count>"),
    ('m', "agg_iters", "<aggregated iteration count>"),
    ('w', "warmup_iters", "<warmup iteration count>"),
    (
        'N',
        "run_cycles",
        "<cycle count> run & print each cycle (default: 1; 0=infinite)",
    ),
    ('p', "parallel_init", "<0/1>"),
    ('c', "check", "<check iteration count>"),
    ('o', "op", "<sum/prod/min/max/avg/mulsum/all>"),
    ('d', "datatype", "<nccltype/all>"),
    ('r', "root", "<root>"),
    (
        'z',
        "blocking",
        "<0/1/2/3> 1=barrier after each inner iter (-m), 2=no barrier, 3=wait and barrier after each outer iter (-n)",
    ),
    ('y', "stream_null", "<0/1>"),
    ('T', "timeout", "<time in seconds>"),
    ('G', "cudagraph", "<num graph launches>"),
    ('C', "report_cputime", "<0/1>"),
    (
        'S',
        "report_timestamps",
        "<0/1> report timestamps (default 0)",
    ),
    (
        'J',
        "output_file",
        "<file> write output to filepath, if accessible. Infer type from suffix (only json supported presently.)",
    ),
    (
        'a',
        "average",
        "<0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>",
    ),
    (
        'R',
        "local_register",
        "<0/1/2> enable local (1) or symmetric (2) buffer registration on send/recv buffers (default: disable (0))",
    ),
    (
        'x',
        "cta_policy",
        "<0/1/2> set CTA policy (NCCL_CTA_POLICY_DEFAULT (0), NCCL_CTA_POLICY_EFFICIENCY (1), NCCL_CTA_POLICY_ZERO (2)) (default: do not set)",
    ),
    (
        'D',
        "device_implementation",
        "<implementation number> enable device implementation (default: 0, use NCCL implementation; requires -R 2 if > 0)",
    ),
    (
        'V',
        "device_cta_count",
        "<number> set number of CTAs for device implementation (default: 16)",
    ),
    (
        'M',
        "memory",
        "<0/1> enable memory usage report (default: 0)",
    ),
    (
        'u',
        "unalign",
        "<index of first element> Misalign source and destination buffers (default: 0)",
    ),
    (
        'I',
        "per_iter_timing",
        "<0/1> per-iteration CUDA event timing\n\t    (best with -z 0, -z 2, or -z 3; with -z 1 includes barrier wait;\n\t    i_p99 uses nearest-rank percentile and may equal i_max\n\t    with <100 samples) (default: 0)",
    ),
    (
        'K',
        "per_iter_skip",
        "<count> exclude leading samples from -I summary stats (default: 0)",
    ),
];

/// The usage text printed by `-h`, in nccl-tests' layout (TAB-indented, trailing spaces kept).
pub fn usage(program: &str) -> String {
    let mut s = format!("USAGE: {program} \n");
    for (short, long, text) in OPTIONS {
        s.push_str(&format!("\t[-{short},--{long} {text}] \n"));
    }
    s.push_str("\t[-h,--help]\n");
    s
}

/// The parsed command line: the last raw value of each option that was given.
#[derive(Debug, Default, Clone)]
pub struct RawArgs {
    /// `-h` was given.
    pub help: bool,
    /// `--dry-run` was given (ours; long form only, not in the upstream usage text).
    pub dry_run: bool,
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

fn command() -> Command {
    let mut cmd = Command::new("nccl-perf")
        .no_binary_name(true)
        .disable_help_flag(true)
        .disable_version_flag(true)
        .infer_long_args(true)
        .args_override_self(true)
        .arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("dry-run")
                .long("dry-run")
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("ignored")
                .num_args(0..)
                .action(ArgAction::Append)
                .value_parser(clap::builder::OsStringValueParser::new()),
        );
    for (short, long, _) in OPTIONS {
        cmd = cmd.arg(
            Arg::new(*long)
                .short(*short)
                .long(*long)
                .num_args(1)
                .allow_hyphen_values(true)
                .action(ArgAction::Set)
                .value_parser(clap::builder::OsStringValueParser::new()),
        );
    }
    cmd
}

/// The parser's own clap definition, for tools that generate documentation from it (man pages
/// and shell completions: `nccl-perf man`, `nccl-perf completions`): the same options, with a
/// binary name and without the catch-all for stray words. Help texts are the caller's to add
/// (arguments are named by their long names, `-h` as `help`, `--dry-run` as `dry-run`).
pub fn command_for_docs() -> Command {
    command().no_binary_name(false).mut_args(|a| {
        let hide = a.get_id() == "ignored";
        a.hide(hide)
    })
}

/// Parses the arguments after the program name. The error is a one-line description.
pub fn parse<I, T>(args: I) -> Result<RawArgs, String>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let matches = command().try_get_matches_from(args).map_err(describe)?;
    let mut raw = RawArgs {
        help: matches.get_flag("help"),
        dry_run: matches.get_flag("dry-run"),
        ..RawArgs::default()
    };
    for (_, long, _) in OPTIONS {
        if let Some(v) = matches.get_one::<OsString>(long) {
            raw.values.push((long, v.clone()));
        }
    }
    if let Some(words) = matches.get_many::<OsString>("ignored") {
        raw.ignored = words.cloned().collect();
    }
    Ok(raw)
}

/// Turns a clap error into one line naming the offending argument.
fn describe(e: clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            format!("unknown option '{arg}' (run with -h for the list of options)")
        }
        ErrorKind::InvalidValue | ErrorKind::NoEquals if !arg.is_empty() => {
            // clap names the option `--long <long>`; say `-x (--long)` as the other messages do.
            let long = arg.trim_start_matches('-').split(' ').next().unwrap_or("");
            match OPTIONS.iter().find(|(_, l, _)| *l == long) {
                Some((short, long, _)) => format!("option -{short} (--{long}) requires a value"),
                None => format!("option '{arg}' requires a value"),
            }
        }
        ErrorKind::InvalidUtf8 => "an argument is not valid UTF-8".to_string(),
        _ => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            first.trim_start_matches("error: ").to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = parse(["--bogus", "1"]).unwrap_err();
        assert!(e.contains("--bogus"), "{e}");
        let e = parse(["-n"]).unwrap_err();
        assert_eq!(e, "option -n (--iters) requires a value");
        let e = parse(["-b", "8", "--cta_policy"]).unwrap_err();
        assert_eq!(e, "option -x (--cta_policy) requires a value");
        assert!(parse(["-q"]).is_err());
    }

    #[test]
    fn dry_run_is_a_long_flag_only() {
        assert!(parse(["--dry-run", "-b", "8"]).unwrap().dry_run);
        assert!(parse(["--dry"]).unwrap().dry_run);
        assert!(!parse(["-b", "8"]).unwrap().dry_run);
        assert!(parse(["--dry-run=1"]).is_err());
        assert!(!usage("x").contains("dry"));
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
        let u = usage("all_reduce_perf");
        assert!(u.starts_with("USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n"));
        for (s, l, _) in OPTIONS {
            assert!(u.contains(&format!("[-{s},--{l} ")), "{l} missing");
        }
        assert!(u.ends_with("\t[-h,--help]\n"));
    }
}
