//! What a change set is made of — the paths a call changed ([`Change`]: its [`Kind`], and the
//! [`State`] of its [`Node`] before and after), the set itself ([`ChangeSet`]), why it did
//! not land ([`Refusal`], [`ChangeError`]) — and how a message names a set's paths
//! ([`name_paths`]). Its own file so the files that capture, store, apply and revert sets
//! (`capture`, `blobs`, `apply`, `revert`, …) share it without importing `mod.rs`, the
//! service that calls into them.

use serde::{Deserialize, Serialize};

use super::rel::RelPath;

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
pub(super) const MAX_NAMING_BYTES: usize = 2000;

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
