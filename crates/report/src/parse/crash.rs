//! A run that died before its table: a log with no nccl-tests table or header at all, but
//! the lines of a crash — nccl-tests' own failure lines, NCCL's fatal warnings, a signal that
//! Open MPI or the launcher reports. Such a log is a failed run, not unreadable input.

use super::lines;
use crate::RunInfo;
use crate::run::{Run, Source, TextDetails, equivalent_args};

/// The failed run of a log that has no test but failure lines (`lines`: every line of the log
/// with its number, launcher prefixes taken off, in order); `None` when it has none. The
/// program comes from a command line before the first failure, the NCCL version from NCCL's
/// own version line.
pub fn failed_run(file: &str, lines: &[(usize, &str)]) -> Option<Run> {
    let failures: Vec<(usize, &str)> = lines
        .iter()
        .copied()
        .filter(|(_, l)| lines::is_failure(l))
        .collect();
    let (first, _) = *failures.first()?;
    let (last, _) = *failures.last()?;
    let program = lines
        .iter()
        .take_while(|(n, _)| *n < first)
        .filter_map(|(_, l)| lines::command_program(l))
        .last()
        .unwrap_or_default();
    let nccl_version = lines
        .iter()
        .find_map(|(_, l)| lines::nccl_version_code(l))
        .unwrap_or(0);
    let info = RunInfo {
        program,
        ..RunInfo::default()
    };
    let args = equivalent_args(&info, false);
    let source = Source {
        file: file.to_string(),
        first_line: first,
        last_line: last,
    };
    let text = TextDetails {
        no_header: true,
        table_header: false,
        extra_lines: failures.iter().map(|(_, l)| (0, l.to_string())).collect(),
        ..TextDetails::default()
    };
    Some(Run {
        args,
        ..Run::from_log(info, nccl_version, source, text)
    })
}
