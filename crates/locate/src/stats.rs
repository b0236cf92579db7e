//! Robust statistics: a reference value (upper median), its noise (MAD of the values near it)
//! and the rule that calls a value low. Faults make collectives slower, never faster, so only
//! the low side is tested, and the reference holds while fewer than half of the values are
//! faulty.

use serde::{Deserialize, Serialize};

/// MAD is only trusted from this many healthy values on; below it the spread floor applies.
const MIN_MAD_SAMPLES: usize = 5;
/// MAD of normally distributed values times this is their standard deviation.
const MAD_TO_SIGMA: f64 = 1.4826;

/// When a value is low. A value is low when it is below `(1 − min_drop) ×` the reference
/// **and** more than `mad_k` spreads below it (the spread being the MAD-estimated standard
/// deviation of the healthy values, at least `spread_floor ×` the reference), or below
/// `min_busbw` where that applies.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// How many spreads below the reference a value must be (default 5).
    pub mad_k: f64,
    /// How far below the reference a value must be, as a fraction (default 0.15: 15 %).
    pub min_drop: f64,
    /// Least spread, as a fraction of the reference (default 0.02), so noise-free data does
    /// not make every small difference significant.
    pub spread_floor: f64,
    /// Absolute floor in GB/s for whole nodes, whole rails and pairs of nodes (off by default).
    pub min_busbw: Option<f64>,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            mad_k: 5.0,
            min_drop: 0.15,
            spread_floor: 0.02,
            min_busbw: None,
        }
    }
}

/// A threshold that cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    /// `mad_k` negative or not a number.
    #[error("MAD threshold {0} must be a number >= 0")]
    MadK(f64),
    /// `min_drop` outside `[0, 1)`.
    #[error("minimum drop {0} must be in [0, 1)")]
    MinDrop(f64),
    /// `spread_floor` negative or not a number.
    #[error("spread floor {0} must be >= 0")]
    SpreadFloor(f64),
    /// `min_busbw` negative or not a number.
    #[error("--locate-min-busbw {0} must be a number >= 0")]
    MinBusbw(f64),
}

impl Thresholds {
    /// Checks the values are usable: finite, `mad_k` ≥ 0, `min_drop` in `[0, 1)`,
    /// `spread_floor` ≥ 0, `min_busbw` ≥ 0.
    pub fn validate(&self) -> Result<(), ThresholdError> {
        if !(self.mad_k.is_finite() && self.mad_k >= 0.0) {
            return Err(ThresholdError::MadK(self.mad_k));
        }
        if !(self.min_drop.is_finite() && (0.0..1.0).contains(&self.min_drop)) {
            return Err(ThresholdError::MinDrop(self.min_drop));
        }
        if !(self.spread_floor.is_finite() && self.spread_floor >= 0.0) {
            return Err(ThresholdError::SpreadFloor(self.spread_floor));
        }
        if let Some(m) = self.min_busbw
            && !(m.is_finite() && m >= 0.0)
        {
            return Err(ThresholdError::MinBusbw(m));
        }
        Ok(())
    }

    /// Whether `value` is under the absolute floor.
    pub fn below_min(&self, value: f64) -> bool {
        self.min_busbw.is_some_and(|m| value < m)
    }

    /// The least ratio that counts as clearly healthy: half the minimum drop below the
    /// reference (0.925× by default). A node whose readings with other partners fall between
    /// this and the slow threshold is borderline: too close to call it clean.
    pub fn clean_ratio(&self) -> f64 {
        1.0 - self.min_drop / 2.0
    }

    /// Below this ratio to its groups the whole job counts as slow: twice the minimum drop
    /// (0.70× by default), because the busbw of a larger group is only roughly that of a pair
    /// (more hops, other algorithms), docs/locate.md.
    pub fn job_ratio(&self) -> f64 {
        (1.0 - 2.0 * self.min_drop).max(0.0)
    }
}

/// The finite values, ascending.
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The median of the finite values (mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let v = sorted(values);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The upper median of the finite values: the higher middle value for an even count. With
/// two values it is the larger, so one slow value of two is still seen against the other.
pub fn upper_median(values: &[f64]) -> Option<f64> {
    let v = sorted(values);
    v.get(v.len() / 2).copied()
}

/// The median absolute deviation of the finite values about `center`.
pub fn mad(values: &[f64], center: f64) -> Option<f64> {
    let dev: Vec<f64> = values.iter().map(|v| (v - center).abs()).collect();
    median(&dev)
}

/// Where a reference value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The groups of the same shape in the same round.
    Round,
    /// The control groups of the same shape in the same round.
    Controls,
    /// Healthy groups of the same shape in an earlier round.
    Earlier,
    /// Every pair (or node score) of the whole pair matrix.
    Matrix,
}

/// A reference value and the noise around it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// The reference (upper median), GB/s.
    pub value: f64,
    /// Estimated standard deviation of healthy values, GB/s.
    pub spread: f64,
    /// How many values it was computed from.
    pub samples: usize,
    /// Where they came from.
    pub basis: Basis,
}

impl Reference {
    /// The reference of `values` (non-finite ones ignored); `None` without a positive value.
    pub fn of(values: &[f64], basis: Basis, th: &Thresholds) -> Option<Reference> {
        let v = sorted(values);
        let value = upper_median(&v)?;
        if value <= 0.0 {
            return None;
        }
        let healthy: Vec<f64> = v
            .iter()
            .copied()
            .filter(|x| *x >= (1.0 - th.min_drop) * value)
            .collect();
        let mut spread = th.spread_floor * value;
        if healthy.len() >= MIN_MAD_SAMPLES
            && let Some(c) = median(&healthy)
            && let Some(m) = mad(&healthy, c)
        {
            spread = spread.max(MAD_TO_SIGMA * m);
        }
        Some(Reference {
            value,
            spread,
            samples: v.len(),
            basis,
        })
    }

    /// A reference carried over from an earlier round (its spread is the floor).
    pub fn earlier(value: f64, th: &Thresholds) -> Option<Reference> {
        (value.is_finite() && value > 0.0).then_some(Reference {
            value,
            spread: th.spread_floor * value,
            samples: 1,
            basis: Basis::Earlier,
        })
    }

    /// `value` as a multiple of the reference.
    pub fn ratio(&self, value: f64) -> f64 {
        value / self.value
    }

    /// The drop below the reference a value needs to count as slow, as a fraction: the minimum
    /// drop, or `mad_k` spreads when the noise is wider.
    pub fn needed_drop(&self, th: &Thresholds) -> f64 {
        th.min_drop.max(th.mad_k * self.spread / self.value)
    }

    /// Whether `value` is low against this reference.
    pub fn is_low(&self, value: f64, th: &Thresholds) -> bool {
        value < (1.0 - th.min_drop) * self.value && value < self.value - th.mad_k * self.spread
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_ignore_non_finite_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(upper_median(&[4.0, 1.0, 2.0, 3.0]), Some(3.0));
        assert_eq!(upper_median(&[1.0, f64::NAN, 5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
        assert_eq!(mad(&[1.0, 2.0, 3.0, 4.0, 100.0], 3.0), Some(1.0));
    }

    #[test]
    fn one_slow_value_of_two_is_seen() {
        let th = Thresholds::default();
        let r = Reference::of(&[100.0, 50.0], Basis::Round, &th).unwrap();
        assert_eq!(r.value, 100.0);
        assert!(r.is_low(50.0, &th));
        assert!(!r.is_low(90.0, &th));
    }

    #[test]
    fn noise_widens_the_threshold_but_a_real_drop_still_shows() {
        let th = Thresholds::default();
        // ±1 % noise: the 15 % minimum drop decides.
        let quiet: Vec<f64> = (0..20).map(|i| 100.0 + (i % 3) as f64 - 1.0).collect();
        let r = Reference::of(&quiet, Basis::Round, &th).unwrap();
        assert!(r.is_low(84.0, &th) && !r.is_low(86.0, &th));
        // ±8 % noise: five spreads reach further than 15 %.
        let noisy: Vec<f64> = (0..20)
            .map(|i| 100.0 + ((i % 5) as f64 - 2.0) * 5.0)
            .collect();
        let r = Reference::of(&noisy, Basis::Round, &th).unwrap();
        assert!(!r.is_low(80.0, &th), "{r:?}");
        assert!(r.is_low(40.0, &th));
    }

    #[test]
    fn a_minority_of_slow_values_does_not_move_the_reference() {
        let th = Thresholds::default();
        let mut v = vec![100.0; 6];
        v.extend([40.0; 5]);
        let r = Reference::of(&v, Basis::Round, &th).unwrap();
        assert_eq!(r.value, 100.0);
        assert!(r.is_low(40.0, &th));
    }

    #[test]
    fn no_reference_from_nothing_or_zeros() {
        let th = Thresholds::default();
        assert!(Reference::of(&[], Basis::Round, &th).is_none());
        assert!(Reference::of(&[0.0, 0.0], Basis::Round, &th).is_none());
        assert!(Reference::of(&[f64::NAN], Basis::Round, &th).is_none());
        assert!(Reference::earlier(0.0, &th).is_none());
    }

    #[test]
    fn thresholds_are_checked() {
        assert!(Thresholds::default().validate().is_ok());
        let bad = |f: fn(&mut Thresholds)| {
            let mut t = Thresholds::default();
            f(&mut t);
            t.validate().is_err()
        };
        assert!(bad(|t| t.mad_k = f64::NAN));
        assert!(bad(|t| t.min_drop = 1.0));
        assert!(bad(|t| t.spread_floor = -1.0));
        assert!(bad(|t| t.min_busbw = Some(f64::INFINITY)));
        let t = Thresholds {
            min_busbw: Some(50.0),
            ..Thresholds::default()
        };
        assert!(t.below_min(49.0) && !t.below_min(50.0));
    }
}
