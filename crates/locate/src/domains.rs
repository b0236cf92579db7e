//! The three kinds of bisection ([`super::bisect::Domain`]): GPUs inside a node (per-node
//! schedule), nodes along a rail (per-rail schedule), and GPUs of a node against the same GPUs
//! of a known-good partner (pair schedules).

use std::marker::PhantomData;

use super::bisect::{Domain, Job};
use super::round::{Role, RoundBuilder, Subject};
use super::topology::Topology;
use super::verdict::Culprit;

/// One way to slice a suspect into units for [`Sliced`] bisection: the units of one owner
/// (the GPUs of a node, or the nodes along a rail).
pub trait Axis {
    /// The world rank of `unit` of `owner`, if the job has it.
    fn rank(topo: &Topology, owner: usize, unit: usize) -> Option<usize>;
    /// The subject of a group of `units` of `owner`.
    fn subject(owner: usize, units: Vec<usize>) -> Subject;
    /// What `units` of `owner` point at.
    fn culprit(topo: &Topology, owner: usize, units: &[usize]) -> Culprit;
}

/// GPUs of one node, probed on their own (NVLink/PCIe inside the node): the owner is a node,
/// the units its GPUs.
#[derive(Debug, Clone, Copy)]
pub struct InNode;

impl Axis for InNode {
    fn rank(topo: &Topology, node: usize, gpu: usize) -> Option<usize> {
        topo.rank(node, gpu)
    }
    fn subject(node: usize, gpus: Vec<usize>) -> Subject {
        Subject::NodeGpus { node, gpus }
    }
    fn culprit(topo: &Topology, node: usize, gpus: &[usize]) -> Culprit {
        Culprit::gpus(topo, node, gpus)
    }
}

/// Nodes along one rail (GPU `rail` of some nodes): the owner is a rail, the units nodes.
#[derive(Debug, Clone, Copy)]
pub struct AlongRail;

impl Axis for AlongRail {
    fn rank(topo: &Topology, rail: usize, node: usize) -> Option<usize> {
        topo.rank(node, rail)
    }
    fn subject(rail: usize, nodes: Vec<usize>) -> Subject {
        Subject::RailNodes { rail, nodes }
    }
    fn culprit(topo: &Topology, rail: usize, nodes: &[usize]) -> Culprit {
        Culprit::rail_nodes(topo, rail, nodes)
    }
}

/// Bisection along an [`Axis`]: units of one owner probed on their own, a lone unit padded
/// with a known-good unit of the same owner; controls are the same units of a known-good
/// owner (along a rail: the same nodes on a good rail, so that a slow node, slow on every
/// rail, is not taken for a slow rail).
pub struct Sliced<'a, A> {
    topo: &'a Topology,
    good: &'a [usize],
    axis: PhantomData<A>,
}

impl<'a, A: Axis> Sliced<'a, A> {
    /// Bisection in `topo` with `good` the owners found healthy (controls).
    pub fn new(topo: &'a Topology, good: &'a [usize]) -> Self {
        Sliced {
            topo,
            good,
            axis: PhantomData,
        }
    }

    fn ranks(&self, owner: usize, units: &[usize]) -> Option<Vec<usize>> {
        units
            .iter()
            .map(|&u| A::rank(self.topo, owner, u))
            .collect()
    }
}

impl<A: Axis> Domain for Sliced<'_, A> {
    fn topo(&self) -> &Topology {
        self.topo
    }

    fn probe(
        &self,
        job: &Job,
        units: &[usize],
        b: &mut RoundBuilder,
    ) -> Option<(usize, Vec<usize>)> {
        let owner = job.owner;
        let mut layout = units.to_vec();
        if layout.len() < 2 {
            let pad = job.good.iter().copied().find(|&g| {
                !layout.contains(&g) && A::rank(self.topo, owner, g).is_some_and(|r| b.free(&[r]))
            })?;
            layout.push(pad);
        }
        let ranks = self.ranks(owner, &layout)?;
        b.add(ranks, A::subject(owner, layout.clone()), Role::Probe)
            .map(|i| (i, layout))
    }

    fn control(&self, job: &Job, layout: &[usize], b: &mut RoundBuilder) -> Option<usize> {
        self.good
            .iter()
            .filter(|&&m| m != job.owner)
            .find_map(|&m| {
                let ranks = self.ranks(m, layout)?;
                b.add(ranks, A::subject(m, layout.to_vec()), Role::Control)
            })
    }

    fn culprit(&self, job: &Job, units: &[usize]) -> Culprit {
        A::culprit(self.topo, job.owner, units)
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
