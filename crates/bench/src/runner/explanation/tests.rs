//! Tests of `--explain` in the runner: the rows, the gate, the capture status, the hardware
//! read's deadline.
use super::*;
use crate::report::HalfResult;

fn device(rank: i64, host: &str) -> DeviceInfo {
    DeviceInfo {
        rank,
        group: 0,
        pid: 1,
        hostname: host.into(),
        device: rank,
        pci_domain: 0,
        pci_bus: 0x18,
        pci_device: 0,
        name: "NVIDIA H200".into(),
    }
}

fn half(busbw: f64) -> HalfResult {
    HalfResult {
        time_us: 10.0,
        algbw: busbw,
        busbw,
        wrong: Some(0.0),
        per_iter: None,
    }
}

#[test]
fn the_run_counts_nodes_and_keeps_both_halves() {
    let devices = [device(0, "a"), device(1, "a"), device(2, "b")];
    let mut rows = Rows {
        devices: devices.to_vec(),
        rank_devices: Vec::new(),
        nccl_version: 22803,
        rows: Vec::new(),
        skus: SkuTable::builtin(),
        gate: None,
        left_out: 0,
    };
    let r = RowResult {
        size: 1 << 20,
        count: 1 << 18,
        dtype: "float".into(),
        op: "sum".into(),
        root: -1,
        out_of_place: half(5.0),
        in_place: half(6.0),
        timestamp: None,
        iterations: 20,
    };
    let seen = Seen {
        channels: Some(2),
        ..Seen::default()
    };
    rows.add(&r, [None, Some(seen.clone())]);
    let run = rows.run("all_reduce_perf");
    assert_eq!(run.collective, "all_reduce");
    assert_eq!((run.nranks, run.nnodes, run.ranks_per_node), (3, 2, 2));
    assert_eq!(run.rows.len(), 2);
    assert!(!run.rows[0].in_place && run.rows[1].in_place);
    assert_eq!(run.rows[1].busbw, 6.0);
    assert_eq!(run.rows[1].seen, Some(seen));
    assert_eq!(rows.first_pci().as_deref(), Some("0000:18:00.0"));
}

#[test]
fn a_hardware_read_that_hangs_is_given_up() {
    let slow = within(Duration::from_millis(50), || {
        std::thread::sleep(Duration::from_secs(5));
        Hardware::default()
    });
    assert_eq!(
        slow.notes,
        ["hardware not read: NVML and sysfs did not answer within 0.05 s"]
    );
    let quick = within(Duration::from_secs(60), || Hardware {
        notes: vec!["read".into()],
        ..Hardware::default()
    });
    assert_eq!(quick.notes, ["read"]);
}

#[test]
fn the_gate_fails_below_it_and_without_a_figure() {
    assert!(!gate_fails(None, Some(1.0)));
    assert!(!gate_fails(Some(80.0), Some(80.0)));
    assert!(gate_fails(Some(80.0), Some(79.9)));
    assert!(gate_fails(Some(80.0), None));
}

#[test]
fn nothing_is_captured_without_the_plugins() {
    // This test binary never installed the plugins.
    assert!(matches!(capture(22803), Capture::Unavailable(_)));
}

/// What each NCCL version can show (`crates/capture/src/ffi/abi_v1_v3.rs`).
#[test]
fn each_nccl_version_shows_what_its_plugin_interfaces_give() {
    let ours = nccl_perf_capture::Installed {
        profiler: None,
        tuner: None,
        chained: None,
    };
    let live = |v| match capture_with(v, &ours) {
        Capture::Live {
            profiler,
            tuner,
            notes,
        } => Some((profiler, tuner, notes.len())),
        _ => None,
    };
    assert_eq!(live(22105), None, "2.21: no cost table, no profiler");
    assert_eq!(live(21703), None);
    assert_eq!(live(22203), Some((false, true, 1)), "2.22: the tuner alone");
    assert_eq!(live(22304), Some((true, true, 0)), "2.23: profiler v1");
    assert_eq!(live(22503), Some((true, true, 0)));
    assert_eq!(live(22605), Some((true, true, 0)), "2.26: profiler v3");
    assert_eq!(live(22803), Some((true, true, 0)));
    let Capture::Unavailable(why) = capture_with(22105, &ours) else {
        unreachable!()
    };
    assert!(
        why.starts_with("NCCL 2.21.5 has no plugin interface"),
        "{why}"
    );
}

#[test]
fn stdout_lines_keep_the_contract() {
    let text = "# verdict: 80 % of the memory Bandwidth\n# gate FAILED\nstray line\n";
    assert_eq!(
        stdout_safe(text),
        "# verdict: 80 % of the memory bw\n# gate failed\n# stray line\n"
    );
}
