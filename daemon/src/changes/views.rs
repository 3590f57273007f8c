//! Which hosted servers look at which workspace, so that what the daemon itself lands there
//! (any call's applied set, a revert) reaches each server's record, and its next refresh
//! shows it those paths (see `sync.rs` on the lookups overlayfs keeps).

use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex, Weak};

use super::rel::RelPath;
use super::sync::ServerWrites;

/// The workspaces hosted servers have overlays over, and each server's record: what the
/// daemon lands in a workspace (an applied set, a revert) is reported to every server over
/// it, whose next refresh shows it those paths (see the module doc on cached lookups).
#[derive(Debug, Default)]
pub struct Views {
    servers: Mutex<Vec<(WorkspaceKey, Weak<ServerWrites>)>>,
}

impl Views {
    /// Reports what lands in `workspace` to `writes` from now on, while it lives.
    pub fn watch(&self, workspace: BorrowedFd<'_>, writes: &Arc<ServerWrites>) {
        let Some(key) = workspace_key(workspace) else {
            return;
        };
        let mut servers = self
            .servers
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        servers.retain(|(_, server)| server.strong_count() > 0);
        servers.push((key, Arc::downgrade(writes)));
    }

    /// Reports `paths`, just written in `workspace` by the daemon, to the servers over it.
    pub fn landed<'a>(&self, workspace: BorrowedFd<'_>, paths: impl Iterator<Item = &'a RelPath>) {
        let Some(key) = workspace_key(workspace) else {
            return;
        };
        let servers: Vec<Arc<ServerWrites>> = self
            .servers
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .iter()
            .filter(|(of, _)| *of == key)
            .filter_map(|(_, server)| server.upgrade())
            .collect();
        if servers.is_empty() {
            return;
        }
        let paths: Vec<&RelPath> = paths.collect();
        for server in servers {
            server.replaced(&paths);
        }
    }
}

/// A workspace's identity: its root's device and inode, whatever path named it.
type WorkspaceKey = (u64, u64);

fn workspace_key(workspace: BorrowedFd<'_>) -> Option<WorkspaceKey> {
    rustix::fs::fstat(workspace)
        .ok()
        .map(|stat| (stat.st_dev, stat.st_ino))
}
