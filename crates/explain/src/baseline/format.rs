//! The baseline file: text, one row per line, versioned by its first line, mergeable by
//! concatenation (docs/health.md "The baseline file").
//!
//! ```text
//! nccl-perf-baseline 1
//! row | collective=all_reduce | gpu=NVIDIA H100 80GB HBM3 | ranks=8 | nodes=1 | gpus_per_node=8 | bytes=8589934592 | place=out | busbw=361.2 | spread=358.9..362.0 | runs=358.9,361.2,362.0
//! ```
//!
//! `busbw` and `spread` are written for the reader; `runs` is what is read back (a row without
//! `runs` is one run of `busbw`). `metric=algbw` marks a row of one rank, whose figures are
//! algbw (busbw is 0 there by definition for most collectives). Rows of the same collective, shape, size and place are merged.

use super::{Baseline, Entry, JobShape};
use std::path::Path;

/// The version this program writes and reads.
pub const VERSION: u32 = 1;

/// The first line's word before the version.
pub const MAGIC: &str = "nccl-perf-baseline";

/// Why a baseline file could not be used: the SKU table's error (a file that cannot be read,
/// or a line that is wrong, with its file and line).
pub use crate::sku::Error;

/// Whether `text` starts as a baseline file does (its first line that is not blank or a
/// comment names the format).
pub fn is_baseline(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with(MAGIC))
}

/// Reads the baseline file at `path`.
pub fn load(path: &Path) -> Result<Baseline, Error> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        file: file.clone(),
        source,
    })?;
    parse(&text, &file)
}

/// Parses a baseline's text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Baseline, Error> {
    let mut b = Baseline::default();
    let mut versioned = false;
    for (i, raw) in text.lines().enumerate() {
        let err = |message: String| Error::Line {
            file: file.to_string(),
            line: i + 1,
            message,
        };
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if let Some(v) = l.strip_prefix(MAGIC) {
            // Files joined with `cat` repeat the line: each must be a version this reads.
            match v.trim().parse::<u32>() {
                Ok(VERSION) => versioned = true,
                _ => {
                    return Err(err(format!(
                        "`{l}`: this nccl-perf reads `{MAGIC} {VERSION}` files"
                    )));
                }
            }
            continue;
        }
        if !versioned {
            return Err(err(format!(
                "not a baseline file: its first line is `{MAGIC} {VERSION}` (made by `nccl-perf baseline`)"
            )));
        }
        b.add(row(l).map_err(err)?);
    }
    if !versioned {
        return Err(Error::Line {
            file: file.to_string(),
            line: 1,
            message: format!("not a baseline file: no `{MAGIC} {VERSION}` line"),
        });
    }
    Ok(b)
}

fn row(l: &str) -> Result<Entry, String> {
    let mut fields = l.split('|').map(str::trim);
    if fields.next() != Some("row") {
        return Err("a line is `row | key=value | ...`, a comment (#) or blank".into());
    }
    let mut kv: Vec<(&str, &str)> = Vec::new();
    for f in fields {
        let (k, v) = f
            .split_once('=')
            .ok_or_else(|| format!("`{f}`: expected key=value"))?;
        let (k, v) = (k.trim(), v.trim());
        const KEYS: [&str; 11] = [
            "collective",
            "gpu",
            "ranks",
            "nodes",
            "gpus_per_node",
            "bytes",
            "place",
            "metric",
            "busbw",
            "spread",
            "runs",
        ];
        if !KEYS.contains(&k) {
            return Err(format!("unknown key `{k}` (known: {})", KEYS.join(", ")));
        }
        if kv.iter().any(|(key, _)| *key == k) {
            return Err(format!("`{k}` given twice"));
        }
        kv.push((k, v));
    }
    let get = |k: &str| {
        kv.iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| *v)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("`{k}=` is missing"))
    };
    let count = |k: &str| -> Result<u32, String> {
        let v = get(k)?;
        v.parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{k}={v}: expected a count ≥ 1"))
    };
    let busbw = |v: &str| -> Result<f64, String> {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|b| b.is_finite() && *b >= 0.0)
            .ok_or_else(|| format!("`{v}`: expected a busbw in GB/s"))
    };
    let collective = get("collective")?;
    if nccl_perf_facts::benchmark(collective).is_none() {
        return Err(format!(
            "collective={collective}: not one of the benchmarks"
        ));
    }
    let bytes = get("bytes")?;
    let runs = match kv.iter().find(|(k, _)| *k == "runs") {
        Some((_, v)) => v.split(',').map(busbw).collect::<Result<Vec<_>, _>>()?,
        None => vec![busbw(get("busbw")?)?],
    };
    Ok(Entry {
        collective: collective.to_string(),
        shape: JobShape {
            gpu: get("gpu")?.to_string(),
            ranks: count("ranks")?,
            nodes: count("nodes")?,
            gpus_per_node: count("gpus_per_node")?,
        },
        bytes: bytes
            .parse()
            .map_err(|_| format!("bytes={bytes}: expected a size in bytes"))?,
        algbw: match kv.iter().find(|(k, _)| *k == "metric").map(|(_, v)| *v) {
            None | Some("busbw") => false,
            Some("algbw") => true,
            Some(m) => return Err(format!("metric={m}: expected busbw or algbw")),
        },
        in_place: match get("place")? {
            "in" => true,
            "out" => false,
            p => return Err(format!("place={p}: expected in or out")),
        },
        runs,
    })
}

/// A value as a row may hold it: no `|` (the separator) and no line break.
fn field(v: &str) -> String {
    v.replace(['|', '\n', '\r'], " ").trim().to_string()
}

/// A figure for the reader: at most three decimals, no trailing zeros.
fn short(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The baseline as its file's text, `made_from` named in a comment.
pub fn write(b: &Baseline, made_from: &[String]) -> String {
    let mut s = format!(
        "{MAGIC} {VERSION}\n# nccl-perf baseline: per collective, job shape, size and place, the busbw of known-good runs\n\
         # (busbw: their median, judged against; spread: lowest..highest; runs: each run's, read back).\n\
         # Files of this version can be joined (cat a b > c, or nccl-perf baseline a b -o c): rows of\n\
         # the same collective, shape, size and place are merged. docs/health.md describes the format.\n"
    );
    if !made_from.is_empty() {
        let from: Vec<String> = made_from.iter().map(|f| field(f)).collect();
        s += &format!("# made from: {}\n", from.join(", "));
    }
    for e in &b.entries {
        let (lo, hi) = e.spread();
        let runs: Vec<String> = e.runs.iter().map(|r| format!("{r}")).collect();
        s += &format!(
            "row | collective={} | gpu={} | ranks={} | nodes={} | gpus_per_node={} | bytes={} | place={}{} | busbw={} | spread={}..{} | runs={}\n",
            e.collective,
            field(&e.shape.gpu).replace(',', " "),
            e.shape.ranks,
            e.shape.nodes,
            e.shape.gpus_per_node,
            e.bytes,
            if e.in_place { "in" } else { "out" },
            if e.algbw { " | metric=algbw" } else { "" },
            short(e.busbw()),
            short(lo),
            short(hi),
            runs.join(",")
        );
    }
    s
}
