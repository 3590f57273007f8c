//! The tool: parses the patch, applies every file's part of it in memory, shows the
//! result as a diff, and writes it unless previewing — all of it or none of it.

use std::ops::Not;
use std::rc::Rc;

use airlock_sdk::ToolError;
use airlock_sdk::Workspace;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;

use crate::apply;
use crate::commit;
use crate::commit::Plan;
use crate::diff;
use crate::diff::Differ;
use crate::lines;
use crate::mode;
use crate::patch;
use crate::patch::FilePatch;
use crate::patch::Format;
use crate::patch::Mode;
use crate::patch::Op;
use crate::tree::FileData;
use crate::tree::Tree;

/// The most files one patch may change: 200. Each is read, held and diffed in memory
/// and listed in the result; a change wider than this is better made in several
/// patches an approver can read.
pub const MAX_FILES: usize = 200;

/// The most notes listed for one file: 10. Past that (a patch whose every hunk is
/// offset) the rest are counted, keeping the result inside its output limit.
pub const MAX_NOTES_PER_FILE: usize = 10;

/// Applies a patch to files in the workspace and returns the diff of what changed. Accepts a unified diff as `git diff` or `diff -u` write it (several files; new, deleted and renamed files; mode changes) or a codex patch (`*** Begin Patch` … `*** End Patch`). All or nothing: if any hunk does not apply, no file is changed. With `preview` it only returns the diff.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The patch. Unified: `--- a/path` and `+++ b/path` headers (`/dev/null` for a new or deleted file), then `@@ -l,n +l,n @@` hunks whose context lines must match the file exactly; `diff --git` with `rename from`/`rename to` or `new mode 100755` for renames and modes. Codex: `*** Begin Patch`, then `*** Add File: path` (lines starting with `+`), `*** Update File: path` (optionally `*** Move to: path`, then `@@` hunks of ` `, `-` and `+` lines) or `*** Delete File: path`, then `*** End Patch`. Paths are relative to the workspace.
    pub patch: String,
    /// Check the patch and return the diff of what it would change, writing nothing.
    #[serde(default)]
    pub preview: bool,
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct ApplyPatchOutput {
    /// This was a preview: nothing was written.
    pub preview: bool,
    /// The format the patch was read as: `unified` or `codex`.
    pub format: Format,
    /// Each file's part of the patch, in the patch's order.
    pub files: Vec<FileReport>,
    /// The unified diff of what changed (or would change), file by file.
    pub diff: String,
    /// The diff was longer than 128 KiB and is cut.
    #[serde(skip_serializing_if = "Not::not")]
    pub diff_truncated: bool,
    /// Directories that were (or would be) created for new files, outermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<String>,
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// The file, relative to the workspace (for a rename: its new name).
    pub path: String,
    pub kind: Kind,
    /// The old name of a renamed file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Hunks of the patch applied to the file.
    pub hunks: usize,
    pub added_lines: usize,
    pub removed_lines: usize,
    /// The mode the patch gives the file, when it sets one: `100755` or `100644`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    /// How the patch was applied where it was not literal: hunks found at an offset,
    /// miscounted hunk headers, a mode that could not be set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Added,
    Modified,
    Deleted,
    Renamed,
}

pub fn apply_patch(
    workspace: &Workspace,
    args: &ApplyPatchArgs,
) -> Result<ApplyPatchOutput, ToolError> {
    apply_patch_with(workspace, args, commit::commit)
}

/// [`apply_patch`], with the step that writes the plan passed in: the tests make it fail.
fn apply_patch_with(
    workspace: &Workspace,
    args: &ApplyPatchArgs,
    write: impl FnOnce(&Plan) -> Result<(), ToolError>,
) -> Result<ApplyPatchOutput, ToolError> {
    let (format, entries, plan) = prepare(workspace, &args.patch).map_err(nothing_changed)?;
    let mut differ = Differ::new();
    let files = entries
        .into_iter()
        .map(|entry| {
            let counts = differ.add(diff::Change {
                old_name: entry.old_name.as_deref(),
                new_name: entry.new_name.as_deref(),
                before: entry.before.as_ref(),
                after: entry.after.as_ref(),
            });
            FileReport {
                added_lines: counts.added,
                removed_lines: counts.removed,
                ..entry.report
            }
        })
        .collect();
    let (diff, diff_truncated) = differ.finish();
    if !args.preview {
        write(&plan)?;
    }
    Ok(ApplyPatchOutput {
        preview: args.preview,
        format,
        files,
        diff,
        diff_truncated,
        created_dirs: plan.dirs.into_iter().map(|dir| dir.shown).collect(),
    })
}

/// Says, after why the patch was refused, that nothing was written.
fn nothing_changed(err: ToolError) -> ToolError {
    let reason = err.message();
    let stop = if reason.ends_with(['.', '?']) {
        ""
    } else {
        "."
    };
    let message = format!("{reason}{stop} No file was changed.");
    if err.is_retryable() {
        ToolError::retryable(message)
    } else {
        ToolError::new(message)
    }
}

/// One file's part of the patch, applied in memory.
struct Entry {
    /// Everything but the line counts, which come with the diff.
    report: FileReport,
    old_name: Option<String>,
    new_name: Option<String>,
    before: Option<FileData>,
    after: Option<FileData>,
}

/// Parses the patch and applies all of it in memory: the format, each file's entry and
/// the plan of what to write.
fn prepare(workspace: &Workspace, text: &str) -> Result<(Format, Vec<Entry>, Plan), ToolError> {
    let patch = patch::parse(text)?;
    if patch.files.len() > MAX_FILES {
        return Err(ToolError::new(format!(
            "the patch changes {} files; apply_patch takes at most {MAX_FILES} at a time, \
             split it",
            patch.files.len()
        )));
    }
    let mut tree = Tree::new(workspace);
    let entries = patch
        .files
        .iter()
        .map(|file| apply_file(&mut tree, file))
        .collect::<Result<Vec<_>, _>>()?;
    let plan = tree.plan()?;
    Ok((patch.format, entries, plan))
}

fn apply_file(tree: &mut Tree<'_>, file: &FilePatch) -> Result<Entry, ToolError> {
    if file.binary && file.op != Op::Delete {
        return Err(ToolError::new(format!(
            "`{}`: the patch changes it as a binary file; apply_patch applies text patches \
             only",
            file.path
        )));
    }
    let mut notes = file.notes.clone();
    match file.op {
        Op::Add => {
            let key = tree.touch(&file.path)?;
            if tree.current(&key).is_some() {
                return Err(ToolError::new(format!(
                    "`{key}` already exists, and the patch adds it as a new file"
                )));
            }
            let applied = apply::apply(&key, "", &file.hunks)?;
            notes.extend(applied.notes);
            // A new file is not executable unless the patch says so (and saying that it
            // is not, as every file git adds does, is nothing to note where modes are
            // not kept).
            let default = mode::SUPPORTED.then_some(false);
            let wanted = file.mode.filter(|mode| *mode == Mode::Executable);
            let executable = set_mode(wanted, default, &mut notes);
            let after = FileData {
                bytes: Rc::from(applied.text.into_bytes()),
                executable,
            };
            tree.set(&key, Some(after.clone()));
            Ok(Entry {
                report: report(&key, Kind::Added, None, file, mode_shown(file), notes),
                old_name: None,
                new_name: Some(key),
                before: None,
                after: Some(after),
            })
        }
        Op::Delete => {
            let key = tree.touch(&file.path)?;
            let Some(before) = tree.current(&key).cloned() else {
                return Err(ToolError::new(format!(
                    "`{key}` does not exist, and the patch deletes it"
                )));
            };
            if !file.hunks.is_empty() {
                // A deletion with hunks shows the whole file: it must be the file.
                let applied = apply::apply(&key, text(&key, &before)?, &file.hunks)?;
                if !applied.text.is_empty() {
                    return Err(ToolError::new(format!(
                        "`{key}`: the patch deletes the file but does not show all of it \
                         ({} of it not in the patch); the file may have changed since the \
                         patch was made",
                        lines::count(applied.text.lines().count())
                    )));
                }
            }
            tree.set(&key, None);
            Ok(Entry {
                report: report(&key, Kind::Deleted, None, file, None, notes),
                old_name: Some(key),
                new_name: None,
                before: Some(before),
                after: None,
            })
        }
        Op::Update => {
            let key = existing(tree, file)?;
            let Some(before) = tree.current(&key).cloned() else {
                return Err(ToolError::new(format!(
                    "`{key}` does not exist, and the patch changes it"
                )));
            };
            if file.hunks.is_empty() && file.move_to.is_none() && file.mode.is_none() {
                return Err(ToolError::new(format!(
                    "`{key}`: the patch names the file but has no hunks for it"
                )));
            }
            let bytes = if file.hunks.is_empty() {
                before.bytes.clone()
            } else {
                let applied = apply::apply(&key, text(&key, &before)?, &file.hunks)?;
                notes.extend(applied.notes);
                Rc::from(applied.text.into_bytes())
            };
            let executable = set_mode(file.mode, before.executable, &mut notes);
            let after = FileData { bytes, executable };
            let destination = match &file.move_to {
                Some(to) => {
                    let destination = tree.touch(to)?;
                    if destination != key && tree.current(&destination).is_some() {
                        return Err(ToolError::new(format!(
                            "`{destination}` already exists, and the patch renames `{key}` to it"
                        )));
                    }
                    destination
                }
                None => key.clone(),
            };
            tree.set(&key, None);
            tree.set(&destination, Some(after.clone()));
            let (kind, from) = if destination == key {
                (Kind::Modified, None)
            } else {
                (Kind::Renamed, Some(key.clone()))
            };
            Ok(Entry {
                report: report(&destination, kind, from, file, mode_shown(file), notes),
                old_name: Some(key),
                new_name: Some(destination),
                before: Some(before),
                after: Some(after),
            })
        }
    }
}

/// The file an update names: its path, or failing that the first alternative name that
/// exists (a plain diff's other header).
fn existing(tree: &mut Tree<'_>, file: &FilePatch) -> Result<String, ToolError> {
    let key = tree.touch(&file.path)?;
    if tree.current(&key).is_some() {
        return Ok(key);
    }
    for alternative in &file.alternatives {
        // A name that cannot be used is simply not the file.
        if let Ok(other) = tree.touch(alternative)
            && tree.current(&other).is_some()
        {
            return Ok(other);
        }
    }
    Ok(key)
}

fn text<'a>(key: &str, data: &'a FileData) -> Result<&'a str, ToolError> {
    std::str::from_utf8(&data.bytes).map_err(|_| {
        ToolError::new(format!(
            "`{key}` is not UTF-8 text; apply_patch only patches text files"
        ))
    })
}

/// The executable bit after the patch: what it says, else what the file had.
fn set_mode(mode: Option<Mode>, current: Option<bool>, notes: &mut Vec<String>) -> Option<bool> {
    match mode {
        None => current,
        Some(mode) if mode::SUPPORTED => Some(mode == Mode::Executable),
        Some(mode) => {
            notes.push(format!(
                "the patch sets mode {}, but this sandbox has no file modes: the mode was \
                 not changed",
                mode.git()
            ));
            current
        }
    }
}

/// The mode the result reports: one the patch changes, or an executable new file's
/// (every file git adds says `new file mode 100644`, which is no news).
fn mode_shown(file: &FilePatch) -> Option<&'static str> {
    match (file.op, file.mode) {
        (Op::Add, Some(Mode::Regular)) | (_, None) => None,
        (_, Some(mode)) => Some(mode.git()),
    }
}

fn report(
    path: &str,
    kind: Kind,
    from: Option<String>,
    file: &FilePatch,
    mode: Option<&'static str>,
    mut notes: Vec<String>,
) -> FileReport {
    if notes.len() > MAX_NOTES_PER_FILE {
        let more = notes.len() - MAX_NOTES_PER_FILE;
        notes.truncate(MAX_NOTES_PER_FILE);
        notes.push(format!("… and {more} more notes like these"));
    }
    FileReport {
        path: path.to_owned(),
        kind,
        from,
        hunks: file.hunks.len(),
        added_lines: 0,
        removed_lines: 0,
        mode,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::fs::symlink;
    use std::path::Path;
    use std::path::PathBuf;

    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
        workspace: Workspace,
    }

    impl Fixture {
        fn new() -> anyhow::Result<Self> {
            let dir = tempfile::tempdir()?;
            let workspace = Workspace::at(dir.path());
            Ok(Self { dir, workspace })
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        fn put(&self, name: &str, content: &str) -> anyhow::Result<()> {
            let path = self.path(name);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(path, content)?;
            Ok(())
        }

        fn read(&self, name: &str) -> anyhow::Result<String> {
            Ok(fs::read_to_string(self.path(name))?)
        }

        fn exists(&self, name: &str) -> bool {
            self.path(name).exists()
        }

        fn apply(&self, patch: &str) -> Result<ApplyPatchOutput, ToolError> {
            self.call(patch, false)
        }

        fn call(&self, patch: &str, preview: bool) -> Result<ApplyPatchOutput, ToolError> {
            apply_patch(
                &self.workspace,
                &ApplyPatchArgs {
                    patch: patch.to_owned(),
                    preview,
                },
            )
        }

        /// Every file under the workspace with its contents, to show nothing changed.
        fn snapshot(&self) -> anyhow::Result<Vec<(String, String)>> {
            fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) -> io::Result<()> {
                for entry in fs::read_dir(dir)? {
                    let path = entry?.path();
                    let name = path
                        .strip_prefix(root)
                        .map(|name| name.display().to_string())
                        .unwrap_or_default();
                    if path.is_dir() {
                        out.push((format!("{name}/"), String::new()));
                        walk(&path, root, out)?;
                    } else {
                        out.push((name, fs::read_to_string(&path).unwrap_or_default()));
                    }
                }
                Ok(())
            }
            let mut out = Vec::new();
            walk(self.dir.path(), self.dir.path(), &mut out)?;
            out.sort();
            Ok(out)
        }
    }

    fn message<T: std::fmt::Debug>(result: Result<T, ToolError>) -> String {
        match result {
            Ok(value) => panic!("expected an error, got {value:?}"),
            Err(err) => err.message().to_owned(),
        }
    }

    /// What `git diff` printed for these changes (git 2.x, `diff.renames` on).
    const GIT_DIFF: &str = "\
diff --git a/calc.py b/calc.py
index 3b18e51..a0e5e8e 100644
--- a/calc.py
+++ b/calc.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return a - b
+    return a + b
 
 
 def sub(a, b):
diff --git a/notes/todo.md b/notes/todo.md
new file mode 100644
index 0000000..c7d8a0c
--- /dev/null
+++ b/notes/todo.md
@@ -0,0 +1,2 @@
+# TODO
+- tests
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 8a1218a..0000000
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-obsolete
-lines
diff --git a/src/util.py b/lib/util.py
similarity index 71%
rename from src/util.py
rename to lib/util.py
index 1f2a3b4..5c6d7e8 100644
--- a/src/util.py
+++ b/lib/util.py
@@ -1,3 +1,3 @@
 import os
-HOME = os.environ['HOME']
+HOME = os.path.expanduser('~')
 PATH = os.environ['PATH']
";

    fn git_fixture() -> anyhow::Result<Fixture> {
        let fixture = Fixture::new()?;
        fixture.put(
            "calc.py",
            "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
        )?;
        fixture.put("old.txt", "obsolete\nlines\n")?;
        fixture.put(
            "src/util.py",
            "import os\nHOME = os.environ['HOME']\nPATH = os.environ['PATH']\n",
        )?;
        Ok(fixture)
    }

    #[test]
    fn applies_a_git_diff_that_adds_modifies_deletes_and_renames() -> anyhow::Result<()> {
        let fixture = git_fixture()?;
        let out = fixture.apply(GIT_DIFF)?;
        assert_eq!(
            fixture.read("calc.py")?,
            "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
        );
        assert_eq!(fixture.read("notes/todo.md")?, "# TODO\n- tests\n");
        assert!(!fixture.exists("old.txt"));
        assert!(!fixture.exists("src/util.py"));
        assert_eq!(
            fixture.read("lib/util.py")?,
            "import os\nHOME = os.path.expanduser('~')\nPATH = os.environ['PATH']\n"
        );
        assert_eq!(out.format, Format::Unified);
        assert!(!out.preview);
        assert_eq!(out.created_dirs, ["lib", "notes"]);
        let summary: Vec<_> = out
            .files
            .iter()
            .map(|file| {
                (
                    file.path.as_str(),
                    file.kind,
                    file.from.as_deref(),
                    file.hunks,
                    file.added_lines,
                    file.removed_lines,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("calc.py", Kind::Modified, None, 1, 1, 1),
                ("notes/todo.md", Kind::Added, None, 1, 2, 0),
                ("old.txt", Kind::Deleted, None, 1, 0, 2),
                ("lib/util.py", Kind::Renamed, Some("src/util.py"), 1, 1, 1),
            ]
        );
        assert!(
            out.diff.contains(
                "diff --git a/src/util.py b/lib/util.py\nrename from src/util.py\n\
                 rename to lib/util.py\n--- a/src/util.py\n+++ b/lib/util.py\n"
            ),
            "{}",
            out.diff
        );
        assert!(out.diff.contains("-    return a - b\n+    return a + b\n"));
        Ok(())
    }

    #[test]
    fn applying_the_same_patch_twice_fails_the_second_time() -> anyhow::Result<()> {
        let fixture = git_fixture()?;
        fixture.apply(GIT_DIFF)?;
        let before = fixture.snapshot()?;
        assert_eq!(
            message(fixture.apply(GIT_DIFF)),
            "calc.py: hunk 1 (@@ -1,5 +1,5 @@) does not apply: line 2 is `    return a + b` \
             where the patch expects `    return a - b`, and it matches nowhere else in the \
             file. No file was changed."
        );
        assert_eq!(fixture.snapshot()?, before);
        Ok(())
    }

    #[test]
    fn a_hunk_that_does_not_apply_changes_no_file() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("a.txt", "one\ntwo\nthree\n")?;
        fixture.put(
            "src/calc.py",
            &(1..=20).map(|n| format!("line {n}\n")).collect::<String>(),
        )?;
        let before = fixture.snapshot()?;
        let patch = "\
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+2
 three
--- /dev/null
+++ b/added.txt
@@ -0,0 +1 @@
+new
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,2 +1,2 @@
-line 1
+line one
 line 2
@@ -10,4 +10,5 @@
 line 10
 line 11
-y
+z
 line 13
";
        let refused = message(fixture.apply(patch));
        assert!(
            refused.starts_with(
                "src/calc.py: hunk 2 (@@ -10,4 +10,5 @@) does not apply: line 12 is \
                 `line 12` where the patch expects `y`"
            ),
            "{refused}"
        );
        assert!(refused.ends_with("No file was changed."), "{refused}");
        assert_eq!(fixture.snapshot()?, before);
        assert_eq!(fixture.read("a.txt")?, "one\ntwo\nthree\n");
        Ok(())
    }

    #[test]
    fn a_hunk_found_at_an_offset_is_applied_and_reported() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let original: String = (1..=30).map(|n| format!("{n}\n")).collect();
        fixture.put("n.txt", &original)?;
        // The header says line 10; the lines are at 15.
        let out = fixture
            .apply("--- a/n.txt\n+++ b/n.txt\n@@ -10,3 +10,3 @@\n 15\n-16\n+sixteen\n 17\n")?;
        assert_eq!(
            fixture.read("n.txt")?,
            original.replace("\n16\n", "\nsixteen\n")
        );
        assert_eq!(
            out.files[0].notes,
            ["hunk 1 (@@ -10,3 +10,3 @@) applied at line 15 (offset +5 lines from its header)"]
        );
        // The diff shows where it really went.
        assert!(
            out.diff
                .contains("@@ -13,7 +13,7 @@\n 13\n 14\n 15\n-16\n+sixteen\n"),
            "{}",
            out.diff
        );
        Ok(())
    }

    #[test]
    fn no_newline_at_end_of_file_both_ways() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("add.txt", "a\nb")?;
        fixture.put("drop.txt", "a\nb\n")?;
        fixture.apply(
            "--- a/add.txt\n+++ b/add.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n\
             --- a/drop.txt\n+++ b/drop.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n",
        )?;
        assert_eq!(fixture.read("add.txt")?, "a\nb\n");
        assert_eq!(fixture.read("drop.txt")?, "a\nb");

        // A file without a final newline keeps lacking it when the patch does not touch
        // its last line, and the diff says so.
        fixture.put("keep.txt", "x\ny\n3\n4\n5\nlast")?;
        let out = fixture.apply("--- a/keep.txt\n+++ b/keep.txt\n@@ -1,2 +1,2 @@\n-x\n+X\n y\n")?;
        assert_eq!(fixture.read("keep.txt")?, "X\ny\n3\n4\n5\nlast");
        assert!(!out.diff.contains("No newline"), "{}", out.diff);
        Ok(())
    }

    #[test]
    fn mode_changes_set_the_executable_bit() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("run.sh", "#!/bin/sh\n")?;
        fs::set_permissions(fixture.path("run.sh"), fs::Permissions::from_mode(0o644))?;
        let out = fixture.apply(
            "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n\
             diff --git a/tool.sh b/tool.sh\nnew file mode 100755\n--- /dev/null\n+++ b/tool.sh\n\
             @@ -0,0 +1 @@\n+echo hi\n",
        )?;
        let mode = |name: &str| -> anyhow::Result<u32> {
            Ok(fs::metadata(fixture.path(name))?.permissions().mode() & 0o777)
        };
        assert_eq!(mode("run.sh")?, 0o755);
        assert_eq!(fixture.read("run.sh")?, "#!/bin/sh\n");
        assert_ne!(mode("tool.sh")? & 0o100, 0, "{:o}", mode("tool.sh")?);
        assert_eq!(out.files[0].mode, Some("100755"));
        assert_eq!(out.files[0].hunks, 0);
        assert_eq!(out.files[1].mode, Some("100755"));
        assert!(
            out.diff
                .starts_with("diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"),
            "{}",
            out.diff
        );

        fixture.apply("diff --git a/run.sh b/run.sh\nold mode 100755\nnew mode 100644\n")?;
        assert_eq!(mode("run.sh")?, 0o644);
        Ok(())
    }

    #[test]
    fn an_edit_keeps_the_files_mode() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("run.sh", "echo a\n")?;
        fs::set_permissions(fixture.path("run.sh"), fs::Permissions::from_mode(0o750))?;
        fixture.apply("--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-echo a\n+echo b\n")?;
        assert_eq!(fixture.read("run.sh")?, "echo b\n");
        assert_eq!(
            fs::metadata(fixture.path("run.sh"))?.permissions().mode() & 0o777,
            0o750
        );
        Ok(())
    }

    #[test]
    fn a_pure_rename_moves_the_file() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("a/old.bin", "\u{0}binary\u{ff}")?;
        let out = fixture.apply(
            "diff --git a/a/old.bin b/b/new.bin\nsimilarity index 100%\nrename from a/old.bin\n\
             rename to b/new.bin\n",
        )?;
        assert!(!fixture.exists("a/old.bin"));
        assert_eq!(fixture.read("b/new.bin")?, "\u{0}binary\u{ff}");
        assert_eq!(out.files[0].kind, Kind::Renamed);
        assert_eq!(out.files[0].from.as_deref(), Some("a/old.bin"));
        assert_eq!(
            out.diff,
            "diff --git a/a/old.bin b/b/new.bin\nrename from a/old.bin\nrename to b/new.bin\n"
        );
        Ok(())
    }

    #[test]
    fn adds_updates_and_deletes_must_find_the_workspace_as_the_patch_expects() -> anyhow::Result<()>
    {
        let fixture = Fixture::new()?;
        fixture.put("here.txt", "here\n")?;
        assert_eq!(
            message(fixture.apply("--- /dev/null\n+++ b/here.txt\n@@ -0,0 +1 @@\n+new\n")),
            "`here.txt` already exists, and the patch adds it as a new file. No file was changed."
        );
        assert_eq!(
            message(fixture.apply("--- a/gone.txt\n+++ b/gone.txt\n@@ -1 +1 @@\n-a\n+b\n")),
            "`gone.txt` does not exist, and the patch changes it. No file was changed."
        );
        assert_eq!(
            message(fixture.apply("--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n")),
            "`gone.txt` does not exist, and the patch deletes it. No file was changed."
        );
        assert!(
            message(fixture.apply("--- a/here.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-elsewhere\n"))
                .contains("line 1 is `here` where the patch expects `elsewhere`")
        );
        fixture.put("long.txt", "a\nb\n")?;
        assert!(
            message(fixture.apply("--- a/long.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"))
                .contains("does not show all of it (1 line of it not in the patch)")
        );
        assert_eq!(fixture.read("here.txt")?, "here\n");
        assert_eq!(fixture.read("long.txt")?, "a\nb\n");
        Ok(())
    }

    #[test]
    fn paths_that_escape_the_workspace_are_refused() -> anyhow::Result<()> {
        let outside = tempfile::tempdir()?;
        let fixture = Fixture::new()?;
        fixture.put("a.txt", "a\n")?;
        symlink(outside.path(), fixture.path("link"))?;
        let edit = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n";
        for (path, why) in [
            ("../escape.txt", "contains `..`"),
            ("sub/../../escape.txt", "contains `..`"),
            ("/tmp/escape.txt", "is an absolute path"),
            ("link/escape.txt", "is a symbolic link"),
        ] {
            let unified = format!("{edit}--- /dev/null\n+++ {path}\n@@ -0,0 +1 @@\n+pwned\n");
            let codex = format!("*** Begin Patch\n*** Add File: {path}\n+pwned\n*** End Patch\n");
            for patch in [unified, codex] {
                let refused = message(fixture.apply(&patch));
                assert!(refused.contains(why), "{path}: {refused}");
            }
        }
        assert_eq!(fixture.read("a.txt")?, "a\n");
        assert!(
            !fixture
                .dir
                .path()
                .parent()
                .is_some_and(|up| up.join("escape.txt").exists())
        );
        assert_eq!(fs::read_dir(outside.path())?.count(), 0);
        Ok(())
    }

    #[test]
    fn codex_patches_add_update_move_and_delete() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put(
            "app/main.py",
            "import sys\n\ndef run():\n    print('old')\n    return 0\n\ndef stop():\n    return 1\n",
        )?;
        fixture.put("obsolete.txt", "bye\n")?;
        fixture.put("config.ini", "[a]\nx = 1\n")?;
        let out = fixture.apply(
            "*** Begin Patch
*** Add File: docs/readme.md
+# Readme
+
+Run it.
*** Update File: app/main.py
*** Move to: app/cli.py
@@ def run():
-    print('old')
+    print('new')
     return 0
@@ def stop():
-    return 1
+    return 2
*** Delete File: obsolete.txt
*** Update File: config.ini
@@
 [a]
-x = 1
+x = 2
+y = 3
*** End of File
*** End Patch
",
        )?;
        assert_eq!(out.format, Format::Codex);
        assert_eq!(fixture.read("docs/readme.md")?, "# Readme\n\nRun it.\n");
        assert!(!fixture.exists("app/main.py"));
        assert_eq!(
            fixture.read("app/cli.py")?,
            "import sys\n\ndef run():\n    print('new')\n    return 0\n\ndef stop():\n    return 2\n"
        );
        assert!(!fixture.exists("obsolete.txt"));
        assert_eq!(fixture.read("config.ini")?, "[a]\nx = 2\ny = 3\n");
        let kinds: Vec<_> = out
            .files
            .iter()
            .map(|file| (file.path.as_str(), file.kind, file.hunks))
            .collect();
        assert_eq!(
            kinds,
            [
                ("docs/readme.md", Kind::Added, 1),
                ("app/cli.py", Kind::Renamed, 2),
                ("obsolete.txt", Kind::Deleted, 0),
                ("config.ini", Kind::Modified, 1),
            ]
        );
        assert_eq!(out.files[1].from.as_deref(), Some("app/main.py"));
        Ok(())
    }

    #[test]
    fn a_codex_hunk_that_does_not_match_changes_nothing() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("a.py", "x = 1\n")?;
        fixture.put("b.py", "def f():\n    return 1\n")?;
        let refused = message(fixture.apply(
            "*** Begin Patch
*** Update File: a.py
@@
-x = 1
+x = 2
*** Update File: b.py
@@ def f():
-    return  1
+    return 2
*** End Patch
",
        ));
        assert_eq!(
            refused,
            "b.py: hunk 1 (@@ def f():) does not apply: its first line `    return  1` is not \
             in the file after line 1. No file was changed."
        );
        assert_eq!(fixture.read("a.py")?, "x = 1\n");
        Ok(())
    }

    #[test]
    fn a_codex_patch_may_change_one_file_in_two_sections() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("a.txt", "1\n2\n")?;
        let out = fixture.apply(
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-1\n+one\n\
             *** Update File: a.txt\n@@\n-2\n+two\n*** End Patch\n",
        )?;
        assert_eq!(fixture.read("a.txt")?, "one\ntwo\n");
        assert_eq!(out.files.len(), 2);
        Ok(())
    }

    #[test]
    fn preview_returns_the_diff_and_writes_nothing() -> anyhow::Result<()> {
        let fixture = git_fixture()?;
        let before = fixture.snapshot()?;
        let preview = fixture.call(GIT_DIFF, true)?;
        assert!(preview.preview);
        assert_eq!(fixture.snapshot()?, before);
        assert_eq!(preview.created_dirs, ["lib", "notes"]);

        let applied = fixture.call(GIT_DIFF, false)?;
        assert_eq!(
            (preview.diff, preview.files),
            (applied.diff, applied.files),
            "a preview shows exactly what applying does"
        );
        Ok(())
    }

    #[test]
    fn crlf_files_stay_crlf() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("win.txt", "one\r\ntwo\r\nthree\r\n")?;
        // A patch written with LF endings, as a model writes it.
        fixture.apply(
            "--- a/win.txt\n+++ b/win.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n+2.5\n three\n",
        )?;
        assert_eq!(fixture.read("win.txt")?, "one\r\n2\r\n2.5\r\nthree\r\n");

        // The same through a codex patch.
        fixture
            .apply("*** Begin Patch\n*** Update File: win.txt\n@@\n one\n+1.5\n*** End Patch\n")?;
        assert_eq!(
            fixture.read("win.txt")?,
            "one\r\n1.5\r\n2\r\n2.5\r\nthree\r\n"
        );

        // A `git diff` of a CRLF file carries the `\r` on every line; a new file from
        // such a patch gets CRLF endings too.
        fixture.apply(
            "--- a/win.txt\r\n+++ b/win.txt\r\n@@ -1,2 +1,2 @@\r\n one\r\n-1.5\r\n+1.75\r\n\
             --- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+crlf\r\n",
        )?;
        assert_eq!(
            fixture.read("win.txt")?,
            "one\r\n1.75\r\n2\r\n2.5\r\nthree\r\n"
        );
        assert_eq!(fixture.read("new.txt")?, "crlf\r\n");
        Ok(())
    }

    #[test]
    fn a_failed_write_is_rolled_back() -> anyhow::Result<()> {
        let fixture = git_fixture()?;
        let before = fixture.snapshot()?;
        let args = ApplyPatchArgs {
            patch: GIT_DIFF.to_owned(),
            preview: false,
        };
        // Deletions come first, then new directories, then writes in path order: the
        // new file in `notes` is the last of seven steps.
        let last = fixture.path("notes/todo.md");
        let result = apply_patch_with(&fixture.workspace, &args, |plan| {
            commit::commit_with(plan, |path| {
                if path == last {
                    return Err(io::Error::other("disk full"));
                }
                Ok(())
            })
        });
        assert_eq!(
            message(result),
            "notes/todo.md: disk full. The patch was not applied: the 6 changes already made \
             were undone, so the workspace is as it was"
        );
        assert_eq!(fixture.snapshot()?, before);
        Ok(())
    }

    #[test]
    fn the_result_has_the_documented_shape() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fixture.put("a.txt", "a\n")?;
        let input = serde_json::json!({
            "patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n",
            "preview": true,
        });
        let document = airlock_sdk::handle(input.to_string().as_bytes(), |args| {
            apply_patch(&fixture.workspace, &args)
        });
        let value: serde_json::Value = serde_json::from_slice(&document)?;
        assert_eq!(
            value,
            serde_json::json!({"ok": {
                "preview": true,
                "format": "unified",
                "files": [{
                    "path": "a.txt",
                    "kind": "modified",
                    "hunks": 1,
                    "added_lines": 1,
                    "removed_lines": 1,
                }],
                "diff": "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n",
            }})
        );
        assert_eq!(fixture.read("a.txt")?, "a\n");

        let unknown = airlock_sdk::handle(&br#"{"patch": "", "strip": 1}"#[..], |args| {
            apply_patch(&fixture.workspace, &args)
        });
        let value: serde_json::Value = serde_json::from_slice(&unknown)?;
        assert!(value["error"]["message"].is_string(), "{value}");
        Ok(())
    }
}
