//! The three kinds of bisection ([`super::bisect::Domain`]): GPUs inside a node (per-node
//! schedule), nodes along a rail (per-rail schedule), and GPUs of a node against the same GPUs
//! of a known-good partner (pair schedules).

use super::bisect::{Domain, Job};
use super::round::{Role, RoundBuilder, Subject};
use super::topology::Topology;
use super::verdict::Culprit;

/// GPUs of one node, probed on their own (NVLink/PCIe inside the node). A lone GPU is padded
/// with a known-good GPU of the same node; controls are the same GPUs of a known-good node.
pub struct InNode<'a> {
    /// The job.
    pub topo: &'a Topology,
    /// Nodes found healthy (controls).
    pub good_nodes: &'a [usize],
}

impl Domain for InNode<'_> {
    fn topo(&self) -> &Topology {
        self.topo
    }

    fn probe(
        &self,
        job: &Job,
        units: &[usize],
        b: &mut RoundBuilder,
    ) -> Option<(usize, Vec<usize>)> {
        let node = job.owner;
        let mut layout = units.to_vec();
        if layout.len() < 2 {
            let pad = job.good.iter().copied().find(|&g| {
                !layout.contains(&g) && self.topo.rank(node, g).is_some_and(|r| b.free(&[r]))
            })?;
            layout.push(pad);
        }
        let ranks = self.topo.ranks_at(node, &layout)?;
        let subject = Subject::NodeGpus {
            node,
            gpus: layout.clone(),
        };
        b.add(ranks, subject, Role::Probe).map(|i| (i, layout))
    }

    fn control(&self, job: &Job, layout: &[usize], b: &mut RoundBuilder) -> Option<usize> {
        self.good_nodes
            .iter()
            .filter(|&&m| m != job.owner)
            .find_map(|&m| {
                let ranks = self.topo.ranks_at(m, layout)?;
                let subject = Subject::NodeGpus {
                    node: m,
                    gpus: layout.to_vec(),
                };
                b.add(ranks, subject, Role::Control)
            })
    }

    fn culprit(&self, job: &Job, units: &[usize]) -> Culprit {
        Culprit::gpus(self.topo, job.owner, units)
    }
}

/// Nodes along one rail: GPU `rail` of some nodes. A lone node is padded with a node known
/// good on this rail; controls are the same nodes on a known-good rail, so a slow node (slow
/// on every rail) is not taken for a slow rail.
pub struct AlongRail<'a> {
    /// The job.
    pub topo: &'a Topology,
    /// Rails found healthy (controls).
    pub good_rails: &'a [usize],
}

impl Domain for AlongRail<'_> {
    fn topo(&self) -> &Topology {
        self.topo
    }

    fn probe(
        &self,
        job: &Job,
        units: &[usize],
        b: &mut RoundBuilder,
    ) -> Option<(usize, Vec<usize>)> {
        let rail = job.owner;
        let mut layout = units.to_vec();
        if layout.len() < 2 {
            let pad = job.good.iter().copied().find(|&n| {
                !layout.contains(&n) && self.topo.rank(n, rail).is_some_and(|r| b.free(&[r]))
            })?;
            layout.push(pad);
        }
        let ranks: Option<Vec<usize>> = layout.iter().map(|&n| self.topo.rank(n, rail)).collect();
        let subject = Subject::RailNodes {
            rail,
            nodes: layout.clone(),
        };
        b.add(ranks?, subject, Role::Probe).map(|i| (i, layout))
    }

    fn control(&self, job: &Job, layout: &[usize], b: &mut RoundBuilder) -> Option<usize> {
        self.good_rails
            .iter()
            .filter(|&&r| r != job.owner)
            .find_map(|&rail| {
                let ranks: Option<Vec<usize>> =
                    layout.iter().map(|&n| self.topo.rank(n, rail)).collect();
                let subject = Subject::RailNodes {
                    rail,
                    nodes: layout.to_vec(),
                };
                b.add(ranks?, subject, Role::Control)
            })
    }

    fn culprit(&self, job: &Job, units: &[usize]) -> Culprit {
        Culprit::rail_nodes(self.topo, job.owner, units)
    }
}

/// GPUs of one node, each probe joined by the same GPUs of a known-good partner node (the
/// traffic crosses the network on those GPUs' rails); controls are the same GPUs of two
/// known-good nodes.
pub struct WithPartner<'a> {
    /// The job.
    pub topo: &'a Topology,
    /// Nodes found healthy (partners and controls).
    pub good_nodes: &'a [usize],
}

impl WithPartner<'_> {
    /// Good nodes other than `not`, starting at a place that depends on `not` so that
    /// different suspects lean on different partners.
    fn candidates(&self, not: usize) -> impl Iterator<Item = usize> + '_ {
        let n = self.good_nodes.len().max(1);
        let start = not % n;
        self.good_nodes[start.min(self.good_nodes.len())..]
            .iter()
            .chain(&self.good_nodes[..start.min(self.good_nodes.len())])
            .copied()
            .filter(move |&m| m != not)
    }
}

impl Domain for WithPartner<'_> {
    fn topo(&self) -> &Topology {
        self.topo
    }

    fn probe(
        &self,
        job: &Job,
        units: &[usize],
        b: &mut RoundBuilder,
    ) -> Option<(usize, Vec<usize>)> {
        let node = job.owner;
        let mine = self.topo.ranks_at(node, units)?;
        if !b.free(&mine) {
            return None;
        }
        self.candidates(node).find_map(|p| {
            let mut ranks = self.topo.ranks_at(p, units)?;
            ranks.extend(&mine);
            let subject = Subject::PairGpus {
                node,
                partner: p,
                gpus: units.to_vec(),
            };
            b.add(ranks, subject, Role::Probe)
                .map(|i| (i, units.to_vec()))
        })
    }

    fn control(&self, job: &Job, layout: &[usize], b: &mut RoundBuilder) -> Option<usize> {
        let free: Vec<(usize, Vec<usize>)> = self
            .candidates(job.owner)
            .filter_map(|m| Some((m, self.topo.ranks_at(m, layout)?)))
            .filter(|(_, r)| b.free(r))
            .take(2)
            .collect();
        let [(q, rq), (r, rr)] = free.as_slice() else {
            return None;
        };
        let subject = Subject::PairGpus {
            node: *q,
            partner: *r,
            gpus: layout.to_vec(),
        };
        b.add(
            [rq.as_slice(), rr.as_slice()].concat(),
            subject,
            Role::Control,
        )
    }

    fn culprit(&self, job: &Job, units: &[usize]) -> Culprit {
        Culprit::gpus(self.topo, job.owner, units)
    }
}
