//! `nccl-perf compare BASE NEW`: the metric of both runs size by size, their ratio, a summary
//! and a verdict against `--max-regression`.
//!
//! Rows are matched on (program, type, redop, root, size); when each side holds a single test
//! the program name is not part of the key, so a renamed binary still compares. The first row
//! of a key counts (later repeats, e.g. `-N` cycles, are ignored). A size regresses when its
//! value is worse than the base by more than the threshold: lower bandwidth, or higher time.
//! Sizes where the base value is 0 or not finite have no ratio and never regress.

use std::collections::HashMap;

use super::{Half, Metric};
use crate::report::RowResult;
use crate::report::format::c_g;
use crate::report::run::Run;

/// What to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// The quantity compared.
    pub metric: Metric,
    /// Which halves count.
    pub half: Half,
    /// Threshold in percent; `None` reports without a verdict.
    pub max_regression: Option<f64>,
    /// Sizes below this are shown but never regress (small sizes are latency-bound and noisy).
    pub min_size: u64,
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
) -> Result<Outcome, String> {
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
    for run in base {
        for b in &run.rows {
            let k = key(run, b, with_program);
            if !seen.insert(k.clone()) {
                continue;
            }
            let Some(n) = new_rows.get(&k) else {
                only_base += 1;
                continue;
            };
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
                        "{} B {} {half}: {} -> {} {unit} ({:+.1}%)",
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
    if matched == 0 {
        return Err(format!(
            "no row of {} matches a row of {} (same type, redop, root and size)",
            names.1, names.0
        ));
    }
    let only_new = new_rows.len().saturating_sub(matched);
    text += &format!("# {matched} sizes in both runs");
    if only_base + only_new > 0 {
        text += &format!(" ({only_base} only in base, {only_new} only in new)");
    }
    if ratios.is_empty() {
        text += &format!(
            "; no ratio: the base {} is 0 or missing everywhere{}\n",
            o.metric.name(),
            if o.metric == Metric::Busbw {
                " (one rank has no bus traffic; try --metric algbw)"
            } else {
                ""
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
    if let Some(limit) = o.max_regression {
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
    })
}
