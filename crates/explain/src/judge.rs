//! The verdict over the large rows: the measured busbw with its percentages of NCCL's model,
//! the hardware ceiling and the published figure, then plain words: a diagnosis where the
//! evidence points to one, else how the figure compares.

use crate::ceiling::{Ceiling, Scope, Shape};
use crate::hardware::Hardware;
use crate::observed::{Path, Run};
use crate::rows::{
    BANDWIDTH_BOUND, RowFields, collective_name, is_special, median_busbw, median_of,
    median_of_algbw,
};
use crate::sku::{Expectation, SkuTable};
use crate::units::{gbs, pct, size};

/// The verdict and the gate's figure.
pub(crate) struct Judged {
    pub verdict: String,
    pub percent_of_expected: Option<f64>,
    pub expected_basis: Option<String>,
}

/// Diagnoses the evidence supports, one sentence each.
fn diagnoses(run: &Run, hw: &Hardware, skus: &SkuTable, shape: &Shape) -> Vec<String> {
    let mut out = Vec::new();
    let paths: Vec<&Path> = run
        .rows
        .iter()
        .filter_map(|r| r.seen.as_ref())
        .map(|s| &s.path)
        .collect();
    let rdma = hw.rdma_nics();
    if paths
        .iter()
        .any(|p| matches!(p, Path::Network(n) if n.is_socket()))
        && !rdma.is_empty()
    {
        let kinds: std::collections::BTreeSet<&str> = rdma.iter().map(|n| n.kind.label()).collect();
        out.push(format!(
            "NCCL used sockets although {} {} port(s) are up",
            rdma.len(),
            kinds.into_iter().collect::<Vec<_>>().join("/")
        ));
    }
    if shape.nnodes == 1
        && shape.nranks > 1
        && !shape.one_gpu
        && paths.iter().any(|p| matches!(p, Path::Network(_)))
    {
        out.push("NCCL went through the network inside one node (no peer-to-peer or shared-memory path was used)".into());
    }
    if let Some(gpu) = &hw.gpu {
        let spec = skus.gpu(&gpu.name);
        let active = gpu.active_links();
        if let Some(s) = spec.filter(|s| s.nvlink_links > 0) {
            if active == 0 && shape.nranks > 1 {
                out.push(format!(
                    "no NVLink link is up although the {} has {}",
                    gpu.name, s.nvlink_links
                ));
            } else if (active as u32) < s.nvlink_links && active > 0 {
                out.push(format!(
                    "only {active} of the {}'s {} NVLink links are up",
                    gpu.name, s.nvlink_links
                ));
            }
        }
        // An idle GPU may train its link down: only a fault when PCIe carries the data (no
        // NVLink up, or the network's GPUDirect path).
        let pcie_carries =
            active == 0 || paths.iter().any(|p| matches!(p, Path::Network(_))) || shape.nnodes > 1;
        if let Some(p) = gpu.pcie
            && let (Some(g), Some(w), Some(mg), Some(mw)) =
                (p.cur_gen, p.cur_width, p.max_gen, p.max_width)
            && (g < mg || w < mw)
            && pcie_carries
        {
            out.push(format!(
                "the GPU's PCIe link runs at Gen{g} x{w}, below its Gen{mg} x{mw} (read when \
                 the GPU may have been idle: a fault if it stays so under load)"
            ));
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn judge(
    run: &Run,
    hw: &Hardware,
    skus: &SkuTable,
    shape: &Shape,
    large: &[usize],
    rows: &[RowFields],
    ceiling: Option<&Ceiling>,
    expectation: Option<&Expectation>,
    networks: &[&Expectation],
) -> Judged {
    let mut judged = Judged {
        verdict: String::new(),
        percent_of_expected: None,
        expected_basis: None,
    };
    let Some(measured) = median_busbw(run, large) else {
        judged.verdict = format!("{}: no rows to judge", collective_name(run));
        return judged;
    };
    let from = large.iter().map(|&i| run.rows[i].bytes).min().unwrap_or(0);
    let head = format!("{} ≥ {}", collective_name(run), size(from));
    let gpu = hw
        .gpu
        .as_ref()
        .map(|g| g.name.clone())
        .or_else(|| run.gpu_names.first().cloned());
    let diag = diagnoses(run, hw, skus, shape);
    let largest = large.iter().map(|&i| run.rows[i].bytes).max().unwrap_or(0);
    let latency_bound = largest < BANDWIDTH_BOUND;
    match is_special(ceiling) {
        Some(Scope::OneRank) if latency_bound => {
            let algbw = median_of_algbw(run, large);
            judged.verdict = format!(
                "{head}: one rank, algbw {} — a device-local copy, and too small to judge: the \
                 largest size, {}, is bound by latency (compare from {} up)",
                algbw.map_or("n/a".into(), gbs),
                size(largest),
                size(BANDWIDTH_BOUND)
            );
            return judged;
        }
        Some(Scope::OneRank) => {
            let algbw = median_of_algbw(run, large);
            let of = ceiling
                .and_then(|c| c.algbw_gbs)
                .and_then(|c| algbw.map(|a| a / c * 100.0))
                .map(|p| format!(", {} of half the memory speed (HBM/2)", pct(p)))
                .unwrap_or_default();
            judged.verdict = format!(
                "{head}: one rank, algbw {}{of} — a device-local copy, no interconnect: busbw is not a link figure here",
                algbw.map_or("n/a".into(), gbs)
            );
            return judged;
        }
        Some(Scope::OneGpuSeveralRanks) => {
            judged.verdict = format!(
                "{head}: busbw {} with {} ranks on one GPU posing as hosts — loopback sockets, not a hardware figure",
                gbs(measured),
                run.nranks
            );
            return judged;
        }
        _ => {}
    }
    let of_model = median_of(rows, large, |r| r.percent_of_model);
    if latency_bound {
        let model = of_model
            .map(|p| format!(", {} of NCCL's model", pct(p)))
            .unwrap_or_default();
        judged.percent_of_expected = of_model;
        judged.expected_basis = of_model.map(|_| model_basis(rows, large));
        judged.verdict = format!(
            "{head}: busbw {}{model} — too small to judge the links: the largest size, {}, is \
             bound by latency (compare from {} up, e.g. -e 1G)",
            gbs(measured),
            size(largest),
            size(BANDWIDTH_BOUND)
        );
        return judged;
    }
    let of_ceiling = median_of(rows, large, |r| r.percent_of_ceiling);
    let of_expected = median_of(rows, large, |r| r.percent_of_expected);
    let mut parts = vec![format!("busbw {}", gbs(measured))];
    if let Some(p) = of_model {
        parts.push(format!("{} of NCCL's model", pct(p)));
    }
    if let (Some(p), Some(c)) = (of_ceiling, ceiling) {
        parts.push(format!("{} of the {} ceiling", pct(p), c.limit));
    }
    if let (Some(p), Some(e)) = (of_expected, expectation) {
        parts.push(format!("{} of the published {}", pct(p), gbs(e.busbw_gbs)));
        judged.percent_of_expected = Some(p);
        judged.expected_basis = Some(format!(
            "the SKU table's {} ({})",
            gbs(e.busbw_gbs),
            e.source
        ));
    } else if let Some(p) = of_model {
        judged.percent_of_expected = Some(p);
        judged.expected_basis = Some(model_basis(rows, large));
    }
    // " for Ring" when NCCL reported its algorithm for the large sizes.
    // Where NCCL did not report its choice (NCCL 2.22), the model's fastest pair is named.
    let fastest = assumed_pair(rows, large)
        .map(|b| format!(" for its fastest pair, {b}"))
        .unwrap_or_default();
    let algo = large
        .iter()
        .find_map(|&i| rows[i].algo.clone())
        .map(|a| format!(" for {a}"))
        .unwrap_or_else(|| fastest.clone());
    let on = format!("{} × {}", run.nranks, gpu.as_deref().unwrap_or("GPUs"));
    let fine = of_expected.or(of_model).is_some_and(|p| p >= 85.0);
    let mut words = if let Some(p) = of_expected {
        if p >= 85.0 {
            format!("as expected{algo} on {on}")
        } else if p >= 60.0 {
            format!("below the published figure for {on}")
        } else {
            format!("far below the published figure for {on}")
        }
    } else if let Some(p) = of_model {
        if p >= 85.0 {
            format!("as NCCL's model predicts{algo} on {on}")
        } else {
            format!("slower than NCCL's own model predicts{fastest}")
        }
    } else if !networks.is_empty() {
        // The table has this shape on several networks, and a log does not say which one ran:
        // the measurement against each, and the one fact missing.
        let against: Vec<String> = networks
            .iter()
            .map(|e| {
                format!(
                    "{} of the {} published for {}",
                    pct(measured / e.busbw_gbs * 100.0),
                    gbs(e.busbw_gbs),
                    e.network.as_deref().unwrap_or("another network")
                )
            })
            .collect();
        format!(
            "{}; which applies depends on the network between the nodes, which the run does not \
             show (--explain-sku FILE with your network's row decides)",
            against.join("; ")
        )
    } else if of_ceiling.is_some() && run.collective.is_empty() {
        "only the hardware ceiling: the log does not name its collective, so no published \
         figure can be chosen (nor is there an NCCL model in a log)"
            .into()
    } else if of_ceiling.is_some() {
        "no published figure or NCCL model to compare with: only the hardware ceiling".into()
    } else {
        format!(
            "nothing to compare with: {}",
            missing_facts(gpu.is_some(), shape, &on)
        )
    };
    if !diag.is_empty() {
        words = if fine {
            format!("{words}; yet {}", diag.join("; "))
        } else {
            format!("{}; {words}", diag.join("; "))
        };
    }
    judged.verdict = format!("{head}: {} — {words}", parts.join(", "));
    judged
}

/// The model's fastest pair where the large rows' predictions are for it (NCCL did not report
/// the pair it ran).
fn assumed_pair(rows: &[RowFields], large: &[usize]) -> Option<String> {
    large
        .iter()
        .find(|&&i| rows[i].model_pair_assumed)
        .and_then(|&i| rows[i].best_pair.clone())
}

/// What a comparison with NCCL's model compares with, in words.
fn model_basis(rows: &[RowFields], large: &[usize]) -> String {
    match assumed_pair(rows, large) {
        Some(b) => format!(
            "NCCL's own cost model, for its fastest pair ({b}): NCCL did not report the pair it ran"
        ),
        None => "NCCL's own cost model".into(),
    }
}

/// What a verdict with nothing to compare with lacks: the facts the run does not give (the GPU
/// model, the number of nodes), else that the SKU table has no figure for this GPU and shape.
fn missing_facts(gpu_known: bool, shape: &Shape, on: &str) -> String {
    let mut missing = Vec::new();
    if !gpu_known {
        missing.push("the GPU model (no device lines)");
    }
    if shape.nnodes == 0 {
        missing.push("the number of nodes");
    }
    if missing.is_empty() {
        format!(
            "no NCCL model, and neither a published figure nor a datasheet ceiling for {on} \
             (--explain-sku FILE adds a figure)"
        )
    } else {
        format!(
            "the run does not give {} (no NCCL model in a log; --explain-sku FILE cannot match \
             a figure without them)",
            missing.join(" or ")
        )
    }
}
