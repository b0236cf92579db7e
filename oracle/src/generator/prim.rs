//! Mixing primitives of the verifiable generator (nccl-tests' `verifiable/` arithmetic).
//!
//! All arithmetic wraps on the stated width and every shift is logical. The CUDA twin of each
//! function lives in `kernels/verifiable.cu` and must stay bit-identical.

/// First multiplier of [`mix`] and [`hash`] (the 64-bit golden-ratio constant).
pub const MUL_A: u64 = 0x9e37_79b9_7f4a_7c13;
/// Second multiplier of [`hash`].
pub const MUL_B: u64 = 0xc4ce_b9fe_1a85_ec53;

/// Bijective 64-bit mixer used to advance a generator state.
pub fn mix(x: u64) -> u64 {
    let hi = ((x >> 32) as u32).wrapping_add(1);
    let lo = (x as u32) ^ hi;
    let y = ((u64::from(hi) << 32) | u64::from(lo)).wrapping_mul(MUL_A);
    let lo = (y as u32) ^ ((y >> 32) as u32).rotate_left(16);
    (y & 0xffff_ffff_0000_0000) | u64::from(lo)
}

/// Hash of two 64-bit words.
pub fn hash(a: u64, b: u64) -> u64 {
    let mut a = a.wrapping_add(1 << 32).wrapping_add(b);
    a ^= a >> 32;
    a = a.wrapping_mul(MUL_A);
    a = a.wrapping_add((b >> 16) ^ (b << 48));
    a ^= a >> 32;
    a.wrapping_mul(MUL_B)
}

/// High 32 bits of the 64-bit product of two `u32` (CUDA `__umulhi`).
pub fn mulhi32(a: u32, b: u32) -> u32 {
    ((u64::from(a) * u64::from(b)) >> 32) as u32
}

/// High 64 bits of the 128-bit product of two `u64` (CUDA `__umul64hi`).
pub fn mulhi64(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) >> 64) as u64
}

/// Unsigned division as NVIDIA GPUs perform it: dividing by zero yields all ones.
pub fn gpu_div(a: u64, b: u64, mask: u64) -> u64 {
    a.checked_div(b).map_or(mask, |q| q & mask)
}

/// Pseudo-random permutation of the ranks `0..rn`: returns the shuffled rank of `rme`.
///
/// Advances `rng` by exactly one [`mix`], whatever `rme` is. `rn == 0` behaves like `rn == 1`.
pub fn shuffle(rn: u32, rme: u32, rng: &mut u64) -> u32 {
    let a = *rng as u32;
    let b = (*rng >> 32) as u32;
    *rng = mix(*rng);
    // (largest power of two <= rn) - 1
    let m = if rn == 0 {
        0
    } else {
        (u32::MAX >> 1) >> rn.leading_zeros()
    };
    let mut r = rme;
    if r <= m {
        r = r.wrapping_mul(a | 1).wrapping_add(b) & m;
        r = (r.wrapping_mul(r).wrapping_add(r) / 2) & m;
        r = r.wrapping_add(rn.wrapping_sub(m + 1));
    } else {
        r -= m + 1;
    }
    if r <= m {
        r = r.wrapping_mul(b | 1).wrapping_add(a) & m;
        r = (r.wrapping_mul(r).wrapping_add(r) / 2) & m;
    }
    r
}

/// Width of the unsigned integers [`sum_xy`] works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// 32-bit arithmetic (`mulhi32`).
    W32,
    /// 64-bit arithmetic (`mulhi64`); used for double mantissas.
    W64,
}

impl Width {
    /// All-ones value of this width.
    pub fn mask(self) -> u64 {
        match self {
            Width::W32 => u64::from(u32::MAX),
            Width::W64 => u64::MAX,
        }
    }
}

/// Splits a random total `y` into per-rank parts: returns rank `rme`'s part `x` of `rn` parts
/// whose sum is the new `*y`.
///
/// With `avoid == false`, `*y` is picked in `[(ymax+1)/2, ymax]` (its input value is ignored);
/// with `avoid == true` it is picked different from its input value. Advances `rng` by one
/// [`mix`]. All parts are non-negative, so every partial sum lies in `[0, *y]`.
pub fn sum_xy(
    width: Width,
    rn: u32,
    rme: u32,
    rng: &mut u64,
    ymax: u64,
    y: &mut u64,
    avoid: bool,
) -> u64 {
    let mask = width.mask();
    let ymin = (ymax.wrapping_add(1) & mask) / 2;
    let span = (ymax / 2).wrapping_add(u64::from(!avoid)) & mask;
    let d = match width {
        Width::W64 => mulhi64(*rng, span),
        Width::W32 => u64::from(mulhi32(*rng as u32, span as u32)),
    };
    let start = if avoid {
        y.wrapping_add(1) & mask
    } else {
        ymin
    };
    let y1 = start.wrapping_add(d) & mask;
    let back = if avoid && (y1 < ymin || y1 > ymax) {
        ymax / 2
    } else {
        0
    };
    let yv = y1.wrapping_sub(back) & mask;
    *y = yv;
    *rng = mix(*rng);

    let rn64 = u64::from(rn);
    let mut pn = if rn == 1 {
        1
    } else {
        gpu_div(yv, rn64, mask).wrapping_mul(2).wrapping_sub(1) & mask
    };
    if pn == 0 {
        pn = 1;
    }
    pn = pn.min(rn64);
    let psum_mask = if ymax <= 0x7fff_ffff {
        u64::from(u32::MAX)
    } else {
        u64::MAX
    };
    let psum = (pn.wrapping_mul(pn.wrapping_add(1)) & psum_mask) / 2;
    let s = gpu_div(yv, psum, mask).min(gpu_div(rn64, pn, mask)) as u32;
    // s == 0: the quotient is 0xFFFFFFFF, what the GPU's unsigned division by zero returns;
    // then only the last rank contributes and the sum stays exact.
    let q = rme.checked_div(s).unwrap_or(u32::MAX);
    let mut x = if u64::from(q) < pn {
        1 + u64::from(q)
    } else {
        0
    };
    if rme == rn.wrapping_sub(1) {
        x = x.wrapping_add(yv.wrapping_sub(u64::from(s).wrapping_mul(psum))) & mask;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_and_hash_fixed_values() {
        // mix(0) worked by hand: hi=1, lo=1; (2^32+1)*A = 0x1d81f5cc_7f4a7c13;
        // lo ^= rotl32(0x1d81f5cc, 16) = 0xf5cc1d81.
        assert_eq!(mix(0), 0x1d81_f5cc_8a86_6192);
        assert_eq!(mix(1), 0x7f4a_7c13_7c13_7f4a);
        assert_eq!(hash(0, 0), 0x9efa_0e58_f1f2_474d);
        assert_eq!(hash(1, 2), 0xfccf_09d7_a3e7_6dd9);
        assert_eq!(hash(7, 0xdead_beef), 0x9071_3c2e_f0c6_3642);
        assert_eq!(mulhi32(u32::MAX, u32::MAX), 0xffff_fffe);
        assert_eq!(mulhi64(u64::MAX, 3), 2);
        assert_eq!(gpu_div(5, 0, u64::from(u32::MAX)), 0xffff_ffff);
    }

    #[test]
    fn mix_is_injective_on_a_sample() {
        let mut seen: Vec<u64> = (0..4096u64).map(|i| mix(i.wrapping_mul(MUL_B))).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 4096);
    }

    #[test]
    fn shuffle_fixed_values() {
        let mut rng = 12345u64;
        let got: Vec<u32> = (0..8)
            .map(|r| {
                let mut g = rng;
                shuffle(8, r, &mut g)
            })
            .collect();
        assert_eq!(got, vec![1, 3, 2, 4, 6, 0, 5, 7]);
        let five: Vec<u32> = (0..5).map(|r| shuffle(5, r, &mut rng.clone())).collect();
        assert_eq!(five, vec![3, 2, 4, 0, 1]);
        shuffle(8, 0, &mut rng);
        assert_eq!(rng, mix(12345));
    }

    #[test]
    fn shuffle_is_a_permutation() {
        for rn in 1..=130u32 {
            for k in 0..8u64 {
                let seed = hash(u64::from(rn), k);
                let mut hit = vec![false; rn as usize];
                for rme in 0..rn {
                    let mut g = seed;
                    let r = shuffle(rn, rme, &mut g);
                    assert_eq!(g, mix(seed));
                    assert!(r < rn, "rn={rn} rme={rme} r={r}");
                    assert!(!hit[r as usize], "rn={rn} duplicate {r}");
                    hit[r as usize] = true;
                }
            }
        }
    }

    #[test]
    fn sum_xy_fixed_values() {
        let mut rng = 0x0123_4567_89ab_cdefu64;
        let mut y = 0;
        let xs: Vec<u64> = (0..5)
            .map(|r| {
                let mut g = rng;
                sum_xy(Width::W32, 5, r, &mut g, (1 << 11) - 1, &mut y, false)
            })
            .collect();
        // y = 1574; pn = min(2·(1574/5) − 1, 5) = 5; psum = 15; s = min(104, 1) = 1.
        assert_eq!(y, 0x626);
        assert_eq!(xs, vec![1, 2, 3, 4, 0x61c]);
        // psum = 72·73/2 > y: s == 0, so only the last rank contributes.
        let xs: Vec<u64> = (0..72)
            .map(|r| sum_xy(Width::W32, 72, r, &mut rng.clone(), 7, &mut y, false))
            .collect();
        assert_eq!(y, 6);
        assert!(xs[..71].iter().all(|&x| x == 0) && xs[71] == 6);
        let xs: Vec<u64> = (0..3)
            .map(|r| {
                sum_xy(
                    Width::W64,
                    3,
                    r,
                    &mut rng.clone(),
                    (1 << 53) - 1,
                    &mut y,
                    false,
                )
            })
            .collect();
        assert_eq!(y, 0x10_1234_5678_9abc);
        assert_eq!(xs, vec![1, 2, 0x10_1234_5678_9ab9]);
        sum_xy(Width::W32, 5, 0, &mut rng, 7, &mut y, false);
        assert_eq!(rng, mix(0x0123_4567_89ab_cdef));
    }

    /// The parts always add up to `y`, stay non-negative and `y` stays in range.
    #[test]
    fn sum_xy_parts_add_up() {
        let cases = [
            (Width::W32, (1u64 << 4) - 1),
            (Width::W32, (1 << 11) - 1),
            (Width::W32, (1 << 24) - 1),
            (Width::W32, 7),
            (Width::W32, 15),
            (Width::W32, 127),
            (Width::W64, (1 << 53) - 1),
        ];
        for (width, ymax) in cases {
            for rn in 1..=72u32 {
                for k in 0..6u64 {
                    let seed = hash(k, u64::from(rn) ^ ymax);
                    for avoid in [false, true] {
                        let y_in = ymax - k.min(ymax / 2);
                        let mut total = 0u64;
                        let mut y_out = 0;
                        for rme in 0..rn {
                            let (mut g, mut y) = (seed, y_in);
                            let x = sum_xy(width, rn, rme, &mut g, ymax, &mut y, avoid);
                            assert_eq!(g, mix(seed));
                            total += x;
                            y_out = y;
                        }
                        assert_eq!(total, y_out, "w={width:?} ymax={ymax} rn={rn} k={k}");
                        // (`avoid` makes y differ from y_in except when d = ymax/2 − 1 wraps
                        // back onto it; the sum is then 0, which is still exact.)
                        assert!(y_out <= ymax && y_out > ymax / 2);
                    }
                }
            }
        }
    }
}
