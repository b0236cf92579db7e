//! `NCCL_TESTS_SPLIT_MASK` / `NCCL_TESTS_SPLIT`: the colour that puts a process into one of
//! several independent communicators, as in nccl-tests. Colours are world rank op value;
//! processes with equal colours form one group.

use nccl_perf_facts::cnum;
use nccl_perf_facts::environment::TESTS_SPLIT;

/// Why no colour can be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// `MOD 0` or `DIV 0`.
    #[error("{}='{value}': {op} 0 divides by zero; use a value of 1 or more", TESTS_SPLIT.name)]
    DivisionByZero {
        /// The variable's value.
        value: String,
        /// `MOD` or `DIV`.
        op: &'static str,
    },
    /// A colour beyond a C `int`.
    #[error("split colour {colour} of rank {rank} does not fit in an int")]
    TooLarge {
        /// The colour.
        colour: u64,
        /// The world rank.
        rank: usize,
    },
}

/// The split colour of `world_rank`, from the values of `NCCL_TESTS_SPLIT_MASK` and
/// `NCCL_TESTS_SPLIT` (the mask wins when both are set). No variable gives colour 0.
/// Unlike nccl-tests, `MOD 0` / `DIV 0` are an error instead of a crash.
pub fn color(
    world_rank: usize,
    mask: Option<&str>,
    split: Option<&str>,
) -> Result<i64, SplitError> {
    let rank = world_rank as u64;
    let c = if let Some(m) = mask {
        // strtoul(value, NULL, 16): optional 0x, junk reads as 0.
        rank & cnum::strtoul_hex(m)
    } else if let Some(s) = split {
        match parse_split(s) {
            None => 0,
            Some((op, v)) => match op {
                Op::And => rank & v,
                Op::Or => rank | v,
                Op::Mod | Op::Div if v == 0 => {
                    return Err(SplitError::DivisionByZero {
                        value: s.to_string(),
                        op: if op == Op::Mod { "MOD" } else { "DIV" },
                    });
                }
                Op::Mod => rank % v,
                Op::Div => rank / v,
            },
        }
    } else {
        0
    };
    i32::try_from(c)
        .map(i64::from)
        .map_err(|_| SplitError::TooLarge {
            colour: c,
            rank: world_rank,
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    And,
    Or,
    Mod,
    Div,
}

/// `<op><value>`: op `AND`/`&`, `OR`/`|`, `MOD`/`%`, `DIV`/`/` (case-insensitive); value after
/// optional blanks, `0b` binary or C base-0 (`0x` hex, leading-`0` octal, decimal).
fn parse_split(s: &str) -> Option<(Op, u64)> {
    let t = s.trim_start();
    let ops: [(&str, Op); 8] = [
        ("and", Op::And),
        ("&", Op::And),
        ("or", Op::Or),
        ("|", Op::Or),
        ("mod", Op::Mod),
        ("%", Op::Mod),
        ("div", Op::Div),
        ("/", Op::Div),
    ];
    let (op, rest) = ops.iter().find_map(|(name, op)| {
        let head = t.get(..name.len())?;
        head.eq_ignore_ascii_case(name)
            .then(|| (*op, &t[name.len()..]))
    })?;
    Some((op, cnum::unsigned_any_base(rest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(rank: usize, s: &str) -> Result<i64, String> {
        color(rank, None, Some(s)).map_err(|e| e.to_string())
    }

    #[test]
    fn no_variable_is_one_group() {
        assert_eq!(color(7, None, None), Ok(0));
    }

    #[test]
    fn mask_is_hex_and_wins() {
        assert_eq!(color(7, Some("0x3"), Some("MOD 2")), Ok(3));
        assert_eq!(color(7, Some("6"), None), Ok(6));
        assert_eq!(color(13, Some("0x0"), None), Ok(0));
        assert_eq!(color(13, Some("junk"), None), Ok(0));
        assert_eq!(color(15, Some(" 0X7"), None), Ok(7));
    }

    #[test]
    fn split_ops_and_value_forms() {
        assert_eq!(split(13, "AND 0x3"), Ok(1));
        assert_eq!(split(13, "and0b110"), Ok(4));
        assert_eq!(split(5, "&2"), Ok(0));
        assert_eq!(split(5, "OR 8"), Ok(13));
        assert_eq!(split(5, "|010"), Ok(13));
        assert_eq!(split(13, "MOD 4"), Ok(1));
        assert_eq!(split(13, "%4"), Ok(1));
        assert_eq!(split(13, "div 4"), Ok(3));
        assert_eq!(split(13, "/ 8"), Ok(1));
        assert_eq!(split(13, "XOR 1"), Ok(0));
        assert_eq!(split(13, ""), Ok(0));
    }

    #[test]
    fn division_by_zero_is_an_error_not_a_crash() {
        let e = split(3, "MOD 0").unwrap_err();
        assert!(e.contains("MOD 0"), "{e}");
        assert!(split(3, "DIV 0").unwrap_err().contains("DIV 0"));
        assert!(split(3, "/junk").is_err());
    }

    #[test]
    fn colours_must_fit_an_int() {
        assert!(split(1, "OR 0x80000000").is_err());
    }
}
