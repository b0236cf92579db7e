//! Tests of the report output: the `-J` target, rows, averages and the JSON document.
use super::*;
use crate::report::HalfResult;

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("nccl-perf-out-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn out(p: &Path) -> OutputFile {
    OutputFile {
        path: p.to_path_buf(),
        format: OutputFormat::of(&p.to_string_lossy()).unwrap_or(OutputFormat::Json),
    }
}

fn info() -> RunInfo {
    super::run_info(&Options::default(), "all_reduce_perf")
}

fn parsed(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn row() -> RowResult {
    let half = HalfResult {
        time_us: 10.0,
        algbw: 1.0,
        busbw: 1.0,
        wrong: Some(0.0),
        per_iter: None,
    };
    RowResult {
        size: 1024,
        count: 256,
        dtype: "float".into(),
        op: "sum".into(),
        root: -1,
        out_of_place: half.clone(),
        in_place: half,
        timestamp: None,
        iterations: 20,
    }
}

#[test]
fn the_job_busbw_for_locate_is_the_row_nearest_below_its_size() {
    let mut o = Output::new(info(), false, None);
    assert_eq!(o.busbw_at(1 << 20), None);
    for (size, busbw) in [(1024, 1.0), (4096, 4.0), (16384, 16.0)] {
        let mut r = row();
        r.size = size;
        r.out_of_place.busbw = busbw;
        o.row(&r);
    }
    assert_eq!(o.busbw_at(8192), Some(4.0));
    assert_eq!(o.busbw_at(1 << 30), Some(16.0));
    assert_eq!(o.busbw_at(16), Some(1.0));
}

#[test]
fn the_json_file_is_well_formed_at_every_stage() {
    let d = dir("stages");
    let p = d.join("r.json");
    let (target, line) =
        create_target(&out(&p), &info(), vec!["all_reduce_perf".into()], false).unwrap();
    assert_eq!(line, format!("# Writing JSON output to {}\n", p.display()));
    // Created before any GPU work: already a complete document, without devices.
    let v = parsed(&p);
    assert_eq!(v["config"]["devices"], serde_json::json!([]));
    assert!(v.get("end_time").is_none());
    let Target::Json(watchdog) = &target else {
        panic!("not JSON")
    };
    let watchdog = watchdog.clone();
    let mut out = Output::new(info(), false, Some(target));
    let dev = DeviceInfo {
        rank: 0,
        group: 0,
        pid: 7,
        hostname: "n1".into(),
        device: 0,
        pci_domain: 0,
        pci_bus: 0x18,
        pci_device: 0,
        name: "NVIDIA H200".into(),
    };
    out.start_json(&[dev], 22803);
    let v = parsed(&p);
    assert_eq!(v["nccl_version"], 22803);
    assert_eq!(v["config"]["devices"][0]["hostname"], "n1");
    out.row(&row());
    // A lost rank or a signal: the watchdog closes the document with the rows so far.
    watchdog.abort();
    let v = parsed(&p);
    assert_eq!(v["results"].as_array().unwrap().len(), 1);
    assert!(v.get("out_of_bounds").is_none());
    // Closed: the printing thread's later calls change nothing.
    out.row(&row());
    out.abort();
    assert_eq!(parsed(&p)["results"].as_array().unwrap().len(), 1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_finished_run_replaces_the_document() {
    let d = dir("finish");
    let p = d.join("r.json");
    // An existing file is never overwritten.
    std::fs::write(&p, "keep").unwrap();
    let (target, line) = create_target(&out(&p), &info(), vec![], false).unwrap();
    assert!(line.ends_with("r.json.0\n"), "{line}");
    let mut out = Output::new(info(), false, Some(target));
    out.row(&row());
    out.finish(&Summary {
        oob_errors: 0,
        avg_busbw: 1.0,
        min_bw_ok: None,
        last_error: String::new(),
        memory_report: None,
    });
    let v = parsed(&d.join("r.json.0"));
    assert_eq!(v["out_of_bounds"]["okay"], "true");
    assert!(v["end_time"].is_string());
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "keep");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn csv_gets_its_header_at_creation() {
    let d = dir("csv");
    let p = d.join("r.csv");
    let (target, line) = create_target(&out(&p), &info(), vec![], false).unwrap();
    assert!(matches!(target, Target::Csv(..)));
    assert!(line.starts_with("# Writing CSV output to "));
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.starts_with("collective,size,count,"), "{text}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A CSV record that cannot be written is said on stderr (as the JSON file's failures are)
/// and ends the records rather than leave a broken one followed by more.
#[test]
fn a_csv_write_error_stops_the_records() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full");
        return;
    };
    let mut o = Output::new(
        info(),
        false,
        Some(Target::Csv(full, csv::Columns::default())),
    );
    o.row(&row());
    assert!(o.csv.is_none());
    o.row(&row());
    assert_eq!(o.halves, 4);
}

#[test]
fn unwritable_paths_are_argument_errors() {
    let p = Path::new("/nonexistent/dir/x.json");
    let e = create_target(&out(p), &info(), vec![], false)
        .err()
        .unwrap();
    assert_eq!(e.exit_code(), 255);
    let msg = e.to_string();
    assert!(
        msg.starts_with("-J /nonexistent/dir/x.json: cannot create the output file (")
            && !msg.contains('\n'),
        "{msg}"
    );
    assert_eq!(check_target(p).err().unwrap().exit_code(), 255);
    let d = dir("check");
    assert!(check_target(&d.join("x.json")).is_ok());
    // A file where the folder should be.
    std::fs::write(d.join("f"), "").unwrap();
    let e = check_target(&d.join("f/x.json")).err().unwrap();
    assert!(e.to_string().contains("is not a folder"), "{e}");
    assert!(check_target(Path::new("x.json")).is_ok());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn header_info_uses_unclamped_sizes() {
    let o = Options {
        step_factor: 2,
        ..Options::default()
    };
    let i = run_info(&o, "all_reduce_perf");
    assert_eq!(i.step, Step::Factor(2));
    assert_eq!(i.max_bytes, 32 << 20);
}
