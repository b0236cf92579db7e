//! Numbers in words for explain's lines: sizes, bandwidths, percentages. The lowest layer of
//! the crate: it imports nothing of it, and the judge, the verdict and the rendering all use it.

/// `1 GiB`, `512 MiB`, `8 B`: the largest binary unit that divides evenly, else one decimal.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A bandwidth in GB/s with sensible digits.
pub fn gbs(v: f64) -> String {
    if !v.is_finite() {
        "n/a".into()
    } else if v >= 100.0 {
        format!("{v:.0} GB/s")
    } else if v >= 10.0 {
        format!("{v:.1} GB/s")
    } else {
        format!("{v:.2} GB/s")
    }
}

/// A percentage, whole.
pub fn pct(v: f64) -> String {
    format!("{v:.0} %")
}
