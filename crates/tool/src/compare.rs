//! `nccl-perf compare BASE NEW`: the metric of both runs size by size, their ratio, a summary
//! and a verdict against `--max-regression`.
//!
//! Rows are matched on (program, type, redop, root, size); when each side holds a single test
//! the program name is not part of the key, so a renamed binary still compares. The first row
//! of a key counts (later repeats, e.g. `-N` cycles, are ignored). A size regresses when its
//! value is worse than the base by more than the threshold: lower bandwidth, or higher time.
//! Sizes where the base value is 0 or not finite have no ratio and never regress.
//!
//! Before any ratio counts, both runs must be sound ([`health::problems`]: no wrong data, no
//! FAILED footer, a footer at all, no error line) and comparable (same collective, datatypes
//! and ops, same number of ranks, every base size present in the new run). Each failed check is
//! one `# problem:` line and makes the verdict BROKEN or MISMATCH; `--allow CHECK` relaxes one.

use std::collections::{BTreeSet, HashMap};

use super::error::ToolError;
use super::metric::{Half, Metric};
use nccl_perf_report::RowResult;
use nccl_perf_report::health::{self, Check};
use nccl_perf_report::numbers::c_g;
use nccl_perf_report::run::Run;

/// The verdict of a comparison, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A run is itself broken (wrong data, failure, no footer, no rows).
    Broken,
    /// The runs measured different things (collective, types, ops, ranks, sizes).
    Mismatch,
    /// A size regressed beyond `--max-regression`.
    Regression,
    /// None of the above.
    Ok,
}

/// What to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// The quantity compared.
    pub metric: Metric,
    /// Which halves count.
    pub half: Half,
    /// Threshold in percent; `None` reports without a verdict.
    pub max_regression: Option<f64>,
    /// Sizes below this are shown but never regress (small sizes are latency-bound and noisy).
    pub min_size: u64,
    /// Checks relaxed with `--allow`.
    pub allow: Vec<Check>,
}

/// The comparison's text and counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The table and summary lines.
    pub text: String,
    /// (row, half) pairs that have a ratio.
    pub compared: usize,
    /// Pairs beyond the threshold.
    pub regressed: usize,
    /// The overall verdict.
    pub verdict: Verdict,
}

type Key = (String, String, String, i64, u64);

fn key(run: &Run, r: &RowResult, with_program: bool) -> Key {
    let program = if with_program {
        run.info.program.clone()
    } else {
        String::new()
    };
    (program, r.dtype.clone(), r.op.clone(), r.root, r.size)
}

/// Compares `new` against `base`. Errors when no row of one matches a row of the other.
pub fn compare(
    base: &[Run],
    new: &[Run],
    names: (&str, &str),
    o: &CompareOptions,
) -> Result<Outcome, ToolError> {
    let with_program = base.len() > 1 || new.len() > 1;
    let mut new_rows: HashMap<Key, &RowResult> = HashMap::new();
    for run in new {
        for r in &run.rows {
            new_rows.entry(key(run, r, with_program)).or_insert(r);
        }
    }
    let unit = o.metric.unit();
    let mut text = format!(
        "# nccl-perf compare: {} ({unit}), {} is better\n# base: {}\n# new:  {}\n",
        o.metric.name(),
        if o.metric.higher_is_better() {
            "higher"
        } else {
            "lower"
        },
        names.0,
        names.1
    );
    text += &format!(
        "# {:>10}  {:>8}  {:>6}  {:>6}",
        "size", "type", "redop", "root"
    );
    for (half, name) in [(false, "oop"), (true, "ip")] {
        if o.half.includes(half) {
            text += &format!(
                "  {:>10}  {:>10}  {:>7}",
                format!("base {name}"),
                format!("new {name}"),
                "ratio"
            );
        }
    }
    text += "\n";

    let mut seen = std::collections::HashSet::new();
    let (mut matched, mut only_base, mut compared) = (0, 0, 0);
    let mut ratios = Vec::new();
    let mut regressions = Vec::new();
    let mut heading = None;
    for run in base {
        // Several tests a side (a `--collectives` log's sections, several logs): each test's
        // rows under its program's name, and the name in its regression lines.
        let program = if with_program {
            format!("{}: ", run.info.program)
        } else {
            String::new()
        };
        for b in &run.rows {
            let k = key(run, b, with_program);
            if !seen.insert(k.clone()) {
                continue;
            }
            let Some(n) = new_rows.get(&k) else {
                only_base += 1;
                continue;
            };
            if with_program && heading != Some(&run.info.program) {
                heading = Some(&run.info.program);
                text += &format!("# {}\n", run.info.program);
            }
            matched += 1;
            text += &format!("{:12}  {:>8}  {:>6}  {:>6}", b.size, b.dtype, b.op, b.root);
            for in_place in [false, true] {
                if !o.half.includes(in_place) {
                    continue;
                }
                let pick = |r: &RowResult| {
                    o.metric.of(if in_place {
                        &r.in_place
                    } else {
                        &r.out_of_place
                    })
                };
                let (bv, nv) = (pick(b), pick(n));
                let ratio = (bv.is_finite() && nv.is_finite() && bv > 0.0).then(|| nv / bv);
                text += &format!(
                    "  {:>10}  {:>10}  {:>7}",
                    c_g(bv),
                    c_g(nv),
                    ratio.map_or("-".to_string(), |r| format!("{r:.3}"))
                );
                let Some(ratio) = ratio else { continue };
                compared += 1;
                ratios.push(ratio);
                let change = if o.metric.higher_is_better() {
                    1.0 - ratio
                } else {
                    ratio - 1.0
                };
                if let Some(limit) = o.max_regression
                    && b.size >= o.min_size
                    && change * 100.0 > limit
                {
                    let half = if in_place { "in-place" } else { "out-of-place" };
                    regressions.push(format!(
                        "{program}{} B {} {half}: {} -> {} {unit} ({:+.1}%)",
                        b.size,
                        b.dtype,
                        c_g(bv),
                        c_g(nv),
                        (ratio - 1.0) * 100.0
                    ));
                }
            }
            text += "\n";
        }
    }
    let broken = soundness(base, new, &o.allow);
    let mismatched = comparability(base, new, only_base, &o.allow);
    if matched == 0 && broken.is_empty() && mismatched.is_empty() {
        return Err(ToolError::NoData(format!(
            "no row of {} matches a row of {} (same type, redop, root and size)",
            names.1, names.0
        )));
    }
    let only_new = new_rows.len().saturating_sub(matched);
    text += &format!("# {matched} sizes in both runs");
    if only_base + only_new > 0 {
        text += &format!(" ({only_base} only in base, {only_new} only in new)");
    }
    if matched == 0 {
        text += "; no size in common, nothing to compare\n";
    } else if ratios.is_empty() {
        let one_rank = rank_counts(base).0.iter().all(|n| *n == 1);
        text += &format!(
            "; no ratio: the base {} is 0 or missing everywhere{}\n",
            o.metric.name(),
            match o.metric {
                Metric::Busbw if one_rank => " (one rank has no bus traffic; try --metric algbw)",
                Metric::Time => "",
                _ => " (the table rounds small values to 0.00; try --metric time)",
            }
        );
    } else {
        // Ratios of 0 (a value that rounds to 0.00 in the table) have no logarithm.
        let positive: Vec<f64> = ratios.iter().copied().filter(|r| *r > 0.0).collect();
        let geo =
            (positive.iter().map(|r| r.ln()).sum::<f64>() / positive.len().max(1) as f64).exp();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
        text += &format!(
            "; new/base {}: geometric mean {geo:.3}, min {lo:.3}, max {hi:.3}\n",
            o.metric.name()
        );
    }
    let rank_notes = if o.allow.contains(&Check::Ranks) {
        Vec::new()
    } else {
        rank_notes(base, new)
    };
    let nccl_notes = [("base", base), ("new", new)]
        .into_iter()
        .flat_map(|(side, runs)| {
            runs.iter().flat_map(move |r| {
                health::describe_notes(r)
                    .into_iter()
                    .map(move |n| format!("{side} {n}"))
            })
        });
    for n in notes(base, "base")
        .into_iter()
        .chain(notes(new, "new"))
        .chain(rank_notes)
        .chain(nccl_notes)
    {
        text += &format!("# note: {n}\n");
    }
    for p in broken.iter().chain(&mismatched) {
        text += &format!("# problem: {p}\n");
    }
    let verdict = if !broken.is_empty() {
        Verdict::Broken
    } else if !mismatched.is_empty() {
        Verdict::Mismatch
    } else if !regressions.is_empty() {
        Verdict::Regression
    } else {
        Verdict::Ok
    };
    let relax = "; --allow CHECK accepts one";
    match verdict {
        Verdict::Broken => {
            text += &format!(
                "# verdict: BROKEN, {} problem(s) in the runs themselves{relax}\n",
                broken.len()
            );
        }
        Verdict::Mismatch => {
            text += &format!(
                "# verdict: MISMATCH, the runs did not measure the same thing ({} \
                 problem(s)){relax}\n",
                mismatched.len()
            );
        }
        _ => {}
    }
    if let (Some(limit), Verdict::Ok | Verdict::Regression) = (o.max_regression, verdict) {
        for r in &regressions {
            text += &format!("# regression: {r}\n");
        }
        let scope = if o.min_size > 0 {
            format!(" (sizes from {} B)", o.min_size)
        } else {
            String::new()
        };
        if regressions.is_empty() {
            text += &format!("# verdict: OK, no size regressed by more than {limit}%{scope}\n");
        } else {
            text += &format!(
                "# verdict: FAILED, {} regressed by more than {limit}%{scope}\n",
                regressions.len()
            );
        }
    }
    Ok(Outcome {
        text,
        compared,
        regressed: regressions.len(),
        verdict,
    })
}

/// The problems each run shows by itself, unless relaxed: `side: file:line program: problem`.
fn soundness(base: &[Run], new: &[Run], allow: &[Check]) -> Vec<String> {
    let mut out = Vec::new();
    for (side, runs) in [("base", base), ("new", new)] {
        for run in runs {
            for p in health::problems(run) {
                if !allow.contains(&p.check) {
                    out.push(format!("{side} {}: {p}", health::location(run)));
                }
            }
        }
    }
    out
}

/// What makes the two sides measure different things, unless relaxed.
fn comparability(base: &[Run], new: &[Run], only_base: usize, allow: &[Check]) -> Vec<String> {
    let mut out = Vec::new();
    // `all_reduce_perf_mpi` (a NAME_SUFFIX build) measures what `all_reduce_perf` does.
    let programs = |runs: &[Run]| -> BTreeSet<String> {
        runs.iter()
            .map(|r| match r.info.program.find("_perf") {
                Some(i) => r.info.program[..i + 5].to_string(),
                None => r.info.program.clone(),
            })
            .filter(|p| !p.is_empty())
            .collect()
    };
    let (bp, np) = (programs(base), programs(new));
    if !allow.contains(&Check::Collective) {
        if !bp.is_empty() && !np.is_empty() && !bp.is_subset(&np) {
            out.push(format!("collective: base {}, new {}", join(&bp), join(&np)));
        }
        let kinds = |runs: &[Run]| -> BTreeSet<String> {
            runs.iter()
                .flat_map(|r| r.rows.iter().map(|x| format!("{}/{}", x.dtype, x.op)))
                .collect()
        };
        let (bk, nk) = (kinds(base), kinds(new));
        if !bk.is_empty() && !nk.is_empty() && !bk.is_subset(&nk) {
            out.push(format!(
                "datatype/op: base {}, new {}",
                join(&bk),
                join(&nk)
            ));
        }
    }
    if !allow.contains(&Check::Ranks) {
        let (br, nr) = (rank_counts(base).0, rank_counts(new).0);
        if !br.is_empty() && !nr.is_empty() && br != nr {
            let show = |s: &BTreeSet<usize>| {
                s.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push(format!("ranks: base {}, new {}", show(&br), show(&nr)));
        }
    }
    if only_base > 0 && !allow.contains(&Check::Rows) {
        out.push(format!(
            "fewer rows: {only_base} row(s) of the base have no match in new"
        ));
    }
    out
}

/// The rank counts of one side: from the device lines, or else from busbw/algbw (an excerpt
/// without device lines); and whether any had to be inferred or stayed unknown.
fn rank_counts(runs: &[Run]) -> (BTreeSet<usize>, bool, bool) {
    let (mut set, mut inferred, mut unknown) = (BTreeSet::new(), false, false);
    for r in runs {
        match health::ranks(r) {
            Some(n) => {
                set.insert(n);
            }
            None => match health::ranks_from_bandwidth(r) {
                Some(n) => {
                    set.insert(n);
                    inferred = true;
                }
                None => unknown = true,
            },
        }
    }
    (set, inferred, unknown)
}

/// What the rank check could not see: counts inferred from the bandwidths, or not known at all.
fn rank_notes(base: &[Run], new: &[Run]) -> Vec<String> {
    let mut out = Vec::new();
    for (side, runs) in [("base", base), ("new", new)] {
        let (set, inferred, unknown) = rank_counts(runs);
        let show = set
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        if inferred {
            out.push(format!(
                "{side} has no device lines: {show} rank(s) inferred from busbw/algbw"
            ));
        }
        if unknown {
            out.push(format!(
                "{side} has no device lines and its busbw/algbw does not tell the rank count: \
                 ranks not checked"
            ));
        }
    }
    out
}

/// Several tests of one program on one side: only the first one's rows count.
fn notes(runs: &[Run], side: &str) -> Vec<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for r in runs {
        match counts.iter_mut().find(|(p, _)| *p == r.info.program) {
            Some((_, n)) => *n += 1,
            None => counts.push((&r.info.program, 1)),
        }
    }
    counts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(p, n)| {
            let p = if p.is_empty() { "(unnamed test)" } else { p };
            format!("{side} holds {n} tests of {p}; for each size the first test's row is used")
        })
        .collect()
}

fn join(s: &BTreeSet<String>) -> String {
    s.iter().cloned().collect::<Vec<_>>().join(", ")
}
