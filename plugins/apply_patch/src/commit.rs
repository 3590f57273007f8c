//! Carries out a [`Plan`]: deletions, then the directories new files need, then each
//! file written atomically. If a step fails, every step already taken is undone from
//! the originals kept in memory, so the workspace is left as it was, and the error says
//! so (or names what could not be put back).

use std::fs;
use std::fs::Permissions;
use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::rc::Rc;

use airlock_sdk::ToolError;
use airlock_sdk::atomic;

use crate::mode;

/// Everything a patch changes on disk.
#[derive(Debug, Default)]
pub struct Plan {
    pub deletes: Vec<Delete>,
    /// Outermost first.
    pub dirs: Vec<Dir>,
    pub writes: Vec<Write>,
}

#[derive(Debug)]
pub struct Delete {
    pub target: PathBuf,
    /// The workspace-relative name, for messages.
    pub shown: String,
    pub original: Rc<[u8]>,
    pub permissions: Option<Permissions>,
}

#[derive(Debug)]
pub struct Dir {
    pub path: PathBuf,
    pub shown: String,
}

#[derive(Debug)]
pub struct Write {
    pub target: PathBuf,
    pub shown: String,
    pub bytes: Rc<[u8]>,
    /// The permissions to give a replaced file.
    pub permissions: Option<Permissions>,
    /// Make a new file executable once written.
    pub make_executable: bool,
    /// The replaced file and its permissions; `None` for a new file.
    pub original: Option<(Rc<[u8]>, Option<Permissions>)>,
}

pub fn commit(plan: &Plan) -> Result<(), ToolError> {
    commit_with(plan, |_| Ok(()))
}

/// How to take back one step.
enum Undo<'a> {
    /// A file that did not exist: remove it.
    Remove(&'a Path),
    /// A file that was replaced or deleted: write the original back.
    Restore {
        target: &'a Path,
        shown: &'a str,
        bytes: &'a [u8],
        permissions: Option<&'a Permissions>,
    },
    /// A directory that was created.
    RemoveDir(&'a Path),
}

/// [`commit`], with `before_step` called before each step touches `path`: the tests use
/// it to make a step fail.
pub fn commit_with(
    plan: &Plan,
    mut before_step: impl FnMut(&Path) -> io::Result<()>,
) -> Result<(), ToolError> {
    let mut undo = Vec::new();
    let mut done = 0;
    let Err((err, shown)) = run(plan, &mut undo, &mut done, &mut before_step) else {
        return Ok(());
    };
    let cause = ToolError::io(&err, shown);
    let failures = roll_back(undo);
    let message = if failures.is_empty() {
        format!(
            "{}. The patch was not applied: {}, so the workspace is as it was",
            cause.message(),
            match done {
                0 => "nothing had been changed yet".to_owned(),
                1 => "the one change already made was undone".to_owned(),
                n => format!("the {n} changes already made were undone"),
            }
        )
    } else {
        format!(
            "{}. The patch was not applied, and undoing the changes already made failed \
             for {}: check those paths, the rest was put back",
            cause.message(),
            failures.join(", ")
        )
    };
    Err(if cause.is_retryable() {
        ToolError::retryable(message)
    } else {
        ToolError::new(message)
    })
}

/// Takes the steps of `plan`, pushing how to undo each onto `undo` and counting those
/// that completed in `done`.
fn run<'a>(
    plan: &'a Plan,
    undo: &mut Vec<Undo<'a>>,
    done: &mut usize,
    before_step: &mut impl FnMut(&Path) -> io::Result<()>,
) -> Result<(), (io::Error, &'a str)> {
    for delete in &plan.deletes {
        let fail = |err| (err, delete.shown.as_str());
        before_step(&delete.target).map_err(fail)?;
        fs::remove_file(&delete.target).map_err(fail)?;
        undo.push(Undo::Restore {
            target: &delete.target,
            shown: &delete.shown,
            bytes: &delete.original,
            permissions: delete.permissions.as_ref(),
        });
        *done += 1;
    }
    for dir in &plan.dirs {
        let fail = |err| (err, dir.shown.as_str());
        before_step(&dir.path).map_err(fail)?;
        match fs::create_dir(&dir.path) {
            Ok(()) => {
                undo.push(Undo::RemoveDir(&dir.path));
                *done += 1;
            }
            // Made meanwhile by someone else: not ours to remove.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(fail(err)),
        }
    }
    for write in &plan.writes {
        let fail = |err| (err, write.shown.as_str());
        before_step(&write.target).map_err(fail)?;
        // Recorded before the write, not after: a write that fails may still have
        // changed the file (the in-place fallback of `atomic::write` truncates first).
        undo.push(match &write.original {
            Some((bytes, permissions)) => Undo::Restore {
                target: &write.target,
                shown: &write.shown,
                bytes,
                permissions: permissions.as_ref(),
            },
            None => Undo::Remove(&write.target),
        });
        atomic::write(&write.target, &write.bytes, write.permissions.clone()).map_err(fail)?;
        if write.make_executable {
            set_executable(&write.target).map_err(fail)?;
        }
        *done += 1;
    }
    Ok(())
}

fn set_executable(target: &Path) -> io::Result<()> {
    let permissions = fs::metadata(target)?.permissions();
    match mode::with_executable(&permissions, true) {
        Some(permissions) => fs::set_permissions(target, permissions),
        // Without file modes there is nothing to set; the result says so.
        None => Ok(()),
    }
}

/// Takes back `undo` in reverse; returns what could not be taken back.
fn roll_back(undo: Vec<Undo<'_>>) -> Vec<String> {
    let gone = |result: io::Result<()>| match result {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    };
    let mut failures = Vec::new();
    for step in undo.into_iter().rev() {
        let (result, path) = match step {
            Undo::Remove(target) => (gone(fs::remove_file(target)), target.display()),
            Undo::RemoveDir(path) => (gone(fs::remove_dir(path)), path.display()),
            Undo::Restore {
                target,
                shown,
                bytes,
                permissions,
            } => {
                let result = atomic::write(target, bytes, permissions.cloned());
                if let Err(err) = result {
                    failures.push(format!("`{shown}` ({err})"));
                }
                continue;
            }
        };
        if let Err(err) = result {
            failures.push(format!("`{path}` ({err})"));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn bytes(text: &str) -> Rc<[u8]> {
        Rc::from(text.as_bytes())
    }

    /// A plan that deletes `gone`, replaces `edit`, and creates `dir/new`.
    fn plan(root: &Path) -> anyhow::Result<Plan> {
        fs::write(root.join("gone"), "gone\n")?;
        fs::write(root.join("edit"), "old\n")?;
        fs::set_permissions(root.join("edit"), Permissions::from_mode(0o751))?;
        let permissions = fs::metadata(root.join("edit"))?.permissions();
        Ok(Plan {
            deletes: vec![Delete {
                target: root.join("gone"),
                shown: "gone".into(),
                original: bytes("gone\n"),
                permissions: Some(fs::metadata(root.join("gone"))?.permissions()),
            }],
            dirs: vec![Dir {
                path: root.join("dir"),
                shown: "dir".into(),
            }],
            writes: vec![
                Write {
                    target: root.join("dir/new"),
                    shown: "dir/new".into(),
                    bytes: bytes("new\n"),
                    permissions: None,
                    make_executable: true,
                    original: None,
                },
                Write {
                    target: root.join("edit"),
                    shown: "edit".into(),
                    bytes: bytes("new\n"),
                    permissions: Some(permissions.clone()),
                    make_executable: false,
                    original: Some((bytes("old\n"), Some(permissions))),
                },
            ],
        })
    }

    #[test]
    fn carries_out_every_step() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        commit(&plan(root)?)?;
        assert!(!root.join("gone").exists());
        assert_eq!(fs::read_to_string(root.join("dir/new"))?, "new\n");
        let new_mode = fs::metadata(root.join("dir/new"))?.permissions().mode();
        assert_eq!(new_mode & 0o111, 0o111 & ((new_mode & 0o444) >> 2));
        assert_ne!(new_mode & 0o100, 0, "the new file is executable");
        assert_eq!(fs::read_to_string(root.join("edit"))?, "new\n");
        assert_eq!(
            fs::metadata(root.join("edit"))?.permissions().mode() & 0o777,
            0o751
        );
        Ok(())
    }

    #[test]
    fn a_failed_write_undoes_everything_before_it() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().to_owned();
        let plan = plan(&root)?;
        // A real failure: a directory appears where the last file is to be written.
        let result = commit_with(&plan, |path| {
            if path == root.join("edit") {
                fs::remove_file(path)?;
                fs::create_dir(path)?;
            }
            Ok(())
        });
        let Err(err) = result else {
            panic!("the write into a directory succeeded");
        };
        // The obstacle is in the way of the restore too: that is reported.
        assert!(
            err.message()
                .contains("undoing the changes already made failed for `edit`"),
            "{}",
            err.message()
        );
        assert_eq!(fs::read_to_string(root.join("gone"))?, "gone\n");
        assert!(!root.join("dir").exists(), "the new directory was left");

        // Without the obstacle staying, everything is put back.
        fs::remove_dir(root.join("edit"))?;
        let plan = self::plan(&root)?;
        fs::remove_dir_all(root.join("dir")).or_else(|err| match err.kind() {
            io::ErrorKind::NotFound => Ok(()),
            _ => Err(err),
        })?;
        let result = commit_with(&plan, |path| {
            if path == root.join("edit") {
                return Err(io::Error::other("disk on fire"));
            }
            Ok(())
        });
        let Err(err) = result else {
            panic!("the failing step succeeded");
        };
        assert_eq!(
            err.message(),
            "edit: disk on fire. The patch was not applied: the 3 changes already made \
             were undone, so the workspace is as it was"
        );
        assert_eq!(fs::read_to_string(root.join("gone"))?, "gone\n");
        assert_eq!(fs::read_to_string(root.join("edit"))?, "old\n");
        assert!(!root.join("dir").exists());
        Ok(())
    }
}
