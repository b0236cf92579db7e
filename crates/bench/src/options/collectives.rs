//! `--collectives`: the benchmarks one launch runs one after the other, each printing the
//! section its own program prints (docs/health.md).

use super::{OptionsError, Reader};
use nccl_perf_facts::BENCHMARKS;

/// `--collectives LIST`: benchmark names (as in [`BENCHMARKS`], `_perf` optional) in the order
/// given, each once; `all` is every benchmark in the table's order. Empty when not given (the
/// program's own collective alone).
pub(super) fn read(r: &mut Reader) -> Result<Vec<&'static str>, OptionsError> {
    match r.given("collectives")? {
        None => Ok(Vec::new()),
        Some(list) => parse(&list),
    }
}

/// Reads a list (see [`read`]).
pub fn parse(list: &str) -> Result<Vec<&'static str>, OptionsError> {
    let mut names: Vec<&'static str> = Vec::new();
    for word in list.split(',').map(str::trim) {
        if word.is_empty() {
            continue;
        }
        if word.eq_ignore_ascii_case("all") {
            for b in BENCHMARKS {
                if !names.contains(&b.name) {
                    names.push(b.name);
                }
            }
            continue;
        }
        let bare = word.strip_suffix("_perf").unwrap_or(word);
        let Some(b) = BENCHMARKS
            .iter()
            .find(|b| b.name.eq_ignore_ascii_case(bare))
        else {
            return Err(OptionsError::Invalid(format!(
                "--collectives: '{}' is not a benchmark; the names are {}, or all",
                crate::bootstrap::peer_text::clean(word, 64),
                BENCHMARKS
                    .iter()
                    .map(|b| b.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if !names.contains(&b.name) {
            names.push(b.name);
        }
    }
    if names.is_empty() {
        return Err(OptionsError::Invalid(
            "--collectives needs at least one benchmark name (e.g. all_reduce,all_gather), or all"
                .into(),
        ));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_or_without_perf_in_order_each_once() {
        assert_eq!(
            parse("all_reduce, all_gather_perf,,ALL_REDUCE,sendrecv").unwrap(),
            ["all_reduce", "all_gather", "sendrecv"]
        );
        let all = parse("all").unwrap();
        assert_eq!(all.len(), BENCHMARKS.len());
        assert_eq!(all[0], "all_reduce");
        assert_eq!(parse("sendrecv,all").unwrap()[0], "sendrecv");
    }

    #[test]
    fn unknown_or_empty_lists_are_argument_errors() {
        let OptionsError::Invalid(m) = parse("all_reduce,allreduce").unwrap_err() else {
            panic!()
        };
        assert!(m.starts_with("--collectives: 'allreduce' is not a benchmark; the names are all_reduce, all_gather"), "{m}");
        assert!(matches!(parse(" , "), Err(OptionsError::Invalid(_))));
        let OptionsError::Invalid(m) = parse("x\u{1b}[2J").unwrap_err() else {
            panic!()
        };
        assert!(!m.contains('\u{1b}'), "{m}");
    }
}
