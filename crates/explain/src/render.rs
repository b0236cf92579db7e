//! The per-size lines that group consecutive rows where NCCL made the same choice, and the
//! number formatting of every line (re-exported from the crate's lowest layer). Below the
//! verdict, which calls it; above the observed facts and the per-row fields it reads.

use crate::observed::{Path, Row};
use crate::rows::RowFields;
pub use crate::units::{gbs, pct, size};

/// The transport path in words ([`Path::in_words`]).
pub fn path(p: &Path) -> String {
    p.in_words()
}

/// `a–b` for a range of values, `a` when they agree.
fn range<T: PartialOrd + Copy>(vals: &[T], show: impl Fn(T) -> String) -> Option<String> {
    let lo = *vals
        .iter()
        .min_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal))?;
    let hi = *vals
        .iter()
        .max_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal))?;
    Some(if lo == hi {
        show(lo)
    } else {
        format!("{}–{}", show(lo), show(hi))
    })
}

/// One line per run of consecutive sizes with the same algorithm, protocol and path (both
/// halves of a size together): channels, NCCL's predicted busbw and measured/predicted, and
/// the pair NCCL's model rated best when it is not the one used.
/// Rows without NCCL's report (counted on a line of their own) neither get a line nor split a
/// run: a one-rank sendrecv reports its out-of-place halves only.
pub fn size_lines(rows: &[Row], fields: &[RowFields]) -> Vec<String> {
    let seen: Vec<&RowFields> = fields.iter().take(rows.len()).filter(|f| f.seen).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < seen.len() {
        // Rows with NCCL's model alone are told apart by the pair the model rated fastest,
        // which is all they say.
        let key = |r: &RowFields| {
            let best = model_only(r).then(|| r.best_pair.clone()).flatten();
            (r.algo.clone(), r.proto.clone(), r.path.clone(), best)
        };
        let k = key(seen[i]);
        let mut j = i + 1;
        while j < seen.len() && key(seen[j]) == k {
            j += 1;
        }
        let group = &seen[i..j];
        let sizes =
            range(&group.iter().map(|f| f.bytes).collect::<Vec<_>>(), size).unwrap_or_default();
        let model_only = model_only(group[0]);
        let choice = match (&k.0, &k.1) {
            (Some(a), Some(p)) => format!("{a}/{p}"),
            (Some(a), None) => a.clone(),
            (None, Some(p)) => format!("point-to-point/{p}"),
            (None, None) if model_only => "algorithm and protocol not reported".into(),
            (None, None) => "point-to-point".into(),
        };
        let mut line = format!("{sizes}: {choice}");
        let ch: Vec<u32> = group.iter().filter_map(|f| f.channels).collect();
        if let Some(c) = range(&ch, |c| c.to_string()) {
            line += &format!(", {c} channels");
        }
        line += &format!(", {}", k.2);
        let pred: Vec<f64> = group.iter().filter_map(|f| f.predicted_busbw).collect();
        let of_model: Vec<f64> = group.iter().filter_map(|f| f.percent_of_model).collect();
        let predicted = range(&pred, gbs).zip(range(&of_model, pct));
        if let (Some((p, m)), false) = (&predicted, model_only) {
            line += &format!("; NCCL's model: busbw {p}, measured {m} of it");
        }
        let better: Vec<&str> = group
            .iter()
            .filter_map(|f| f.best_pair.as_deref())
            .filter(|b| !crate::observed::same_name(b, Some(&choice)))
            .collect();
        if let Some(b) = better.first() {
            let rated = if model_only { "fastest" } else { "faster" };
            line += &format!("; the model rated {b} {rated} for {} row(s)", better.len());
            // Without NCCL's report the prediction is the fastest pair's (the one NCCL runs).
            if let (Some((p, m)), true) = (&predicted, model_only) {
                line += &format!(", predicting busbw {p} (measured {m} of it)");
            }
        }
        out.push(line);
        i = j;
    }
    out
}

/// A row with NCCL's model but not its profiler's report (NCCL 2.22, or a profiler of the
/// user's): no algorithm, protocol or path.
fn model_only(r: &RowFields) -> bool {
    r.algo.is_none() && r.proto.is_none() && r.path == Path::Unknown.in_words()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(8), "8 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(u64::MAX), "16777216 TiB");
        assert_eq!(gbs(352.4), "352 GB/s");
        assert_eq!(gbs(11.04), "11.0 GB/s");
        assert_eq!(gbs(f64::NAN), "n/a");
        assert_eq!(range(&[3, 1, 2], |v| v.to_string()).unwrap(), "1–3");
        assert_eq!(range::<u32>(&[], |v| v.to_string()), None);
    }
}
