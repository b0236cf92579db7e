//! A health check's summary: per collective, the bus bandwidth at the largest size against what
//! explain expects of this GPU model and job shape, a verdict, and one verdict for the whole
//! check; as `#` lines, a JSON object for automation and the Prometheus text format for
//! node_exporter's textfile collector (docs/health.md).

use crate::observed::Run;
use crate::verdict::Explanation;
use serde::Serialize;

/// The default threshold: a collective below this percentage of the expected busbw is slow.
pub const DEFAULT_THRESHOLD: f64 = 90.0;

/// One collective's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At or above the threshold, no wrong data.
    Ok,
    /// Below the threshold.
    Slow,
    /// Wrong data (validation).
    Wrong,
    /// Nothing to compare with: no expected figure for this GPU model and shape, or no rows.
    Unknown,
    /// The hang watch ended the run during this collective (nothing was measured to the end).
    Hung,
}

impl Verdict {
    /// The verdict's word, as printed and as the Prometheus label value.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Slow => "slow",
            Verdict::Wrong => "wrong",
            Verdict::Unknown => "unknown",
            Verdict::Hung => "hung",
        }
    }
}

/// One collective of the check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// The collective (`all_reduce`).
    pub collective: String,
    /// The largest size measured, bytes (0 without rows).
    pub largest_bytes: u64,
    /// Out-of-place busbw at that size, GB/s.
    pub busbw: Option<f64>,
    /// The expected busbw for the large sizes (explain's SKU table), GB/s.
    pub expected_busbw: Option<f64>,
    /// Measured over expected on the large sizes, percent (explain's figure).
    pub percent_of_expected: Option<f64>,
    /// Values with wrong data.
    pub wrong: u64,
    /// The verdict.
    pub verdict: Verdict,
    /// What `--locate` named when it ran on this collective (it runs once, on the first
    /// collective found slow); absent where it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspects: Option<Vec<String>>,
    /// The hang watch's verdict line when the run hung during this collective.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang: Option<String>,
}

impl Check {
    /// The check of one run as explain saw it (`x` its explanation), with `wrong` values of
    /// wrong data, against `threshold` percent.
    pub fn of(run: &Run, x: &Explanation, wrong: u64, threshold: f64) -> Check {
        let largest = run
            .rows
            .iter()
            .filter(|r| !r.in_place)
            .max_by_key(|r| r.bytes);
        let expected_busbw = x.rows.iter().rev().find_map(|r| r.expected_busbw);
        let percent = x.percent_of_expected.filter(|p| p.is_finite());
        let verdict = match (wrong, percent, largest) {
            (1.., _, _) => Verdict::Wrong,
            (_, _, None) | (_, None, _) => Verdict::Unknown,
            (_, Some(p), _) if p < threshold => Verdict::Slow,
            _ => Verdict::Ok,
        };
        Check {
            // A log that never names its program (and whose rows do not tell it).
            collective: match run.collective.as_str() {
                "" => "unnamed".to_string(),
                c => c.to_string(),
            },
            largest_bytes: largest.map_or(0, |r| r.bytes),
            busbw: largest.map(|r| r.busbw).filter(|b| b.is_finite()),
            expected_busbw,
            percent_of_expected: percent,
            wrong,
            verdict,
            suspects: None,
            hang: None,
        }
    }

    /// This check, of a run the hang watch ended saying `line`: hung, whatever was measured.
    pub fn hung_by(mut self, line: &str) -> Check {
        self.verdict = Verdict::Hung;
        self.hang = Some(line.to_string());
        self
    }

    /// The check of a collective the hang watch ended, saying `line` (its verdict).
    pub fn hung(collective: &str, line: &str) -> Check {
        Check {
            collective: collective.to_string(),
            largest_bytes: 0,
            busbw: None,
            expected_busbw: None,
            percent_of_expected: None,
            wrong: 0,
            verdict: Verdict::Hung,
            suspects: None,
            hang: Some(line.to_string()),
        }
    }
}

/// The whole check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Health {
    /// The overall verdict: the worst of the collectives' (wrong, then slow, then unknown).
    pub verdict: Verdict,
    /// Below this percentage of the expected busbw a collective is slow.
    pub threshold_percent: f64,
    /// The node (world rank 0's host name).
    pub host: String,
    /// The GPU model.
    pub gpu: String,
    /// One per collective, in the order run.
    pub collectives: Vec<Check>,
}

impl Health {
    /// The check of `collectives` on `host`'s `gpu`. A name that comes again (a collective
    /// run twice, logs that name none) gets `_2`, `_3`... so that every series is its own.
    pub fn new(mut collectives: Vec<Check>, threshold: f64, host: &str, gpu: &str) -> Health {
        let mut seen: Vec<String> = Vec::new();
        for c in &mut collectives {
            let base = c.collective.clone();
            let mut n = 1;
            while seen.contains(&c.collective) {
                n += 1;
                c.collective = format!("{base}_{n}");
            }
            seen.push(c.collective.clone());
        }
        let rank = |v: Verdict| match v {
            Verdict::Ok => 0,
            Verdict::Unknown => 1,
            Verdict::Slow => 2,
            Verdict::Wrong => 3,
            Verdict::Hung => 4,
        };
        let verdict = collectives
            .iter()
            .map(|c| c.verdict)
            .max_by_key(|v| rank(*v))
            .unwrap_or(Verdict::Unknown);
        Health {
            verdict,
            threshold_percent: threshold,
            host: host.to_string(),
            gpu: gpu.to_string(),
            collectives,
        }
    }

    /// `# health:` lines: one per collective, then the overall verdict. No line says
    /// `bandwidth` or `FAILED` (the benchmarks' stdout contract).
    pub fn text(&self) -> String {
        let mut s = String::new();
        for c in &self.collectives {
            let busbw = c
                .busbw
                .map_or("no rows".to_string(), |b| format!("busbw {b:.1} GB/s"));
            let expected = match (c.expected_busbw, c.percent_of_expected) {
                (Some(e), Some(p)) => format!("expected {e:.1} GB/s on the large sizes ({p:.1} %)"),
                (Some(e), None) => format!("expected {e:.1} GB/s"),
                _ => "no expected figure for this GPU and shape".to_string(),
            };
            let wrong = match c.wrong {
                0 => String::new(),
                n => format!(", {n} wrong values"),
            };
            if let Some(h) = &c.hang {
                s += &format!("# health: {}: hung: {}\n", c.collective, stdout_safe(h));
                continue;
            }
            s += &format!(
                "# health: {}: {busbw} at {} B, {expected}{wrong}: {}\n",
                c.collective,
                c.largest_bytes,
                c.verdict.word()
            );
        }
        let n = self.collectives.len();
        let at = |v: Verdict| self.collectives.iter().filter(|c| c.verdict == v).count();
        let hung = match at(Verdict::Hung) {
            0 => String::new(),
            h => format!(", {h} hung"),
        };
        s += &format!(
            "# health: {}: {} of {n} ok, {} slow (below {} % of expected), {} with wrong data, {} without an expected figure{hung}\n",
            match self.verdict {
                Verdict::Ok => "healthy",
                Verdict::Slow => "slow",
                Verdict::Wrong => "wrong data",
                Verdict::Unknown => "not judged",
                Verdict::Hung => "hung",
            },
            at(Verdict::Ok),
            at(Verdict::Slow),
            self.threshold_percent,
            at(Verdict::Wrong),
            at(Verdict::Unknown),
        );
        s
    }

    /// The summary as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The summary in the Prometheus text exposition format (gauges; labels collective, host,
    /// gpu; a metric without a value is left out).
    pub fn prometheus(&self) -> String {
        let labels = |c: &Check| {
            format!(
                "collective=\"{}\",host=\"{}\",gpu=\"{}\"",
                label_value(&c.collective),
                label_value(&self.host),
                label_value(&self.gpu)
            )
        };
        let mut s = String::new();
        let mut family = |name: &str, help: &str, value: &dyn Fn(&Check) -> Option<f64>| {
            s += &format!("# HELP {name} {help}\n# TYPE {name} gauge\n");
            for c in &self.collectives {
                if let Some(v) = value(c).filter(|v| v.is_finite()) {
                    s += &format!("{name}{{{}}} {v}\n", labels(c));
                }
            }
        };
        family(
            "nccl_perf_busbw_gbps",
            "Bus bandwidth (out of place) at the largest size, GB/s.",
            &|c| c.busbw,
        );
        family(
            "nccl_perf_expected_busbw_gbps",
            "Expected bus bandwidth for this GPU model and job shape on the large sizes, GB/s.",
            &|c| c.expected_busbw,
        );
        family(
            "nccl_perf_percent_of_expected",
            "Measured over expected bus bandwidth on the large sizes, percent.",
            &|c| c.percent_of_expected,
        );
        family(
            "nccl_perf_wrong_values",
            "Values with wrong data found by validation.",
            &|c| Some(c.wrong as f64),
        );
        family(
            "nccl_perf_health_ok",
            "1 when the collective is at or above the threshold with no wrong data, else 0.",
            &|c| Some(f64::from(u8::from(c.verdict == Verdict::Ok))),
        );
        s += "# HELP nccl_perf_health_verdict The collective's verdict (1 for the label that holds).\n";
        s += "# TYPE nccl_perf_health_verdict gauge\n";
        for c in &self.collectives {
            s += &format!(
                "nccl_perf_health_verdict{{{},verdict=\"{}\"}} 1\n",
                labels(c),
                c.verdict.word()
            );
        }
        s
    }
}

/// A hang line as a `# health:` line may carry it: neither of the words the benchmarks' stdout
/// contract keeps for its own lines.
fn stdout_safe(line: &str) -> String {
    line.replace("bandwidth", "bw").replace("FAILED", "failed")
}

/// A label value as the text format writes it: backslash, double quote and line feed escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::Row;

    fn run(collective: &str, busbw: f64) -> Run {
        Run {
            collective: collective.into(),
            rows: [1 << 20, 1 << 30]
                .into_iter()
                .flat_map(|bytes| {
                    [false, true].map(|in_place| Row {
                        bytes,
                        in_place,
                        busbw: if in_place { 1.0 } else { busbw },
                        ..Row::default()
                    })
                })
                .collect(),
            ..Run::default()
        }
    }

    fn explained(percent: Option<f64>) -> Explanation {
        Explanation {
            percent_of_expected: percent,
            rows: vec![crate::RowFields {
                expected_busbw: percent.map(|_| 400.0),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn verdicts_and_the_worst_of_them() {
        let ok = Check::of(&run("all_reduce", 390.0), &explained(Some(97.5)), 0, 90.0);
        assert_eq!(
            (ok.verdict, ok.largest_bytes, ok.busbw),
            (Verdict::Ok, 1 << 30, Some(390.0))
        );
        let slow = Check::of(&run("all_gather", 300.0), &explained(Some(75.0)), 0, 90.0);
        assert_eq!(slow.verdict, Verdict::Slow);
        let unknown = Check::of(&run("sendrecv", 300.0), &explained(None), 0, 90.0);
        assert_eq!(unknown.verdict, Verdict::Unknown);
        let wrong = Check::of(&run("alltoall", 390.0), &explained(Some(97.5)), 3, 90.0);
        assert_eq!(wrong.verdict, Verdict::Wrong);
        let h = Health::new(vec![ok.clone(), unknown.clone()], 90.0, "n1", "NVIDIA H100");
        assert_eq!(h.verdict, Verdict::Unknown);
        let h = Health::new(vec![ok.clone(), slow.clone(), unknown], 90.0, "n1", "g");
        assert_eq!(h.verdict, Verdict::Slow);
        let text = h.text();
        assert!(text.contains("# health: all_gather: busbw 300.0 GB/s at 1073741824 B, expected 400.0 GB/s on the large sizes (75.0 %): slow\n"), "{text}");
        assert!(text.ends_with("# health: slow: 1 of 3 ok, 1 slow (below 90 % of expected), 0 with wrong data, 1 without an expected figure\n"), "{text}");
        assert!(!text.contains("bandwidth") && !text.contains("FAILED"));
        let h = Health::new(vec![ok, wrong], 90.0, "n1", "g");
        assert_eq!(h.verdict, Verdict::Wrong);
        assert_eq!(h.json()["collectives"][1]["verdict"], "wrong");
    }

    #[test]
    fn prometheus_labels_are_escaped_and_missing_values_left_out() {
        let c = Check::of(&run("all_reduce", 390.0), &explained(None), 0, 90.0);
        let h = Health::new(vec![c], 90.0, "n\"1\\", "GPU\nX");
        let p = h.prometheus();
        assert!(p.contains("nccl_perf_busbw_gbps{collective=\"all_reduce\",host=\"n\\\"1\\\\\",gpu=\"GPU\\nX\"} 390\n"), "{p}");
        assert!(!p.contains("nccl_perf_expected_busbw_gbps{"), "{p}");
        assert!(p.contains("verdict=\"unknown\"} 1\n"), "{p}");
    }

    #[test]
    fn a_hung_collective_is_the_worst_verdict_in_lines_json_and_metrics() {
        let ok = Check::of(&run("all_reduce", 390.0), &explained(Some(97.5)), 0, 90.0);
        let line = "hang: rank 2 (vnode2, pid 7) never started operation 30 of the run (low bandwidth FAILED)";
        let hung = Check::hung("all_gather", line);
        let wrong = Check::of(&run("alltoall", 390.0), &explained(Some(97.5)), 3, 90.0);
        let h = Health::new(vec![ok.clone(), wrong, hung], 90.0, "n1", "g");
        assert_eq!(h.verdict, Verdict::Hung);
        let text = h.text();
        assert!(
            text.contains("# health: all_gather: hung: hang: rank 2 (vnode2, pid 7) never started operation 30 of the run (low bw failed)\n"),
            "{text}"
        );
        assert!(
            text.ends_with("without an expected figure, 1 hung\n"),
            "{text}"
        );
        assert!(
            text.lines()
                .last()
                .unwrap_or_default()
                .starts_with("# health: hung: 1 of 3 ok"),
            "{text}"
        );
        assert!(
            !text.contains("bandwidth") && !text.contains("FAILED"),
            "{text}"
        );
        assert_eq!(h.json()["verdict"], "hung");
        assert_eq!(h.json()["collectives"][2]["hang"], line);
        assert!(h.json()["collectives"][0].get("hang").is_none());
        let p = h.prometheus();
        assert!(
            p.contains("nccl_perf_health_ok{collective=\"all_gather\",host=\"n1\",gpu=\"g\"} 0\n"),
            "{p}"
        );
        assert!(p.contains("verdict=\"hung\"} 1\n"), "{p}");
        // A measured check of a run that hung is hung too.
        assert_eq!(ok.hung_by(line).verdict, Verdict::Hung);
    }
}
