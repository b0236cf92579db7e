//! The hardware's bus-bandwidth ceiling for a run: what busbw cannot exceed given the links.
//!
//! nccl-tests define busbw (doc/PERFORMANCE.md in NVIDIA/nccl-tests) so that it can be
//! compared with the speed of the slowest link a rank uses: busbw = algbw × factor (the
//! benchmark table's, [`nccl_perf_facts::BusFactor`]), with the factor chosen so that a ring
//! algorithm's busbw equals the bandwidth each rank sends at. The ceilings below follow from that definition, per
//! direction, with link speeds from the vendors' specifications:
//!
//! * Inside one node, Ring/Tree/PAT and the point-to-point benchmarks: busbw ≤ B, the
//!   per-GPU bandwidth per direction: NVLink links up × GB/s per link and direction
//!   ([`crate::hardware::nvlink_gbs_per_direction`]), or the PCIe link
//!   ([`crate::hardware::pcie_lane_gbs`]) without NVLink. Assumes an NVSwitch (every link
//!   reaches every peer); direct NVLink meshes and PCIe switches give less (approximate).
//! * all_reduce with in-network reduction (NVLS, NVLSTree, CollNet): each GPU sends and
//!   receives the data once, so algbw ≤ B and busbw ≤ 2(n−1)/n × B (an upper bound; the
//!   switch's reduction rate, not modelled, is lower in practice).
//! * Across nodes (m nodes), N = the node's NIC rates added up (Gb/s ÷ 8). Ring (and the
//!   broadcast/reduce chains): each channel ring crosses each node once, carrying busbw × t
//!   bytes, so busbw ≤ min(B, N). Other algorithms for all_reduce, all_gather and
//!   reduce_scatter (Tree, NVLSTree, PAT, or not known): a node must at least send or receive
//!   2(m−1)/m × S (all_reduce) or (m−1)/m × S (the other two) across the network, so
//!   busbw ≤ min(B, (n−1)/n × m/(m−1) × N), which is above N for few nodes (2 nodes of 8:
//!   1.875 N) and tends to N. CollNet all_reduce (SHARP) reduces in the network:
//!   busbw ≤ min(B, 2(n−1)/n × N).
//! * Across nodes, alltoall, alltoallv, gather, scatter: of each rank's (n−1)/n × S bytes,
//!   (n−g)/n leave the node (g ranks per node) through the node's share N/g per rank:
//!   busbw ≤ min(B, (n−1)/(n−g) × N/g). sendrecv and hypercube: busbw ≤ min(B, N/g)
//!   (one peer per rank; approximate).
//! * One rank: no interconnect; NCCL copies inside the device (out of place) or does nothing
//!   (in place). busbw is 0 by definition (factor 0 or n/a); algbw ≤ HBM/2 (every byte is
//!   read and written once), HBM from the SKU table's GPU row.
//! * Several ranks on one GPU posing as hosts: NCCL's socket transport over loopback. Its speed
//!   is the CPU's and the kernel's, not a link's: no hardware ceiling.
//!
//! Only this node's hardware is read; other nodes are assumed alike.

use serde::Serialize;

use crate::hardware::Hardware;
use crate::observed::{Net, Run};
use crate::sku::{GpuSpec, SkuTable};
use nccl_perf_facts::{BusFactor, Traffic, benchmark};

/// The job's shape as explain uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// Ranks.
    pub nranks: u32,
    /// Nodes (0: unknown).
    pub nnodes: u32,
    /// Ranks on the fullest node (0: unknown).
    pub ranks_per_node: u32,
    /// Several ranks, all on one GPU of one host (ranks posing as hosts).
    pub one_gpu: bool,
}

impl Shape {
    /// The shape of `run`.
    pub fn of(run: &Run) -> Shape {
        let devices: std::collections::BTreeSet<(&str, &str, Option<i64>)> = run
            .rank_devices
            .iter()
            .map(|d| (d.host.as_str(), d.pci_bus_id.as_str(), d.device))
            .collect();
        let one_gpu = run.nranks > 1
            && run.rank_devices.len() >= 2
            && devices.len() == 1
            && !run.rank_devices[0].pci_bus_id.is_empty();
        Shape {
            nranks: run.nranks,
            nnodes: run.nnodes,
            ranks_per_node: run.ranks_per_node,
            one_gpu,
        }
    }

    /// One node: a single node, or every rank on the fullest node.
    pub fn one_node(&self) -> bool {
        self.nnodes == 1 || (self.ranks_per_node > 0 && self.ranks_per_node >= self.nranks)
    }
}

/// What bounds a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scope {
    /// One rank: a device-local copy.
    OneRank,
    /// Ranks posing as hosts on one GPU: loopback sockets.
    OneGpuSeveralRanks,
    /// One node.
    IntraNode,
    /// Several nodes.
    InterNode,
    /// The shape is not known well enough.
    Unknown,
}

/// A ceiling and how it was reached.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ceiling {
    /// What bounds the run.
    pub scope: Scope,
    /// busbw cannot exceed this, GB/s (`None`: no hardware figure applies or is known).
    pub busbw_gbs: Option<f64>,
    /// For one rank: algbw cannot exceed this (HBM/2), GB/s.
    pub algbw_gbs: Option<f64>,
    /// Short name of the limiting link (`NVLink`, `PCIe`, `the network`, `HBM`).
    pub limit: String,
    /// The figures and formula, in one line.
    pub basis: String,
}

/// Algorithms that reduce inside the switch or the network.
fn in_network(algo: Option<&str>) -> bool {
    algo.is_some_and(|a| {
        let a = a.to_ascii_lowercase();
        a.starts_with("nvls") || a.starts_with("collnet")
    })
}

/// The intra-node per-GPU bandwidth per direction, GB/s, and its description.
fn intra(hw: &Hardware, spec: Option<&GpuSpec>) -> Option<(f64, String, &'static str)> {
    if let Some(gpu) = &hw.gpu {
        if let Some(b) = gpu.nvlink_gbs() {
            return Some((
                b,
                format!(
                    "NVLink {} active links, {b:.0} GB/s per direction (NVML)",
                    gpu.active_links()
                ),
                "NVLink",
            ));
        }
        let p = gpu.pcie?;
        let b = gpu.pcie_gbs()?;
        return Some((
            b,
            format!(
                "PCIe Gen{} x{}, {b:.1} GB/s per direction (NVML; no NVLink link up)",
                p.cur_gen.unwrap_or(0),
                p.cur_width.unwrap_or(0)
            ),
            "PCIe",
        ));
    }
    let s = spec.filter(|s| s.nvlink_links > 0)?;
    Some((
        s.nvlink_gbs(),
        format!(
            "NVLink {} links × {} GB/s per direction = {:.0} GB/s, from the datasheet \
             (links not read: all assumed up)",
            s.nvlink_links,
            s.nvlink_gbs_per_link,
            s.nvlink_gbs()
        ),
        "NVLink",
    ))
}

/// The node's network bandwidth, GB/s (all ports up added), and its description.
fn network(hw: &Hardware, net: Option<&Net>) -> Option<(f64, String)> {
    let rdma = hw.rdma_nics();
    let nics = if net.is_some_and(Net::is_socket) || rdma.is_empty() {
        hw.ethernet_nics()
    } else {
        rdma
    };
    let gbps: f64 = nics.iter().map(|n| n.rate_gbps).sum();
    if nics.is_empty() || gbps <= 0.0 {
        return None;
    }
    let kind = nics[0].kind.label();
    Some((
        gbps / 8.0,
        format!(
            "{} {kind} port(s) up, {gbps:.0} Gb/s = {:.0} GB/s per node (sysfs; other nodes assumed alike)",
            nics.len(),
            gbps / 8.0
        ),
    ))
}

/// The ceiling of `run` with NCCL's algorithm `algo` and network `net` (as seen for a row).
pub fn ceiling(
    run: &Run,
    hw: &Hardware,
    skus: &SkuTable,
    algo: Option<&str>,
    net: Option<&Net>,
) -> Ceiling {
    let shape = Shape::of(run);
    let name = hw
        .gpu
        .as_ref()
        .map(|g| g.name.clone())
        .or_else(|| run.gpu_names.first().cloned())
        .unwrap_or_default();
    let spec = skus.gpu(&name);
    let none = |scope, limit: &str, basis: String| Ceiling {
        scope,
        busbw_gbs: None,
        algbw_gbs: None,
        limit: limit.to_string(),
        basis,
    };
    if shape.nranks == 0 {
        return none(
            Scope::Unknown,
            "",
            "the number of ranks is not known".into(),
        );
    }
    if shape.nranks == 1 {
        return match spec.and_then(|s| s.hbm_gbs) {
            Some(hbm) => Ceiling {
                scope: Scope::OneRank,
                busbw_gbs: None,
                algbw_gbs: Some(hbm / 2.0),
                limit: "HBM".into(),
                basis: format!(
                    "one rank: no interconnect, a device-local copy; algbw ≤ HBM/2 = {:.0} GB/s \
                     ({name}: {hbm:.0} GB/s, {})",
                    hbm / 2.0,
                    spec.map_or("", |s| s.source.as_str())
                ),
            },
            None => none(
                Scope::OneRank,
                "HBM",
                "one rank: no interconnect, a device-local copy bounded by the GPU's memory \
                 speed (not in the SKU table for this GPU)"
                    .into(),
            ),
        };
    }
    if shape.one_gpu {
        return none(
            Scope::OneGpuSeveralRanks,
            "loopback",
            format!(
                "{} ranks on one GPU posing as hosts: NCCL's socket transport over loopback; \
                 no hardware ceiling (loopback speed is the CPU's and the kernel's, not a link's)",
                shape.nranks
            ),
        );
    }
    let n = f64::from(shape.nranks);
    // Without NCCL's report the algorithm is not known: on GPUs whose NVSwitch can reduce
    // (NVLink 4 and later, 18 links) NVLS may have run, so the looser bound is the ceiling.
    let nvls_possible = algo.is_none()
        && spec.is_some_and(|s| s.nvlink_links >= 18)
        && hw.gpu.as_ref().is_none_or(|g| g.active_links() >= 18);
    // How the benchmark's data moves (the benchmark table), `None` for a name not in it.
    let traffic = benchmark(&run.collective).map(|b| b.traffic);
    let reduce_all = traffic == Some(Traffic::ReduceAll);
    let reduce_in_net = reduce_all && (in_network(algo) || nvls_possible);
    let k = if reduce_in_net {
        BusFactor::TwiceShare.of(shape.nranks as usize)
    } else {
        1.0
    };
    let k_text = if reduce_in_net {
        match algo {
            Some(a) => format!("; {a} reduces in the switch: busbw ≤ 2(n−1)/n × B"),
            None => "; algorithm not known and NVLS possible on this GPU: busbw ≤ 2(n−1)/n × B \
                     (B alone for Ring)"
                .to_string(),
        }
    } else {
        String::new()
    };
    let intra = intra(hw, spec);
    if shape.one_node() {
        return match intra {
            Some((b, text, limit)) => Ceiling {
                scope: Scope::IntraNode,
                busbw_gbs: Some(k * b),
                algbw_gbs: None,
                limit: limit.into(),
                basis: format!("one node, B = {text}{k_text}"),
            },
            None => none(
                Scope::IntraNode,
                "",
                "one node, but the GPU's links are not known (no NVML, GPU not in the SKU table)"
                    .into(),
            ),
        };
    }
    if shape.nnodes == 0 || shape.ranks_per_node == 0 {
        return none(
            Scope::Unknown,
            "",
            "the number of nodes is not known".into(),
        );
    }
    let Some((net_b, net_text)) = network(hw, net) else {
        return none(
            Scope::InterNode,
            "network",
            format!(
                "{} nodes, but this node's network adapters are not known",
                shape.nnodes
            ),
        );
    };
    let g = f64::from(shape.ranks_per_node);
    let (net_ceiling, formula) = if traffic.is_some_and(Traffic::point_to_point) {
        if traffic == Some(Traffic::OnePeer) || n <= g {
            (net_b / g, "N/g per rank (approximate)".to_string())
        } else {
            (
                (n - 1.0) / (n - g) * net_b / g,
                "(n−1)/(n−g) × N/g".to_string(),
            )
        }
    } else if reduce_all && algo.is_some_and(|a| a.to_ascii_lowercase().starts_with("collnet")) {
        (
            BusFactor::TwiceShare.of(shape.nranks as usize) * net_b,
            "2(n−1)/n × N (CollNet reduces in the network)".to_string(),
        )
    } else if traffic == Some(Traffic::Rooted)
        || algo.is_some_and(|a| a.eq_ignore_ascii_case("ring"))
    {
        (
            net_b,
            "N (a ring crosses each node once per channel)".to_string(),
        )
    } else {
        let m = f64::from(shape.nnodes);
        (
            (n - 1.0) / n * m / (m - 1.0) * net_b,
            format!(
                "(n−1)/n × m/(m−1) × N, m = {} nodes (the least traffic without in-network \
                 reduction: {})",
                shape.nnodes,
                algo.map_or("algorithm not known".to_string(), |a| a.to_string())
            ),
        )
    };
    let (busbw, limit, basis) = match intra {
        Some((b, text, limit)) if k * b < net_ceiling => (
            k * b,
            limit,
            format!(
                "B = {text}{k_text} is below the network's {formula} = {net_ceiling:.0} GB/s ({net_text})"
            ),
        ),
        _ => (
            net_ceiling,
            "network",
            format!(
                "{} nodes × {}: busbw ≤ {formula} = {net_ceiling:.0} GB/s, N = {net_text}",
                shape.nnodes, shape.ranks_per_node
            ),
        ),
    };
    Ceiling {
        scope: Scope::InterNode,
        busbw_gbs: Some(busbw),
        algbw_gbs: None,
        limit: limit.into(),
        basis,
    }
}

#[cfg(test)]
mod tests;
