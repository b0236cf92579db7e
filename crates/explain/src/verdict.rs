//! [`explain`]: a run, this node's hardware and the SKU table in; lines, per-row fields and a
//! verdict in plain words out. Every figure comes from the input; what is missing is said.

use serde::Serialize;

use crate::ceiling::{Ceiling, Shape, ceiling};
use crate::hardware::Hardware;
use crate::observed::{Capture, Run};
use crate::render::size_lines;
pub use crate::rows::{BANDWIDTH_BOUND, LARGE, RowFields};
use crate::rows::{collective_name, large_rows, net_of, ratio, row_fields};
use crate::sku::{Expectation, SkuTable};
use crate::units::{gbs, size};

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

#[cfg(test)]
mod tests;
