//! Each split group's own result (`NCCL_TESTS_SPLIT`): every benchmark thread kept its own time
//! of every measurement (`worker/`); here a process folds its threads together, world rank 0
//! gathers every process' and reduces each group's times over the group's ranks alone, as `-a`
//! reduces the table's over the job: `report::split` prints and stores the result.

use super::worker::GroupSample;
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use crate::options::Average;
use crate::report::split::SplitGroup;
use serde::{Deserialize, Serialize};

/// One process' measurements, its threads folded together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Folded {
    /// Its split colour.
    pub color: i64,
    /// Its world rank.
    pub rank: usize,
    /// The world ranks of its GPUs.
    pub gpus: Vec<usize>,
    /// Its threads.
    pub threads: usize,
    /// Per measurement: the bytes that define algbw, and the busbw factor.
    pub terms: Vec<(f64, f64)>,
    /// Per measurement: the sum, minimum and maximum of its threads' times, and thread 0's
    /// (seconds).
    pub times: Vec<[f64; 4]>,
}

/// Folds the threads' samples (thread 0 first) of process `rank` of colour `color`.
pub fn fold(color: i64, rank: usize, gpus: Vec<usize>, threads: &[Vec<GroupSample>]) -> Folded {
    let n = threads.iter().map(Vec::len).min().unwrap_or(0);
    let terms = (0..n)
        .map(|i| (threads[0][i].bytes, threads[0][i].factor))
        .collect();
    let times = (0..n)
        .map(|i| {
            let t = threads.iter().map(|s| s[i].seconds);
            [
                t.clone().sum(),
                t.clone().fold(f64::INFINITY, f64::min),
                t.fold(f64::NEG_INFINITY, f64::max),
                threads[0][i].seconds,
            ]
        })
        .collect();
    Folded {
        color,
        rank,
        gpus,
        threads: threads.len(),
        terms,
        times,
    }
}

/// Each colour's result from every process' folded measurements, colours in ascending order.
pub fn combine(processes: &[Folded], average: Average) -> Vec<SplitGroup> {
    let mut colors: Vec<i64> = processes.iter().map(|p| p.color).collect();
    colors.sort_unstable();
    colors.dedup();
    colors
        .into_iter()
        .map(|color| {
            let mut members: Vec<&Folded> = processes.iter().filter(|p| p.color == color).collect();
            members.sort_by_key(|p| p.rank);
            let n = members.iter().map(|p| p.times.len()).min().unwrap_or(0);
            let threads: usize = members.iter().map(|p| p.threads).sum();
            let seconds: Vec<f64> = (0..n)
                .map(|i| {
                    let at = members.iter().map(|p| p.times[i]);
                    match average {
                        Average::Rank0 => members[0].times[i][3],
                        Average::Mean => at.map(|t| t[0]).sum::<f64>() / threads.max(1) as f64,
                        Average::Min => at.map(|t| t[1]).fold(f64::INFINITY, f64::min),
                        Average::Max => at.map(|t| t[2]).fold(f64::NEG_INFINITY, f64::max),
                    }
                })
                .collect();
            let bus_bw: Vec<f64> = seconds
                .iter()
                .zip(&members[0].terms)
                .map(|(&t, &(bytes, factor))| bytes / 1e9 / t * factor)
                .collect();
            let mut ranks: Vec<usize> = members.iter().flat_map(|p| p.gpus.clone()).collect();
            ranks.sort_unstable();
            SplitGroup {
                color,
                ranks,
                average_bus_bw: crate::report::numbers::average(
                    bus_bw.iter().sum(),
                    bus_bw.len() as u64,
                ),
                time: seconds.iter().map(|t| t * 1e6).collect(),
                bus_bw,
            }
        })
        .collect()
}

/// Gathers every process' folded measurements on world rank 0 and combines them there (empty
/// elsewhere).
pub fn gather(boot: &dyn Bootstrap, mine: &Folded, average: Average) -> Result<Vec<SplitGroup>> {
    let texts = boot.gather(serde_json::to_string(mine).unwrap_or_default())?;
    if boot.world_rank() != 0 {
        return Ok(Vec::new());
    }
    let processes = texts
        .iter()
        .enumerate()
        .map(|(r, t)| {
            serde_json::from_str(t).map_err(|_| {
                Error::Internal(format!("rank {r} sent unreadable split group measurements"))
            })
        })
        .collect::<Result<Vec<Folded>>>()?;
    Ok(combine(&processes, average))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seconds: f64) -> GroupSample {
        GroupSample {
            seconds,
            bytes: 1e9,
            factor: 2.0,
        }
    }

    #[test]
    fn threads_fold_and_groups_reduce_as_minus_a_does() {
        // Colour 0: processes 0 (two threads: 1 s and 3 s) and 2 (2 s); colour 1: process 1
        // (4 s). Two measurements each, the second twice as long.
        let two = |a: f64| vec![sample(a), sample(2.0 * a)];
        let processes = vec![
            fold(0, 0, vec![0, 1], &[two(1.0), two(3.0)]),
            fold(1, 1, vec![2, 3], &[two(4.0)]),
            fold(0, 2, vec![4, 5], &[two(2.0)]),
        ];
        assert_eq!(processes[0].times[0], [4.0, 1.0, 3.0, 1.0]);
        let g = combine(&processes, Average::Mean);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].color, &g[0].ranks), (0, &vec![0, 1, 4, 5]));
        // Mean over the group's three threads: 2 s, 4 s → busbw 1e9/1e9/2*2 = 1, then 0.5.
        assert_eq!(g[0].bus_bw, [1.0, 0.5]);
        assert_eq!(g[0].time, [2e6, 4e6]);
        assert_eq!(g[0].average_bus_bw, 0.75);
        assert_eq!(g[1].bus_bw, [0.5, 0.25]);
        let at = |a, group: usize| combine(&processes, a)[group].time[0] / 1e6;
        assert_eq!(at(Average::Min, 0), 1.0);
        assert_eq!(at(Average::Max, 0), 3.0);
        assert_eq!(at(Average::Rank0, 0), 1.0);
        // Unequal lengths (a process stopped recording): the common part.
        let short = fold(1, 3, vec![6, 7], &[vec![sample(1.0)]]);
        let g = combine(&[processes[1].clone(), short], Average::Mean);
        assert_eq!(g[0].bus_bw.len(), 1);
    }

    #[test]
    fn folded_measurements_travel_as_json() {
        let f = fold(5, 3, vec![3], &[vec![sample(0.5)]]);
        let back: Folded = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }
}
