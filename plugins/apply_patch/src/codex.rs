//! Reads a patch in codex's envelope format, which models trained on codex write:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path        then the file's lines, each starting with `+`
//! *** Update File: path
//! *** Move to: new/path     optional
//! @@ def anchor():          optional: the hunk's lines come after this line
//!  context
//! -removed
//! +added
//! *** End of File           optional: the hunk ends the file
//! *** Delete File: path
//! *** End Patch
//! ```
//!
//! Hunks carry no line numbers: they are found by their lines. The grammar follows
//! codex's parser (openai/codex, `codex-rs/apply-patch`) with the same allowances
//! (whitespace around markers, a first hunk without `@@`, an empty line as an empty
//! context line), but its lines are matched exactly where codex would also try them with
//! whitespace trimmed: a context line either matches or the hunk does not apply.

use airlock_sdk::ToolError;

use crate::patch::CODEX_BEGIN;
use crate::patch::FilePatch;
use crate::patch::Hunk;
use crate::patch::HunkLine;
use crate::patch::LineKind;
use crate::patch::Op;
use crate::patch::PatchLine;
use crate::patch::Position;
use crate::unified::quote;

const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const UPDATE: &str = "*** Update File: ";
const DELETE: &str = "*** Delete File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// Whether `text` (trimmed) opens a file section.
pub fn is_file_marker(text: &str) -> bool {
    [ADD, UPDATE, DELETE]
        .iter()
        .any(|marker| text.starts_with(marker))
}

pub fn parse(lines: &[PatchLine<'_>]) -> Result<Vec<FilePatch>, ToolError> {
    let non_blank = |line: &&PatchLine<'_>| !line.text.trim().is_empty();
    let (Some(first), Some(last)) = (
        lines.iter().position(|line| non_blank(&line)),
        lines.iter().rposition(|line| non_blank(&line)),
    ) else {
        return Ok(Vec::new());
    };
    if lines[first].text.trim() != CODEX_BEGIN {
        return Err(at(
            lines[first],
            &format!("a codex patch starts with `{CODEX_BEGIN}`"),
        ));
    }
    if last == first || lines[last].text.trim() != END {
        return Err(at(
            lines[last],
            &format!(
                "the patch starts with `{CODEX_BEGIN}` but does not end with `{END}`; \
                 was it cut short?"
            ),
        ));
    }
    let body = &lines[first + 1..last];
    let mut files = Vec::new();
    let mut index = 0;
    while let Some(line) = body.get(index) {
        let marker = line.text.trim();
        if marker.is_empty() {
            index += 1;
        } else if let Some(path) = marker.strip_prefix(ADD) {
            let (file, next) = add(body, index, path)?;
            files.push(file);
            index = next;
        } else if let Some(path) = marker.strip_prefix(DELETE) {
            files.push(section(Op::Delete, *line, path, None, Vec::new())?);
            index += 1;
        } else if let Some(path) = marker.strip_prefix(UPDATE) {
            let (file, next) = update(body, index, path)?;
            files.push(file);
            index = next;
        } else {
            return Err(at(
                *line,
                &format!(
                    "`{}` is outside any file section; a section starts with `{ADD}`, \
                     `{UPDATE}` or `{DELETE}`, and every line of an added file with `+`",
                    quote(line.text)
                ),
            ));
        }
    }
    Ok(files)
}

fn section(
    op: Op,
    line: PatchLine<'_>,
    path: &str,
    move_to: Option<String>,
    hunks: Vec<Hunk>,
) -> Result<FilePatch, ToolError> {
    let path = path.trim();
    if path.is_empty() {
        return Err(at(line, "the file section names no path"));
    }
    Ok(FilePatch {
        op,
        path: path.to_owned(),
        alternatives: Vec::new(),
        move_to,
        mode: None,
        hunks,
        binary: false,
        notes: Vec::new(),
    })
}

/// `*** Add File:` and the `+` lines after it, as one hunk that inserts them into an
/// empty file (no hunk for an empty file).
fn add(body: &[PatchLine<'_>], start: usize, path: &str) -> Result<(FilePatch, usize), ToolError> {
    let mut lines = Vec::new();
    let mut index = start + 1;
    while let Some(text) = body.get(index).and_then(|line| line.text.strip_prefix('+')) {
        lines.push(HunkLine {
            kind: LineKind::Add,
            text: text.to_owned(),
            cr: body[index].cr,
            no_eol: false,
        });
        index += 1;
    }
    let hunks = if lines.is_empty() {
        Vec::new()
    } else {
        vec![Hunk {
            label: "the added lines".to_owned(),
            position: Position::Line { index: 0 },
            lines,
        }]
    };
    Ok((section(Op::Add, body[start], path, None, hunks)?, index))
}

/// `*** Update File:`, an optional `*** Move to:` and the hunks.
fn update(
    body: &[PatchLine<'_>],
    start: usize,
    path: &str,
) -> Result<(FilePatch, usize), ToolError> {
    let mut index = start + 1;
    let move_to = body
        .get(index)
        .and_then(|line| line.text.trim().strip_prefix(MOVE))
        .map(|to| to.trim().to_owned());
    if let Some(to) = &move_to {
        if to.is_empty() {
            return Err(at(body[index], "`*** Move to:` names no path"));
        }
        index += 1;
    }
    let mut hunks = Vec::new();
    loop {
        while body
            .get(index)
            .is_some_and(|line| line.text.trim().is_empty())
        {
            index += 1;
        }
        let Some(line) = body.get(index) else { break };
        let text = line.text;
        let anchor = if text.trim_end() == "@@" {
            index += 1;
            None
        } else if let Some(anchor) = text.strip_prefix("@@ ") {
            index += 1;
            // A unified hunk header (`@@ -3,4 +3,5 @@`) where a codex anchor goes gives
            // a position this format has no use for, not a line to look for.
            (!looks_like_ranges(anchor)).then(|| anchor.to_owned())
        } else if hunks.is_empty() && text.starts_with([' ', '+', '-']) {
            None
        } else {
            break;
        };
        let number = hunks.len() + 1;
        let label = match &anchor {
            Some(anchor) => format!("hunk {number} (@@ {})", quote(anchor)),
            None => format!("hunk {number}"),
        };
        let (lines, end_of_file, next) = hunk_lines(body, index);
        if lines.is_empty() {
            return Err(at(*line, &format!("{label} has no lines")));
        }
        hunks.push(Hunk {
            label,
            position: Position::Context {
                anchor,
                end_of_file,
            },
            lines,
        });
        index = next;
    }
    if hunks.is_empty() && move_to.is_none() {
        return Err(at(
            body[start],
            &format!(
                "`{UPDATE}{}` has no hunks: follow it with `@@` and lines starting with \
                 ` `, `-` or `+`",
                path.trim()
            ),
        ));
    }
    Ok((
        section(Op::Update, body[start], path, move_to, hunks)?,
        index,
    ))
}

/// The lines of one hunk from `start`: the lines, whether `*** End of File` closed them,
/// and the index after them.
fn hunk_lines(body: &[PatchLine<'_>], start: usize) -> (Vec<HunkLine>, bool, usize) {
    let mut lines: Vec<HunkLine> = Vec::new();
    // How many of the lines at the end came from empty patch lines.
    let mut trailing_empty = 0;
    let mut index = start;
    let mut end_of_file = false;
    while let Some(line) = body.get(index) {
        let text = line.text;
        if text.trim() == END_OF_FILE {
            end_of_file = true;
            index += 1;
            break;
        }
        let kind = match text.as_bytes().first() {
            None => LineKind::Context,
            Some(b' ') => LineKind::Context,
            Some(b'-') => LineKind::Remove,
            Some(b'+') => LineKind::Add,
            Some(_) => break,
        };
        trailing_empty = if text.is_empty() {
            trailing_empty + 1
        } else {
            0
        };
        lines.push(HunkLine {
            kind,
            text: text.get(1..).unwrap_or_default().to_owned(),
            cr: line.cr,
            no_eol: false,
        });
        index += 1;
    }
    // Empty lines before the next marker separate hunks or files; they are no part of
    // the hunk (inside it, an empty line stands for an empty context line).
    lines.truncate(lines.len() - trailing_empty);
    (lines, end_of_file, index)
}

/// `-3,4 +3,5 @@…`: the rest of a unified hunk header.
fn looks_like_ranges(anchor: &str) -> bool {
    let Some(rest) = anchor.strip_prefix('-') else {
        return false;
    };
    let Some((old, rest)) = rest.split_once(" +") else {
        return false;
    };
    let numbers =
        |range: &str| !range.is_empty() && range.chars().all(|c| c.is_ascii_digit() || c == ',');
    let new = rest.split(' ').next().unwrap_or_default();
    numbers(old) && numbers(new)
}

fn at(line: PatchLine<'_>, message: &str) -> ToolError {
    ToolError::new(format!("line {} of the patch: {message}", line.number))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::split_lines;

    fn parse_text(text: &str) -> Result<Vec<FilePatch>, String> {
        parse(&split_lines(text)).map_err(|err| err.message().to_owned())
    }

    #[test]
    fn reads_every_kind_of_section() -> Result<(), String> {
        let files = parse_text(
            "*** Begin Patch\n\
             *** Add File: docs/new.md\n\
             +# New\n\
             +\n\
             *** Update File: src/app.py\n\
             *** Move to: src/main.py\n\
             @@ def run():\n\
             -    old()\n\
             +    new()\n\
             \n\
             @@\n\
             \x20tail\n\
             +more\n\
             *** End of File\n\
             *** Delete File: obsolete.txt\n\
             *** End Patch\n",
        )?;
        assert_eq!(files.len(), 3);
        let add = &files[0];
        assert_eq!((add.op, add.path.as_str()), (Op::Add, "docs/new.md"));
        assert_eq!(
            add.hunks[0]
                .lines
                .iter()
                .map(|line| line.text.as_str())
                .collect::<Vec<_>>(),
            ["# New", ""]
        );
        let update = &files[1];
        assert_eq!(update.op, Op::Update);
        assert_eq!(update.move_to.as_deref(), Some("src/main.py"));
        assert_eq!(update.hunks.len(), 2);
        assert_eq!(update.hunks[0].label, "hunk 1 (@@ def run():)");
        assert_eq!(
            update.hunks[0].position,
            Position::Context {
                anchor: Some("def run():".into()),
                end_of_file: false
            }
        );
        assert_eq!(
            update.hunks[0].lines.len(),
            2,
            "the blank line separates hunks"
        );
        assert_eq!(
            update.hunks[1].position,
            Position::Context {
                anchor: None,
                end_of_file: true
            }
        );
        assert_eq!(
            (files[2].op, files[2].path.as_str()),
            (Op::Delete, "obsolete.txt")
        );
        Ok(())
    }

    #[test]
    fn a_first_hunk_may_omit_its_marker_and_a_unified_header_is_no_anchor() -> Result<(), String> {
        let files = parse_text(
            "*** Begin Patch\n*** Update File: a\n keep\n+add\n@@ -1,2 +1,3 @@\n-x\n*** End Patch",
        )?;
        let positions: Vec<_> = files[0]
            .hunks
            .iter()
            .map(|hunk| hunk.position.clone())
            .collect();
        let unanchored = Position::Context {
            anchor: None,
            end_of_file: false,
        };
        assert_eq!(positions, [unanchored.clone(), unanchored]);
        Ok(())
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        let refused = |text: &str| match parse_text(text) {
            Ok(files) => panic!("accepted: {files:?}"),
            Err(message) => message,
        };
        assert_eq!(
            refused("*** Begin Patch\n*** Add File: a\n+x\n"),
            "line 3 of the patch: the patch starts with `*** Begin Patch` but does not end \
             with `*** End Patch`; was it cut short?"
        );
        assert_eq!(
            refused("*** Update File: a\n@@\n-x\n*** End Patch\n"),
            "line 1 of the patch: a codex patch starts with `*** Begin Patch`"
        );
        assert!(
            refused("*** Begin Patch\n*** Update File: a\n*** End Patch\n")
                .contains("has no hunks")
        );
        assert!(
            refused("*** Begin Patch\n*** Add File: a\nx\n*** End Patch\n")
                .contains("is outside any file section")
        );
    }
}
