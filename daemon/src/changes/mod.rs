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
mod types;
mod views;

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
pub use revert::{Conflict, RevertError, RevertPlan, RevertReport, reconcile};
pub use sync::ServerWrites;
pub use types::{Change, ChangeError, ChangeSet, Kind, Node, Refusal, State};
pub use views::Views;

/// Subdirectory of the daemon's state directory the change sets own.
const CHANGES_DIR: &str = "changes";
/// Where calls' upper layers live while they run, one folder per call.
const CALLS_DIR: &str = "calls";
/// The content-addressed store of before and after contents.
const BLOBS_DIR: &str = "blobs";

/// The overlay mounted once at start to find whether this daemon can (see `probe`): its
/// empty lower directory and its layers, in the calls' directory (removed with it).
const PROBE_LOWER: &str = ".probe-lower";
const PROBE_UPPER: &str = ".probe";

/// How one call's changes are recorded and applied: the paths kept by digest only, whether
/// the tool could set modes, the profile's bounds, and the call's deadline.
#[derive(Debug, Clone)]
pub struct CallRules {
    pub exclusions: Exclusions,
    pub modes: Modes,
    pub rules: ChangeRules,
    pub deadline: Deadline,
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

/// Mounts one overlay over an empty directory of the state dir and lets it go, as the daemon
/// starts: a host, or a daemon's privileges, that cannot is found then, and every writing
/// call is refused with why, rather than each failing in its own way.
fn probe(calls: &Path, idmap: &IdMap) -> Result<(), ChangeError> {
    let lower = calls.join(PROBE_LOWER);
    std::fs::create_dir_all(&lower)?;
    let mounted = Overlay::mount(&lower, calls.join(PROBE_UPPER), idmap);
    let removed = std::fs::remove_dir(&lower);
    match mounted {
        Ok(overlay) => {
            drop(overlay);
            removed.map_err(ChangeError::from)
        }
        Err(ChangeError::Overlay(why)) => {
            Err(ChangeError::Overlay(format!("{why}{}", privileges_hint())))
        }
        Err(other) => Err(other),
    }
}

/// What a daemon that is not root must hold for overlays and their id mapping, named when it
/// lacks any: overlayfs works in the directories it makes with the mounter's rights, which
/// only `CAP_DAC_OVERRIDE` lets past their modes; mounting needs `CAP_SYS_ADMIN`, the id
/// mapping `CAP_SETUID` and `CAP_SETGID`.
fn privileges_hint() -> String {
    if rustix::process::geteuid().is_root() {
        return String::new();
    }
    let missing = crate::privileges::missing();
    if missing.is_empty() {
        String::new()
    } else {
        format!(
            " (the daemon is not root and lacks {}, which recording a call's writes needs)",
            missing.join(", ")
        )
    }
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
            overlay::remove_tree(&calls)?;
        }
        std::fs::create_dir_all(&calls)?;
        let blobs = Arc::new(Blobs::open(
            shared_dir.join(CHANGES_DIR).join(BLOBS_DIR),
            blob_cap,
        )?);
        let idmap = Arc::new(IdMap::create().map_err(|err| {
            ChangeError::Overlay(format!(
                "cannot create the id mapping for the workspace: {err}{}",
                privileges_hint()
            ))
        })?);
        probe(&calls, &idmap)?;
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
