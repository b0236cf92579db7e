//! CSV output: `-J file.csv` on the benchmarks and `nccl-perf report --format csv`.
//!
//! One CSV record per table row, both halves side by side, with a header record naming the
//! columns:
//!
//! `collective,size,count,type,redop,root,`
//! `out_of_place_time_us,out_of_place_alg_bw_GBps,out_of_place_bus_bw_GBps,out_of_place_nwrong,`
//! `in_place_time_us,in_place_alg_bw_GBps,in_place_bus_bw_GBps,in_place_nwrong`
//!
//! With `-C 1` the time columns are `*_cpu_time_us`; with `-I 1` each half is followed by
//! `*_min_us,*_max_us,*_p99_us,*_cv_pct`; with `-S 1` a last `timestamp` column. Numbers are
//! written in full (shortest exact form, not the table's rounding): times in microseconds,
//! bandwidths in GB/s (10⁹ bytes per second), `nwrong` empty where the table says `N/A`, NaN as
//! `nan`. `root` is a plain integer (-1 for collectives without root).

use super::{HalfResult, RowResult, RunInfo};

/// Which optional columns a CSV has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Columns {
    /// `*_cpu_time_us` instead of `*_time_us` (`-C 1`).
    pub cputime: bool,
    /// The four per-iteration columns after each half (`-I 1`).
    pub per_iter: bool,
    /// A last `timestamp` column (`-S 1`).
    pub timestamps: bool,
    /// `--explain`'s five columns per half at the end: algorithm, protocol, channels, transport
    /// path and NCCL's predicted time (`*_algo`, `*_proto`, `*_channels`, `*_path`,
    /// `*_model_us`).
    pub explain: bool,
}

impl Columns {
    /// The columns of one run's table.
    pub fn of(info: &RunInfo) -> Columns {
        Columns {
            cputime: info.report_cputime,
            per_iter: info.per_iter,
            timestamps: info.report_timestamps,
            explain: false,
        }
    }

    /// Columns holding every column of `self` and of `other` (for several runs in one file).
    pub fn union(self, other: Columns) -> Columns {
        Columns {
            cputime: self.cputime || other.cputime,
            per_iter: self.per_iter || other.per_iter,
            timestamps: self.timestamps || other.timestamps,
            explain: self.explain || other.explain,
        }
    }
}

/// The header record, with its newline.
pub fn header(c: Columns) -> String {
    let mut names: Vec<String> = ["collective", "size", "count", "type", "redop", "root"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let time = if c.cputime { "cpu_time_us" } else { "time_us" };
    for half in ["out_of_place", "in_place"] {
        for col in [time, "alg_bw_GBps", "bus_bw_GBps", "nwrong"] {
            names.push(format!("{half}_{col}"));
        }
        if c.per_iter {
            for col in ["min_us", "max_us", "p99_us", "cv_pct"] {
                names.push(format!("{half}_{col}"));
            }
        }
    }
    if c.timestamps {
        names.push("timestamp".into());
    }
    if c.explain {
        for half in ["out_of_place", "in_place"] {
            for col in EXPLAIN_COLUMNS {
                names.push(format!("{half}_{col}"));
            }
        }
    }
    names.join(",") + "\n"
}

/// `--explain`'s columns of each half.
const EXPLAIN_COLUMNS: [&str; 5] = ["algo", "proto", "channels", "path", "model_us"];

/// One record for row `r` of `program`, with `--explain`'s cells of each half (out-of-place,
/// in-place; empty cells where unknown), with its newline.
pub fn record_explained(
    program: &str,
    r: &RowResult,
    c: Columns,
    cells: &[[String; 5]; 2],
) -> String {
    let mut line = record(program, r, c);
    line.pop();
    for v in cells.iter().flatten() {
        line.push(',');
        line.push_str(&text(v));
    }
    line + "\n"
}

/// One record for row `r` of `program`, with its newline.
pub fn record(program: &str, r: &RowResult, c: Columns) -> String {
    let mut fields = vec![
        text(program),
        r.size.to_string(),
        r.count.to_string(),
        text(&r.dtype),
        text(&r.op),
        r.root.to_string(),
    ];
    for h in [&r.out_of_place, &r.in_place] {
        half(&mut fields, h, c.per_iter);
    }
    if c.timestamps {
        fields.push(text(r.timestamp.as_deref().unwrap_or("")));
    }
    fields.join(",") + "\n"
}

fn half(fields: &mut Vec<String>, h: &HalfResult, per_iter: bool) {
    fields.push(number(h.time_us));
    fields.push(number(h.algbw));
    fields.push(number(h.busbw));
    fields.push(h.wrong.map(number).unwrap_or_default());
    if per_iter {
        match &h.per_iter {
            Some(p) => {
                for v in [p.min_us, p.max_us, p.p99_us, p.cv_pct] {
                    fields.push(number(v));
                }
            }
            None => fields.extend(std::iter::repeat_n(String::new(), 4)),
        }
    }
}

/// A number in shortest exact form; `nan`, `inf`, `-inf` for the others.
fn number(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v}")
    }
}

/// A text field, quoted (RFC 4180) when it holds a comma, a quote or a line break.
/// One CSV field: quoted (with `""` for `"`) when it holds a comma, quote or line break.
pub fn field(s: &str) -> String {
    text(s)
}

fn text(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn half(time: f64, wrong: Option<f64>) -> HalfResult {
        HalfResult {
            time_us: time,
            algbw: 1.5,
            busbw: 2.625,
            wrong,
            per_iter: None,
        }
    }

    fn row() -> RowResult {
        RowResult {
            size: 1024,
            count: 256,
            dtype: "float".into(),
            op: "sum".into(),
            root: -1,
            out_of_place: half(7.86505, Some(0.0)),
            in_place: half(f64::NAN, None),
            timestamp: Some("2026-12-02 12:57:44".into()),
            iterations: 20,
        }
    }

    #[test]
    fn default_columns_and_record() {
        let c = Columns::default();
        assert_eq!(
            header(c),
            "collective,size,count,type,redop,root,out_of_place_time_us,out_of_place_alg_bw_GBps,\
             out_of_place_bus_bw_GBps,out_of_place_nwrong,in_place_time_us,in_place_alg_bw_GBps,\
             in_place_bus_bw_GBps,in_place_nwrong\n"
        );
        assert_eq!(
            record("all_reduce_perf", &row(), c),
            "all_reduce_perf,1024,256,float,sum,-1,7.86505,1.5,2.625,0,nan,1.5,2.625,\n"
        );
    }

    #[test]
    fn optional_columns() {
        let c = Columns {
            cputime: true,
            per_iter: true,
            timestamps: true,
            explain: true,
        };
        let h = header(c);
        assert!(h.contains("out_of_place_cpu_time_us,"));
        assert!(h.contains(",in_place_cv_pct,timestamp,"));
        assert!(h.ends_with(",timestamp,out_of_place_algo,out_of_place_proto,out_of_place_channels,out_of_place_path,out_of_place_model_us,in_place_algo,in_place_proto,in_place_channels,in_place_path,in_place_model_us\n"));
        let cells = [
            ["Ring", "LL", "4", "network: sockets", "12.5"].map(String::from),
            Default::default(),
        ];
        let r = record_explained("x", &row(), c, &cells);
        assert_eq!(h.split(',').count(), r.split(',').count());
        assert!(
            r.ends_with(",,,,,2026-12-02 12:57:44,Ring,LL,4,network: sockets,12.5,,,,,\n"),
            "{r}"
        );
    }

    #[test]
    fn quoting_and_suffix() {
        assert_eq!(text("a,b"), "\"a,b\"");
        assert_eq!(text("say \"x\""), "\"say \"\"x\"\"\"");
    }
}
