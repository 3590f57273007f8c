//! Sandboxes built ahead of their calls ("spares").
//!
//! Building a sandbox — user, pid, mount, uts, network and IPC namespaces, the mount view,
//! Landlock, the seccomp filter, rlimits, a cgroup — is most of what a call costs
//! (BENCHMARKS.md, section 2), and none of it depends on the call's arguments. So once a
//! tool's call has started, the launcher builds a spare for the same tool and workspace: a
//! first process taken all the way to `Stage::Parked`, confined exactly as it will run,
//! waiting on its go-ahead pipe. The next call with the same [`Key`] takes it, hands it its
//! arguments and environment, and releases it: what is left of the sandbox per call is an
//! `execve`.
//!
//! A spare is used once, by one call. Each call still gets a fresh pid namespace, `/tmp`,
//! cgroup, network and IPC namespaces (a network namespace handed on only where nothing of a
//! call can stay in it: see `network.rs`), and nothing a previous call wrote: the spare was
//! built from scratch for that call and nothing ran in it before. That is why it is a spare
//! and not a zygote that forks sandboxes out of one long-lived process: a zygote would save
//! the namespace creation too, but every sandbox would inherit the zygote's state, and
//! isolation between calls would rest on an argument about what that state holds. A spare
//! needs none beyond the one for a sandbox built on demand. Only one spare exists at a time
//! (for the last tool and workspace called), so an idle daemon holds one parked process at
//! most.
//!
//! Not built ahead: calls through a workspace overlay (its root is the call's own), calls with
//! network egress (the proxy's listener belongs to the call's gate), hosted servers and the
//! start-up probe (started once), and every sandbox while a test pause is armed.
//!
//! Crash safety is the first process's own: a spare waits on a pipe only the launcher holds,
//! with its parent-death signal armed, so it ends with the daemon like any sandbox mid-build.
//! A spare whose workspace was replaced since it was built (another directory at the same
//! path) is discarded, never used.

use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Sender;

use super::pidfd;
use super::plan::{Blueprint, CallSpec, Prepared};
use super::sandbox::{Held, Reap, Sandbox};
use super::stack::Stack;
use crate::engine::contract::RunStats;

/// What a spare was built for; a call with an equal key may take it.
#[derive(Debug, Clone)]
pub struct Key {
    blueprint: Arc<Blueprint>,
    workspace: Option<PathBuf>,
    read_only: bool,
}

impl Key {
    /// The key of a call whose sandbox could have been built ahead, if it could.
    pub fn of(blueprint: &Arc<Blueprint>, call: &CallSpec) -> Option<Key> {
        let eligible = call.build_ahead
            && call.root.is_none()
            && !call.dry_run
            && blueprint.egress_port.is_none();
        eligible.then(|| Key {
            blueprint: blueprint.clone(),
            workspace: call.workspace.clone(),
            read_only: call.read_only,
        })
    }

    fn matches(&self, other: &Key) -> bool {
        Arc::ptr_eq(&self.blueprint, &other.blueprint)
            && self.workspace == other.workspace
            && self.read_only == other.read_only
    }

    pub fn blueprint(&self) -> &Blueprint {
        &self.blueprint
    }

    /// The call a spare is built as: this key's, without a program to run yet.
    pub fn spec(&self) -> CallSpec {
        CallSpec {
            workspace: self.workspace.clone(),
            root: None,
            argv: Vec::new(),
            env: Vec::new(),
            dry_run: false,
            read_only: self.read_only,
            build_ahead: false,
            // Armed when a call takes it, before its program starts.
            deadline: None,
        }
    }

    /// The workspace directory's identity now, to tell a spare's apart from a directory put
    /// at the same path since.
    pub fn workspace_identity(&self) -> Option<(u64, u64)> {
        self.workspace.as_deref().and_then(identity)
    }
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path)
        .ok()
        .map(|metadata| (metadata.dev(), metadata.ino()))
}

/// A first process parked at `Stage::Parked`, and what it needs until it executes.
///
/// The process shares the daemon's memory and reads its plan (in `prepared`) when it wakes:
/// it must never wake to a plan already freed. A spare is consumed by
/// [`Spare::into_sandbox`] once the process has executed its program or been killed; a
/// spare dropped otherwise kills the process first ([`Parked`] is dropped before the rest).
pub struct Spare {
    pub parked: Parked,
    pub key: Key,
    pub workspace_identity: Option<(u64, u64)>,
    pub prepared: Prepared,
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub held: Held,
    /// The write end of the go-ahead pipe.
    pub go: std::fs::File,
    /// The process's `oom_score_adj`, written once it executes the program (see
    /// `launcher::clone::mark_first_to_kill`).
    pub oom_score: std::fs::File,
    /// What the first process runs on until it executes the program; dropped after it has.
    pub stack: Stack,
}

/// Kills the parked process when dropped, unless its spare was consumed.
pub struct Parked {
    pub pidfd: RawFd,
}

impl Drop for Parked {
    fn drop(&mut self) {
        pidfd::kill(self.pidfd);
    }
}

impl Spare {
    /// The sandbox this spare is, and the stack its process ran on. Only once the process has
    /// executed its program, or been killed: the caller drops the stack after that too.
    pub fn into_sandbox(self, reaper: Sender<Reap>, stats: Arc<RunStats>) -> (Sandbox, Stack) {
        std::mem::forget(self.parked);
        let sandbox = Sandbox::new(
            self.pid,
            self.pidfd,
            self.prepared.ends,
            self.held,
            reaper,
            stats,
        );
        (sandbox, self.stack)
    }

    /// Whether a call with `key` may take this spare.
    pub fn fits(&self, key: &Key) -> bool {
        self.key.matches(key) && key.workspace_identity() == self.workspace_identity
    }
}
