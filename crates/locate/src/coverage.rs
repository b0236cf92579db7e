//! What a locate run could not see: the parts of the job that none of its groups exercised,
//! and what relative judgement cannot tell, so that "no suspect" is read for what was tested.
//! Worked out from the rounds that ran, not from the schedule's name.

use super::history::RoundRecord;
use super::stats::Thresholds;
use super::topology::Topology;

/// How the groups that ran covered the job.
#[derive(Debug, Default, PartialEq)]
struct Reach {
    /// A group spanned two or more nodes.
    across: bool,
    /// A group of two or more GPUs ran inside one node.
    inside: bool,
    /// The pairs of nodes that ran as a group of exactly those two nodes.
    pairs: Vec<(usize, usize)>,
}

impl Reach {
    fn of(topo: &Topology, history: &[RoundRecord]) -> Reach {
        let mut reach = Reach::default();
        for g in history.iter().flat_map(|r| &r.round.groups) {
            match topo.nodes_of(&g.ranks)[..] {
                [_] if g.ranks.len() >= 2 => reach.inside = true,
                [a, b] => {
                    reach.across = true;
                    reach.pairs.push((a, b));
                }
                [_, _, _, ..] => reach.across = true,
                _ => {}
            }
        }
        reach.pairs.sort_unstable();
        reach.pairs.dedup();
        reach
    }
}

/// The lines after `# locate unseen: `, one per blind spot of this run on `topo`. None for
/// a run without rounds (nothing was tested, and the verdict says why).
pub fn unseen(topo: &Topology, history: &[RoundRecord], th: &Thresholds) -> Vec<String> {
    if history.is_empty() {
        return Vec::new();
    }
    let reach = Reach::of(topo, history);
    let n = topo.nodes();
    let mut out = Vec::new();
    if n >= 2 && !reach.across {
        out.push(
            "the network between nodes (links, NICs, rails): every group ran inside one node; \
             the quick, full or rails schedule tests it"
                .to_string(),
        );
    }
    if topo.rails() >= 2 && !reach.inside {
        out.push(
            "NVLink/PCIe inside nodes: no group ran inside one node, and across nodes the \
             network bounds busbw, so a slow path inside a node shows only when it is slower \
             than the network; the nodes schedule tests it"
                .to_string(),
        );
    }
    let all = n * n.saturating_sub(1) / 2;
    if n >= 3 && reach.across && reach.pairs.len() < all {
        let rounds = if n.is_multiple_of(2) { n - 1 } else { n };
        out.push(format!(
            "links: {} of {all} pairs of nodes ran as a pair; a slow path between two nodes \
             that never did is seen only when it slows a larger group; the full schedule runs \
             every pair ({rounds} rounds)",
            reach.pairs.len()
        ));
    }
    if th.min_busbw.is_none() {
        out.push(
            "a slowdown shared by every group of a shape (one rail's switch under every pair, \
             the whole fabric): groups are judged only against each other; --locate-min-busbw sets \
             an absolute floor"
                .to_string(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::{Phase, Role, RoundBuilder, Subject};

    /// A record of one round of `groups` (world ranks), none measured: coverage reads only
    /// which ranks ran together.
    fn ran(topo: &Topology, groups: &[Vec<usize>]) -> Vec<RoundRecord> {
        let mut b = RoundBuilder::new(topo.world(), Phase::Pairs);
        for (i, g) in groups.iter().enumerate() {
            b.add(g.clone(), Subject::Pair(i, i), Role::Primary);
        }
        let round = b.finish(1).expect("a round");
        vec![RoundRecord {
            round,
            outcomes: Vec::new(),
            judged: Vec::new(),
            wall_s: 0.0,
        }]
    }

    fn starts(lines: &[String]) -> Vec<&str> {
        lines
            .iter()
            .map(|l| l.split(':').next().unwrap_or(""))
            .collect()
    }

    #[test]
    fn groups_inside_nodes_leave_the_network_unseen() {
        let topo = Topology::uniform(3, 2);
        let th = Thresholds::default();
        let lines = unseen(
            &topo,
            &ran(&topo, &[vec![0, 1], vec![2, 3], vec![4, 5]]),
            &th,
        );
        assert_eq!(
            starts(&lines),
            [
                "the network between nodes (links, NICs, rails)",
                "a slowdown shared by every group of a shape (one rail's switch under every pair, the whole fabric)"
            ]
        );
    }

    #[test]
    fn pairs_of_whole_nodes_leave_the_inside_and_the_other_links_unseen() {
        let topo = Topology::uniform(4, 2);
        let th = Thresholds {
            min_busbw: Some(10.0),
            ..Thresholds::default()
        };
        let lines = unseen(
            &topo,
            &ran(&topo, &[vec![0, 1, 2, 3], vec![4, 5, 6, 7]]),
            &th,
        );
        assert_eq!(starts(&lines), ["NVLink/PCIe inside nodes", "links"]);
        assert!(
            lines[1].starts_with("links: 2 of 6 pairs of nodes ran as a pair")
                && lines[1].ends_with("(3 rounds)"),
            "{lines:?}"
        );
    }

    #[test]
    fn every_pair_and_a_floor_leave_nothing_unseen_on_one_gpu_nodes() {
        let topo = Topology::uniform(3, 1);
        let th = Thresholds {
            min_busbw: Some(10.0),
            ..Thresholds::default()
        };
        let mut history = ran(&topo, &[vec![0, 1]]);
        history.extend(ran(&topo, &[vec![1, 2]]));
        history.extend(ran(&topo, &[vec![0, 2]]));
        assert!(unseen(&topo, &history, &th).is_empty());
        assert!(unseen(&topo, &[], &Thresholds::default()).is_empty());
    }
}
