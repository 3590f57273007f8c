//! Undoing change sets: putting a workspace back as it was before a run's step.
//!
//! A plan folds the change sets to undo, oldest first, into one target per path: the state
//! before the first change to undo (what to restore) and the state after the last one (what
//! the run left there). Before touching anything the plan compares what is there now with
//! what the run left: a path someone else changed since is a conflict, and the revert is
//! refused with the list unless forced. Restoring uses the blob store; a path recorded by
//! digest only, or whose blob was evicted, cannot be restored, and the report says so rather
//! than failing the rest. Each path is restored as `apply.rs` writes one (`paths.rs`).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{FileType, Mode, OFlags};

use super::apply::STAGING_PREFIX;
use super::blobs::{self, Blobs};
use super::bounds::Deadline;
use super::lower::{lower_stat, open_lower, open_workspace, read_names};
use super::paths;
use super::rel::RelPath;
use super::sparse;
use super::types::{ChangeSet, Kind, Node, State, name_paths};

/// What to put back at one path.
#[derive(Debug, Clone)]
struct Target {
    /// None: the path did not exist.
    restore: Option<State>,
    /// What the run left there (None: it removed the path).
    expect: Option<State>,
    /// The path was recorded by digest only in one of the change sets.
    digest_only: Option<String>,
}

/// A path that is not what the run left there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RevertError {
    #[error("{} path(s) changed since the run left them: {}", .0.len(), describe(.0))]
    Conflicts(Vec<Conflict>),
    #[error("cannot revert {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn describe(conflicts: &[Conflict]) -> String {
    name_paths(
        conflicts
            .iter()
            .map(|conflict| format!("{} ({})", conflict.path, conflict.reason)),
    )
}

/// What a revert did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevertReport {
    pub restored: Vec<String>,
    pub removed: Vec<String>,
    /// Paths that could not be put back byte for byte, with why.
    pub unrestorable: Vec<Conflict>,
}

/// The change sets to undo, folded per path.
#[derive(Debug, Clone, Default)]
pub struct RevertPlan {
    targets: BTreeMap<RelPath, Target>,
}

impl RevertPlan {
    /// Folds `sets`, oldest first. Changes that never reached the workspace are skipped.
    pub fn new<'a>(sets: impl IntoIterator<Item = &'a ChangeSet>) -> RevertPlan {
        let mut targets: BTreeMap<RelPath, Target> = BTreeMap::new();
        let mut note = |path: &RelPath,
                        before: &Option<State>,
                        after: &Option<State>,
                        digest_only: &Option<String>| {
            let target = targets.entry(path.clone()).or_insert_with(|| Target {
                restore: before.clone(),
                expect: None,
                digest_only: None,
            });
            target.expect = after.clone();
            if digest_only.is_some() {
                target.digest_only = digest_only.clone();
            }
        };
        for set in sets {
            for change in set.changes.iter().filter(|change| change.applied) {
                match (change.kind, &change.from) {
                    (Kind::Renamed, Some(from)) => {
                        note(from, &change.before, &None, &change.digest_only);
                        note(&change.path, &None, &change.after, &change.digest_only);
                    }
                    _ => note(
                        &change.path,
                        &change.before,
                        &change.after,
                        &change.digest_only,
                    ),
                }
            }
        }
        RevertPlan { targets }
    }

    /// The paths that are no longer what the run left there (blocking).
    pub fn conflicts(&self, workspace: BorrowedFd<'_>) -> Vec<Conflict> {
        let mut conflicts = Vec::new();
        for (path, target) in &self.targets {
            let now = current(workspace, path);
            let is = |state: &Option<State>| match (state, &now) {
                (None, None) => true,
                (Some(state), Some(now)) => same(state, now),
                _ => false,
            };
            // A path already back as it was (an earlier revert) is no conflict either.
            let differs = !is(&target.expect) && !is(&target.restore);
            if differs {
                conflicts.push(Conflict {
                    path: path.to_string(),
                    reason: match (&target.expect, &now) {
                        (None, Some(_)) => "the run removed it, and it exists again".into(),
                        (Some(_), None) => "the run left it, and it is gone".into(),
                        _ => "changed since the run wrote it".into(),
                    },
                });
            }
        }
        conflicts
    }

    /// Restores every path (blocking); refuses on conflicts unless `force`.
    pub fn execute(
        &self,
        workspace: BorrowedFd<'_>,
        blobs: &Blobs,
        force: bool,
    ) -> Result<RevertReport, RevertError> {
        if !force {
            let conflicts = self.conflicts(workspace);
            if !conflicts.is_empty() {
                return Err(RevertError::Conflicts(conflicts));
            }
        }
        let owner = rustix::fs::fstat(workspace)
            .map(|stat| (stat.st_uid, stat.st_gid))
            .map_err(|err| RevertError::Io {
                path: String::new(),
                source: err.into(),
            })?;
        let mut report = RevertReport::default();
        let io = |path: &RelPath| {
            let path = path.to_string();
            move |source: std::io::Error| RevertError::Io { path, source }
        };
        // Removals first, deepest first, then what to restore, parents first.
        let mut removals: Vec<&RelPath> = self
            .targets
            .iter()
            .filter(|(_, target)| target.restore.is_none())
            .map(|(path, _)| path)
            .collect();
        removals.sort_by(|a, b| b.depth().cmp(&a.depth()).then_with(|| b.cmp(a)));
        for path in removals {
            if current(workspace, path).is_some() {
                paths::remove(workspace, path).map_err(io(path))?;
                report.removed.push(path.to_string());
            }
        }
        for (path, target) in &self.targets {
            let Some(restore) = &target.restore else {
                continue;
            };
            if let Some(now) = current(workspace, path)
                && same(restore, &now)
            {
                continue;
            }
            let content = match (restore.node, &restore.digest) {
                (Node::Dir, _) => None,
                (_, Some(digest)) => match blobs.read(digest).map_err(io(path))? {
                    Some(bytes) => Some(bytes),
                    None => {
                        report.unrestorable.push(Conflict {
                            path: path.to_string(),
                            reason: match &target.digest_only {
                                Some(why) => format!("recorded by digest only ({why})"),
                                None => "its content is no longer in the blob store".into(),
                            },
                        });
                        continue;
                    }
                },
                (_, None) => None,
            };
            restore_path(workspace, path, restore, content.as_deref(), owner).map_err(io(path))?;
            report.restored.push(path.to_string());
        }
        Ok(report)
    }
}

/// Whether two states are the same for a revert: same kind and content, same mode for files
/// and directories.
pub(super) fn same(a: &State, b: &State) -> bool {
    a.node == b.node && a.digest == b.digest && (a.node == Node::Symlink || a.mode == b.mode)
}

/// The state of `path` in the workspace now.
pub(super) fn current(workspace: BorrowedFd<'_>, path: &RelPath) -> Option<State> {
    current_within(workspace, path, Deadline::none())
}

/// The state of `path` under `workspace` now, its content hashed by `deadline`; none if it
/// cannot be read by then. Opened without blocking: a name that turns into a fifo between
/// the `stat` and the `open` (a hostile tree) reads as nothing, never as a wait.
pub(super) fn current_within(
    workspace: BorrowedFd<'_>,
    path: &RelPath,
    deadline: Deadline,
) -> Option<State> {
    let stat = lower_stat(workspace, path)?;
    let mode = stat.st_mode & 0o7777;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => Some(State {
            node: Node::Dir,
            digest: None,
            mode,
            size: 0,
        }),
        FileType::Symlink => {
            let (parent, name) = path.split();
            let dir = open_lower(workspace, parent, OFlags::DIRECTORY | OFlags::PATH)?;
            let target = rustix::fs::readlinkat(&dir, name, Vec::new()).ok()?;
            let (digest, size) = blobs::digest(target.as_bytes()).ok()?;
            Some(State {
                node: Node::Symlink,
                digest: Some(digest),
                mode: 0o777,
                size,
            })
        }
        FileType::RegularFile => {
            let file = open_lower(
                workspace,
                path.as_bytes(),
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK,
            )?;
            let opened = rustix::fs::fstat(&file).ok()?;
            if FileType::from_raw_mode(opened.st_mode) != FileType::RegularFile {
                return None;
            }
            let (digest, size) = sparse::digest(&File::from(file), deadline).ok()?;
            Some(State {
                node: Node::File,
                digest: Some(digest),
                mode,
                size,
            })
        }
        _ => Some(State {
            node: Node::File,
            digest: None,
            mode,
            size: 0,
        }),
    }
}

fn restore_path(
    workspace: BorrowedFd<'_>,
    path: &RelPath,
    state: &State,
    content: Option<&[u8]>,
    owner: paths::Owner,
) -> std::io::Result<()> {
    if let Some(existing) = lower_stat(workspace, path)
        && (state.node == Node::Dir)
            != (FileType::from_raw_mode(existing.st_mode) == FileType::Directory)
    {
        paths::remove(workspace, path)?;
    }
    let (dir, name) = paths::parent(workspace, path)?;
    let content = content.unwrap_or_default();
    match state.node {
        Node::Dir => paths::make_dir(&dir, &name, state.mode, owner),
        Node::Symlink => paths::make_symlink(&dir, &name, content, owner),
        Node::File => paths::write_file(&dir, &name, content, state.mode, owner),
    }
}

/// After a crash while `set` was being applied to `workspace`: marks each change applied
/// exactly when its path is as the change left it, and says so in the set (blocking). Each
/// path was renamed into place whole, so it is one side or the other — unless something else
/// changed it since, which is named.
pub fn reconcile(workspace: &std::path::Path, set: &mut ChangeSet) -> std::io::Result<()> {
    let root = open_workspace(workspace)?;
    let root = root.as_fd();
    // What the interrupted apply staged, and the versions it had replaced: the set's own
    // record (and its blobs) says what they were.
    if let Ok(dir) = rustix::fs::openat(
        root,
        ".",
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        for name in read_names(&dir)? {
            if name.starts_with(STAGING_PREFIX.as_bytes())
                && let Ok(path) = RelPath::new(name)
            {
                paths::remove(root, &path)?;
            }
        }
    }
    let matches = |state: &Option<State>, now: &Option<State>| match (state, now) {
        (None, None) => true,
        (Some(state), Some(now)) => same(state, now),
        _ => false,
    };
    let mut landed = 0;
    let mut neither = Vec::new();
    for change in &mut set.changes {
        let now = current(root, &change.path);
        let from_gone = change
            .from
            .as_ref()
            .is_none_or(|from| current(root, from).is_none());
        change.applied = matches(&change.after, &now) && from_gone;
        if change.applied {
            landed += 1;
        } else if !matches(&change.before, &now) && change.kind != Kind::Renamed {
            neither.push(change.path.to_string());
        }
    }
    let mut note = format!(
        "the daemon stopped while applying this change set: {landed} of {} path(s) had reached the workspace, each whole",
        set.changes.len()
    );
    if !neither.is_empty() {
        note.push_str(&format!(
            "; changed since by something else: {}",
            name_paths(&neither)
        ));
    }
    set.not_applied = Some(note);
    Ok(())
}

impl RevertPlan {
    /// What [`RevertPlan::execute`] would do now, changing nothing (blocking): the paths it
    /// would restore and remove, and the conflicts it would be refused for without `force`.
    /// A content the blob store no longer keeps is named only by the revert itself.
    pub fn preview_at(
        &self,
        path: &std::path::Path,
    ) -> Result<(RevertReport, Vec<Conflict>), RevertError> {
        let workspace = open_workspace(path).map_err(|source| RevertError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let workspace = workspace.as_fd();
        let mut report = RevertReport::default();
        for (path, target) in &self.targets {
            let now = current(workspace, path);
            match (&target.restore, &now) {
                (None, Some(_)) => report.removed.push(path.to_string()),
                (Some(restore), Some(now)) if same(restore, now) => {}
                (Some(_), _) => report.restored.push(path.to_string()),
                (None, None) => {}
            }
        }
        Ok((report, self.conflicts(workspace)))
    }

    /// Reverts the workspace at `path` (blocking); see [`RevertPlan::execute`].
    pub fn execute_at(
        &self,
        path: &std::path::Path,
        blobs: &Blobs,
        force: bool,
    ) -> Result<RevertReport, RevertError> {
        let workspace = open_workspace(path).map_err(|source| RevertError::Io {
            path: path.display().to_string(),
            source,
        })?;
        self.execute(workspace.as_fd(), blobs, force)
    }
}
