//! A search for breaks in the sandbox-to-host boundary of change sets: hostile upper layers
//! over hostile workspaces, captured and applied as a call's are, and the host checked after.
//!
//! One case is decoded from bytes ([`check`]), so the same search runs three ways: the fuzz
//! target `change_sets` (libFuzzer's bytes), its committed corpus replayed as an ordinary
//! test, and a property test over seeded random bytes (`boundary_tests.rs`, its case count in
//! `AIRLOCK_BOUNDARY_CASES`). A case builds, in a scratch directory:
//!
//! - a workspace (owned by root or by another user) with files, directories and symlinks,
//!   and beside it a directory the workspace must never reach (`outside`);
//! - an upper layer with whatever a tool could leave, and more: names as arbitrary bytes
//!   (invalid UTF-8, 255 bytes, names equal after Unicode or case folding), every file type
//!   (devices, fifos, sockets, whiteouts), every mode bit, hard links, symlinks out and in
//!   loops, sparse files of many megabytes, opaque directories, deep and wide trees;
//! - rules: the defaults, or bounds so tight most cases cross them, umasks, sticky allowed;
//! - a person's edits racing the apply: a file appended to, one added, one removed, a
//!   directory swapped for a symlink out — made after capture, before apply.
//!
//! and checks that, whatever happened: nothing outside the workspace changed; nothing in the
//! workspace is setuid, setgid, sticky (unless allowed), a device, fifo or socket, or a hard
//! link; a set that did not land left the workspace exactly as it was; a set that landed put
//! every path's exact bytes, type, content and mode there, with the workspace's owner, within
//! its bounds; and the person's edits are all still there.

// A search harness: a panic is how it reports a break.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use arbitrary::Unstructured;

use super::bounds::{ChangeRules, Deadline};
use super::{CallRules, ChangeSet, Changes, Exclusions, Kind, Modes, Node, Refusal, Upper};

/// Names a case picks from: plain, hidden, not UTF-8, the longest a name may be, the same
/// text in two Unicode normalisations, two cases of one word, and names of the daemon's own
/// temporary files.
const NAMES: &[&[u8]] = &[
    b"a",
    b"b",
    b"src",
    b".hidden",
    b"caf\xe9.txt",
    b"caf\xc3\xa9.txt",
    b"cafe\xcc\x81.txt",
    b"\xff\xfe",
    b"README",
    b"readme",
    b"-rf",
    b"new\nline",
    b".airlock-0000000000000000",
];
/// Symlink targets: out of the workspace, absolute, at themselves, into the daemon's state.
const TARGETS: &[&[u8]] = &[
    b"../outside",
    b"../../outside/secret",
    b"/etc/passwd",
    b"a",
    b"loop",
    b"../state",
    b"\xff",
];

/// A file the person wrote while the call ran: it must still be there, as they left it.
const EDIT: &[u8] = b"the person's edit\n";

/// What one decoded case made, and what is checked after.
struct Case {
    dir: tempfile::TempDir,
    workspace: PathBuf,
    outside: PathBuf,
    owner: (u32, u32),
    rules: ChangeRules,
    /// Paths the person wrote during the call (they must keep `EDIT`) or removed.
    edited: Vec<PathBuf>,
    removed: Vec<PathBuf>,
}

/// Builds the case `data` decodes to, captures and applies it, and panics on any break of
/// the boundary's rules. Must run as root (devices, owners, overlayfs's xattrs).
pub fn check(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let case = build(&mut u);
    let changes = Changes::open(
        &case.dir.path().join("state"),
        &case.dir.path().join("state"),
        1 << 30,
    )
    .expect("the change-set store opens");
    let upper_path = case.dir.path().join("state/changes/calls/call/upper");
    let mut upper = Upper::detached(
        case.dir.path().join("state/changes/calls/call"),
        &case.workspace,
    )
    .expect("the upper layer");
    upper.owner = case.owner;
    fill_upper(&mut u, &upper_path);
    let upper_before = snapshot(&upper_path);
    let outside_before = snapshot(&case.outside);

    let call = CallRules {
        exclusions: Exclusions::none(),
        modes: Modes::Tool,
        rules: case.rules,
        deadline: Deadline::none(),
    };
    let set = match changes.capture_upper(&upper, &call) {
        Ok(set) => {
            let mut case = case;
            race(&mut u, &mut case);
            let before = snapshot(&case.workspace);
            let set = changes.apply(&upper, set, Deadline::none());
            verify(&case, &set, &before, &upper_before);
            assert_eq!(
                snapshot(&case.outside),
                outside_before,
                "nothing outside the workspace changes"
            );
            return;
        }
        Err(set) => set,
    };
    // Not captured: nothing was applied, and it says why.
    assert!(
        set.changes.is_empty() && set.not_applied.is_some(),
        "{set:?}"
    );
    if over_bounds(&case.rules, &upper_before) {
        assert_eq!(set.refusal, Some(Refusal::Limit), "{set:?}");
    }
    assert_eq!(snapshot(&case.outside), outside_before);
}

fn build(u: &mut Unstructured<'_>) -> Case {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&workspace).expect("mkdir ws");
    std::fs::create_dir(&outside).expect("mkdir outside");
    std::fs::write(outside.join("secret"), b"outside\n").expect("write outside");
    let owner = if u.arbitrary::<bool>().unwrap_or(false) {
        (1000, 1000)
    } else {
        (0, 0)
    };
    std::os::unix::fs::chown(&workspace, Some(owner.0), Some(owner.1)).expect("chown ws");
    let rules = match u.int_in_range(0..=3u8).unwrap_or(0) {
        0 => ChangeRules::default(),
        1 => ChangeRules {
            max_files: u.int_in_range(1..=8).unwrap_or(4),
            max_bytes: u.int_in_range(0..=4096).unwrap_or(1024),
            max_file_bytes: u.int_in_range(0..=4096).unwrap_or(1024),
            ..ChangeRules::default()
        },
        2 => ChangeRules {
            umask: u.int_in_range(0..=0o777).unwrap_or(0),
            sticky_dirs: true,
            ..ChangeRules::default()
        },
        _ => ChangeRules {
            umask: 0,
            ..ChangeRules::default()
        },
    };
    // The workspace as a person left it: plain files, directories and symlinks, no special
    // bits (what the workspace had is not the call's doing).
    let mut dirs = vec![workspace.clone()];
    for _ in 0..u.int_in_range(0..=12u8).unwrap_or(0) {
        let parent = pick(u, &dirs).clone();
        let path = parent.join(name(u));
        if path.symlink_metadata().is_ok() {
            continue;
        }
        match u.int_in_range(0..=2u8).unwrap_or(0) {
            0 => {
                let len = u.int_in_range(0..=64).unwrap_or(0);
                let content = u.bytes(len).unwrap_or(b"");
                std::fs::write(&path, content).expect("write lower");
                set_mode(&path, 0o644 | (u.int_in_range(0..=0o133).unwrap_or(0)));
            }
            1 => {
                std::fs::create_dir(&path).expect("mkdir lower");
                set_mode(&path, 0o755);
                dirs.push(path.clone());
            }
            _ => std::os::unix::fs::symlink(OsStr::from_bytes(target(u)), &path)
                .expect("symlink lower"),
        }
        std::os::unix::fs::lchown(&path, Some(owner.0), Some(owner.1)).expect("chown lower");
    }
    Case {
        dir,
        workspace,
        outside,
        owner,
        rules,
        edited: Vec::new(),
        removed: Vec::new(),
    }
}

/// What a tool leaves in its upper layer, and more than any tool could.
fn fill_upper(u: &mut Unstructured<'_>, upper: &Path) {
    let mut dirs = vec![upper.to_owned()];
    let mut files: Vec<PathBuf> = Vec::new();
    // Directories the workspace has are mirrored now and then, as overlayfs makes them on
    // the way to a file the call changed.
    for _ in 0..u.int_in_range(0..=24u8).unwrap_or(0) {
        let parent = pick(u, &dirs).clone();
        let path = parent.join(name(u));
        if path.symlink_metadata().is_ok() {
            continue;
        }
        let mode = u.int_in_range(0..=0o7777u32).unwrap_or(0o644);
        match u.int_in_range(0..=10u8).unwrap_or(0) {
            0..=2 => {
                let len = u.int_in_range(0..=128).unwrap_or(0);
                let content = u.bytes(len).unwrap_or(b"");
                std::fs::write(&path, content).expect("write upper");
                set_mode(&path, mode);
                files.push(path);
            }
            3 => {
                // Sparse: megabytes of apparent size, nothing allocated.
                let file = std::fs::File::create(&path).expect("create sparse");
                file.set_len(u64::from(u.int_in_range(1..=8u32).unwrap_or(1)) << 20)
                    .expect("a sparse file");
                set_mode(&path, mode);
                files.push(path);
            }
            4 => {
                std::fs::create_dir(&path).expect("mkdir upper");
                set_mode(&path, mode | 0o700);
                if u.arbitrary::<bool>().unwrap_or(false) {
                    rustix::fs::setxattr(
                        &path,
                        super::overlay::private_xattrs().opaque,
                        b"y",
                        rustix::fs::XattrFlags::empty(),
                    )
                    .expect("an opaque directory");
                }
                dirs.push(path);
            }
            5 => std::os::unix::fs::symlink(OsStr::from_bytes(target(u)), &path)
                .expect("symlink upper"),
            6 => mknod(&path, rustix::fs::FileType::CharacterDevice, 0),
            7 => mknod(
                &path,
                rustix::fs::FileType::CharacterDevice,
                rustix::fs::makedev(1, 3),
            ),
            8 => mknod(&path, rustix::fs::FileType::Fifo, 0),
            9 => mknod(
                &path,
                rustix::fs::FileType::BlockDevice,
                rustix::fs::makedev(7, 0),
            ),
            _ => {
                if !files.is_empty() {
                    let to = pick(u, &files).clone();
                    std::fs::hard_link(to, &path).expect("hard link");
                }
            }
        }
    }
}

/// A person's edits while the call runs, after its capture and before its apply.
fn race(u: &mut Unstructured<'_>, case: &mut Case) {
    for _ in 0..u.int_in_range(0..=2u8).unwrap_or(0) {
        let entries = list(&case.workspace);
        if entries.is_empty() {
            return;
        }
        let path = pick(u, &entries).clone();
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        match u.int_in_range(0..=2u8).unwrap_or(0) {
            0 if meta.is_file() => {
                std::fs::write(&path, EDIT).expect("the person's edit");
                case.edited.push(path);
            }
            1 if meta.is_dir() => {
                let added = path.join("added-by-the-person");
                if std::fs::write(&added, EDIT).is_ok() {
                    case.edited.push(added);
                }
            }
            2 if meta.is_file() || meta.is_symlink() => {
                std::fs::remove_file(&path).expect("the person's removal");
                case.edited.retain(|edited| edited != &path);
                case.removed.push(path);
            }
            _ => {}
        }
    }
}

fn verify(case: &Case, set: &ChangeSet, before: &Snapshot, upper: &Snapshot) {
    let after = snapshot(&case.workspace);
    for (path, entry) in &after {
        let shown = String::from_utf8_lossy(path);
        assert!(
            matches!(entry.kind, 'f' | 'd' | 'l'),
            "{shown}: a {} landed in the workspace",
            entry.kind
        );
        assert_eq!(entry.mode & 0o6000, 0, "{shown}: setuid or setgid landed");
        if entry.mode & 0o1000 != 0 {
            assert!(
                entry.kind == 'd' && case.rules.sticky_dirs,
                "{shown}: a sticky bit landed"
            );
        }
        if entry.kind == 'f' {
            assert_eq!(entry.nlink, 1, "{shown}: shares its inode");
        }
        assert!(
            !path.starts_with(b".airlock-apply-"),
            "{shown}: the staging directory was left"
        );
    }
    // The person's paths, looked up in the snapshot: never through a symlink the set made.
    let rel = |path: &PathBuf| {
        let rel = path.strip_prefix(&case.workspace).expect("inside");
        rel.as_os_str().as_bytes().to_vec()
    };
    let edit = super::blobs::digest(EDIT).expect("digest").0;
    for edited in &case.edited {
        assert_eq!(
            after
                .get(&rel(edited))
                .and_then(|entry| entry.digest.as_ref()),
            Some(&edit),
            "{}: the person's edit was lost ({set:?})",
            edited.display()
        );
    }
    for removed in &case.removed {
        // A path the person removed may be added back only by a change that said it adds it.
        let rel = rel(removed);
        if after.contains_key(&rel) {
            assert!(
                set.not_applied.is_none()
                    && set
                        .changes
                        .iter()
                        .any(|c| c.path.as_bytes() == rel && c.kind == Kind::Added),
                "{}: removed by the person, and back ({set:?})",
                removed.display()
            );
        }
    }
    if set.not_applied.is_some() {
        assert!(set.refusal.is_some(), "{set:?}");
        assert_eq!(
            &after, before,
            "a set that did not land changed the workspace: {set:?}"
        );
        return;
    }
    assert!(
        !over_bounds(&case.rules, upper),
        "a set over its bounds landed: {set:?}"
    );
    for change in &set.changes {
        assert!(change.applied);
        let entry = after.get(change.path.as_bytes());
        let Some(state) = &change.after else {
            // Deleted, or renamed away: gone, unless another change put something there.
            if !set
                .changes
                .iter()
                .any(|other| other.path == change.path && other.after.is_some())
            {
                assert!(entry.is_none(), "{}: deleted, still there", change.path);
            }
            continue;
        };
        let entry = entry.unwrap_or_else(|| panic!("{}: applied, not there", change.path));
        let kind = match state.node {
            Node::File => 'f',
            Node::Dir => 'd',
            Node::Symlink => 'l',
        };
        assert_eq!(entry.kind, kind, "{}", change.path);
        if state.node != Node::Symlink {
            assert_eq!(entry.mode, state.mode, "{}", change.path);
        }
        if state.node != Node::Dir {
            assert_eq!(
                entry.digest.as_ref(),
                state.digest.as_ref(),
                "{}",
                change.path
            );
        }
        if change.kind != Kind::Modified {
            assert_eq!((entry.uid, entry.gid), case.owner, "{}: owner", change.path);
        }
        assert!(
            upper.contains_key(change.path.as_bytes())
                || before.contains_key(change.path.as_bytes()),
            "{}: a path the set made up",
            change.path
        );
    }
}

/// Whether the upper layer holds more than `rules` let a call write.
fn over_bounds(rules: &ChangeRules, upper: &Snapshot) -> bool {
    let files = upper
        .values()
        .filter(|entry| matches!(entry.kind, 'f' | 'l'));
    let bytes: u64 = files.clone().map(|entry| entry.size).sum();
    upper.len() as u64 > rules.max_files
        || bytes > rules.max_bytes
        || files.clone().any(|entry| entry.size > rules.max_file_bytes)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: char,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    size: u64,
    digest: Option<String>,
}

type Snapshot = BTreeMap<Vec<u8>, Entry>;

/// Everything beneath `root`, by relative path bytes, never following a symlink.
fn snapshot(root: &Path) -> Snapshot {
    let mut entries = Snapshot::new();
    for path in list(root) {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let kind = meta.file_type();
        let (kind, digest) = if kind.is_file() {
            let content = std::fs::read(&path).expect("read");
            (
                'f',
                Some(super::blobs::digest(&content[..]).expect("digest").0),
            )
        } else if kind.is_dir() {
            ('d', None)
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&path).expect("readlink");
            let target = target.as_os_str().as_bytes();
            ('l', Some(super::blobs::digest(target).expect("digest").0))
        } else {
            ('x', None)
        };
        let rel = path.strip_prefix(root).expect("beneath");
        entries.insert(
            rel.as_os_str().as_bytes().to_vec(),
            Entry {
                kind,
                mode: if kind == 'l' { 0 } else { meta.mode() & 0o7777 },
                uid: meta.uid(),
                gid: meta.gid(),
                nlink: if kind == 'f' { meta.nlink() } else { 0 },
                size: meta.size(),
                digest,
            },
        );
    }
    entries
}

/// Every path beneath `root` (not `root`), never following a symlink.
fn list(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                stack.push(path.clone());
            }
            out.push(path);
        }
    }
    out.sort();
    out
}

fn pick<'a, T>(u: &mut Unstructured<'_>, items: &'a [T]) -> &'a T {
    let at = u.choose_index(items.len()).unwrap_or(0);
    &items[at]
}

fn name(u: &mut Unstructured<'_>) -> PathBuf {
    let choice = u.int_in_range(0..=NAMES.len()).unwrap_or(0);
    let bytes: Vec<u8> = match NAMES.get(choice) {
        Some(name) => name.to_vec(),
        // The longest name there is.
        None => vec![b'n'; 255],
    };
    PathBuf::from(OsStr::from_bytes(&bytes))
}

fn target(u: &mut Unstructured<'_>) -> &'static [u8] {
    TARGETS[u.choose_index(TARGETS.len()).unwrap_or(0)]
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mknod(path: &Path, kind: rustix::fs::FileType, dev: u64) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        kind,
        rustix::fs::Mode::from_raw_mode(0o644),
        dev,
    )
    .expect("mknod (the search runs as root)");
}
