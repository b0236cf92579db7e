//! The bus-bandwidth factor of each benchmark: busbw = algbw × factor.
//!
//! The source of truth is each collective's `bandwidth` in `crates/bench/src/collective/`
//! (docs/measurement.md); explain must not depend on bench (bench depends on explain), so the
//! small table is copied here and `tests/explain_factors.rs` at the root checks that both agree
//! for every benchmark and several rank counts.

/// The busbw factor of `collective` (program name without `_perf`) on `nranks` ranks, `None`
/// for a name that is not one of the eleven benchmarks.
///
/// all_reduce 2(n−1)/n; all_gather, reduce_scatter, alltoall, alltoallv, gather, scatter
/// (n−1)/n; broadcast, reduce, sendrecv, hypercube 1 (hypercube counts its n−1 exchanges in
/// algbw's bytes instead).
pub fn bus_factor(collective: &str, nranks: u32) -> Option<f64> {
    let n = f64::from(nranks.max(1));
    match collective {
        "all_reduce" => Some(2.0 * (n - 1.0) / n),
        "all_gather" | "reduce_scatter" | "alltoall" | "alltoallv" | "gather" | "scatter" => {
            Some((n - 1.0) / n)
        }
        "broadcast" | "reduce" | "sendrecv" | "hypercube" => Some(1.0),
        _ => None,
    }
}

/// Whether NCCL has an algorithm choice for `collective`: the point-to-point benchmarks
/// (alltoall, alltoallv, scatter, gather, sendrecv, hypercube) are grouped sends and receives.
pub fn is_point_to_point(collective: &str) -> bool {
    matches!(
        collective,
        "alltoall" | "alltoallv" | "scatter" | "gather" | "sendrecv" | "hypercube"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_of_eight_ranks() {
        assert_eq!(bus_factor("all_reduce", 8), Some(1.75));
        assert_eq!(bus_factor("all_gather", 8), Some(0.875));
        assert_eq!(bus_factor("broadcast", 8), Some(1.0));
        assert_eq!(bus_factor("all_reduce", 1), Some(0.0));
        assert_eq!(bus_factor("all_reduce", 0), Some(0.0));
        assert_eq!(bus_factor("nope", 8), None);
        assert!(is_point_to_point("sendrecv") && !is_point_to_point("all_reduce"));
    }
}
