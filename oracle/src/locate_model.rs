//! A model cluster for tests and the cost table: nodes with NVLink inside and one NIC per GPU
//! (GPU *i*'s NIC on rail *i*), faults injected where they would be on a real cluster, seeded
//! noise. It runs rounds through the same [`RoundRunner`] seam as the GPUs.
//!
//! busbw of a group is its bottleneck: inside each node with two or more of the group's GPUs,
//! `nvlink_gbs` × the slowest factor of that node and its GPUs; across nodes (two or more),
//! `nic_gbs` × the fewest GPUs the group has on one node × the slowest factor of the nodes,
//! GPUs' NICs, rails and links it uses. Then multiplicative noise. Time per operation is the
//! all_reduce time of the locate size at that busbw.

use std::time::Duration;

use nccl_perf_locate::rng::Rng;
use nccl_perf_locate::round::Round;
use nccl_perf_locate::seam::{GroupOutcome, RoundResult, RoundRunner, Stop};
use nccl_perf_locate::topology::Topology;
use nccl_perf_locate::verdict::Culprit;

/// Something wrong with the model cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// A whole node slow inside and on the network (CPU starved, PCIe switch, thermal).
    SlowNode {
        /// Node index.
        node: usize,
        /// Its busbw as a fraction of normal.
        factor: f64,
    },
    /// One GPU's NVLink slow (groups of two or more GPUs of its node that include it).
    SlowGpu {
        /// Node index.
        node: usize,
        /// Local GPU index.
        gpu: usize,
        /// Fraction of normal.
        factor: f64,
    },
    /// One GPU's NIC slow (groups across nodes that include the GPU).
    SlowNic {
        /// Node index.
        node: usize,
        /// Local GPU index.
        gpu: usize,
        /// Fraction of normal.
        factor: f64,
    },
    /// The network path between two nodes slow.
    SlowLink {
        /// A node.
        a: usize,
        /// The other node.
        b: usize,
        /// Fraction of normal.
        factor: f64,
    },
    /// A rail slow (its switch): groups across nodes that use GPU `rail` of any node.
    SlowRail {
        /// Local GPU index.
        rail: usize,
        /// Fraction of normal.
        factor: f64,
    },
    /// A node slow in one round only (a transient: another job's burst on its network), which
    /// locate must not name.
    Blip {
        /// Node index.
        node: usize,
        /// The round (1-based, as [`Round::index`]).
        round: usize,
        /// Its busbw in that round as a fraction of normal.
        factor: f64,
    },
    /// A node that slows only groups of more than `above` nodes (a process paused now and then,
    /// which every node of a large ring waits on): invisible in pairs, seen in the whole job.
    SlowInLarge {
        /// Node index.
        node: usize,
        /// Groups of more nodes than this are slowed.
        above: usize,
        /// Their busbw as a fraction of normal.
        factor: f64,
    },
    /// busbw across nodes that falls with the group's size everywhere, nobody's fault (ranks
    /// posing as hosts on one machine; a fabric that congests as the job grows): a group of
    /// `n` nodes runs at `per_doubling`^(log₂ n − 1) of a pair.
    SizeCost {
        /// A pair's busbw over a group of twice as many nodes.
        per_doubling: f64,
    },
    /// Groups with both nodes hang.
    HangingLink {
        /// A node.
        a: usize,
        /// The other node.
        b: usize,
    },
    /// Groups with any GPU of the node hang (a stopped process).
    HangingNode {
        /// Node index.
        node: usize,
    },
    /// Groups with this GPU fail with an NCCL error.
    FailingGpu {
        /// Node index.
        node: usize,
        /// Local GPU index.
        gpu: usize,
    },
}

impl Fault {
    /// What locate should name for this fault: nothing for a one-round [`Fault::Blip`].
    pub fn culprit(&self, topo: &Topology) -> Option<Culprit> {
        Some(match *self {
            Fault::Blip { .. } | Fault::SizeCost { .. } => return None,
            Fault::SlowNode { node, .. }
            | Fault::SlowInLarge { node, .. }
            | Fault::HangingNode { node } => Culprit::Node { node },
            Fault::SlowGpu { node, gpu, .. }
            | Fault::SlowNic { node, gpu, .. }
            | Fault::FailingGpu { node, gpu } => Culprit::gpus(topo, node, &[gpu]),
            Fault::SlowLink { a, b, .. } | Fault::HangingLink { a, b } => Culprit::link(a, b),
            Fault::SlowRail { rail, .. } => Culprit::Rail { rail },
        })
    }
}

/// The locate measurement whose time the model reports: all_reduce of `size_bytes`,
/// `warmup + iters` operations per group, after a communicator split of `split_s` seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Bytes per operation.
    pub size_bytes: f64,
    /// Warm-up operations.
    pub warmup: u32,
    /// Timed operations.
    pub iters: u32,
    /// Seconds to split and tear down the round's communicators.
    pub split_s: f64,
}

impl Default for Timing {
    /// 256 MiB, 5 + 20 operations, 1 s of communicator setup per round.
    fn default() -> Timing {
        Timing {
            size_bytes: 256.0 * 1024.0 * 1024.0,
            warmup: 5,
            iters: 20,
            split_s: 1.0,
        }
    }
}

/// The model cluster.
#[derive(Debug, Clone)]
pub struct ModelCluster {
    topo: Topology,
    /// busbw inside a node, GB/s (default 360: H100/H200 NVLink, ring).
    pub nvlink_gbs: f64,
    /// busbw per GPU across nodes, GB/s (default 48: one 400G NIC per GPU).
    pub nic_gbs: f64,
    /// Relative standard deviation of the noise (default 0.01).
    pub noise: f64,
    /// What each round costs.
    pub timing: Timing,
    faults: Vec<Fault>,
    rng: Rng,
    /// The round being run (for [`Fault::Blip`]).
    round: usize,
}

impl ModelCluster {
    /// A healthy cluster of `topo` whose noise comes from `seed`.
    pub fn new(topo: Topology, seed: u64) -> ModelCluster {
        ModelCluster {
            topo,
            nvlink_gbs: 360.0,
            nic_gbs: 48.0,
            noise: 0.01,
            timing: Timing::default(),
            faults: Vec::new(),
            rng: Rng::new(seed ^ 0x6c6f_6361_7465),
            round: 0,
        }
    }

    /// The same cluster with `fault` added.
    pub fn with_fault(mut self, fault: Fault) -> ModelCluster {
        self.faults.push(fault);
        self
    }

    /// The cluster's topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The injected faults.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// The noise-free outcome of a group of `ranks` in the round being run.
    pub fn ideal(&self, ranks: &[usize]) -> GroupOutcome {
        let topo = &self.topo;
        let nodes = topo.nodes_of(ranks);
        let on = |node: usize| {
            ranks
                .iter()
                .filter(|&&r| topo.node_of(r) == Some(node))
                .count()
        };
        let has =
            |node: usize, gpu: usize| topo.rank(node, gpu).is_some_and(|r| ranks.contains(&r));
        let across = nodes.len() >= 2;
        let mut inter = 1.0f64;
        let mut intra: Vec<f64> = nodes.iter().map(|_| 1.0).collect();
        for f in &self.faults {
            match *f {
                Fault::SlowNode { node, factor } => {
                    if let Some(i) = nodes.iter().position(|&n| n == node) {
                        intra[i] = intra[i].min(factor);
                        inter = inter.min(factor);
                    }
                }
                Fault::Blip {
                    node,
                    round,
                    factor,
                } if round == self.round => {
                    if let Some(i) = nodes.iter().position(|&n| n == node) {
                        intra[i] = intra[i].min(factor);
                        inter = inter.min(factor);
                    }
                }
                Fault::SlowGpu { node, gpu, factor } => {
                    if let Some(i) = nodes.iter().position(|&n| n == node)
                        && has(node, gpu)
                    {
                        intra[i] = intra[i].min(factor);
                    }
                }
                Fault::SlowNic { node, gpu, factor } if across && has(node, gpu) => {
                    inter = inter.min(factor);
                }
                Fault::SlowLink { a, b, factor } if nodes.contains(&a) && nodes.contains(&b) => {
                    inter = inter.min(factor);
                }
                Fault::SlowRail { rail, factor }
                    if across && ranks.iter().any(|&r| topo.local_of(r) == Some(rail)) =>
                {
                    inter = inter.min(factor);
                }
                Fault::SlowInLarge {
                    node,
                    above,
                    factor,
                } if nodes.len() > above && nodes.contains(&node) => inter = inter.min(factor),
                Fault::SizeCost { per_doubling } if across => {
                    inter *= per_doubling.powf((nodes.len() as f64).log2() - 1.0);
                }
                Fault::HangingLink { a, b }
                    if a != b && nodes.contains(&a) && nodes.contains(&b) =>
                {
                    return GroupOutcome::Hung;
                }
                Fault::HangingNode { node } if nodes.contains(&node) => return GroupOutcome::Hung,
                Fault::FailingGpu { node, gpu } if has(node, gpu) => {
                    return GroupOutcome::Failed {
                        error: "NCCL failure 'remote process exited or there was a network error'"
                            .into(),
                    };
                }
                _ => {}
            }
        }
        let mut busbw = f64::INFINITY;
        for (i, &n) in nodes.iter().enumerate() {
            if on(n) >= 2 {
                busbw = busbw.min(self.nvlink_gbs * intra[i]);
            }
        }
        if across {
            let fewest = nodes.iter().map(|&n| on(n)).min().unwrap_or(1);
            busbw = busbw.min(self.nic_gbs * fewest as f64 * inter);
        }
        if !busbw.is_finite() {
            busbw = 0.0;
        }
        GroupOutcome::Measured {
            busbw,
            time_us: self.time_us(busbw, ranks.len()),
        }
    }

    /// The whole job measured once, with noise (the table before locate): its busbw, GB/s.
    pub fn job_busbw(&mut self) -> f64 {
        let all: Vec<usize> = (0..self.topo.world()).collect();
        let noise = 1.0 + self.noise * self.rng.normal();
        self.ideal(&all)
            .busbw()
            .map_or(0.0, |v| (v * noise).max(0.0))
    }

    /// all_reduce time per operation of the locate size at `busbw` on `n` ranks, µs.
    fn time_us(&self, busbw: f64, n: usize) -> f64 {
        let factor = 2.0 * (n as f64 - 1.0) / n as f64;
        let algbw = busbw / factor.max(f64::MIN_POSITIVE);
        if algbw > 0.0 {
            self.timing.size_bytes / (algbw * 1e3)
        } else {
            f64::INFINITY
        }
    }
}

impl RoundRunner for ModelCluster {
    fn run_round(&mut self, round: &Round, deadline: Duration) -> Result<RoundResult, Stop> {
        self.round = round.index;
        let ops = f64::from(self.timing.warmup + self.timing.iters);
        let mut longest = 0.0f64;
        let outcomes = round
            .groups
            .iter()
            .map(|g| {
                let noise = 1.0 + self.noise * self.rng.normal();
                match self.ideal(&g.ranks) {
                    GroupOutcome::Measured { busbw, .. } => {
                        let busbw = (busbw * noise).max(0.0);
                        let time_us = self.time_us(busbw, g.ranks.len());
                        longest = longest.max(ops * time_us / 1e6);
                        GroupOutcome::Measured { busbw, time_us }
                    }
                    other => {
                        longest = longest.max(deadline.as_secs_f64());
                        other
                    }
                }
            })
            .collect();
        Ok(RoundResult {
            outcomes,
            wall_s: self.timing.split_s + longest.min(deadline.as_secs_f64()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busbw(o: GroupOutcome) -> f64 {
        o.busbw().unwrap_or(-1.0)
    }

    #[test]
    fn shapes_and_faults_set_the_bottleneck() {
        let topo = Topology::uniform(4, 4);
        let pair = [topo.ranks_of(0), topo.ranks_of(1)].concat();
        let healthy = ModelCluster::new(topo.clone(), 1);
        assert_eq!(busbw(healthy.ideal(&topo.ranks_of(0))), 360.0);
        assert_eq!(busbw(healthy.ideal(&pair)), 4.0 * 48.0);
        assert_eq!(busbw(healthy.ideal(&[0, 4, 8, 12])), 48.0);
        let m = healthy.clone().with_fault(Fault::SlowNic {
            node: 1,
            gpu: 2,
            factor: 0.5,
        });
        assert_eq!(busbw(m.ideal(&pair)), 96.0);
        assert_eq!(busbw(m.ideal(&topo.ranks_of(1))), 360.0);
        let m = healthy.clone().with_fault(Fault::SlowRail {
            rail: 3,
            factor: 0.5,
        });
        assert_eq!(busbw(m.ideal(&[3, 7])), 24.0);
        assert_eq!(busbw(m.ideal(&[2, 6])), 48.0);
        let m = healthy
            .clone()
            .with_fault(Fault::HangingLink { a: 0, b: 1 });
        assert_eq!(m.ideal(&pair), GroupOutcome::Hung);
        assert_eq!(busbw(m.ideal(&[0, 8])), 48.0);
        let large = healthy.clone().with_fault(Fault::SlowInLarge {
            node: 0,
            above: 2,
            factor: 0.5,
        });
        assert_eq!(busbw(large.ideal(&pair)), 192.0);
        assert_eq!(busbw(large.ideal(&[0, 4, 8])), 24.0);
        let sized = healthy
            .clone()
            .with_fault(Fault::SizeCost { per_doubling: 0.5 });
        assert_eq!(busbw(sized.ideal(&[0, 4])), 48.0);
        assert_eq!(busbw(sized.ideal(&[0, 4, 8, 12])), 24.0);
        let m = healthy.with_fault(Fault::FailingGpu { node: 2, gpu: 0 });
        assert!(matches!(m.ideal(&[8, 9]), GroupOutcome::Failed { .. }));
    }

    #[test]
    fn rounds_are_noisy_but_reproducible_and_hangs_cost_the_deadline() {
        use nccl_perf_locate::round::{Phase, Role, RoundBuilder, Subject};
        let topo = Topology::uniform(2, 2);
        let mut b = RoundBuilder::new(4, Phase::Pairs);
        b.add(vec![0, 1, 2, 3], Subject::Pair(0, 1), Role::Primary);
        let round = b.finish(1).unwrap();
        let run = |m: &mut ModelCluster| m.run_round(&round, Duration::from_secs(30)).unwrap();
        let mut a = ModelCluster::new(topo.clone(), 5);
        let mut c = ModelCluster::new(topo.clone(), 5);
        let (ra, rc) = (run(&mut a), run(&mut c));
        assert_eq!(ra, rc);
        let v = ra.outcomes[0].busbw().unwrap();
        assert!(v != 96.0 && (v - 96.0).abs() < 5.0, "{v}");
        assert!(ra.wall_s > 1.0 && ra.wall_s < 2.0);
        let mut h = ModelCluster::new(topo, 5).with_fault(Fault::HangingNode { node: 1 });
        let rh = run(&mut h);
        assert_eq!(rh.outcomes[0], GroupOutcome::Hung);
        assert_eq!(rh.wall_s, 31.0);
    }
}
