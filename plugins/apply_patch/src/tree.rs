//! The workspace as the patch changes it, held in memory until every file's part of the
//! patch has applied.
//!
//! Each file the patch names is checked and read once, the first time it is named; from
//! then on the patch changes the copy here, so later parts of a patch see what earlier
//! parts did (a codex patch may update one file in two sections). Only when all of it
//! applied is the difference from what was read turned into a [`Plan`] for `commit`.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fs;
use std::fs::File;
use std::fs::Permissions;
use std::io;
use std::io::Read;
use std::path::Component;
use std::path::Path;
use std::path::PathBuf;
use std::rc::Rc;

use airlock_sdk::IoResultExt;
use airlock_sdk::ToolError;
use airlock_sdk::Workspace;

use crate::commit::Delete;
use crate::commit::Dir;
use crate::commit::Plan;
use crate::commit::Write;
use crate::mode;

/// The largest file a patch may change: 8 MiB. The whole file is held in memory, with its
/// patched copy and its diff, inside the guest's linear memory; source files are far
/// smaller, and a file this size is better regenerated than patched.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// The most bytes of files one patch may read: 32 MiB. Originals are kept until the end
/// so that a failed write can be undone, next to their patched copies and diffs; this
/// keeps all of it well inside the 256 MiB the workspace-write profile gives the guest.
pub const MAX_READ_BYTES: u64 = 32 * 1024 * 1024;

/// A file's contents and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileData {
    /// Shared: the same contents are held as the original, the current state and the
    /// before and after of an entry without being copied.
    pub bytes: Rc<[u8]>,
    /// `None` where the platform has no file modes (WASI).
    pub executable: Option<bool>,
}

#[derive(Debug)]
struct Slot {
    target: PathBuf,
    /// What the file was when read (`None`: it did not exist).
    original: Option<FileData>,
    /// The original's permissions, restored if it must be put back.
    permissions: Option<Permissions>,
    /// What the patch has made of it so far.
    current: Option<FileData>,
}

/// The files a patch touches, by their workspace-relative name.
#[derive(Debug)]
pub struct Tree<'w> {
    workspace: &'w Workspace,
    slots: BTreeMap<String, Slot>,
    read_bytes: u64,
}

impl<'w> Tree<'w> {
    pub fn new(workspace: &'w Workspace) -> Self {
        Self {
            workspace,
            slots: BTreeMap::new(),
            read_bytes: 0,
        }
    }

    /// Checks `path` (as the patch writes it) and reads the file on its first use;
    /// returns the name the file goes by from then on.
    pub fn touch(&mut self, path: &str) -> Result<String, ToolError> {
        check_relative(path)?;
        let target = self.workspace.resolve(path)?;
        if target == self.workspace.root() {
            return Err(ToolError::new(format!(
                "`{path}` names the workspace itself, not a file"
            )));
        }
        let key = self.workspace.display(&target);
        if !self.slots.contains_key(&key) {
            self.check_ancestors(&target)?;
            let (original, permissions) = self.read(&target, &key)?;
            let slot = Slot {
                target,
                current: original.clone(),
                original,
                permissions,
            };
            self.slots.insert(key.clone(), slot);
        }
        Ok(key)
    }

    /// The file as the patch has left it so far (`None`: absent). `key` is a name
    /// [`Tree::touch`] returned.
    pub fn current(&self, key: &str) -> Option<&FileData> {
        self.slots.get(key).and_then(|slot| slot.current.as_ref())
    }

    /// Sets what the file `key` (a name [`Tree::touch`] returned) becomes.
    pub fn set(&mut self, key: &str, data: Option<FileData>) {
        if let Some(slot) = self.slots.get_mut(key) {
            slot.current = data;
        }
    }

    /// What must be written to turn the files as read into the files as patched:
    /// deletions, the directories new files need (outermost first) and writes.
    pub fn plan(&self) -> Result<Plan, ToolError> {
        let mut plan = Plan::default();
        let mut dirs = BTreeSet::new();
        for (key, slot) in &self.slots {
            match (&slot.original, &slot.current) {
                (None, None) => {}
                (Some(original), None) => plan.deletes.push(Delete {
                    target: slot.target.clone(),
                    shown: key.clone(),
                    original: original.bytes.clone(),
                    permissions: slot.permissions.clone(),
                }),
                (None, Some(current)) => {
                    for dir in self.missing_dirs(&slot.target)? {
                        let shown = self.workspace.display(&dir);
                        if self.current(&shown).is_some() {
                            return Err(ToolError::new(format!(
                                "`{shown}` cannot be both a file and the directory of `{key}`"
                            )));
                        }
                        dirs.insert(dir);
                    }
                    plan.writes.push(Write {
                        target: slot.target.clone(),
                        shown: key.clone(),
                        bytes: current.bytes.clone(),
                        permissions: None,
                        make_executable: current.executable == Some(true),
                        original: None,
                    });
                }
                (Some(original), Some(current)) => {
                    if original == current {
                        continue;
                    }
                    // The replaced file's permissions, with the executable bit the patch
                    // asks for: a script stays executable unless the patch says otherwise.
                    let permissions =
                        slot.permissions
                            .as_ref()
                            .map(|permissions| match current.executable {
                                Some(executable) if original.executable != Some(executable) => {
                                    mode::with_executable(permissions, executable)
                                        .unwrap_or_else(|| permissions.clone())
                                }
                                Some(_) | None => permissions.clone(),
                            });
                    plan.writes.push(Write {
                        target: slot.target.clone(),
                        shown: key.clone(),
                        bytes: current.bytes.clone(),
                        permissions,
                        make_executable: false,
                        original: Some((original.bytes.clone(), slot.permissions.clone())),
                    });
                }
            }
        }
        // Sorted paths list a directory before what is inside it.
        plan.dirs = dirs
            .into_iter()
            .map(|path| Dir {
                shown: self.workspace.display(&path),
                path,
            })
            .collect();
        Ok(plan)
    }

    /// Refuses a path through a symlink or a file. Through a symlink the patch would
    /// change a file other than the one it names (perhaps outside the workspace, where
    /// the sandbox would stop it with a far less useful message); `git apply` refuses
    /// the same ("beyond a symbolic link").
    fn check_ancestors(&self, target: &Path) -> Result<(), ToolError> {
        let root = self.workspace.root();
        let Some(parent) = target.parent() else {
            return Ok(());
        };
        let Ok(relative) = parent.strip_prefix(root) else {
            return Ok(());
        };
        let mut dir = root.to_path_buf();
        for component in relative.components() {
            dir.push(component);
            let shown = self.workspace.display(&dir);
            match fs::symlink_metadata(&dir) {
                Ok(metadata) if metadata.file_type().is_symlink() => {
                    return Err(ToolError::new(format!(
                        "`{shown}` is a symbolic link; apply_patch does not write through \
                         symlinks"
                    )));
                }
                Ok(metadata) if !metadata.is_dir() => {
                    return Err(ToolError::new(format!("`{shown}` is not a directory")));
                }
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(err) => return Err(ToolError::io(&err, shown)),
            }
        }
        Ok(())
    }

    /// The file at `target`, if any, and its permissions.
    fn read(
        &mut self,
        target: &Path,
        key: &str,
    ) -> Result<(Option<FileData>, Option<Permissions>), ToolError> {
        let metadata = match fs::symlink_metadata(target) {
            Ok(metadata) => metadata,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok((None, None)),
            Err(err) => return Err(ToolError::io(&err, key)),
        };
        let file_type = metadata.file_type();
        if file_type.is_symlink() {
            return Err(ToolError::new(format!(
                "`{key}` is a symbolic link; apply_patch does not patch through symlinks, \
                 patch the file it points to instead"
            )));
        }
        if file_type.is_dir() {
            return Err(ToolError::new(format!(
                "`{key}` is a directory, not a file"
            )));
        }
        if !file_type.is_file() {
            return Err(ToolError::new(format!("`{key}` is not a regular file")));
        }
        let too_large = |bytes: u64| {
            ToolError::new(format!(
                "`{key}` is {bytes} bytes; apply_patch changes files of up to {MAX_FILE_BYTES} \
                 bytes"
            ))
        };
        if metadata.len() > MAX_FILE_BYTES {
            return Err(too_large(metadata.len()));
        }
        let mut bytes = Vec::new();
        File::open(target)
            .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .with_path(key)?;
        let length = bytes.len() as u64;
        if length > MAX_FILE_BYTES {
            // It grew past the limit since its metadata was read.
            return Err(too_large(length));
        }
        self.read_bytes += length;
        if self.read_bytes > MAX_READ_BYTES {
            return Err(ToolError::new(format!(
                "the patch changes more than {MAX_READ_BYTES} bytes of files; split it into \
                 smaller patches"
            )));
        }
        let permissions = metadata.permissions();
        let data = FileData {
            bytes: Rc::from(bytes),
            executable: mode::executable(&permissions),
        };
        Ok((Some(data), Some(permissions)))
    }

    /// The directories above `target` that do not exist, outermost first.
    fn missing_dirs(&self, target: &Path) -> Result<Vec<PathBuf>, ToolError> {
        let root = self.workspace.root();
        let mut missing = Vec::new();
        let mut dir = target.parent();
        while let Some(path) = dir.filter(|path| *path != root && path.starts_with(root)) {
            match fs::symlink_metadata(path) {
                Ok(_) => break,
                Err(err) if err.kind() == io::ErrorKind::NotFound => missing.push(path.to_owned()),
                Err(err) => return Err(ToolError::io(&err, self.workspace.display(path))),
            }
            dir = path.parent();
        }
        missing.reverse();
        Ok(missing)
    }
}

/// Refuses what a patch has no business naming: an absolute path, or one with `..`,
/// even if it would resolve inside the workspace. Patches name files relative to the
/// top of the tree they were made in.
fn check_relative(path: &str) -> Result<(), ToolError> {
    let components = Path::new(path).components();
    if Path::new(path).has_root() {
        return Err(ToolError::new(format!(
            "`{path}` is an absolute path; a patch names files relative to the workspace, \
             such as `src/main.rs`"
        )));
    }
    if components
        .clone()
        .any(|component| component == Component::ParentDir)
    {
        return Err(ToolError::new(format!(
            "`{path}` contains `..`; a patch may only name files inside the workspace"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn refused(tree: &mut Tree<'_>, path: &str) -> String {
        match tree.touch(path) {
            Ok(key) => panic!("{path} was accepted as {key}"),
            Err(err) => err.message().to_owned(),
        }
    }

    #[test]
    fn touching_reads_once_and_names_files_relative_to_the_workspace() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        fs::write(dir.path().join("a.txt"), "one\n")?;
        let workspace = Workspace::at(dir.path());
        let mut tree = Tree::new(&workspace);
        assert_eq!(tree.touch("./a.txt")?, "a.txt");
        fs::write(dir.path().join("a.txt"), "changed behind our back\n")?;
        assert_eq!(tree.touch("a.txt")?, "a.txt");
        let bytes = tree.current("a.txt").map(|data| data.bytes.to_vec());
        assert_eq!(bytes, Some(b"one\n".to_vec()));
        assert_eq!(tree.touch("new/file.txt")?, "new/file.txt");
        assert_eq!(tree.current("new/file.txt"), None);
        Ok(())
    }

    #[test]
    fn refuses_paths_outside_or_through_links() -> anyhow::Result<()> {
        let outside = tempfile::tempdir()?;
        let dir = tempfile::tempdir()?;
        fs::write(dir.path().join("file"), "x")?;
        symlink(outside.path(), dir.path().join("out"))?;
        symlink("file", dir.path().join("alias"))?;
        let workspace = Workspace::at(dir.path());
        let mut tree = Tree::new(&workspace);
        assert!(refused(&mut tree, "/etc/passwd").contains("is an absolute path"));
        assert!(refused(&mut tree, "../x").contains("contains `..`"));
        assert!(refused(&mut tree, "a/../../x").contains("contains `..`"));
        assert!(refused(&mut tree, "a/../b").contains("contains `..`"));
        assert_eq!(
            refused(&mut tree, "out/evil.txt"),
            "`out` is a symbolic link; apply_patch does not write through symlinks"
        );
        assert!(refused(&mut tree, "alias").contains("is a symbolic link"));
        assert_eq!(refused(&mut tree, "file/x"), "`file` is not a directory");
        assert!(refused(&mut tree, ".").contains("names the workspace itself"));
        assert!(refused(&mut tree, "").contains("empty"));
        Ok(())
    }

    #[test]
    fn the_size_limit_holds_at_its_edge() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let limit = usize::try_from(MAX_FILE_BYTES)?;
        fs::write(dir.path().join("at"), vec![b'a'; limit])?;
        fs::write(dir.path().join("over"), vec![b'a'; limit + 1])?;
        let workspace = Workspace::at(dir.path());
        let mut tree = Tree::new(&workspace);
        tree.touch("at")?;
        assert_eq!(
            refused(&mut tree, "over"),
            format!(
                "`over` is {} bytes; apply_patch changes files of up to {limit} bytes",
                limit + 1
            )
        );
        Ok(())
    }

    #[test]
    fn the_plan_holds_only_real_changes() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        fs::write(dir.path().join("same"), "s")?;
        fs::write(dir.path().join("gone"), "g")?;
        fs::write(dir.path().join("edit"), "e")?;
        let workspace = Workspace::at(dir.path());
        let mut tree = Tree::new(&workspace);
        for path in ["same", "gone", "edit", "a/b/new", "ghost"] {
            tree.touch(path)?;
        }
        let data = |text: &str| FileData {
            bytes: Rc::from(text.as_bytes()),
            executable: Some(false),
        };
        tree.set("gone", None);
        tree.set("edit", Some(data("E")));
        tree.set("a/b/new", Some(data("n")));
        // Added, then removed again: no change.
        tree.set("ghost", Some(data("boo")));
        tree.set("ghost", None);
        let plan = tree.plan()?;
        let shown = |paths: Vec<&str>| paths.join(" ");
        assert_eq!(
            shown(plan.deletes.iter().map(|d| d.shown.as_str()).collect()),
            "gone"
        );
        assert_eq!(
            shown(plan.dirs.iter().map(|d| d.shown.as_str()).collect()),
            "a a/b"
        );
        assert_eq!(
            shown(plan.writes.iter().map(|w| w.shown.as_str()).collect()),
            "a/b/new edit"
        );
        Ok(())
    }
}
