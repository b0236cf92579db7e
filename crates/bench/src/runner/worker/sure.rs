//! `--stop-when-sure PERCENT`: a size's timed iterations run in batches, and stop once the 95 %
//! confidence interval of the mean time per operation is within PERCENT of it (every thread and
//! process agreeing), or at `-n`. A batch lasts at least [`BATCH_SECONDS`] by the operation's
//! first (untimed) issue; sizes whose operations are too short for three batches within `-n`
//! run as without the option. What was used and reached is kept per half
//! ([`Sure`]) for the row's `actual_iterations` and the line after the table.

use super::Worker;
use crate::bootstrap::Reduce;
use crate::error::Result;
use crate::gpu::op::BoundOp;
pub use crate::runner::sure_line::Sure;
use std::time::Instant;

/// A batch's shortest duration, seconds (its mean is one sample of the statistics).
pub const BATCH_SECONDS: f64 = 0.001;

/// Student's t for a two-sided 95 % interval with `df` degrees of freedom (1.96 from 30 on).
fn t95(df: usize) -> f64 {
    const T: [f64; 29] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045,
    ];
    match df {
        0 => f64::INFINITY,
        d if d <= T.len() => T[d - 1],
        _ => 1.96,
    }
}

/// The 95 % confidence half-width of the mean of `x`, over the mean, percent.
pub fn relative_half_width(x: &[f64]) -> f64 {
    let k = x.len();
    if k < 2 {
        return f64::INFINITY;
    }
    let mean = x.iter().sum::<f64>() / k as f64;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
    let hw = t95(k - 1) * (var / k as f64).sqrt();
    if mean > 0.0 {
        hw / mean * 100.0
    } else {
        f64::INFINITY
    }
}

impl Worker<'_> {
    /// The timed loop of a bound operation under `--stop-when-sure percent`, at most `n`
    /// iterations of `m` operations, `first` being how long the operation's first (untimed)
    /// issue took with its wait; returns (host enqueue time, completion time) per operation in
    /// seconds, as [`Worker::timed_loop`] does, and what it used.
    ///
    /// The operations go to the stream as in one loop, in batches with an event between two:
    /// one batch is always queued behind the one the host waits for, so the GPU never idles,
    /// and the time reported is the whole loop's, from the first issue to the last completion,
    /// as without the option. The batches' own times (the events') only decide when to stop.
    pub(super) fn timed_until_sure(
        &self,
        op: &BoundOp,
        (n, m): (u64, u64),
        first: f64,
        percent: f64,
    ) -> Result<(f64, f64, Sure)> {
        let g = self.e.group;
        let per_iter = first * m as f64;
        let wanted = (BATCH_SECONDS / per_iter.max(1e-9)).ceil().min(n as f64);
        // Every thread and process runs the same batches.
        let b = g.allreduce(self.tid, wanted, Reduce::Max)?.max(1.0) as u64;
        if 3 * b > n || !self.sure_events.active() {
            // Too short for three batches: the loop as without the option.
            let (cpu, time) = self.timed(op, n, m)?;
            return Ok((
                cpu,
                time,
                Sure {
                    iterations: n,
                    half_width: None,
                },
            ));
        }
        let ev = &self.sure_events;
        let nccl = self.e.nccl;
        let mut rotation = op.rotation();
        let start = Instant::now();
        let mut enqueue = |iters: u64| -> Result<()> {
            for _ in 0..iters {
                super::in_group(nccl, m > 1, || {
                    for _ in 0..m {
                        rotation.issue_next()?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        };
        // Event k starts batch k; batch k's time is from event k to event k + 1.
        ev.record(&self.gpus, 0)?;
        let mut sizes = Vec::new();
        let mut used = 0;
        let mut batches = Vec::new();
        let (mut reached, mut sure) = (None, false);
        while used < n && !sure {
            let iters = b.min(n - used);
            enqueue(iters)?;
            used += iters;
            sizes.push(iters);
            let k = sizes.len();
            ev.record(&self.gpus, k)?;
            // With this batch queued, the host waits for the one before it.
            if k >= 2 && sizes[k - 2] == b {
                batches.push(ev.span_us(k - 2, k - 1)?);
                if batches.len() >= 3 {
                    let worst =
                        g.allreduce(self.tid, relative_half_width(&batches), Reduce::Max)?;
                    reached = Some(worst);
                    sure = worst <= percent;
                }
            }
        }
        let enqueued = start.elapsed().as_secs_f64();
        self.wait()?;
        let ops = (used * m) as f64;
        Ok((
            enqueued / ops,
            start.elapsed().as_secs_f64() / ops,
            Sure {
                iterations: used,
                half_width: reached,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_widths_of_steady_and_noisy_samples() {
        assert_eq!(relative_half_width(&[1.0]), f64::INFINITY);
        assert_eq!(relative_half_width(&[2.0, 2.0, 2.0]), 0.0);
        // mean 10, sd 1 over 4 samples: 3.182 * 0.5 / 10 = 15.9 %.
        let hw = relative_half_width(&[9.0, 11.0, 9.0, 11.0]);
        assert!(
            (hw - 3.182 * (4.0f64 / 3.0).sqrt() / 2.0 / 10.0 * 100.0).abs() < 1e-9,
            "{hw}"
        );
        assert_eq!(t95(40), 1.96);
        assert_eq!(t95(0), f64::INFINITY);
    }
}
