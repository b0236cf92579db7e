//! `report`'s views of per-iteration JSON.

use super::{read, reference, scratch, stdout};
use crate::programs::tool;
use nccl_perf_report::json::of_run::document;
use nccl_perf_report::json::read::read_documents;

#[test]
fn report_views_of_per_iteration_json() {
    let dir = scratch("views");
    let name = "ar_json.json";
    let mut run = read_documents(&read(&reference(name)), name)
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0);
    // Four processes on two hosts; process 3 is 1.3x behind in every iteration, and the job
    // spikes at iteration 7 of every row.
    let template = run.devices[0].clone();
    run.devices = (0..4)
        .map(|p| nccl_perf_report::DeviceInfo {
            rank: p,
            pid: 1000 + p as u32,
            hostname: format!("host{}", p / 2),
            ..template.clone()
        })
        .collect();
    for row in &mut run.rows {
        for half in [&mut row.out_of_place, &mut row.in_place] {
            let procs: Vec<Vec<f64>> = (0..4)
                .map(|p| {
                    (0..10)
                        .map(|i| {
                            let t = 100.0 + i as f64 * 0.01 + p as f64 * 0.1;
                            t * if p == 3 { 1.3 } else { 1.0 } * if i == 7 { 3.0 } else { 1.0 }
                        })
                        .collect()
                })
                .collect();
            let times = (0..10)
                .map(|i| procs.iter().map(|p| p[i]).fold(0.0, f64::max))
                .collect();
            half.per_iter = Some(nccl_perf_report::PerIterStats {
                skipped: 0,
                min_us: 100.0,
                max_us: 400.0,
                avg_us: 150.0,
                p50_us: 130.0,
                p95_us: 400.0,
                p99_us: 400.0,
                stdev_us: 80.0,
                cv_pct: 50.0,
                times_us: times,
                per_process_max_times_us: procs,
            });
        }
    }
    let file = dir.join("perit.json");
    std::fs::write(&file, document(&run)).unwrap_or_else(|e| panic!("{e}"));
    let path = file.to_string_lossy().into_owned();
    let out = tool(&["report", &path, "--view", "straggler"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.contains("process 3 (rank 3, pid 1003 on host1)  <- straggler")),
        "{text}"
    );
    let out = tool(&["report", &path, "--view", "nodes", "--in-place"]);
    assert!(
        stdout(&out).contains("host1  <- behind"),
        "{}",
        stdout(&out)
    );
    let out = tool(&["report", &path, "--view", "spikes", "--threshold", "2"]);
    let text = stdout(&out);
    assert!(
        text.contains("(worst 3.00x at iteration 7): 1 of the job"),
        "{text}"
    );
    // A run without per-iteration times: one line, exit 2.
    let out = tool(&[
        "report",
        &reference(name).to_string_lossy(),
        "--view",
        "spikes",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no per-iteration times") && err.lines().count() == 1,
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
