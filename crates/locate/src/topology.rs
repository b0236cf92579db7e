//! Who is where: the job's nodes (hosts), their GPUs (world rank, CUDA device, PCI bus id) and
//! the rails (GPU *i* of every node). Locate names culprits through this map.

use serde::{Deserialize, Serialize};

/// One GPU of a node: the world rank that drives it, its CUDA device index and PCI bus id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// World rank.
    pub rank: usize,
    /// CUDA device index on its host.
    pub device: i32,
    /// PCI bus id, e.g. `0000:1b:00.0` (empty when unknown).
    pub pci: String,
}

/// One node: a host name (NCCL's notion of host: `NCCL_HOSTID` or the host name) and its GPUs
/// in local-rank order. GPU *i* of a node is on rail *i*.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Host name as printed in verdicts.
    pub host: String,
    /// GPUs in local order.
    pub gpus: Vec<Gpu>,
    /// The machine it runs on: the kernel's boot id, shared by nodes that are containers or
    /// posing hosts on one machine; empty when unknown (then it is taken for its own machine).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine: String,
}

/// Why a set of nodes is not a topology.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A node without GPUs.
    #[error("node {host} has no GPU")]
    NoGpu {
        /// Its host name.
        host: String,
    },
    /// A rank on two GPUs.
    #[error("rank {rank} appears twice")]
    Twice {
        /// The rank.
        rank: usize,
    },
    /// A rank beyond the number of GPUs.
    #[error("rank {rank} is not below the number of GPUs ({world})")]
    OutOfRange {
        /// The rank.
        rank: usize,
        /// The number of GPUs.
        world: usize,
    },
}

/// The job's nodes and GPUs, with lookups from a world rank to its node and local index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<Node>,
    /// Per world rank: (node index, local index).
    place: Vec<(usize, usize)>,
}

impl Topology {
    /// A topology from its nodes. Ranks must be exactly `0..world` once each, and every node
    /// must have a GPU.
    pub fn new(nodes: Vec<Node>) -> Result<Topology, TopologyError> {
        let world: usize = nodes.iter().map(|n| n.gpus.len()).sum();
        let mut place = vec![None; world];
        for (ni, node) in nodes.iter().enumerate() {
            if node.gpus.is_empty() {
                return Err(TopologyError::NoGpu {
                    host: node.host.clone(),
                });
            }
            for (li, gpu) in node.gpus.iter().enumerate() {
                match place.get_mut(gpu.rank) {
                    Some(slot @ None) => *slot = Some((ni, li)),
                    Some(Some(_)) => return Err(TopologyError::Twice { rank: gpu.rank }),
                    None => {
                        return Err(TopologyError::OutOfRange {
                            rank: gpu.rank,
                            world,
                        });
                    }
                }
            }
        }
        let place = place.into_iter().flatten().collect();
        Ok(Topology { nodes, place })
    }

    /// What the runner knows after gathering one record per world rank, in rank order: host,
    /// CUDA device and PCI bus id. Nodes come in the order of their first rank; a node's GPUs
    /// in rank order.
    pub fn from_ranks(ranks: &[(String, i32, String)]) -> Result<Topology, TopologyError> {
        let mut nodes: Vec<Node> = Vec::new();
        for (rank, (host, device, pci)) in ranks.iter().enumerate() {
            let gpu = Gpu {
                rank,
                device: *device,
                pci: pci.clone(),
            };
            match nodes.iter_mut().find(|n| &n.host == host) {
                Some(n) => n.gpus.push(gpu),
                None => nodes.push(Node {
                    host: host.clone(),
                    gpus: vec![gpu],
                    machine: String::new(),
                }),
            }
        }
        Topology::new(nodes)
    }

    /// `nodes` hosts named `node001`, `node002`, ... with `gpus` GPUs each, ranks node by node,
    /// devices `0..gpus` and made-up PCI ids: the shape of the model cluster.
    pub fn uniform(nodes: usize, gpus: usize) -> Topology {
        let width = nodes.to_string().len().max(3);
        let nodes = (0..nodes)
            .map(|n| Node {
                host: format!("node{:0width$}", n + 1),
                gpus: (0..gpus)
                    .map(|g| Gpu {
                        rank: n * gpus + g,
                        device: g as i32,
                        pci: format!("0000:{:02x}:00.0", 0x18 + 0x10 * g),
                    })
                    .collect(),
                machine: String::new(),
            })
            .collect();
        // Ranks are 0..nodes*gpus once each by construction.
        Topology::new(nodes).unwrap_or(Topology {
            nodes: Vec::new(),
            place: Vec::new(),
        })
    }

    /// The same topology with each node's machine: the `machines` entry (a kernel boot id) of
    /// its first rank, indexed by world rank. Missing entries leave a node's machine unknown.
    pub fn with_machines(mut self, machines: &[String]) -> Topology {
        for node in &mut self.nodes {
            if let Some(m) = node.gpus.first().and_then(|g| machines.get(g.rank)) {
                node.machine = m.clone();
            }
        }
        self
    }

    /// The nodes that share a machine with another node of the job: groups of two or more
    /// node indices with one known machine, in the order of their first node.
    pub fn shared_machines(&self) -> Vec<Vec<usize>> {
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if node.machine.is_empty() {
                continue;
            }
            match groups.iter_mut().find(|(m, _)| *m == node.machine) {
                Some((_, nodes)) => nodes.push(i),
                None => groups.push((&node.machine, vec![i])),
            }
        }
        groups
            .into_iter()
            .map(|(_, nodes)| nodes)
            .filter(|nodes| nodes.len() > 1)
            .collect()
    }

    /// Whether every node of a job of two or more runs on one machine (ranks posing as hosts).
    pub fn one_machine(&self) -> bool {
        self.nodes() > 1 && self.shared_machines().first().map(Vec::len) == Some(self.nodes())
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Number of ranks (GPUs) in the job.
    pub fn world(&self) -> usize {
        self.place.len()
    }

    /// Node `i` (`None` past the end).
    pub fn node(&self, i: usize) -> Option<&Node> {
        self.nodes.get(i)
    }

    /// Every node, in order.
    pub fn all_nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Host name of node `i` (`?` past the end).
    pub fn host(&self, i: usize) -> &str {
        self.nodes.get(i).map_or("?", |n| n.host.as_str())
    }

    /// GPUs of node `i` (0 past the end).
    pub fn gpus_on(&self, i: usize) -> usize {
        self.nodes.get(i).map_or(0, |n| n.gpus.len())
    }

    /// The number of rails: the most GPUs any node has.
    pub fn rails(&self) -> usize {
        self.nodes.iter().map(|n| n.gpus.len()).max().unwrap_or(0)
    }

    /// The world rank of GPU `local` of node `node`.
    pub fn rank(&self, node: usize, local: usize) -> Option<usize> {
        self.nodes.get(node)?.gpus.get(local).map(|g| g.rank)
    }

    /// The GPU record of GPU `local` of node `node`.
    pub fn gpu(&self, node: usize, local: usize) -> Option<&Gpu> {
        self.nodes.get(node)?.gpus.get(local)
    }

    /// The node of world rank `rank`.
    pub fn node_of(&self, rank: usize) -> Option<usize> {
        self.place.get(rank).map(|p| p.0)
    }

    /// The local index (rail) of world rank `rank`.
    pub fn local_of(&self, rank: usize) -> Option<usize> {
        self.place.get(rank).map(|p| p.1)
    }

    /// The distinct nodes the ranks are on, ascending.
    pub fn nodes_of(&self, ranks: &[usize]) -> Vec<usize> {
        let mut v: Vec<usize> = ranks.iter().filter_map(|&r| self.node_of(r)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The world ranks of GPUs `locals` on node `node`; `None` when one is missing.
    pub fn ranks_at(&self, node: usize, locals: &[usize]) -> Option<Vec<usize>> {
        locals.iter().map(|&l| self.rank(node, l)).collect()
    }

    /// Every world rank of node `node`.
    pub fn ranks_of(&self, node: usize) -> Vec<usize> {
        self.nodes
            .get(node)
            .map(|n| n.gpus.iter().map(|g| g.rank).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_places_ranks_node_by_node() {
        let t = Topology::uniform(3, 4);
        assert_eq!((t.nodes(), t.world(), t.rails()), (3, 12, 4));
        assert_eq!(t.host(0), "node001");
        assert_eq!(t.rank(2, 1), Some(9));
        assert_eq!((t.node_of(9), t.local_of(9)), (Some(2), Some(1)));
        assert_eq!(t.nodes_of(&[9, 0, 1]), vec![0, 2]);
        assert_eq!(t.gpu(1, 2).map(|g| g.pci.as_str()), Some("0000:38:00.0"));
        assert_eq!(t.rank(3, 0), None);
        assert_eq!(Topology::uniform(1000, 1).host(999), "node1000");
    }

    #[test]
    fn from_ranks_groups_by_host_in_first_seen_order() {
        let r = |h: &str, d| (h.to_string(), d, String::new());
        let t = Topology::from_ranks(&[r("b", 0), r("a", 0), r("b", 1), r("a", 1)]).unwrap();
        assert_eq!(t.host(0), "b");
        assert_eq!(t.ranks_of(0), vec![0, 2]);
        assert_eq!(t.ranks_of(1), vec![1, 3]);
        assert_eq!(t.local_of(3), Some(1));
    }

    #[test]
    fn nodes_on_one_machine_are_grouped() {
        let m = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let t = Topology::uniform(5, 1).with_machines(&m(&["a", "b", "a", "", "b"]));
        assert_eq!(t.shared_machines(), vec![vec![0, 2], vec![1, 4]]);
        assert!(!t.one_machine());
        // Unknown machines are never taken for one.
        let t = Topology::uniform(3, 1).with_machines(&m(&["", "", ""]));
        assert!(t.shared_machines().is_empty() && !t.one_machine());
        // A node's machine is its first rank's.
        let t = Topology::uniform(2, 2).with_machines(&m(&["x", "y", "x", "z"]));
        assert_eq!(t.shared_machines(), vec![vec![0, 1]]);
        assert!(t.one_machine());
        assert!(
            !Topology::uniform(1, 2)
                .with_machines(&m(&["x", "x"]))
                .one_machine()
        );
    }

    #[test]
    fn bad_rank_sets_are_refused() {
        let gpu = |rank| Gpu {
            rank,
            device: 0,
            pci: String::new(),
        };
        let node = |gpus| Node {
            host: "h".into(),
            gpus,
            machine: String::new(),
        };
        assert!(Topology::new(vec![node(vec![gpu(0), gpu(0)])]).is_err());
        assert!(Topology::new(vec![node(vec![gpu(5)])]).is_err());
        assert!(Topology::new(vec![node(vec![])]).is_err());
    }
}
