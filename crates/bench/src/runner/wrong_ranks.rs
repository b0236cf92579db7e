//! Where wrong data was seen: the lowest and highest rank whose GPU counted mismatches and how
//! many ranks did at once, reduced over every process only when a validation found any (a
//! healthy run pays nothing), and said with the ranks' hosts at world rank 0 (a stderr line, and
//! the node verdicts of `--health`).

use crate::bootstrap::Reduce;
use crate::error::Result;
use crate::report::DeviceInfo;
use crate::runner::sync::ThreadGroup;

/// The ranks (device-line numbering: world rank · T · G + local index) that had wrong data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WrongRanks {
    /// The lowest rank with wrong data.
    pub first: u64,
    /// The highest.
    pub last: u64,
    /// The most ranks with wrong data in one validation.
    pub ranks: u64,
}

/// Where wrong data was seen, as world rank 0 says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WrongPlace {
    /// The ranks in words ([`WrongRanks::describe`]).
    pub text: String,
    /// The hosts that may hold it ([`WrongRanks::hosts`]).
    pub hosts: Vec<String>,
}

/// A rank number no process has (nothing seen by this thread).
const NONE_LOW: f64 = u64::MAX as f64;

impl WrongRanks {
    /// This thread's GPUs, as `(rank, mismatches)`: the ones with wrong data.
    pub fn of_thread(counts: &[(u64, u64)]) -> Option<WrongRanks> {
        let bad = counts.iter().filter(|(_, n)| *n > 0).map(|(r, _)| *r);
        let first = bad.clone().min()?;
        Some(WrongRanks {
            first,
            last: bad.clone().max().unwrap_or(first),
            ranks: bad.count() as u64,
        })
    }

    /// Every thread's and process' `mine` combined (all threads of all processes call it, as
    /// for any reduction); `None` when nobody had wrong data.
    pub fn reduced(
        group: &ThreadGroup,
        tid: usize,
        mine: Option<WrongRanks>,
    ) -> Result<Option<WrongRanks>> {
        let (f, l, n) = mine.map_or((NONE_LOW, -1.0, 0.0), |w| {
            (w.first as f64, w.last as f64, w.ranks as f64)
        });
        let first = group.allreduce(tid, f, Reduce::Min)?;
        let last = group.allreduce(tid, l, Reduce::Max)?;
        let ranks = group.allreduce(tid, n, Reduce::Sum)?;
        Ok((first < NONE_LOW && last >= first).then(|| WrongRanks {
            first: first as u64,
            last: last as u64,
            ranks: ranks.max(1.0) as u64,
        }))
    }

    /// `a` and `b` together (across measurements).
    pub fn merge(a: Option<WrongRanks>, b: Option<WrongRanks>) -> Option<WrongRanks> {
        match (a, b) {
            (Some(a), Some(b)) => Some(WrongRanks {
                first: a.first.min(b.first),
                last: a.last.max(b.last),
                ranks: a.ranks.max(b.ranks),
            }),
            (a, b) => a.or(b),
        }
    }

    /// Said with the device lines `infos` (world rank 0 has them; elsewhere they are empty).
    pub fn place(&self, infos: &[DeviceInfo]) -> WrongPlace {
        WrongPlace {
            text: self.describe(infos),
            hosts: self.hosts(infos),
        }
    }

    /// In words, with each named rank's host from the device lines `infos`:
    /// `rank 3 (node7)`, or `up to 2 ranks at once between rank 3 (node7) and rank 12 (node9)`.
    pub fn describe(&self, infos: &[DeviceInfo]) -> String {
        let named = |r: u64| match host_of(infos, r) {
            Some(h) => format!("rank {r} ({h})"),
            None => format!("rank {r}"),
        };
        if self.first == self.last {
            return named(self.first);
        }
        format!(
            "up to {} ranks at once between {} and {}",
            self.ranks,
            named(self.first),
            named(self.last)
        )
    }

    /// The hosts of the ranks from the first to the last named, in rank order, each once: the
    /// nodes that may hold the wrong data (exactly those when one rank, or a contiguous run of
    /// ranks, had it).
    pub fn hosts(&self, infos: &[DeviceInfo]) -> Vec<String> {
        let rank = |r: u64| i64::try_from(r).unwrap_or(i64::MAX);
        crate::report::hosts_of_ranks(infos, rank(self.first), rank(self.last))
    }
}

/// The host of rank `r` in the device lines.
fn host_of(infos: &[DeviceInfo], r: u64) -> Option<&str> {
    infos
        .iter()
        .find(|d| u64::try_from(d.rank) == Ok(r))
        .map(|d| d.hostname.as_str())
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(rank: i64, host: &str) -> DeviceInfo {
        DeviceInfo {
            rank,
            group: 0,
            pid: 1,
            hostname: host.into(),
            device: 0,
            pci_domain: 0,
            pci_bus: 0,
            pci_device: 0,
            name: "GPU".into(),
        }
    }

    #[test]
    fn a_thread_names_its_gpus_with_wrong_data() {
        assert_eq!(WrongRanks::of_thread(&[(4, 0), (5, 0)]), None);
        let w = WrongRanks::of_thread(&[(4, 0), (5, 3), (6, 0), (7, 1)]);
        assert_eq!(
            w,
            Some(WrongRanks {
                first: 5,
                last: 7,
                ranks: 2
            })
        );
    }

    #[test]
    fn one_rank_is_named_with_its_host_and_a_range_with_both_ends() {
        let infos: Vec<DeviceInfo> = (0..16)
            .map(|r| info(r, if r < 8 { "node1" } else { "node2" }))
            .collect();
        let one = WrongRanks {
            first: 3,
            last: 3,
            ranks: 1,
        };
        assert_eq!(one.describe(&infos), "rank 3 (node1)");
        assert_eq!(one.hosts(&infos), ["node1"]);
        let two = WrongRanks::merge(
            Some(one),
            Some(WrongRanks {
                first: 12,
                last: 12,
                ranks: 1,
            }),
        )
        .unwrap();
        assert_eq!(
            two.describe(&infos),
            "up to 1 ranks at once between rank 3 (node1) and rank 12 (node2)"
        );
        assert_eq!(two.hosts(&infos), ["node1", "node2"]);
        // A rank the device lines do not have (another group's numbering) is named bare.
        let far = WrongRanks {
            first: 40,
            last: 40,
            ranks: 1,
        };
        assert_eq!(far.describe(&infos), "rank 40");
        assert!(far.hosts(&infos).is_empty());
    }

    #[test]
    fn threads_reduce_to_the_ranks_any_of_them_saw() {
        let job = crate::runner::fake_job::FakeJob::new(0, 1, |t| Ok(vec![t]));
        let group = ThreadGroup::new(3, &job);
        let seen = [
            None,
            WrongRanks::of_thread(&[(2, 0), (3, 9)]),
            WrongRanks::of_thread(&[(4, 1), (5, 1)]),
        ];
        let all: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|tid| {
                    let g = &group;
                    s.spawn(move || WrongRanks::reduced(g, tid, seen[tid]).ok().flatten())
                })
                .collect();
            hs.into_iter().map(|h| h.join().ok().flatten()).collect()
        });
        let want = Some(WrongRanks {
            first: 3,
            last: 5,
            ranks: 3,
        });
        assert_eq!(all, [want, want, want]);
        // Nobody saw any: nothing, on every thread.
        let none: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|tid| {
                    let g = &group;
                    s.spawn(move || WrongRanks::reduced(g, tid, None))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().ok().and_then(|r| r.ok()))
                .collect()
        });
        assert_eq!(none, [Some(None), Some(None), Some(None)]);
    }
}
