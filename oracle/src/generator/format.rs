//! Floating-point bit layouts: building values from fields (`make`, `normalise`) and exact
//! conversions between a layout and `f64` (E exponent bits, M mantissa bits, bias 2^(E−1)−1).
//!
//! Rounding into a narrow layout is IEEE round-to-nearest-even. Overflow gives infinity for the
//! IEEE layouts (half, bfloat16, float) and the largest finite value for the fp8 layouts, which
//! saturate. The CUDA twin in `kernels/verifiable.cu` does the same in software.

use nccl_perf_cli::types::DataType;

/// Exponent and mantissa widths of a floating-point element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Exponent bits `E`.
    pub e: u32,
    /// Mantissa (fraction) bits `M`.
    pub m: u32,
    /// True for fp8: overflow saturates to the largest finite value.
    pub saturate: bool,
    /// True for e4m3: no infinities, only the all-ones pattern is NaN.
    pub no_inf: bool,
}

/// IEEE binary16.
pub const HALF: Layout = Layout {
    e: 5,
    m: 10,
    saturate: false,
    no_inf: false,
};

impl Layout {
    /// The layout of a floating-point type; `None` for integer types.
    pub fn of(dt: DataType) -> Option<Layout> {
        let (e, m) = dt.float_layout()?;
        Some(Layout {
            e,
            m,
            saturate: dt.is_fp8(),
            no_inf: dt == DataType::F8e4m3,
        })
    }

    /// Exponent bias `2^(E-1) - 1`.
    pub fn bias(self) -> u32 {
        (1 << (self.e - 1)) - 1
    }

    /// Mask of the mantissa field, `2^M - 1`.
    pub fn mant_mask(self) -> u64 {
        (1u64 << self.m) - 1
    }

    /// Mask of the exponent field (unshifted), `2^E - 1`.
    pub fn exp_mask(self) -> u64 {
        (1u64 << self.e) - 1
    }

    /// Total width in bits, `1 + E + M`.
    pub fn bits(self) -> u32 {
        1 + self.e + self.m
    }

    /// Bit pattern `sign·2^(E+M) | exp·2^M | mant` (each field masked to its width).
    pub fn make(self, sign: u64, exp: u64, mant: u64) -> u64 {
        ((sign & 1) << (self.e + self.m))
            | ((exp & self.exp_mask()) << self.m)
            | (mant & self.mant_mask())
    }

    /// The value `v·2^(base − bias − M)` with sign `sign`, for `v < 2^(M+1)`; `v == 0` gives +0.
    ///
    /// The top bit of `v` is moved to bit `M` (the hidden bit) and the exponent lowered by the
    /// number of shifts. (A wider `v` is shifted right instead; the generators never make one.)
    pub fn normalise(self, sign: u64, base: u32, v: u64) -> u64 {
        if v == 0 {
            return 0;
        }
        let top = 63 - v.leading_zeros();
        let (exp, mant) = if top <= self.m {
            let k = self.m - top;
            (base.wrapping_sub(k), v << k)
        } else {
            let k = top - self.m;
            (base.wrapping_add(k), v >> k)
        };
        self.make(sign, u64::from(exp), mant)
    }

    /// Largest finite magnitude's bit pattern.
    fn max_finite(self) -> u64 {
        if self.no_inf {
            (self.exp_mask() << self.m) | (self.mant_mask() - 1)
        } else {
            (self.exp_mask() << self.m) - 1
        }
    }

    /// Exact value of a bit pattern of this layout.
    pub fn to_f64(self, bits: u64) -> f64 {
        if self.m == 52 {
            return f64::from_bits(bits);
        }
        let sign = if (bits >> (self.e + self.m)) & 1 == 1 {
            -1.0
        } else {
            1.0
        };
        let ef = (bits >> self.m) & self.exp_mask();
        let mf = bits & self.mant_mask();
        let bias = i64::from(self.bias());
        let m = i64::from(self.m);
        if ef == self.exp_mask() && (!self.no_inf || mf == self.mant_mask()) {
            return if mf == 0 && !self.no_inf {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        let (sig, scale) = if ef == 0 {
            (mf, 1 - bias - m)
        } else {
            (mf | (1 << self.m), ef as i64 - bias - m)
        };
        // sig < 2^24 and scale within f64's normal range for every layout narrower than double.
        sign * (sig as f64) * pow2(scale)
    }

    /// `x` rounded to nearest-even into this layout.
    pub fn from_f64(self, x: f64) -> u64 {
        if self.m == 52 {
            return x.to_bits();
        }
        let xb = x.to_bits();
        let sign = xb >> 63;
        let sign_bit = sign << (self.e + self.m);
        if x.is_nan() {
            return sign_bit | (self.exp_mask() << self.m) | self.mant_mask();
        }
        let e64 = ((xb >> 52) & 0x7ff) as i64;
        let f64m = xb & ((1 << 52) - 1);
        if e64 == 0 {
            // Zero or an f64 subnormal: far below every narrower layout's smallest subnormal.
            return sign_bit;
        }
        let overflow = if self.saturate {
            self.max_finite()
        } else {
            self.exp_mask() << self.m
        };
        let sig = f64m | (1 << 52);
        let te = e64 - 1023 + i64::from(self.bias());
        if te > self.exp_mask() as i64 {
            return sign_bit | overflow;
        }
        // Right shift that leaves M fraction bits (more when the result is subnormal).
        let shift = 52 - i64::from(self.m) + if te >= 1 { 0 } else { 1 - te };
        if shift > 54 {
            return sign_bit;
        }
        let shift = shift as u32;
        let mut q = sig >> shift;
        let rem = sig & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if rem > half || (rem == half && q & 1 == 1) {
            q += 1;
        }
        // A carry out of the mantissa moves into the exponent field naturally.
        let mag = if te >= 1 {
            (((te - 1) as u64) << self.m) + q
        } else {
            q
        };
        let mag = if mag > self.max_finite() {
            overflow
        } else {
            mag
        };
        sign_bit | mag
    }

    /// Orders two non-NaN bit patterns of this layout as their values; true if `a < b`.
    pub fn less(self, a: u64, b: u64) -> bool {
        self.to_f64(a) < self.to_f64(b)
    }
}

/// `2^k` for `k` in f64's normal exponent range.
fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lay(dt: DataType) -> Layout {
        Layout::of(dt).unwrap()
    }

    fn sample_values() -> Vec<f64> {
        let mut v = vec![
            0.0, 1.0, 1.5, 3.0, 448.0, 464.0, 480.0, 500.0, 57344.0, 61440.0, 65504.0, 65520.0, 1e6,
        ];
        v.extend([
            2f64.powi(-9),
            2f64.powi(-10),
            3.0 * 2f64.powi(-11),
            2f64.powi(-24),
            2f64.powi(-25),
            2f64.powi(-26),
        ]);
        v.extend([
            2f64.powi(-133),
            2f64.powi(-134),
            3.0 * 2f64.powi(-135),
            2f64.powi(-149),
            2f64.powi(-150),
            1e-300,
        ]);
        let mut s = 0x1234_5678_9abc_def0u64;
        for i in 0..20_000 {
            s = crate::generator::prim::mix(s);
            // Random magnitudes over a wide exponent range, plus near-ties on narrow grids.
            let e = (s >> 52) as i32 % 300 - 150;
            let f = 1.0 + ((s & 0xf_ffff_ffff_ffff) as f64) / (1u64 << 52) as f64;
            v.push(f * 2f64.powi(e));
            let tie = ((s >> 8) & 0xfff) as f64 + 0.5;
            v.push(tie * 2f64.powi(i % 40 - 30));
        }
        let neg: Vec<f64> = v.iter().map(|x| -x).collect();
        v.extend(neg);
        v
    }

    /// Agrees with Rust's f64→f32 cast and, on values exact in f32, with the `half` crate
    /// (whose `from_f64` rounds twice, through f32, so it is no reference for other values).
    #[test]
    fn float_half_bf16_match_reference_conversions() {
        for x in sample_values() {
            assert_eq!(
                lay(DataType::Float).from_f64(x),
                u64::from((x as f32).to_bits()),
                "{x:e}"
            );
            let f = x as f32;
            if f64::from(f) == x {
                assert_eq!(
                    lay(DataType::Half).from_f64(x),
                    u64::from(half::f16::from_f32(f).to_bits()),
                    "{x:e}"
                );
                assert_eq!(
                    lay(DataType::Bfloat16).from_f64(x),
                    u64::from(half::bf16::from_f32(f).to_bits()),
                    "{x:e}"
                );
            }
        }
    }

    /// The result is a nearest representable value, and ties go to the even pattern.
    #[test]
    fn narrow_rounding_is_nearest_even() {
        for dt in [
            DataType::Half,
            DataType::Bfloat16,
            DataType::F8e4m3,
            DataType::F8e5m2,
        ] {
            let l = lay(dt);
            let max = l.to_f64(l.max_finite());
            for x in sample_values() {
                if x.abs() > max {
                    continue;
                }
                let b = l.from_f64(x);
                let v = l.to_f64(b);
                let err = (x - v).abs();
                // Neighbours in magnitude (same sign).
                let sign = b & (1 << (l.e + l.m));
                let mag = b & !sign;
                for nb in [mag.wrapping_sub(1), mag + 1] {
                    if nb > l.max_finite() {
                        continue;
                    }
                    let e2 = (x - l.to_f64(sign | nb)).abs();
                    assert!(
                        err < e2 || (err == e2 && b & 1 == 0),
                        "{dt:?} {x:e} -> {b:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn round_trip_every_narrow_pattern() {
        for dt in [
            DataType::Half,
            DataType::Bfloat16,
            DataType::F8e4m3,
            DataType::F8e5m2,
        ] {
            let l = lay(dt);
            for bits in 0..(1u64 << l.bits()) {
                let v = l.to_f64(bits);
                if v.is_finite() {
                    assert_eq!(l.from_f64(v), bits, "{dt:?} {bits:#x}");
                }
                if dt == DataType::Half {
                    let r = half::f16::from_bits(bits as u16).to_f64();
                    assert!(r.to_bits() == v.to_bits() || (r.is_nan() && v.is_nan()));
                }
            }
        }
    }

    #[test]
    fn fp8_fixed_values() {
        let e4 = lay(DataType::F8e4m3);
        let e5 = lay(DataType::F8e5m2);
        assert_eq!(e4.from_f64(1.0), 0x38);
        assert_eq!(e4.from_f64(448.0), 0x7e);
        assert_eq!(e4.from_f64(464.0), 0x7e);
        assert_eq!(e4.from_f64(1e9), 0x7e);
        assert_eq!(e4.from_f64(-1e9), 0xfe);
        assert_eq!(e4.from_f64(2f64.powi(-9)), 0x01);
        assert_eq!(e4.from_f64(2f64.powi(-10)), 0x00);
        assert_eq!(e4.from_f64(3.0 * 2f64.powi(-10)), 0x02);
        assert_eq!(e4.from_f64(0.0625 + 0.00390625), 0x18); // tie 1.0625·2^-4 → even (1.0·2^-4)
        assert_eq!(e4.from_f64(0.0625 + 3.0 * 0.00390625), 0x1a); // tie 1.1875·2^-4 → even (1.25·2^-4)
        assert!(e4.to_f64(0x7f).is_nan());
        assert_eq!(e4.to_f64(0x7e), 448.0);
        assert_eq!(e5.from_f64(1.0), 0x3c);
        assert_eq!(e5.from_f64(57344.0), 0x7b);
        assert_eq!(e5.from_f64(1e9), 0x7b);
        assert_eq!(e5.to_f64(0x7c), f64::INFINITY);
        assert_eq!(e5.from_f64(2f64.powi(-16)), 0x01);
        assert_eq!(lay(DataType::Half).from_f64(1e6), 0x7c00);
    }

    #[test]
    fn make_and_normalise() {
        let h = lay(DataType::Half);
        assert_eq!(h.make(1, 15, 0), 0xbc00);
        // v = 3 at base 25 (value 3·2^(25−15−10) = 3) → 1.5·2^1.
        assert_eq!(h.normalise(0, 25, 3), 0x4200);
        assert_eq!(h.normalise(1, 25, 0), 0);
        assert_eq!(h.normalise(0, 25, (1 << 11) - 1), 0x67ff); // 2047
        let d = lay(DataType::Double);
        assert_eq!(d.normalise(0, 1075, 1), 1.0f64.to_bits());
        assert_eq!(
            d.normalise(0, 1075, (1 << 53) - 1),
            9_007_199_254_740_991.0f64.to_bits()
        );
    }
}
