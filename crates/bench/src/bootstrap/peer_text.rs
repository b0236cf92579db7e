//! Text that another process sent (host names, descriptions) made safe to print: control
//! characters (a newline would inject fake lines into rank 0's stdout, which health checks
//! scrape) become `?`, and the length is capped.

/// The longest peer-supplied name printed.
pub const MAX_NAME: usize = 64;

/// `s` with every control character replaced by `?`, cut to `max` characters (`…` marks a cut).
pub fn clean(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// A peer's host name, cleaned.
pub fn host(s: &str) -> String {
    clean(s, MAX_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_pass() {
        assert_eq!(host("node01"), "node01");
        assert_eq!(
            host("evil\n# Avg bus bandwidth : 999\r"),
            "evil?# Avg bus bandwidth : 999?"
        );
        assert_eq!(host("\u{1b}[2J\u{85}x"), "?[2J?x");
        assert_eq!(clean("abcdef", 3), "abc…");
        assert_eq!(clean("abc", 3), "abc");
    }
}
