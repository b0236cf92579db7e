//! The examples' sample output (examples/README.md) read back through `nccl-perf parse` and
//! `nccl-perf report`.

use std::process::Command;

use crate::shipped::*;

// ---------------------------------------------------------------------------------------------
// The examples' sample output

#[test]
fn sample_output_in_the_examples_is_what_parsers_read() {
    let readme = std::fs::read_to_string(root().join("examples/README.md")).expect("read");
    let section = readme
        .split("## Reading the output")
        .nth(1)
        .expect("section");
    let block = section.split("```").nth(1).expect("code block");
    let block = block.strip_prefix('\n').unwrap_or(block);
    let tmp = TempDir::new("sample");
    let log = tmp.0.join("sample.log");
    std::fs::write(&log, block).expect("write");
    let json = ok(Command::new(TOOL).arg("parse").arg(&log));
    let doc: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON document");
    let rows = doc["results"].as_array().expect("results");
    assert_eq!(rows.len(), 5);
    // Rows keep nccl-tests' 13 tokens, and busbw = algbw × 2(n-1)/n with n = 16.
    for line in block.lines().filter(|l| !l.starts_with('#')) {
        let t: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(t.len(), 13, "{line}");
        for (alg, bus) in [(6, 7), (10, 11)] {
            let (a, b): (f64, f64) = (
                t[alg].parse().expect("algbw"),
                t[bus].parse().expect("busbw"),
            );
            assert!((a * 30.0 / 16.0 - b).abs() < 0.02, "{line}");
        }
    }
    // The same round trip prints the table back.
    let text_back = ok(Command::new(TOOL).arg("report").arg(&log));
    for line in block.lines().filter(|l| !l.starts_with('#')) {
        assert!(text_back.contains(line), "report lost: {line}");
    }
}
