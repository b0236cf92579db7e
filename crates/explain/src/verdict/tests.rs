use super::*;
use crate::hardware::{Gpu, Nic, NicKind, NvLink};
use crate::observed::{Model, Net, Path, RankDevice, Row, Seen};
use nccl_perf_facts::benchmarks::ALL_REDUCE;

fn hw(links: u32, nics: Vec<(NicKind, f64)>) -> Hardware {
    Hardware {
        gpu: Some(Gpu {
            name: "NVIDIA H200".into(),
            nvlink: (0..18)
                .map(|index| NvLink {
                    index,
                    active: index < links,
                    version: Some(4),
                })
                .collect(),
            pcie: None,
        }),
        nics: nics
            .into_iter()
            .enumerate()
            .map(|(i, (kind, rate_gbps))| Nic {
                name: format!("n{i}"),
                kind,
                rate_gbps,
                active: true,
                numa_node: None,
            })
            .collect(),
        notes: vec![],
    }
}

/// An all_reduce sweep 1 MiB..4 GiB whose large rows reach `busbw`, with NCCL's report.
fn run(nranks: u32, nnodes: u32, busbw: f64, path: Path, algo: &str) -> Run {
    let factor = ALL_REDUCE.bus_factor(nranks as usize);
    let rows = (20..=32)
        .flat_map(|p| {
            let bytes = 1u64 << p;
            let bw = if bytes >= LARGE { busbw } else { busbw / 4.0 };
            let time_us = bytes as f64 * factor / bw / 1e3;
            [false, true].map(|in_place| Row {
                bytes,
                in_place,
                time_us,
                algbw: bw / factor,
                busbw: bw,
                seen: Some(Seen {
                    algo: Some(algo.into()),
                    proto: Some("Simple".into()),
                    channels: Some(if bytes >= LARGE { 32 } else { 16 }),
                    path: path.clone(),
                    model: Some(Model {
                        costs: vec![
                            (algo.into(), "Simple".into(), time_us * 0.97),
                            ("Tree".into(), "LL".into(), time_us * 5.0),
                        ],
                    }),
                }),
            })
        })
        .collect();
    Run {
        collective: "all_reduce".into(),
        nranks,
        nnodes,
        ranks_per_node: nranks / nnodes.max(1),
        nccl_version: 22803,
        gpu_names: vec!["NVIDIA H200".into(); nranks as usize],
        rows,
        capture: Capture::Live {
            profiler: true,
            tuner: true,
            notes: vec![],
        },
        ..Run::default()
    }
}

#[test]
fn eight_h200_on_nvls_as_expected() {
    let r = run(8, 1, 470.0, Path::IntraNode, "NVLS");
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    assert_eq!(e.rows.len(), r.rows.len());
    let v = &e.verdict;
    assert!(
        v.starts_with("all_reduce ≥ 1 GiB: busbw 470 GB/s, 97 % of NCCL's model"),
        "{v}"
    );
    assert!(v.contains("of the NVLink ceiling"), "{v}");
    assert!(v.contains("98 % of the published 480 GB/s"), "{v}");
    assert!(
        v.ends_with("as expected for NVLS on 8 × NVIDIA H200"),
        "{v}"
    );
    assert_eq!(e.percent_of_expected.map(|p| p.round()), Some(98.0));
    let text = e.to_text();
    assert!(text.contains("# 1 MiB–4 GiB: NVLS/Simple, 16–32 channels, inside the node; NCCL's model: busbw 121 GB/s–485 GB/s, measured 97 % of it\n"), "{text}");
    assert!(v.contains("60 % of the NVLink ceiling"), "{v}");
    assert!(
        text.contains("# published: busbw 480 GB/s at 8 GiB"),
        "{text}"
    );
    assert!(text.contains("NCCL 2.28.3"), "{text}");
    let large = &e.rows[e.rows.len() - 1];
    assert_eq!(large.best_pair.as_deref(), Some("NVLS/Simple"));
    assert_eq!(large.ceiling_busbw, Some(450.0 * 1.75));
}

#[test]
fn sockets_with_ib_present_are_named() {
    let r = run(16, 2, 11.0, Path::Network(Net::Socket), "Ring");
    let nics = vec![(NicKind::Ib, 400.0); 8]
        .into_iter()
        .chain([(NicKind::Ethernet, 100.0)])
        .collect();
    let e = explain(&r, &hw(18, nics), &SkuTable::builtin());
    assert!(
        e.verdict.contains("busbw 11.0 GB/s")
            && e.verdict
                .contains("NCCL used sockets although 8 InfiniBand port(s) are up"),
        "{}",
        e.verdict
    );
    // The ceiling over sockets is the Ethernet port: 12.5 GB/s.
    assert!(
        e.verdict.contains("88 % of the network ceiling"),
        "{}",
        e.verdict
    );
}

#[test]
fn links_down_and_network_inside_a_node_are_named() {
    let r = run(8, 1, 300.0, Path::Network(Net::Ib), "Ring");
    let e = explain(
        &r,
        &hw(12, vec![(NicKind::Ib, 400.0)]),
        &SkuTable::builtin(),
    );
    assert!(
        e.verdict
            .contains("NCCL went through the network inside one node"),
        "{}",
        e.verdict
    );
    assert!(
        e.verdict
            .contains("only 12 of the NVIDIA H200's 18 NVLink links are up"),
        "{}",
        e.verdict
    );
    let e = explain(&r, &hw(0, vec![]), &SkuTable::builtin());
    assert!(
        e.verdict
            .contains("no NVLink link is up although the NVIDIA H200 has 18"),
        "{}",
        e.verdict
    );
}

#[test]
fn a_log_says_what_it_cannot_know() {
    let mut r = run(8, 1, 470.0, Path::IntraNode, "NVLS");
    for row in &mut r.rows {
        row.seen = None;
    }
    r.capture = Capture::FromLog;
    let hw = Hardware {
        notes: vec!["hardware not read: explaining a log".into()],
        ..Hardware::default()
    };
    let e = explain(&r, &hw, &SkuTable::builtin());
    let text = e.to_text();
    assert!(text.contains("are not in a log"), "{text}");
    assert!(text.contains("from the datasheet"), "{text}");
    assert!(
        e.verdict.contains("60 % of the NVLink ceiling"),
        "{}",
        e.verdict
    );
    assert!(
        text.contains("# hardware: hardware not read: explaining a log"),
        "{text}"
    );
    assert!(!text.contains("# 1 MiB"), "{text}");
    assert!(
        e.verdict.ends_with("as expected on 8 × NVIDIA H200"),
        "{}",
        e.verdict
    );
    assert_eq!(
        e.expected_basis
            .as_deref()
            .map(|b| b.starts_with("the SKU table's 480 GB/s")),
        Some(true)
    );
}

#[test]
fn one_rank_and_posing_ranks() {
    let mut r = run(1, 1, 0.0, Path::IntraNode, "Ring");
    for row in &mut r.rows {
        row.busbw = 0.0;
        row.algbw = 1200.0;
        row.time_us = row.bytes as f64 / 1200.0 / 1e3;
    }
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    assert!(
        e.verdict
            .contains("one rank, algbw 1200 GB/s, 50 % of half the memory speed (HBM/2)"),
        "{}",
        e.verdict
    );
    assert_eq!(e.percent_of_expected, None);
    let mut r = run(4, 4, 3.0, Path::Network(Net::Socket), "Ring");
    r.rank_devices = vec![
        RankDevice {
            host: "box".into(),
            pci_bus_id: "0000:04:00".into(),
            device: Some(0),
        };
        4
    ];
    let e = explain(
        &r,
        &hw(18, vec![(NicKind::Ib, 400.0)]),
        &SkuTable::builtin(),
    );
    assert!(
        e.verdict
            .contains("posing as hosts — loopback sockets, not a hardware figure"),
        "{}",
        e.verdict
    );
    assert!(e.to_text().contains("no hardware ceiling"));
}

#[test]
fn nothing_breaks_on_empty_nan_or_zero_input() {
    let e = explain(&Run::default(), &Hardware::default(), &SkuTable::default());
    assert!(e.verdict.contains("no rows to judge"), "{}", e.verdict);
    let mut r = run(8, 1, 470.0, Path::IntraNode, "NVLS");
    for (i, row) in r.rows.iter_mut().enumerate() {
        row.time_us = [0.0, f64::NAN, f64::INFINITY, -1.0][i % 4];
        row.busbw = [f64::NAN, 0.0, 1.0, f64::INFINITY][i % 4];
        if let Some(m) = row.seen.as_mut().and_then(|s| s.model.as_mut()) {
            m.costs.push(("NVLS".into(), "LL".into(), f64::NAN));
            m.costs[0].2 = 0.0;
        }
    }
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    for f in &e.rows {
        for v in [f.percent_of_model, f.percent_of_ceiling, f.predicted_busbw]
            .into_iter()
            .flatten()
        {
            assert!(v.is_finite());
        }
    }
    assert!(!e.verdict.is_empty());
}

#[test]
fn rows_of_several_networks_are_shown_and_none_is_chosen_but_ones_own() {
    // Two built-in rows for 2 × 8 H100, of two networks (AWS EFA, GCP TCPXO): across nodes the
    // figure is the network's, so neither is used.
    let mut r = run(16, 2, 440.0, Path::Network(Net::Ib), "NVLSTree");
    r.gpu_names = vec!["NVIDIA H100 80GB HBM3".into(); 16];
    let mut h = hw(18, vec![(NicKind::Ib, 400.0); 8]);
    h.gpu.as_mut().unwrap().name = "NVIDIA H100 80GB HBM3".into();
    let e = explain(&r, &h, &SkuTable::builtin());
    let text = e.to_text();
    assert!(
        text.contains("# published (not used): busbw 487 GB/s at 16 GiB"),
        "{text}"
    );
    assert!(
        text.contains("# published (not used): busbw 339 GB/s at 8 GiB"),
        "{text}"
    );
    assert!(
        text.contains("are of different networks: none is used"),
        "{text}"
    );
    assert!(!e.verdict.contains("published"), "{}", e.verdict);
    assert!(
        e.verdict.contains("59 % of the network ceiling"),
        "{}",
        e.verdict
    );
    // A row of one's own file for the shape comes first and is used.
    let dir = std::env::temp_dir().join(format!("nccl-perf-sku-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mine.txt");
    std::fs::write(
        &file,
        "expect | gpu=H100 80GB HBM3 | nodes=2 | gpus_per_node=8 | collective=all_reduce | \
         busbw=450 | size=16G | network=our 8 x 400G InfiniBand | measured=our acceptance run | \
         source=our runbook\n",
    )
    .unwrap();
    let e = explain(&r, &h, &SkuTable::load(&file).unwrap());
    let text = e.to_text();
    assert!(
        text.contains("# published: busbw 450 GB/s at 16 GiB"),
        "{text}"
    );
    assert!(
        text.contains("# published (also, not used): busbw 487 GB/s"),
        "{text}"
    );
    assert!(
        e.verdict.contains("98 % of the published 450 GB/s"),
        "{}",
        e.verdict
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_slow_pcie_link_is_named_only_when_it_carries_the_data() {
    let mut h = hw(0, vec![]);
    h.gpu.as_mut().unwrap().pcie = Some(crate::hardware::Pcie {
        max_gen: Some(5),
        max_width: Some(16),
        cur_gen: Some(3),
        cur_width: Some(8),
    });
    let r = run(8, 1, 7.0, Path::IntraNode, "Ring");
    let e = explain(&r, &h, &SkuTable::builtin());
    assert!(
        e.verdict
            .contains("PCIe link runs at Gen3 x8, below its Gen5 x16"),
        "{}",
        e.verdict
    );
    assert!(e.verdict.contains("no NVLink link is up"), "{}", e.verdict);
    // With NVLink up and a fine result the same reading is not a diagnosis.
    let mut h = hw(18, vec![]);
    h.gpu.as_mut().unwrap().pcie = Some(crate::hardware::Pcie {
        max_gen: Some(5),
        max_width: Some(16),
        cur_gen: Some(1),
        cur_width: Some(16),
    });
    let e = explain(
        &run(8, 1, 470.0, Path::IntraNode, "NVLS"),
        &h,
        &SkuTable::builtin(),
    );
    assert!(!e.verdict.contains("PCIe"), "{}", e.verdict);
    // A fine result with a link down says both.
    let e = explain(
        &run(8, 1, 470.0, Path::IntraNode, "NVLS"),
        &hw(17, vec![]),
        &SkuTable::builtin(),
    );
    assert!(
        e.verdict
            .contains("as expected for NVLS on 8 × NVIDIA H200; yet only 17 of"),
        "{}",
        e.verdict
    );
}

#[test]
fn unknown_shapes_say_why_no_figure_is_chosen() {
    let mut r = run(8, 1, 470.0, Path::IntraNode, "NVLS");
    r.nnodes = 0;
    r.ranks_per_node = 0;
    let e = explain(&r, &Hardware::default(), &SkuTable::builtin());
    assert!(e.to_text().contains("# published: no figure can be chosen: the number of nodes or of GPUs per node is not known"), "{}", e.to_text());
    r.gpu_names.clear();
    r.nranks = 0;
    let e = explain(&r, &Hardware::default(), &SkuTable::builtin());
    let t = e.to_text();
    assert!(t.contains("the GPU model is not known"), "{t}");
    assert!(
        t.contains("hardware ceiling: none — the number of ranks is not known"),
        "{t}"
    );
}

#[test]
fn plugins_not_loaded_are_said() {
    let mut r = run(8, 1, 470.0, Path::IntraNode, "NVLS");
    r.capture = Capture::Live {
        profiler: true,
        tuner: false,
        notes: vec![
            "a tuner plugin is configured (NCCL_TUNER_PLUGIN=x): NCCL's model not shown".into(),
        ],
    };
    for row in &mut r.rows {
        if let Some(s) = row.seen.as_mut() {
            s.model = None;
        }
    }
    r.rows[0].seen = None;
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    let t = e.to_text();
    // One line per cause: the note says why, so the generic line is left out.
    assert!(!t.contains("our tuner plugin was not loaded"), "{t}");
    assert!(
        t.contains("# capture: a tuner plugin is configured (NCCL_TUNER_PLUGIN=x)"),
        "{t}"
    );
    // Without a note saying why, the generic line.
    r.capture = Capture::Live {
        profiler: true,
        tuner: false,
        notes: Vec::new(),
    };
    let t = explain(&r, &hw(18, vec![]), &SkuTable::builtin()).to_text();
    assert!(
        t.contains("# capture: our tuner plugin was not loaded: NCCL's cost model is not known\n"),
        "{t}"
    );
    assert!(
        t.contains("# 1 of 26 row(s) without NCCL's report\n"),
        "{t}"
    );
    assert!(!t.contains("NCCL's model: busbw"), "{t}");
    assert_eq!(
        e.expected_basis
            .as_deref()
            .map(|b| b.starts_with("the SKU table")),
        Some(true)
    );
}

#[test]
fn latency_bound_sizes_are_not_judged_against_the_links() {
    // The same sweep cut at 8 MiB: only NCCL's model (which predicts latency too) is used.
    let mut r = run(8, 1, 470.0, Path::IntraNode, "NVLS");
    r.rows.retain(|row| row.bytes <= 8 << 20);
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    let v = &e.verdict;
    assert!(v.contains("97 % of NCCL's model"), "{v}");
    assert!(
        v.contains("too small to judge the links: the largest size, 8 MiB"),
        "{v}"
    );
    assert!(!v.contains("ceiling") && !v.contains("published"), "{v}");
    assert_eq!(e.expected_basis.as_deref(), Some("NCCL's own cost model"));
    // From a log (no model): nothing to gate on.
    r.capture = Capture::FromLog;
    for row in &mut r.rows {
        row.seen = None;
    }
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    assert!(
        e.verdict.contains("too small to judge the links"),
        "{}",
        e.verdict
    );
    assert_eq!(e.percent_of_expected, None);
    // One rank: the copy is not judged against the memory speed either.
    let mut r = run(1, 1, 470.0, Path::IntraNode, "NVLS");
    r.rows.retain(|row| row.bytes <= 8 << 20);
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    assert!(
        e.verdict
            .contains("a device-local copy, and too small to judge: the largest size, 8 MiB"),
        "{}",
        e.verdict
    );
    assert!(!e.verdict.contains("HBM"), "{}", e.verdict);
    // At 16 MiB the links are judged.
    let mut r = run(8, 1, 470.0, Path::IntraNode, "NVLS");
    r.rows.retain(|row| row.bytes <= BANDWIDTH_BOUND);
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    assert!(e.verdict.contains("of the NVLink ceiling"), "{}", e.verdict);
}

#[test]
fn one_rank_without_reports_says_why() {
    let mut r = run(1, 1, 0.0, Path::IntraNode, "Ring");
    r.capture = Capture::Live {
        profiler: true,
        tuner: true,
        notes: vec![],
    };
    for row in &mut r.rows {
        row.seen = None;
    }
    let t = explain(&r, &hw(18, vec![]), &SkuTable::builtin()).to_text();
    assert!(t.contains("# one rank: NCCL runs no algorithm"), "{t}");
    assert!(!t.contains("without NCCL's report"), "{t}");
    // Two ranks with nothing reported are counted, not explained away.
    let mut r2 = run(2, 1, 100.0, Path::IntraNode, "Ring");
    r2.capture = r.capture.clone();
    r2.rows[0].seen = None;
    let t2 = explain(&r2, &hw(18, vec![]), &SkuTable::builtin()).to_text();
    assert!(
        t2.contains("# 1 of 26 row(s) without NCCL's report\n"),
        "{t2}"
    );
}

#[test]
fn a_broadcast_nccl_does_not_profile_is_said_from_2_29_on() {
    let unreported = |version: i32| {
        let mut r = run(4, 4, 10.0, Path::Network(Net::Socket), "Ring");
        r.collective = "broadcast".into();
        r.nccl_version = version;
        for row in &mut r.rows {
            row.seen = None;
        }
        explain(&r, &hw(18, vec![]), &SkuTable::builtin()).to_text()
    };
    let t = unreported(23102);
    assert!(
        t.contains("# 26 of 26 row(s) without NCCL's report\n"),
        "{t}"
    );
    assert!(
        t.contains("# capture: NCCL 2.29 and later report no profiler event for a broadcast"),
        "{t}"
    );
    // 2.28 profiles a broadcast: a missing report there is not explained away.
    assert!(!unreported(22803).contains("report no profiler event"));
}

#[test]
fn the_profilers_spelling_matches_the_cost_tables() {
    // NCCL 2.28's profiler says RING/SIMPLE where its cost table says Ring/Simple.
    let mut r = run(4, 4, 3.0, Path::Network(Net::Socket), "Ring");
    for row in &mut r.rows {
        let s = row.seen.as_mut().unwrap();
        s.algo = Some("RING".into());
        s.proto = Some("SIMPLE".into());
    }
    let t = explain(&r, &hw(18, vec![]), &SkuTable::builtin()).to_text();
    assert!(t.contains("NCCL's model: busbw"), "{t}");
    assert!(!t.contains("the model rated"), "{t}");
}

#[test]
fn rows_without_a_report_do_not_split_the_size_lines() {
    let mut r = run(4, 4, 3.0, Path::Network(Net::Socket), "Ring");
    for row in r.rows.iter_mut().filter(|row| row.in_place) {
        row.seen = None;
    }
    let t = explain(&r, &hw(18, vec![]), &SkuTable::builtin()).to_text();
    let lines: Vec<&str> = t.lines().filter(|l| l.contains(": Ring/Simple")).collect();
    assert_eq!(lines.len(), 1, "{t}");
    assert!(lines[0].starts_with("# 1 MiB–4 GiB: Ring/Simple"), "{t}");
    assert!(
        t.contains("# 13 of 26 row(s) without NCCL's report\n"),
        "{t}"
    );
}

/// NCCL 2.22 (a tuner, no profiler): NCCL's model alone, said as such, never as a
/// point-to-point operation.
#[test]
fn a_model_without_the_profilers_report_is_said_as_such() {
    let mut r = run(4, 4, 3.0, Path::Network(Net::Socket), "Ring");
    r.nccl_version = 22203;
    for row in r.rows.iter_mut() {
        if let Some(s) = row.seen.as_mut() {
            (s.algo, s.proto, s.channels, s.path) = (None, None, None, Path::Unknown);
        }
    }
    let e = explain(&r, &hw(18, vec![]), &SkuTable::builtin());
    let t = e.to_text();
    // The prediction is the fastest pair's (NCCL runs it), and said to be so.
    assert!(
        t.contains(
            "# 1 MiB–4 GiB: algorithm and protocol not reported, path unknown; the model rated \
             Ring/Simple fastest for 26 row(s), predicting busbw 0.77 GB/s–3.09 GB/s (measured 97 % \
             of it)\n"
        ),
        "{t}"
    );
    assert!(!t.contains("point-to-point"), "{t}");
    assert!(
        e.rows.iter().all(|f| f.model_pair_assumed),
        "{:?}",
        e.rows[0]
    );
    assert_eq!(e.percent_of_expected.map(f64::round), Some(97.0));
    assert_eq!(
        e.expected_basis.as_deref(),
        Some(
            "NCCL's own cost model, for its fastest pair (Ring/Simple): NCCL did not report the \
             pair it ran"
        )
    );
    assert!(
        e.verdict
            .contains("as NCCL's model predicts for its fastest pair, Ring/Simple on 4 × "),
        "{}",
        e.verdict
    );
    assert!(!e.verdict.contains("no NCCL model"), "{}", e.verdict);
    // A reported pair is never replaced by the fastest one.
    let mut reported = run(4, 4, 3.0, Path::Network(Net::Socket), "Ring");
    for row in reported.rows.iter_mut() {
        if let Some(m) = row.seen.as_mut().and_then(|s| s.model.as_mut()) {
            m.costs
                .push(("Tree".into(), "Simple".into(), row.time_us * 0.1));
        }
    }
    let e = explain(&reported, &hw(18, vec![]), &SkuTable::builtin());
    assert!(e.rows.iter().all(|f| !f.model_pair_assumed));
    assert_eq!(e.percent_of_expected.map(f64::round), Some(97.0));
    // Where the model's best pair changes with the size, one line per pair (as on NCCL
    // 2.22.3: Ring/LL up to 32 KiB, Ring/Simple above).
    for row in r.rows.iter_mut().filter(|row| row.bytes < 1 << 24) {
        if let Some(m) = row.seen.as_mut().and_then(|s| s.model.as_mut()) {
            m.costs
                .push(("Ring".into(), "LL".into(), row.time_us * 0.5));
        }
    }
    let t = explain(&r, &hw(18, vec![]), &SkuTable::builtin()).to_text();
    assert!(
        t.contains(
            "# 1 MiB–8 MiB: algorithm and protocol not reported, path unknown; the model rated \
             Ring/LL fastest for 8 row(s), predicting busbw 1.50 GB/s (measured 50 % of it)\n"
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "# 16 MiB–4 GiB: algorithm and protocol not reported, path unknown; the model rated \
             Ring/Simple fastest for 18 row(s), predicting busbw 0.77 GB/s–3.09 GB/s (measured \
             97 % of it)\n"
        ),
        "{t}"
    );
}
