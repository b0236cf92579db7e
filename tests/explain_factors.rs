//! explain's busbw factor table (crates/explain/src/factor.rs, a copy because bench depends
//! on explain) agrees with each benchmark's own `bandwidth` in crates/bench/src/collective/,
//! the source of truth, for every benchmark and several rank counts.

use nccl_perf_bench::collective;
use nccl_perf_explain::factor::bus_factor;

#[test]
fn explain_factors_match_the_benchmarks() {
    let all = collective::all();
    assert_eq!(all.len(), 11);
    for coll in &all {
        for n in [1usize, 2, 3, 8, 16, 72] {
            // hypercube needs a power of two; its factor does not depend on the count.
            let ts = 4;
            let counts = coll.counts(1 << 20, n, ts);
            let (_, factor) = coll.bandwidth(&counts, ts, n);
            let ours = bus_factor(coll.name(), n as u32)
                .unwrap_or_else(|| panic!("explain has no factor for {}", coll.name()));
            assert!(
                (ours - factor).abs() < 1e-12,
                "{} on {n} ranks: bench {factor}, explain {ours}",
                coll.name()
            );
        }
    }
}
