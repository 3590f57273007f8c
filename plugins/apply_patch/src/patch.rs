//! What a patch says, whichever format it came in: for each file an operation, a path and
//! the hunks to apply. The two parsers (`unified`, `codex`) produce this; `apply` and
//! `tool` consume it without knowing which format it was.

use airlock_sdk::ToolError;
use serde::Serialize;

use crate::codex;
use crate::unified;

/// The format a patch was written in, detected from its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `git diff` / `diff -u` output: `---`/`+++` headers and `@@ -l,n +l,n @@` hunks.
    Unified,
    /// codex's envelope: `*** Begin Patch` … `*** End Patch`.
    Codex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The file must not exist; it is created from the hunks.
    Add,
    /// The file must exist; it is removed (after its hunks, if any, check its contents).
    Delete,
    /// The file must exist; its hunks are applied and it may be moved.
    Update,
}

/// The two file modes a text patch can give a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Regular,
    Executable,
}

impl Mode {
    /// How git writes the mode.
    pub fn git(self) -> &'static str {
        match self {
            Mode::Regular => "100644",
            Mode::Executable => "100755",
        }
    }

    pub fn from_executable(executable: bool) -> Self {
        if executable {
            Mode::Executable
        } else {
            Mode::Regular
        }
    }
}

/// One file's part of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    pub op: Op,
    /// The file the patch names (for a rename: the old name), workspace-relative.
    pub path: String,
    /// Other names the file may go by, tried in order when `path` does not exist. Only a
    /// plain `diff -u` patch has them: its `---` and `+++` names may differ without
    /// meaning a rename (GNU patch then uses whichever file exists).
    pub alternatives: Vec<String>,
    /// The new name of a renamed file.
    pub move_to: Option<String>,
    /// The mode the patch gives the file, when it says (`new file mode`, `new mode`).
    pub mode: Option<Mode>,
    pub hunks: Vec<Hunk>,
    /// The patch carries this file's change as binary (`Binary files … differ`, `GIT
    /// binary patch`), which a text patch cannot apply.
    pub binary: bool,
    /// What the parser had to interpret, for the result (a hunk whose header miscounts
    /// its lines).
    pub notes: Vec<String>,
}

/// A contiguous change: lines to find in the file and what replaces them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// How messages name the hunk: `hunk 2 (@@ -10,4 +10,5 @@)`.
    pub label: String,
    pub position: Position,
    pub lines: Vec<HunkLine>,
}

/// Where a hunk goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// A unified hunk: the 0-based index in the original file of its first old line (for
    /// a hunk without old lines, where its new lines go), as its header gives it.
    Line { index: usize },
    /// A codex hunk, found by its lines alone: after the optional `@@ <anchor>` line, and
    /// at the very end of the file when it was marked `*** End of File`.
    Context {
        anchor: Option<String>,
        end_of_file: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// In the file before and after.
    Context,
    /// In the file before only.
    Remove,
    /// In the file after only.
    Add,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkLine {
    pub kind: LineKind,
    /// The line without its marker and without its line ending.
    pub text: String,
    /// The line ended in `\r\n` in a patch that otherwise uses `\n`: a diff of a file
    /// with CRLF endings. An added line keeps that ending.
    pub cr: bool,
    /// Followed by `\ No newline at end of file`: an added line gets no line ending.
    pub no_eol: bool,
}

impl HunkLine {
    pub fn is_old(&self) -> bool {
        matches!(self.kind, LineKind::Context | LineKind::Remove)
    }
}

/// A parsed patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub format: Format,
    pub files: Vec<FilePatch>,
}

/// One line of the patch text, without its line ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchLine<'a> {
    /// 1-based, for messages.
    pub number: usize,
    pub text: &'a str,
    /// See [`HunkLine::cr`].
    pub cr: bool,
}

/// The line that opens a codex patch.
pub const CODEX_BEGIN: &str = "*** Begin Patch";

/// Parses `text` in whichever format it is written.
pub fn parse(text: &str) -> Result<Patch, ToolError> {
    let all = split_lines(text);
    let lines = unfenced(&all);
    let format = detect(lines);
    let files = match format {
        Format::Unified => unified::parse(lines)?,
        Format::Codex => codex::parse(lines)?,
    };
    if files.is_empty() {
        return Err(ToolError::new(match format {
            Format::Unified => {
                "the patch changes no file: expected unified diff headers (`--- a/path`, \
                 `+++ b/path`) followed by `@@ -l,n +l,n @@` hunks, or a codex patch \
                 starting with `*** Begin Patch`"
            }
            Format::Codex => {
                "the patch changes no file: it has no `*** Add File`, \
                 `*** Update File` or `*** Delete File` section"
            }
        }));
    }
    Ok(Patch { format, files })
}

/// The patch inside a Markdown code fence (```` ```diff ```` … ```` ``` ````), as models
/// often write one; the lines themselves when there is none.
fn unfenced<'a, 'b>(lines: &'b [PatchLine<'a>]) -> &'b [PatchLine<'a>] {
    let fence = |line: &PatchLine<'_>| line.text.trim_start().starts_with("```");
    let non_blank = |line: &&PatchLine<'_>| !line.text.trim().is_empty();
    let first = lines.iter().position(|line| non_blank(&line));
    let last = lines.iter().rposition(|line| non_blank(&line));
    match (first, last) {
        (Some(first), Some(last))
            if first < last && fence(&lines[first]) && lines[last].text.trim() == "```" =>
        {
            &lines[first + 1..last]
        }
        _ => lines,
    }
}

/// A codex patch opens with its envelope (or, without it, a file marker, which the codex
/// parser then refuses with a message that says what is missing); anything else is read
/// as a unified diff, whose parser skips the commentary a diff may be wrapped in.
fn detect(lines: &[PatchLine<'_>]) -> Format {
    let first = lines
        .iter()
        .map(|line| line.text.trim())
        .find(|text| !text.is_empty());
    match first {
        Some(text) if text == CODEX_BEGIN || codex::is_file_marker(text) => Format::Codex,
        Some(_) | None => Format::Unified,
    }
}

/// Splits the patch into lines. A patch whose every line ends in `\r\n` was only carried
/// with CRLF endings (pasted from Windows), so the `\r` is dropped everywhere; in any
/// other patch a `\r` before the `\n` belongs to the line: the diffed file has CRLF
/// endings, and [`HunkLine::cr`] keeps them.
pub fn split_lines(text: &str) -> Vec<PatchLine<'_>> {
    let mut raw: Vec<&str> = text.split('\n').collect();
    if raw.last().is_some_and(|last| last.is_empty()) {
        raw.pop();
    }
    let transport_crlf = !raw.is_empty() && raw.iter().all(|line| line.ends_with('\r'));
    raw.into_iter()
        .enumerate()
        .map(|(index, line)| {
            let stripped = line.strip_suffix('\r');
            PatchLine {
                number: index + 1,
                text: stripped.unwrap_or(line),
                cr: stripped.is_some() && !transport_crlf,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crlf_patch_is_read_as_lf_but_crlf_lines_in_an_lf_patch_are_kept() {
        let transported = split_lines("--- a/x\r\n+++ b/x\r\n+y\r\n");
        assert!(transported.iter().all(|line| !line.cr));
        assert_eq!(transported[2].text, "+y");

        let mixed = split_lines("--- a/x\n+++ b/x\n+y\r\n");
        assert_eq!(
            mixed.iter().map(|line| line.cr).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert_eq!(mixed[2].text, "+y");
    }

    #[test]
    fn detects_the_format() {
        let detected = |text: &str| detect(&split_lines(text));
        assert_eq!(
            detected("\n*** Begin Patch\n*** End Patch\n"),
            Format::Codex
        );
        assert_eq!(detected("*** Update File: a\n"), Format::Codex);
        assert_eq!(detected("--- a/x\n+++ b/x\n"), Format::Unified);
        assert_eq!(
            detected("Fix the bug.\n\ndiff --git a/x b/x\n"),
            Format::Unified
        );
    }

    #[test]
    fn a_fenced_patch_is_read_inside_its_fence() -> Result<(), String> {
        let patch = parse("```\n*** Begin Patch\n*** Delete File: a\n*** End Patch\n```\n")
            .map_err(|err| err.message().to_owned())?;
        assert_eq!(patch.format, Format::Codex);
        assert_eq!(patch.files[0].path, "a");
        let patch = parse("```diff\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n```")
            .map_err(|err| err.message().to_owned())?;
        assert_eq!(patch.files[0].hunks[0].lines.len(), 2);
        Ok(())
    }

    #[test]
    fn an_empty_patch_is_refused() {
        let Err(err) = parse("just words\n") else {
            panic!("a patch without files was accepted");
        };
        assert!(err.message().starts_with("the patch changes no file"));
    }
}
