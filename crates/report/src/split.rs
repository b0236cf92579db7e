//! Each split group's own result (`NCCL_TESTS_SPLIT`, `NCCL_TESTS_SPLIT_MASK`): nccl-tests
//! reduces every measurement's time over all ranks of all groups, so the table shows one
//! average for the job. Here every group's time is also reduced over its own ranks alone (as
//! `-a` reduces the table's), giving each group its bus bandwidth per half-row: printed after the
//! table as `#` lines (never the words the table's scrapers look for) and kept in the `-J`
//! JSON under `nccl_perf_split_groups`, a key upstream's readers ignore.

use serde::Serialize;

/// One split group's measurements.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitGroup {
    /// Its colour.
    pub color: i64,
    /// The world ranks of its GPUs, ascending (as the device lines number them).
    pub ranks: Vec<usize>,
    /// The mean of `bus_bw` (as the footer's average is the mean over the table's halves).
    pub average_bus_bw: f64,
    /// Bus bandwidth (GB/s) of every measured half-row, in the table's order (out-of-place,
    /// in-place, then the next row): index `2 i` and `2 i + 1` belong to `results[i]`.
    pub bus_bw: Vec<f64>,
    /// Its time per operation (µs) of every measured half-row, in the same order.
    pub time: Vec<f64>,
}

/// The lines printed after the table: one per group, lowest average first.
pub fn lines(groups: &[SplitGroup]) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let mut order: Vec<&SplitGroup> = groups.iter().collect();
    order.sort_by(|a, b| a.average_bus_bw.total_cmp(&b.average_bus_bw));
    let best = groups
        .iter()
        .map(|g| g.average_bus_bw)
        .filter(|v| v.is_finite())
        .fold(f64::NAN, f64::max);
    let mut out = format!(
        "# Split groups: {} groups, each one's own busbw (GB/s) averaged over its {} halves, \
         its time reduced over its own ranks; lowest first\n",
        groups.len(),
        groups.first().map_or(0, |g| g.bus_bw.len())
    );
    for g in order {
        let low = g
            .bus_bw
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(f64::NAN, f64::min);
        out += &format!(
            "# Split group color {:>3}  ranks {:<24} average busbw {:>9.3}  lowest {:>9.3}  {:>5.2}x the best group\n",
            g.color,
            ranks(&g.ranks),
            g.average_bus_bw,
            low,
            g.average_bus_bw / best
        );
    }
    out
}

/// `0,2,4-7`: ranks with runs collapsed.
fn ranks(v: &[usize]) -> String {
    nccl_perf_locate::round::list(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_each_group_lowest_first_without_scraped_words() {
        let g = |color, ranks: Vec<usize>, bw: Vec<f64>| SplitGroup {
            color,
            ranks,
            average_bus_bw: bw.iter().sum::<f64>() / bw.len() as f64,
            time: vec![1.0; bw.len()],
            bus_bw: bw,
        };
        let text = lines(&[
            g(0, vec![0, 2, 4, 6], vec![10.0, 12.0]),
            g(1, vec![1, 3, 5, 7], vec![4.0, 6.0]),
        ]);
        let l: Vec<&str> = text.lines().collect();
        assert_eq!(l.len(), 3);
        assert!(l[0].starts_with("# Split groups: 2 groups"), "{text}");
        assert!(
            l[1].contains("color   1") && l[1].contains("ranks 1,3,5,7") && l[1].contains("0.45x"),
            "{text}"
        );
        assert!(
            l[2].contains("average busbw    11.000  lowest    10.000"),
            "{text}"
        );
        for line in &l {
            assert!(line.starts_with('#'));
            assert!(!line.contains("bandwidth") && !line.contains("FAILED"));
        }
        assert_eq!(lines(&[]), "");
        // JSON as the -J key carries it.
        let json = serde_json::to_string(&g(3, vec![5], vec![1.5])).unwrap();
        assert_eq!(
            json,
            r#"{"color":3,"ranks":[5],"average_bus_bw":1.5,"bus_bw":[1.5],"time":[1.0]}"#
        );
    }
}
