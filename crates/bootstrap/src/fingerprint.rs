//! What a process runs, in words every rank can compare: the program, the crate version, each
//! option that shapes the run (sizes, iterations, ops, types, roots, threads and GPUs, modes)
//! and each environment variable that shapes the bootstrap or the run the same way everywhere
//! (`nccl_perf_facts::environment::LAUNCH_WIDE`: `NCCL_PERF_INIT_ROOTS`, `NCCL_TESTS_SPLIT`...).
//! Processes of one launch that differ here would call different collectives or sizes and hang
//! or report wrong numbers; the first difference is named (`rank 3 runs broadcast_perf -b 1M;
//! rank 0 runs all_reduce_perf -b 512M`). The benchmark core writes its own (bench's
//! `options/fingerprint.rs`); here it is compared and taken from peers.

use super::peer_text;
use serde::{Deserialize, Serialize};

/// Most items a peer may send (ours has about 60: the options and the launch-wide variables).
pub const MAX_ITEMS: usize = 96;
/// Longest item a peer may send.
const MAX_ITEM: usize = 200;

/// The program, its version and the run-shaping options, one item each (`-b 1M`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Fingerprint(pub Vec<String>);

impl Fingerprint {
    /// A peer's fingerprint made safe to keep and print: at most [`MAX_ITEMS`] items, each
    /// cleaned of control characters and cut.
    pub fn from_peer(items: Vec<String>) -> Fingerprint {
        Fingerprint(
            items
                .into_iter()
                .take(MAX_ITEMS)
                .map(|i| peer_text::clean(&i, MAX_ITEM))
                .collect(),
        )
    }

    fn item(&self, i: usize) -> &str {
        self.0.get(i).map_or("(none)", String::as_str)
    }
}

/// `None` when rank `theirs_rank` runs what rank `mine_rank` runs; else one line naming the
/// program of each and the first item where they differ.
pub fn difference(
    mine_rank: usize,
    mine: &Fingerprint,
    theirs_rank: usize,
    theirs: &Fingerprint,
) -> Option<String> {
    if mine == theirs {
        return None;
    }
    let n = mine.0.len().max(theirs.0.len());
    let first = (1..n).find(|&i| mine.0.get(i) != theirs.0.get(i));
    let say = |f: &Fingerprint| match first {
        Some(1) => format!("{} version {}", f.item(0), f.item(1)),
        Some(i) => format!("{} {}", f.item(0), f.item(i)),
        None => f.item(0).to_string(),
    };
    Some(format!(
        "rank {theirs_rank} runs {}; rank {mine_rank} runs {}",
        say(theirs),
        say(mine)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_fingerprints_are_bounded_and_clean() {
        let f = Fingerprint::from_peer(vec!["x\ny".repeat(100); 1000]);
        assert_eq!(f.0.len(), MAX_ITEMS);
        assert!(
            f.0.iter()
                .all(|i| !i.contains('\n') && i.chars().count() <= MAX_ITEM + 1)
        );
    }
}
