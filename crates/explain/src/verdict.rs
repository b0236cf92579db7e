//! [`explain`]: a run, this node's hardware and the SKU table in; lines, per-row fields and a
//! verdict in plain words out. Every figure comes from the input; what is missing is said.

use serde::Serialize;

use crate::ceiling::{Ceiling, Scope, Shape, ceiling};
use crate::hardware::Hardware;
use crate::observed::{Capture, Net, Path, Row, Run, same_name};
use crate::render::{gbs, pct, size, size_lines};
use crate::sku::{Expectation, SkuTable};
use nccl_perf_facts::benchmark;

/// Rows at or above this size are "large" for the verdict (else the largest third).
pub const LARGE: u64 = 1 << 30;

/// Below this size a collective is bound by latency, not by its links: a run whose largest
/// judged size is smaller is not compared with link ceilings or published (large-size)
/// figures, only with NCCL's model, which predicts the latency too.
pub const BANDWIDTH_BOUND: u64 = 16 << 20;

/// What explain says about one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Explanation {
    /// Lines, each printed by the caller after `# `.
    pub lines: Vec<String>,
    /// The verdict, one line.
    pub verdict: String,
    /// Per input row, in order: the fields for JSON and CSV.
    pub rows: Vec<RowFields>,
    /// Measured busbw over the large rows as a percentage of the expectation (the SKU table's
    /// figure, else NCCL's model), for the gate; `None` when there is nothing to expect.
    pub percent_of_expected: Option<f64>,
    /// What `percent_of_expected` compares with, in words.
    pub expected_basis: Option<String>,
}

/// explain's fields for one row (one half).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RowFields {
    /// Size, bytes.
    pub bytes: u64,
    /// The in-place half.
    pub in_place: bool,
    /// NCCL's report was captured for this row.
    pub seen: bool,
    /// Algorithm used.
    pub algo: Option<String>,
    /// Protocol used.
    pub proto: Option<String>,
    /// Channels used.
    pub channels: Option<u32>,
    /// Transport path in words.
    pub path: String,
    /// NCCL's predicted time for the pair it used, µs.
    pub predicted_us: Option<f64>,
    /// bytes × busbw factor ÷ predicted time, GB/s.
    pub predicted_busbw: Option<f64>,
    /// Measured busbw ÷ predicted busbw × 100.
    pub percent_of_model: Option<f64>,
    /// The pair with the lowest predicted time (`Ring/LL128`).
    pub best_pair: Option<String>,
    /// The prediction is for `best_pair`, not for a reported pair: NCCL's model was read but
    /// its choice was not (NCCL 2.22 has no profiler). NCCL runs the model's cheapest pair
    /// unless another tuner changes the table, and with ours loaded none does.
    pub model_pair_assumed: bool,
    /// The hardware's busbw ceiling for this row, GB/s.
    pub ceiling_busbw: Option<f64>,
    /// Measured busbw ÷ ceiling × 100.
    pub percent_of_ceiling: Option<f64>,
    /// The SKU table's figure, on the large rows, GB/s.
    pub expected_busbw: Option<f64>,
    /// Measured busbw ÷ that figure × 100.
    pub percent_of_expected: Option<f64>,
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    let r = a / b * 100.0;
    (a.is_finite() && b.is_finite() && b > 0.0 && r.is_finite()).then_some(r)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[v.len() / 2])
}

fn net_of(row: &Row) -> Option<&Net> {
    match row.seen.as_ref().map(|s| &s.path) {
        Some(Path::Network(n)) => Some(n),
        _ => None,
    }
}

/// Which rows the verdict judges: halves ≥ 1 GiB, else those in the largest third of sizes;
/// with one rank only out-of-place halves (in place NCCL does nothing).
fn large_rows(run: &Run) -> Vec<usize> {
    let usable = |r: &Row| run.nranks > 1 || !r.in_place;
    let mut sizes: Vec<u64> = run
        .rows
        .iter()
        .filter(|r| usable(r))
        .map(|r| r.bytes)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let cut = if sizes.last().is_some_and(|s| *s >= LARGE) {
        LARGE
    } else {
        sizes
            .get(sizes.len() - sizes.len().div_ceil(3))
            .copied()
            .unwrap_or(0)
    };
    (0..run.rows.len())
        .filter(|&i| usable(&run.rows[i]) && run.rows[i].bytes >= cut && !sizes.is_empty())
        .collect()
}

fn row_fields(run: &Run, row: &Row, c: &Ceiling) -> RowFields {
    let factor = benchmark(&run.collective).map_or(1.0, |b| b.bus_factor(run.nranks as usize));
    let mut f = RowFields {
        bytes: row.bytes,
        in_place: row.in_place,
        path: "path unknown".into(),
        ceiling_busbw: c.busbw_gbs,
        percent_of_ceiling: c.busbw_gbs.and_then(|b| ratio(row.busbw, b)),
        ..RowFields::default()
    };
    let Some(seen) = &row.seen else {
        return f;
    };
    f.seen = true;
    f.algo = seen.algo.clone();
    f.proto = seen.proto.clone();
    f.channels = seen.channels;
    f.path = crate::render::path(&seen.path);
    if let Some(model) = &seen.model {
        let usable = model.costs.iter().filter(|c| c.2.is_finite() && c.2 > 0.0);
        let best = usable.clone().min_by(|a, b| a.2.total_cmp(&b.2));
        f.best_pair = best.map(|b| format!("{}/{}", b.0, b.1));
        let used = if seen.algo.is_none() && seen.proto.is_none() {
            f.model_pair_assumed = best.is_some();
            best
        } else {
            usable.clone().find(|c| {
                same_name(&c.0, seen.algo.as_deref()) && same_name(&c.1, seen.proto.as_deref())
            })
        };
        if let Some(u) = used {
            f.predicted_us = Some(u.2);
            let predicted = row.bytes as f64 * factor / u.2 / 1e3;
            f.predicted_busbw = Some(predicted).filter(|p| p.is_finite());
            f.percent_of_model = ratio(u.2, row.time_us);
        }
    }
    f
}

/// Explains `run` against this node's `hw` and the `skus` table.
pub fn explain(run: &Run, hw: &Hardware, skus: &SkuTable) -> Explanation {
    let shape = Shape::of(run);
    let gpu = hw
        .gpu
        .as_ref()
        .map(|g| g.name.clone())
        .or_else(|| run.gpu_names.first().cloned());
    let mut lines = vec![headline(run, gpu.as_deref())];
    lines.extend(run.notes.iter().cloned());
    lines.extend(capture_lines(run));
    let ceilings: Vec<Ceiling> = run
        .rows
        .iter()
        .map(|r| {
            let algo = r.seen.as_ref().and_then(|s| s.algo.as_deref());
            ceiling(run, hw, skus, algo, net_of(r))
        })
        .collect();
    let mut rows: Vec<RowFields> = run
        .rows
        .iter()
        .zip(&ceilings)
        .map(|(r, c)| row_fields(run, r, c))
        .collect();
    lines.extend(size_lines(&run.rows, &rows));
    let large = large_rows(run);
    let expectations = gpu
        .as_deref()
        .map(|g| skus.expectations(g, &run.collective, run.nnodes, run.ranks_per_node))
        .unwrap_or_default();
    // Across nodes the figure is the network's: built-in rows of several networks for this
    // shape leave none to choose (neither a log nor the NICs say which row's network this is);
    // a row of the user's own file comes first and is used.
    let networks: std::collections::BTreeSet<&str> = expectations
        .iter()
        .filter_map(|e| e.network.as_deref())
        .collect();
    let by_network =
        run.nnodes > 1 && networks.len() > 1 && !expectations.first().is_some_and(|e| e.own);
    let expectation = if by_network {
        None
    } else {
        expectations.first().copied()
    };
    for &i in &large {
        if let Some(e) = expectation {
            rows[i].expected_busbw = Some(e.busbw_gbs);
            rows[i].percent_of_expected = ratio(run.rows[i].busbw, e.busbw_gbs);
        }
    }
    let basis_ceiling = large.first().map(|&i| &ceilings[i]).or(ceilings.first());
    if let Some(c) = basis_ceiling {
        let head = match (c.busbw_gbs, c.algbw_gbs) {
            (Some(b), _) => format!("hardware ceiling: busbw ≤ {} — ", gbs(b)),
            (None, Some(a)) => format!("hardware ceiling: algbw ≤ {} — ", gbs(a)),
            _ => "hardware ceiling: none — ".to_string(),
        };
        lines.push(head + &c.basis);
    }
    lines.extend(published_lines(
        run,
        gpu.as_deref(),
        &expectations,
        by_network,
    ));
    lines.extend(hw.notes.iter().map(|n| format!("hardware: {n}")));
    let judged = crate::judge::judge(
        run,
        hw,
        skus,
        &shape,
        &large,
        &rows,
        basis_ceiling,
        expectation,
        if by_network { &expectations } else { &[] },
    );
    Explanation {
        lines,
        verdict: judged.verdict,
        rows,
        percent_of_expected: judged.percent_of_expected,
        expected_basis: judged.expected_basis,
    }
}

/// The collective's name for the lines (a log from before nccl-tests named its tests has none).
pub(crate) fn collective_name(run: &Run) -> &str {
    if run.collective.is_empty() {
        "the collective (not named in the log)"
    } else {
        &run.collective
    }
}

/// The SKU table's figures for this run, or why there is none.
fn published_lines(
    run: &Run,
    gpu: Option<&str>,
    found: &[&Expectation],
    by_network: bool,
) -> Vec<String> {
    let missing = if gpu.is_none() {
        Some("the GPU model is not known (no device lines)")
    } else if run.collective.is_empty() {
        Some("the log does not name the collective")
    } else if run.nnodes == 0 || run.ranks_per_node == 0 {
        Some("the number of nodes or of GPUs per node is not known")
    } else {
        None
    };
    if let Some(why) = missing {
        return vec![format!("published: no figure can be chosen: {why}")];
    }
    let gpu = gpu.unwrap_or_default();
    if found.is_empty() {
        return vec![format!(
            "published: no SKU table row for {} on {} × {} {gpu} (--explain-sku adds one)",
            run.collective, run.nnodes, run.ranks_per_node
        )];
    }
    let mut lines: Vec<String> = found
        .iter()
        .enumerate()
        .map(|(i, e)| {
            format!(
                "published{}: busbw {}{} for {} on {} × {} {gpu}{} ({}{}): {}",
                if by_network {
                    " (not used)"
                } else if i == 0 {
                    ""
                } else {
                    " (also, not used)"
                },
                gbs(e.busbw_gbs),
                e.size
                    .map(|s| format!(" at {}", size(s)))
                    .unwrap_or_default(),
                e.collective,
                run.nnodes,
                e.gpus_per_node,
                e.network
                    .as_deref()
                    .map(|n| format!(", {n}"))
                    .unwrap_or_default(),
                e.measured,
                if e.approximate { "; approximate" } else { "" },
                e.source
            )
        })
        .collect();
    if by_network {
        lines.push(format!(
            "published: across nodes the figure is the network's, and the table's {} rows for \
             this shape are of different networks: none is used (--explain-sku FILE with your \
             network's row, or 'builtin | no' and yours alone)",
            found.len()
        ));
    }
    lines
}

fn headline(run: &Run, gpu: Option<&str>) -> String {
    let ranks = if run.nranks == 0 {
        "an unknown number of ranks".to_string()
    } else {
        format!("{} rank(s)", run.nranks)
    };
    let mut s = format!("explain: {} on {ranks}", collective_name(run));
    if run.nnodes > 0 {
        s += &format!(", {} node(s)", run.nnodes);
        if run.ranks_per_node > 0 {
            s += &format!(" × up to {} rank(s)", run.ranks_per_node);
        }
    }
    if let Some(g) = gpu {
        s += &format!(", {g}");
    }
    if run.nccl_version > 0 {
        let v = run.nccl_version;
        s += &format!(", NCCL {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
    }
    s
}

fn capture_lines(run: &Run) -> Vec<String> {
    let mut out = Vec::new();
    match &run.capture {
        Capture::FromLog => out.push(
            "NCCL's choices (algorithm, protocol, channels, path) and its cost model are not \
             in a log: run the benchmark with --explain to see them"
                .into(),
        ),
        Capture::Unavailable(why) => out.push(format!("NCCL's view not captured: {why}")),
        Capture::Live {
            profiler,
            tuner,
            notes,
        } => {
            // The generic line only where no note says why (one line per cause): an install
            // note (a plugin of the user's) or a version note (NCCL 2.22 has no profiler).
            if !profiler && notes.is_empty() {
                out.push(
                    "capture: our profiler plugin was not loaded: NCCL's algorithm, protocol, \
                     channels and path are not known"
                        .into(),
                );
            }
            if !tuner && notes.is_empty() {
                out.push(
                    "capture: our tuner plugin was not loaded: NCCL's cost model is not known"
                        .into(),
                );
            }
            out.extend(notes.iter().map(|n| format!("capture: {n}")));
            let missing = run.rows.iter().filter(|r| r.seen.is_none()).count();
            if missing > 0 && missing == run.rows.len() && run.nranks == 1 {
                // NCCL runs no collective algorithm for a one-rank communicator (it copies the
                // buffer itself) and its profiler reports nothing about that copy.
                out.push(
                    "one rank: NCCL runs no algorithm (it copies the buffer, or does nothing in \
                     place), so there is no algorithm, protocol, channel count or path to report"
                        .into(),
                );
            } else if missing > 0 {
                out.push(format!(
                    "{missing} of {} row(s) without NCCL's report",
                    run.rows.len()
                ));
                if missing == run.rows.len()
                    && run.collective == "broadcast"
                    && run.nccl_version >= BROADCAST_UNPROFILED
                {
                    out.push(UNPROFILED_BROADCAST.into());
                }
            }
        }
    }
    out
}

/// From this NCCL release (2.29) a broadcast reaches the profiler with no event.
const BROADCAST_UNPROFILED: i32 = 22900;

/// Why: NCCL queues a broadcast per root and, for a group of one root, rebuilds the task
/// without the profiler's mask (docs/explain.md, "Plugin versions").
const UNPROFILED_BROADCAST: &str = "capture: NCCL 2.29 and later report no profiler event for a broadcast (NCCL rebuilds the \
     task without the profiler's mask; seen with 2.31.2): its algorithm, protocol and channels \
     are not known, for any plugin version";

/// Median measured busbw of the large rows.
pub(crate) fn median_busbw(run: &Run, large: &[usize]) -> Option<f64> {
    median(large.iter().map(|&i| run.rows[i].busbw).collect())
}

/// Median measured algbw of the large rows.
pub(crate) fn median_of_algbw(run: &Run, large: &[usize]) -> Option<f64> {
    median(large.iter().map(|&i| run.rows[i].algbw).collect())
}

/// Median of a per-row percentage over the large rows.
pub(crate) fn median_of(
    rows: &[RowFields],
    large: &[usize],
    f: fn(&RowFields) -> Option<f64>,
) -> Option<f64> {
    median(large.iter().filter_map(|&i| f(&rows[i])).collect())
}

/// The scope of a ceiling, for the judge.
pub(crate) fn is_special(c: Option<&Ceiling>) -> Option<Scope> {
    c.map(|c| c.scope)
        .filter(|s| matches!(s, Scope::OneRank | Scope::OneGpuSeveralRanks))
}

/// `pct` for the judge's lines.
pub(crate) fn percent(v: f64) -> String {
    pct(v)
}

#[cfg(test)]
mod tests;
