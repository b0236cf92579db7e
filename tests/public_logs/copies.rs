//! Logs as others pass them on: without their `#` hashes (a ticket, a web page), as a
//! container's JSON log, with a byte order mark or in UTF-16; and the rank count read from
//! the printed digits or the excerpt's device lines.

use super::{golden_tables, logs, read, report, scratch, text, write};
use crate::programs::tool;
use nccl_perf_report::health;
use nccl_perf_report::parse::{ParseOptions, parse_log};
use std::path::Path;

#[test]
fn logs_that_lost_their_hashes_read_as_the_originals() {
    // Every golden nccl-tests 2.19.6 log with a table, as a ticket or web page shows it: the `#`
    // gone with its blank kept (a filter), or with the blanks after it (a Markdown heading).
    let dir = scratch("hashes");
    let mut checked = 0;
    for (name, body) in golden_tables() {
        let want = report(&dir, &name, &body);
        let filtered: String = body
            .lines()
            .map(|l| l.strip_prefix('#').unwrap_or(l).to_string() + "\n")
            .collect();
        let headings: String = body
            .lines()
            .map(|l| l.strip_prefix('#').map_or(l, str::trim_start).to_string() + "\n")
            .collect();
        for (how, text) in [("filtered", filtered), ("headings", headings)] {
            let got = report(&dir, &format!("{how}-{name}"), &text);
            assert_eq!(got, want, "{name} with its # lost ({how})");
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} golden logs with a table");
}

#[test]
fn a_public_log_that_lost_its_hashes_keeps_its_parameters() {
    let runs = parse_log(
        &read("nccl-tests-issue-249-hashes-lost.log"),
        "l",
        &ParseOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let run = &runs[0];
    assert_eq!(run.info.max_bytes, 16 * 1024 * 1024);
    assert_eq!(run.info.iters, 5);
    // The older wording of `-z 1`.
    assert_eq!(run.info.blocking, 1);
    assert_eq!(run.devices.len(), 1);
    assert_eq!(run.devices[0].name, "NVIDIA A10G");
    // And a log with its `#`s is not taken for one without.
    let with: String = read("gcp-a3mega-mpirun-16.log");
    let runs = parse_log(&with, "g", &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs[0].rows.len(), 31);
}

#[test]
fn ranks_are_inferred_from_the_printed_digits_only_when_they_tell() {
    // busbw/algbw = 2(n-1)/n for all_reduce; the two values are rounded to their last digit, so
    // n is known to a range, and given only when one whole number lies in it.
    let cases: &[(&str, Option<usize>)] = &[
        ("gcp-a3mega-mpirun-16.log", Some(16)),
        ("aws-p5-srun-l.log", Some(16)),
        ("aws-batch-tag-output.log", Some(8)),
        ("coreweave-gb200-1rack.log", Some(72)),
        // 386.56 / 195.31: n between 95.9 and 96.5 (a tolerance of 0.2 around 96.2 missed it).
        ("coreweave-h100-mpijob-kubectl.log", Some(96)),
        // 810.41 / 408.40 = 1.98435 is 2·127/128, but the excerpt's one device line says rank
        // 143 (144 ranks would print 1.98611): the numbers and the line disagree, neither wins.
        ("coreweave-gb200-2racks.log", None),
        // 1440 ranks: 405.74 / 203.01 allows anything from 1376 to 1532.
        ("coreweave-gb200-20racks.log", None),
    ];
    for &(file, want) in cases {
        let runs = parse_log(&read(file), file, &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(health::ranks_from_bandwidth(&runs[0]), want, "{file}");
    }
}

#[test]
fn an_excerpts_last_device_lines_bound_the_ranks_and_name_the_gpu() {
    for (file, least, gpu) in [
        ("coreweave-gb200-1rack.log", 72, "NVIDIA Graphics Device"),
        ("coreweave-gb200-2racks.log", 144, "NVIDIA Graphics Device"),
        ("coreweave-gb200-20racks.log", 1440, "NVIDIA GB200"),
    ] {
        let runs = parse_log(&read(file), file, &ParseOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(health::ranks_at_least(&runs[0]), Some(least), "{file}");
        // Some GPUs only: not taken for the run's devices.
        assert!(runs[0].devices.is_empty(), "{file}");
        // Explained from the log, and from its JSON alike.
        let dir = scratch("partial");
        let json = tool(&["parse", &logs().join(file).to_string_lossy()]);
        let json = write(&dir, "run.json", &String::from_utf8_lossy(&json.stdout));
        for input in [logs().join(file).to_string_lossy().into_owned(), json] {
            let out = text(&tool(&["report", "--explain", &input]));
            assert!(out.contains("# explain: all_reduce on "), "{out}");
            assert!(out.contains(&format!(", {gpu}\n")), "{input}: {out}");
            assert!(
                out.contains(&format!("rank {}", least - 1)),
                "{input}: {out}"
            );
        }
    }
}

/// `s` as a JSON string's contents.
fn json_escaped(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '"' => "\\\"".to_string(),
            '\\' => "\\\\".to_string(),
            '\n' => "\\n".to_string(),
            c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

#[test]
fn container_logs_read_as_the_text_they_hold() {
    // A container's output as Docker's json-file driver keeps it: one object a line.
    let dir = scratch("docker");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/nccl-tests-2.19.6-h200");
    for name in ["ar_sweep.out", "ar_perit.out", "alltoall_small.out"] {
        let body = std::fs::read_to_string(golden.join(name)).unwrap_or_else(|e| panic!("{e}"));
        let docker: String = body
            .split_inclusive('\n')
            .enumerate()
            .map(|(i, l)| {
                format!(
                    "{{\"log\":\"{}\",\"stream\":\"stdout\",\"time\":\"2026-12-04T10:00:{:02}.5Z\"}}\n",
                    json_escaped(l),
                    i % 60
                )
            })
            .collect();
        let want = report(&dir, name, &body);
        let got = report(&dir, &format!("docker-{name}"), &docker);
        assert_eq!(got, want, "{name} from a json-file log");
        // And as the kubelet keeps it (CRI: time, stream, full-line tag before each line).
        let cri: String = body
            .lines()
            .enumerate()
            .map(|(i, l)| {
                format!(
                    "2026-12-04T10:00:{:02}.{:09}Z stdout F {l}\n",
                    i % 60,
                    i * 7919
                )
            })
            .collect();
        let got = report(&dir, &format!("cri-{name}"), &cri);
        assert_eq!(got, want, "{name} from a CRI log");
    }
}

#[test]
fn files_saved_with_a_byte_order_mark_or_in_utf16_read_the_same() {
    // Windows PowerShell's `>` writes UTF-16 LE with a mark and CRLF; editors add a UTF-8 mark.
    let dir = scratch("bom");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/nccl-tests-2.19.6-h200");
    for name in ["ar_sweep.out", "ar_json.json"] {
        let body = std::fs::read_to_string(golden.join(name)).unwrap_or_else(|e| panic!("{e}"));
        let want = report(&dir, name, &body);
        let crlf = body.replace('\n', "\r\n");
        let le: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(crlf.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        let be: Vec<u8> = [0xFE, 0xFF]
            .into_iter()
            .chain(body.encode_utf16().flat_map(u16::to_be_bytes))
            .collect();
        let utf8: Vec<u8> = [0xEF, 0xBB, 0xBF].into_iter().chain(body.bytes()).collect();
        for (how, bytes) in [("utf16le", le), ("utf16be", be), ("utf8bom", utf8)] {
            let path = dir.join(format!("{how}-{name}"));
            std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
            let path = path.to_string_lossy().into_owned();
            let out = tool(&["report", &path]);
            let got = (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).replace(&path, "LOG"),
            );
            assert_eq!(got, want, "{name} saved as {how}");
        }
    }
}
