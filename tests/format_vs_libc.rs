//! Differential test of `report::format` against the C library's own `printf` (glibc, as
//! nccl-tests uses it): the fit-to-width rule built on `snprintf("%*.*f")`/`("%*.*e")` and `%g`
//! must give the same text as ours for many values (ties, rounding boundaries, every magnitude,
//! negative values, NaN and infinities).
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::ffi::{CStr, c_char, c_int};

use nccl_perf_report::numbers::{NO_ROWS_AVERAGE, c_g, fit};

unsafe extern "C" {
    fn snprintf(buf: *mut c_char, size: usize, format: *const c_char, ...) -> c_int;
}

/// `snprintf(format, width, precision, value)`.
fn c_printf(format: &CStr, width: c_int, precision: c_int, value: f64) -> String {
    let mut buf = [0 as c_char; 512];
    // SAFETY: the buffer is writable for its whole length, snprintf writes at most that many
    // bytes including the terminating NUL, and every format used here takes two ints and a
    // double, which are the arguments passed.
    let n = unsafe {
        snprintf(
            buf.as_mut_ptr(),
            buf.len(),
            format.as_ptr(),
            width,
            precision,
            value,
        )
    };
    assert!(
        n >= 0 && (n as usize) < buf.len(),
        "snprintf failed for {value}"
    );
    // SAFETY: snprintf NUL-terminated the buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// nccl-tests' fit-to-width rule (a number printed with 2 decimals, else 1, else 0, whichever
/// first fits the column, else in exponent form cut to the column), on the C library's printf.
fn c_fit(value: f64, width: usize) -> String {
    let w = width as c_int;
    for precision in [2, 1, 0] {
        let s = c_printf(c"%*.*f", w, precision, value);
        if s.len() <= width {
            return s;
        }
    }
    let mut s = c_printf(c"%*.*e", w, if width >= 7 { 1 } else { 0 }, value);
    s.truncate(width);
    s
}

/// Values around every rounding boundary the rule has, at every magnitude of interest.
fn values() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::NAN,
        NO_ROWS_AVERAGE,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for exp in -8..=16 {
        let scale = 10f64.powi(exp);
        for base in [
            1.0, 1.25, 2.5, 4.999_999, 5.0, 9.5, 9.95, 9.995, 9.999_5, 9.999_999,
        ] {
            v.push(base * scale);
        }
        for _ in 0..40 {
            let mantissa = (random() % 10_000_000) as f64 / 1_000_000.0;
            v.push(mantissa * scale);
        }
    }
    // Exact binary ties of the two-decimal and one-decimal roundings.
    for i in 0..400 {
        v.push(f64::from(i) / 8.0 + 0.125);
        v.push(f64::from(i) * 10.0 + 0.25);
        v.push(f64::from(i) * 1000.0 + 0.5);
    }
    let negatives: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(negatives);
    v
}

#[test]
fn fit_matches_c_printf() {
    let mut checked = 0;
    for value in values() {
        for width in [6, 7, 8] {
            assert_eq!(
                fit(value, width),
                c_fit(value, width),
                "fit({value:e}, {width})"
            );
            checked += 1;
        }
    }
    assert!(checked > 5000, "{checked}");
}

#[test]
fn c_g_matches_c_printf() {
    for value in values() {
        let want = c_printf(c"%*.*g", 0, 6, value);
        assert_eq!(c_g(value), want, "c_g({value:e})");
        // `%6g`: 6 is also %g's default precision.
        let padded = c_printf(c"%*.*g", 6, 6, value);
        assert_eq!(format!("{:>6}", c_g(value)), padded, "%6g of {value:e}");
    }
}
