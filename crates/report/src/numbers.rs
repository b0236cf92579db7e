//! Number formatting rules of nccl-tests v2.19.6 (fit-to-width, `%g`).
//!
//! Rust's `{:.N}` and `{:.Ne}` formatting is exact and rounds ties to even on the binary value,
//! exactly like glibc's `printf`, so the digits below always equal what nccl-tests prints; only
//! the spelling of exponents (`1e7` → `1e+07`) and of NaN/infinity differs and is adapted here.
//!
//! NaN representation: glibc prints a NaN whose sign bit is set as `-nan`. On x86 the NaN produced
//! by a run-time `0.0 / 0.0` has its sign bit set, which is why nccl-tests prints the average of no
//! rows as `-nan`. Whether a Rust `0.0 / 0.0` is computed at run time or folded by the compiler
//! (which gives a positive NaN) is not specified, so our code never relies on it: the average of
//! no rows is [`NO_ROWS_AVERAGE`] (see [`average`]), a NaN with the sign bit set, and every
//! function here prints a NaN according to its sign bit, as glibc does.

/// The NaN x86 produces for `0.0 / 0.0` (sign bit set, quiet): printed `-nan` by [`c_g`] and
/// [`fit`]. This is what the average bus bandwidth of a run without rows is.
pub const NO_ROWS_AVERAGE: f64 = f64::from_bits(0xfff8_0000_0000_0000);

/// The arithmetic mean `sum / count`, or [`NO_ROWS_AVERAGE`] (printed `-nan`) when `count` is 0,
/// as nccl-tests computes the average bus bandwidth: the mean busbw of every printed half-row
/// (rows of 0 elements and `N/A` halves included), `0/0` when there is none.
pub fn average(sum: f64, count: u64) -> f64 {
    if count == 0 {
        NO_ROWS_AVERAGE
    } else {
        sum / count as f64
    }
}

/// Formats `value` into a field of `width` characters with nccl-tests v2.19.6's fit-to-width
/// rule: `%W.2f`; if longer than `width`, `%W.1f`; then `%W.0f`; then `%W.1e` (width ≥ 7)
/// or `%W.0e` (width < 7), truncated to `width` characters.
///
/// NaN prints `nan` (`-nan` when its sign bit is set) and infinities `inf`/`-inf`, right-aligned.
///
/// ```
/// use nccl_perf_report::numbers::fit;
/// assert_eq!(fit(9999.994, 6), " 10000");
/// assert_eq!(fit(1.2e7, 7), "1.2e+07");
/// assert_eq!(fit(f64::NAN, 7), "    nan");
/// ```
pub fn fit(value: f64, width: usize) -> String {
    for precision in [2, 1, 0] {
        let s = pad(&c_fixed(value, precision), width);
        if s.len() <= width {
            return s;
        }
    }
    let precision = if width >= 7 { 1 } else { 0 };
    let mut s = pad(&c_exp(value, precision), width);
    s.truncate(width);
    s
}

/// C's `%g`: 6 significant digits, trailing zeros (and a trailing `.`) removed, exponent form
/// (`1.23457e+06`) when the decimal exponent is below −4 or at least 6.
///
/// NaN prints `nan`, or `-nan` when its sign bit is set (as glibc does; see the module docs and
/// [`NO_ROWS_AVERAGE`]); infinities print `inf`/`-inf`.
///
/// ```
/// use nccl_perf_report::numbers::c_g;
/// assert_eq!(c_g(560.541), "560.541");
/// assert_eq!(c_g(1234567.0), "1.23457e+06");
/// assert_eq!(c_g(0.0), "0");
/// ```
pub fn c_g(value: f64) -> String {
    const PRECISION: i32 = 6;
    if let Some(s) = non_finite(value) {
        return s.to_string();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // The exponent %e would print, after rounding to PRECISION significant digits.
    let exponent = decimal_exponent(value, PRECISION as usize - 1);
    if !(-4..PRECISION).contains(&exponent) {
        let s = c_exp(value, PRECISION as usize - 1);
        match s.split_once('e') {
            Some((mantissa, exp)) => format!("{}e{}", strip_zeros(mantissa), exp),
            None => s,
        }
    } else {
        let decimals = (PRECISION - 1 - exponent) as usize;
        strip_zeros(&format!("{value:.decimals$}")).to_string()
    }
}

/// C's `%.{precision}f`, with glibc's spelling of NaN and infinities.
pub fn c_fixed(value: f64, precision: usize) -> String {
    match non_finite(value) {
        Some(s) => s.to_string(),
        None => format!("{value:.precision$}"),
    }
}

/// C's `%.{precision}e` (`1.2e+07`: sign and at least two exponent digits), with glibc's spelling
/// of NaN and infinities.
pub fn c_exp(value: f64, precision: usize) -> String {
    if let Some(s) = non_finite(value) {
        return s.to_string();
    }
    let rust = format!("{value:.precision$e}");
    let Some((mantissa, exp)) = rust.split_once('e') else {
        return rust;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
}

/// `nan`, `-nan`, `inf` or `-inf` for a non-finite value, as glibc prints them.
fn non_finite(value: f64) -> Option<&'static str> {
    if value.is_nan() {
        Some(if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        })
    } else if value.is_infinite() {
        Some(if value < 0.0 { "-inf" } else { "inf" })
    } else {
        None
    }
}

/// The decimal exponent of a finite non-zero `value` printed with `precision` digits after the
/// point in exponent form (rounding can carry into the exponent: 999999.5 → 1.00000e+06).
fn decimal_exponent(value: f64, precision: usize) -> i32 {
    let s = format!("{value:.precision$e}");
    s.split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0)
}

/// Removes trailing zeros after a decimal point, and the point itself if nothing follows it.
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Right-aligns `s` in `width` characters (`%Ws`); longer strings are kept whole.
fn pad(s: &str, width: usize) -> String {
    format!("{s:>width$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(value: f64, w7: &str, w6: &str) {
        assert_eq!(fit(value, 7), w7, "fit({value}, 7)");
        assert_eq!(fit(value, 6), w6, "fit({value}, 6)");
    }

    #[test]
    fn fit_spec_examples() {
        check(0.0, "   0.00", "  0.00");
        check(9.999, "  10.00", " 10.00");
        check(9999.994, "9999.99", " 10000");
        check(99999.94, "99999.9", "100000");
        check(99999.96, " 100000", "100000");
        check(9999999.4, "9999999", " 1e+07");
        check(1.2e7, "1.2e+07", " 1e+07");
    }

    #[test]
    fn fit_nan_and_infinity() {
        check(f64::NAN, "    nan", "   nan");
        check(NO_ROWS_AVERAGE, "   -nan", "  -nan");
        check(f64::INFINITY, "    inf", "   inf");
        check(f64::NEG_INFINITY, "   -inf", "  -inf");
    }

    #[test]
    fn fit_rounds_half_even_on_the_binary_value() {
        // 0.125 and 0.375 are exact binary ties; 2.675 is slightly below 2.675.
        check(0.125, "   0.12", "  0.12");
        check(0.375, "   0.38", "  0.38");
        check(2.675, "   2.67", "  2.67");
        // 12500000 is an exact tie for %.1e and rounds to the even digit.
        check(12_500_000.0, "1.2e+07", " 1e+07");
        check(13_500_000.0, "1.4e+07", " 1e+07");
        // 9999.995 rounds up to five integer digits at .2f, so W=7 falls back to .1f.
        check(9999.995, "10000.0", " 10000");
    }

    #[test]
    fn fit_values_seen_in_golden_files() {
        check(1327.3, "1327.30", "1327.3");
        check(12622.0, "12622.0", " 12622");
        check(315213.0, " 315213", "315213");
        check(1e6, "1000000", " 1e+06");
        check(1.3e6, "1300000", " 1e+06");
        check(5e6, "5000000", " 5e+06");
        check(5.4e6, "5400000", " 5e+06");
        check(1.3e7, "1.3e+07", " 1e+07");
        check(2878.72615, "2878.73", "2878.7");
        check(7.86505, "   7.87", "  7.87");
        check(0.4391, "   0.44", "  0.44");
    }

    #[test]
    fn fit_negative_and_huge_values() {
        check(-0.0, "  -0.00", " -0.00");
        check(-0.001, "  -0.00", " -0.00");
        check(-12.5, " -12.50", "-12.50");
        check(-123456.0, "-123456", "-1e+05");
        // %7.1e gives 8 characters here and is truncated to 7, as upstream does.
        check(-1.5e7, "-1.5e+0", "-2e+07");
        check(2.5e100, "2.5e+10", "2e+100");
    }

    #[test]
    fn c_g_matches_printf() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (560.541, "560.541"),
            (560.5405, "560.54"),
            (7807.92, "7807.92"),
            (13017.0, "13017"),
            (1909.86, "1909.86"),
            (100000.0, "100000"),
            (999999.0, "999999"),
            (999999.5, "1e+06"),
            (1234567.0, "1.23457e+06"),
            (1e6, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (0.000123456789, "0.000123457"),
            (-2.5, "-2.5"),
            (1e100, "1e+100"),
            (123456.5, "123456"),
            (123457.5, "123458"),
            (f64::NAN, "nan"),
            (NO_ROWS_AVERAGE, "-nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for &(value, want) in cases {
            assert_eq!(c_g(value), want, "c_g({value})");
        }
    }

    #[test]
    fn average_of_no_rows_prints_minus_nan() {
        assert_eq!(c_g(average(0.0, 0)), "-nan");
        assert_eq!(average(3.0, 2), 1.5);
    }

    #[test]
    fn c_exp_spells_exponents_like_c() {
        assert_eq!(c_exp(1.2e7, 1), "1.2e+07");
        assert_eq!(c_exp(1e-5, 0), "1e-05");
        assert_eq!(c_exp(1e100, 0), "1e+100");
        assert_eq!(c_exp(0.0, 1), "0.0e+00");
    }
}
