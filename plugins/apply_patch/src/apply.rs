//! Applies one file's hunks to its text, in memory.
//!
//! A hunk's old lines (context and removed) must match the file exactly, line for line;
//! only where they match may be uncertain. A unified hunk is looked for first where its
//! header says, shifted by how far the previous hunk was found from its own header, then
//! at growing distances either side, as GNU patch does, and the distance used is
//! reported. Unlike GNU patch this never drops context lines to make a hunk fit (its
//! "fuzz"): a hunk that applies does so with every line it shows. A codex hunk has no
//! line numbers and is found by its lines, after its `@@` anchor line when it has one.
//! Hunks apply in order and never overlap: each is looked for after the previous one.

use airlock_sdk::ToolError;

use crate::lines;
use crate::lines::Eol;
use crate::lines::Line;
use crate::patch::Hunk;
use crate::patch::HunkLine;
use crate::patch::LineKind;
use crate::patch::Position;
use crate::unified::quote;

/// How far from the line its header gives a unified hunk is looked for: 1000 lines
/// either way. Line numbers a model writes from memory drift by tens of lines, and
/// edits above a hunk shift it by as many; past a thousand lines the same context is
/// more likely another place that looks alike than the one the patch meant.
pub const MAX_OFFSET_LINES: usize = 1000;

#[derive(Debug, PartialEq, Eq)]
pub struct Applied {
    pub text: String,
    /// Where hunks applied elsewhere than their header says.
    pub notes: Vec<String>,
}

/// Applies `hunks` to `original`, the text of the file `path` (named in errors).
pub fn apply(path: &str, original: &str, hunks: &[Hunk]) -> Result<Applied, ToolError> {
    let lines = lines::split(original);
    let eol = lines::dominant_eol(&lines);
    let mut out: Vec<Line<'_>> = Vec::with_capacity(lines.len());
    let mut notes = Vec::new();
    // Everything before `cursor` is already copied to `out` or replaced.
    let mut cursor = 0;
    // How far the previous unified hunk was from where its header put it.
    let mut drift = 0isize;
    for hunk in hunks {
        let old: Vec<&HunkLine> = hunk.lines.iter().filter(|line| line.is_old()).collect();
        let refuse = |reason: String| {
            ToolError::new(format!("{path}: {} does not apply: {reason}", hunk.label))
        };
        let at = match &hunk.position {
            Position::Line { index } => {
                let found = locate_by_line(&lines, &old, *index, drift, cursor).map_err(refuse)?;
                let offset = signed(found) - signed(*index);
                if offset != 0 && !old.is_empty() {
                    notes.push(format!(
                        "{} applied at line {} (offset {offset:+} lines from its header)",
                        hunk.label,
                        found + 1
                    ));
                }
                drift = offset;
                found
            }
            Position::Context {
                anchor,
                end_of_file,
            } => locate_by_context(&lines, &old, anchor.as_deref(), *end_of_file, cursor)
                .map_err(refuse)?,
        };
        out.extend_from_slice(&lines[cursor..at]);
        let mut next = at;
        for line in &hunk.lines {
            match line.kind {
                LineKind::Context => {
                    // The file's own line, with its own ending: context is not rewritten.
                    out.push(lines[next]);
                    next += 1;
                }
                LineKind::Remove => next += 1,
                LineKind::Add => out.push(Line {
                    text: &line.text,
                    eol: if line.no_eol {
                        Eol::None
                    } else if line.cr {
                        Eol::CrLf
                    } else {
                        eol
                    },
                }),
            }
        }
        cursor = next;
    }
    out.extend_from_slice(&lines[cursor..]);
    // Only the last line may lack a newline: lines added after a last line without one
    // must not run into it, and a `\ No newline` marker on a line that is no longer last
    // cannot apply.
    let last = out.len().saturating_sub(1);
    for line in &mut out[..last] {
        if line.eol == Eol::None {
            line.eol = eol;
        }
    }
    Ok(Applied {
        text: lines::join(&out),
        notes,
    })
}

fn signed(index: usize) -> isize {
    isize::try_from(index).unwrap_or(isize::MAX)
}

fn matches_at(lines: &[Line<'_>], old: &[&HunkLine], at: usize) -> bool {
    at + old.len() <= lines.len()
        && old
            .iter()
            .zip(&lines[at..])
            .all(|(patch, file)| lines::same(file.text, &patch.text))
}

/// Where a unified hunk applies: nearest to its header's line (shifted by `drift`)
/// within [`MAX_OFFSET_LINES`], at or after `cursor`.
fn locate_by_line(
    lines: &[Line<'_>],
    old: &[&HunkLine],
    index: usize,
    drift: isize,
    cursor: usize,
) -> Result<usize, String> {
    let expected = index.saturating_add_signed(drift);
    if old.is_empty() {
        // Nothing to match, so nothing says another place is meant: exactly there.
        return if expected > lines.len() {
            Err(format!(
                "it adds lines after line {expected}, but the file has only {}",
                lines::count(lines.len())
            ))
        } else if expected < cursor {
            Err(format!(
                "it adds lines after line {expected}, which an earlier hunk of the file \
                 already changed"
            ))
        } else {
            Ok(expected)
        };
    }
    for distance in 0..=MAX_OFFSET_LINES {
        let after = expected + distance;
        if after >= cursor && matches_at(lines, old, after) {
            return Ok(after);
        }
        let before = expected.checked_sub(distance).filter(|&at| at >= cursor);
        if distance > 0
            && let Some(before) = before
            && matches_at(lines, old, before)
        {
            return Ok(before);
        }
        if after >= lines.len() && before.is_none() {
            break;
        }
    }
    let low = expected.saturating_sub(MAX_OFFSET_LINES).max(cursor);
    let high = (expected + MAX_OFFSET_LINES)
        .min(lines.len().saturating_sub(1))
        .max(low);
    let mut candidates: Vec<usize> = (low..=high).collect();
    candidates.sort_by_key(|&at| at.abs_diff(expected));
    let closest = closest(lines, old, &candidates);
    let mut reason = closest.describe(lines, old);
    let whole_file = low == cursor && high + 1 >= lines.len();
    if candidates.len() > 1 {
        reason.push_str(&if !whole_file {
            format!(
                ", and it matches nowhere within {MAX_OFFSET_LINES} lines of line {}",
                expected + 1
            )
        } else if cursor == 0 {
            ", and it matches nowhere else in the file".to_owned()
        } else {
            format!(", and it matches nowhere else after line {cursor}")
        });
    }
    Err(reason)
}

/// Where a hunk without line numbers applies: after its anchor line (if any) and
/// `cursor`, at the first place its old lines match, or at the end of the file.
fn locate_by_context(
    lines: &[Line<'_>],
    old: &[&HunkLine],
    anchor: Option<&str>,
    end_of_file: bool,
    cursor: usize,
) -> Result<usize, String> {
    let after = |line: usize| {
        if line == 0 {
            String::new()
        } else {
            format!(" after line {line}")
        }
    };
    let mut start = cursor;
    if let Some(anchor) = anchor {
        match (cursor..lines.len()).find(|&at| lines::same(lines[at].text, anchor)) {
            Some(at) => start = at + 1,
            None => {
                return Err(format!(
                    "its `@@ {}` line is not in the file{}",
                    quote(anchor),
                    after(cursor)
                ));
            }
        }
    }
    if old.is_empty() {
        // Only added lines: right after the anchor, or else at the end of the file.
        return Ok(if anchor.is_some() && !end_of_file {
            start
        } else {
            lines.len()
        });
    }
    let last_start = lines.len().saturating_sub(old.len());
    if end_of_file {
        if last_start >= start && matches_at(lines, old, last_start) {
            return Ok(last_start);
        }
        let candidates = [last_start.max(start)];
        return Err(format!(
            "{} (the hunk is marked `*** End of File`, so it must end the file)",
            closest(lines, old, &candidates).describe(lines, old)
        ));
    }
    if let Some(at) = (start..=last_start).find(|&at| matches_at(lines, old, at)) {
        return Ok(at);
    }
    let candidates: Vec<usize> = (start..=lines.len().saturating_sub(1).max(start)).collect();
    let closest = closest(lines, old, &candidates);
    Err(if closest.matching == 0 {
        format!(
            "its first line `{}` is not in the file{}",
            quote(&old[0].text),
            after(start)
        )
    } else {
        format!(
            "its lines are not in the file{}; {}",
            after(start),
            closest.describe(lines, old)
        )
    })
}

/// The place where a hunk that matches nowhere comes closest: the most of its old lines
/// in place, the first candidate winning a tie.
struct Closest {
    at: usize,
    matching: usize,
}

fn closest(lines: &[Line<'_>], old: &[&HunkLine], candidates: &[usize]) -> Closest {
    let matching = |at: usize| {
        old.iter()
            .enumerate()
            .filter(|(offset, patch)| {
                lines
                    .get(at + offset)
                    .is_some_and(|file| lines::same(file.text, &patch.text))
            })
            .count()
    };
    let mut best = Closest {
        at: candidates.first().copied().unwrap_or_default(),
        matching: 0,
    };
    let mut first = true;
    for &at in candidates {
        let count = matching(at);
        if first || count > best.matching {
            best = Closest {
                at,
                matching: count,
            };
            first = false;
        }
    }
    best
}

impl Closest {
    /// The first line where the hunk differs from the file at this place.
    fn describe(&self, lines: &[Line<'_>], old: &[&HunkLine]) -> String {
        let differs = old.iter().enumerate().find(|(offset, patch)| {
            !lines
                .get(self.at + offset)
                .is_some_and(|file| lines::same(file.text, &patch.text))
        });
        let Some((offset, patch)) = differs else {
            return "it overlaps an earlier hunk of the file".to_owned();
        };
        let line = self.at + offset;
        match lines.get(line) {
            Some(file) => format!(
                "line {} is `{}` where the patch expects `{}`",
                line + 1,
                quote(file.text),
                quote(&patch.text)
            ),
            None if lines.is_empty() => format!(
                "the file is empty where the patch expects `{}`",
                quote(&patch.text)
            ),
            None => format!(
                "the file ends at line {} where the patch expects `{}`",
                lines.len(),
                quote(&patch.text)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunk(position: Position, body: &str) -> Hunk {
        let lines = body
            .lines()
            .map(|line| {
                let (marker, text) = line.split_at(1);
                HunkLine {
                    kind: match marker {
                        "-" => LineKind::Remove,
                        "+" => LineKind::Add,
                        _ => LineKind::Context,
                    },
                    text: text.to_owned(),
                    cr: false,
                    no_eol: false,
                }
            })
            .collect();
        Hunk {
            label: "hunk 1 (@@ test @@)".to_owned(),
            position,
            lines,
        }
    }

    fn at_line(index: usize, body: &str) -> Hunk {
        hunk(Position::Line { index }, body)
    }

    fn by_context(anchor: Option<&str>, body: &str) -> Hunk {
        hunk(
            Position::Context {
                anchor: anchor.map(str::to_owned),
                end_of_file: false,
            },
            body,
        )
    }

    fn applied(original: &str, hunks: &[Hunk]) -> Applied {
        match apply("f.txt", original, hunks) {
            Ok(applied) => applied,
            Err(err) => panic!("{}", err.message()),
        }
    }

    fn refused(original: &str, hunks: &[Hunk]) -> String {
        match apply("f.txt", original, hunks) {
            Ok(applied) => panic!("applied: {applied:?}"),
            Err(err) => err.message().to_owned(),
        }
    }

    #[test]
    fn replaces_lines_where_the_header_says() {
        let out = applied("a\nb\nc\n", &[at_line(1, " b\n-c\n+C")]);
        assert_eq!(out.text, "a\nb\nC\n");
        assert!(out.notes.is_empty());
    }

    #[test]
    fn finds_a_moved_hunk_and_reports_the_offset() {
        let original = "x\ny\nz\na\nb\nc\n";
        let out = applied(original, &[at_line(0, " a\n-b\n+B\n c")]);
        assert_eq!(out.text, "x\ny\nz\na\nB\nc\n");
        assert_eq!(
            out.notes,
            ["hunk 1 (@@ test @@) applied at line 4 (offset +3 lines from its header)"]
        );
    }

    #[test]
    fn the_drift_of_one_hunk_carries_to_the_next() {
        let original = "0\n1\n2\n3\n4\n5\n6\n7\n";
        // Both headers are 2 lines early; the second is looked for at its header's line
        // plus the first one's offset, and found there.
        let out = applied(original, &[at_line(0, "-2\n+two"), at_line(3, "-5\n+five")]);
        assert_eq!(out.text, "0\n1\ntwo\n3\n4\nfive\n6\n7\n");
        assert_eq!(out.notes.len(), 2);
    }

    #[test]
    fn a_hunk_too_far_from_its_header_does_not_apply() {
        let mut original = "filler\n".repeat(MAX_OFFSET_LINES + 1);
        original.push_str("target\n");
        let message = refused(&original, &[at_line(0, "-target\n+changed")]);
        assert!(
            message.starts_with(
                "f.txt: hunk 1 (@@ test @@) does not apply: line 1 is `filler` where the \
                 patch expects `target`, and it matches nowhere within 1000 lines of line 1"
            ),
            "{message}"
        );
    }

    #[test]
    fn context_is_never_fuzzed() {
        let message = refused("a\nb\nc\n", &[at_line(0, " a\n-b\n+B\n  c")]);
        assert_eq!(
            message,
            "f.txt: hunk 1 (@@ test @@) does not apply: line 3 is `c` where the patch \
             expects ` c`, and it matches nowhere else in the file"
        );
    }

    #[test]
    fn hunks_apply_in_order_without_overlapping() {
        // The second hunk's lines are only before the first hunk's end.
        let message = refused(
            "a\nb\nc\n",
            &[at_line(0, "-a\n-b\n+x"), at_line(0, "-a\n+y")],
        );
        assert!(
            message.contains("line 3 is `c` where the patch expects `a`"),
            "{message}"
        );
    }

    #[test]
    fn a_missing_final_newline_is_kept_added_and_removed() {
        // Kept: the untouched last line keeps its missing newline.
        assert_eq!(applied("a\nb", &[at_line(0, "-a\n+A\n b")]).text, "A\nb");
        // Added: `-b` then `+b` without a marker.
        let mut add_newline = at_line(1, "-b\n+b");
        add_newline.lines[0].no_eol = true;
        assert_eq!(applied("a\nb", &[add_newline]).text, "a\nb\n");
        // Removed: `+b` carries the marker.
        let mut remove_newline = at_line(1, "-b\n+b");
        remove_newline.lines[1].no_eol = true;
        assert_eq!(applied("a\nb\n", &[remove_newline]).text, "a\nb");
        // Lines appended after a last line without a newline do not run into it.
        assert_eq!(applied("a", &[at_line(1, "+b")]).text, "a\nb\n");
    }

    #[test]
    fn crlf_lines_stay_crlf() {
        let out = applied("a\r\nb\r\nc\r\n", &[at_line(1, " b\n-c\n+C\n+D")]);
        assert_eq!(out.text, "a\r\nb\r\nC\r\nD\r\n");
    }

    #[test]
    fn a_pure_insertion_goes_exactly_where_its_header_says() {
        assert_eq!(applied("a\nb\n", &[at_line(1, "+x")]).text, "a\nx\nb\n");
        assert_eq!(applied("", &[at_line(0, "+x\n+y")]).text, "x\ny\n");
        assert_eq!(
            refused("a\n", &[at_line(5, "+x")]),
            "f.txt: hunk 1 (@@ test @@) does not apply: it adds lines after line 5, but the \
             file has only 1 line"
        );
    }

    #[test]
    fn context_hunks_follow_their_anchor() {
        let original = "def a():\n    pass\ndef b():\n    pass\n";
        let out = applied(
            original,
            &[by_context(Some("def b():"), "-    pass\n+    return 1")],
        );
        assert_eq!(out.text, "def a():\n    pass\ndef b():\n    return 1\n");
        assert_eq!(
            applied(
                original,
                &[by_context(Some("def a():"), "+    \"\"\"A.\"\"\"")]
            )
            .text,
            "def a():\n    \"\"\"A.\"\"\"\n    pass\ndef b():\n    pass\n"
        );
        assert_eq!(
            applied("a\n", &[by_context(None, "+z")]).text,
            "a\nz\n",
            "added lines without an anchor go at the end"
        );
    }

    #[test]
    fn context_hunks_say_why_they_do_not_apply() {
        let original = "def a():\n    pass\n";
        assert_eq!(
            refused(original, &[by_context(Some("def c():"), "-x")]),
            "f.txt: hunk 1 (@@ test @@) does not apply: its `@@ def c():` line is not in \
             the file"
        );
        assert_eq!(
            refused(original, &[by_context(None, " def a():\n-    return")]),
            "f.txt: hunk 1 (@@ test @@) does not apply: its lines are not in the file; line \
             2 is `    pass` where the patch expects `    return`"
        );
        assert_eq!(
            refused(original, &[by_context(None, "-nothing")]),
            "f.txt: hunk 1 (@@ test @@) does not apply: its first line `nothing` is not in \
             the file"
        );
        let end = hunk(
            Position::Context {
                anchor: None,
                end_of_file: true,
            },
            "-def a():",
        );
        assert!(refused(original, &[end]).contains("must end the file"));
    }
}
