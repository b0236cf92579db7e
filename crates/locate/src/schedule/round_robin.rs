//! The circle method: a round-robin in which every pair of `n` nodes meets exactly once, in
//! `n − 1` rounds of `n / 2` disjoint pairs for even `n`, and `n` rounds with one node sitting
//! out (a bye) each round for odd `n`. Node `m − 1` (with `m` the even count, a phantom for odd
//! `n`) stays put while the others rotate.

/// Number of rounds for `n` nodes.
pub fn rounds(n: usize) -> usize {
    match n {
        0 | 1 => 0,
        _ if n.is_multiple_of(2) => n - 1,
        _ => n,
    }
}

/// The pairs of round `r` (0-based, below [`rounds`]), lower node first.
pub fn pairs(n: usize, r: usize) -> Vec<(usize, usize)> {
    if r >= rounds(n) {
        return Vec::new();
    }
    let m = n + n % 2;
    let k = m - 1;
    let mut out = Vec::with_capacity(m / 2);
    let mut push = |a: usize, b: usize| {
        // The phantom node `n` (odd `n`) gives its partner a bye.
        if a < n && b < n {
            out.push((a.min(b), a.max(b)));
        }
    };
    push(k, r);
    for i in 1..m / 2 {
        push((r + i) % k, (r + k - i) % k);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_exactly_once_and_rounds_disjoint() {
        for n in 0..=33 {
            let mut seen = vec![vec![0u32; n]; n];
            for r in 0..rounds(n) {
                let p = pairs(n, r);
                assert_eq!(p.len(), n / 2, "n {n} round {r}");
                let mut used = vec![false; n];
                for (a, b) in p {
                    assert!(a < b && b < n);
                    assert!(!used[a] && !used[b], "n {n} round {r}: node twice");
                    used[a] = true;
                    used[b] = true;
                    seen[a][b] += 1;
                }
            }
            for (a, row) in seen.iter().enumerate() {
                for (b, &count) in row.iter().enumerate().skip(a + 1) {
                    assert_eq!(count, 1, "n {n}: pair {a}-{b}");
                }
            }
        }
        assert_eq!((rounds(8), rounds(9), rounds(1)), (7, 9, 0));
        assert!(pairs(8, 7).is_empty());
    }
}
