//! What a run's own output says about whether its numbers can be trusted: wrong data, a FAILED
//! footer, NCCL/CUDA error lines, a missing footer (a crash or a cut log), no rows at all.
//!
//! `nccl-perf compare` refuses to call such a run OK, `parse` and `report` say so on stderr and
//! in their JSON (`nccl_perf_problems`), CSV (`problems` column) and Markdown output. Each
//! [`Problem`] is one line of text and belongs to one [`Check`] that the user may relax.

use std::fmt;

use super::run::Run;

/// A check that can be relaxed by name (`compare --allow NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// `#wrong` > 0 in a row, or `Out of bounds values : N FAILED`.
    Wrong,
    /// `Avg bus bandwidth : X FAILED` (below `NCCL_TESTS_MIN_BW`).
    MinBw,
    /// The test has no footer: it crashed, failed or the log was cut.
    Footer,
    /// NCCL/CUDA failure lines (an `# error:` line after a complete run is a note).
    Errors,
    /// No rows at all, or fewer rows than the base (`compare`).
    Rows,
    /// A different number of ranks than the base (`compare`).
    Ranks,
    /// A different collective, datatype or op than the base (`compare`).
    Collective,
}

impl Check {
    /// Every check, in the order their problems are listed.
    pub const ALL: [Check; 7] = [
        Check::Wrong,
        Check::MinBw,
        Check::Footer,
        Check::Errors,
        Check::Rows,
        Check::Ranks,
        Check::Collective,
    ];

    /// The name used by `--allow`.
    pub fn name(self) -> &'static str {
        match self {
            Check::Wrong => "wrong",
            Check::MinBw => "min-bw",
            Check::Footer => "footer",
            Check::Errors => "errors",
            Check::Rows => "rows",
            Check::Ranks => "ranks",
            Check::Collective => "collective",
        }
    }

    /// The check of that name.
    pub fn from_name(name: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// One reason not to trust a run (or a comparison), as one line of text.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The check it fails.
    pub check: Check,
    /// What is wrong, one line, no trailing period.
    pub text: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn problem(check: Check, text: String) -> Problem {
    Problem { check, text }
}

/// The problems a run shows by itself, in [`Check::ALL`] order. Empty for a healthy run.
pub fn problems(run: &Run) -> Vec<Problem> {
    let mut out = Vec::new();
    let (mut halves, mut values) = (0usize, 0f64);
    let mut first = None;
    // An `error` column holds the largest deviation, not a count: the footer's out-of-bounds
    // count is that layout's verdict.
    let rows = if run.text.error_column {
        &[][..]
    } else {
        &run.rows[..]
    };
    for r in rows {
        for (h, name) in [(&r.out_of_place, "out-of-place"), (&r.in_place, "in-place")] {
            if let Some(w) = h.wrong
                && (w > 0.0 || w.is_nan())
            {
                halves += 1;
                values += if w.is_nan() { 0.0 } else { w };
                first.get_or_insert(format!("{} B {} {} {name}", r.size, r.dtype, r.op));
            }
        }
    }
    if let Some(first) = first {
        out.push(problem(
            Check::Wrong,
            format!(
                "wrong data: #wrong > 0 in {halves} measurement(s), {values} wrong values in all \
                 (first: {first})"
            ),
        ));
    }
    if let Some(s) = &run.summary
        && s.oob_errors > 0
    {
        out.push(problem(
            Check::Wrong,
            format!("footer: Out of bounds values : {} FAILED", s.oob_errors),
        ));
    }
    if let Some(s) = &run.summary
        && s.min_bw_ok == Some(false)
    {
        out.push(problem(
            Check::MinBw,
            "footer: Avg bus bandwidth FAILED (below NCCL_TESTS_MIN_BW)".to_string(),
        ));
    }
    let mut errors: Vec<&str> = error_lines(run).collect();
    // The line that says most is named: NCCL's error string before a signal or a trace.
    errors.sort_by_key(|l| super::parse::failure_weight(l));
    if let Some(gap) = &run.text.footer_gap
        && run.summary.is_some()
    {
        out.push(problem(
            Check::Footer,
            format!("footer incomplete: {gap} (the log leaves it out)"),
        ));
    }
    if run.summary.is_none() {
        let why = match &run.text.stopped {
            _ if run.text.hang.is_some() => format!(
                "the hang watch ended it: {}",
                run.text.hang.as_deref().unwrap_or_default()
            ),
            _ if !errors.is_empty() => "it failed".to_string(),
            Some(stopped) => {
                format!("{stopped}: the log is cut short, or the job hung or was killed")
            }
            None => "the log is cut short, or the program hung or was killed".to_string(),
        };
        out.push(problem(
            Check::Footer,
            format!(
                "no footer: the test stopped after {} row(s) ({why})",
                run.rows.len()
            ),
        ));
    }
    if let Some(first) = errors.first() {
        let more = if errors.len() > 1 {
            format!(" (+{} more error line(s))", errors.len() - 1)
        } else {
            String::new()
        };
        out.push(problem(
            Check::Errors,
            format!("error: {}{more}", first.trim()),
        ));
    }
    if let Some((line, why)) = run.text.broken_lines.first() {
        let more = match run.text.broken_lines.len() {
            1 => String::new(),
            n => format!(" (+{} more unreadable line(s))", n - 1),
        };
        out.push(problem(
            Check::Rows,
            format!("unreadable line {line}: {why}{more}"),
        ));
    }
    if run.rows.is_empty() {
        let why = if run.summary.is_some() {
            "the log leaves the table's rows out (its footer is there)"
        } else {
            "nothing was measured"
        };
        out.push(problem(Check::Rows, format!("no rows: {why}")));
    }
    out
}

/// The failure lines a run carries: nccl-tests' `Test NCCL/CUDA failure` lines and traces.
/// The `# error:` line after a footer is not one of them ([`notes`]).
pub fn error_lines(run: &Run) -> impl Iterator<Item = &str> {
    run.text
        .extra_lines
        .iter()
        .map(|(_, l)| l.as_str())
        .filter(|l| super::parse::is_failure_line(l))
}

/// What a run says that does not make it untrustworthy, one line each. nccl-tests ends every
/// run with NCCL's last error message when there is one (`# error: ...`, after the footer):
/// NCCL sets it while probing on runs that succeed (2.32's `RMA/Socket : rma_socket requires
/// GDRCopy; and GDR Copy is not available`, even on one GPU), so after a complete run it is a
/// note, and the run's own checks (footer, `#wrong`, failure lines) decide.
pub fn notes(run: &Run) -> Vec<String> {
    run.summary
        .iter()
        .map(|s| s.last_error.trim())
        .filter(|e| !e.is_empty())
        .map(|e| {
            format!("NCCL's last error message after a complete run (not a failure by itself): {e}")
        })
        .collect()
}

/// The notes of `run` as lines for stderr: `file:line program: note`.
pub fn describe_notes(run: &Run) -> Vec<String> {
    notes(run)
        .iter()
        .map(|n| format!("{}: {n}", location(run)))
        .collect()
}

/// The number of ranks of a run, when its devices are known: one device line per GPU in a
/// log; upstream's JSON keeps one per process, each with `-t × -g` ranks.
pub fn ranks(run: &Run) -> Option<usize> {
    if run.devices.is_empty() {
        return None;
    }
    let mut processes: Vec<(&str, u32)> = run
        .devices
        .iter()
        .map(|d| (d.hostname.as_str(), d.pid))
        .collect();
    processes.sort_unstable();
    processes.dedup();
    let per_process = usize::try_from(run.info.nthreads.max(1) * run.info.ngpus.max(1)).ok()?;
    if processes.len() == run.devices.len() && per_process > 1 {
        Some(processes.len() * per_process)
    } else {
        Some(run.devices.len())
    }
}

/// The number of ranks a run's own numbers imply, for a log without device lines (an excerpt
/// from the table): busbw is algbw times the benchmark's factor, one of three forms
/// ([`nccl_perf_facts::BusFactor`]): 2(n-1)/n (all_reduce), (n-1)/n (the benchmarks that share
/// their data among the ranks: all_gather, alltoall, scatter, ...) or 1 (broadcast, reduce,
/// sendrecv, hypercube, ...). The first two ranges do not overlap, so the ratio of the row with
/// the largest algbw gives n. `None` when the ratio is 1 (a factor of 1, or all_reduce on 2
/// ranks) or too imprecise to tell.
pub fn ranks_from_bandwidth(run: &Run) -> Option<usize> {
    let (alg, bus) = largest_bandwidths(run)?;
    // n from the ratio, for the ratio's range: all_reduce's 2(n-1)/n lies in [1, 2), the
    // others' (n-1)/n in [0.5, 1).
    let n_of = |r: f64| {
        if (1.01..2.0).contains(&r) {
            Some(2.0 / (2.0 - r))
        } else if (0.45..0.99).contains(&r) {
            Some(1.0 / (1.0 - r))
        } else {
            None
        }
    };
    // The values as printed are rounded to their last digit (two decimals; one from 1000 GB/s,
    // none from 10000, as the columns are 7 wide): n is known to the range the rounding allows,
    // and only when one whole number lies in it.
    let half_digit = |v: f64| {
        if v >= 10_000.0 {
            0.5
        } else if v >= 1_000.0 {
            0.05
        } else {
            0.005
        }
    };
    let low = n_of((bus - half_digit(bus)) / (alg + half_digit(alg)))?;
    let high = n_of((bus + half_digit(bus)) / (alg - half_digit(alg)))?;
    let (first, last) = (low.ceil(), high.floor());
    if first != last || !(2.0..=1_000_000.0).contains(&first) {
        return None;
    }
    // An excerpt's device lines may show a higher rank than the ratio allows: the numbers and
    // the lines disagree, and neither is taken.
    let n = first as usize;
    if ranks_at_least(run).is_some_and(|least| n < least) {
        return None;
    }
    Some(n)
}

/// The fewest ranks a run can have when only some of its device lines are in the log (an
/// excerpt that starts at a later device line): one more than the highest rank shown.
pub fn ranks_at_least(run: &Run) -> Option<usize> {
    run.text
        .partial_devices
        .iter()
        .filter_map(|d| usize::try_from(d.rank).ok())
        .max()
        .map(|r| r + 1)
}

/// Why `run`'s numbers cannot be trusted, one line each (empty for a sound run).
pub fn problem_lines(run: &Run) -> Vec<String> {
    problems(run).iter().map(ToString::to_string).collect()
}

/// The problems of `run` as lines for stderr: `file:line: program: problem`.
pub fn describe(run: &Run) -> Vec<String> {
    problems(run)
        .iter()
        .map(|p| format!("{}: {p}", location(run)))
        .collect()
}

/// (algbw, busbw) of the out-of-place half with the largest algbw, when their ratio can be
/// read: two decimals are printed, so below 5 GB/s it is too coarse (`None`).
fn largest_bandwidths(run: &Run) -> Option<(f64, f64)> {
    let row = run
        .rows
        .iter()
        .filter(|r| r.out_of_place.algbw.is_finite() && r.out_of_place.busbw.is_finite())
        .max_by(|a, b| a.out_of_place.algbw.total_cmp(&b.out_of_place.algbw))?;
    let (alg, bus) = (row.out_of_place.algbw, row.out_of_place.busbw);
    (alg >= 5.0).then_some((alg, bus))
}

/// The program a run that does not name it (an excerpt, a log without its header) shows by
/// its numbers, with the reason as a sentence: all_reduce when busbw/algbw of its largest row is
/// 2(n−1)/n for the run's rank count, or above 1 when the count is unknown (no other benchmark
/// has a factor above 1). `None` when the run names its program, or nothing can be told.
pub fn inferred_program(run: &Run) -> Option<(&'static str, String)> {
    if !run.info.program.is_empty() {
        return None;
    }
    let (alg, bus) = largest_bandwidths(run)?;
    let nranks = ranks(run)
        .or_else(|| ranks_from_bandwidth(run))
        .unwrap_or(0);
    let why = if nranks == 0 {
        // Too many ranks to tell how many from the printed digits: still above 1.
        (bus / alg > 1.05).then(|| {
            "the log does not name its test: all_reduce inferred from busbw/algbw above 1 (no \
             other benchmark has a factor above 1)"
                .to_string()
        })
    } else {
        let factor = nccl_perf_facts::benchmarks::ALL_REDUCE.bus_factor(nranks);
        (nranks > 2 && ((bus / alg) / factor - 1.0).abs() < 0.01).then(|| {
            format!(
                "the log does not name its test: all_reduce inferred from busbw/algbw = \
                 2(n−1)/n with n = {nranks} (no other benchmark has a factor above 1)"
            )
        })
    }?;
    Some(("all_reduce_perf", why))
}

/// The run's program as tables name it: its own, else the one its numbers show
/// ([`inferred_program`]), else empty.
pub fn program(run: &Run) -> &str {
    match inferred_program(run) {
        Some((p, _)) => p,
        None => &run.info.program,
    }
}

/// `file:first_line program` of a run, for messages.
pub fn location(run: &Run) -> String {
    let program = if run.info.program.is_empty() {
        "(unnamed test)"
    } else {
        &run.info.program
    };
    if run.source.first_line > 0 {
        format!("{}:{} {program}", run.source.file, run.source.first_line)
    } else {
        format!("{} {program}", run.source.file)
    }
}

#[cfg(test)]
mod tests {
    use super::problem_lines;
    use crate::parse::{ParseOptions, parse_log};
    use crate::run::Run;
    use nccl_perf_facts::{BENCHMARKS, BusFactor};

    /// The first 11 lines of a complete v2.19.6 test (one GPU): it stops after its first row.
    const CUT_AFTER_ONE_ROW: &str = "\
# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 4(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1402 on         vm device  0 [0000:00:06] NVIDIA H200
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
        1024           256     float     sum      -1     7.87    0.13    0.00       0     0.44    2.33    0.00       0
";

    fn one(text: &str) -> Run {
        let runs =
            parse_log(text, "test.log", &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(runs.len(), 1, "{runs:#?}");
        runs.into_iter().next().unwrap_or_else(|| panic!("one run"))
    }

    #[test]
    fn a_truncated_log_says_where_it_stopped() {
        let problems = problem_lines(&one(CUT_AFTER_ONE_ROW));
        assert!(
            problems[0]
                .contains("no footer: the test stopped after 1 row(s) (the log ends at line 11"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_hung_run_says_the_hang_watch_ended_it() {
        let log = format!(
            "{CUT_AFTER_ONE_ROW}vnode0: hang: rank 2 (vnode2, pid 77) never started operation 30 of the run\n"
        );
        let problems = problem_lines(&one(&log));
        assert!(
            problems[0].contains(
                "no footer: the test stopped after 1 row(s) (the hang watch ended it: hang: rank 2 (vnode2"
            ),
            "{problems:?}"
        );
    }

    #[test]
    fn invalid_number_of_gpus_is_the_failure() {
        let log = "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 99 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n#\n# Using devices\nInvalid number of GPUs: 297 requested but only 8 were found.\n .. nccl-badgpus pid 49: Test failure common.cu:1454\nPlease check the number of processes and GPUs per process.\n";
        let run = one(log);
        let problems = problem_lines(&run);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("error: Invalid number of GPUs: 297 requested")),
            "{problems:?}"
        );
    }

    /// [`super::ranks_from_bandwidth`] inverts 2(n-1)/n and (n-1)/n and takes 1 for no answer:
    /// every factor of the benchmark table is one of these (a new form fails to compile here).
    #[test]
    fn the_factors_are_the_ones_the_ratio_inverts() {
        for b in BENCHMARKS {
            let f = b.bus.of(8);
            match b.bus {
                BusFactor::TwiceShare => assert!((1.0..2.0).contains(&f), "{}", b.name),
                BusFactor::Share => assert!((0.5..1.0).contains(&f), "{}", b.name),
                BusFactor::One => assert_eq!(f, 1.0, "{}", b.name),
            }
        }
    }
}
