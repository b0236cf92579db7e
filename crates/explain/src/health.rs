//! A health check's summary: per collective, the bus bandwidth at the largest size against what
//! explain expects of this GPU model and job shape, a verdict, and one verdict for the whole
//! check; as `#` lines, a JSON object for automation and the Prometheus text format for
//! node_exporter's textfile collector (docs/health.md).

mod prom;

use crate::baseline::{Baseline, Judgement};
use crate::ceiling::Shape;
use crate::observed::Run;
use crate::rows::BANDWIDTH_BOUND;
use crate::verdict::Explanation;
use serde::Serialize;

/// The default threshold: a collective below this percentage of the expected busbw is slow.
pub const DEFAULT_THRESHOLD: f64 = 90.0;

/// The exit codes of a check's verdict, the same from `--health` and `nccl-perf health`
/// (docs/health.md "Exit codes").
pub mod exit {
    /// Every collective judged, and every one ok.
    pub const HEALTHY: u8 = 0;
    /// The hang watch ended the launch (the benchmarks' timeout code).
    pub const HUNG: u8 = 4;
    /// A collective slow, or wrong data (the benchmarks' code for results out of bounds).
    pub const SLOW_OR_WRONG: u8 = 7;
    /// A collective could not be judged (no baseline row or table figure for it), none worse;
    /// 0 with `--health-allow-unjudged` (`nccl-perf health --allow-unjudged`).
    pub const NOT_JUDGED: u8 = 10;
}

/// One collective's outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At or above the threshold, no wrong data.
    Ok,
    /// Below the threshold.
    Slow,
    /// Wrong data (validation).
    Wrong,
    /// Nothing to compare with: no expected figure for this GPU model and shape, or no rows.
    #[default]
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

    /// How bad: the overall verdict is the worst.
    fn rank(self) -> u8 {
        match self {
            Verdict::Ok => 0,
            Verdict::Unknown => 1,
            Verdict::Slow => 2,
            Verdict::Wrong => 3,
            Verdict::Hung => 4,
        }
    }
}

/// One collective of the check.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Check {
    /// The collective (`all_reduce`).
    pub collective: String,
    /// The largest size measured, bytes (0 without rows).
    pub largest_bytes: u64,
    /// Out-of-place busbw at that size, GB/s.
    pub busbw: Option<f64>,
    /// Out-of-place algbw at that size, GB/s.
    pub algbw: Option<f64>,
    /// The figure a baseline judged: `algbw` for one rank (whose busbw is 0 by definition),
    /// else `busbw`; absent when no baseline judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The expected busbw: the baseline's at the largest judged size, else the SKU table's
    /// for the large sizes, GB/s.
    pub expected_busbw: Option<f64>,
    /// Measured over expected, percent: the median over the sizes the baseline judged, else
    /// explain's figure for the large sizes.
    pub percent_of_expected: Option<f64>,
    /// Values with wrong data.
    pub wrong: u64,
    /// The verdict.
    pub verdict: Verdict,
    /// What judged it: `baseline` or `table`; `null` when nothing could.
    pub judged_by: Option<String>,
    /// With a baseline: the judged size furthest below its baseline figure, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_bytes: Option<u64>,
    /// That size's percentage of its baseline figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_percent: Option<f64>,
    /// Why the baseline given was not used for this collective (another job shape, no size in
    /// common).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_not_used: Option<String>,
    /// Why the collective was not judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_judged: Option<String>,
    /// What `--locate` named when it ran on this collective (it runs once, on the first
    /// collective found slow); absent where it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspects: Option<Vec<String>>,
    /// The hang watch's verdict line when the run hung during this collective.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang: Option<String>,
    /// Where the wrong data was, when the run could tell (`rank 3 (node7)`); absent for logs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrong_on: Option<String>,
    /// The nodes of the ranks [`Check::wrong_on`] names (and of any between them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wrong_nodes: Vec<String>,
    /// The verdict the figures alone give (wrong data aside): the other nodes'.
    #[serde(skip)]
    pub measured: Verdict,
}

impl Check {
    /// The check of one run as explain saw it (`x` its explanation), with `wrong` values of
    /// wrong data, against `threshold` percent of the SKU table's figure.
    pub fn of(run: &Run, x: &Explanation, wrong: u64, threshold: f64) -> Check {
        Check::judged(run, x, wrong, threshold, None)
    }

    /// The check of one run: against `baseline` first (size by size), else against the SKU
    /// table's figure as explain found it (`x`).
    pub fn judged(
        run: &Run,
        x: &Explanation,
        wrong: u64,
        threshold: f64,
        baseline: Option<&Baseline>,
    ) -> Check {
        let largest = run
            .rows
            .iter()
            .filter(|r| !r.in_place)
            .max_by_key(|r| r.bytes);
        let mut c = Check {
            // A log that never names its program (and whose rows do not tell it).
            collective: match run.collective.as_str() {
                "" => "unnamed".to_string(),
                c => c.to_string(),
            },
            largest_bytes: largest.map_or(0, |r| r.bytes),
            busbw: largest.map(|r| r.busbw).filter(|b| b.is_finite()),
            algbw: largest.map(|r| r.algbw).filter(|b| b.is_finite()),
            wrong,
            ..Check::default()
        };
        match baseline.map(|b| b.judge(run)) {
            Some(Judgement::Judged(j)) => {
                c.expected_busbw = Some(j.expected_busbw);
                c.percent_of_expected = Some(j.percent).filter(|p| p.is_finite());
                c.worst_bytes = j.worst().map(|w| w.bytes);
                c.worst_percent = j.worst().map(|w| w.percent);
                c.judged_by = Some("baseline".into());
                c.metric = Some(if run.nranks == 1 { "algbw" } else { "busbw" }.into());
            }
            Some(Judgement::NotMatching(why)) => c.baseline_not_used = Some(why),
            Some(Judgement::Silent) | None => {}
        }
        if c.judged_by.is_none() {
            c.expected_busbw = x.rows.iter().rev().find_map(|r| r.expected_busbw);
            c.percent_of_expected = x.percent_of_expected.filter(|p| p.is_finite());
            c.judged_by = c.percent_of_expected.map(|_| "table".into());
        }
        c.measured = match (c.percent_of_expected, largest) {
            (_, None) | (None, _) => Verdict::Unknown,
            (Some(p), _) if p < threshold => Verdict::Slow,
            _ => Verdict::Ok,
        };
        c.verdict = match wrong {
            1.. => Verdict::Wrong,
            0 => c.measured,
        };
        if c.verdict == Verdict::Unknown {
            c.judged_by = None;
            c.not_judged = Some(why_not_judged(run, baseline.is_some()));
        }
        c
    }

    /// This check, with the wrong data placed on the ranks `text` names, on `nodes`.
    pub fn wrong_on(mut self, text: &str, nodes: &[String]) -> Check {
        self.wrong_on = Some(text.to_string());
        self.wrong_nodes = nodes.to_vec();
        self
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
            verdict: Verdict::Hung,
            hang: Some(line.to_string()),
            ..Check::default()
        }
    }

    /// This collective's verdict on node `host` of a job on `hosts`: its own, but `ok` on a
    /// node that `--locate`, run on it, did not name while it named others; wrong data placed
    /// on other nodes ([`Check::wrong_nodes`]) leaves this one the verdict of the figures; for a hang
    /// whose line names the stuck rank's host (`rank 2 (node7, pid 12)`), `hung` on that node
    /// and `unknown` (nothing measured to the end) on the others.
    pub fn on_node(&self, host: &str, hosts: &[&str]) -> Verdict {
        if let Some(line) = &self.hang {
            let names = |h: &str| line.contains(&format!("({h},"));
            return match hosts.iter().any(|h| names(h)) {
                true if names(host) => Verdict::Hung,
                true => Verdict::Unknown,
                false => self.verdict,
            };
        }
        let own = match self.verdict {
            Verdict::Wrong
                if !self.wrong_nodes.is_empty() && !self.wrong_nodes.iter().any(|n| n == host) =>
            {
                self.measured
            }
            v => v,
        };
        match &self.suspects {
            Some(s) if !s.is_empty() && !s.iter().any(|n| suspect_host(n) == host) => Verdict::Ok,
            _ => own,
        }
    }
}

/// The host a `--locate` suspect names (`node7 (all 8 GPUs)`, `node7 GPU 3`, `node7`).
fn suspect_host(suspect: &str) -> &str {
    suspect.split([' ', ':']).next().unwrap_or(suspect)
}

/// Why `run` could not be judged, in words.
fn why_not_judged(run: &Run, had_baseline: bool) -> String {
    let shape = Shape::of(run);
    let largest = run.rows.iter().map(|r| r.bytes).max();
    let add = if had_baseline {
        "a baseline row for this collective and job shape, or --explain-sku FILE, would judge it"
    } else {
        "--baseline FILE (made by nccl-perf baseline from known-good runs) would judge it"
    };
    match largest {
        None => "no rows".into(),
        Some(_) if run.collective.is_empty() => {
            "the log does not name its collective, so no figure can be chosen".into()
        }
        Some(_) if run.nranks == 1 => {
            format!("one rank: a device-local copy, for which the table has no figure; {add}")
        }
        Some(_) if shape.one_gpu => format!(
            "ranks posing as hosts on one GPU (loopback sockets): no hardware figure; {add}"
        ),
        Some(b) if b < BANDWIDTH_BOUND => format!(
            "the largest size is below 16 MiB, bound by latency, where the table has no figure; {add}"
        ),
        Some(_) if run.gpu_names.is_empty() || run.nnodes == 0 => {
            format!("the run does not give its GPU model or nodes (no device lines); {add}")
        }
        Some(_) => format!(
            "the table has no figure for {} × {} on {} node(s); {add}",
            run.nranks,
            run.gpu_names.first().map_or("GPUs", String::as_str),
            run.nnodes
        ),
    }
}

/// One node of the job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// Its host name.
    pub host: String,
    /// Ranks on it.
    pub ranks: u32,
    /// Its verdict: the worst of the collectives' on it ([`Check::on_node`]).
    pub verdict: Verdict,
}

/// The whole check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Health {
    /// The overall verdict: the worst of the collectives' (hung, wrong, slow, unknown, ok).
    pub verdict: Verdict,
    /// Below this percentage of the expected busbw a collective is slow.
    pub threshold_percent: f64,
    /// The node that wrote the summary (world rank 0's host name).
    pub host: String,
    /// The GPU model.
    pub gpu: String,
    /// The job's nodes in the order of their first rank (empty where the run does not say).
    pub nodes: Vec<Node>,
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
        let verdict = collectives
            .iter()
            .map(|c| c.verdict)
            .max_by_key(|v| v.rank())
            .unwrap_or(Verdict::Unknown);
        Health {
            verdict,
            threshold_percent: threshold,
            host: host.to_string(),
            gpu: gpu.to_string(),
            nodes: Vec::new(),
            collectives,
        }
    }

    /// With the job's nodes: `hosts` is each rank's host name, in rank order.
    pub fn with_nodes<'a>(mut self, hosts: impl IntoIterator<Item = &'a str>) -> Health {
        // Each node's verdict: see [`Check::on_node`].
        let mut nodes: Vec<Node> = Vec::new();
        for h in hosts.into_iter().filter(|h| !h.is_empty()) {
            match nodes.iter_mut().find(|n| n.host == h) {
                Some(n) => n.ranks += 1,
                None => nodes.push(Node {
                    host: h.to_string(),
                    ranks: 1,
                    verdict: Verdict::Ok,
                }),
            }
        }
        let hosts: Vec<String> = nodes.iter().map(|n| n.host.clone()).collect();
        let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
        for n in &mut nodes {
            n.verdict = self
                .collectives
                .iter()
                .map(|c| c.on_node(&n.host, &hosts))
                .max_by_key(|v| v.rank())
                .unwrap_or(Verdict::Unknown);
        }
        self.nodes = nodes;
        self
    }

    /// The exit code of the verdict ([`exit`]); `allow_unjudged` makes a check whose worst is
    /// a collective not judged exit 0.
    pub fn exit_code(&self, allow_unjudged: bool) -> u8 {
        match self.verdict {
            Verdict::Ok => exit::HEALTHY,
            Verdict::Unknown if allow_unjudged => exit::HEALTHY,
            Verdict::Unknown => exit::NOT_JUDGED,
            Verdict::Slow | Verdict::Wrong => exit::SLOW_OR_WRONG,
            Verdict::Hung => exit::HUNG,
        }
    }

    /// `# health:` lines: one per collective, one for a baseline not used, the nodes of a
    /// job of several, then the overall verdict. No line says `bandwidth` or `FAILED` (the
    /// benchmarks' stdout contract).
    pub fn text(&self) -> String {
        let mut s = String::new();
        for c in &self.collectives {
            if let Some(h) = &c.hang {
                s += &format!("# health: {}: hung: {}\n", c.collective, stdout_safe(h));
                continue;
            }
            s += &format!("# health: {}\n", stdout_safe(&collective_line(c)));
        }
        s += &self.baseline_lines();
        if self.nodes.len() > 1 {
            let nodes: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    let s = if n.ranks == 1 { "" } else { "s" };
                    format!("{} ({} rank{s}): {}", n.host, n.ranks, n.verdict.word())
                })
                .collect();
            s += &format!("# health: nodes: {}\n", stdout_safe(&nodes.join(", ")));
        }
        let n = self.collectives.len();
        let at = |v: Verdict| self.collectives.iter().filter(|c| c.verdict == v).count();
        let hung = match at(Verdict::Hung) {
            0 => String::new(),
            h => format!(", {h} hung"),
        };
        s += &format!(
            "# health: {}: {} of {n} ok, {} slow (below {} % of expected), {} with wrong data, {} without an expected figure{hung}{}\n",
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
            stdout_safe(&self.where_words()),
        );
        s
    }

    /// Which node(s) a verdict that is not healthy is on, for a job of several nodes.
    fn where_words(&self) -> String {
        if self.nodes.len() < 2 || matches!(self.verdict, Verdict::Ok | Verdict::Unknown) {
            return String::new();
        }
        let bad: Vec<&str> = self
            .nodes
            .iter()
            .filter(|n| n.verdict == self.verdict)
            .map(|n| n.host.as_str())
            .collect();
        if self.verdict == Verdict::Wrong {
            // Placed by validation where the run could tell (not from a log).
            let placed = self.collectives.iter().any(|c| !c.wrong_nodes.is_empty());
            return match placed {
                true => format!(": on {} (where validation found it)", bad.join(", ")),
                false => String::new(),
            };
        }
        if bad.len() < self.nodes.len() {
            let by = match self.verdict {
                Verdict::Hung => "named by the hang watch",
                _ => "named by --locate",
            };
            format!(": on {} ({by})", bad.join(", "))
        } else {
            format!(
                ": on the job of {} nodes ({}): a collective's busbw is the whole job's; --locate names the node",
                self.nodes.len(),
                bad.join(", ")
            )
        }
    }

    /// One line per distinct reason a baseline was not used, naming its collectives.
    fn baseline_lines(&self) -> String {
        let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
        for c in &self.collectives {
            if let Some(why) = c.baseline_not_used.as_deref() {
                match reasons.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, cs)) => cs.push(&c.collective),
                    None => reasons.push((why, vec![&c.collective])),
                }
            }
        }
        reasons
            .into_iter()
            .map(|(why, cs)| {
                format!(
                    "# health: baseline not used for {}: {}\n",
                    cs.join(", "),
                    stdout_safe(why)
                )
            })
            .collect()
    }

    /// The summary as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The summary in the Prometheus text exposition format: every node's series, each with
    /// its own `host` label ([`prom`]).
    pub fn prometheus(&self) -> String {
        prom::text(self)
    }
}

/// A collective's `# health:` line after the prefix.
fn collective_line(c: &Check) -> String {
    let busbw = match (c.metric.as_deref(), c.algbw) {
        (Some("algbw"), Some(a)) => format!("algbw {a:.1} GB/s (one rank)"),
        _ => c
            .busbw
            .map_or("no rows".to_string(), |b| format!("busbw {b:.1} GB/s")),
    };
    let expected = match (
        c.judged_by.as_deref(),
        c.expected_busbw,
        c.percent_of_expected,
    ) {
        (Some("baseline"), Some(e), Some(p)) => {
            let worst = match (c.worst_bytes, c.worst_percent) {
                (Some(b), Some(w)) => format!(", lowest {w:.1} % at {b} B"),
                _ => String::new(),
            };
            let m = c.metric.as_deref().unwrap_or("busbw");
            format!("baseline {m} {e:.1} GB/s, {p:.1} % over the sizes judged{worst}")
        }
        (_, Some(e), Some(p)) => format!("expected {e:.1} GB/s on the large sizes ({p:.1} %)"),
        (_, Some(e), None) => format!("expected {e:.1} GB/s"),
        _ => "no expected figure for this GPU and shape".to_string(),
    };
    let wrong = match c.wrong {
        0 => String::new(),
        n => format!(", {n} wrong values"),
    };
    let why = c
        .not_judged
        .as_ref()
        .map(|w| format!(" ({w})"))
        .unwrap_or_default();
    let placed = match &c.wrong_on {
        Some(w) => format!("; wrong data on {w}"),
        None => String::new(),
    };
    let located = match &c.suspects {
        Some(s) if !s.is_empty() => format!("; --locate names {}", s.join(", ")),
        _ => String::new(),
    };
    let at = match c.largest_bytes {
        0 => String::new(),
        b => format!(" at {b} B"),
    };
    format!(
        "{}: {busbw}{at}, {expected}{wrong}: {}{why}{placed}{located}",
        c.collective,
        c.verdict.word()
    )
}

/// A hang line as a `# health:` line may carry it: neither of the words the benchmarks' stdout
/// contract keeps for its own lines.
fn stdout_safe(line: &str) -> String {
    line.replace("bandwidth", "bw").replace("FAILED", "failed")
}

#[cfg(test)]
mod tests;
