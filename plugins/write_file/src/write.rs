//! Decides what a write would do, shows it as a diff, and does it unless previewing.

use std::fs;
use std::fs::File;
use std::fs::Permissions;
use std::io;
use std::io::Read;
use std::path::Path;
use std::path::PathBuf;

use airlock_sdk::IoResultExt;
use airlock_sdk::ToolError;
use airlock_sdk::Workspace;
use airlock_sdk::atomic;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;

use crate::diff;
use crate::diff::Before;

/// The largest existing file that is read to diff against: 8 MiB. Past that the diff
/// only says the file is replaced; reading and diffing it would cost more guest memory
/// and time than a review of it is worth.
pub const MAX_DIFFED_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Writes a text file in the workspace, replacing it if it exists, and returns the unified diff of the change. With `preview` it only returns the diff.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Path of the file, relative to the workspace.
    pub path: String,
    /// The complete new contents of the file.
    pub content: String,
    /// Return the diff of what would change and write nothing.
    #[serde(default)]
    pub preview: bool,
    /// Create missing parent directories.
    #[serde(default)]
    pub create_dirs: bool,
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct WriteFileOutput {
    /// The file, relative to the workspace.
    pub path: String,
    /// This was a preview: nothing was written.
    pub preview: bool,
    /// The file did not exist (and was, or would be, created).
    pub created: bool,
    /// The new contents differ from the old; when false nothing is written.
    pub changed: bool,
    pub bytes_written: u64,
    /// Unified diff from the old contents to the new (empty when unchanged).
    pub diff: String,
    /// The diff was longer than 128 KiB and is cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub diff_truncated: bool,
    /// Parent directories that were (or would be) created, outermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<String>,
}

pub fn write_file(
    workspace: &Workspace,
    args: &WriteFileArgs,
) -> Result<WriteFileOutput, ToolError> {
    let target = workspace.resolve(&args.path)?;
    let parent = match target.parent() {
        Some(parent) if target != workspace.root() => parent,
        Some(_) | None => {
            return Err(ToolError::new(format!(
                "`{}` is the workspace root; name a file to write",
                args.path
            )));
        }
    };
    let shown = workspace.display(&target);
    // The parent first: a file in the way of a directory is best named as such, not
    // reported as the OS's `ENOTDIR` on the whole path.
    let missing_dirs = missing_dirs(workspace, parent)?;
    let existing = inspect(&target, &args.path)?;
    if !missing_dirs.is_empty() && !args.create_dirs {
        return Err(ToolError::new(format!(
            "the directory `{}` does not exist; pass \"create_dirs\": true to create it",
            workspace.display(parent)
        )));
    }

    let (before, changed) = match &existing {
        Existing::Missing => (Before::Missing, true),
        Existing::File { contents, .. } => match contents {
            Contents::Read(bytes) => (
                std::str::from_utf8(bytes).map_or(Before::Binary, Before::Text),
                bytes.as_slice() != args.content.as_bytes(),
            ),
            // Not read, so not compared: assume the write changes it.
            Contents::TooLarge { bytes } => (Before::TooLarge { bytes: *bytes }, true),
        },
    };
    let diff = diff::render(&shown, &before, &args.content);
    let mut output = WriteFileOutput {
        path: shown,
        preview: args.preview,
        created: matches!(existing, Existing::Missing),
        changed,
        bytes_written: 0,
        diff: diff.text,
        diff_truncated: diff.truncated,
        created_dirs: missing_dirs
            .iter()
            .map(|dir| workspace.display(dir))
            .collect(),
    };
    if args.preview || !changed {
        return Ok(output);
    }

    if !missing_dirs.is_empty() {
        fs::create_dir_all(parent).with_path(workspace.display(parent))?;
    }
    let permissions = match existing {
        Existing::File { permissions, .. } => Some(permissions),
        Existing::Missing => None,
    };
    atomic::write(&target, args.content.as_bytes(), permissions).with_path(&args.path)?;
    output.bytes_written = args.content.len() as u64;
    Ok(output)
}

enum Existing {
    Missing,
    File {
        contents: Contents,
        permissions: Permissions,
    },
}

enum Contents {
    Read(Vec<u8>),
    TooLarge { bytes: u64 },
}

/// What is at `target` now. Only a regular file (or nothing) may be written: writing
/// through a symlink would change a file other than the one named, and the rename
/// would replace the link itself.
fn inspect(target: &Path, shown: &str) -> Result<Existing, ToolError> {
    let metadata = match fs::symlink_metadata(target) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Existing::Missing),
        Err(err) => return Err(ToolError::io(&err, shown)),
    };
    let file_type = metadata.file_type();
    if file_type.is_symlink() {
        return Err(ToolError::new(format!(
            "`{shown}` is a symlink; write_file does not write through symlinks, write to \
             its target instead"
        )));
    }
    if file_type.is_dir() {
        return Err(ToolError::new(format!(
            "`{shown}` is a directory; name a file to write"
        )));
    }
    if !file_type.is_file() {
        return Err(ToolError::new(format!("`{shown}` is not a regular file")));
    }
    let contents = if metadata.len() > MAX_DIFFED_FILE_BYTES {
        Contents::TooLarge {
            bytes: metadata.len(),
        }
    } else {
        let mut bytes = Vec::new();
        File::open(target)
            .and_then(|file| file.take(MAX_DIFFED_FILE_BYTES + 1).read_to_end(&mut bytes))
            .with_path(shown)?;
        if bytes.len() as u64 > MAX_DIFFED_FILE_BYTES {
            // It grew past the limit since its metadata was read.
            Contents::TooLarge {
                bytes: bytes.len() as u64,
            }
        } else {
            Contents::Read(bytes)
        }
    };
    Ok(Existing::File {
        contents,
        permissions: metadata.permissions(),
    })
}

/// The ancestors of the file that do not exist yet, outermost first. Existing ancestors
/// are looked at through symlinks: a symlinked directory inside the workspace is a
/// directory to write into, and the sandbox keeps one pointing outside unreachable.
fn missing_dirs(workspace: &Workspace, parent: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let mut missing = Vec::new();
    let mut dir = parent;
    loop {
        match fs::metadata(dir) {
            Ok(metadata) if metadata.is_dir() => break,
            Ok(_) => {
                return Err(ToolError::new(format!(
                    "`{}` is not a directory",
                    workspace.display(dir)
                )));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => missing.push(dir.to_owned()),
            Err(err) => return Err(ToolError::io(&err, workspace.display(dir))),
        }
        match dir.parent() {
            Some(up) => dir = up,
            None => break,
        }
    }
    missing.reverse();
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

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

        fn write(&self, path: &str, content: &str) -> Result<WriteFileOutput, ToolError> {
            self.call(path, content, false, false)
        }

        fn call(
            &self,
            path: &str,
            content: &str,
            preview: bool,
            create_dirs: bool,
        ) -> Result<WriteFileOutput, ToolError> {
            write_file(
                &self.workspace,
                &WriteFileArgs {
                    path: path.to_owned(),
                    content: content.to_owned(),
                    preview,
                    create_dirs,
                },
            )
        }
    }

    fn message<T: std::fmt::Debug>(result: Result<T, ToolError>) -> String {
        match result {
            Ok(value) => panic!("expected an error, got {value:?}"),
            Err(err) => err.message().to_owned(),
        }
    }

    #[test]
    fn creates_a_new_file() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let out = fixture.write("./hello.txt", "hi\n")?;
        assert_eq!(
            out,
            WriteFileOutput {
                path: "hello.txt".into(),
                preview: false,
                created: true,
                changed: true,
                bytes_written: 3,
                diff: "--- /dev/null\n+++ b/hello.txt\n@@ -0,0 +1 @@\n+hi\n".into(),
                diff_truncated: false,
                created_dirs: Vec::new(),
            }
        );
        assert_eq!(fs::read_to_string(fixture.path("hello.txt"))?, "hi\n");
        Ok(())
    }

    #[test]
    fn replaces_an_existing_file() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fs::write(fixture.path("a.txt"), "one\ntwo\n")?;
        let out = fixture.write("a.txt", "one\n2\n")?;
        assert!(!out.created && out.changed);
        assert_eq!(out.bytes_written, 6);
        assert_eq!(
            out.diff,
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
        );
        assert_eq!(fs::read_to_string(fixture.path("a.txt"))?, "one\n2\n");
        Ok(())
    }

    #[test]
    fn preview_returns_the_diff_and_writes_nothing() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fs::write(fixture.path("a.txt"), "old\n")?;
        let out = fixture.call("a.txt", "new\n", true, false)?;
        assert!(out.preview && out.changed && !out.created);
        assert_eq!(out.bytes_written, 0);
        assert!(out.diff.contains("-old\n+new\n"), "{}", out.diff);
        assert_eq!(fs::read_to_string(fixture.path("a.txt"))?, "old\n");

        let new = fixture.call("sub/dir/b.txt", "x", true, true)?;
        assert!(new.created);
        assert_eq!(new.created_dirs, ["sub", "sub/dir"]);
        assert!(
            !fixture.path("sub").exists(),
            "a preview created directories"
        );
        Ok(())
    }

    #[test]
    fn unchanged_content_is_not_rewritten() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fs::write(fixture.path("a.txt"), "same\n")?;
        // A write would replace the file, giving it a new inode.
        let inode = |path: &Path| -> anyhow::Result<u64> {
            use std::os::unix::fs::MetadataExt;
            Ok(fs::metadata(path)?.ino())
        };
        let before = inode(&fixture.path("a.txt"))?;
        let out = fixture.write("a.txt", "same\n")?;
        assert!(!out.changed);
        assert_eq!((out.bytes_written, out.diff.as_str()), (0, ""));
        assert_eq!(inode(&fixture.path("a.txt"))?, before);
        Ok(())
    }

    #[test]
    fn missing_directories_need_create_dirs() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        assert_eq!(
            message(fixture.write("a/b/c.txt", "x")),
            "the directory `a/b` does not exist; pass \"create_dirs\": true to create it"
        );
        let out = fixture.call("a/b/c.txt", "x", false, true)?;
        assert_eq!(out.created_dirs, ["a", "a/b"]);
        assert_eq!(fs::read_to_string(fixture.path("a/b/c.txt"))?, "x");
        Ok(())
    }

    #[test]
    fn refuses_symlinks_directories_and_the_root() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fs::write(fixture.path("real.txt"), "real")?;
        symlink("real.txt", fixture.path("alias.txt"))?;
        fs::create_dir(fixture.path("dir"))?;
        assert!(
            message(fixture.write("alias.txt", "x")).contains("does not write through symlinks")
        );
        assert_eq!(fs::read_to_string(fixture.path("real.txt"))?, "real");
        assert_eq!(
            message(fixture.write("dir", "x")),
            "`dir` is a directory; name a file to write"
        );
        assert_eq!(
            message(fixture.write(".", "x")),
            "`.` is the workspace root; name a file to write"
        );
        assert!(message(fixture.write("../escape.txt", "x")).contains("climbs above"));
        assert_eq!(
            message(fixture.write("real.txt/inner", "x")),
            "`real.txt` is not a directory"
        );
        Ok(())
    }

    #[test]
    fn a_binary_file_is_replaced_with_a_summary_diff() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        fs::write(fixture.path("blob"), b"\xff\xfe\x00")?;
        let out = fixture.write("blob", "text\n")?;
        assert_eq!(out.diff, "Binary files a/blob and b/blob differ\n");
        assert_eq!(fs::read_to_string(fixture.path("blob"))?, "text\n");
        Ok(())
    }

    #[test]
    fn the_diff_size_limit_holds_at_its_edge() -> anyhow::Result<()> {
        let fixture = Fixture::new()?;
        let limit = usize::try_from(MAX_DIFFED_FILE_BYTES)?;
        fs::write(fixture.path("at.txt"), "a\n".repeat(limit / 2))?;
        let at = fixture.call("at.txt", "b\n", true, false)?;
        assert!(
            at.diff.starts_with("--- a/at.txt\n+++ b/at.txt\n"),
            "{}",
            &at.diff[..80]
        );

        fs::write(fixture.path("over.txt"), "a".repeat(limit + 1))?;
        let over = fixture.call("over.txt", "b\n", true, false)?;
        assert!(over.changed);
        assert_eq!(
            over.diff,
            format!(
                "File a/over.txt ({} bytes) is too large to diff; the write replaces it whole\n",
                limit + 1
            )
        );
        Ok(())
    }
}
