//! `--stop-when-sure`'s line after the footer: how many halves stopped before `-n`, the
//! iterations used, and the confidence reached. No word of it is `bandwidth` or `FAILED`.

/// What one half of a row used and reached under `--stop-when-sure`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sure {
    /// Timed iterations run.
    pub iterations: u64,
    /// The 95 % confidence half-width over the mean, percent (the worst thread's), when
    /// batches were timed.
    pub half_width: Option<f64>,
}

/// What the halves of a run used and reached.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    /// Halves measured under the option.
    halves: u64,
    /// Of those, the halves that stopped before `-n`.
    early: u64,
    /// Iterations used, fewest and most.
    range: Option<(u64, u64)>,
    /// The widest half-width (percent) among the halves that stopped early.
    widest: Option<f64>,
    /// The cap, `-n`.
    cap: i64,
    /// The smallest size that stopped early.
    from: Option<u64>,
}

impl Tally {
    /// Adds a row's halves.
    pub fn add(&mut self, size: u64, halves: [Option<Sure>; 2], cap: i64) {
        self.cap = cap;
        for s in halves.into_iter().flatten() {
            self.halves += 1;
            let (lo, hi) = self.range.unwrap_or((s.iterations, s.iterations));
            self.range = Some((lo.min(s.iterations), hi.max(s.iterations)));
            if (s.iterations as i64) < cap {
                self.early += 1;
                self.from = Some(self.from.map_or(size, |f| f.min(size)));
                if let Some(h) = s.half_width {
                    self.widest = Some(self.widest.map_or(h, |w: f64| w.max(h)));
                }
            }
        }
    }

    /// The line, or nothing when the option was not given.
    pub fn line(&self) -> String {
        let Some((lo, hi)) = self.range else {
            return String::new();
        };
        match (self.early, self.from, self.widest) {
            (0, _, _) | (_, None, _) => format!(
                "# Stop when sure: every half ran all -n {} iterations ({} halves)\n",
                self.cap, self.halves
            ),
            (early, Some(from), widest) => format!(
                "# Stop when sure: {early} of {} halves stopped before -n {} (from {from} B on), using {lo} to {hi} iterations; 95 % confidence half-width of the mean at most {} there\n",
                self.halves,
                self.cap,
                widest.map_or("unknown".to_string(), |w| format!("{w:.2} %")),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_stopped_early() {
        let mut t = Tally::default();
        assert_eq!(t.line(), "");
        let full = Sure {
            iterations: 20,
            half_width: None,
        };
        t.add(8, [Some(full), Some(full)], 20);
        assert_eq!(
            t.line(),
            "# Stop when sure: every half ran all -n 20 iterations (2 halves)\n"
        );
        let early = Sure {
            iterations: 7,
            half_width: Some(0.31),
        };
        t.add(
            1 << 30,
            [
                Some(early),
                Some(Sure {
                    half_width: Some(0.8),
                    ..early
                }),
            ],
            20,
        );
        assert_eq!(
            t.line(),
            "# Stop when sure: 2 of 4 halves stopped before -n 20 (from 1073741824 B on), using 7 to 20 iterations; 95 % confidence half-width of the mean at most 0.80 % there\n"
        );
        assert!(!t.line().contains("bandwidth") && !t.line().contains("FAILED"));
    }
}
