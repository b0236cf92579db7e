//! What `plot` and `compare` look at: a metric of each half-row, and which halves.

use nccl_perf_report::HalfResult;

/// The quantity a plot or comparison looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Bus bandwidth, GB/s.
    Busbw,
    /// Algorithm bandwidth, GB/s.
    Algbw,
    /// Time per operation, µs.
    Time,
}

impl Metric {
    pub(super) fn parse(s: &str) -> Metric {
        match s {
            "algbw" => Metric::Algbw,
            "time" => Metric::Time,
            _ => Metric::Busbw,
        }
    }

    /// The value of this metric in one half-row.
    pub fn of(self, h: &HalfResult) -> f64 {
        match self {
            Metric::Busbw => h.busbw,
            Metric::Algbw => h.algbw,
            Metric::Time => h.time_us,
        }
    }

    /// The column name: `busbw`, `algbw`, `time`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Busbw => "busbw",
            Metric::Algbw => "algbw",
            Metric::Time => "time",
        }
    }

    /// The unit: `GB/s` or `us`.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Time => "us",
            _ => "GB/s",
        }
    }

    /// A y-axis label with unit.
    pub fn axis(self) -> &'static str {
        match self {
            Metric::Busbw => "Bus bandwidth (GB/s)",
            Metric::Algbw => "Algorithm bandwidth (GB/s)",
            Metric::Time => "Time per operation (µs)",
        }
    }

    /// A chart title.
    pub fn title(self) -> &'static str {
        match self {
            Metric::Busbw => "Bus bandwidth",
            Metric::Algbw => "Algorithm bandwidth",
            Metric::Time => "Time",
        }
    }

    /// True for bandwidths, false for time.
    pub fn higher_is_better(self) -> bool {
        self != Metric::Time
    }
}

/// Which halves of each row to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half {
    /// Out-of-place and in-place.
    Both,
    /// Out-of-place only.
    Out,
    /// In-place only.
    In,
}

impl Half {
    pub(super) fn parse(s: &str) -> Half {
        match s {
            "out" => Half::Out,
            "in" => Half::In,
            _ => Half::Both,
        }
    }

    /// Whether the in-place (`true`) or out-of-place (`false`) half is included.
    pub fn includes(self, in_place: bool) -> bool {
        match self {
            Half::Both => true,
            Half::Out => !in_place,
            Half::In => in_place,
        }
    }
}
