//! Which lines of a file a pattern matches: line by line, or — the same lines, faster —
//! by searching the whole file and checking only the lines its matches touch.
//!
//! A file is lines split at `\n`, each without a final `\r`, and the pattern is matched
//! against each line alone. Calling the regex once per line costs its per-search overhead
//! on every line, which in a WebAssembly guest is most of a search. Searching the whole text
//! once, with the same pattern compiled in multi-line CRLF mode, finds a match starting at
//! or before every line that has one, so only the lines a match touches need the
//! line-by-line check, and the lines between are skipped unread by the regex:
//!
//! - If line `L` matches alone at offset `q`, the same bytes match in the whole text at
//!   `L`'s start plus `q`: in multi-line CRLF mode `^` and `$` hold at a line's edges in the
//!   text as at the edges of the line alone, and word boundaries see `\n` and `\r` as they
//!   see the line's ends (neither is a word character). So a leftmost search from any line
//!   start at or before `L` finds a match that starts at or before `L`'s match: either it
//!   touches `L`, and `L` is checked, or it ends before `L`, and the next search starts at
//!   or before `L`.
//! - That holds unless the pattern asserts something about the text's own edges: `\A`,
//!   `\z`, or `^`/`$` with multi-line or CRLF mode turned off inside it (`(?-m)`, `(?-R)`,
//!   where `$` holds only before `\n`, not before a CRLF line's `\r`). Such a pattern, and
//!   one the syntax parser cannot read, is searched line by line.
//! - The whole-file regex cannot match `\n` or `\r` (`within_lines`): a line's own match
//!   holds neither, and no search then runs past the line its match could start in.
//! - It also needs the line to hold the same bytes in both: CRLF mode's `.` does not match
//!   `\r`, which a line keeps unless it is its last byte. A file with such a `\r` is
//!   searched line by line.
//! - A match found in the whole text is never reported as such: every line it touches is
//!   matched alone, so a match across lines (`a\sb` over `a\nb`) or one that needs a `\r`
//!   the line drops finds nothing it should not.
//!
//! `lines_tests.rs` compares both ways on many random patterns and texts.

use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::{
    Capture, Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind,
    Literal, Look, Repetition,
};

/// A pattern, as the line-by-line regex and, where it finds the same lines, the
/// whole-text one.
pub struct Lines {
    line: Regex,
    whole: Option<Regex>,
}

impl Lines {
    pub fn new(pattern: &str, case_insensitive: bool) -> Result<Lines, regex::Error> {
        let line = RegexBuilder::new(pattern)
            .case_insensitive(case_insensitive)
            .build()?;
        Ok(Lines {
            line,
            whole: whole_file(pattern, case_insensitive),
        })
    }

    /// Calls `found(index, line, start)` for each line `text` has that matches, in order —
    /// its index from 0, the line without its ending, where the first match starts —
    /// until `found` returns false.
    pub fn each(&self, text: &[u8], found: impl FnMut(usize, &[u8], usize) -> bool) {
        // A final `\n` ends the last line; it does not start an empty one.
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        match &self.whole {
            Some(whole) if !lone_cr(text) => self.each_whole(whole, text, found),
            Some(_) | None => self.each_line(text, found),
        }
    }

    /// Every line, one by one.
    fn each_line(&self, text: &[u8], mut found: impl FnMut(usize, &[u8], usize) -> bool) {
        for (index, line) in text
            .split(|&byte| byte == b'\n')
            .map(without_cr)
            .enumerate()
        {
            if let Some(start) = self.line.find(line).map(|m| m.start())
                && !found(index, line, start)
            {
                return;
            }
        }
    }

    fn each_whole(
        &self,
        whole: &Regex,
        text: &[u8],
        mut found: impl FnMut(usize, &[u8], usize) -> bool,
    ) {
        // `start` is where line `index` starts; every search starts at a line's start.
        let (mut start, mut index) = (0, 0);
        while let Some(m) = whole.find_at(text, start) {
            loop {
                // The line ends at its `\n`, or at the end of the text.
                let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |at| start + at);
                // Lines before the one the match starts in have no match of their own.
                if end >= m.start() {
                    let line = without_cr(&text[start..end]);
                    if let Some(at) = self.line.find(line).map(|m| m.start())
                        && !found(index, line, at)
                    {
                        return;
                    }
                }
                if end == text.len() {
                    return;
                }
                start = end + 1;
                index += 1;
                if end >= m.end() {
                    break;
                }
            }
        }
    }
}

/// Whether `text` has a `\r` that is not a line's last byte: one the line keeps, which
/// `.` matches alone but not in CRLF mode.
fn lone_cr(text: &[u8]) -> bool {
    memchr::memchr_iter(b'\r', text).any(|at| text.get(at + 1).is_some_and(|&next| next != b'\n'))
}

fn without_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The whole-file regex of `pattern`, when it has one: the pattern in multi-line CRLF mode,
/// with `\n` and `\r` taken out of every class and literal ([`within_lines`]). None for a
/// pattern that asserts something about the edges of the whole text or of `\n` alone (`\A`,
/// `\z`, and `^`/`$` with multi-line or CRLF mode turned off inside it), or that does not
/// parse or print back as a pattern.
fn whole_file(pattern: &str, case_insensitive: bool) -> Option<Regex> {
    let hir = regex_syntax::ParserBuilder::new()
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .crlf(true)
        // As `regex::bytes` parses: a pattern may match bytes that are not UTF-8.
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    let looks = hir.properties().look_set();
    if [Look::Start, Look::End, Look::StartLF, Look::EndLF]
        .into_iter()
        .any(|look| looks.contains(look))
    {
        return None;
    }
    RegexBuilder::new(&within_lines(&hir).to_string())
        .build()
        .ok()
}

/// `hir` unable to match `\n` or `\r`: taken out of every class, and a literal holding one
/// never matches. A line's own match holds neither (lines end at `\n`, and a file with a `\r`
/// a line keeps is searched line by line), so none is lost; and no search runs on past the
/// end of the line a match could start in — a part that could cross lines (`[^;]*`, `\s*`)
/// would otherwise keep each search going to the end of the file, a file's search quadratic
/// in its lines.
fn within_lines(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => hir.clone(),
        HirKind::Literal(Literal(bytes)) => {
            match bytes.contains(&b'\n') || bytes.contains(&b'\r') {
                true => Hir::fail(),
                false => hir.clone(),
            }
        }
        HirKind::Class(Class::Unicode(class)) => {
            let mut class = class.clone();
            class.difference(&ClassUnicode::new([
                ClassUnicodeRange::new('\n', '\n'),
                ClassUnicodeRange::new('\r', '\r'),
            ]));
            Hir::class(Class::Unicode(class))
        }
        HirKind::Class(Class::Bytes(class)) => {
            let mut class = class.clone();
            class.difference(&ClassBytes::new([
                ClassBytesRange::new(b'\n', b'\n'),
                ClassBytesRange::new(b'\r', b'\r'),
            ]));
            Hir::class(Class::Bytes(class))
        }
        HirKind::Repetition(repetition) => Hir::repetition(Repetition {
            sub: Box::new(within_lines(&repetition.sub)),
            ..repetition.clone()
        }),
        HirKind::Capture(capture) => Hir::capture(Capture {
            sub: Box::new(within_lines(&capture.sub)),
            ..capture.clone()
        }),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(within_lines).collect()),
        HirKind::Alternation(parts) => Hir::alternation(parts.iter().map(within_lines).collect()),
    }
}

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;
