//! Verdicts: the culprits locate names (hosts, GPUs with device and PCI id, rails, links) and
//! the evidence behind each.

use serde::{Deserialize, Serialize};

use super::judge::State;
use super::round::list;
use super::topology::Topology;

/// What a verdict points at.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Culprit {
    /// A whole node.
    Node {
        /// Node index.
        node: usize,
    },
    /// Some GPUs of a node (not all of them).
    Gpus {
        /// Node index.
        node: usize,
        /// Local GPU indices.
        gpus: Vec<usize>,
    },
    /// A whole rail: GPU `rail` of every node.
    Rail {
        /// Local GPU index.
        rail: usize,
    },
    /// A rail on some of its nodes (more than one, not all).
    RailNodes {
        /// Local GPU index.
        rail: usize,
        /// Node indices.
        nodes: Vec<usize>,
    },
    /// The network path between two nodes that are fine with others.
    Link {
        /// The lower node index.
        a: usize,
        /// The higher node index.
        b: usize,
    },
    /// A node or its link to `other`: the pair was slow twice, but `node`'s readings with
    /// other partners were too close to the threshold to call it clean.
    NodeOrLink {
        /// The node whose other readings are borderline.
        node: usize,
        /// The other end of the link.
        other: usize,
    },
    /// Two nodes or their link, which nothing tells apart (a job of two nodes).
    Pair {
        /// The lower node index.
        a: usize,
        /// The higher node index.
        b: usize,
    },
}

impl Culprit {
    /// GPUs `gpus` of `node`; the whole node when they are all of its GPUs.
    pub fn gpus(topo: &Topology, node: usize, gpus: &[usize]) -> Culprit {
        let mut gpus = gpus.to_vec();
        gpus.sort_unstable();
        gpus.dedup();
        if gpus.len() >= topo.gpus_on(node) {
            Culprit::Node { node }
        } else {
            Culprit::Gpus { node, gpus }
        }
    }

    /// Rail `rail` on `nodes`: the whole rail when they are all the nodes that have it, one
    /// GPU when they are one node.
    pub fn rail_nodes(topo: &Topology, rail: usize, nodes: &[usize]) -> Culprit {
        let mut nodes = nodes.to_vec();
        nodes.sort_unstable();
        nodes.dedup();
        let on_rail = (0..topo.nodes())
            .filter(|&n| topo.rank(n, rail).is_some())
            .count();
        match nodes.as_slice() {
            [n] => Culprit::gpus(topo, *n, &[rail]),
            _ if nodes.len() >= on_rail => Culprit::Rail { rail },
            _ => Culprit::RailNodes { rail, nodes },
        }
    }

    /// The link between `a` and `b`, lower index first.
    pub fn link(a: usize, b: usize) -> Culprit {
        Culprit::Link {
            a: a.min(b),
            b: a.max(b),
        }
    }

    /// The two nodes `a` and `b` or their link, lower index first.
    pub fn pair(a: usize, b: usize) -> Culprit {
        Culprit::Pair {
            a: a.min(b),
            b: a.max(b),
        }
    }

    /// How verdict lines name it: `node017 (all 8 GPUs)`, `node017 GPU 3 (device 3, PCI
    /// 0000:48:00.0)`, `rail 3 (GPU 3 of every node)`, `link node004-node009`, ...
    pub fn describe(&self, topo: &Topology) -> String {
        match self {
            Culprit::Node { node } => {
                let g = topo.gpus_on(*node);
                let gpus = if g == 1 {
                    "1 GPU".into()
                } else {
                    format!("all {g} GPUs")
                };
                format!("{} ({gpus})", topo.host(*node))
            }
            Culprit::Gpus { node, gpus } => {
                let found: Vec<_> = gpus.iter().filter_map(|&g| topo.gpu(*node, g)).collect();
                let devices: Vec<String> = found.iter().map(|g| g.device.to_string()).collect();
                let pcis: Vec<&str> = found
                    .iter()
                    .map(|g| g.pci.as_str())
                    .filter(|p| !p.is_empty())
                    .collect();
                let pci = if pcis.is_empty() {
                    String::new()
                } else {
                    format!(", PCI {}", pcis.join(" "))
                };
                let (gw, dw) = if gpus.len() == 1 {
                    ("GPU", "device")
                } else {
                    ("GPUs", "devices")
                };
                format!(
                    "{} {gw} {} ({dw} {}{pci})",
                    topo.host(*node),
                    list(gpus),
                    devices.join(",")
                )
            }
            Culprit::Rail { rail } => format!("rail {rail} (GPU {rail} of every node)"),
            Culprit::RailNodes { rail, nodes } => {
                let hosts: Vec<&str> = nodes.iter().map(|&n| topo.host(n)).collect();
                format!("rail {rail} on {}", hosts.join(","))
            }
            Culprit::Link { a, b } => format!("link {}-{}", topo.host(*a), topo.host(*b)),
            Culprit::NodeOrLink { node, other } => format!(
                "{} or the {}-{} link",
                topo.host(*node),
                topo.host(*node.min(other)),
                topo.host(*node.max(other))
            ),
            Culprit::Pair { a, b } => format!(
                "{} or {} or their link (two nodes: nothing tells them apart)",
                topo.host(*a),
                topo.host(*b)
            ),
        }
    }

    /// The host names it involves.
    pub fn hosts(&self, topo: &Topology) -> Vec<String> {
        let nodes: Vec<usize> = match self {
            Culprit::Node { node } | Culprit::Gpus { node, .. } => vec![*node],
            Culprit::Rail { .. } => Vec::new(),
            Culprit::RailNodes { nodes, .. } => nodes.clone(),
            Culprit::Link { a, b } | Culprit::Pair { a, b } => vec![*a, *b],
            Culprit::NodeOrLink { node, other } => vec![*node, *other],
        };
        nodes.iter().map(|&n| topo.host(n).to_string()).collect()
    }
}

/// One culprit named, how it misbehaved and why locate says so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// What is named.
    pub culprit: Culprit,
    /// Slow, hung or in error.
    pub state: State,
    /// Its busbw as a multiple of the reference, where measured.
    pub ratio: Option<f64>,
    /// Named because it was below `--locate-min-busbw` rather than against the others.
    pub below_min: bool,
    /// The measurements behind it, one line.
    pub evidence: String,
    /// The rounds that show it.
    pub rounds: Vec<usize>,
}

/// `0.42x`: a ratio for the evidence text.
pub fn times(r: f64) -> String {
    format!("{r:.2}x")
}

/// `0.40-0.44x` (or `0.42x` when both ends are equal): the range of some ratios.
pub fn span(ratios: &[f64]) -> String {
    let v = super::stats::sorted(ratios);
    match (v.first(), v.last()) {
        (Some(lo), Some(hi)) if format!("{lo:.2}") == format!("{hi:.2}") => times(*lo),
        (Some(lo), Some(hi)) => format!("{lo:.2}-{hi:.2}x"),
        _ => "none".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_hosts_devices_and_pci_ids() {
        let t = Topology::uniform(20, 8);
        assert_eq!(
            Culprit::gpus(&t, 16, &[3]).describe(&t),
            "node017 GPU 3 (device 3, PCI 0000:48:00.0)"
        );
        assert_eq!(
            Culprit::gpus(&t, 16, &(0..8).collect::<Vec<_>>()),
            Culprit::Node { node: 16 }
        );
        assert_eq!(
            Culprit::Node { node: 16 }.describe(&t),
            "node017 (all 8 GPUs)"
        );
        assert_eq!(Culprit::link(9, 3), Culprit::Link { a: 3, b: 9 });
        assert_eq!(Culprit::link(9, 3).describe(&t), "link node004-node010");
        assert_eq!(
            Culprit::rail_nodes(&t, 2, &(0..20).collect::<Vec<_>>()),
            Culprit::Rail { rail: 2 }
        );
        assert_eq!(
            Culprit::rail_nodes(&t, 2, &[5]),
            Culprit::Gpus {
                node: 5,
                gpus: vec![2]
            }
        );
        assert_eq!(Culprit::pair(1, 0).hosts(&t), ["node001", "node002"]);
        let either = Culprit::NodeOrLink { node: 3, other: 2 };
        assert_eq!(either.describe(&t), "node004 or the node003-node004 link");
        assert_eq!(either.hosts(&t), ["node004", "node003"]);
    }

    #[test]
    fn spans_of_ratios() {
        assert_eq!(span(&[0.44, 0.40, 0.42]), "0.40-0.44x");
        assert_eq!(span(&[1.0, 1.001]), "1.00x");
        assert_eq!(span(&[]), "none");
    }
}
