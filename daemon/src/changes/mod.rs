//! Change sets: what one tool call changed in its workspace, recorded so that a person can
//! see it and undo it.
//!
//! A call whose profile lets it write the workspace never writes the workspace itself. It
//! writes an overlay ([`overlay`]) whose lower layer is the workspace, read-only, and whose
//! upper layer is a directory of the daemon's own. When the call ends on its own, the upper
//! layer is the exact record of what it changed: [`capture`] turns it into a [`ChangeSet`]
//! (keeping the content before and after as [`blobs`]), and [`apply`] puts it into the
//! workspace one path at a time, each by an atomic rename, never following a symlink. A call
//! that is killed, times out or is cancelled changes nothing: its upper layer is removed.
//! [`revert`] undoes change sets, refusing when someone else changed a path since.
//!
//! Paths the profile excludes, or that the workspace's ignore files name (as they were before
//! the call: a call that rewrites `.gitignore` cannot hide its own changes), are applied but
//! recorded by digest only, so that a build's target directory neither slows a call down nor
//! fills the blob store; such a path cannot be undone byte for byte, and a revert says so.

mod apply;
mod blobs;
#[cfg(any(test, feature = "testing"))]
pub mod boundary;
mod bounds;
mod capture;
mod copy;
mod exclude;
mod idmap;
mod lower;
mod overlay;
mod paths;
mod rel;
mod revert;
mod show;
mod sparse;
mod sync;
mod views;

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use apply::Transfer;
pub use blobs::Blobs;
pub use bounds::{ChangeRules, Deadline, SURVEY_INTERVAL_MIN, survey};
pub use capture::Modes;
pub use copy::copy_contents;
pub use exclude::{Exclusions, WorkspaceIgnores};
pub use idmap::{IdMap, NOBODY};
pub use lower::open_workspace;
pub use overlay::{Overlay, Upper};
pub use rel::{NotRelative, RelPath};
pub use revert::{RevertError, RevertPlan, RevertReport, reconcile};
pub use sync::ServerWrites;
pub use views::Views;

/// Subdirectory of the daemon's state directory the change sets own.
const CHANGES_DIR: &str = "changes";
/// Where calls' upper layers live while they run, one folder per call.
const CALLS_DIR: &str = "calls";
/// The content-addressed store of before and after contents.
const BLOBS_DIR: &str = "blobs";

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Node {
    File,
    Symlink,
    Dir,
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Added,
    Modified,
    Deleted,
    /// Deleted at `from` and added here with the same content.
    Renamed,
}

/// A path's state on one side of a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub node: Node,
    /// The sha256 of a file's content or of a symlink's target, hex; none for a directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The permission bits (`0o7777`).
    pub mode: u32,
    pub size: u64,
}

/// One path a call changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Relative to the workspace, as the filesystem's bytes.
    pub path: RelPath,
    pub kind: Kind,
    /// For a rename: where the content was before.
    pub from: Option<RelPath>,
    pub before: Option<State>,
    pub after: Option<State>,
    /// Why the contents were not kept (the path is excluded): it is recorded by digest only
    /// and cannot be restored byte for byte.
    pub digest_only: Option<String>,
    /// The change reached the workspace.
    pub applied: bool,
}

/// What one call changed in its workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeSet {
    pub changes: Vec<Change>,
    /// Set when the call's changes did not reach the workspace: why. Nothing was applied
    /// (a set lands whole or not at all), unless a crash stopped the apply halfway, which
    /// this then says, with which paths landed.
    pub not_applied: Option<String>,
    /// What the call's status must say when its changes did not land (not on the wire: the
    /// call's status carries it).
    pub refusal: Option<Refusal>,
    /// What of the upper layer did not land as the tool left it: fifos, sockets and devices
    /// (refused), setuid, setgid and sticky bits (dropped), and what the call wrote beneath a
    /// directory something else replaced during the call.
    pub skipped: Vec<String>,
    /// Non-zero when `changes` holds only the first of the set's changes (a record read back
    /// from a run's events or results): how many the whole set has; the run's journal keeps
    /// them all.
    pub total_changes: u64,
}

/// Why a call's changes did not land, for its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Past a bound of the profile's `[changes]`: `LIMIT_EXCEEDED`.
    Limit,
    /// Past the call's deadline: `TIMEOUT`.
    Deadline,
    /// Anything else (a conflict with a person's edit, a full disk): `SANDBOX_ERROR`.
    Failed,
}

impl ChangeSet {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.not_applied.is_none() && self.skipped.is_empty()
    }

    /// The set of a call whose changes did not land, for `err`.
    pub fn refused(err: &ChangeError) -> ChangeSet {
        ChangeSet {
            not_applied: Some(err.to_string()),
            refusal: Some(err.refusal()),
            ..ChangeSet::default()
        }
    }
}

/// How one call's changes are recorded and applied: the paths kept by digest only, whether
/// the tool could set modes, the profile's bounds, and the call's deadline.
#[derive(Debug, Clone)]
pub struct CallRules {
    pub exclusions: Exclusions,
    pub modes: Modes,
    pub rules: ChangeRules,
    pub deadline: Deadline,
}

/// Why a call's changes could not be captured or applied.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("the call's changes were not applied: {0}")]
    Exceeded(String),
    #[error(
        "the call's changes were not applied: recording and applying them ran past the call's deadline"
    )]
    Deadline,
    #[error(
        "the workspace overlay (overlayfs, needed to record what a call writes) cannot be mounted: {0}"
    )]
    Overlay(String),
    #[error("cannot record the call's changes: {0}")]
    Capture(String),
    #[error("cannot apply the call's changes to the workspace: {0}")]
    Apply(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<rustix::io::Errno> for ChangeError {
    fn from(err: rustix::io::Errno) -> ChangeError {
        ChangeError::Io(err.into())
    }
}

impl ChangeError {
    pub fn refusal(&self) -> Refusal {
        match self {
            ChangeError::Exceeded(_) => Refusal::Limit,
            ChangeError::Deadline => Refusal::Deadline,
            ChangeError::Overlay(_)
            | ChangeError::Capture(_)
            | ChangeError::Apply(_)
            | ChangeError::Io(_) => Refusal::Failed,
        }
    }
}

/// The most a message about a set's paths spends naming them (bytes). Such messages become a
/// set's `not_applied`, a call's error, a span attribute and a gRPC status (a trailer, where
/// peers refuse headers past 8–16 KiB): their size must not grow with the set.
const MAX_NAMING_BYTES: usize = 2000;

/// `names` joined with ", " up to [`MAX_NAMING_BYTES`], then how many more there are.
pub fn name_paths<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    let mut more = 0usize;
    for name in names {
        let name = name.as_ref();
        if more > 0 || (!out.is_empty() && out.len() + 2 + name.len() > MAX_NAMING_BYTES) {
            more += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        if name.len() > MAX_NAMING_BYTES {
            let mut end = MAX_NAMING_BYTES;
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&name[..end]);
            out.push('…');
        } else {
            out.push_str(name);
        }
    }
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    out
}

/// The daemon's change-set service: where upper layers and blobs live, and the id mapping
/// that lets a sandbox write a workspace owned by root.
#[derive(Debug, Clone)]
pub struct Changes {
    calls: PathBuf,
    blobs: Arc<Blobs>,
    idmap: Arc<IdMap>,
    /// Hosted servers' views of workspaces, told what lands in them (see `sync.rs`).
    views: Arc<Views>,
}

impl Changes {
    /// Opens the service under `state_dir`, removing the upper layers of calls a previous
    /// daemon did not finish (they never reached the workspace).
    /// The calls' overlays live under `state_dir` (this daemon's alone: what is left of
    /// them at start is removed), the contents under `shared_dir` (a fleet's daemons share
    /// them, so any of them reverts a run; the state dir again for a single daemon).
    pub fn open(
        state_dir: &Path,
        shared_dir: &Path,
        blob_cap: u64,
    ) -> Result<Changes, ChangeError> {
        let calls = state_dir.join(CHANGES_DIR).join(CALLS_DIR);
        if calls.exists() {
            std::fs::remove_dir_all(&calls)?;
        }
        std::fs::create_dir_all(&calls)?;
        let blobs = Arc::new(Blobs::open(
            shared_dir.join(CHANGES_DIR).join(BLOBS_DIR),
            blob_cap,
        )?);
        let idmap = Arc::new(IdMap::create().map_err(|err| {
            ChangeError::Overlay(format!(
                "cannot create the id mapping for the workspace: {err}"
            ))
        })?);
        Ok(Changes {
            calls,
            blobs,
            idmap,
            views: Arc::default(),
        })
    }

    pub fn blobs(&self) -> &Arc<Blobs> {
        &self.blobs
    }

    /// Hosted servers' views of workspaces, told what the daemon lands in them.
    pub fn views(&self) -> &Views {
        &self.views
    }

    /// Mounts a fresh overlay over `workspace` for one call (blocking).
    pub fn overlay(&self, workspace: &Path, call: &str) -> Result<Overlay, ChangeError> {
        Overlay::mount(workspace, self.calls.join(call), &self.idmap)
    }

    /// Records what the call behind `overlay` changed and applies it to the workspace
    /// (blocking). The overlay must no longer be in use.
    pub fn commit(&self, overlay: Overlay, call: &CallRules) -> ChangeSet {
        match self.capture(overlay, call) {
            Ok((upper, set)) => self.apply(&upper, set, call.deadline),
            Err(set) => set,
        }
    }

    /// What the call behind `overlay` changed, not applied yet (blocking): the change set to
    /// journal before [`Changes::apply`]. A set that could not be captured comes back as the
    /// error, saying why; the call's writes are then dropped.
    pub fn capture(
        &self,
        overlay: Overlay,
        call: &CallRules,
    ) -> Result<(Upper, ChangeSet), ChangeSet> {
        let upper = overlay.finish();
        let set = self.capture_upper(&upper, call)?;
        Ok((upper, set))
    }

    /// What the upper layer `upper` holds, as a change set (blocking).
    fn capture_upper(&self, upper: &Upper, call: &CallRules) -> Result<ChangeSet, ChangeSet> {
        capture::capture(upper, &self.reading(call)).map_err(|err| ChangeSet::refused(&err))
    }

    fn reading<'a>(&'a self, call: &'a CallRules) -> capture::Capture<'a> {
        capture::Capture {
            exclusions: &call.exclusions,
            blobs: &self.blobs,
            modes: call.modes,
            rules: &call.rules,
            deadline: call.deadline,
        }
    }

    /// Applies a captured change set (blocking): all of it, each change then marked applied,
    /// or none of it, the set then saying why.
    pub fn apply(&self, upper: &Upper, set: ChangeSet, deadline: Deadline) -> ChangeSet {
        let set = settle(apply::apply(upper, &set, Transfer::Move, deadline), set);
        self.landed(upper, &set);
        set
    }

    /// Tells the hosted servers over `upper`'s workspace what `set` changed there.
    fn landed(&self, upper: &Upper, set: &ChangeSet) {
        if set.not_applied.is_none() {
            self.views.landed(
                upper.workspace.as_fd(),
                set.changes
                    .iter()
                    .flat_map(|change| std::iter::once(&change.path).chain(&change.from)),
            );
        }
    }

    /// Records what was written through `overlay` by the server's last call and applies it to
    /// the workspace, leaving the overlay in use (blocking): a hosted server's overlay, after
    /// each of its calls. `writes` tells what the server wrote in earlier calls from what it
    /// wrote in this one (see `sync.rs`).
    ///
    /// Overlayfs leaves changes to a lower layer under a mounted overlay undefined; these are
    /// to paths the upper layer already shadows (a copied file, a whiteout), which the
    /// overlay never reads from the lower layer again — and, for the moment an apply lasts,
    /// its staging directory at the workspace's root, which the server may glimpse.
    pub fn sync(
        &self,
        overlay: &Overlay,
        call: &CallRules,
        writes: &ServerWrites,
        deadline: Deadline,
    ) -> ChangeSet {
        let upper = overlay.upper();
        let reading = capture::Capture {
            deadline,
            ..self.reading(call)
        };
        let set = match capture::capture(upper, &reading) {
            Ok(set) => writes.this_call(set, upper),
            Err(err) => return ChangeSet::refused(&err),
        };
        if set.not_applied.is_some() {
            return set;
        }
        let set = settle(apply::apply(upper, &set, Transfer::Copy, deadline), set);
        writes.landed(&set);
        self.landed(upper, &set);
        set
    }
}

/// The set after an apply: every change applied, or none and why.
fn settle(applied: Result<(), ChangeError>, mut set: ChangeSet) -> ChangeSet {
    match applied {
        Ok(()) => {
            for change in &mut set.changes {
                change.applied = true;
            }
        }
        Err(err) => {
            set.not_applied = Some(err.to_string());
            set.refusal = Some(err.refusal());
        }
    }
    set
}

#[cfg(test)]
#[path = "boundary_tests.rs"]
mod boundary_tests;

#[cfg(test)]
#[path = "changes_tests.rs"]
mod tests;
