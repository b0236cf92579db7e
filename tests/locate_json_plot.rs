//! Locate's JSON reads back (matrix, scores, named GPUs) and plots: the matrix and the bars
//! drawn by the library and through `nccl-perf plot`.

use crate::programs;

use nccl_perf_locate::evidence::JobCheck;
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
    // Only the runner knows the collective and size: the model's record leaves them out.
    assert!(!text.contains("\"collective\"") && !text.contains("\"bytes\""));
    let back: LocateJson = json::read(&text).expect("read back");
    assert_eq!(
        (&back.collective, &back.datatype, back.bytes),
        (&None, &None, None)
    );
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
            let svg = String::from_utf8_lossy(&bytes);
            assert!(svg.contains("locate:"), "{name}");
            // Every node is named (on both axes of the heatmap and under the bars).
            let words: Vec<String> = texts(&svg).into_iter().map(|t| t.words).collect();
            for node in topo.all_nodes() {
                let times = words.iter().filter(|w| **w == node.host).count();
                assert_eq!(times, if kind == Kind::Full { 3 } else { 1 }, "{name}");
            }
            assert!(svg.contains("every node named"), "{name}");
            // The bars' key, and the heatmap's colour scale in the record's own terms.
            assert!(
                svg.contains("named suspect")
                    && svg.contains("0.85\u{d7} = 1 \u{2212} min drop (0.15)")
            );
            let scale = [
                "colour: busbw / median pair (1\u{d7} = ",
                "0\u{d7} red",
                "0.70\u{d7} orange",
                "\u{2265}1\u{d7} green",
                "hung or failed",
                "not measured",
            ];
            for words in scale {
                assert_eq!(svg.contains(words), kind == Kind::Full, "{name}: {words}");
            }
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
    // What the runner adds to the record, and the job against its pairs, make the title's
    // second line.
    let doc = LocateJson {
        collective: Some("all_reduce".into()),
        datatype: Some("float".into()),
        bytes: Some(256 << 20),
        job: Some(JobCheck {
            job_busbw: 191.82,
            pairs_busbw: 361.13,
            ratio: 0.53,
            slow_below: 0.7,
            slow: true,
            localised: true,
            halves: None,
            one_machine: false,
        }),
        ..json::document(&report, &topo)
    };
    let text = serde_json::to_string_pretty(&doc).expect("json");
    let back = json::read(&text).expect("read back");
    assert_eq!(
        (back.collective, back.datatype, back.bytes),
        (doc.collective, doc.datatype, doc.bytes)
    );
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
    assert!(
        drawn.contains(
            "all_reduce, 256 MiB of float per group; job busbw 191.82 GB/s = 0.53\u{d7} the \
             median pair (361.13 GB/s)"
        ),
        "title's second line"
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

#[test]
fn many_nodes_are_named_every_kth_and_the_image_stays_small() {
    // A synthetic record of 200 nodes: every pair measured near 100 GB/s but node 37's.
    let n = 200;
    let topo = Topology::uniform(4, 2);
    let (report, _) = locate(
        &mut ModelCluster::new(topo.clone(), 1),
        &topo,
        &config(Kind::Full),
    );
    let small = json::document(&report, &topo);
    let doc = LocateJson {
        nodes: (0..n)
            .map(|i| nccl_perf_locate::topology::Node {
                host: format!("gpu-node-{i:04}.cluster.example.com"),
                ..small.nodes[0].clone()
            })
            .collect(),
        pair_matrix: Some(
            (0..n)
                .map(|a| {
                    (0..n)
                        .map(|b| match (a, b) {
                            _ if a == b => None,
                            (37, _) | (_, 37) => Some(50.0),
                            _ => Some(100.0 + ((a * 7 + b * 13) % 10) as f64 * 0.1),
                        })
                        .collect()
                })
                .collect(),
        ),
        node_scores: Some(
            (0..n)
                .map(|i| Some(if i == 37 { 0.5 } else { 1.0 }))
                .collect(),
        ),
        ..small
    };
    let dir = std::env::temp_dir().join(format!("nccl-perf-locate-many-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("many.svg").to_string_lossy().into_owned();
    let notes = plot::plot(&doc, &path, (1000, 600)).expect("plot");
    assert_eq!(
        notes,
        ["200 nodes: each heatmap cell is the worst pair of 2x2 nodes"]
    );
    let svg = std::fs::read_to_string(&path).expect("svg");
    // Bounded: 100 x 100 cells and a few hundred words at most.
    assert!(svg.len() < 2_000_000, "{} bytes", svg.len());
    let texts = texts(&svg);
    assert!(texts.len() < 200, "{} texts", texts.len());
    // Names without the domain every host shares; a row or column names its block's first node.
    assert!(!svg.contains("cluster.example.com"));
    let names: Vec<&Text> = texts
        .iter()
        .filter(|t| t.words.starts_with("gpu-node-"))
        .collect();
    assert!(names.iter().any(|t| t.words == "gpu-node-0000"));
    // Thinned, and said: rows (upright), then columns and bars (turned; two rows of them).
    let rows: Vec<i64> = names.iter().filter(|t| !t.turned).map(|t| t.y).collect();
    let mut lines: Vec<i64> = names.iter().filter(|t| t.turned).map(|t| t.y).collect();
    lines.dedup();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let turned = |y: i64| -> Vec<i64> {
        names
            .iter()
            .filter(|t| t.turned && t.y == y)
            .map(|t| t.x)
            .collect()
    };
    let (columns, bars) = (turned(lines[0]), turned(lines[1]));
    for (what, at, most) in [
        ("rows", &rows, 100),
        ("columns", &columns, 100),
        ("bars", &bars, 200),
    ] {
        assert!(
            at.len() >= 10 && at.len() < most / 2,
            "{what}: {} labels",
            at.len()
        );
        // Never closer than one line of text (13 pixels; a pixel for rounding).
        assert!(at.windows(2).all(|w| w[1] - w[0] >= 12), "{what}: {at:?}");
    }
    let every = |unit: &str| {
        texts
            .iter()
            .any(|t| t.words.contains("every ") && t.words.ends_with(&format!(" {unit} named")))
    };
    assert!(
        every("block") && every("node"),
        "{:?}",
        texts.iter().map(|t| &t.words).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One text of an SVG drawn by plotters.
#[derive(Debug)]
struct Text {
    x: i64,
    y: i64,
    /// Turned a quarter (names under a column or bar).
    turned: bool,
    words: String,
}

/// The texts of an SVG drawn by plotters, in drawing order.
fn texts(svg: &str) -> Vec<Text> {
    let attr = |attrs: &str, name: &str| -> Option<f64> {
        let start = attrs.find(&format!(" {name}=\""))? + name.len() + 3;
        attrs[start..].split('"').next()?.parse().ok()
    };
    svg.split("<text")
        .skip(1)
        .filter_map(|chunk| {
            let (attrs, rest) = chunk.split_once('>')?;
            Some(Text {
                x: attr(attrs, "x")? as i64,
                y: attr(attrs, "y")? as i64,
                turned: attrs.contains("rotate(270"),
                words: rest.split("</text>").next()?.trim().to_string(),
            })
        })
        .collect()
}
