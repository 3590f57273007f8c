//! A hosted server's writes, call after call, through one overlay that lives as long as the
//! server: each call's change set is exactly what that call wrote, and never undoes a
//! person's work.
//!
//! The overlay's upper layer keeps everything the server ever wrote, and capture compares it
//! with the workspace as it is now. Without memory, a path the server wrote in an earlier call
//! and a person edited since would read as the server's change again, and its stale copy
//! would be applied over the person's version. So [`ServerWrites`] remembers, per path, what
//! the server had left there when its last call's changes landed; at each sync:
//!
//! - a path whose upper entry is still what it was (the server did not write it in this call)
//!   is no change of this call, whatever the workspace holds now: it is left out;
//! - a path the server wrote again, where the workspace no longer holds what the server left
//!   there, changed on the host since the server last saw it: a conflict, reported (the set is
//!   not applied, the person's version kept), never resolved by overwriting.
//!
//! The cost of a sync is that of capture: it grows with what the server has written, not with
//! the workspace. What the server *reads* of a path it wrote before is still its own copy
//! (the upper layer shadows the workspace); an overlay per call would show it the person's
//! version, which needs the server's mount changed under it (issue 45, item 5, left open).

use std::collections::HashMap;
use std::sync::Mutex;

use super::rel::RelPath;
use super::{ChangeSet, Refusal, State};

/// What a hosted server left at each path it wrote, as of its last call whose changes landed.
#[derive(Debug, Default)]
pub struct ServerWrites {
    left: Mutex<HashMap<RelPath, Option<State>>>,
}

impl ServerWrites {
    /// Keeps in `set` only what the last call wrote; refuses it whole, naming the paths, when
    /// one of them changed on the host since the server last saw it.
    pub fn this_call(&self, mut set: ChangeSet) -> ChangeSet {
        let left = self
            .left
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut conflicts = Vec::new();
        set.changes.retain(|change| {
            let Some(before) = left.get(&change.path) else {
                return true;
            };
            if *before == change.after {
                // Not written in this call: what differs is the host's doing.
                return false;
            }
            if *before != change.before {
                conflicts.push(change.path.to_string());
            }
            true
        });
        if !conflicts.is_empty() {
            set.not_applied = Some(format!(
                "the server wrote {} which changed on the host since it last saw them: the host's versions are kept and nothing was applied (restart the server to give it the workspace as it is)",
                conflicts.join(", ")
            ));
            set.refusal = Some(Refusal::Failed);
        }
        set
    }

    /// Remembers what `set`, now applied, left at each of its paths.
    pub fn landed(&self, set: &ChangeSet) {
        if set.not_applied.is_some() {
            return;
        }
        let mut left = self
            .left
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for change in &set.changes {
            left.insert(change.path.clone(), change.after.clone());
            if let Some(from) = &change.from {
                left.insert(from.clone(), None);
            }
        }
    }
}
