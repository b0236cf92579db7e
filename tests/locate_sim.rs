//! Locate on the model cluster: every schedule against every injected fault, for 2 to 256
//! nodes of 8 GPUs, checking that each schedule names exactly the culprits in its scope and
//! nobody else, and that healthy clusters name nobody under noise. The cost table of
//! docs/locate.md is printed by `cargo test --test integration -- locate_sim:: --ignored --nocapture`
//! (2 to 1024 nodes); its rows up to 64 nodes are checked against the doc here, and so is the
//! table of the larger groups (a slow job that no pair explains, issue 29).

use std::collections::BTreeSet;
use std::time::Duration;

use nccl_perf_locate::schedule::Kind;
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::verdict::Culprit;
use nccl_perf_locate::{Config, Report, run_schedule};
use oracle::locate_model::{Fault, ModelCluster};

/// GPUs per node in every simulation.
const G: usize = 8;
/// Seeds of the quick matching (and the model's noise) for the link columns of the table.
const LINK_SEEDS: u64 = 20;

/// The injected faults, in the order of the table's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Healthy,
    SlowNode,
    TwoSlowNodes,
    SlowLink,
    HangingLink,
    SlowRail,
    SlowNic,
    SlowNvlink,
    HungNode,
}

const CASES: [Case; 9] = [
    Case::Healthy,
    Case::SlowNode,
    Case::TwoSlowNodes,
    Case::SlowLink,
    Case::HangingLink,
    Case::SlowRail,
    Case::SlowNic,
    Case::SlowNvlink,
    Case::HungNode,
];

impl Case {
    fn header(self) -> &'static str {
        match self {
            Case::Healthy => "healthy",
            Case::SlowNode => "slow node",
            Case::TwoSlowNodes => "two slow nodes",
            Case::SlowLink => "slow link",
            Case::HangingLink => "hanging link",
            Case::SlowRail => "slow rail",
            Case::SlowNic => "slow NIC",
            Case::SlowNvlink => "slow NVLink",
            Case::HungNode => "hung node",
        }
    }
}

/// The two nodes faults are placed on: a third and two thirds of the way.
fn places(n: usize) -> (usize, usize) {
    let x = n / 3;
    (x, (2 * n / 3).max(x + 1))
}

fn faults(case: Case, n: usize) -> Vec<Fault> {
    let (x, y) = places(n);
    match case {
        Case::Healthy => vec![],
        Case::SlowNode => vec![Fault::SlowNode {
            node: x,
            factor: 0.5,
        }],
        Case::TwoSlowNodes => vec![
            Fault::SlowNode {
                node: x,
                factor: 0.5,
            },
            Fault::SlowNode {
                node: y,
                factor: 0.6,
            },
        ],
        Case::SlowLink => vec![Fault::SlowLink {
            a: x,
            b: y,
            factor: 0.5,
        }],
        Case::HangingLink => vec![Fault::HangingLink { a: x, b: y }],
        Case::SlowRail => vec![Fault::SlowRail {
            rail: 3,
            factor: 0.5,
        }],
        Case::SlowNic => vec![Fault::SlowNic {
            node: x,
            gpu: 5,
            factor: 0.5,
        }],
        Case::SlowNvlink => vec![Fault::SlowGpu {
            node: x,
            gpu: 5,
            factor: 0.5,
        }],
        Case::HungNode => vec![Fault::HangingNode { node: x }],
    }
}

/// What a schedule must name for a fault on `n` nodes.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    /// Exactly these culprits.
    Exactly(Vec<Culprit>),
    /// Nothing: the fault is outside what the schedule measures.
    Nobody,
    /// These culprits when the random matching paired the link's nodes, else nothing.
    IfMatched(Vec<Culprit>),
    /// Too few nodes to tell the culprit (docs/locate.md, "Limits"): whatever is named must
    /// be part of the fault.
    Limit,
}

fn expect(kind: Kind, case: Case, n: usize) -> Expect {
    let topo = Topology::uniform(n, G);
    let (x, y) = places(n);
    let culprits = || -> Vec<Culprit> {
        let mut v: Vec<Culprit> = faults(case, n)
            .iter()
            .filter_map(|f| f.culprit(&topo))
            .collect();
        v.sort();
        v
    };
    let exactly = || Expect::Exactly(culprits());
    let node = || Expect::Exactly(vec![Culprit::Node { node: x }]);
    // Quick runs full below 8 nodes.
    let kind = if kind == Kind::Quick && n < 8 {
        Kind::Full
    } else {
        kind
    };
    match (kind, case) {
        (_, Case::Healthy) => Expect::Nobody,
        (Kind::Nodes, Case::SlowNode | Case::SlowNvlink | Case::HungNode) => exactly(),
        (Kind::Nodes, Case::TwoSlowNodes) if n >= 4 => exactly(),
        (Kind::Nodes, Case::TwoSlowNodes) => Expect::Limit,
        (Kind::Nodes, _) => Expect::Nobody,
        (Kind::Rails, Case::SlowRail) => exactly(),
        (Kind::Rails, Case::SlowNic) if n >= 4 => exactly(),
        (Kind::Rails, Case::SlowNic) => Expect::Limit,
        (Kind::Rails, _) => Expect::Nobody,
        (_, Case::SlowRail) => Expect::Nobody,
        (_, Case::HangingLink | Case::HungNode) if n == 2 => {
            Expect::Exactly(vec![Culprit::pair(x, y)])
        }
        (_, _) if n == 2 => Expect::Limit,
        (_, Case::TwoSlowNodes) if n < 5 => Expect::Limit,
        (_, Case::SlowNvlink) => node(),
        (Kind::Quick, Case::SlowLink | Case::HangingLink) => Expect::IfMatched(culprits()),
        (_, _) => exactly(),
    }
}

/// One simulated locate run.
struct Sim {
    report: Report,
    named: Vec<Culprit>,
}

fn simulate(kind: Kind, case: Case, n: usize, seed: u64) -> Sim {
    let topo = Topology::uniform(n, G);
    let mut model = ModelCluster::new(topo.clone(), seed);
    for f in faults(case, n) {
        model = model.with_fault(f);
    }
    let config = Config {
        schedule: kind,
        seed,
        deadline: Duration::from_secs(60),
        ..Config::default()
    };
    let report = run_schedule(&mut model, &topo, &config, &mut |_, _| {}).expect("valid config");
    let named = report.verdicts.iter().map(|v| v.culprit.clone()).collect();
    Sim { report, named }
}

/// Culprits named that are not part of the fault.
fn innocents(named: &[Culprit], case: Case, n: usize) -> usize {
    let topo = Topology::uniform(n, G);
    let fs = faults(case, n);
    let hosts: BTreeSet<usize> = fs
        .iter()
        .flat_map(|f| match *f {
            Fault::SlowNode { node, .. }
            | Fault::SlowInLarge { node, .. }
            | Fault::SlowGpu { node, .. }
            | Fault::SlowNic { node, .. }
            | Fault::HangingNode { node }
            | Fault::FailingGpu { node, .. } => vec![node],
            Fault::SlowLink { a, b, .. } | Fault::HangingLink { a, b } => vec![a, b],
            // A one-round blip is noise, not a fault: naming its node is a false positive.
            // Nor is busbw that falls with every group's size: nobody's fault.
            Fault::SlowRail { .. } | Fault::Blip { .. } | Fault::SizeCost { .. } => vec![],
        })
        .collect();
    let rails: BTreeSet<usize> = fs
        .iter()
        .filter_map(|f| match *f {
            Fault::SlowRail { rail, .. } | Fault::SlowNic { gpu: rail, .. } => Some(rail),
            _ => None,
        })
        .collect();
    named
        .iter()
        .filter(|c| match c {
            Culprit::Rail { rail } | Culprit::RailNodes { rail, .. } => !rails.contains(rail),
            _ => !c
                .hosts(&topo)
                .iter()
                .all(|h| (0..n).any(|i| topo.host(i) == h && hosts.contains(&i))),
        })
        .count()
}

/// Culprits named that the expectation does not allow.
fn wrongly_named(kind: Kind, case: Case, n: usize, named: &[Culprit]) -> usize {
    match expect(kind, case, n) {
        Expect::Exactly(c) | Expect::IfMatched(c) => {
            named.iter().filter(|x| !c.contains(x)).count()
        }
        Expect::Nobody => named.len(),
        Expect::Limit => innocents(named, case, n),
    }
}

/// Checks one run against its expectation; `Some(found)` for a quick link (matched or not).
fn check(kind: Kind, case: Case, n: usize, seed: u64, sim: &Sim) -> Option<bool> {
    let what = format!(
        "{} with {} on {n} nodes (seed {seed}): named {:?}",
        kind.name(),
        case.header(),
        sim.named
    );
    assert!(
        sim.report.stopped.is_none(),
        "{what}: {:?}",
        sim.report.stopped
    );
    match expect(kind, case, n) {
        Expect::Exactly(c) => {
            assert_eq!(sim.named, c, "{what}");
            assert_eq!(sim.report.exit_code(), 9, "{what}");
            None
        }
        Expect::Nobody => {
            assert!(sim.named.is_empty(), "{what}");
            assert_eq!(sim.report.exit_code(), 0, "{what}");
            None
        }
        Expect::IfMatched(c) => {
            assert!(sim.named.is_empty() || sim.named == c, "{what}");
            Some(!sim.named.is_empty())
        }
        Expect::Limit => {
            assert_eq!(innocents(&sim.named, case, n), 0, "{what}");
            None
        }
    }
}

#[test]
fn every_schedule_names_exactly_the_injected_culprits() {
    let mut runs = 0;
    for n in [2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 33, 64, 128, 256] {
        for kind in Kind::ALL {
            if kind == Kind::Full && n > 64 {
                continue;
            }
            for case in CASES {
                for seed in 1..=3 {
                    check(kind, case, n, seed, &simulate(kind, case, n, seed));
                    runs += 1;
                }
            }
        }
    }
    assert!(runs > 1000);
}

#[test]
fn quick_finds_a_link_exactly_when_its_matching_pairs_it() {
    for case in [Case::SlowLink, Case::HangingLink] {
        let mut found = 0;
        for seed in 1..=40 {
            let sim = simulate(Kind::Quick, case, 8, seed);
            if check(Kind::Quick, case, 8, seed, &sim) == Some(true) {
                found += 1;
            }
        }
        // One chance in 7 per seed of pairing the link's two nodes among 8.
        assert!(
            (2..=12).contains(&found),
            "{}: {found} of 40",
            case.header()
        );
    }
}

#[test]
fn healthy_clusters_name_nobody_under_noise() {
    for noise in [0.01, 0.03, 0.05] {
        for n in [2, 3, 5, 8, 13, 32] {
            for kind in Kind::ALL {
                for seed in 1..=8 {
                    let topo = Topology::uniform(n, G);
                    let mut model = ModelCluster::new(topo.clone(), seed);
                    model.noise = noise;
                    // The job's own measurement too: a healthy job is never sent to larger
                    // groups, and nobody is named either way.
                    let config = Config {
                        schedule: kind,
                        seed,
                        job_busbw: Some(model.job_busbw()),
                        ..Config::default()
                    };
                    let report = run_schedule(&mut model, &topo, &config, &mut |_, _| {}).unwrap();
                    assert!(
                        report.verdicts.is_empty() && report.job.as_ref().is_none_or(|j| !j.slow),
                        "{} on {n} nodes, noise {noise}, seed {seed}: {:?}",
                        kind.name(),
                        report.verdicts
                    );
                }
            }
        }
    }
}

/// One row of the cost table: per fault, the rounds and a mark.
fn table_row(n: usize, kind: Kind) -> String {
    let mut cells = Vec::new();
    let mut false_positives = 0;
    for case in CASES {
        let sim = simulate(kind, case, n, 1);
        false_positives += wrongly_named(kind, case, n, &sim.named);
        let rounds = sim.report.rounds.len();
        let cell = match expect(kind, case, n) {
            Expect::Exactly(_) => format!("{rounds} ✓"),
            Expect::Nobody => format!("{rounds} ·"),
            Expect::Limit => format!("{rounds} ◦"),
            Expect::IfMatched(_) => {
                let found = (1..=LINK_SEEDS)
                    .filter(|&seed| {
                        let s = simulate(kind, case, n, seed);
                        check(kind, case, n, seed, &s) == Some(true)
                    })
                    .count();
                format!("{rounds} {found}/{LINK_SEEDS}")
            }
        };
        check(kind, case, n, 1, &sim);
        cells.push(cell);
    }
    format!(
        "| {n} | {} | {} | {false_positives} |",
        kind.name(),
        cells.join(" | ")
    )
}

/// Rounds and model wall time of the healthy run and of the run with the schedule's typical
/// fault (a slow NIC for the pair and rail schedules, a slow NVLink for nodes).
fn cost_row(n: usize) -> String {
    let cells: Vec<String> = Kind::ALL
        .iter()
        .map(|&kind| {
            let fault = if kind == Kind::Nodes {
                Case::SlowNvlink
            } else {
                Case::SlowNic
            };
            let healthy = simulate(kind, Case::Healthy, n, 1).report;
            let faulty = simulate(kind, fault, n, 1).report;
            format!(
                "{} ({:.0} s) → {} ({:.0} s)",
                healthy.rounds.len(),
                healthy.wall_s(),
                faulty.rounds.len(),
                faulty.wall_s()
            )
        })
        .collect();
    format!("| {n} | {} |", cells.join(" | "))
}

fn table_header() -> String {
    let names: Vec<&str> = CASES.iter().map(|c| c.header()).collect();
    format!(
        "| N | schedule | {} | false positives |\n|---:|---|{}---:|",
        names.join(" | "),
        "---|".repeat(CASES.len())
    )
}

const DOC_NODES: [usize; 6] = [2, 3, 4, 8, 16, 64];
const ALL_NODES: [usize; 12] = [2, 3, 4, 5, 8, 16, 32, 64, 128, 256, 512, 1024];

#[test]
fn the_tables_in_the_docs_are_what_the_simulation_gives() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/locate.md"))
        .expect("docs/locate.md");
    assert!(doc.contains(&table_header()), "table header");
    for n in DOC_NODES {
        for kind in Kind::ALL {
            let row = table_row(n, kind);
            assert!(doc.contains(&row), "docs/locate.md lacks the row\n{row}");
        }
        let row = cost_row(n);
        assert!(doc.contains(&row), "docs/locate.md lacks the row\n{row}");
    }
}

/// Prints both tables of docs/locate.md for 2 to 1024 nodes (a few minutes in a debug build).
#[test]
#[ignore]
fn print_the_tables() {
    println!("{}", table_header());
    for n in ALL_NODES {
        for kind in Kind::ALL {
            println!("{}", table_row(n, kind));
        }
    }
    println!();
    println!("| N | nodes | rails | quick | full |\n|---:|---|---|---|---|");
    for n in ALL_NODES {
        println!("{}", cost_row(n));
    }
    println!();
    println!("{}", job_header());
    for n in JOB_NODES {
        for kind in [Kind::Quick, Kind::Full] {
            println!("{}", job_row(n, kind));
        }
    }
}

/// Faults of the job-level table, where the runner hands in the whole job's busbw: healthy; a
/// node that slows only groups of more than 2 nodes (invisible in pairs); one that slows only
/// groups of more than half the job (invisible in pairs and halves); busbw that falls with every
/// group's size (0.6× per doubling of nodes: nobody to name).
/// A job-level fault: its column, the fault on N nodes with node x, and the mark expected on
/// N nodes.
type JobCase = (
    &'static str,
    fn(usize, usize) -> Option<Fault>,
    fn(usize) -> &'static str,
);

const JOB_CASES: [JobCase; 4] = [
    ("healthy", |_, _| None, |_| "·"),
    (
        "in groups of 3+ nodes",
        |_, node| {
            Some(Fault::SlowInLarge {
                node,
                above: 2,
                factor: 0.5,
            })
        },
        // Halves of 3 nodes or more show it from 6 nodes; at 4 and 5 the job without each
        // node in turn (groups of 3 and 4) does.
        |_| "✓",
    ),
    (
        "in the whole job only",
        |n, node| {
            Some(Fault::SlowInLarge {
                node,
                above: n / 2,
                factor: 0.5,
            })
        },
        // The job without one node is more than half of 4 or 5 nodes; halves never are.
        |n| if n <= 5 { "✓" } else { "?" },
    ),
    (
        "falling with group size",
        |_, _| Some(Fault::SizeCost { per_doubling: 0.6 }),
        |_| "?",
    ),
];

/// One row of the job-level table: per fault, the rounds and ✓ (the node named exactly), ?
/// (nobody named, and the job line says the slowdown could not be localised) or · (nobody
/// named, the job as fast as its pairs); then the culprits named wrongly.
fn job_row(n: usize, kind: Kind) -> String {
    let x = places(n).0;
    let mut cells = Vec::new();
    let mut wrong = 0;
    for (name, fault, expect) in JOB_CASES {
        let topo = Topology::uniform(n, G);
        let mut model = ModelCluster::new(topo.clone(), 1);
        if let Some(f) = fault(n, x) {
            model = model.with_fault(f);
        }
        let config = Config {
            schedule: kind,
            job_busbw: Some(model.job_busbw()),
            ..Config::default()
        };
        let report = run_schedule(&mut model, &topo, &config, &mut |_, _| {}).expect("config");
        let what = format!("{} on {n} nodes, slow {name}", kind.name());
        let job = report.job.clone().expect(&what);
        let named: Vec<Culprit> = report.verdicts.iter().map(|v| v.culprit.clone()).collect();
        let mark = expect(n);
        match mark {
            "✓" => assert_eq!(named, [Culprit::Node { node: x }], "{what}"),
            "?" => assert!(named.is_empty() && job.slow && !job.localised, "{what}"),
            _ => assert!(named.is_empty() && !job.slow, "{what}"),
        }
        wrong += named
            .iter()
            .filter(|c| **c != Culprit::Node { node: x })
            .count();
        cells.push(format!("{} {mark}", report.rounds.len()));
    }
    format!(
        "| {n} | {} | {} | {wrong} |",
        kind.name(),
        cells.join(" | ")
    )
}

const JOB_NODES: [usize; 7] = [4, 5, 6, 8, 16, 32, 64];

fn job_header() -> String {
    let names: Vec<&str> = JOB_CASES.iter().map(|c| c.0).collect();
    format!(
        "| N | schedule | {} | wrongly named |\n|---:|---|{}---:|",
        names.join(" | "),
        "---|".repeat(JOB_CASES.len())
    )
}

#[test]
fn larger_groups_localise_what_pairs_cannot_or_say_so() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/locate.md"))
        .expect("docs/locate.md");
    assert!(doc.contains(&job_header()), "job table header");
    for n in JOB_NODES {
        for kind in [Kind::Quick, Kind::Full] {
            let row = job_row(n, kind);
            println!("{row}");
            assert!(doc.contains(&row), "docs/locate.md lacks the row\n{row}");
        }
    }
}
