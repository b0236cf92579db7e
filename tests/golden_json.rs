//! Golden test of the `-J` writer: the run of `ar_json.out` is rebuilt in our model, rendered
//! with `report::json`, and compared with the JSON file nccl-tests v2.19.6 wrote for it
//! (`ar_json.json`, re-serialised by Python for storage, so compared as parsed documents): same
//! keys in the same order at every level, same values, numbers within 1e-6 relative.

use crate::reference_outputs;

use nccl_perf_report::json::{JsonReport, filtered_env};
use nccl_perf_report::{RowResult, Summary};
use serde_json::Value;

/// Compares two parsed documents; `path` names the place for messages.
fn compare(path: &str, ours: &Value, want: &Value) {
    match (ours, want) {
        (Value::Object(a), Value::Object(b)) => {
            let ka: Vec<&String> = a.keys().collect();
            let kb: Vec<&String> = b.keys().collect();
            assert_eq!(ka, kb, "keys (in order) of {path}");
            for (k, v) in a {
                compare(&format!("{path}.{k}"), v, &b[k]);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "length of {path}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                compare(&format!("{path}[{i}]"), x, y);
            }
        }
        (Value::Number(a), Value::Number(b)) => {
            assert_eq!(
                a.is_f64(),
                b.is_f64(),
                "{path}: {a} and {b} are not both doubles"
            );
            if a.is_f64() {
                let (x, y) = (a.as_f64().unwrap(), b.as_f64().unwrap());
                let tolerance = 1e-6 * x.abs().max(y.abs());
                assert!((x - y).abs() <= tolerance, "{path}: {x} != {y}");
            } else {
                assert_eq!(a, b, "{path}");
            }
        }
        _ => assert_eq!(ours, want, "{path}"),
    }
}

/// The upstream JSON file.
fn golden_json() -> Value {
    let path = reference_outputs::reference_dir().join("ar_json.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Overwrites the measured numbers of `r` with the exact ones of the JSON `result` (the table
/// shows them rounded), after checking that they print as the table shows them.
fn take_measurements(r: &mut RowResult, result: &Value) {
    use nccl_perf_report::numbers::fit;
    for (half, key) in [
        (&mut r.out_of_place, "out_of_place"),
        (&mut r.in_place, "in_place"),
    ] {
        let j = &result[key];
        let num = |k: &str| j[k].as_f64().unwrap_or_else(|| panic!("{key}.{k}: {j}"));
        let (time, alg, bus) = (num("time"), num("alg_bw"), num("bus_bw"));
        assert_eq!(fit(time, 7), fit(half.time_us, 7), "{key}.time");
        assert_eq!(fit(alg, 6), fit(half.algbw, 6), "{key}.alg_bw");
        assert_eq!(fit(bus, 6), fit(half.busbw, 6), "{key}.bus_bw");
        assert_eq!(j["nwrong"].as_f64(), half.wrong, "{key}.nwrong");
        (half.time_us, half.algbw, half.busbw) = (time, alg, bus);
    }
}

#[test]
fn serde_json_keeps_key_order_in_tests() {
    // Without `preserve_order` maps are sorted and the key-order checks below would be vacuous.
    let v: Value = serde_json::from_str(r#"{"b":1,"a":2}"#).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["b", "a"]);
}

#[test]
fn ar_json_matches_upstream_document() {
    let g = reference_outputs::load("ar_json.out");
    let want = golden_json();
    let lines = &g.lines;
    let start = lines
        .iter()
        .position(|l| l.starts_with("# Collective test starting: "))
        .expect("starting line");
    let info = reference_outputs::run_info(&lines[start], &lines[start + 1], &g.args());
    let devices: Vec<_> = lines
        .iter()
        .filter(|l| l.starts_with("#  Rank "))
        .map(|l| reference_outputs::device(l))
        .collect();
    let code: i32 = lines[start - 1]
        .rsplit_once("nccl-library=")
        .and_then(|(_, c)| c.parse().ok())
        .expect("version line before the starting line");
    let env = want["env"].as_array().unwrap().iter().map(|e| {
        let (k, v) = e.as_str().unwrap().split_once('=').unwrap();
        (k.to_string(), v.to_string())
    });
    let mut report = JsonReport::new(
        &info,
        &devices,
        code,
        want["start_time"].as_str().unwrap().to_string(),
        g.args(),
        filtered_env(env),
    );
    let rows: Vec<&String> = lines
        .iter()
        .filter(|l| reference_outputs::is_row(l))
        .collect();
    let results = want["results"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        results.len(),
        "rows in the table and in the JSON file"
    );
    for (line, result) in rows.iter().zip(results) {
        let mut r = reference_outputs::row(line, &info);
        take_measurements(&mut r, result);
        report.add_row(&r);
    }
    let summary = Summary {
        oob_errors: 0,
        avg_busbw: 0.0,
        min_bw_ok: None,
        last_error: String::new(),
        memory_report: None,
    };
    assert!(lines.contains(&"# Avg bus bandwidth    : 0 ".to_string()));
    let text = report.render(&summary, want["end_time"].as_str().unwrap());
    assert!(!text.contains('\n'), "the document is one line");
    let ours: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    compare("$", &ours, &want);
}
