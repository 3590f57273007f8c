//! Fitting untrusted text into a line of output: cutting it to a width, folding it onto one
//! line, keeping its first lines.
//!
//! Widths are counted in characters, not terminal cells: a few double-width characters may
//! overflow a line by as many columns, which is preferable to a Unicode-width table here.

use std::borrow::Cow;

use super::pretty::compact_json;

/// Characters of a call's arguments shown on its one line: enough for a path and the start of
/// a pattern or a content; an approval request shows what the call would do in full.
pub const ARGUMENTS_CHARS: usize = 120;

/// `text` cut to at most `max` characters, the last of which is then an ellipsis.
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    if text.chars().count() <= max {
        return Cow::Borrowed(text);
    }
    let Some(keep) = max.checked_sub(1) else {
        return Cow::Borrowed("");
    };
    let mut short: String = text.chars().take(keep).collect();
    short.push('…');
    Cow::Owned(short)
}

/// `text` on one line: every run of whitespace, line breaks included, becomes one space.
pub fn fold_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first `max_lines` lines of `text`, each cut to `max_chars` and without trailing
/// whitespace, and how many lines were left out. Trailing empty lines do not count.
pub fn head_lines(text: &str, max_lines: usize, max_chars: usize) -> (Vec<String>, usize) {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let shown = lines
        .iter()
        .take(max_lines)
        .map(|line| cut(line.trim_end(), max_chars).into_owned())
        .collect();
    (shown, lines.len().saturating_sub(max_lines))
}

/// A call's arguments on one line of at most [`ARGUMENTS_CHARS`]: compact JSON in the order
/// written when they are JSON, the text with its whitespace folded when not (a model may
/// propose arguments that do not parse).
pub fn short_arguments(arguments_json: &str) -> String {
    let one_line = compact_json(arguments_json).unwrap_or_else(|| fold_whitespace(arguments_json));
    cut(&one_line, ARGUMENTS_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_counts_characters_not_bytes() {
        assert_eq!(cut("ééééé", 5), "ééééé");
        assert_eq!(cut("éééééé", 5), "éééé…");
        assert_eq!(cut("abc", 1), "…");
        assert_eq!(cut("abc", 0), "");
    }

    #[test]
    fn folding_joins_lines_and_runs_of_spaces() {
        assert_eq!(fold_whitespace("  a\n\tb   c \r\n"), "a b c");
        assert_eq!(fold_whitespace(""), "");
    }

    #[test]
    fn head_lines_counts_what_it_leaves_out() {
        let (lines, more) = head_lines("one\ntwo  \nthree\nfour\n\n", 2, 80);
        assert_eq!(lines, ["one", "two"]);
        assert_eq!(more, 2);
        let (lines, more) = head_lines("a very long line", 5, 6);
        assert_eq!(lines, ["a ver…"]);
        assert_eq!(more, 0);
        let (lines, more) = head_lines("", 5, 80);
        assert!(lines.is_empty());
        assert_eq!(more, 0);
    }

    #[test]
    fn arguments_are_compacted_in_their_order_and_cut() {
        assert_eq!(
            short_arguments("{\n  \"path\": \"src/lib.rs\",\n  \"content\": \"a b\"\n}"),
            r#"{"path":"src/lib.rs","content":"a b"}"#
        );
        assert_eq!(short_arguments("{path: oops\n}"), "{path: oops }");
        let long = format!(r#"{{"content":"{}"}}"#, "x".repeat(200));
        let short = short_arguments(&long);
        assert_eq!(short.chars().count(), ARGUMENTS_CHARS);
        assert!(short.starts_with(r#"{"content":"xxx"#), "{short}");
        assert!(short.ends_with('…'), "{short}");
    }
}
