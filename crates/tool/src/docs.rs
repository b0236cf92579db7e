//! `nccl-perf completions` and `nccl-perf man`: shell completion scripts and man pages generated
//! from the clap definitions the programs parse with — the tool's own, and the benchmarks'
//! ([`nccl_perf_cli::command_for_docs`]) — so they list exactly the options that are accepted.
//!
//! Program names may carry an install suffix (`all_reduce_perf_mpi`, nccl-tests' `NAME_SUFFIX`):
//! completions are keyed on the name the shell sees, so they are generated per installed name.

use std::path::Path;

use super::ToolError;
use clap::{Arg, ArgAction, ArgMatches, Command, ValueHint};
use clap_complete::{Generator, Shell};
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, line_break, roman};

/// One benchmark program: its name as nccl-tests names it (`all_reduce_perf`), its
/// collective (`all_reduce`) and the NCCL operation it times (`AllReduce`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Benchmark {
    /// `<collective>_perf`.
    pub program: String,
    /// The collective's name.
    pub collective: &'static str,
    /// The operation, as documentation names it.
    pub operation: &'static str,
}

/// The benchmark programs, from the benchmark table ([`nccl_perf_facts::BENCHMARKS`]).
pub fn benchmarks() -> Vec<Benchmark> {
    nccl_perf_facts::BENCHMARKS
        .iter()
        .map(|b| Benchmark {
            program: b.program(),
            collective: b.name,
            operation: b.operation,
        })
        .collect()
}

/// The ENVIRONMENT entries of the man page of `collective`'s benchmark: our variables for
/// users, then the launchers'.
fn environment_entries(collective: &str) -> Vec<(String, &'static str)> {
    use nccl_perf_facts::environment::{Audience, LAUNCHERS, VARIABLES};
    VARIABLES
        .iter()
        .filter(|v| v.audience == Audience::User && v.only.is_none_or(|c| c == collective))
        .map(|v| (v.name.to_string(), v.help))
        .chain(
            LAUNCHERS
                .iter()
                .map(|(names, help)| (names.join(", "), *help)),
        )
        .collect()
}

/// `docs/options.md`: the benchmarks' options and environment variables as tables, made from
/// [`nccl_perf_cli::OPTIONS`] and [`nccl_perf_facts::environment`] (its test keeps the file current and
/// rewrites it with `UPDATE_DOCS=1`).
#[cfg(test)]
fn options_markdown() -> String {
    use nccl_perf_cli::{DefaultValue, OPTIONS, Value};
    use nccl_perf_facts::environment::{Audience, LAUNCHERS, VARIABLES};
    let cell = |s: &str| {
        s.replace('|', "\\|")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('\n', " ")
    };
    let mut md = String::from(
        "# Options and environment of the benchmarks\n\n\
         Generated from `crates/cli/src/spec.rs` and `crates/facts/src/environment.rs` \
         (`UPDATE_DOCS=1 cargo test --lib \
         options_doc` rewrites it); `-h` prints nccl-tests' own text and then ours, `nccl-perf man <benchmark>` \
         the same as a man page.\n\n## Options\n\n\
         | Option | Value | Default | Meaning |\n| --- | --- | --- | --- |\n",
    );
    for o in OPTIONS {
        let flags = match o.short {
            Some(c) => format!("`-{c}`, `--{}`", o.long),
            None => format!("`--{}`", o.long),
        };
        let default = match (o.value, o.default) {
            (Value::Flag, _) => String::new(),
            (_, DefaultValue::Value(v)) => format!("`{v}`"),
            (_, DefaultValue::Unset(what)) => what.to_string(),
        };
        md += &format!(
            "| {flags} | {} | {} | {} |\n",
            describe(o.value),
            cell(&default),
            cell(o.help)
        );
    }
    md += "\n## Environment\n\n| Variable | Read by | Meaning |\n| --- | --- | --- |\n";
    for v in VARIABLES.iter().filter(|v| v.audience == Audience::User) {
        let by = v
            .only
            .map_or("every benchmark".to_string(), |c| format!("`{c}_perf`"));
        md += &format!("| `{}` | {by} | {} |\n", v.name, cell(v.help));
    }
    md += "\nThe launchers' variables the bootstrap reads:\n\n| Variables | Meaning |\n| --- | --- |\n";
    for (names, help) in LAUNCHERS {
        let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        md += &format!("| {} | {} |\n", names.join(", "), cell(help));
    }
    md
}

/// How the documentation table names a kind of value.
#[cfg(test)]
fn describe(value: nccl_perf_cli::Value) -> &'static str {
    use nccl_perf_cli::Value;
    match value {
        Value::Flag => "",
        Value::Integer => "integer",
        Value::Switch => "0 or 1",
        Value::Size => "bytes (K, M, G)",
        Value::DataType => "type name or all",
        Value::Op => "op name or all",
        Value::File => "file",
        Value::Number => "number",
        Value::Schedule => "nodes, rails, quick or full",
        Value::Collectives => "benchmark names, or all",
    }
}

/// The exit codes of the benchmarks, as nccl-tests documents them.
const BENCHMARK_EXIT: &str = "0 success (and -h), 1 internal error, 2 CUDA failure, 3 NCCL failure, \
4 timeout, 5 not implemented (too few GPUs, an option this build does not support yet), \
6 invalid usage, 7 wrong data or bandwidth below NCCL_TESTS_MIN_BW, 9 --locate named a suspect, \
255 argument error.";

/// The exit codes of `nccl-perf`.
const TOOL_EXIT: &str = "0 success, 1 compare found a regression beyond --max-regression, 2 invalid usage or unreadable input.";

/// The `completions` subcommand's definition.
pub fn completions_command() -> Command {
    Command::new("completions")
        .about("Print shell completions for nccl-perf and the benchmarks (or write one file per program)")
        .after_help("bash: nccl-perf completions bash > /etc/bash_completion.d/nccl-perf\nzsh: nccl-perf completions zsh --dir ~/.zfunc (a folder on $fpath)\nfish: nccl-perf completions fish --dir ~/.config/fish/completions")
        .arg(
            Arg::new("SHELL")
                .required(true)
                .value_parser(clap::value_parser!(Shell))
                .help("Shell to generate for"),
        )
        .arg(program_arg(
            "Programs to complete: nccl-perf or a benchmark name (default: nccl-perf and all eleven)",
        ))
        .arg(suffix_arg())
        .arg(dir_arg("Write one file per program, named as the shell expects, into this folder"))
}

/// The `man` subcommand's definition.
pub fn man_command() -> Command {
    Command::new("man")
        .about("Print a man page (roff) of nccl-perf or a benchmark, or write them all to a folder")
        .after_help("nccl-perf man all_reduce_perf | man -l -\nnccl-perf man --dir /usr/local/share/man/man1")
        .arg(
            Arg::new("PAGE")
                .help("nccl-perf, nccl-perf-<subcommand> or a benchmark name (default nccl-perf; with --dir: every page)"),
        )
        .arg(suffix_arg())
        .arg(dir_arg("Write the pages (NAME.1) into this folder"))
}

fn program_arg(help: &'static str) -> Arg {
    Arg::new("PROGRAM")
        .num_args(0..)
        .action(ArgAction::Append)
        .help(help)
}

fn suffix_arg() -> Arg {
    Arg::new("suffix")
        .long("suffix")
        .value_name("SUFFIX")
        .help("Install suffix of the benchmark names in the default list, as nccl-tests' NAME_SUFFIX (e.g. _mpi)")
}

fn dir_arg(help: &'static str) -> Arg {
    Arg::new("dir")
        .long("dir")
        .value_name("DIR")
        .value_hint(ValueHint::DirPath)
        .help(help)
}

/// What a program name refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Program {
    /// `nccl-perf` itself.
    Tool,
    /// `nccl-perf <subcommand>` (man pages only).
    ToolSubcommand(String),
    /// A benchmark installed as `name` (`all_reduce_perf`, `all_reduce_perf_mpi`).
    Benchmark {
        /// The installed name.
        name: String,
        /// Which benchmark.
        bench: Benchmark,
    },
}

/// Resolves a program name: `nccl-perf`, `nccl-perf-<subcommand>`, or a benchmark name with
/// any install suffix.
fn program(name: &str) -> Result<Program, ToolError> {
    if name == "nccl-perf" {
        return Ok(Program::Tool);
    }
    if let Some(sub) = name.strip_prefix("nccl-perf-")
        && super::command()
            .get_subcommands()
            .any(|c| c.get_name() == sub)
    {
        return Ok(Program::ToolSubcommand(sub.to_string()));
    }
    let all = benchmarks();
    let names: Vec<String> = all.iter().map(|b| b.program.clone()).collect();
    all.into_iter()
        .find(|b| name.starts_with(&b.program))
        .map(|bench| Program::Benchmark {
            name: name.to_string(),
            bench,
        })
        .ok_or_else(|| {
            ToolError::Usage(format!(
                "unknown program '{name}': use nccl-perf, nccl-perf-<subcommand> or a benchmark name ({}), optionally with a suffix such as _mpi",
                names.join(", ")
            ))
        })
}

/// The default programs: `nccl-perf`, then the eleven benchmarks with `suffix`.
fn default_programs(suffix: &str) -> Vec<Program> {
    std::iter::once(Program::Tool)
        .chain(benchmarks().into_iter().map(|bench| Program::Benchmark {
            name: format!("{}{suffix}", bench.program),
            bench,
        }))
        .collect()
}

/// The documented command line of a benchmark installed as `program`, timing `op`: the
/// options the benchmarks parse ([`nccl_perf_cli::command_for_docs`]), with a description.
pub fn benchmark_command(program: &str, op: &str) -> Command {
    nccl_perf_cli::command_for_docs()
        .bin_name(program)
        .display_name(program)
        .about(format!(
            "NCCL {op} benchmark, a drop-in for nccl-tests' program of the same name"
        ))
        .long_about(format!(
            "Times NCCL {op} over a sweep of message sizes on one or more GPUs per process, \
             validates the results, and prints nccl-tests' table (same flags, same columns, same \
             exit codes, same -J JSON). It runs as one process, or as one rank of a job started by \
             mpirun, srun or Kubernetes (see ENVIRONMENT). Options but -h and --dry-run take a value (-n 5, -n5, \
             --iters 5, --iters=5, unambiguous prefixes such as --warm 2); the last occurrence \
             wins. Sizes take binary K, M and G suffixes."
        ))
}

/// `nccl-perf completions`.
pub fn run_completions(m: &ArgMatches) -> Result<u8, ToolError> {
    let shell = m
        .get_one::<Shell>("SHELL")
        .copied()
        .ok_or_else(|| ToolError::Usage("a shell is required".into()))?;
    let programs = programs(m)?;
    let dir = m.get_one::<String>("dir");
    let mut all = Vec::new();
    for p in &programs {
        let (name, mut cmd) = match p {
            Program::Tool => ("nccl-perf".to_string(), super::command()),
            Program::Benchmark { name, bench } => {
                (name.clone(), benchmark_command(name, bench.operation))
            }
            Program::ToolSubcommand(sub) => {
                return Err(ToolError::Usage(format!(
                    "no completions of their own for subcommands: nccl-perf's cover 'nccl-perf {sub}'"
                )));
            }
        };
        let script = completion(shell, &mut cmd, &name)?;
        match dir {
            Some(d) => write_file(d, &shell.file_name(&name), &script)?,
            None => all.extend_from_slice(&script),
        }
    }
    if dir.is_none() {
        super::write_stdout(&all)?;
    }
    Ok(0)
}

/// The completion script of `cmd` for `shell`, under the program name `name`.
pub fn completion(shell: Shell, cmd: &mut Command, name: &str) -> Result<Vec<u8>, ToolError> {
    cmd.set_bin_name(name);
    cmd.build();
    let mut out = Vec::new();
    shell
        .try_generate(cmd, &mut out)
        .map_err(|e| ToolError::Generate(format!("{shell} completions for {name}: {e}")))?;
    Ok(out)
}

/// `nccl-perf man`.
pub fn run_man(m: &ArgMatches) -> Result<u8, ToolError> {
    let dir = m.get_one::<String>("dir");
    let page_arg = m.get_one::<String>("PAGE");
    let pages: Vec<Program> = match (page_arg, dir) {
        (Some(name), _) => vec![program(name)?],
        (None, None) => vec![Program::Tool],
        (None, Some(_)) => {
            let suffix = m.get_one::<String>("suffix").map_or("", String::as_str);
            let mut all = default_programs(suffix);
            all.extend(
                super::command()
                    .get_subcommands()
                    .map(|c| Program::ToolSubcommand(c.get_name().to_string())),
            );
            all
        }
    };
    for p in &pages {
        let (name, text) = man_page(p)?;
        match dir {
            Some(d) => write_file(d, &format!("{name}.1"), &text)?,
            None => super::write_stdout(&text)?,
        }
    }
    Ok(0)
}

/// The man page of a program: (page name, roff text).
fn man_page(p: &Program) -> Result<(String, Vec<u8>), ToolError> {
    match p {
        Program::Tool => {
            let cmd = tool_for_man();
            let text = render_page(&cmd, &[("EXIT STATUS", &[("", TOOL_EXIT)])], &[])?;
            Ok(("nccl-perf".to_string(), text))
        }
        Program::ToolSubcommand(sub) => {
            let mut cmd = tool_for_man();
            cmd.build();
            let sub_cmd = cmd
                .get_subcommands()
                .find(|c| c.get_name() == sub)
                .cloned()
                .ok_or_else(|| ToolError::Usage(format!("nccl-perf has no subcommand {sub}")))?;
            let name = format!("nccl-perf-{sub}");
            let text = render_page(
                &sub_cmd.display_name(name.clone()),
                &[("EXIT STATUS", &[("", TOOL_EXIT)])],
                &["nccl-perf"],
            )?;
            Ok((name, text))
        }
        Program::Benchmark { name, bench } => {
            let cmd = benchmark_command(name, bench.operation);
            let entries = environment_entries(bench.collective);
            let env: Vec<(&str, &str)> = entries.iter().map(|(n, h)| (n.as_str(), *h)).collect();
            let text = render_page(
                &cmd,
                &[
                    ("ENVIRONMENT", &env),
                    ("EXIT STATUS", &[("", BENCHMARK_EXIT)]),
                ],
                &["nccl-perf", "mpirun", "srun"],
            )?;
            Ok((name.clone(), text))
        }
    }
}

/// The tool's command as its man pages show it (without clap's `help` subcommand).
fn tool_for_man() -> Command {
    super::command().disable_help_subcommand(true)
}

/// A section of extra text: (heading, entries of (term, text)); an empty term is a paragraph.
type Section<'a> = (&'a str, &'a [(&'a str, &'a str)]);

/// Renders a man page: clap_mangen's title, NAME, SYNOPSIS, DESCRIPTION, OPTIONS and
/// SUBCOMMANDS, then the command's after-help text as NOTES (clap_mangen would title it
/// "EXTRA"), `sections` and SEE ALSO (`see_also`, section 1), then VERSION.
fn render_page(
    cmd: &Command,
    sections: &[Section],
    see_also: &[&str],
) -> Result<Vec<u8>, ToolError> {
    let version = env!("CARGO_PKG_VERSION");
    // Built, the command has the arguments clap adds itself (--help, --version).
    let mut cmd = cmd.clone();
    cmd.build();
    let has_version = cmd.get_version().is_some();
    let man = Man::new(cmd.clone())
        .source(format!("nccl-perf {version}"))
        .manual("nccl-perf");
    let mut out = Vec::new();
    let io = |e: std::io::Error| ToolError::Generate(format!("man page: {e}"));
    man.render_title(&mut out).map_err(io)?;
    man.render_name_section(&mut out).map_err(io)?;
    man.render_synopsis_section(&mut out).map_err(io)?;
    man.render_description_section(&mut out).map_err(io)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out).map_err(io)?;
    }
    if cmd.get_subcommands().any(|c| !c.is_hide_set()) {
        man.render_subcommands_section(&mut out).map_err(io)?;
    }
    let mut roff = Roff::new();
    if let Some(notes) = cmd.get_after_help() {
        roff.control("SH", ["NOTES"]);
        for line in notes.to_string().lines() {
            roff.text([roman(line), line_break()]);
        }
    }
    for (heading, entries) in sections {
        roff.control("SH", [*heading]);
        for (term, text) in entries.iter() {
            if term.is_empty() {
                roff.control("PP", []).text([roman(*text)]);
            } else {
                roff.control("TP", [])
                    .text([bold(*term)])
                    .text([roman(*text)]);
            }
        }
    }
    if !see_also.is_empty() {
        roff.control("SH", ["SEE ALSO"]);
        let refs: Vec<String> = see_also.iter().map(|p| format!("{p}(1)")).collect();
        roff.text([roman(refs.join(", "))]);
    }
    if !has_version {
        roff.control("SH", ["VERSION"])
            .text([roman(format!("nccl-perf {version}"))]);
    }
    roff.to_writer(&mut out).map_err(io)?;
    if has_version {
        man.render_version_section(&mut out).map_err(io)?;
    }
    Ok(out)
}

/// The programs named on the command line, or the default ones.
fn programs(m: &ArgMatches) -> Result<Vec<Program>, ToolError> {
    let suffix = m.get_one::<String>("suffix").map_or("", String::as_str);
    match m.get_many::<String>("PROGRAM") {
        Some(names) => names.map(|n| program(n)).collect(),
        None => Ok(default_programs(suffix)),
    }
}

/// Writes `text` to `dir/name` (creating `dir`) and says so on stderr.
fn write_file(dir: &str, name: &str, text: &[u8]) -> Result<(), ToolError> {
    std::fs::create_dir_all(dir).map_err(|source| ToolError::Write {
        path: dir.to_string(),
        source,
    })?;
    let path = Path::new(dir).join(name);
    nccl_perf_report::output_file::replace(&path, text).map_err(|source| ToolError::Write {
        path: path.display().to_string(),
        source,
    })?;
    nccl_perf_cli::eline!("nccl-perf: wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tool documents the benchmarks from the low crates, never through the GPU core.
    #[test]
    fn the_tool_does_not_depend_on_the_benchmark_core() {
        let manifest = include_str!("../Cargo.toml");
        assert!(!manifest.contains("nccl-perf-bench"), "{manifest}");
    }

    /// `docs/options.md` is what [`options_markdown`] makes; `UPDATE_DOCS=1` rewrites it.
    #[test]
    fn options_doc_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/options.md");
        let want = options_markdown();
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).expect("write docs/options.md");
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/options.md is out of date: UPDATE_DOCS=1 cargo test --lib options_doc rewrites it"
        );
    }

    #[test]
    fn program_names_resolve_with_suffixes() {
        assert_eq!(program("nccl-perf").ok(), Some(Program::Tool));
        assert_eq!(
            program("nccl-perf-compare").ok(),
            Some(Program::ToolSubcommand("compare".into()))
        );
        let op = |name: &str| match program(name) {
            Ok(Program::Benchmark { name, bench }) => Some((name, bench.operation)),
            _ => None,
        };
        assert_eq!(
            op("reduce_scatter_perf_mpi"),
            Some(("reduce_scatter_perf_mpi".into(), "ReduceScatter"))
        );
        assert_eq!(
            op("alltoallv_perf"),
            Some(("alltoallv_perf".into(), "AlltoAllv"))
        );
        assert_eq!(op("reduce_perf"), Some(("reduce_perf".into(), "Reduce")));
        let e = program("all_reduce").unwrap_err();
        assert!(e.to_string().contains("all_reduce_perf"), "{e}");
        assert!(program("nccl-perf-bogus").is_err());
    }

    #[test]
    fn benchmark_command_keeps_parsing_options() {
        // The documented command is the parser's: every option, short and long, is there.
        let cmd = benchmark_command("all_reduce_perf", "AllReduce");
        for o in nccl_perf_cli::OPTIONS {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_id() == o.long)
                .unwrap_or_else(|| panic!("--{} missing", o.long));
            assert_eq!(arg.get_short(), o.short);
            assert!(arg.get_help().is_some(), "--{} has no help", o.long);
        }
        let hidden: Vec<_> = cmd
            .get_arguments()
            .filter(|a| a.is_hide_set())
            .map(|a| a.get_id().as_str())
            .collect();
        assert_eq!(hidden, ["ignored"]);
    }
}
