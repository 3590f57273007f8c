//! Reads a patch in unified diff format, as `git diff`, `git format-patch` and `diff -u`
//! write it, and as models imitate it.
//!
//! A file's section is either git's (`diff --git a/x b/y`, then extended headers such as
//! `new file mode`, `rename from`, then optionally `---`/`+++` and hunks) or a plain one
//! (`--- x`, `+++ y`, hunks). Lines outside the sections (a commit message, `Index:`
//! lines, prose around the diff) are skipped, as GNU patch skips them.
//!
//! Models miscount the `@@ -l,n +l,n @@` line counts more often than anything else, so a
//! hunk's body, not its counts, says which lines it has: the body runs on past the counts
//! while lines still look like hunk lines, and a mismatch is reported as a note. Only
//! the start line of the header is used, as the place to look first.

use airlock_sdk::ToolError;

use crate::patch::FilePatch;
use crate::patch::Hunk;
use crate::patch::HunkLine;
use crate::patch::LineKind;
use crate::patch::Mode;
use crate::patch::Op;
use crate::patch::PatchLine;
use crate::patch::Position;

const GIT_HEADER: &str = "diff --git ";
const DEV_NULL: &str = "/dev/null";

pub fn parse(lines: &[PatchLine<'_>]) -> Result<Vec<FilePatch>, ToolError> {
    let mut files = Vec::new();
    let mut index = 0;
    while let Some(line) = lines.get(index) {
        if line.text.starts_with(GIT_HEADER) {
            let (file, next) = git_section(lines, index)?;
            files.push(file);
            index = next;
        } else if is_file_header(lines, index) {
            let (file, next) = plain_section(lines, index)?;
            files.push(file);
            index = next;
        } else if line.text.starts_with("@@") {
            return Err(at(
                *line,
                "a hunk before any `--- a/path` / `+++ b/path` header naming its file",
            ));
        } else {
            index += 1;
        }
    }
    Ok(files)
}

/// `--- x` directly followed by `+++ y`: the two header lines of a file.
fn is_file_header(lines: &[PatchLine<'_>], index: usize) -> bool {
    lines
        .get(index)
        .is_some_and(|line| line.text.starts_with("--- "))
        && lines
            .get(index + 1)
            .is_some_and(|line| line.text.starts_with("+++ "))
}

/// What git's extended header lines say about a file.
#[derive(Debug, Default)]
struct Extended {
    new_file: Option<Mode>,
    deleted: bool,
    new_mode: Option<Mode>,
    rename_from: Option<String>,
    rename_to: Option<String>,
    binary: bool,
}

fn git_section(lines: &[PatchLine<'_>], start: usize) -> Result<(FilePatch, usize), ToolError> {
    let header = lines[start];
    let git_names = header
        .text
        .strip_prefix(GIT_HEADER)
        .and_then(git_line_names);
    let mut extended = Extended::default();
    let mut index = start + 1;
    while let Some(line) = lines.get(index) {
        let text = line.text;
        if let Some(mode) = text.strip_prefix("new file mode ") {
            extended.new_file = Some(parse_mode(*line, mode)?);
        } else if let Some(mode) = text.strip_prefix("deleted file mode ") {
            parse_mode(*line, mode)?;
            extended.deleted = true;
        } else if let Some(mode) = text.strip_prefix("old mode ") {
            parse_mode(*line, mode)?;
        } else if let Some(mode) = text.strip_prefix("new mode ") {
            extended.new_mode = Some(parse_mode(*line, mode)?);
        } else if let Some(name) = text
            .strip_prefix("rename from ")
            .or_else(|| text.strip_prefix("rename old "))
        {
            extended.rename_from = Some(header_path(name));
        } else if let Some(name) = text
            .strip_prefix("rename to ")
            .or_else(|| text.strip_prefix("rename new "))
        {
            extended.rename_to = Some(header_path(name));
        } else if text.starts_with("copy from ") || text.starts_with("copy to ") {
            return Err(at(
                *line,
                "copies (`copy from` / `copy to`) are not supported; add the new file \
                 with `new file mode` and its whole contents instead",
            ));
        } else if text.starts_with("similarity index ")
            || text.starts_with("dissimilarity index ")
            || text.starts_with("index ")
        {
            // Blob ids and similarity scores: nothing to apply.
        } else if text.starts_with("Binary files ") {
            extended.binary = true;
        } else if text == "GIT binary patch" {
            extended.binary = true;
            // The encoded data runs until the next file.
            while lines
                .get(index + 1)
                .is_some_and(|next| !next.text.starts_with(GIT_HEADER))
            {
                index += 1;
            }
        } else {
            break;
        }
        index += 1;
    }

    let mut names = git_names.map(|(old, new)| (Some(old), Some(new)));
    if is_file_header(lines, index) {
        names = Some(file_header_names(lines, index));
        index += 2;
    }
    if extended.rename_from.is_some() || extended.rename_to.is_some() {
        let (old, new) = names.unwrap_or_default();
        names = Some((
            extended.rename_from.clone().or(old),
            extended.rename_to.clone().or(new),
        ));
    }
    let Some((mut old, mut new)) = names else {
        return Err(at(
            header,
            "cannot tell which file this `diff --git` line names; write it as \
             `diff --git a/path b/path`",
        ));
    };
    if extended.new_file.is_some() {
        old = None;
    }
    if extended.deleted {
        new = None;
    }
    let (hunks, notes, next) = hunks(lines, index)?;
    let file = match (old, new) {
        (None, Some(path)) => FilePatch {
            op: Op::Add,
            path,
            alternatives: Vec::new(),
            move_to: None,
            mode: extended.new_file,
            hunks,
            binary: extended.binary,
            notes,
        },
        (Some(path), None) => FilePatch {
            op: Op::Delete,
            path,
            alternatives: Vec::new(),
            move_to: None,
            mode: None,
            hunks,
            binary: extended.binary,
            notes,
        },
        (Some(path), Some(new)) => FilePatch {
            op: Op::Update,
            move_to: (new != path).then_some(new),
            path,
            alternatives: Vec::new(),
            mode: extended.new_mode,
            hunks,
            binary: extended.binary,
            notes,
        },
        (None, None) => {
            return Err(at(header, "both sides of this file are /dev/null"));
        }
    };
    Ok((file, next))
}

fn plain_section(lines: &[PatchLine<'_>], start: usize) -> Result<(FilePatch, usize), ToolError> {
    let (old, new) = file_header_names(lines, start);
    let (hunks, notes, next) = hunks(lines, start + 2)?;
    let (op, path, alternatives) = match (old, new) {
        (None, Some(new)) => (Op::Add, new, Vec::new()),
        (Some(old), None) => (Op::Delete, old, Vec::new()),
        (Some(old), Some(new)) => {
            // Without git's headers differing names are not a rename: the patch edits
            // whichever of them exists, the old name first as GNU patch prefers it. A
            // prefix on one side only (`--- a/x`, `+++ x`) is tried without it too.
            let mut names = vec![old.clone(), new.clone()];
            names.extend(old.strip_prefix("a/").map(str::to_owned));
            names.extend(new.strip_prefix("b/").map(str::to_owned));
            let mut unique: Vec<String> = Vec::new();
            for name in names {
                if !unique.contains(&name) {
                    unique.push(name);
                }
            }
            let path = unique.remove(0);
            (Op::Update, path, unique)
        }
        (None, None) => {
            return Err(at(lines[start], "both sides of this file are /dev/null"));
        }
    };
    let file = FilePatch {
        op,
        path,
        alternatives,
        move_to: None,
        mode: None,
        hunks,
        binary: false,
        notes,
    };
    Ok((file, next))
}

/// The names on a `---` / `+++` pair (`None` for /dev/null), without their `a/` and `b/`
/// prefixes when both carry them (or one does and the other is /dev/null).
fn file_header_names(lines: &[PatchLine<'_>], index: usize) -> (Option<String>, Option<String>) {
    let name = |line: &PatchLine<'_>, marker: &str| {
        let path = header_path(line.text.strip_prefix(marker).unwrap_or_default());
        (path != DEV_NULL).then_some(path)
    };
    let old = lines.get(index).and_then(|line| name(line, "--- "));
    let new = lines.get(index + 1).and_then(|line| name(line, "+++ "));
    strip_prefixes(old, new)
}

fn strip_prefixes(old: Option<String>, new: Option<String>) -> (Option<String>, Option<String>) {
    let prefixed = |name: &Option<String>, prefix: &str| {
        name.as_ref()
            .is_none_or(|name| name.starts_with(prefix) && name.len() > prefix.len())
    };
    if (old.is_some() || new.is_some()) && prefixed(&old, "a/") && prefixed(&new, "b/") {
        let strip = |name: Option<String>| name.map(|name| name[2..].to_owned());
        (strip(old), strip(new))
    } else {
        (old, new)
    }
}

/// A path as a header line gives it: C-quoted by git when it has unusual characters,
/// else up to a tab (`diff -u` puts the modification time after one).
fn header_path(text: &str) -> String {
    if let Some((path, _)) = unquote(text) {
        return path;
    }
    let path = text.split('\t').next().unwrap_or_default();
    path.trim_end().to_owned()
}

/// The two names of `diff --git a/x b/y` (the part after `diff --git `), without their
/// prefixes when both have them. Unquoted names may contain spaces, so where there is a
/// choice the split that gives two equal names wins, as git decides it.
fn git_line_names(rest: &str) -> Option<(String, String)> {
    if rest.starts_with('"') {
        let (old, after) = unquote(rest)?;
        let after = after.strip_prefix(' ')?;
        let new = match unquote(after) {
            Some((new, _)) => new,
            None => after.to_owned(),
        };
        let (old, new) = strip_prefixes(Some(old), Some(new));
        return old.zip(new);
    }
    let splits: Vec<usize> = rest.match_indices(" b/").map(|(at, _)| at).collect();
    let same = splits.iter().copied().find(|&at| {
        let (old, new) = (&rest[..at], &rest[at + 1..]);
        old.strip_prefix("a/") == new.strip_prefix("b/")
    });
    let at = same.or_else(|| splits.first().copied()).or_else(|| {
        // `--no-prefix`: two equal halves around the middle space.
        let middle = rest.len() / 2;
        (rest.len() % 2 == 1
            && rest.is_char_boundary(middle)
            && rest[middle..].starts_with(' ')
            && rest[..middle] == rest[middle + 1..])
            .then_some(middle)
    })?;
    let (old, new) = strip_prefixes(Some(rest[..at].to_owned()), Some(rest[at + 1..].to_owned()));
    old.zip(new)
}

/// A git C-quoted string at the start of `text`: the decoded string and the rest after
/// its closing quote. `None` when `text` does not start with a well-formed one.
fn unquote(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let mut bytes = Vec::new();
    let mut chars = body.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => {
                let decoded = String::from_utf8_lossy(&bytes).into_owned();
                return Some((decoded, &body[at + 1..]));
            }
            '\\' => {
                let (_, escaped) = chars.next()?;
                let byte = match escaped {
                    'a' => 0x07,
                    'b' => 0x08,
                    'f' => 0x0c,
                    'n' => b'\n',
                    'r' => b'\r',
                    't' => b'\t',
                    'v' => 0x0b,
                    '\\' => b'\\',
                    '"' => b'"',
                    '0'..='7' => {
                        // Three octal digits: one byte of a UTF-8 sequence.
                        let mut value = escaped.to_digit(8)?;
                        for _ in 0..2 {
                            let (_, digit) = chars.next()?;
                            value = value * 8 + digit.to_digit(8)?;
                        }
                        u8::try_from(value).ok()?
                    }
                    _ => return None,
                };
                bytes.push(byte);
            }
            _ => {
                let mut buffer = [0; 4];
                bytes.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
            }
        }
    }
    None
}

fn parse_mode(line: PatchLine<'_>, mode: &str) -> Result<Mode, ToolError> {
    match mode.trim() {
        "100644" | "100664" => Ok(Mode::Regular),
        "100755" => Ok(Mode::Executable),
        "120000" => Err(at(line, "symbolic links (mode 120000) are not supported")),
        "160000" => Err(at(line, "submodules (mode 160000) are not supported")),
        other => Err(at(
            line,
            &format!("unknown file mode `{other}`; expected 100644 or 100755"),
        )),
    }
}

/// The hunks of one file, from `start`: their list, the notes about them and the index
/// of the first line after them.
fn hunks(
    lines: &[PatchLine<'_>],
    start: usize,
) -> Result<(Vec<Hunk>, Vec<String>, usize), ToolError> {
    let mut hunks = Vec::new();
    let mut notes = Vec::new();
    let mut index = start;
    loop {
        // Blank lines between two hunks of a file (models put them there) are skipped.
        let mut next = index;
        while lines.get(next).is_some_and(|line| line.text.is_empty()) {
            next += 1;
        }
        if !lines
            .get(next)
            .is_some_and(|line| line.text.starts_with("@@"))
        {
            return Ok((hunks, notes, index));
        }
        let (hunk, note, after) = hunk(lines, next, hunks.len() + 1)?;
        hunks.push(hunk);
        notes.extend(note);
        index = after;
    }
}

/// A hunk header's numbers: `@@ -old_start,old_count +new_start,new_count @@`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ranges {
    old_start: usize,
    old_count: usize,
    new_count: usize,
}

/// Parses a hunk header: its ranges (`None` for a header without numbers, `@@` or
/// `@@ @@`, which models write to mean "find it by its lines") and the label of the
/// hunk, the header without the section text git appends to it.
fn hunk_header(line: PatchLine<'_>) -> Result<(Option<Ranges>, &str), ToolError> {
    let text = line.text;
    if matches!(text.trim_end(), "@@" | "@@ @@") {
        return Ok((None, text.trim_end()));
    }
    let malformed = || {
        at(
            line,
            &format!(
                "malformed hunk header `{}`: expected `@@ -l,n +l,n @@`",
                quote(text)
            ),
        )
    };
    let rest = text.strip_prefix("@@ -").ok_or_else(malformed)?;
    let end = rest.find(" @@").ok_or_else(malformed)?;
    let (old, new) = rest[..end].split_once(" +").ok_or_else(malformed)?;
    let range = |range: &str| -> Option<(usize, usize)> {
        match range.split_once(',') {
            Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
            None => Some((range.parse().ok()?, 1)),
        }
    };
    let (old_start, old_count) = range(old).ok_or_else(malformed)?;
    let (_, new_count) = range(new).ok_or_else(malformed)?;
    let label = &text[..end + "@@ -".len() + " @@".len()];
    Ok((
        Some(Ranges {
            old_start,
            old_count,
            new_count,
        }),
        label,
    ))
}

/// One hunk from its header at `start`: the hunk, a note when its header miscounts its
/// lines, and the index after it.
fn hunk(
    lines: &[PatchLine<'_>],
    start: usize,
    number: usize,
) -> Result<(Hunk, Option<String>, usize), ToolError> {
    let header = lines[start];
    let (ranges, header_label) = hunk_header(header)?;
    let label = format!("hunk {number} ({header_label})");
    let (mut old_left, mut new_left) = ranges.map_or((0, 0), |r| (r.old_count, r.new_count));
    let mut body: Vec<HunkLine> = Vec::new();
    let mut index = start + 1;
    // The line that ended the hunk without being a header or a separator.
    let mut stray = None;
    while let Some(line) = lines.get(index) {
        let text = line.text;
        let counted = old_left == 0 && new_left == 0;
        if text.starts_with('\\') {
            // `\ No newline at end of file` (in whatever language diff spoke).
            if let Some(last) = body.last_mut() {
                last.no_eol = true;
            }
            index += 1;
            continue;
        }
        if text.starts_with(GIT_HEADER)
            || text.starts_with("@@")
            || is_file_header(lines, index)
            || (counted && text == "-- ")
        {
            // The next file, the next hunk, or `git format-patch`'s signature.
            break;
        }
        let kind = match text.as_bytes().first() {
            Some(b' ') => LineKind::Context,
            Some(b'-') => LineKind::Remove,
            Some(b'+') => LineKind::Add,
            // An empty line is an empty context line whose space was stripped (by an
            // editor, or a model), when the counts still expect lines or more hunk
            // lines follow it; otherwise it only separates the hunk from what follows.
            None if !counted || more_hunk_lines(lines, index + 1) => LineKind::Context,
            None => break,
            Some(_) => {
                stray = Some(*line);
                break;
            }
        };
        match kind {
            LineKind::Context => {
                old_left = old_left.saturating_sub(1);
                new_left = new_left.saturating_sub(1);
            }
            LineKind::Remove => old_left = old_left.saturating_sub(1),
            LineKind::Add => new_left = new_left.saturating_sub(1),
        }
        body.push(HunkLine {
            kind,
            text: text.get(1..).unwrap_or_default().to_owned(),
            cr: line.cr,
            no_eol: false,
        });
        index += 1;
    }
    if body.is_empty() {
        return Err(at(header, &format!("{label} has no lines")));
    }
    // Commentary may follow a hunk, but a line that cuts one short (a context line
    // whose leading space was lost) would silently drop the rest of it.
    if let Some(line) = stray {
        let cut_short = match ranges {
            Some(_) => old_left > 0 || new_left > 0,
            None => more_hunk_lines(lines, index + 1),
        };
        if cut_short {
            return Err(at(
                line,
                &format!(
                    "`{}` is inside {label} but is not a hunk line: every line of a hunk \
                     starts with ` ` (context), `-` (removed) or `+` (added)",
                    quote(line.text)
                ),
            ));
        }
    }

    let old_count = body.iter().filter(|line| line.is_old()).count();
    let new_count = body
        .iter()
        .filter(|line| line.kind != LineKind::Remove)
        .count();
    let position = match ranges {
        Some(ranges) => Position::Line {
            // A range without old lines names the line it comes after.
            index: if ranges.old_count == 0 {
                ranges.old_start
            } else {
                ranges.old_start.saturating_sub(1)
            },
        },
        None => Position::Context {
            anchor: None,
            end_of_file: false,
        },
    };
    let note = ranges
        .filter(|ranges| (ranges.old_count, ranges.new_count) != (old_count, new_count))
        .map(|ranges| {
            format!(
                "{label}: its header counts {} old and {} new lines but it has {old_count} \
                 and {new_count}; applied as written",
                ranges.old_count, ranges.new_count
            )
        });
    let hunk = Hunk {
        label,
        position,
        lines: body,
    };
    Ok((hunk, note, index))
}

/// Whether a hunk line (not a blank one) follows the blank lines from `index`.
fn more_hunk_lines(lines: &[PatchLine<'_>], index: usize) -> bool {
    let next = lines[index.min(lines.len())..]
        .iter()
        .position(|line| !line.text.is_empty())
        .map(|offset| index + offset);
    next.is_some_and(|next| {
        let text = lines[next].text;
        matches!(text.as_bytes().first(), Some(b' ' | b'-' | b'+')) && !is_file_header(lines, next)
    })
}

/// How a line of the patch is shown in a message: cut if long.
pub fn quote(text: &str) -> String {
    /// A line longer than this is cut in messages: enough to recognise it.
    const MAX_QUOTED_CHARS: usize = 120;
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn at(line: PatchLine<'_>, message: &str) -> ToolError {
    ToolError::new(format!("line {} of the patch: {message}", line.number))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::split_lines;

    fn parse_text(text: &str) -> Vec<FilePatch> {
        match parse(&split_lines(text)) {
            Ok(files) => files,
            Err(err) => panic!("{}", err.message()),
        }
    }

    fn texts(hunk: &Hunk) -> Vec<(LineKind, &str)> {
        hunk.lines
            .iter()
            .map(|line| (line.kind, line.text.as_str()))
            .collect()
    }

    #[test]
    fn reads_a_git_diff_with_every_kind_of_file() {
        let files = parse_text(
            "commit message\n\
             \n\
             diff --git a/src/x.rs b/src/x.rs\n\
             index 0123456..789abcd 100644\n\
             --- a/src/x.rs\n\
             +++ b/src/x.rs\n\
             @@ -1,2 +1,2 @@ fn main() {\n\
             \x20keep\n\
             -old\n\
             +new\n\
             diff --git a/new.txt b/new.txt\n\
             new file mode 100755\n\
             --- /dev/null\n\
             +++ b/new.txt\n\
             @@ -0,0 +1 @@\n\
             +hello\n\
             diff --git a/gone.txt b/gone.txt\n\
             deleted file mode 100644\n\
             Binary files a/gone.txt and /dev/null differ\n\
             diff --git a/old name.txt b/new name.txt\n\
             similarity index 100%\n\
             rename from old name.txt\n\
             rename to new name.txt\n\
             diff --git a/run.sh b/run.sh\n\
             old mode 100644\n\
             new mode 100755\n",
        );
        let summary: Vec<_> = files
            .iter()
            .map(|file| {
                (
                    file.op,
                    file.path.as_str(),
                    file.move_to.as_deref(),
                    file.mode,
                    file.hunks.len(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Op::Update, "src/x.rs", None, None, 1),
                (Op::Add, "new.txt", None, Some(Mode::Executable), 1),
                (Op::Delete, "gone.txt", None, None, 0),
                (Op::Update, "old name.txt", Some("new name.txt"), None, 0),
                (Op::Update, "run.sh", None, Some(Mode::Executable), 0),
            ]
        );
        assert_eq!(files[0].hunks[0].label, "hunk 1 (@@ -1,2 +1,2 @@)");
        assert_eq!(files[0].hunks[0].position, Position::Line { index: 0 });
        assert_eq!(
            texts(&files[0].hunks[0]),
            [
                (LineKind::Context, "keep"),
                (LineKind::Remove, "old"),
                (LineKind::Add, "new")
            ]
        );
        assert_eq!(files[1].hunks[0].position, Position::Line { index: 0 });
        assert!(files[2].binary);
    }

    #[test]
    fn reads_a_plain_diff_u_with_timestamps() {
        let files = parse_text(
            "--- calc.py\t2024-05-01 10:00:00.000000000 +0200\n\
             +++ calc.py\t2024-05-01 10:05:00.000000000 +0200\n\
             @@ -3 +3 @@\n\
             -a\n\
             +b\n\
             \\ No newline at end of file\n",
        );
        assert_eq!(files.len(), 1);
        assert_eq!(
            (files[0].op, files[0].path.as_str()),
            (Op::Update, "calc.py")
        );
        assert!(files[0].alternatives.is_empty());
        let hunk = &files[0].hunks[0];
        assert_eq!(hunk.position, Position::Line { index: 2 });
        assert_eq!(
            hunk.lines
                .iter()
                .map(|line| line.no_eol)
                .collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn one_sided_prefixes_are_kept_as_alternatives() {
        let files = parse_text("--- a/src/x\n+++ src/x\n@@ -1 +1 @@\n-a\n+b\n");
        assert_eq!(files[0].path, "a/src/x");
        assert_eq!(files[0].alternatives, ["src/x"]);
    }

    #[test]
    fn a_miscounted_hunk_is_read_by_its_body_and_noted() {
        let files = parse_text(
            "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n d\n\n@@ -9 +9 @@\n-y\n+z\n",
        );
        let file = &files[0];
        assert_eq!(file.hunks.len(), 2);
        assert_eq!(file.hunks[0].lines.len(), 4);
        assert_eq!(
            file.notes,
            [
                "hunk 1 (@@ -1,2 +1,2 @@): its header counts 2 old and 2 new lines but it \
              has 3 and 3; applied as written"
            ]
        );
    }

    #[test]
    fn blank_lines_are_context_only_inside_a_hunk() {
        let files = parse_text("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n\n\n");
        assert_eq!(
            texts(&files[0].hunks[0]),
            [
                (LineKind::Context, "a"),
                (LineKind::Context, ""),
                (LineKind::Remove, "b"),
                (LineKind::Add, "c")
            ]
        );
        assert!(files[0].notes.is_empty(), "{:?}", files[0].notes);
    }

    #[test]
    fn a_line_that_cuts_a_hunk_short_is_refused_but_commentary_after_one_is_not() {
        let Err(err) = parse(&split_lines(
            "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\ndef f():\n-b\n+c\n",
        )) else {
            panic!("a hunk with a stray line was accepted");
        };
        assert_eq!(
            err.message(),
            "line 5 of the patch: `def f():` is inside hunk 1 (@@ -1,3 +1,3 @@) but is not \
             a hunk line: every line of a hunk starts with ` ` (context), `-` (removed) or \
             `+` (added)"
        );
        let files = parse_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\nThat fixes it.\n");
        assert_eq!(files[0].hunks[0].lines.len(), 2);
    }

    #[test]
    fn a_header_without_numbers_is_found_by_its_lines() {
        let files = parse_text("--- a/x\n+++ b/x\n@@ @@\n a\n-b\n+c\n");
        assert_eq!(
            files[0].hunks[0].position,
            Position::Context {
                anchor: None,
                end_of_file: false
            }
        );
    }

    #[test]
    fn quoted_and_spaced_names() {
        assert_eq!(
            git_line_names("a/my file.txt b/my file.txt"),
            Some(("my file.txt".into(), "my file.txt".into()))
        );
        assert_eq!(
            git_line_names(r#""a/tab\there" "b/caf\303\251""#),
            Some(("tab\there".into(), "café".into()))
        );
        assert_eq!(
            git_line_names("x.txt x.txt"),
            Some(("x.txt".into(), "x.txt".into()))
        );
    }

    #[test]
    fn refusals_name_the_line() {
        let refused = |text: &str| match parse(&split_lines(text)) {
            Ok(files) => panic!("accepted: {files:?}"),
            Err(err) => err.message().to_owned(),
        };
        assert_eq!(
            refused("@@ -1 +1 @@\n-a\n+b\n"),
            "line 1 of the patch: a hunk before any `--- a/path` / `+++ b/path` header \
             naming its file"
        );
        assert_eq!(
            refused("--- a/x\n+++ b/x\n@@ -1 +1\n-a\n"),
            "line 3 of the patch: malformed hunk header `@@ -1 +1`: expected `@@ -l,n +l,n @@`"
        );
        assert!(refused("diff --git a/l b/l\nnew file mode 120000\n").contains("symbolic links"));
        assert!(refused("diff --git a/x b/y\ncopy from x\ncopy to y\n").contains("copies"));
    }
}
