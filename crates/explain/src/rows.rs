//! explain's fields per row, computed from the observed row and its hardware ceiling, and the
//! statistics the judge and the verdict take over them: which rows are large, medians, ratios.
//! Below the judge and the verdict (both read it), above the observed facts and the ceilings.

use serde::Serialize;

use crate::ceiling::{Ceiling, Scope};
use crate::observed::{Net, Path, Row, Run, same_name};
use nccl_perf_facts::benchmark;

/// Rows at or above this size are "large" for the verdict (else the largest third).
pub const LARGE: u64 = 1 << 30;

/// Below this size a collective is bound by latency, not by its links: a run whose largest
/// judged size is smaller is not compared with link ceilings or published (large-size)
/// figures, only with NCCL's model, which predicts the latency too.
pub const BANDWIDTH_BOUND: u64 = 16 << 20;

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

pub(crate) fn ratio(a: f64, b: f64) -> Option<f64> {
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

pub(crate) fn net_of(row: &Row) -> Option<&Net> {
    match row.seen.as_ref().map(|s| &s.path) {
        Some(Path::Network(n)) => Some(n),
        _ => None,
    }
}

/// Which rows the verdict judges: halves ≥ 1 GiB, else those in the largest third of sizes;
/// with one rank only out-of-place halves (in place NCCL does nothing).
pub(crate) fn large_rows(run: &Run) -> Vec<usize> {
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

pub(crate) fn row_fields(run: &Run, row: &Row, c: &Ceiling) -> RowFields {
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
    f.path = seen.path.in_words();
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

/// The collective's name for the lines (a log from before nccl-tests named its tests has none).
pub(crate) fn collective_name(run: &Run) -> &str {
    if run.collective.is_empty() {
        "the collective (not named in the log)"
    } else {
        &run.collective
    }
}

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
