//! Numbers read the way nccl-tests' C code reads them, for the command line and the
//! environment: `strtol(s, &end, 0)` with its unread rest, `strtoul` digits that saturate,
//! `atof` of a prefix, and nccl-tests' size parser (`parsesize`: a decimal number and a K/M/G
//! suffix). Callers decide what is lenient (a warning) and what is an error.

/// Reads a C `strtol(s, &end, 0)` prefix: optional blanks and sign, `0x` hex, leading-`0` octal or
/// decimal. Returns the value (None on overflow) and the unread rest, or `None` with no digits.
pub fn strtol(s: &str) -> Option<(Option<i64>, &str)> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let b = t.as_bytes();
    let (radix, start) =
        if b.len() > 2 && b[0] == b'0' && (b[1] | 0x20) == b'x' && b[2].is_ascii_hexdigit() {
            (16, 2)
        } else if b.first() == Some(&b'0') {
            (8, 0)
        } else {
            (10, 0)
        };
    let digits = t[start..]
        .bytes()
        .take_while(|c| (*c as char).is_digit(radix))
        .count();
    if digits == 0 {
        return None;
    }
    let end = start + digits;
    let magnitude = i128::from_str_radix(&t[start..end], radix).ok();
    let value = magnitude
        .map(|m| if neg { -m } else { m })
        .and_then(|v| i64::try_from(v).ok());
    Some((value, &t[end..]))
}

/// The leading digits of `s` in `radix`, as `strtoul` reads them after any sign and prefix:
/// 0 without digits, saturating on overflow.
pub fn leading_digits(s: &str, radix: u32) -> u64 {
    s.chars()
        .map_while(|c| c.to_digit(radix))
        .fold(0u64, |acc, d| {
            acc.saturating_mul(u64::from(radix))
                .saturating_add(u64::from(d))
        })
}

/// C `strtoul(s, NULL, 16)`: optional blanks and `0x`, then hex digits; junk reads as 0.
pub fn strtoul_hex(s: &str) -> u64 {
    let t = s.trim_start();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    leading_digits(t, 16)
}

/// An unsigned value in C base 0 (`0x` hex, leading-`0` octal, decimal) or with a `0b` binary
/// prefix, after optional blanks; junk reads as 0.
pub fn unsigned_any_base(s: &str) -> u64 {
    let v = s.trim_start();
    if let Some(b) = v.strip_prefix("0b").or_else(|| v.strip_prefix("0B")) {
        leading_digits(b, 2)
    } else if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        leading_digits(h, 16)
    } else if v.starts_with('0') {
        leading_digits(v, 8)
    } else {
        leading_digits(v, 10)
    }
}

/// C `atof`: the longest numeric prefix, 0 when there is none.
pub fn atof(s: &str) -> f64 {
    let t = s.trim_start();
    (1..=t.len())
        .rev()
        .filter(|&i| t.is_char_boundary(i))
        .find_map(|i| t[..i].parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Why a size could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeError {
    /// No number at the start.
    NotANumber(String),
    /// A suffix other than K, M or G.
    Suffix {
        /// The suffix character.
        suffix: char,
        /// The whole value.
        text: String,
    },
    /// Below zero.
    Negative(String),
    /// 2^62 bytes or more (or not finite).
    TooLarge(String),
}

impl std::fmt::Display for SizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SizeError::NotANumber(t) => write!(f, "'{t}' is not a number"),
            SizeError::Suffix { suffix, text } => {
                write!(
                    f,
                    "unknown size suffix '{suffix}' in '{text}' (use K, M or G)"
                )
            }
            SizeError::Negative(t) => write!(f, "'{t}' is negative"),
            SizeError::TooLarge(t) => write!(f, "'{t}' is too large"),
        }
    }
}

impl std::error::Error for SizeError {}

/// Reads a size the way nccl-tests does: a decimal number (fractions and exponents allowed), then
/// optional blanks and one suffix character K/M/G (binary; case-insensitive). Later characters
/// are ignored, so `1MB` is 1 MiB.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim_start();
    let b = t.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        frac_digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += 1 + frac_digits;
    }
    let not_a_number = || SizeError::NotANumber(s.to_string());
    if int_digits + frac_digits == 0 {
        return Err(not_a_number());
    }
    if i < b.len() && (b[i] | 0x20) == b'e' {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let exp_digits = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp_digits > 0 {
            i = j + exp_digits;
        }
    }
    let number: f64 = t[..i].parse().map_err(|_| not_a_number())?;
    let mult = match t[i..].trim_start().chars().next() {
        None => 1.0,
        Some('K' | 'k') => 1024.0,
        Some('M' | 'm') => 1024.0 * 1024.0,
        Some('G' | 'g') => 1024.0 * 1024.0 * 1024.0,
        Some(suffix) => {
            return Err(SizeError::Suffix {
                suffix,
                text: s.to_string(),
            });
        }
    };
    let bytes = number * mult;
    if number < 0.0 || bytes.is_sign_negative() && bytes != 0.0 {
        return Err(SizeError::Negative(s.to_string()));
    }
    // 2^62 bytes is far beyond any GPU and keeps every later multiplication in range.
    if !bytes.is_finite() || bytes >= (1u64 << 62) as f64 {
        return Err(SizeError::TooLarge(s.to_string()));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtol_like_c() {
        assert_eq!(strtol("10"), Some((Some(10), "")));
        assert_eq!(strtol("0x10"), Some((Some(16), "")));
        assert_eq!(strtol("010"), Some((Some(8), "")));
        assert_eq!(strtol("  -7z"), Some((Some(-7), "z")));
        assert_eq!(strtol("50--iters"), Some((Some(50), "--iters")));
        assert_eq!(strtol("0"), Some((Some(0), "")));
        assert_eq!(strtol("0x"), Some((Some(0), "x")));
        assert_eq!(strtol("abc"), None);
        assert_eq!(strtol(""), None);
        assert_eq!(strtol("99999999999999999999").map(|x| x.0), Some(None));
    }

    #[test]
    fn unsigned_forms() {
        assert_eq!(strtoul_hex(" 0X7"), 7);
        assert_eq!(strtoul_hex("ff"), 255);
        assert_eq!(strtoul_hex("junk"), 0);
        assert_eq!(unsigned_any_base("0b110"), 6);
        assert_eq!(unsigned_any_base(" 010"), 8);
        assert_eq!(unsigned_any_base("0x1f"), 31);
        assert_eq!(unsigned_any_base("12z"), 12);
        assert_eq!(leading_digits("99999999999999999999999", 10), u64::MAX);
    }

    #[test]
    fn sizes_like_nccl_tests() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert_eq!(parse_size("32M"), Ok(32 << 20));
        assert_eq!(parse_size("8G"), Ok(8 << 30));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("1e3"), Ok(1000));
        assert_eq!(parse_size("1MB"), Ok(1 << 20));
        assert_eq!(parse_size("1 M"), Ok(1 << 20));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("1T").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("abc").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999G").is_err());
        assert!(parse_size("1e400").is_err());
        assert_eq!(
            parse_size("1T").unwrap_err().to_string(),
            "unknown size suffix 'T' in '1T' (use K, M or G)"
        );
    }

    #[test]
    fn atof_reads_a_prefix() {
        assert_eq!(atof("100"), 100.0);
        assert_eq!(atof(" 12.5GB"), 12.5);
        assert_eq!(atof("abc"), 0.0);
    }
}
