//! alltoallv_perf: one group of `ncclSend`/`ncclRecv` with a per-pair byte count, packed in peer
//! order; busbw = algbw · (n−1)/n with algbw from the larger of the largest per-rank send and
//! receive totals. In-place errors are not reported (`N/A`).
//!
//! The traffic comes from the environment, read once at start ([`AllToAllV::from_env`]):
//! - generated (default): from a per-rank total of `p·n·ts` bytes (`p` = 16-byte-rounded
//!   `count/n`), rank `i` sends rank `j` `(1−s)·total/n + s·d·total/(n(n−1)/2)` bytes, truncated
//!   and rounded down to 16, where `d = (j−i) mod n` and `s` = `NCCL_TESTS_ALLTOALLV_SPREAD`
//!   (default 1, clamped to 0..1). One rank sends all of `total`.
//! - matrix: `NCCL_TESTS_ALLTOALLV_MATRIX_FILE` holds a square matrix of non-negative byte counts
//!   (row = sender), at least n×n (the top-left n×n is used), each value multiplied by
//!   `NCCL_TESTS_ALLTOALLV_MATRIX_SCALE` (default 1, negative → 0), truncated and rounded down
//!   to 16. The count column is 0 and every size is the same, so `-b` must equal `-e`, and `-e`
//!   must hold the largest send or receive total.
//!
//! Unlike nccl-tests, malformed values are errors (exit 1) rather than silently defaulted.
//! `NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY` (upstream prints extra lines that split table rows) is
//! not supported: a warning says it is ignored.

use super::step::grouped;
use super::{
    Base, Benchmark, Collective, Counts, Fill, FillCtx, Geometry, Step, block_seed,
    round16_per_rank,
};
use crate::environment;
use crate::error::{Error, Result};
use crate::options::Options;
use nccl_perf_facts::benchmarks as facts;

/// Spread of generated traffic between uniform (0) and distance-weighted (1).
const SPREAD_ENV: &str = environment::ALLTOALLV_SPREAD.name;
/// Path of a traffic matrix file.
const MATRIX_ENV: &str = environment::ALLTOALLV_MATRIX_FILE.name;
/// Factor applied to every matrix value.
const SCALE_ENV: &str = environment::ALLTOALLV_MATRIX_SCALE.name;
/// Upstream's summary printing (not supported here).
const SUMMARY_ENV: &str = environment::ALLTOALLV_PRINT_SUMMARY.name;

/// Where per-pair byte counts come from.
#[derive(Debug, Clone, PartialEq)]
enum Traffic {
    /// Derived from the sweep size with this spread (0..=1).
    Generated { spread: f64 },
    /// From a file: `bytes[i·dim + j]` from rank `i` to rank `j`, scaled and rounded.
    Matrix {
        path: String,
        dim: usize,
        bytes: Vec<u64>,
    },
}

/// All-to-all with per-pair counts.
#[derive(Debug, Clone, PartialEq)]
pub struct AllToAllV {
    traffic: Traffic,
}

/// `x` rounded down to a multiple of 16.
fn down16(x: u64) -> u64 {
    x - x % 16
}

fn invalid(path: &str, what: impl std::fmt::Display) -> Error {
    Error::Internal(format!(
        "Invalid alltoallv traffic matrix file {path}: {what}"
    ))
}

/// A finite number from an environment variable (surrounding blanks allowed).
fn env_number(name: &str, value: &str, meaning: &str) -> Result<f64> {
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(Error::Internal(format!(
            "{name}='{value}' is not a number ({meaning})"
        ))),
    }
}

impl AllToAllV {
    /// Generated traffic with `spread` clamped to 0..=1.
    pub fn generated(spread: f64) -> AllToAllV {
        AllToAllV {
            traffic: Traffic::Generated {
                spread: spread.clamp(0.0, 1.0),
            },
        }
    }

    /// Matrix traffic from the text of file `path`; values are multiplied by `scale` (negative
    /// scales count as 0).
    pub fn from_matrix_text(path: &str, text: &str, scale: f64) -> Result<AllToAllV> {
        let scale = scale.max(0.0);
        let mut rows: Vec<(usize, Vec<&str>)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let row: Vec<&str> = line.split_whitespace().collect();
            if !row.is_empty() {
                rows.push((i + 1, row));
            }
        }
        let dim = rows.len();
        if dim == 0 {
            return Err(invalid(path, "it holds no numbers"));
        }
        let mut bytes = Vec::with_capacity(dim * dim);
        for (line, row) in &rows {
            if row.len() != dim {
                return Err(invalid(
                    path,
                    format!(
                        "line {line} has {} values but the file has {dim} rows; the matrix must be square",
                        row.len()
                    ),
                ));
            }
            for (col, word) in row.iter().enumerate() {
                let at = format!("line {line}, column {}", col + 1);
                let v = match word.parse::<f64>() {
                    Ok(v) if v.is_finite() => v,
                    _ => return Err(invalid(path, format!("{at}: '{word}' is not a number"))),
                };
                if v < 0.0 {
                    return Err(invalid(path, format!("{at}: {word} is negative")));
                }
                // `as` truncates toward zero and saturates.
                bytes.push(down16((v * scale) as u64));
            }
        }
        Ok(AllToAllV {
            traffic: Traffic::Matrix {
                path: path.to_string(),
                dim,
                bytes,
            },
        })
    }

    /// The traffic the environment asks for; errors are one line (exit code 1, as upstream's
    /// internal error). Warnings go to stderr.
    pub fn from_env(opts: &Options) -> Result<AllToAllV> {
        let (coll, warnings) = Self::from_lookup(|k| std::env::var(k).ok(), opts)?;
        for w in warnings {
            crate::eline!("{}: warning: {w}", crate::host::program());
        }
        Ok(coll)
    }

    /// [`AllToAllV::from_env`] with an explicit variable lookup; returns the warnings.
    fn from_lookup(
        var: impl Fn(&str) -> Option<String>,
        opts: &Options,
    ) -> Result<(AllToAllV, Vec<String>)> {
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let mut warnings = Vec::new();
        if let Some(v) = set(SUMMARY_ENV)
            && v.trim() != "0"
        {
            warnings.push(format!(
                "{SUMMARY_ENV} is not supported by nccl-perf; no summary lines are printed"
            ));
        }
        let Some(path) = set(MATRIX_ENV) else {
            if set(SCALE_ENV).is_some() {
                warnings.push(format!("{SCALE_ENV} is ignored without {MATRIX_ENV}"));
            }
            let spread = match set(SPREAD_ENV) {
                Some(v) => env_number(SPREAD_ENV, &v, "expected a value from 0 to 1")?,
                None => 1.0,
            };
            return Ok((Self::generated(spread), warnings));
        };
        if set(SPREAD_ENV).is_some() {
            warnings.push(format!("{SPREAD_ENV} is ignored with {MATRIX_ENV}"));
        }
        let scale = match set(SCALE_ENV) {
            Some(v) => env_number(SCALE_ENV, &v, "expected a factor such as 1 or 0.5")?,
            None => 1.0,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Error::Internal(format!(
                "Unable to read alltoallv traffic matrix file {path}: {e}"
            ))
        })?;
        let coll = Self::from_matrix_text(&path, &text, scale)?;
        coll.check_sizes(opts.min_bytes, opts.max_bytes)?;
        Ok((coll, warnings))
    }

    /// Matrix mode: every size is the same, so `-b` must equal `-e` (upstream's message).
    fn check_sizes(&self, min_bytes: u64, max_bytes: u64) -> Result<()> {
        if matches!(self.traffic, Traffic::Matrix { .. }) && min_bytes != max_bytes {
            return Err(Error::Internal(
                "-b and -e options must be set to the same value (e.g., -b 32M -e 32M) when using alltoallv traffic matrix mode.".into(),
            ));
        }
        Ok(())
    }

    /// Bytes rank `from` sends rank `to` on `n` ranks, for a per-peer param count `p`.
    fn bytes(&self, from: usize, to: usize, n: usize, p: usize, ts: usize) -> u64 {
        match &self.traffic {
            Traffic::Matrix { dim, bytes, .. } => {
                if from < *dim && to < *dim {
                    bytes[from * dim + to]
                } else {
                    0
                }
            }
            Traffic::Generated { spread } => {
                let total = (p * n * ts) as u64;
                if n <= 1 {
                    return down16(total);
                }
                let d = ((to + n - from) % n) as f64;
                let sumd = (n * (n - 1) / 2) as f64;
                let uniform = total as f64 / n as f64;
                let dist = d * total as f64 / sumd;
                down16(((1.0 - spread) * uniform + spread * dist) as u64)
            }
        }
    }

    /// Elements rank `from` sends rank `to`.
    fn count(&self, from: usize, to: usize, n: usize, p: usize, ts: usize) -> usize {
        (self.bytes(from, to, n, p, ts) / ts as u64) as usize
    }

    /// (send total, receive total) of `rank` in elements.
    fn totals(&self, rank: usize, n: usize, p: usize, ts: usize) -> (usize, usize) {
        (0..n).fold((0, 0), |(s, r), k| {
            (
                s + self.count(rank, k, n, p, ts),
                r + self.count(k, rank, n, p, ts),
            )
        })
    }
}

impl Collective for AllToAllV {
    fn facts(&self) -> &'static Benchmark {
        &facts::ALLTOALLV
    }

    /// `send`/`recv` are the largest per-rank totals; each rank's own totals stay in `self`.
    fn counts(&self, count: usize, nranks: usize, ts: usize) -> Counts {
        let p = match self.traffic {
            Traffic::Generated { .. } => round16_per_rank(count, nranks, ts),
            Traffic::Matrix { .. } => 0,
        };
        let (send, recv) = match self.traffic {
            // Every rank sends and receives the same total: O(n), not O(n²).
            Traffic::Generated { .. } => {
                let t = self.totals(0, nranks, p, ts).0;
                (t, t)
            }
            Traffic::Matrix { .. } => (0..nranks).fold((0, 0), |(ms, mr), r| {
                let (s, v) = self.totals(r, nranks, p, ts);
                (ms.max(s), mr.max(v))
            }),
        };
        Counts {
            send,
            recv,
            param: p,
            send_inplace_offset: 0,
            recv_inplace_offset: 0,
        }
    }

    /// Matrix mode: the file covers every rank, `-b` = `-e`, and `-e` holds the largest total.
    fn check_shape(&self, nranks: usize, min_bytes: u64, max_bytes: u64) -> Result<()> {
        let Traffic::Matrix { path, dim, .. } = &self.traffic else {
            return Ok(());
        };
        if *dim < nranks {
            return Err(invalid(
                path,
                format!(
                    "it is {dim}x{dim} but the run has {nranks} ranks; it needs at least {nranks} rows and columns"
                ),
            ));
        }
        self.check_sizes(min_bytes, max_bytes)?;
        let c = self.counts(0, nranks, 1);
        let need = c.send.max(c.recv) as u64;
        if max_bytes < need {
            return Err(Error::Internal(format!(
                "maxBytes (-e) must be at least {need} bytes as required by traffic matrix file {path} (got {max_bytes}). Increase -e."
            )));
        }
        Ok(())
    }

    /// For each peer in rank order: send the next chunk of the send buffer, receive into the
    /// next chunk of the receive buffer; zero counts are left out.
    fn plan(&self, g: &Geometry, emit: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        let (n, p, ts) = (g.nranks, g.counts.param, g.ts);
        grouped(emit, |emit| {
            let (mut sent, mut received) = (0, 0);
            for r in 0..n {
                let s = self.count(g.rank, r, n, p, ts);
                if s > 0 {
                    emit(Step::Send {
                        from: Base::Send,
                        offset: sent,
                        count: s,
                        peer: r,
                    })?;
                }
                sent += s;
                let v = self.count(r, g.rank, n, p, ts);
                if v > 0 {
                    emit(Step::Recv {
                        offset: received,
                        count: v,
                        peer: r,
                    })?;
                }
                received += v;
            }
            Ok(())
        })
    }

    /// Input: this rank's send total of its pattern. Expected: for each source in order, the
    /// chunk it sends this rank, i.e. its pattern from the sum of what it sends lower ranks; the
    /// rest zero (copied from the zeroed receive buffer before any input is written).
    fn fills(&self, f: &FillCtx) -> Vec<Fill> {
        let (n, p, ts, rank) = (f.nranks, f.counts.param, f.ts, f.rank);
        let (own_send, own_recv) = self.totals(rank, n, p, ts);
        let mut fills = Vec::with_capacity(n + 2);
        if own_recv < f.counts.recv {
            fills.push(Fill::ExpectedIsRecv);
        }
        fills.push(Fill::copy_input(
            f.data(),
            own_send,
            block_seed(f.seed, rank),
            0,
        ));
        let mut at = 0;
        for src in 0..n {
            let c = self.count(src, rank, n, p, ts);
            if c > 0 {
                let ix0: usize = (0..rank).map(|k| self.count(src, k, n, p, ts)).sum();
                fills.push(Fill::copy_expected(
                    at,
                    c,
                    block_seed(f.seed, src),
                    ix0 as u64,
                ));
            }
            at += c;
        }
        fills
    }
}

#[cfg(test)]
mod tests;
