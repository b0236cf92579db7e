//! Rounds and groups: what one step of a schedule runs. A round is a set of disjoint groups of
//! world ranks; each group becomes one communicator (split from the world by its colour, the
//! group's index) and all groups of a round run at once. Ranks in no group sit the round out.

use serde::{Deserialize, Serialize};

use super::topology::Topology;

/// What a group measures: the thing a slow result points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// Every GPU of one node (NVLink/PCIe inside the node).
    Node(usize),
    /// GPU `i` of every node that has one (one rail: the NICs and switches of GPU `i`).
    Rail(usize),
    /// Every GPU of two nodes (the nodes and the network path between them).
    Pair(usize, usize),
    /// Some GPUs of one node (bisection inside a node).
    NodeGpus {
        /// The node.
        node: usize,
        /// Local GPU indices.
        gpus: Vec<usize>,
    },
    /// GPU `rail` of some nodes (bisection along a rail).
    RailNodes {
        /// The rail (local GPU index).
        rail: usize,
        /// The nodes.
        nodes: Vec<usize>,
    },
    /// Whole nodes in a larger group of the job: `nodes` under test beside `fillers`
    /// (known-good nodes that keep the group's size).
    Nodes {
        /// The nodes under test.
        nodes: Vec<usize>,
        /// Known-good nodes beside them.
        fillers: Vec<usize>,
    },
    /// Every node of the job but this one (the job without one node).
    AllBut(usize),
    /// The same GPUs of two nodes (bisection of a node against a partner).
    PairGpus {
        /// The node under test (or the first node of a control).
        node: usize,
        /// Its partner.
        partner: usize,
        /// Local GPU indices, on both nodes.
        gpus: Vec<usize>,
    },
}

impl Subject {
    /// A short description with host names: `node003`, `rail 2`, `node003+node009`,
    /// `node003 GPUs 0-3`, `rail 2 on node001,node004`, `node003+node009 GPUs 4,5`.
    pub fn describe(&self, topo: &Topology) -> String {
        match self {
            Subject::Node(n) => topo.host(*n).to_string(),
            Subject::Rail(i) => format!("rail {i}"),
            Subject::Pair(a, b) => format!("{}+{}", topo.host(*a), topo.host(*b)),
            Subject::NodeGpus { node, gpus } => {
                format!("{} GPU{} {}", topo.host(*node), plural(gpus), list(gpus))
            }
            Subject::RailNodes { rail, nodes } => {
                let hosts: Vec<&str> = nodes.iter().map(|&n| topo.host(n)).collect();
                format!("rail {rail} on {}", shorten(&hosts))
            }
            Subject::Nodes { nodes, fillers } => {
                let tested = hosts(topo, nodes);
                match fillers.len() {
                    0 => tested,
                    k => format!("{tested}+{k} good"),
                }
            }
            Subject::AllBut(n) => format!("all but {}", topo.host(*n)),
            Subject::PairGpus {
                node,
                partner,
                gpus,
            } => format!(
                "{}+{} GPU{} {}",
                topo.host(*node),
                topo.host(*partner),
                plural(gpus),
                list(gpus)
            ),
        }
    }
}

fn plural(v: &[usize]) -> &'static str {
    if v.len() == 1 { "" } else { "s" }
}

/// `0-3`, `1,4,5`, `0-2,6`: sorted indices with runs collapsed.
pub fn list(v: &[usize]) -> String {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j >= i + 2 {
            format!("{}-{}", v[i], v[j])
        } else if j == i + 1 {
            format!("{},{}", v[i], v[j])
        } else {
            v[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

/// `node001..node004` for three or more consecutive nodes, else their host names (at most
/// three, then `+N more`).
pub fn hosts(topo: &Topology, nodes: &[usize]) -> String {
    let run = nodes.windows(2).all(|w| w[1] == w[0] + 1);
    match (nodes.first(), nodes.last()) {
        (Some(&a), Some(&b)) if run && nodes.len() >= 3 => {
            format!("{}..{}", topo.host(a), topo.host(b))
        }
        _ => shorten(&nodes.iter().map(|&n| topo.host(n)).collect::<Vec<_>>()),
    }
}

/// At most three host names, then `+N more`.
fn shorten(hosts: &[&str]) -> String {
    if hosts.len() <= 3 {
        hosts.join(",")
    } else {
        format!("{},+{} more", hosts[..2].join(","), hosts.len() - 2)
    }
}

/// Why a group is in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A group of the schedule's main shape (a whole node, a whole rail, a pair of nodes),
    /// judged against the other groups of its shape; `--locate-min-busbw` applies.
    Primary,
    /// A group that tests a suspect (a re-pairing, a half in a bisection, a re-test).
    Probe,
    /// A group of known-good ranks shaped like a probe: the probe's reference.
    Control,
}

/// The step of a schedule a round belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Every node on its own.
    Nodes,
    /// Every rail on its own.
    Rails,
    /// Pairs of nodes (a matching or a round-robin round).
    Pairs,
    /// Suspects re-paired with known-good nodes.
    Repair,
    /// Bisection of suspects, links re-tested.
    Bisect,
    /// Larger groups of the job (halves, then parts of the slow half beside known-good
    /// nodes) when pairs cannot explain a slow job.
    Halves,
    /// The job without one node, each node in turn (jobs of 4 or 5 nodes, whose halves are
    /// pairs) when pairs cannot explain a slow job.
    LeaveOut,
}

impl Phase {
    /// The word printed in the per-group lines.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Nodes => "nodes",
            Phase::Rails => "rails",
            Phase::Pairs => "pairs",
            Phase::Repair => "repair",
            Phase::Bisect => "bisect",
            Phase::Halves => "halves",
            Phase::LeaveOut => "larger",
        }
    }
}

/// One group of a round: its ranks (ascending), what it tests and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// World ranks, ascending, at least two.
    pub ranks: Vec<usize>,
    /// What a slow result points at.
    pub subject: Subject,
    /// Why the group is here.
    pub role: Role,
}

/// One round: disjoint groups that run at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    /// 1-based position in the run.
    pub index: usize,
    /// The schedule's step.
    pub phase: Phase,
    /// The groups; a group's colour is its index here.
    pub groups: Vec<Group>,
}

/// What a runner cannot run: a round planned wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoundError {
    /// A group of fewer than two ranks.
    #[error("round {round} group {group} has fewer than 2 ranks")]
    TooSmall {
        /// The round's index.
        round: usize,
        /// The group's index.
        group: usize,
    },
    /// A rank beyond the job.
    #[error("round {round} group {group}: rank {rank} >= {world}")]
    OutOfRange {
        /// The round's index.
        round: usize,
        /// The group's index.
        group: usize,
        /// The rank.
        rank: usize,
        /// The number of ranks.
        world: usize,
    },
    /// A rank in two groups.
    #[error("round {round} group {group}: rank {rank} is in two groups")]
    Twice {
        /// The round's index.
        round: usize,
        /// The group's index.
        group: usize,
        /// The rank.
        rank: usize,
    },
}

/// The colour `ncclCommSplit` takes for a rank in no group (`NCCL_SPLIT_NOCOLOR`).
pub const NO_COLOUR: i32 = -1;

impl Round {
    /// Each world rank's split colour: its group's index, or [`NO_COLOUR`].
    pub fn colours(&self, world: usize) -> Vec<i32> {
        let mut c = vec![NO_COLOUR; world];
        for (i, g) in self.groups.iter().enumerate() {
            for &r in &g.ranks {
                if let Some(slot) = c.get_mut(r) {
                    *slot = i32::try_from(i).unwrap_or(i32::MAX);
                }
            }
        }
        c
    }

    /// Checks what a runner relies on: groups of two or more ranks below `world`, no rank in
    /// two groups.
    pub fn validate(&self, world: usize) -> Result<(), RoundError> {
        let mut used = vec![false; world];
        let round = self.index;
        for (group, g) in self.groups.iter().enumerate() {
            if g.ranks.len() < 2 {
                return Err(RoundError::TooSmall { round, group });
            }
            for &rank in &g.ranks {
                match used.get_mut(rank) {
                    None => {
                        return Err(RoundError::OutOfRange {
                            round,
                            group,
                            rank,
                            world,
                        });
                    }
                    Some(true) => {
                        return Err(RoundError::Twice { round, group, rank });
                    }
                    Some(u) => *u = true,
                }
            }
        }
        Ok(())
    }
}

/// Builds a round group by group, refusing groups that would reuse a rank.
#[derive(Debug, Clone)]
pub struct RoundBuilder {
    phase: Phase,
    groups: Vec<Group>,
    used: Vec<bool>,
}

impl RoundBuilder {
    /// An empty round of `phase` for a job of `world` ranks.
    pub fn new(world: usize, phase: Phase) -> RoundBuilder {
        RoundBuilder {
            phase,
            groups: Vec::new(),
            used: vec![false; world],
        }
    }

    /// An empty builder for the same job and phase.
    pub fn empty_like(&self) -> RoundBuilder {
        RoundBuilder::new(self.used.len(), self.phase)
    }

    /// Whether every rank exists and is in no group yet.
    pub fn free(&self, ranks: &[usize]) -> bool {
        ranks.iter().all(|&r| self.used.get(r) == Some(&false))
    }

    /// Adds a group; its index (colour), or `None` when it has fewer than two ranks, repeats a
    /// rank or uses a taken one.
    pub fn add(&mut self, mut ranks: Vec<usize>, subject: Subject, role: Role) -> Option<usize> {
        ranks.sort_unstable();
        let distinct = ranks.windows(2).all(|w| w[0] != w[1]);
        if ranks.len() < 2 || !distinct || !self.free(&ranks) {
            return None;
        }
        for &r in &ranks {
            self.used[r] = true;
        }
        self.groups.push(Group {
            ranks,
            subject,
            role,
        });
        Some(self.groups.len() - 1)
    }

    /// Number of groups so far.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether no group was added.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Removes the groups added after the builder had `len` groups.
    pub fn truncate(&mut self, len: usize) {
        for g in self.groups.drain(len.min(self.groups.len())..) {
            for r in g.ranks {
                self.used[r] = false;
            }
        }
    }

    /// The round, numbered `index`; `None` when it has no group.
    pub fn finish(self, index: usize) -> Option<Round> {
        (!self.groups.is_empty()).then_some(Round {
            index,
            phase: self.phase,
            groups: self.groups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_collapse_runs() {
        assert_eq!(list(&[3, 0, 1, 2]), "0-3");
        assert_eq!(list(&[1, 4, 5]), "1,4,5");
        assert_eq!(list(&[0, 1, 2, 6]), "0-2,6");
        assert_eq!(list(&[]), "");
    }

    #[test]
    fn subjects_name_hosts() {
        let t = Topology::uniform(12, 8);
        assert_eq!(Subject::Pair(2, 8).describe(&t), "node003+node009");
        let g = Subject::NodeGpus {
            node: 0,
            gpus: vec![3],
        };
        assert_eq!(g.describe(&t), "node001 GPU 3");
        let r = Subject::RailNodes {
            rail: 2,
            nodes: vec![0, 1, 2, 3, 4],
        };
        assert_eq!(r.describe(&t), "rail 2 on node001,node002,+3 more");
        let half = Subject::Nodes {
            nodes: vec![0, 1, 2, 3],
            fillers: vec![],
        };
        assert_eq!(half.describe(&t), "node001..node004");
        let part = Subject::Nodes {
            nodes: vec![4, 6],
            fillers: vec![0, 1],
        };
        assert_eq!(part.describe(&t), "node005,node007+2 good");
    }

    #[test]
    fn builder_keeps_groups_disjoint_and_colours_follow() {
        let mut b = RoundBuilder::new(6, Phase::Pairs);
        assert_eq!(
            b.add(vec![1, 0], Subject::Pair(0, 1), Role::Primary),
            Some(0)
        );
        assert_eq!(b.add(vec![1, 2], Subject::Pair(0, 1), Role::Primary), None);
        assert_eq!(b.add(vec![3], Subject::Node(3), Role::Primary), None);
        assert_eq!(b.add(vec![3, 3], Subject::Node(3), Role::Primary), None);
        assert_eq!(b.add(vec![9, 2], Subject::Node(3), Role::Primary), None);
        assert_eq!(
            b.add(vec![4, 5], Subject::Pair(4, 5), Role::Control),
            Some(1)
        );
        b.truncate(1);
        assert!(b.free(&[4, 5]));
        let round = b.finish(1).unwrap();
        assert_eq!(round.colours(6), vec![0, 0, -1, -1, -1, -1]);
        assert!(round.validate(6).is_ok());
        assert!(round.validate(1).is_err());
        assert!(RoundBuilder::new(2, Phase::Nodes).finish(1).is_none());
    }
}
