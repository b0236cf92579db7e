//! Locate's JSON reads back (matrix, scores, named GPUs) and plots: the matrix and the bars
//! drawn by the library and through `nccl-perf plot`.

use crate::programs;

use nccl_perf_locate::json::{self, LocateJson};
use nccl_perf_locate::schedule::Kind;
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::{EXIT_SUSPECTS, Report};
use nccl_perf_tool::locate_plot as plot;
use oracle::locate_model::{Fault, ModelCluster};

use crate::locate_runs::*;

#[test]
fn json_reads_back_with_matrix_scores_and_named_gpus() {
    let topo = Topology::uniform(8, 8);
    let mut model = ModelCluster::new(topo.clone(), 2).with_fault(Fault::SlowNic {
        node: 5,
        gpu: 2,
        factor: 0.5,
    });
    let (report, _) = locate(&mut model, &topo, &config(Kind::Full));
    let doc = json::document(&report, &topo);
    let text = serde_json::to_string_pretty(&doc).expect("serialise");
    assert!(json::is_locate(&text));
    let back: LocateJson = json::read(&text).expect("read back");
    // serde_json may read a float back one unit in the last place off: compare the rest.
    assert_eq!(back.verdicts.len(), doc.verdicts.len());
    assert_eq!(
        back.verdicts[0].verdict.culprit,
        doc.verdicts[0].verdict.culprit
    );
    assert_eq!(
        back.verdicts[0].verdict.evidence,
        doc.verdicts[0].verdict.evidence
    );
    assert_eq!(
        (back.schedule, back.seed, &back.nodes),
        (doc.schedule, doc.seed, &doc.nodes)
    );
    for (a, b) in back.rounds.iter().zip(&doc.rounds) {
        assert_eq!(
            (a.round, a.phase, a.groups.len()),
            (b.round, b.phase, b.groups.len())
        );
        for (x, y) in a.groups.iter().zip(&b.groups) {
            assert_eq!(
                (&x.subject, x.role, &x.ranks, x.state),
                (&y.subject, y.role, &y.ranks, y.state)
            );
            assert!(
                (x.outcome.busbw().unwrap_or(0.0) - y.outcome.busbw().unwrap_or(0.0)).abs() < 1e-9
            );
        }
    }
    let matrix = back.pair_matrix.as_ref().expect("pair matrix");
    assert_eq!((matrix.len(), matrix[0].len()), (8, 8));
    assert!(matrix[0][0].is_none() && matrix[0][1] == matrix[1][0]);
    let scores = back.node_scores.as_ref().expect("scores");
    assert!(scores[5].is_some_and(|s| s < 0.6), "{scores:?}");
    assert_eq!(back.verdicts.len(), 1);
    let v = &back.verdicts[0];
    assert_eq!(v.hosts, ["node006"]);
    assert_eq!(v.gpus.len(), 1);
    assert_eq!(
        (v.gpus[0].device, v.gpus[0].pci.as_str()),
        (2, "0000:38:00.0")
    );
    assert_eq!(back.exit_code, EXIT_SUSPECTS);
    assert_eq!(back.rounds.len(), report.rounds.len());

    assert!(json::read("not json").is_err());
    assert!(
        json::read("{\"version\": 1}")
            .unwrap_err()
            .to_string()
            .contains("not a locate record")
    );
    let newer = text.replacen("\"locate_format\": 1", "\"locate_format\": 99", 1);
    assert!(
        json::read(&newer)
            .unwrap_err()
            .to_string()
            .contains("format 99")
    );
    assert!(!json::is_locate("{\"rows\": []}"));
}

#[test]
fn plots_draw_the_matrix_and_the_bars() {
    let dir = std::env::temp_dir().join(format!("nccl-perf-locate-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let cases = [
        (Kind::Full, 8, Fault::HangingLink { a: 1, b: 6 }, "full.svg"),
        (
            Kind::Quick,
            12,
            Fault::SlowNode {
                node: 4,
                factor: 0.5,
            },
            "quick.png",
        ),
        (
            Kind::Nodes,
            6,
            Fault::SlowGpu {
                node: 2,
                gpu: 1,
                factor: 0.5,
            },
            "nodes.svg",
        ),
        (
            Kind::Rails,
            6,
            Fault::SlowRail {
                rail: 3,
                factor: 0.5,
            },
            "rails.png",
        ),
        (
            Kind::Full,
            130,
            Fault::SlowLink {
                a: 3,
                b: 120,
                factor: 0.4,
            },
            "blocks.png",
        ),
    ];
    for (kind, n, fault, name) in cases {
        let topo = Topology::uniform(n, 4);
        let mut model = ModelCluster::new(topo.clone(), 1).with_fault(fault);
        let (report, _) = locate(&mut model, &topo, &config(kind));
        assert_eq!(report.exit_code(), EXIT_SUSPECTS, "{name}");
        let doc = json::document(&report, &topo);
        let notes = plot::plot(&doc, &path(name), (900, 500)).expect(name);
        assert_eq!(notes.len(), usize::from(n > 128), "{name}: {notes:?}");
        let bytes = std::fs::read(path(name)).expect(name);
        assert!(bytes.len() > 1000, "{name}: {} bytes", bytes.len());
        if name.ends_with(".svg") {
            assert!(
                String::from_utf8_lossy(&bytes).contains("locate:"),
                "{name}"
            );
        } else {
            assert_eq!(&bytes[1..4], b"PNG", "{name}");
        }
    }
    let topo = Topology::uniform(4, 2);
    let (report, _) = locate(
        &mut ModelCluster::new(topo.clone(), 1),
        &topo,
        &config(Kind::Full),
    );
    let doc = json::document(&report, &topo);
    assert!(plot::plot(&doc, &path("x.txt"), (900, 500)).is_err());
    let missing = dir
        .join("no/such/folder/x.svg")
        .to_string_lossy()
        .into_owned();
    assert!(
        plot::plot(&doc, &missing, (900, 500))
            .unwrap_err()
            .to_string()
            .contains("cannot create")
    );
    let empty = Report {
        rounds: vec![],
        ..report
    };
    assert!(plot::plot(&json::document(&empty, &topo), &path("e.svg"), (900, 500)).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nccl_perf_plot_draws_a_locate_record() {
    let dir = std::env::temp_dir().join(format!("nccl-perf-locate-tool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let topo = Topology::uniform(6, 2);
    let mut model = ModelCluster::new(topo.clone(), 1).with_fault(Fault::SlowNode {
        node: 3,
        factor: 0.5,
    });
    let (report, _) = locate(&mut model, &topo, &config(Kind::Full));
    let record = dir.join("locate.json");
    let text = serde_json::to_string_pretty(&json::document(&report, &topo)).expect("json");
    std::fs::write(&record, text).expect("write");
    let tool = |args: &[&std::ffi::OsStr]| {
        // Through the emulator when the tests run for another architecture (ci/arm64.sh).
        programs::program(env!("CARGO_BIN_EXE_nccl-perf"))
            .args(args)
            .output()
            .expect("nccl-perf runs")
    };
    let svg = dir.join("locate.svg");
    let out = tool(&[
        "plot".as_ref(),
        record.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drawn = std::fs::read_to_string(&svg).expect("svg");
    assert!(
        drawn.contains("locate: full schedule, 6 nodes, 1 suspect"),
        "title"
    );
    // A record is plotted on its own; a damaged one is a one-line error.
    let out = tool(&[
        "plot".as_ref(),
        record.as_os_str(),
        record.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("plot it on its own"));
    let damaged = dir.join("damaged.json");
    std::fs::write(&damaged, r#"{"locate_format": 1, "schedule": "full"}"#).expect("write");
    let out = tool(&[
        "plot".as_ref(),
        damaged.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("nccl-perf: ")
            && err.contains("unreadable locate record")
            && err.lines().count() == 1,
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
