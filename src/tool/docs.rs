//! `nccl-perf completions` and `nccl-perf man`: shell completion scripts and man pages generated
//! from the clap definitions the programs parse with — the tool's own, and the benchmarks'
//! ([`crate::cli::command_for_docs`]) — so they list exactly the options that are accepted.
//!
//! Program names may carry an install suffix (`all_reduce_perf_mpi`, nccl-tests' `NAME_SUFFIX`):
//! completions are keyed on the name the shell sees, so they are generated per installed name.

use std::io::Write;
use std::path::Path;

use clap::{Arg, ArgAction, ArgMatches, Command, ValueHint};
use clap_complete::{Generator, Shell};
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, line_break, roman};

/// The eleven benchmark programs as nccl-tests names them, each with the NCCL operation it times.
pub const BENCHMARKS: &[(&str, &str)] = &[
    ("all_reduce_perf", "AllReduce"),
    ("all_gather_perf", "AllGather"),
    ("broadcast_perf", "Broadcast"),
    ("reduce_perf", "Reduce"),
    ("reduce_scatter_perf", "ReduceScatter"),
    ("alltoall_perf", "AlltoAll"),
    ("alltoallv_perf", "AlltoAllv"),
    ("scatter_perf", "Scatter"),
    ("gather_perf", "Gather"),
    ("sendrecv_perf", "SendRecv"),
    ("hypercube_perf", "hypercube exchange"),
];

/// Environment variables every benchmark reads: (name, meaning).
const BENCHMARK_ENV: &[(&str, &str)] = &[
    (
        "NCCL_TESTS_DEVICE",
        "First GPU of each process, overriding the placement by local rank.",
    ),
    (
        "NCCL_TESTS_MIN_BW",
        "Exit 7 when the average bus bandwidth is below 0.9 times this many GB/s.",
    ),
    (
        "NCCL_TESTS_SPLIT, NCCL_TESTS_SPLIT_MASK",
        "Split the ranks into groups with communicators of their own (\"MOD 8\", \"DIV 8\", 0x7).",
    ),
    (
        "NCCL_PERF_BOOTSTRAP",
        "How the processes of a job meet: mpi, env, single, or auto (the default: MPI when built with it and started by an MPI launcher, else the launcher's environment, else one process).",
    ),
    (
        "NCCL_PERF_RENDEZVOUS",
        "host:port of the TCP rendezvous at rank 0, overriding the launcher's address (needed under mpirun without the MPI build).",
    ),
    (
        "NCCL_PERF_RENDEZVOUS_PORT",
        "Port of the Slurm rendezvous (default: derived from the job and step ids).",
    ),
    (
        "NCCL_PERF_BOOTSTRAP_TIMEOUT",
        "Seconds any wait for another process may take (default 120).",
    ),
    (
        "NCCL_PERF_LIBNCCL",
        "Path of the NCCL library to load (default libnccl.so.2, then libnccl.so).",
    ),
    (
        "RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, JOB_COMPLETION_INDEX",
        "torchrun and Kubernetes (Indexed Job) ranks and rendezvous address.",
    ),
    (
        "SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_STEP_NODELIST",
        "Slurm ranks under srun without --mpi; rank 0 is on the step's first node.",
    ),
    (
        "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, PMIX_RANK, PMI_RANK, PMI_SIZE",
        "MPI launchers (mpirun, srun --mpi=pmix).",
    ),
];

/// Environment variables only `alltoallv_perf` reads.
const ALLTOALLV_ENV: &[(&str, &str)] = &[
    (
        "NCCL_TESTS_ALLTOALLV_SPREAD",
        "Share of generated traffic, 0 to 1 (default 1).",
    ),
    (
        "NCCL_TESTS_ALLTOALLV_MATRIX_FILE, NCCL_TESTS_ALLTOALLV_MATRIX_SCALE",
        "A square matrix of byte counts (row = sender) and a factor applied to it.",
    ),
];

/// The exit codes of the benchmarks, as nccl-tests documents them.
const BENCHMARK_EXIT: &str = "0 success (and -h), 1 internal error, 2 CUDA failure, 3 NCCL failure, \
4 timeout, 5 not implemented (too few GPUs, an option this build does not support yet), \
6 invalid usage, 7 wrong data or bandwidth below NCCL_TESTS_MIN_BW, 255 argument error.";

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
    /// A benchmark installed as `name` (`all_reduce_perf`, `all_reduce_perf_mpi`), timing `op`.
    Benchmark { name: String, op: &'static str },
}

/// Resolves a program name: `nccl-perf`, `nccl-perf-<subcommand>`, or a benchmark name with
/// any install suffix.
fn program(name: &str) -> Result<Program, String> {
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
    BENCHMARKS
        .iter()
        .find(|(bench, _)| name.starts_with(bench))
        .map(|(_, op)| Program::Benchmark {
            name: name.to_string(),
            op,
        })
        .ok_or_else(|| {
            format!(
                "unknown program '{name}': use nccl-perf, nccl-perf-<subcommand> or a benchmark name ({}), optionally with a suffix such as _mpi",
                BENCHMARKS.iter().map(|(b, _)| *b).collect::<Vec<_>>().join(", ")
            )
        })
}

/// The default programs: `nccl-perf`, then the eleven benchmarks with `suffix`.
fn default_programs(suffix: &str) -> Vec<Program> {
    std::iter::once(Program::Tool)
        .chain(BENCHMARKS.iter().map(|(b, op)| Program::Benchmark {
            name: format!("{b}{suffix}"),
            op,
        }))
        .collect()
}

/// The documented command line of a benchmark installed as `program`, timing `op`: the
/// options the benchmarks parse ([`crate::cli::command_for_docs`]), with a description.
pub fn benchmark_command(program: &str, op: &str) -> Command {
    crate::cli::command_for_docs()
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
pub fn run_completions(m: &ArgMatches) -> Result<u8, String> {
    let shell = m
        .get_one::<Shell>("SHELL")
        .copied()
        .ok_or("a shell is required")?;
    let programs = programs(m)?;
    let dir = m.get_one::<String>("dir");
    let mut all = Vec::new();
    for p in &programs {
        let (name, mut cmd) = match p {
            Program::Tool => ("nccl-perf".to_string(), super::command()),
            Program::Benchmark { name, op } => (name.clone(), benchmark_command(name, op)),
            Program::ToolSubcommand(sub) => {
                return Err(format!(
                    "no completions of their own for subcommands: nccl-perf's cover 'nccl-perf {sub}'"
                ));
            }
        };
        let script = completion(shell, &mut cmd, &name)?;
        match dir {
            Some(d) => write_file(d, &shell.file_name(&name), &script)?,
            None => all.extend_from_slice(&script),
        }
    }
    if dir.is_none() {
        emit(&all)?;
    }
    Ok(0)
}

/// The completion script of `cmd` for `shell`, under the program name `name`.
pub fn completion(shell: Shell, cmd: &mut Command, name: &str) -> Result<Vec<u8>, String> {
    cmd.set_bin_name(name);
    cmd.build();
    let mut out = Vec::new();
    shell
        .try_generate(cmd, &mut out)
        .map_err(|e| format!("{shell} completions for {name}: {e}"))?;
    Ok(out)
}

/// `nccl-perf man`.
pub fn run_man(m: &ArgMatches) -> Result<u8, String> {
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
            None => emit(&text)?,
        }
    }
    Ok(0)
}

/// The man page of a program: (page name, roff text).
fn man_page(p: &Program) -> Result<(String, Vec<u8>), String> {
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
                .ok_or_else(|| format!("nccl-perf has no subcommand {sub}"))?;
            let name = format!("nccl-perf-{sub}");
            let text = render_page(
                &sub_cmd.display_name(name.clone()),
                &[("EXIT STATUS", &[("", TOOL_EXIT)])],
                &["nccl-perf"],
            )?;
            Ok((name, text))
        }
        Program::Benchmark { name, op } => {
            let cmd = benchmark_command(name, op);
            let mut env: Vec<(&str, &str)> = BENCHMARK_ENV.to_vec();
            if name.starts_with("alltoallv_perf") {
                env.extend_from_slice(ALLTOALLV_ENV);
            }
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
fn render_page(cmd: &Command, sections: &[Section], see_also: &[&str]) -> Result<Vec<u8>, String> {
    let version = env!("CARGO_PKG_VERSION");
    // Built, the command has the arguments clap adds itself (--help, --version).
    let mut cmd = cmd.clone();
    cmd.build();
    let has_version = cmd.get_version().is_some();
    let man = Man::new(cmd.clone())
        .source(format!("nccl-perf {version}"))
        .manual("nccl-perf");
    let mut out = Vec::new();
    let io = |e: std::io::Error| format!("man page: {e}");
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
fn programs(m: &ArgMatches) -> Result<Vec<Program>, String> {
    let suffix = m.get_one::<String>("suffix").map_or("", String::as_str);
    match m.get_many::<String>("PROGRAM") {
        Some(names) => names.map(|n| program(n)).collect(),
        None => Ok(default_programs(suffix)),
    }
}

/// Writes `text` to `dir/name` (creating `dir`) and says so on stderr.
fn write_file(dir: &str, name: &str, text: &[u8]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
    let path = Path::new(dir).join(name);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("nccl-perf: wrote {}", path.display());
    Ok(())
}

/// Writes bytes to standard output (a closed pipe is not an error).
fn emit(bytes: &[u8]) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("standard output: {e}"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_names_resolve_with_suffixes() {
        assert_eq!(program("nccl-perf"), Ok(Program::Tool));
        assert_eq!(
            program("nccl-perf-compare"),
            Ok(Program::ToolSubcommand("compare".into()))
        );
        assert_eq!(
            program("reduce_scatter_perf_mpi"),
            Ok(Program::Benchmark {
                name: "reduce_scatter_perf_mpi".into(),
                op: "ReduceScatter"
            })
        );
        assert_eq!(
            program("alltoallv_perf"),
            Ok(Program::Benchmark {
                name: "alltoallv_perf".into(),
                op: "AlltoAllv"
            })
        );
        let e = program("all_reduce").unwrap_err();
        assert!(e.contains("all_reduce_perf"), "{e}");
        assert!(program("nccl-perf-bogus").is_err());
    }

    #[test]
    fn benchmark_command_keeps_parsing_options() {
        // The documented command is the parser's: every option, short and long, is there.
        let cmd = benchmark_command("all_reduce_perf", "AllReduce");
        for o in crate::cli::OPTIONS {
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
