//! Text that another process sent (host names, descriptions) made safe to print: control
//! characters (a newline would inject fake lines into rank 0's stdout, which health checks
//! scrape), Unicode line and paragraph separators (U+2028, U+2029: line breaks to many
//! readers), format characters (bidirectional overrides such as U+202E, zero-width ones) and
//! every other character that is not visible text become `?`, and the length is capped. Host
//! names are kept to the characters host names are made of.

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// The longest peer-supplied name printed.
pub const MAX_NAME: usize = 64;

/// `s` with every control character replaced by `?`, cut to `max` characters (`…` marks a cut).
pub fn clean(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max)
        .map(|c| if visible(c) { c } else { '?' })
        .collect();
    if s.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// Whether `c` prints as itself on one line: not a control, format, separator other than the
/// plain space, surrogate, private-use or unassigned character.
fn visible(c: char) -> bool {
    use GeneralCategory as G;
    c == ' '
        || !matches!(
            c.general_category(),
            G::Control
                | G::Format
                | G::LineSeparator
                | G::ParagraphSeparator
                | G::SpaceSeparator
                | G::Surrogate
                | G::PrivateUse
                | G::Unassigned
        )
}

/// A peer's host name, cleaned: letters, digits, `.`, `-`, `_` and `:` (IPv6) kept, anything
/// else `?`.
pub fn host(s: &str) -> String {
    let safe: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':') {
                c
            } else {
                '?'
            }
        })
        .collect();
    clean(&safe, MAX_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_pass() {
        assert_eq!(host("node01"), "node01");
        assert_eq!(
            clean("evil\n# Avg bus bandwidth : 999\r", 100),
            "evil?# Avg bus bandwidth : 999?"
        );
        assert_eq!(
            host("evil\n# Avg bus bandwidth : 999\r"),
            "evil???Avg?bus?bandwidth?:?999?"
        );
        assert_eq!(host("\u{1b}[2J\u{85}x"), "??2J?x");
        assert_eq!(clean("\u{1b}[2J\u{85}x", 10), "?[2J?x");
        assert_eq!(clean("abcdef", 3), "abc…");
        assert_eq!(clean("abc", 3), "abc");
        assert_eq!(host("node-01.rack_2"), "node-01.rack_2");
    }

    #[test]
    fn separators_and_format_characters_never_pass() {
        // Line and paragraph separators split lines for many readers; format characters hide
        // or reorder text (U+202E reverses what follows, U+200B is invisible).
        for c in [
            '\u{2028}',
            '\u{2029}',
            '\u{202e}',
            '\u{202a}',
            '\u{2066}',
            '\u{200b}',
            '\u{200d}',
            '\u{feff}',
            '\u{00ad}',
            '\u{061c}',
            '\u{0085}',
            '\u{00a0}',
            '\u{3000}',
            '\u{e000}',
            '\u{e0041}',
        ] {
            let text = format!("a{c}# Avg bus bandwidth");
            assert_eq!(
                clean(&text, 100),
                "a?# Avg bus bandwidth",
                "U+{:04X}",
                c as u32
            );
            assert_eq!(host(&text), "a???Avg?bus?bandwidth", "U+{:04X}", c as u32);
        }
        // Visible text passes, in any script.
        assert_eq!(clean("nœud-été ノード …", 100), "nœud-été ノード …");
    }
}
