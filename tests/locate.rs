//! Locate's edges: its stdout lines keep the nccl-tests contract (and leave a parsed log
//! unchanged), its JSON reads back and plots, and odd jobs (one node, one GPU per node, runners
//! that stop or garble results, invalid thresholds) end cleanly with a sound verdict.

mod support;

use std::time::Duration;

use nccl_perf_locate::json::{self, LocateJson};
use nccl_perf_locate::round::{NO_COLOUR, Round, Subject};
use nccl_perf_locate::schedule::Kind;
use nccl_perf_locate::seam::{GroupOutcome, RoundResult, RoundRunner, Stop};
use nccl_perf_locate::stats::Thresholds;
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::verdict::Culprit;
use nccl_perf_locate::{Config, EXIT_SUSPECTS, Report, output, run};
use nccl_perf_report::health;
use nccl_perf_report::parse::{ParseOptions, parse_log};
use nccl_perf_report::split::{self, SplitGroup};
use nccl_perf_tool::locate_plot as plot;
use oracle::locate_model::{Fault, ModelCluster};

/// Runs `kind` on `model`, collecting every stdout line locate would print.
fn locate(model: &mut dyn RoundRunner, topo: &Topology, config: &Config) -> (Report, Vec<String>) {
    let mut lines = vec![output::header()];
    let report = run(model, topo, config, &mut |rec, t| {
        lines.extend(output::group_lines(rec, t))
    })
    .expect("valid config");
    lines.extend(output::verdict_lines(&report, topo));
    (report, lines)
}

fn config(kind: Kind) -> Config {
    Config {
        schedule: kind,
        ..Config::default()
    }
}

/// A locate run on `model` and the culprits its verdicts name.
fn named(model: &mut ModelCluster, topo: &Topology, config: &Config) -> (Report, Vec<Culprit>) {
    let (report, _) = locate(model, topo, config);
    let named = report.verdicts.iter().map(|v| v.culprit.clone()).collect();
    (report, named)
}

/// The quick schedule with `seed` and a minimum drop of `min_drop`, as the GPU check runs it.
fn quick(seed: u64, min_drop: f64) -> Config {
    Config {
        seed,
        thresholds: Thresholds {
            min_drop,
            ..Thresholds::default()
        },
        ..config(Kind::Quick)
    }
}

/// Eight nodes whose host names hold the words scrapers look for.
fn hostile_topology() -> Topology {
    let ranks: Vec<(String, i32, String)> = (0..8)
        .flat_map(|n| {
            (0..4).map(move |g| {
                let host = match n {
                    1 => "FAILED-host".to_string(),
                    2 => "Bandwidth-node".to_string(),
                    _ => format!("h{n}"),
                };
                (host, g, format!("0000:{:02x}:00.0", 0x10 + g))
            })
        })
        .collect();
    Topology::from_ranks(&ranks).expect("topology")
}

#[test]
fn output_lines_are_comments_free_of_scraped_words() {
    let topo = hostile_topology();
    let faults = [
        Fault::SlowNode {
            node: 1,
            factor: 0.5,
        },
        Fault::FailingGpu { node: 2, gpu: 1 },
        Fault::HangingLink { a: 1, b: 2 },
        Fault::SlowRail {
            rail: 2,
            factor: 0.5,
        },
    ];
    let mut suspects = 0;
    for kind in Kind::ALL {
        for f in &faults {
            let mut model = ModelCluster::new(topo.clone(), 3).with_fault(f.clone());
            let (report, lines) = locate(&mut model, &topo, &config(kind));
            suspects += report.verdicts.len();
            for l in &lines {
                assert!(l.starts_with("# locate"), "{l}");
                assert!(!l.to_ascii_lowercase().contains("bandwidth"), "{l}");
                assert!(!l.contains("FAILED"), "{l}");
            }
        }
    }
    assert!(suspects >= 8, "the faults were seen: {suspects}");
}

#[test]
fn large_rounds_print_a_summary_and_the_groups_that_are_not_ok() {
    let topo = Topology::uniform(40, 2);
    let mut model =
        ModelCluster::new(topo.clone(), 1).with_fault(Fault::HangingLink { a: 0, b: 39 });
    let mut lines = Vec::new();
    run(&mut model, &topo, &config(Kind::Full), &mut |rec, t| {
        lines.push(output::round_lines(rec, t, 8))
    })
    .expect("run");
    // The round-robin pairs the first and last nodes in its first round; the re-test of that
    // link (a round of one probe) is short enough to print whole.
    let first = &lines[0];
    assert!(
        first[0].contains(" pairs  20 groups: 19 ok, 0 slow, 1 hung"),
        "{first:?}"
    );
    assert_eq!(first.len(), 2);
    assert!(first[1].contains("node001+node040") && first[1].ends_with("hung"));
    assert!(
        lines[1..39]
            .iter()
            .all(|l| l.len() == 1 && l[0].contains("20 ok"))
    );
    assert!(lines.iter().flatten().all(|l| !l.contains("bandwidth")));
}

#[test]
fn locate_and_split_group_lines_after_a_table_leave_the_parsed_run_unchanged() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/nccl-tests-2.19.6-h200/ar_sweep.out"
    );
    let text: String = std::fs::read_to_string(path)
        .expect("golden output")
        .lines()
        .filter(|l| !l.starts_with("### ") && !l.starts_with("# time -v"))
        .map(|l| format!("{l}\n"))
        .collect();
    let topo = Topology::uniform(8, 2);
    let mut model = ModelCluster::new(topo.clone(), 1).with_fault(Fault::SlowNode {
        node: 3,
        factor: 0.4,
    });
    let (report, lines) = locate(&mut model, &topo, &config(Kind::Full));
    assert_eq!(report.exit_code(), EXIT_SUSPECTS);
    // Split groups' own lines come first, as a split run with --locate prints them.
    let groups = split::lines(&[
        SplitGroup {
            color: 0,
            ranks: vec![0, 2],
            average_bus_bw: 1.5,
            bus_bw: vec![1.0, 2.0],
            time: vec![2.0, 1.0],
        },
        SplitGroup {
            color: 1,
            ranks: vec![1, 3],
            average_bus_bw: 0.5,
            bus_bw: vec![0.5, 0.5],
            time: vec![4.0, 4.0],
        },
    ]);
    let with_locate = text.clone() + &groups + &lines.join("\n") + "\n";
    let options = ParseOptions::default();
    let plain = parse_log(&text, "plain", &options).expect("parse");
    let located = parse_log(&with_locate, "located", &options).expect("parse");
    assert!(!plain.is_empty());
    assert_eq!(plain.len(), located.len());
    for (a, b) in plain.iter().zip(&located) {
        assert_eq!(a.rows, b.rows);
        assert_eq!(a.summary, b.summary);
        assert_eq!(health::problem_lines(a), health::problem_lines(b));
    }
}

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

/// A runner that stops at a given round (with the processes it lost), or garbles results,
/// around the model.
struct Faulty {
    model: ModelCluster,
    stop_at: usize,
    garble: bool,
    lost: Vec<usize>,
}

impl RoundRunner for Faulty {
    fn run_round(&mut self, round: &Round, deadline: Duration) -> Result<RoundResult, Stop> {
        if round.index >= self.stop_at {
            return Err(Stop {
                why: "NCCL cannot abort the hung communicator".into(),
                lost: self.lost.clone(),
            });
        }
        let mut r = self.model.run_round(round, deadline)?;
        if self.garble {
            r.outcomes.pop();
            if let Some(GroupOutcome::Measured { busbw, .. }) = r.outcomes.first_mut() {
                *busbw = f64::NAN;
            }
            r.wall_s = f64::NAN;
        }
        Ok(r)
    }
}

#[test]
fn a_runner_that_stops_gets_verdicts_on_the_rounds_that_ran() {
    let topo = Topology::uniform(8, 4);
    let model = ModelCluster::new(topo.clone(), 1).with_fault(Fault::HangingNode { node: 2 });
    // The full schedule's first four rounds show node 3 hanging with four partners.
    let mut runner = Faulty {
        model: model.clone(),
        stop_at: 5,
        garble: false,
        lost: Vec::new(),
    };
    let (report, lines) = locate(&mut runner, &topo, &config(Kind::Full));
    assert_eq!(report.rounds.len(), 4);
    assert!(report.stopped.as_deref().unwrap_or("").contains("round 5"));
    assert_eq!(report.verdicts.len(), 1, "{:?}", report.verdicts);
    assert_eq!(report.verdicts[0].culprit, Culprit::Node { node: 2 });
    assert!(report.verdicts[0].evidence.contains("cut short"));
    assert!(lines.iter().any(|l| l.starts_with("# locate stopped: ")));
    // Stopped in the first round: nothing ran, nobody is named.
    let mut runner = Faulty {
        model,
        stop_at: 1,
        garble: false,
        lost: Vec::new(),
    };
    let (report, _) = locate(&mut runner, &topo, &config(Kind::Quick));
    assert!(report.rounds.is_empty() && report.verdicts.is_empty());
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn processes_that_stop_answering_are_named_as_hung() {
    // Four nodes of one GPU, as the GPU check runs them: rank 2 stops answering in round 2.
    let topo = Topology::uniform(4, 1);
    let mut runner = Faulty {
        model: ModelCluster::new(topo.clone(), 1),
        stop_at: 2,
        garble: false,
        lost: vec![2],
    };
    let (report, lines) = locate(&mut runner, &topo, &config(Kind::Full));
    assert_eq!(report.rounds.len(), 1);
    assert_eq!(report.verdicts.len(), 1, "{:?}", report.verdicts);
    let v = &report.verdicts[0];
    assert_eq!(v.culprit, Culprit::Node { node: 2 });
    assert_eq!(v.state.name(), "hung");
    assert!(
        v.evidence
            .starts_with("rank 2 stopped answering in round 2: NCCL cannot")
    );
    assert_eq!(report.exit_code(), EXIT_SUSPECTS);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("# locate suspect: node003 (1 GPU) hung: rank 2 stopped")),
        "{lines:#?}"
    );
    // Two processes of one node of four GPUs: those two GPUs; all four: the node.
    let topo = Topology::uniform(4, 4);
    for (lost, culprit) in [
        (
            vec![5, 6, 5],
            Culprit::Gpus {
                node: 1,
                gpus: vec![1, 2],
            },
        ),
        (vec![7, 4, 5, 6], Culprit::Node { node: 1 }),
    ] {
        let mut runner = Faulty {
            model: ModelCluster::new(topo.clone(), 1),
            stop_at: 1,
            garble: false,
            lost,
        };
        let (report, _) = locate(&mut runner, &topo, &config(Kind::Nodes));
        assert_eq!(report.verdicts.len(), 1);
        assert_eq!(report.verdicts[0].culprit, culprit);
    }
}

#[test]
fn results_that_are_missing_or_not_numbers_count_as_errors() {
    let topo = Topology::uniform(6, 4);
    for kind in Kind::ALL {
        let mut runner = Faulty {
            model: ModelCluster::new(topo.clone(), 1),
            stop_at: usize::MAX,
            garble: true,
            lost: Vec::new(),
        };
        let (report, _) = locate(&mut runner, &topo, &config(kind));
        let first = &report.rounds[0];
        assert!(
            matches!(first.outcomes[0], GroupOutcome::Failed { .. }),
            "{kind:?}"
        );
        assert!(matches!(
            first.outcomes.last(),
            Some(GroupOutcome::Failed { .. })
        ));
        assert_eq!(report.wall_s(), 0.0);
        let text = serde_json::to_string(&json::document(&report, &topo)).expect("json");
        assert!(json::read(&text).is_ok(), "{kind:?}: no NaN in the JSON");
    }
}

#[test]
fn odd_jobs_end_cleanly_and_say_why() {
    for (n, g) in [(0, 8), (1, 1), (1, 8), (4, 1), (2, 1), (3, 2)] {
        let topo = Topology::uniform(n, g);
        for kind in Kind::ALL {
            let mut model = ModelCluster::new(topo.clone(), 1);
            let (report, lines) = locate(&mut model, &topo, &config(kind));
            assert!(report.verdicts.is_empty(), "{n}x{g} {kind:?}");
            assert!(report.stopped.is_none());
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with("# locate verdict: no suspect"))
            );
        }
    }
    let topo = Topology::uniform(1, 8);
    let (report, _) = locate(
        &mut ModelCluster::new(topo.clone(), 1),
        &topo,
        &config(Kind::Nodes),
    );
    assert!(report.notes.iter().any(|n| n.contains("--min-busbw")));
    let topo = Topology::uniform(4, 1);
    let (report, _) = locate(
        &mut ModelCluster::new(topo.clone(), 1),
        &topo,
        &config(Kind::Nodes),
    );
    assert!(report.rounds.is_empty());
    assert!(report.notes.iter().any(|n| n.contains("two or more GPUs")));
}

#[test]
fn min_busbw_judges_a_lone_node_down_to_its_gpu() {
    let topo = Topology::uniform(1, 8);
    let model = ModelCluster::new(topo.clone(), 1).with_fault(Fault::SlowGpu {
        node: 0,
        gpu: 5,
        factor: 0.5,
    });
    let (report, _) = locate(&mut model.clone(), &topo, &config(Kind::Nodes));
    assert!(report.verdicts.is_empty());
    let config = Config {
        schedule: Kind::Nodes,
        thresholds: Thresholds {
            min_busbw: Some(300.0),
            ..Thresholds::default()
        },
        ..Config::default()
    };
    let (report, lines) = locate(&mut model.clone(), &topo, &config);
    let named: Vec<&Culprit> = report.verdicts.iter().map(|v| &v.culprit).collect();
    assert_eq!(
        named,
        [&Culprit::Gpus {
            node: 0,
            gpus: vec![5]
        }],
        "{lines:#?}"
    );
    assert!(report.verdicts[0].below_min);
    assert!(lines.iter().any(|l| l.contains("(below --min-busbw)")));
}

#[test]
fn invalid_thresholds_are_refused_before_any_round() {
    let topo = Topology::uniform(4, 2);
    let config = Config {
        thresholds: Thresholds {
            min_drop: 2.0,
            ..Thresholds::default()
        },
        ..Config::default()
    };
    let mut model = ModelCluster::new(topo.clone(), 1);
    assert!(run(&mut model, &topo, &config, &mut |_, _| {}).is_err());
}

#[test]
fn same_seed_same_run_and_colours_follow_the_groups() {
    let topo = Topology::uniform(20, 4);
    let fault = Fault::SlowNode {
        node: 7,
        factor: 0.5,
    };
    let go = |seed| {
        let mut model = ModelCluster::new(topo.clone(), 9).with_fault(fault.clone());
        let config = Config {
            seed,
            ..config(Kind::Quick)
        };
        locate(&mut model, &topo, &config).0
    };
    let (a, b, c) = (go(1), go(1), go(2));
    assert_eq!(a, b);
    assert_ne!(
        a.rounds[0].round, c.rounds[0].round,
        "another seed, another matching"
    );
    assert_eq!(a.verdicts, {
        let mut v = c.verdicts.clone();
        for (x, y) in v.iter_mut().zip(&a.verdicts) {
            x.evidence.clone_from(&y.evidence);
            x.ratio = y.ratio;
            x.rounds.clone_from(&y.rounds);
        }
        v
    });
    for rec in &a.rounds {
        let colours = rec.round.colours(topo.world());
        for (i, g) in rec.round.groups.iter().enumerate() {
            assert!(g.ranks.iter().all(|&r| colours[r] == i as i32));
        }
        let grouped: usize = rec.round.groups.iter().map(|g| g.ranks.len()).sum();
        let idle = colours.iter().filter(|&&c| c == NO_COLOUR).count();
        assert_eq!(grouped + idle, topo.world());
    }
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
        support::program(env!("CARGO_BIN_EXE_nccl-perf"))
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

/// One reading names nobody: on 8 nodes of one GPU each, the slowed node's round-1 partner
/// also reads slow in its re-pairing (round 2) through a transient of its own, as happened on
/// the GPU (docs/results/vcluster-h200/locate-8ranks, run 4). The slowed node is named; the
/// partner is measured once more, found healthy and left out with a note.
#[test]
fn a_one_round_blip_beside_a_slow_node_is_not_named() {
    let topo = Topology::uniform(8, 1);
    let config = |seed| quick(seed, 0.15);
    for seed in 1..=5u64 {
        for slow in [1, 2, 4, 5] {
            let fault = Fault::SlowNode {
                node: slow,
                factor: 0.6,
            };
            let mut model = ModelCluster::new(topo.clone(), seed).with_fault(fault.clone());
            model.noise = 0.03;
            let (report, _) = locate(&mut model, &topo, &config(seed));
            let partner = report.rounds[0]
                .round
                .groups
                .iter()
                .find_map(|g| match g.subject {
                    Subject::Pair(a, b) if a == slow => Some(b),
                    Subject::Pair(a, b) if b == slow => Some(a),
                    _ => None,
                })
                .expect("the slow node is paired in round 1");
            let mut model = ModelCluster::new(topo.clone(), seed)
                .with_fault(fault)
                .with_fault(Fault::Blip {
                    node: partner,
                    round: 2,
                    factor: 0.75,
                });
            model.noise = 0.03;
            let (report, named) = named(&mut model, &topo, &config(seed));
            assert_eq!(
                named,
                [Culprit::Node { node: slow }],
                "seed {seed}, slow {slow}, blip {partner}: {:?}",
                report.verdicts
            );
            assert!(
                report
                    .notes
                    .iter()
                    .any(|n| n.starts_with("not reproduced, not named")
                        && n.contains(topo.host(partner))),
                "seed {seed}, slow {slow}, blip {partner}: {:?}",
                report.notes
            );
        }
    }
}

/// The GPU check's job (ci/gpu-locate.sh): 4 and 8 nodes of one GPU each (ranks posing as hosts),
/// quick (full below 8 nodes) with a 30 % minimum drop against the socket transport's noise.
#[test]
fn one_gpu_per_node_as_the_gpu_check_runs_it() {
    let config = |seed| quick(seed, 0.3);
    for nodes in [4, 8] {
        let topo = Topology::uniform(nodes, 1);
        for seed in 1..=5u64 {
            for slow in 0..nodes {
                let mut model = ModelCluster::new(topo.clone(), seed).with_fault(Fault::SlowNode {
                    node: slow,
                    factor: 0.5,
                });
                model.noise = 0.05;
                let (_, named) = named(&mut model, &topo, &config(seed));
                assert_eq!(
                    named,
                    [Culprit::Node { node: slow }],
                    "{nodes} nodes, seed {seed}, slow {slow}"
                );
            }
            let mut healthy = ModelCluster::new(topo.clone(), seed);
            healthy.noise = 0.05;
            let (report, _) = locate(&mut healthy, &topo, &config(seed));
            assert!(
                report.verdicts.is_empty(),
                "{nodes} nodes, seed {seed}: {:?}",
                report.verdicts
            );
        }
    }
}
