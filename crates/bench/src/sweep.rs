//! The list of sizes a run measures, the warm-up ladder, and the GPU-memory clamp of `-e`.

/// Sizes of the sweep: `min`, then ×`factor` (if > 1) or +`step`, while ≤ `max`.
/// Callers guarantee termination (options reject a zero step or a zero start with a factor);
/// an overflow ends the sweep.
pub fn sizes(min: u64, max: u64, step_bytes: u64, step_factor: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut s = min;
    while s <= max {
        out.push(s);
        let next = if step_factor > 1 {
            s.checked_mul(step_factor)
        } else {
            s.checked_add(step_bytes)
        };
        match next {
            Some(n) if n > s => s = n,
            _ => break,
        }
    }
    out
}

/// Warm-up sizes: doubling from `min` while ≤ `max`, independent of `-f`/`-i`.
/// nccl-tests hangs here when `min` is 0; we start doubling from 1 byte instead.
pub fn warmup_sizes(min: u64, max: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut s = min;
    while s <= max {
        out.push(s);
        s = match s.max(1).checked_mul(2) {
            Some(n) if s == 0 => n / 2,
            Some(n) => n,
            None => break,
        };
    }
    out
}

const GIB: u64 = 1 << 30;

/// The largest per-buffer size that fits in the smallest GPU's memory: keep back
/// min(ceil(mem / 16 GiB) GiB, 4 GiB) plus 1 GiB, and split the rest over the send, receive and
/// (with validation) expected buffers.
pub fn memory_limit(min_total_mem: u64, check: bool) -> u64 {
    let reserve = min_total_mem
        .div_ceil(16 * GIB)
        .saturating_mul(GIB)
        .min(4 * GIB);
    let usable = min_total_mem.saturating_sub(reserve).saturating_sub(GIB);
    usable / if check { 3 } else { 2 }
}

/// Applies the memory clamp: returns the new (min, max) and whether max was reduced.
pub fn clamp(min: u64, max: u64, min_total_mem: u64, check: bool) -> (u64, u64, bool) {
    let limit = memory_limit(min_total_mem, check);
    if max > limit {
        (min.min(limit), limit, true)
    } else {
        (min, max, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_sweep() {
        let s = sizes(8, 128 << 20, 1 << 20, 2);
        assert_eq!(s.len(), 25);
        assert_eq!(s[0], 8);
        assert_eq!(*s.last().unwrap(), 134217728);
    }

    #[test]
    fn additive_sweep_as_in_ar_step() {
        assert_eq!(
            sizes(1 << 20, 10 << 20, 3 << 20, 1),
            vec![1048576, 4194304, 7340032, 10485760]
        );
    }

    #[test]
    fn default_is_single_size_and_factor_four() {
        assert_eq!(sizes(32 << 20, 32 << 20, 1 << 20, 1), vec![33554432]);
        assert_eq!(sizes(1024, 1 << 20, 1 << 20, 4).len(), 6);
        assert_eq!(sizes(8, 1 << 20, 1, 8).len(), 6);
    }

    #[test]
    fn sweeps_always_end() {
        assert_eq!(sizes(5, 5, 0, 1), vec![5]);
        assert_eq!(sizes(0, 0, 0, 2), vec![0]);
        assert_eq!(
            sizes(u64::MAX - 1, u64::MAX, 1 << 40, 1),
            vec![u64::MAX - 1]
        );
        assert_eq!(sizes(1 << 62, u64::MAX, 0, 4), vec![1 << 62]);
    }

    #[test]
    fn warmup_ladder() {
        assert_eq!(
            warmup_sizes(1 << 20, 10 << 20),
            vec![1 << 20, 2 << 20, 4 << 20, 8 << 20]
        );
        assert_eq!(warmup_sizes(0, 4), vec![0, 1, 2, 4]);
        assert_eq!(warmup_sizes(8, 8), vec![8]);
    }

    #[test]
    fn h200_clamp() {
        // 143771 MiB, as an H200 reports: reserve 4 GiB + 1 GiB, a third of the rest each.
        let mem = 143771u64 << 20;
        let limit = memory_limit(mem, true);
        assert_eq!(limit, (mem - 5 * GIB) / 3);
        assert!(limit > 45 * GIB && limit < 46 * GIB);
        assert_eq!(clamp(8, 8 << 30, mem, true), (8, 8 << 30, false));
        let (lo, hi, reduced) = clamp(64 << 30, 64 << 30, mem, true);
        assert!(reduced && lo == hi && hi == limit);
        assert_eq!(memory_limit(16 * GIB, false), (16 * GIB - 2 * GIB) / 2);
        assert_eq!(memory_limit(GIB, true), 0);
    }
}
