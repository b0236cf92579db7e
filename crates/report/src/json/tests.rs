//! Unit tests of the JSON writer (the golden comparison is in `tests/golden_json.rs`).

use super::*;
use crate::numbers::NO_ROWS_AVERAGE;
use crate::{HalfResult, PerIterStats, Step};
use serde_json::{Value, json};

fn info() -> RunInfo {
    RunInfo {
        program: "all_reduce_perf".into(),
        ngpus: 2,
        min_bytes: 1024,
        max_bytes: 1048576,
        step: Step::Factor(4),
        ..RunInfo::default()
    }
}

fn device(rank: i64, pid: u32, host: &str) -> DeviceInfo {
    DeviceInfo {
        rank,
        group: 0,
        pid,
        hostname: host.into(),
        device: rank % 2,
        pci_domain: 0,
        pci_bus: 0x18,
        pci_device: 0,
        name: "NVIDIA H200".into(),
    }
}

fn half(wrong: Option<f64>) -> HalfResult {
    HalfResult {
        time_us: 21.53,
        algbw: 0.5,
        busbw: 0.75,
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
        out_of_place: half(Some(0.0)),
        in_place: half(None),
        timestamp: None,
        iterations: 20,
    }
}

fn summary() -> Summary {
    Summary {
        oob_errors: 0,
        avg_busbw: 0.75,
        min_bw_ok: None,
        last_error: String::new(),
        memory_report: None,
    }
}

fn report(info: &RunInfo) -> JsonReport {
    let devices = [
        device(0, 10, "a"),
        device(1, 10, "a"),
        device(2, 10, "b"),
        device(3, 11, "b"),
    ];
    JsonReport::new(
        info,
        &devices,
        22803,
        "2026-01-01 00:00:00".into(),
        vec!["all_reduce_perf".into(), "-g".into(), "2".into()],
        vec!["NCCL_DEBUG=INFO".into()],
    )
}

fn parse(text: &str) -> Value {
    assert!(!text.contains('\n'), "one line: {text}");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn complete_document() {
    let mut r = report(&info());
    r.add_row(&row());
    let v = parse(&r.render(&summary(), "2026-01-01 00:00:01"));
    assert_eq!(v["version"], json!(3));
    assert_eq!(v["nccl_version"], json!(22803));
    let config = &v["config"];
    assert_eq!(config["step_factor"], json!(4));
    assert!(config.get("step_bytes").is_none());
    assert_eq!(config["blocking_collectives"], json!("false"));
    // One device per process: (a, 10) and (b, 10) are different processes.
    let ranks: Vec<&Value> = config["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["rank"])
        .collect();
    assert_eq!(ranks, [&json!(0), &json!(2), &json!(3)]);
    assert_eq!(config["devices"][0]["device_hex"], json!("0000:18:00"));
    let res = &v["results"][0];
    assert_eq!(res["root"], json!("    -1"));
    assert_eq!(res["type"], json!("float"));
    assert_eq!(res["out_of_place"]["nwrong"], json!(0.0));
    assert_eq!(res["in_place"]["nwrong"], Value::Null);
    assert_eq!(res["out_of_place"]["time"], json!(21.53));
    assert_eq!(res["experiment_name"], json!(""));
    assert_eq!(v["out_of_bounds"], json!({"count": 0, "okay": "true"}));
    assert_eq!(
        v["average_bus_bandwidth"],
        json!({"bandwidth": 0.75, "okay": "unchecked"})
    );
    assert_eq!(v["errors"], json!([""]));
    assert_eq!(v["end_time"], json!("2026-01-01 00:00:01"));
}

#[test]
fn cputime_per_iteration_and_nan() {
    let mut i = info();
    i.report_cputime = true;
    i.per_iter = true;
    i.per_iter_skip = 1;
    i.step = Step::Bytes(1048576);
    i.blocking = 3;
    let mut r = report(&i);
    let mut row = row();
    row.out_of_place.per_iter = Some(PerIterStats {
        skipped: 1,
        min_us: 1.0,
        max_us: 3.0,
        avg_us: 2.0,
        p50_us: 2.0,
        p95_us: 3.0,
        p99_us: 3.0,
        stdev_us: 0.5,
        cv_pct: 25.0,
        times_us: vec![9.0, 1.0, 2.0, 3.0],
        per_process_max_times_us: vec![],
    });
    row.in_place.busbw = f64::INFINITY;
    r.add_row(&row);
    let mut s = summary();
    s.avg_busbw = NO_ROWS_AVERAGE;
    s.oob_errors = 2;
    s.min_bw_ok = Some(false);
    let text = r.render(&s, "t");
    let v = parse(&text);
    assert_eq!(v["config"]["step_bytes"], json!(1048576));
    assert_eq!(v["config"]["per_iter_timing"], json!("true"));
    assert_eq!(v["config"]["blocking_collectives"], json!("true"));
    let res = &v["results"][0];
    assert_eq!(res["out_of_place"]["cpu_time"], json!(21.53));
    assert!(res["out_of_place"].get("time").is_none());
    assert_eq!(res["in_place"]["bus_bw"], json!("inf"));
    let pi = &res["out_of_place_per_iter"];
    assert_eq!(pi["skipped_iterations"], json!(1));
    assert_eq!(pi["times_us"], json!([9.0, 1.0, 2.0, 3.0]));
    assert!(pi.get("per_process_max_times_us").is_none());
    assert!(res.get("in_place_per_iter").is_none());
    assert!(text.contains(r#""out_of_place":{"cpu_time""#), "{text}");
    assert!(text.contains(r#"},"out_of_place_per_iter":{"skipped_iterations":1,"min_us""#));
    assert_eq!(v["out_of_bounds"]["okay"], json!("false"));
    assert_eq!(
        v["average_bus_bandwidth"],
        json!({"bandwidth": "nan", "okay": "false"})
    );
}

#[test]
fn aborted_document_is_closed_without_footer() {
    let mut r = report(&info());
    r.add_row(&row());
    let text = r.render_aborted();
    let v = parse(&text);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1));
    for key in [
        "out_of_bounds",
        "average_bus_bandwidth",
        "errors",
        "end_time",
    ] {
        assert!(v.get(key).is_none(), "{key} in {text}");
    }
    assert!(text.ends_with("\"experiment_name\":\"\"}]}"), "{text}");
}

#[test]
fn split_groups_are_an_extra_key_after_upstreams() {
    let mut r = report(&info());
    r.add_row(&row());
    let plain: Value = serde_json::from_str(&r.render(&summary(), "end")).unwrap();
    assert!(plain.get("nccl_perf_split_groups").is_none());
    r.set_split_groups(vec![crate::split::SplitGroup {
        color: 1,
        ranks: vec![1, 3],
        average_bus_bw: 0.5,
        bus_bw: vec![0.25, 0.75],
        time: vec![10.0, 5.0],
    }]);
    let text = r.render(&summary(), "end");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        doc["nccl_perf_split_groups"],
        json!([{"color": 1, "ranks": [1, 3], "average_bus_bw": 0.5,
                "bus_bw": [0.25, 0.75], "time": [10.0, 5.0]}])
    );
    // Every upstream key is where it was; our reader reads the document as before.
    let keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .unwrap()
            .keys()
            .filter(|k| !k.starts_with("nccl_perf_"))
            .cloned()
            .collect()
    };
    assert_eq!(keys(&doc), keys(&plain));
    let back = read::read_documents(&text, "split.json").unwrap();
    assert_eq!(back[0].rows.len(), 1);
}

#[test]
fn a_hang_record_is_written_and_read_back() {
    let mut r = report(&info());
    r.add_row(&row());
    r.set_hang(json!({"verdict": "never_started", "line": "hang: rank 2 (vnode2, pid 7) never started operation 30\u{1b}", "culprits": [2]}));
    let text = r.render_aborted();
    let v = parse(&text);
    assert_eq!(v["nccl_perf_hang"]["culprits"], json!([2]));
    let runs = super::read::read_documents(&text, "hung.json").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        runs[0].text.hang.as_deref(),
        Some("hang: rank 2 (vnode2, pid 7) never started operation 30")
    );
    // Without the record, none.
    let plain = report(&info()).render_aborted();
    assert!(!plain.contains("nccl_perf_hang"), "{plain}");
    let runs = super::read::read_documents(&plain, "plain.json").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs[0].text.hang, None);
}
