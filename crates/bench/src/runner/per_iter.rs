//! Per-iteration timing (`-I 1`, nccl-tests v2.19.2 on): CUDA events around every timed iteration
//! on every GPU, the per-iteration maximum over GPUs, threads and processes, and the statistics
//! printed in the `i_*` columns and written to the JSON per-iteration objects.

use super::setup::Gpu;
use crate::error::Result;
use crate::gpu::device::TimingEvents;
use crate::report::PerIterStats;

/// The timing events of one thread's GPUs, created once per thread and reused by every
/// measurement: `n + 1` boundaries per GPU (iteration `i` runs from event `i` to `i + 1`), or
/// with `-z 3` a start/stop pair per iteration (`2i`, `2i + 1`), so the barrier between
/// iterations is left out.
pub struct Events {
    per_gpu: Vec<TimingEvents>,
    paired: bool,
}

impl Events {
    /// No events (`-I 0`).
    pub fn none() -> Events {
        Events {
            per_gpu: Vec::new(),
            paired: false,
        }
    }

    /// Events for `iters` iterations on each of `gpus`; `paired` for `-z 3`.
    pub fn create(gpus: &[Gpu], iters: u64, paired: bool) -> Result<Events> {
        let count = if paired { 2 * iters } else { iters + 1 } as usize;
        let mut events = Events {
            per_gpu: Vec::with_capacity(gpus.len()),
            paired,
        };
        for g in gpus {
            events.per_gpu.push(TimingEvents::create(g.ctx(), count)?);
        }
        if let Some(g) = gpus.first() {
            g.ctx().make_current()?;
        }
        Ok(events)
    }

    /// Whether there are events to record.
    #[inline]
    pub fn active(&self) -> bool {
        !self.per_gpu.is_empty()
    }

    /// Event index of the start of iteration `iter`.
    #[inline]
    pub fn start_of(&self, iter: u64) -> usize {
        if self.paired {
            2 * iter as usize
        } else {
            iter as usize
        }
    }

    /// Records event `index` on every GPU's stream (the timed loop: no allocation).
    #[inline]
    pub fn record(&self, gpus: &[Gpu], index: usize) -> Result<()> {
        let multi = gpus.len() > 1;
        for (g, events) in gpus.iter().zip(&self.per_gpu) {
            if multi {
                g.ctx().make_current()?;
            }
            events.record(index, g.stream())?;
        }
        if multi && let Some(g) = gpus.first() {
            g.ctx().make_current()?;
        }
        Ok(())
    }

    /// Waits for event `index` on every GPU, then the microseconds from event `start` to it
    /// (the slowest GPU's); `--stop-when-sure`'s batches.
    pub fn span_us(&self, start: usize, index: usize) -> Result<f64> {
        let mut us = f64::NEG_INFINITY;
        for events in &self.per_gpu {
            events.ctx().make_current()?;
            events.wait(index)?;
            us = us.max(f64::from(events.elapsed_ms(start, index)?) * 1000.0);
        }
        if let Some(events) = self.per_gpu.first() {
            events.ctx().make_current()?;
        }
        Ok(us)
    }

    /// Microseconds per operation of each of `iters` iterations of `m` operations: the elapsed
    /// time of the iteration's event pair divided by `m`, the maximum over this thread's GPUs.
    /// The events must be complete (the streams waited for).
    pub fn iteration_us(&self, iters: u64, m: u64) -> Result<Vec<f64>> {
        let mut out = vec![f64::NEG_INFINITY; iters as usize];
        for events in &self.per_gpu {
            events.ctx().make_current()?;
            for (i, slot) in out.iter_mut().enumerate() {
                let (a, b) = if self.paired {
                    (2 * i, 2 * i + 1)
                } else {
                    (i, i + 1)
                };
                let ms = events.elapsed_ms(a, b)?;
                *slot = slot.max(f64::from(ms) * 1000.0 / m as f64);
            }
        }
        if let Some(events) = self.per_gpu.first() {
            events.ctx().make_current()?;
        }
        Ok(out)
    }
}

/// The index of the nearest-rank `p`-th percentile among `n ≥ 1` sorted samples:
/// `min(n − 1, ⌈n·p/100⌉ − 1)`, in integers so that no rounding moves it.
pub fn nearest_rank(n: usize, p: usize) -> usize {
    (n * p)
        .div_ceil(100)
        .saturating_sub(1)
        .min(n.saturating_sub(1))
}

/// nccl-tests' `-I 1` statistics over `times_us[skip..]`: sorted, min, max, p50 = element ⌊N/2⌋,
/// nearest-rank p95 and p99, mean, population standard deviation, cv% = stdev/mean·100 (0 when
/// the mean is not positive). `times_us` (every iteration, skipped ones included) and the
/// per-process rows are kept for the JSON object. With no sample left every figure is NaN.
pub fn summarize(times_us: Vec<f64>, skip: usize, per_process: Vec<Vec<f64>>) -> PerIterStats {
    let mut sorted: Vec<f64> = times_us[skip.min(times_us.len())..].to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let [min, max, p50, p95, p99, avg, stdev, cv] = if n == 0 {
        [f64::NAN; 8]
    } else {
        let avg = sorted.iter().sum::<f64>() / n as f64;
        let var = sorted.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
        let stdev = var.sqrt();
        let cv = if avg > 0.0 { stdev / avg * 100.0 } else { 0.0 };
        [
            sorted[0],
            sorted[n - 1],
            sorted[n / 2],
            sorted[nearest_rank(n, 95)],
            sorted[nearest_rank(n, 99)],
            avg,
            stdev,
            cv,
        ]
    };
    PerIterStats {
        skipped: skip as i64,
        min_us: min,
        max_us: max,
        avg_us: avg,
        p50_us: p50,
        p95_us: p95,
        p99_us: p99,
        stdev_us: stdev,
        cv_pct: cv,
        times_us,
        per_process_max_times_us: per_process,
    }
}

/// The per-iteration row every process reports: the maximum over the gathered process rows
/// (`times_us`), and the rows themselves when there is more than one process.
pub fn combine(rows: Vec<Vec<f64>>) -> (Vec<f64>, Vec<Vec<f64>>) {
    let max = element_max(&rows);
    if rows.len() > 1 {
        (max, rows)
    } else {
        (max, Vec::new())
    }
}

/// The element-wise maximum of equally long rows (the shortest length if they differ).
pub fn element_max(rows: &[Vec<f64>]) -> Vec<f64> {
    let len = rows.iter().map(Vec::len).min().unwrap_or(0);
    (0..len)
        .map(|i| rows.iter().map(|r| r[i]).fold(f64::NEG_INFINITY, f64::max))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        // 20 samples (the default -n): p95 is the 19th, p99 the 20th (= max).
        assert_eq!(nearest_rank(20, 95), 18);
        assert_eq!(nearest_rank(20, 99), 19);
        assert_eq!(nearest_rank(100, 99), 98);
        assert_eq!(nearest_rank(100, 95), 94);
        assert_eq!(nearest_rank(101, 99), 99);
        assert_eq!(nearest_rank(1, 99), 0);
        assert_eq!(nearest_rank(1, 95), 0);
        assert_eq!(nearest_rank(3, 50), 1);
    }

    #[test]
    fn statistics_of_spec_5_4() {
        let times: Vec<f64> = vec![9.0, 2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0];
        let s = summarize(times.clone(), 0, Vec::new());
        assert_eq!((s.min_us, s.max_us), (2.0, 9.0));
        assert_eq!(s.avg_us, 5.0);
        // Population standard deviation of the classic example: 2.
        assert_eq!(s.stdev_us, 2.0);
        assert_eq!(s.cv_pct, 40.0);
        // Sorted: 2 4 4 4 5 5 7 9; p50 = element 4.
        assert_eq!(s.p50_us, 5.0);
        assert_eq!((s.p95_us, s.p99_us), (9.0, 9.0));
        assert_eq!(s.times_us, times);
        assert_eq!(s.skipped, 0);
    }

    #[test]
    fn skip_leaves_times_whole() {
        let times: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summarize(times.clone(), 2, Vec::new());
        // 98 samples 3..=100: p99 = element ⌈97.02⌉ − 1 = 97 → 100; p95 = ⌈93.1⌉ − 1 = 93 → 96.
        assert_eq!((s.min_us, s.max_us), (3.0, 100.0));
        assert_eq!(s.p99_us, 100.0);
        assert_eq!(s.p95_us, 96.0);
        assert_eq!(s.p50_us, 52.0);
        assert_eq!(s.avg_us, 51.5);
        assert_eq!(s.skipped, 2);
        assert_eq!(s.times_us.len(), 100);
    }

    #[test]
    fn cv_is_zero_without_a_positive_mean_and_nan_without_samples() {
        let s = summarize(vec![0.0, 0.0], 0, Vec::new());
        assert_eq!((s.cv_pct, s.stdev_us), (0.0, 0.0));
        let s = summarize(vec![1.0], 1, Vec::new());
        assert!(s.min_us.is_nan() && s.p99_us.is_nan() && s.cv_pct.is_nan());
        assert_eq!(s.times_us, vec![1.0]);
    }

    #[test]
    fn processes_combine_by_maximum() {
        let (max, rows) = combine(vec![vec![1.0, 5.0, 2.0], vec![3.0, 4.0, 2.5]]);
        assert_eq!(max, vec![3.0, 5.0, 2.5]);
        assert_eq!(rows.len(), 2);
        let (max, rows) = combine(vec![vec![1.0, 2.0]]);
        assert_eq!(max, vec![1.0, 2.0]);
        assert!(rows.is_empty());
    }

    /// The JSON per-iteration object (nccl-tests' JSON schema 3) and the `-I 1` table columns as
    /// the report renders what [`summarize`] and [`combine`] produce: keys in upstream's order,
    /// `per_process_max_times_us` only with several processes, `times_us` the per-iteration maximum
    /// over them (what `analyze_perf_json.py` checks), 21 tokens per row.
    #[test]
    fn json_objects_and_table_columns() {
        use crate::report::json::JsonReport;
        use crate::report::{HalfResult, RowResult, RunInfo, Step, table};
        let info = RunInfo {
            program: "all_reduce_perf".into(),
            min_bytes: 8,
            max_bytes: 8,
            step: Step::Factor(2),
            iters: 4,
            per_iter: true,
            per_iter_skip: 1,
            ..RunInfo::default()
        };
        let (times, rows) = combine(vec![vec![5.0, 1.0, 2.0, 3.0], vec![4.0, 2.0, 1.5, 3.5]]);
        let two = summarize(times, 1, rows);
        let (times, rows) = combine(vec![vec![5.0, 1.0, 2.0, 3.0]]);
        let one = summarize(times, 1, rows);
        let half = |stats: PerIterStats| HalfResult {
            time_us: 3.0,
            algbw: 0.0,
            busbw: 0.0,
            wrong: Some(0.0),
            per_iter: Some(stats),
        };
        let row = RowResult {
            size: 8,
            count: 2,
            dtype: "float".into(),
            op: "sum".into(),
            root: -1,
            out_of_place: half(two),
            in_place: half(one),
            timestamp: None,
            iterations: 4,
        };
        let mut report = JsonReport::new(&info, &[], 22803, "t0".into(), vec![], vec![]);
        report.add_row(&row);
        let text = report.render_aborted();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let oop = &v["results"][0]["out_of_place_per_iter"];
        let keys: Vec<&str> = oop
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = vec![
            "skipped_iterations",
            "min_us",
            "max_us",
            "avg_us",
            "p50_us",
            "p95_us",
            "p99_us",
            "stdev_us",
            "cv_pct",
            "times_us",
            "per_process_max_times_us",
        ];
        // serde_json without preserve_order sorts keys: compare as sets, order via the text.
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let mut want = expected.clone();
        want.sort_unstable();
        assert_eq!(sorted, want);
        let order: Vec<usize> = expected
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert_eq!(oop["skipped_iterations"], 1);
        assert_eq!(oop["times_us"], serde_json::json!([5.0, 2.0, 2.0, 3.5]));
        assert_eq!(oop["per_process_max_times_us"][1][3], 3.5);
        // Statistics over 2.0 2.0 3.5 (the first iteration skipped).
        assert_eq!(oop["min_us"], 2.0);
        assert_eq!(oop["max_us"], 3.5);
        assert_eq!(oop["p99_us"], 3.5);
        let ip = &v["results"][0]["in_place_per_iter"];
        expected.pop();
        assert_eq!(ip.as_object().unwrap().len(), expected.len());
        assert!(ip.get("per_process_max_times_us").is_none());
        let line = table::row(&row, &info);
        assert_eq!(line.split_whitespace().count(), 21, "{line}");
        // In place: 1, 2, 3 → min 1, max 3, p99 3, cv = 0.8165 / 2.
        assert!(
            line.ends_with("     1.00     3.00     3.00    40.82\n"),
            "{line:?}"
        );
    }
}
