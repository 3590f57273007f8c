//! The whole-text search finds exactly the lines the line-by-line one does: on examples of
//! each case the module doc argues, then on many random patterns and texts built from the
//! characters where the two could differ (line ends, `\r`, word and non-word bytes) and the
//! constructs that see them (anchors, boundaries, classes, repetition).

use super::*;

/// Every matching line: (index, line, where its match starts).
fn found(lines: &Lines, text: &[u8], line_by_line: bool) -> Vec<(usize, Vec<u8>, usize)> {
    let mut all = Vec::new();
    let mut push = |index, line: &[u8], start| {
        all.push((index, line.to_vec(), start));
        true
    };
    match line_by_line {
        true => lines.each_line(text.strip_suffix(b"\n").unwrap_or(text), &mut push),
        false => lines.each(text, &mut push),
    }
    all
}

fn same(pattern: &str, text: &[u8]) {
    for case_insensitive in [false, true] {
        let Ok(lines) = Lines::new(pattern, case_insensitive) else {
            return;
        };
        assert_eq!(
            found(&lines, text, false),
            found(&lines, text, true),
            "pattern {pattern:?} (case-insensitive: {case_insensitive}) over {:?}",
            String::from_utf8_lossy(text)
        );
    }
}

#[test]
fn the_fast_path_is_taken_only_for_line_local_patterns() {
    for pattern in [
        "needle_[0-9]+",
        "^fn ",
        "end$",
        r"\bword\b",
        "(?m)^x",
        "a|b",
    ] {
        assert!(whole_file(pattern, false).is_some(), "{pattern}");
    }
    for pattern in [
        r"\Afn",
        r"end\z",
        "(?-m)^fn",
        "(?-m:x$)",
        "abc(?-R)$",
        "(?-R:^)x",
    ] {
        assert!(whole_file(pattern, false).is_none(), "{pattern}");
    }
    // Bytes that are not UTF-8 parse as `regex::bytes` parses them.
    assert!(whole_file(r"(?-u:\xFF)", false).is_some());
}

#[test]
fn the_whole_file_regex_never_matches_across_a_line_end() {
    for (pattern, text) in [
        ("a[^;]*;", &b"a\n;"[..]),
        (r"a\s*b", b"a\r\nb"),
        (r"(?s)a.b", b"a\nb"),
        (r"a\nb", b"a\nb"),
        (r"\W+", b"\n\r\n"),
        (r"(?i)A[^x]B", b"a\rb"),
    ] {
        let whole = whole_file(pattern, false).expect("line local");
        assert_eq!(whole.find(text), None, "{pattern} over {text:?}");
    }
    // Yet what a line holds is found as before.
    let whole = whole_file("a[^;]*;|b", false).expect("line local");
    assert_eq!(whole.find(b"x\na ;").map(|m| m.start()), Some(2));
}

#[test]
fn examples_of_each_case() {
    let text = b"fn main() {\r\n    let a = 1;\n\n  b\r\nend\n";
    for pattern in [
        "^fn", "^$", "}$", r"\r", r"a\sb", r"1;\n", r"\n?b", "x*", r"\b", r"\B", "^", "$", ".",
        r"[^x]+$", r"\s*$", "(?-m)^fn", r"\Aend", r"end\z", "(?s).", "main",
    ] {
        same(pattern, text);
    }
    // Empty lines at the end, a text without a final line end, an empty text.
    for text in [&b"a\n\n"[..], b"a\n\n\n", b"a", b"", b"\n", b"\r\n", b"\r"] {
        for pattern in ["^$", "x*", "a", r"\r", "$"] {
            same(pattern, text);
        }
    }
}

#[test]
fn a_lone_cr_is_one_a_line_keeps() {
    assert!(!lone_cr(b"a\r\nb\r\n"));
    assert!(
        !lone_cr(b"a\r"),
        "the last line's own, dropped as a line end"
    );
    assert!(lone_cr(b"a\rb"));
    assert!(lone_cr(b"a\r\r\n"));
}

#[test]
fn stopping_stops_in_both() {
    let lines = Lines::new("a", false).expect("pattern");
    assert!(lines.whole.is_some());
    let mut seen = 0;
    lines.each(b"a\na\na\n", |_, _, _| {
        seen += 1;
        seen < 2
    });
    assert_eq!(seen, 2);
}

/// SplitMix64: enough randomness to search, and the same cases on every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

#[test]
fn random_patterns_over_random_texts_find_the_same_lines() {
    const ATOMS: &[&str] = &[
        "a",
        "b",
        "A",
        " ",
        ".",
        r"\s",
        r"\S",
        r"\w",
        r"\W",
        r"\r",
        r"\n",
        "[^a]",
        "[a-b]",
        r"[\r\n]",
        "^",
        "$",
        r"\b",
        r"\B",
        r"\b{start}",
        r"\b{end}",
        "(?-m)^",
        "(?-R)$",
        "(?-R:^)",
        "[^;]",
        r"[\s\S]",
        "(?-m:$)",
        r"\A",
        r"\z",
        "(?s:.)",
        "(?i)a",
        "é",
    ];
    const SUFFIXES: &[&str] = &["", "", "", "*", "+", "?", "{2}", "*?"];
    const TEXT: &[&str] = &["a", "b", "A", " ", "\n", "\r", "\r\n", "é", "_", "ab"];
    let mut random = Random(54);
    for _ in 0..10_000 {
        let mut pattern = String::new();
        for _ in 0..1 + random.below(4) {
            let atom = random.pick(ATOMS);
            pattern.push_str(atom);
            pattern.push_str(random.pick(SUFFIXES));
            if random.below(6) == 0 {
                pattern.push('|');
            }
        }
        let mut text = String::new();
        for _ in 0..random.below(14) {
            text.push_str(random.pick(TEXT));
        }
        same(&pattern, text.as_bytes());
    }
}
