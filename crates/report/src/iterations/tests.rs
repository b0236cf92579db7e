use super::*;
use crate::run::{Source, TextDetails};
use crate::{DeviceInfo, PerIterStats, RunInfo, Step};

fn info() -> RunInfo {
    RunInfo {
        program: "all_reduce_perf".into(),
        min_bytes: 1 << 20,
        max_bytes: 1 << 20,
        step: Step::Factor(2),
        iters: 6,
        check: 0,
        per_iter: true,
        per_iter_skip: 1,
        ..RunInfo::default()
    }
}

fn half(procs: Vec<Vec<f64>>) -> HalfResult {
    let n = procs.first().map_or(0, Vec::len);
    let times: Vec<f64> = (0..n)
        .map(|i| procs.iter().map(|p| p[i]).fold(0.0, f64::max))
        .collect();
    HalfResult {
        time_us: 0.0,
        algbw: 0.0,
        busbw: 0.0,
        wrong: None,
        per_iter: Some(PerIterStats {
            skipped: 1,
            min_us: 0.0,
            max_us: 0.0,
            avg_us: 0.0,
            p50_us: 0.0,
            p95_us: 0.0,
            p99_us: 0.0,
            stdev_us: 0.0,
            cv_pct: 0.0,
            times_us: times,
            per_process_max_times_us: if procs.len() > 1 { procs } else { Vec::new() },
        }),
    }
}

/// Four processes on two hosts; process 2 (on n1) takes 1.5x in every iteration but the
/// first (skipped) and iteration 3 spikes everywhere (4x).
fn sample_run() -> Run {
    let procs: Vec<Vec<f64>> = (0..4)
        .map(|p| {
            (0..6)
                .map(|i| {
                    let base = if i == 0 { 50.0 } else { 10.0 + p as f64 * 0.1 };
                    let slow = if p == 2 && i > 0 { 1.5 } else { 1.0 };
                    base * slow * if i == 3 { 4.0 } else { 1.0 }
                })
                .collect()
        })
        .collect();
    let row = RowResult {
        size: 1 << 20,
        count: 1 << 18,
        dtype: "float".into(),
        op: "sum".into(),
        root: -1,
        out_of_place: half(procs.clone()),
        in_place: half(vec![procs[0].clone()]),
        timestamp: None,
        iterations: 6,
    };
    let device = |rank: i64, host: &str| DeviceInfo {
        rank,
        group: 0,
        pid: 100 + rank as u32,
        hostname: host.into(),
        device: 0,
        pci_domain: 0,
        pci_bus: 0x1b,
        pci_device: 0,
        name: "NVIDIA H200".into(),
    };
    Run {
        info: info(),
        explain: None,
        devices: vec![
            device(0, "n0"),
            device(1, "n0"),
            device(2, "n1"),
            device(3, "n1"),
        ],
        nccl_version: 22803,
        args: Vec::new(),
        env: Vec::new(),
        start_time: String::new(),
        end_time: String::new(),
        rows: vec![row],
        summary: None,
        source: Source {
            file: "perit.json".into(),
            first_line: 0,
            last_line: 0,
        },
        text: TextDetails::default(),
    }
}

fn opts(view: View) -> ViewOptions {
    ViewOptions {
        view,
        in_place: false,
        threshold: 1.5,
        procs_per_node: None,
    }
}

#[test]
fn the_straggler_view_ranks_the_process_behind_first() {
    let text = render(&[sample_run()], &opts(View::Straggler)).unwrap();
    let ranking = text.split("every row together").nth(1).unwrap();
    let first = ranking.lines().nth(2).unwrap();
    assert!(
        first.contains("process 2 (rank 2, pid 102 on n1)"),
        "{text}"
    );
    assert!(
        first.contains("<- straggler") && first.contains("100.0"),
        "{text}"
    );
    assert_eq!(text.matches("<- straggler").count(), 1, "{text}");
    assert!(
        text.contains("1048576 B float sum out-of-place: process 2 1.50x (slowest in 100%)"),
        "{text}"
    );
}

#[test]
fn the_nodes_view_groups_processes_by_host_or_by_blocks() {
    let text = render(&[sample_run()], &opts(View::Nodes)).unwrap();
    let first = text.lines().nth(3).unwrap();
    assert!(first.ends_with("n1  <- behind"), "{text}");
    let mut o = opts(View::Nodes);
    o.procs_per_node = Some(1);
    let text = render(&[sample_run()], &o).unwrap();
    assert!(text.lines().nth(3).unwrap().contains("node 2"), "{text}");
    // Without host names nor blocks: an error that says what to give.
    let mut r = sample_run();
    r.devices.truncate(1);
    let e = render(&[r], &opts(View::Nodes)).unwrap_err();
    assert!(e.to_string().contains("--procs-per-node"), "{e}");
}

#[test]
fn the_spike_view_tells_the_job_from_one_process() {
    let text = render(&[sample_run()], &opts(View::Spikes)).unwrap();
    assert!(
        text.contains("1 of 5 iterations (worst 4.00x at iteration 3): 1 of the job"),
        "{text}"
    );
    // One process' own spike: process 1 doubles at iteration 4.
    let mut r = sample_run();
    if let Some(p) = r.rows[0].out_of_place.per_iter.as_mut() {
        p.per_process_max_times_us[1][5] *= 4.0;
        p.times_us[5] = p.per_process_max_times_us[1][5];
    }
    let text = render(&[r], &opts(View::Spikes)).unwrap();
    assert!(text.contains("1 on process 1"), "{text}");
    assert!(text.contains("one process' own: process 1: 1"), "{text}");
}

#[test]
fn runs_without_what_a_view_needs_say_so() {
    let mut o = opts(View::Straggler);
    o.in_place = true;
    let e = render(&[sample_run()], &o).unwrap_err();
    assert!(matches!(e, ViewError::OneProcess(_)), "{e}");
    let mut r = sample_run();
    r.rows[0].out_of_place.per_iter = None;
    let e = render(&[r], &opts(View::Spikes)).unwrap_err();
    assert!(e.to_string().contains("-I 1"), "{e}");
    o.threshold = 1.0;
    assert!(matches!(
        render(&[sample_run()], &o),
        Err(ViewError::Threshold(_))
    ));
    // Spikes of one process' run still show, as the job's.
    let mut o = opts(View::Spikes);
    o.in_place = true;
    assert!(
        render(&[sample_run()], &o)
            .unwrap()
            .contains("1 of the job")
    );
}
