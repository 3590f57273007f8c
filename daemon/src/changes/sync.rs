//! A hosted server's writes, call after call, through one overlay that lives as long as the
//! server: before each call the server is shown the workspace as it is, and each call's change
//! set is exactly what that call wrote, never undoing a person's work.
//!
//! The overlay's upper layer keeps a copy of every path the server ever wrote (or opened for
//! writing), and that copy shadows the workspace: left alone, the server would read its own
//! stale version of a file a person has edited since, and write it back. So, with the server
//! between calls, [`ServerWrites::refresh`] walks the upper layer and, wherever the server's
//! copy is no longer what the workspace holds, writes the workspace's version *through the
//! merged view* — the one way to change an overlay in use that overlayfs defines — so the
//! server sees it, and remembers what the server now sees at each of these paths. At the sync
//! after the call:
//!
//! - a path whose upper entry is still what the server was shown is no change of this call,
//!   whatever the workspace holds now (a person's edit during the call): it is left out;
//! - a path the server wrote, where the workspace no longer holds what the server was shown,
//!   changed on the host during the call: a conflict, reported (the set is not applied, the
//!   person's version kept), never resolved by overwriting;
//! - a path the server first wrote in this call whose workspace file changed during the call
//!   (its change time is the call's or later) is a conflict too: the server's copy was made
//!   from a version the workspace no longer has.
//!
//! The server is hostile and may still be running processes while it is shown the workspace:
//! every write into its view goes through descriptors opened beneath the merged root with no
//! symlink followed (`paths.rs`: owner and mode set on the open file, never through a name),
//! every read of it opens without blocking, all of it stops at the call's deadline, and a
//! refresh or sync never runs beside another of the same server (`Recording::busy`). A
//! refresh that fails stops the server: its view is not what it should be.
//!
//! Why this rather than an overlay per call: a fresh overlay is a new filesystem whose inodes
//! the server's Landlock domain, fixed when the server started, has no rule for, and the
//! server's working directory would stay on the old one; a snapshot per call costs the
//! workspace's size. A refresh costs what the server has written: a `stat` of each of its
//! upper entries and their workspace paths (a path whose two stamps are as they were is not
//! read again), content read only where something changed, and a listing of a directory only
//! when the workspace's changed.
//!
//! Overlayfs keeps the lower dentries it looked up and, on a local filesystem, never checks
//! them again: a file the server only *read*, then replaced in the workspace by a rename over
//! it (editors, git and airlock's own applies save that way) or created after the server
//! looked for it, stays as the server first saw it. What the daemon itself lands there — any
//! call's applied set, a revert — it reports to every server over that workspace
//! ([`super::Views`]), and the next refresh shows those paths too. A person's replacement it
//! cannot see without watching the whole filesystem, so the server may *read* the old file
//! until the kernel drops that dentry; but a change it makes to one is a conflict: its copy
//! records no origin (the file it copied was no longer linked) and the workspace's file
//! changed after the overlay was made (SECURITY.md, "Hosted MCP servers' overlays").

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{FileType, OFlags};

use super::bounds::{ChangeRules, Deadline, Tally, survey};
use super::lower::{lower_stat, open_lower, read_names};
use super::overlay::{Overlay, Upper, private_xattrs};
use super::rel::RelPath;
use super::revert::{self, current_within};
use super::show::View;
use super::types::{ChangeError, ChangeSet, Node, Refusal, State, name_paths};

/// What the server was shown at each path of its upper layer, and when.
#[derive(Debug)]
pub struct ServerWrites {
    /// When the record was made, just after its overlay: every lookup the overlay keeps was
    /// made since. By the precise clock: a change made before it has a change time before
    /// it, whichever clock stamped the change (a file whose time was read since its last
    /// change is stamped precisely, others by the coarse clock, up to a tick behind).
    since: SystemTime,
    seen: Mutex<HashMap<RelPath, Seen>>,
    /// When the last refresh began: the start of the call it came before.
    shown_at: Mutex<Option<SystemTime>>,
    /// Paths the daemon itself has replaced in the workspace since the last refresh (another
    /// call's applied set, a revert): the server may hold a lookup of the file they replaced.
    replaced: Mutex<Replaced>,
}

impl Default for ServerWrites {
    fn default() -> ServerWrites {
        ServerWrites {
            since: SystemTime::now(),
            seen: Mutex::default(),
            shown_at: Mutex::default(),
            replaced: Mutex::default(),
        }
    }
}

/// The paths [`super::Views`] reported, up to [`MAX_REPLACED`].
#[derive(Debug, Default)]
struct Replaced {
    paths: HashSet<RelPath>,
    /// More were reported than are kept: the server's view cannot be made current path by
    /// path, and its next call is refused (the instance is then restarted).
    overflowed: bool,
}

/// The most replaced paths a server's view remembers between calls: the default bound on one
/// call's change set, so one large set is remembered whole.
const MAX_REPLACED: usize = 200_000;

/// One path of the server's upper layer, as of the last refresh or landed set.
#[derive(Debug, Clone)]
struct Seen {
    /// What the server was shown there (none: nothing).
    state: Option<State>,
    /// The upper entry's and the workspace path's stamps when that was settled; none when
    /// they must be looked at again.
    stamps: Option<(Option<Stamp>, Option<Stamp>)>,
}

/// Enough of a `stat` to tell that an entry has not changed: a write moves `ctime`, a
/// replacement changes the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mode: u32,
    size: i64,
    mtime: (i64, u64),
    ctime: (i64, u64),
}

fn stamp(root: BorrowedFd<'_>, path: &RelPath) -> Option<Stamp> {
    lower_stat(root, path).map(|stat| Stamp {
        dev: stat.st_dev,
        ino: stat.st_ino,
        mode: stat.st_mode,
        size: stat.st_size,
        mtime: (stat.st_mtime, stat.st_mtime_nsec),
        ctime: (stat.st_ctime, stat.st_ctime_nsec),
    })
}

impl ServerWrites {
    /// Before a call, with the server between calls: wherever the server's copy of a path
    /// (its upper layer) is not what the workspace holds now, shows it the workspace's
    /// version, through the merged view. Fails, and the call is not made (the server is then
    /// stopped: its view is not what it should be), when the overlay holds more than `rules`
    /// allow, `deadline` passes, or a path cannot be shown as it is.
    pub fn refresh(
        &self,
        overlay: &Overlay,
        rules: &ChangeRules,
        deadline: Deadline,
    ) -> Result<(), ChangeError> {
        *self
            .shown_at
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(coarse_now());
        let replaced = {
            let mut replaced = self
                .replaced
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            if replaced.overflowed {
                // Kept until the server is restarted: its view cannot be made current.
                return Err(ChangeError::Exceeded(format!(
                    "the daemon changed more than {MAX_REPLACED} paths of the workspace since the server's last call, too many to show it one by one"
                )));
            }
            std::mem::take(&mut replaced.paths)
        };
        let upper = overlay.upper();
        let upper_root = upper.open().map_err(|err| {
            ChangeError::Capture(format!("cannot open the server's upper layer: {err}"))
        })?;
        survey(&upper_root, rules, deadline)?;
        let mut entries = Vec::new();
        list(&upper_root, &RelPath::root(), rules.max_files, &mut entries)?;
        let mut view = View {
            merged: overlay.root(),
            upper: upper_root.as_fd(),
            workspace: upper.workspace.as_fd(),
            owner: upper.owner,
            rules,
            copied: Tally::default(),
        };
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut present = HashSet::with_capacity(entries.len());
        for path in entries {
            deadline.check()?;
            let stamps = (stamp(view.upper, &path), stamp(view.workspace, &path));
            if seen
                .get(&path)
                .is_some_and(|seen| seen.stamps == Some(stamps))
            {
                present.insert(path);
                continue;
            }
            let host = current_within(view.workspace, &path, deadline);
            let copy = upper_state(view.upper, &path, deadline);
            deadline.check()?;
            if !same(&copy, &host) {
                view.show(&path).map_err(|err| shown(&path, err))?;
            } else if host.as_ref().is_some_and(|host| host.node == Node::Dir) {
                view.fill(&path).map_err(|err| shown(&path, err))?;
            }
            seen.insert(path.clone(), settled(&view, &path, host, stamps.1));
            present.insert(path);
        }
        // Paths the daemon replaced in the workspace, which the server may still see as they
        // were: shown as they are now, and settled as shown.
        let mut replaced: Vec<RelPath> = replaced
            .into_iter()
            .filter(|path| !present.contains(path))
            .collect();
        replaced.sort();
        for path in replaced {
            deadline.check()?;
            let before = stamp(view.workspace, &path);
            let host = current_within(view.workspace, &path, deadline);
            let copy = current_within(view.merged, &path, deadline);
            deadline.check()?;
            if same(&copy, &host) {
                continue;
            }
            view.show(&path).map_err(|err| shown(&path, err))?;
            seen.insert(path.clone(), settled(&view, &path, host, before));
            present.insert(path);
        }
        // Entries written while being shown (a directory filled) are settled at the next
        // refresh; paths no longer in the upper layer are the workspace's again.
        seen.retain(|path, _| present.contains(path));
        Ok(())
    }

    /// Records `paths` as replaced in the workspace by the daemon (see [`super::Views`]).
    pub(super) fn replaced(&self, paths: &[&RelPath]) {
        let mut replaced = self
            .replaced
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for path in paths {
            if replaced.paths.len() >= MAX_REPLACED {
                replaced.overflowed = true;
                break;
            }
            replaced.paths.insert((*path).clone());
        }
    }

    /// Keeps in `set` only what the last call wrote; refuses it whole, naming the paths, when
    /// one of them changed on the host since the server was last shown it.
    pub fn this_call(&self, mut set: ChangeSet, upper: &Upper) -> ChangeSet {
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let started = *self
            .shown_at
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let upper_root = upper.open().ok();
        let mut conflicts = Vec::new();
        set.changes.retain(|change| {
            let Some(Seen { state: shown, .. }) = seen.get(&change.path) else {
                // Not in the upper layer when the call started: the server's copy was made
                // during the call. Overlayfs records the origin of a copy made from a file
                // that was still linked — the workspace's then. A copy with an origin, of a
                // file the workspace no longer has, was removed during the call. Without one
                // (a file the server wrote whole, or a copy of a file already replaced under
                // a lookup the overlay kept) it may rest on a version the workspace no longer
                // has: if the workspace's file changed since the overlay was made, the doubt
                // goes to the person. And any file the host changed during the call.
                let workspace = upper.workspace.as_fd();
                let origin = upper_root
                    .as_ref()
                    .is_some_and(|root| has_origin(root.as_fd(), &change.path));
                let removed_during = change.before.is_none()
                    && change
                        .after
                        .as_ref()
                        .is_some_and(|after| after.node == Node::File)
                    && origin;
                // The server looks nothing up within a tick of its overlay (it has not even
                // started): a change stamped then may be missed, harmlessly. A change at the
                // call's tick may have come during it: the doubt goes to the person.
                let since_view =
                    !origin && changed_since(workspace, &change.path, self.since, false);
                let during = started
                    .is_some_and(|started| changed_since(workspace, &change.path, started, true));
                if removed_during || since_view || during {
                    conflicts.push(change.path.to_string());
                }
                return true;
            };
            if *shown == change.after {
                // Not written in this call: what differs is the host's doing.
                return false;
            }
            if *shown != change.before {
                conflicts.push(change.path.to_string());
            }
            true
        });
        if !conflicts.is_empty() {
            set.not_applied = Some(format!(
                "the server wrote {} which changed on the host since it was last shown them: the host's versions are kept and nothing was applied",
                name_paths(&conflicts)
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
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for change in &set.changes {
            let landed = |state: Option<State>| Seen {
                state,
                stamps: None,
            };
            seen.insert(change.path.clone(), landed(change.after.clone()));
            if let Some(from) = &change.from {
                seen.insert(from.clone(), landed(None));
            }
        }
    }
}

/// Now, by the clock the kernel stamps change times with (`CLOCK_REALTIME_COARSE`, updated
/// once a tick): a change made after this reads as made at or after it, which the precise
/// clock, up to a tick ahead, would not promise.
fn coarse_now() -> SystemTime {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a timespec the call may write; the clock exists since Linux 2.6.32.
    let ret = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &raw mut now) };
    match (u64::try_from(now.tv_sec), u32::try_from(now.tv_nsec)) {
        (Ok(secs), Ok(nanos)) if ret == 0 => UNIX_EPOCH + Duration::new(secs, nanos),
        // Never seen; a tick's worth before now keeps the comparison on the person's side.
        _ => SystemTime::now() - Duration::from_millis(10),
    }
}

/// Whether the workspace's `path` (not a directory: its time moves with its entries) changed
/// after `since` (a [`coarse_now`]), or at its tick too when `at_too`: a change in the tick
/// of `since` may have come just before it or just after.
fn changed_since(
    workspace: BorrowedFd<'_>,
    path: &RelPath,
    since: SystemTime,
    at_too: bool,
) -> bool {
    let Some(stat) = lower_stat(workspace, path) else {
        return false;
    };
    if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
        return false;
    }
    let ctime = u64::try_from(stat.st_ctime).map_or(UNIX_EPOCH, |secs| {
        UNIX_EPOCH + Duration::new(secs, u32::try_from(stat.st_ctime_nsec).unwrap_or(0))
    });
    ctime > since || (at_too && ctime == since)
}

/// Whether the upper layer's file at `path` is a copy of a workspace file.
fn has_origin(upper: BorrowedFd<'_>, path: &RelPath) -> bool {
    open_lower(
        upper,
        path.as_bytes(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK,
    )
    .is_some_and(|file| {
        rustix::fs::fgetxattr(&file, private_xattrs().origin, &mut [0u8; 256][..]).is_ok()
    })
}

/// Whether the server's copy and the workspace hold the same thing.
fn same(upper: &Option<State>, host: &Option<State>) -> bool {
    match (upper, host) {
        (None, None) => true,
        (Some(a), Some(b)) => revert::same(a, b),
        _ => false,
    }
}

/// What the server sees at `path` through its upper entry: a whiteout is nothing.
fn upper_state(upper: BorrowedFd<'_>, path: &RelPath, deadline: Deadline) -> Option<State> {
    let stat = lower_stat(upper, path)?;
    if FileType::from_raw_mode(stat.st_mode) == FileType::CharacterDevice && stat.st_rdev == 0 {
        return None;
    }
    current_within(upper, path, deadline)
}

/// The record of `path` once shown: `host`, what the workspace held, read after the workspace
/// stamp `before`. A workspace that changed meanwhile (a person's edit during the refresh)
/// leaves the stamps out, so the next refresh looks again rather than trusting them.
fn settled(view: &View<'_>, path: &RelPath, host: Option<State>, before: Option<Stamp>) -> Seen {
    let after = stamp(view.workspace, path);
    Seen {
        state: host,
        stamps: (after == before).then(|| (stamp(view.upper, path), after)),
    }
}

fn shown(path: &RelPath, err: std::io::Error) -> ChangeError {
    ChangeError::Apply(format!(
        "cannot show the server the workspace's {path} as it is now: {err}"
    ))
}

/// Every entry of the upper layer below `dir`, parents before children; more than `most`
/// (the server wrote on after the survey) is refused.
fn list(
    upper: &std::os::fd::OwnedFd,
    dir: &RelPath,
    most: u64,
    into: &mut Vec<RelPath>,
) -> Result<(), ChangeError> {
    let Some(fd) = open_lower(
        upper.as_fd(),
        dir.as_bytes(),
        OFlags::DIRECTORY | OFlags::RDONLY,
    ) else {
        return Ok(());
    };
    let mut names = read_names(&fd)
        .map_err(|err| ChangeError::Capture(format!("cannot list the server's {dir}/: {err}")))?;
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let is_dir =
            rustix::fs::statat(&fd, name.as_slice(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory);
        into.push(path.clone());
        if into.len() as u64 > most {
            return Err(ChangeError::Exceeded(format!(
                "the server's overlay holds more than {most} entries (changes.max_files)"
            )));
        }
        if is_dir {
            list(upper, &path, most, into)?;
        }
    }
    Ok(())
}
