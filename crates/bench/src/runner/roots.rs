//! Communicator creation at scale: how many NCCL unique ids ("roots") a communicator is created
//! with, and which NCCL rank makes each. With one id (`ncclCommInitRank`), every rank of the
//! job connects to the one process that made it, and that process' bootstrap thread hands out
//! every rank's address; from NCCL 2.23, `ncclCommInitRankScalable` takes several ids, each
//! serving a block of consecutive ranks, so that work is spread over several processes.

use crate::error::{Error, Result};

/// The variable that sets the number of roots.
pub const ENV: &str = crate::environment::INIT_ROOTS.name;

/// From this many NCCL ranks on, `auto` creates communicators with several roots.
pub const THRESHOLD: usize = 64;

/// Ranks per root above [`THRESHOLD`] (`auto`).
pub const RANKS_PER_ROOT: usize = 32;

/// How communicators of `nranks` ranks are created: the number of roots, and a note for stderr
/// where a number asked for cannot be used. `setting` is the variable's value (`None`: unset),
/// `scalable` whether the loaded NCCL has `ncclCommInitRankScalable` (2.23 or later).
pub fn count(
    nranks: usize,
    setting: Option<&str>,
    scalable: bool,
) -> Result<(usize, Option<String>)> {
    let nranks = nranks.max(1);
    let asked = match setting.map(str::trim) {
        None | Some("") | Some("auto") => None,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(Error::Usage(format!(
                    "{ENV}='{}' is neither auto nor a number of roots (1 or more)",
                    crate::bootstrap::peer_text::clean(v, 40)
                )));
            }
        },
    };
    let wanted = match asked {
        Some(n) => n.min(nranks),
        None if nranks >= THRESHOLD => nranks.div_ceil(RANKS_PER_ROOT),
        None => 1,
    };
    if wanted > 1 && !scalable {
        let note = asked.map(|n| {
            format!(
                "{ENV}={n}: this NCCL has no ncclCommInitRankScalable (NCCL 2.23 or later); \
                 communicators are created with one root"
            )
        });
        return Ok((1, note));
    }
    Ok((wanted, None))
}

/// The NCCL rank that makes root `j` of `roots` for `nranks` ranks: the first rank of block
/// `j`, blocks being consecutive ranks, the first `nranks % roots` of them one rank longer
/// (the placement NCCL's documentation gives, so each root serves the block it starts).
pub fn root_rank(j: usize, nranks: usize, roots: usize) -> usize {
    let roots = roots.clamp(1, nranks.max(1));
    let (per, longer) = (nranks / roots, nranks % roots);
    if j < longer {
        j * (per + 1)
    } else {
        longer * (per + 1) + (j - longer) * per
    }
}

/// The roots among NCCL ranks `first ..first + held`, as (root number, rank).
pub fn held(first: usize, held: usize, nranks: usize, roots: usize) -> Vec<(usize, usize)> {
    (0..roots)
        .map(|j| (j, root_rank(j, nranks, roots)))
        .filter(|(_, r)| (first..first + held).contains(r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_uses_one_root_below_the_threshold_then_one_per_block() {
        assert_eq!(count(8, None, true).unwrap(), (1, None));
        assert_eq!(count(63, Some("auto"), true).unwrap(), (1, None));
        assert_eq!(count(64, None, true).unwrap(), (2, None));
        assert_eq!(count(4096, None, true).unwrap(), (128, None));
        assert_eq!(count(4097, None, true).unwrap(), (129, None));
        // Without ncclCommInitRankScalable, auto quietly keeps one root.
        assert_eq!(count(4096, None, false).unwrap(), (1, None));
    }

    #[test]
    fn a_number_is_obeyed_within_the_ranks_and_said_when_it_cannot_be() {
        assert_eq!(count(8, Some("4"), true).unwrap(), (4, None));
        assert_eq!(count(8, Some(" 1 "), true).unwrap(), (1, None));
        assert_eq!(count(8, Some("100"), true).unwrap(), (8, None));
        let (n, note) = count(8, Some("4"), false).unwrap();
        assert_eq!(n, 1);
        assert!(note.unwrap().contains("NCCL 2.23"));
        for bad in ["0", "-2", "many", "4x"] {
            let e = count(8, Some(bad), true).unwrap_err();
            assert!(e.to_string().contains(ENV), "{e}");
            assert_eq!(e.exit_code(), Error::Usage(String::new()).exit_code());
        }
    }

    #[test]
    fn roots_start_the_blocks_nccl_documents() {
        // 10 ranks, 3 roots: blocks of 4, 3, 3 start at 0, 4, 7.
        let r: Vec<usize> = (0..3).map(|j| root_rank(j, 10, 3)).collect();
        assert_eq!(r, [0, 4, 7]);
        // Even blocks.
        let r: Vec<usize> = (0..4).map(|j| root_rank(j, 8, 4)).collect();
        assert_eq!(r, [0, 2, 4, 6]);
        // As many roots as ranks, and one.
        assert_eq!(
            (0..5).map(|j| root_rank(j, 5, 5)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(root_rank(0, 5, 1), 0);
        // Every root is a distinct rank, for any shape.
        for n in 1..70 {
            for k in 1..=n {
                let mut r: Vec<usize> = (0..k).map(|j| root_rank(j, n, k)).collect();
                assert!(r.iter().all(|x| *x < n));
                r.dedup();
                assert_eq!(r.len(), k, "{n} ranks, {k} roots");
            }
        }
    }

    #[test]
    fn each_process_makes_the_roots_of_its_own_ranks() {
        // 8 ranks, 2 GPUs a process, 3 roots at ranks 0, 3, 6.
        assert_eq!(held(0, 2, 8, 3), [(0, 0)]);
        assert_eq!(held(2, 2, 8, 3), [(1, 3)]);
        assert_eq!(held(4, 2, 8, 3), []);
        assert_eq!(held(6, 2, 8, 3), [(2, 6)]);
    }
}
