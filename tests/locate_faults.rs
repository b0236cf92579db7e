//! Runners that stop, stop answering or garble results: verdicts on the rounds that ran, hung
//! processes named as such, missing or non-numeric results counted as errors.

use std::time::Duration;

use nccl_perf_locate::EXIT_SUSPECTS;
use nccl_perf_locate::json::{self};
use nccl_perf_locate::round::Round;
use nccl_perf_locate::schedule::Kind;
use nccl_perf_locate::seam::{GroupOutcome, RoundResult, RoundRunner, Stop};
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::verdict::Culprit;
use oracle::locate_model::{Fault, ModelCluster};

use crate::locate_runs::*;

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
