//! Views of per-iteration timing (`-I 1` runs, read from their `-J` JSON): which process is
//! behind (stragglers), which node (its processes together), and which iterations spiked and
//! whether the whole job or one process did. `nccl-perf report --view straggler|nodes|spikes`.
//!
//! The data: per row and half, the time of every iteration (the maximum over processes) and,
//! with several processes, each process' own per-iteration maximum over its GPUs, in world rank
//! order; the first `-K` iterations are left out here as in the statistics. In a collective every
//! rank waits for the last one, so a process that starts late shows up as others waiting: read
//! "slowest" and "fastest" shares together.

use super::run::Run;
use super::{HalfResult, RowResult};

/// Which view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Processes ranked by how far behind the others they are.
    Straggler,
    /// Processes grouped by node.
    Nodes,
    /// Iterations far above their row's median, and who caused them.
    Spikes,
}

impl View {
    /// The view of a `--view` name.
    pub fn parse(s: &str) -> Option<View> {
        match s {
            "straggler" | "stragglers" => Some(View::Straggler),
            "nodes" | "node" => Some(View::Nodes),
            "spikes" | "spike" => Some(View::Spikes),
            _ => None,
        }
    }
}

/// What a view shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewOptions {
    /// The view.
    pub view: View,
    /// In-place halves instead of out-of-place ones.
    pub in_place: bool,
    /// An iteration is a spike above this many times its row's median (default 1.5).
    pub threshold: f64,
    /// Processes per node when the run does not name each process' host.
    pub procs_per_node: Option<usize>,
}

/// Why a view cannot be shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// No row has per-iteration times.
    #[error(
        "{0}: no per-iteration times; run the benchmark with -I 1 and -J file.json, and give \
         that file"
    )]
    NoTimes(String),
    /// The view compares processes, and the run has one.
    #[error(
        "{0}: per-iteration times of one process only (the JSON has per-process rows with \
         several processes); nothing to compare"
    )]
    OneProcess(String),
    /// The nodes of the processes are not known.
    #[error(
        "{file}: {procs} processes but {devices} device entries: cannot tell their nodes; give \
         --procs-per-node N"
    )]
    NoNodes {
        /// The run's file.
        file: String,
        /// Processes in the per-iteration rows.
        procs: usize,
        /// Device entries in the run.
        devices: usize,
    },
    /// A spike threshold that cannot be one.
    #[error("--threshold {0}: give a factor above 1 (1.5: half again the median)")]
    Threshold(String),
}

/// One half-row's samples after the skipped ones: the job's per iteration, and each process'.
struct Samples<'a> {
    label: String,
    /// Index of the first sample among all iterations (`-K`).
    first: usize,
    job: &'a [f64],
    procs: Vec<&'a [f64]>,
}

fn samples<'a>(row: &'a RowResult, half: &'a HalfResult, in_place: bool) -> Option<Samples<'a>> {
    let p = half.per_iter.as_ref()?;
    let skip = usize::try_from(p.skipped).unwrap_or(0);
    let cut = |v: &'a [f64]| v.get(skip.min(v.len())..).unwrap_or(&[]);
    let job = cut(&p.times_us);
    if job.is_empty() {
        return None;
    }
    let procs: Vec<&[f64]> = p
        .per_process_max_times_us
        .iter()
        .map(|v| cut(v))
        .filter(|v| v.len() == job.len())
        .collect();
    let procs = if procs.len() == p.per_process_max_times_us.len() {
        procs
    } else {
        Vec::new()
    };
    Some(Samples {
        label: format!(
            "{} B {} {}{} {}",
            row.size,
            row.dtype,
            row.op,
            if row.root >= 0 {
                format!(" root {}", row.root)
            } else {
                String::new()
            },
            if in_place { "in-place" } else { "out-of-place" }
        ),
        first: skip,
        job,
        procs,
    })
}

fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Per process over a set of rows: iterations counted, times it was the slowest, the fastest,
/// and the sum of its time over the iteration's median process.
#[derive(Debug, Clone, Default, PartialEq)]
struct Tally {
    iterations: usize,
    slowest: usize,
    fastest: usize,
    relative: f64,
}

impl Tally {
    fn mean_relative(&self) -> f64 {
        self.relative / self.iterations.max(1) as f64
    }
    fn share(n: usize, of: usize) -> f64 {
        100.0 * n as f64 / of.max(1) as f64
    }
}

/// Adds one half-row's iterations to the per-process tallies.
fn tally(s: &Samples, tallies: &mut Vec<Tally>) {
    tallies.resize(tallies.len().max(s.procs.len()), Tally::default());
    for i in 0..s.job.len() {
        let at: Vec<f64> = s.procs.iter().map(|p| p[i]).collect();
        let mid = median(&at);
        let (lo, hi) = at
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &t| {
                (lo.min(t), hi.max(t))
            });
        for (p, &t) in at.iter().enumerate() {
            let tl = &mut tallies[p];
            tl.iterations += 1;
            tl.slowest += usize::from(t == hi && hi > lo);
            tl.fastest += usize::from(t == lo && hi > lo);
            if mid > 0.0 && t.is_finite() {
                tl.relative += t / mid;
            } else {
                tl.relative += 1.0;
            }
        }
    }
}

/// The view of `runs`.
pub fn render(runs: &[Run], o: &ViewOptions) -> Result<String, ViewError> {
    if !(o.threshold.is_finite() && o.threshold > 1.0) {
        return Err(ViewError::Threshold(o.threshold.to_string()));
    }
    let mut out = String::new();
    for run in runs {
        let rows: Vec<Samples> = run
            .rows
            .iter()
            .filter_map(|r| {
                let half = if o.in_place {
                    &r.in_place
                } else {
                    &r.out_of_place
                };
                samples(r, half, o.in_place)
            })
            .collect();
        let file = if run.source.file.is_empty() {
            run.info.program.clone()
        } else {
            run.source.file.clone()
        };
        if rows.is_empty() {
            return Err(ViewError::NoTimes(file));
        }
        let procs = rows.iter().map(|r| r.procs.len()).max().unwrap_or(0);
        out += &format!(
            "{} ({}): {} rows with per-iteration times, {} processes\n",
            file,
            run.info.program,
            rows.len(),
            procs.max(1)
        );
        out += &match o.view {
            View::Straggler => stragglers(run, &rows, procs, &file)?,
            View::Nodes => nodes(run, &rows, procs, o, &file)?,
            View::Spikes => spikes(&rows, o.threshold),
        };
    }
    Ok(out)
}

/// `rank 3 (pid 77 on node2)` for process `p` where the run names it.
fn who(run: &Run, p: usize, procs: usize) -> String {
    match run.devices.get(p).filter(|_| run.devices.len() == procs) {
        Some(d) => format!(
            "process {p} (rank {}, pid {} on {})",
            d.rank, d.pid, d.hostname
        ),
        None => format!("process {p}"),
    }
}

fn stragglers(run: &Run, rows: &[Samples], procs: usize, file: &str) -> Result<String, ViewError> {
    if procs < 2 {
        return Err(ViewError::OneProcess(file.to_string()));
    }
    let mut tallies = Vec::new();
    let mut out = String::from("per row, the processes furthest behind the median process:\n");
    for r in rows.iter().filter(|r| r.procs.len() == procs) {
        let mut t = Vec::new();
        tally(r, &mut t);
        let mut order: Vec<usize> = (0..t.len()).collect();
        order.sort_by(|&a, &b| t[b].mean_relative().total_cmp(&t[a].mean_relative()));
        let top: Vec<String> = order
            .iter()
            .take(3)
            .map(|&p| {
                format!(
                    "process {p} {:.2}x (slowest in {:.0}%)",
                    t[p].mean_relative(),
                    Tally::share(t[p].slowest, t[p].iterations)
                )
            })
            .collect();
        out += &format!("  {}: {}\n", r.label, top.join(", "));
        tally(r, &mut tallies);
    }
    let mut order: Vec<usize> = (0..tallies.len()).collect();
    order.sort_by(|&a, &b| {
        tallies[b]
            .mean_relative()
            .total_cmp(&tallies[a].mean_relative())
    });
    out += "every row together, the processes furthest behind first:\n";
    out += &format!(
        "  {:>8} {:>9} {:>9}  {}\n",
        "vs median", "slowest %", "fastest %", "process"
    );
    for &p in &order {
        let t = &tallies[p];
        out += &format!(
            "  {:>7.3}x {:>9.1} {:>9.1}  {}{}\n",
            t.mean_relative(),
            Tally::share(t.slowest, t.iterations),
            Tally::share(t.fastest, t.iterations),
            who(run, p, procs),
            if straggles(t) { "  <- straggler" } else { "" }
        );
    }
    Ok(out)
}

/// A straggler: the slowest in most iterations and clearly behind the median process.
fn straggles(t: &Tally) -> bool {
    t.slowest * 2 > t.iterations && t.mean_relative() >= 1.05
}

fn nodes(
    run: &Run,
    rows: &[Samples],
    procs: usize,
    o: &ViewOptions,
    file: &str,
) -> Result<String, ViewError> {
    if procs < 2 {
        return Err(ViewError::OneProcess(file.to_string()));
    }
    // Each process' node: its host from the run's device entries (one per process in the JSON),
    // else fixed blocks of --procs-per-node.
    let node_of: Vec<String> = match o.procs_per_node {
        Some(n) if n > 0 => (0..procs).map(|p| format!("node {}", p / n)).collect(),
        _ if run.devices.len() == procs => run.devices.iter().map(|d| d.hostname.clone()).collect(),
        _ => {
            return Err(ViewError::NoNodes {
                file: file.to_string(),
                procs,
                devices: run.devices.len(),
            });
        }
    };
    let mut names: Vec<String> = Vec::new();
    for n in &node_of {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    let mut tallies = Vec::new();
    // Per node: iterations in which it held the slowest process.
    let mut slowest_on = vec![0usize; names.len()];
    let mut iterations = 0usize;
    for r in rows.iter().filter(|r| r.procs.len() == procs) {
        tally(r, &mut tallies);
        for i in 0..r.job.len() {
            let (p, _) = r
                .procs
                .iter()
                .enumerate()
                .map(|(p, v)| (p, v[i]))
                .fold((0, f64::NEG_INFINITY), |b, c| if c.1 > b.1 { c } else { b });
            if let Some(n) = names.iter().position(|x| *x == node_of[p]) {
                slowest_on[n] += 1;
            }
            iterations += 1;
        }
    }
    let per_node: Vec<f64> = names
        .iter()
        .map(|name| {
            let members: Vec<f64> = (0..procs)
                .filter(|&p| node_of[p] == *name)
                .filter_map(|p| tallies.get(p).map(Tally::mean_relative))
                .collect();
            members.iter().sum::<f64>() / members.len().max(1) as f64
        })
        .collect();
    let mid = median(&per_node);
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| per_node[b].total_cmp(&per_node[a]));
    let mut out = String::from("nodes, furthest behind first (processes averaged per node):\n");
    out += &format!(
        "  {:>9} {:>12} {:>9} {:>6}  {}\n",
        "vs median", "vs med. node", "slowest %", "procs", "node"
    );
    for &n in &order {
        let ratio = per_node[n] / mid;
        out += &format!(
            "  {:>8.3}x {:>11.3}x {:>9.1} {:>6}  {}{}\n",
            per_node[n],
            ratio,
            Tally::share(slowest_on[n], iterations),
            node_of.iter().filter(|x| **x == names[n]).count(),
            names[n],
            if ratio >= 1.05 && slowest_on[n] * 2 > iterations {
                "  <- behind"
            } else {
                ""
            }
        );
    }
    Ok(out)
}

fn spikes(rows: &[Samples], threshold: f64) -> String {
    let mut out = format!(
        "iterations above {threshold}x their row's median; a spike is the job's when at least \
         half of the processes spiked with it, else it is named after those that did:\n"
    );
    let mut per_proc: Vec<usize> = Vec::new();
    let (mut all_spikes, mut all_iters, mut system) = (0usize, 0usize, 0usize);
    for r in rows {
        let mid = median(r.job);
        let proc_mid: Vec<f64> = r.procs.iter().map(|p| median(p)).collect();
        per_proc.resize(per_proc.len().max(r.procs.len()), 0);
        let mut found = Vec::new();
        for (i, &t) in r.job.iter().enumerate() {
            if !(mid > 0.0 && t > threshold * mid) {
                continue;
            }
            let who: Vec<usize> = (0..r.procs.len())
                .filter(|&p| proc_mid[p] > 0.0 && r.procs[p][i] > threshold * proc_mid[p])
                .collect();
            found.push((i, t / mid, who));
        }
        all_iters += r.job.len();
        all_spikes += found.len();
        if found.is_empty() {
            out += &format!("  {}: none in {} iterations\n", r.label, r.job.len());
            continue;
        }
        let worst = found.iter().fold(
            (0, 0.0f64),
            |b, (i, x, _)| if *x > b.1 { (*i, *x) } else { b },
        );
        let mut job_wide = 0;
        let mut named: Vec<(usize, usize)> = Vec::new();
        for (_, _, who) in &found {
            if r.procs.is_empty() || who.len() * 2 >= r.procs.len() {
                job_wide += 1;
                continue;
            }
            for &p in who {
                per_proc[p] += 1;
                match named.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, n)) => *n += 1,
                    None => named.push((p, 1)),
                }
            }
        }
        system += job_wide;
        let named: Vec<String> = named
            .iter()
            .map(|(p, n)| format!("{n} on process {p}"))
            .collect();
        out += &format!(
            "  {}: {} of {} iterations (worst {:.2}x at iteration {}): {} of the job{}{}\n",
            r.label,
            found.len(),
            r.job.len(),
            worst.1,
            worst.0 + r.first,
            job_wide,
            if named.is_empty() { "" } else { ", " },
            named.join(", ")
        );
    }
    out += &format!(
        "in all: {all_spikes} spikes in {all_iters} iterations, {system} of the job{}\n",
        if per_proc.iter().any(|&n| n > 0) {
            let mut v: Vec<(usize, usize)> = per_proc
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, n)| *n > 0)
                .collect();
            v.sort_by_key(|b| std::cmp::Reverse(b.1));
            let v: Vec<String> = v.iter().map(|(p, n)| format!("process {p}: {n}")).collect();
            format!("; one process' own: {}", v.join(", "))
        } else {
            String::new()
        }
    );
    out
}

#[cfg(test)]
mod tests;
