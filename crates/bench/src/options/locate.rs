//! The options of `--locate` (docs/locate.md): read only when `--locate SCHEDULE` is given, and
//! refused without it, so that a mistyped command line never silently skips the locate run.

use super::{OptionsError, Reader};
use crate::cli::OPTIONS;
use crate::locate::schedule::Kind;
use crate::locate::stats::Thresholds;
use std::path::PathBuf;
use std::time::Duration;

/// The message size of every group when `--locate-size` is not given: the smaller of `-e` and
/// this.
pub const DEFAULT_SIZE_CAP: u64 = 256 << 20;

/// What `--locate` runs after the benchmark's table.
#[derive(Debug, Clone, PartialEq)]
pub struct LocateOptions {
    /// `--locate`: the schedule.
    pub schedule: Kind,
    /// `--locate-size`: the message size of every group's measurement; `None`: the smaller of
    /// `-e` (after the memory clamp) and [`DEFAULT_SIZE_CAP`].
    pub size: Option<u64>,
    /// `--locate-iters`: timed operations per group.
    pub iters: u32,
    /// `--locate-window`: the least time every group is timed for (0: `iters` alone); the
    /// count that takes is estimated from the groups its ranks were measured in, which round 1
    /// learns in a short first pass (docs/locate.md, "Windows"; [`window_iters`]).
    pub window: f64,
    /// `--locate-deadline`: how long a group may take from the start of its round.
    pub deadline: Duration,
    /// `--locate-threshold`, `--locate-min-drop`, `--locate-min-busbw`.
    pub thresholds: Thresholds,
    /// `--locate-seed`.
    pub seed: u64,
    /// `--locate-lines`.
    pub lines: usize,
    /// `--locate-json`.
    pub json: Option<PathBuf>,
}

impl LocateOptions {
    /// The message size of every group, for buffers of `max_bytes` (`-e` after the memory
    /// clamp).
    pub fn size_for(&self, max_bytes: u64) -> u64 {
        self.size.unwrap_or(max_bytes.min(DEFAULT_SIZE_CAP))
    }

    /// The configuration of the locate driver.
    pub fn config(&self) -> crate::locate::Config {
        crate::locate::Config {
            schedule: self.schedule,
            thresholds: self.thresholds,
            seed: self.seed,
            deadline: self.deadline,
            max_rounds: None,
            job_busbw: None,
        }
    }
}

/// A decimal number option (`--locate-deadline 2.5`); `None` when neither given nor set by
/// default.
pub(super) fn number(r: &mut Reader, long: &str) -> Result<Option<f64>, OptionsError> {
    let Some(s) = r.text(long)? else {
        return Ok(None);
    };
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(Some(v)),
        _ => Err(OptionsError::Invalid(format!(
            "invalid value '{s}' for --{long}: not a number"
        ))),
    }
}

/// `--locate*`: `None` without `--locate`; an error when one of its options is given without
/// it, when a value is out of range, or when the run has several GPUs per process (`-t`, `-g`:
/// each locate group is a communicator split from one rank per process).
pub(super) fn read(
    r: &mut Reader,
    nthreads: i64,
    ngpus: i64,
    max_bytes: u64,
) -> Result<Option<LocateOptions>, OptionsError> {
    let Some(name) = r.given("locate")? else {
        let stray = OPTIONS
            .iter()
            .filter(|o| o.long.starts_with("locate-"))
            .find(|o| r.raw.get(o.long).is_some());
        return match stray {
            Some(o) => Err(OptionsError::Invalid(format!(
                "--{} needs --locate SCHEDULE (nodes, rails, quick or full)",
                o.long
            ))),
            None => Ok(None),
        };
    };
    let schedule =
        Kind::parse(name.trim()).map_err(|e| OptionsError::Invalid(format!("--locate: {e}")))?;
    if nthreads != 1 || ngpus != 1 {
        return Err(OptionsError::Unsupported(format!(
            "--locate runs one GPU per process, not -t {nthreads} -g {ngpus}: launch one process \
             per GPU (mpirun -np N, srun --ntasks-per-node=G) with -t 1 -g 1"
        )));
    }
    let size = match r.given("locate-size")? {
        None => None,
        Some(_) => {
            let v = r.size("locate-size", "locate-size")?;
            if v == 0 {
                return Err(OptionsError::Invalid(
                    "--locate-size 0: every group needs a message of at least 1 byte".into(),
                ));
            }
            if v > max_bytes {
                return Err(OptionsError::Invalid(format!(
                    "--locate-size {v} is above -e {max_bytes}: the buffers are sized for -e; \
                     raise -e or lower --locate-size"
                )));
            }
            Some(v)
        }
    };
    let iters = r.int_at_least("locate-iters", 1)?;
    let window = number(r, "locate-window")?.unwrap_or(0.0);
    let deadline = number(r, "locate-deadline")?.unwrap_or(60.0);
    if !(deadline > 0.0 && deadline <= 86_400.0) {
        return Err(OptionsError::Invalid(format!(
            "invalid value {deadline} for --locate-deadline: give seconds above 0 (at most a day)"
        )));
    }
    // The default (1 s: 10 periods of a 100 ms stall, docs/locate.md) never meets a short
    // deadline: half of it at most.
    let window = if r.given("locate-window")?.is_some() {
        window
    } else {
        window.min(deadline / 2.0)
    };
    if !(0.0..=3_600.0).contains(&window) || window >= deadline {
        return Err(OptionsError::Invalid(format!(
            "invalid value {window} for --locate-window: give seconds from 0 up to an hour, \
             below --locate-deadline ({deadline} s)"
        )));
    }
    let thresholds = Thresholds {
        mad_k: number(r, "locate-threshold")?.unwrap_or(5.0),
        min_drop: number(r, "locate-min-drop")?.unwrap_or(0.15),
        min_busbw: number(r, "locate-min-busbw")?,
        ..Thresholds::default()
    };
    thresholds.validate().map_err(|e| {
        OptionsError::Invalid(
            e.to_string()
                .replace("MAD threshold", "--locate-threshold")
                .replace("minimum drop", "--locate-min-drop"),
        )
    })?;
    let seed = r.int_at_least("locate-seed", 0)? as u64;
    let lines = r.int_at_least("locate-lines", 1)? as usize;
    let json = match r.given("locate-json")? {
        Some(s) if s.is_empty() => {
            return Err(OptionsError::Invalid(
                "--locate-json needs a file name".into(),
            ));
        }
        Some(s) => Some(PathBuf::from(s)),
        None => None,
    };
    Ok(Some(LocateOptions {
        schedule,
        size,
        iters: u32::try_from(iters).unwrap_or(u32::MAX),
        window,
        deadline: Duration::from_secs_f64(deadline),
        thresholds,
        seed,
        lines,
        json,
    }))
}

/// Timed operations for a window of at least `window` seconds when one operation takes about
/// `seconds`, and never fewer than `iters` (`--locate-iters`); `iters` when the window is off
/// or the estimate unusable. Capped at a million operations.
pub fn window_iters(iters: u32, window: f64, seconds: Option<f64>) -> u32 {
    let Some(t) = seconds.filter(|t| t.is_finite() && *t > 0.0) else {
        return iters;
    };
    if window.is_nan() || window <= 0.0 {
        return iters;
    }
    let needed = (window / t).ceil().min(1e6) as u32;
    iters.max(needed)
}

#[cfg(test)]
mod tests {
    use super::window_iters;

    #[test]
    fn the_window_raises_the_count_and_never_lowers_it() {
        // 25 ms an operation: 40 of them fill a second.
        assert_eq!(window_iters(10, 1.0, Some(0.025)), 40);
        assert_eq!(window_iters(10, 1.0, Some(0.0251)), 40);
        assert_eq!(window_iters(10, 1.0, Some(0.0249)), 41);
        // Long operations: --locate-iters is the floor.
        assert_eq!(window_iters(20, 1.0, Some(0.5)), 20);
        // Off, or nothing to estimate from.
        assert_eq!(window_iters(20, 0.0, Some(0.001)), 20);
        assert_eq!(window_iters(20, 1.0, None), 20);
        assert_eq!(window_iters(20, 1.0, Some(0.0)), 20);
        assert_eq!(window_iters(20, 1.0, Some(f64::NAN)), 20);
        // Tiny operations: capped.
        assert_eq!(window_iters(20, 3600.0, Some(1e-9)), 1_000_000);
    }
}
