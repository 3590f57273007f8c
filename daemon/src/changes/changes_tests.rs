//! Change sets through a real overlay: recorded exactly, committed or discarded, reverted
//! only when nothing changed since.

use std::os::unix::fs::PermissionsExt;

use super::types::{MAX_NAMING_BYTES, name_paths};
use super::*;

#[test]
fn a_message_names_paths_up_to_its_bound_and_counts_the_rest() {
    assert_eq!(name_paths(["a", "b"]), "a, b");
    let many: Vec<String> = (0..100_000).map(|n| format!("dir/{n:08}")).collect();
    let named = name_paths(&many);
    assert!(named.len() < MAX_NAMING_BYTES + 32, "{}", named.len());
    assert!(named.starts_with("dir/00000000, dir/00000001"));
    let shown = named.matches(", ").count() + 1;
    assert!(
        named.ends_with(&format!(" and {} more", 100_000 - shown)),
        "{named}"
    );
    // One name longer than the bound is cut, on a character boundary.
    let long = "é".repeat(MAX_NAMING_BYTES);
    let named = name_paths([long.as_str(), "next"]);
    assert!(named.ends_with("… and 1 more"), "{named}");
}

/// The overlay's merged view, as a path this process can open (the boundary's tests too).
pub(super) fn merged(overlay: &Overlay) -> PathBuf {
    PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&overlay.root())
    ))
}

fn kinds(set: &ChangeSet) -> Vec<(String, Kind)> {
    set.changes
        .iter()
        .map(|change| (change.path.to_string(), change.kind))
        .collect()
}

/// A process tool's call with the default rules and no deadline.
fn call(exclusions: Exclusions) -> CallRules {
    CallRules {
        exclusions,
        modes: Modes::Tool,
        rules: ChangeRules::default(),
        deadline: Deadline::none(),
    }
}

/// A workspace with a file to modify, one to delete, one to rename and one to chmod.
fn workspace() -> (tempfile::TempDir, PathBuf, Changes) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src/old")).expect("mkdir");
    std::fs::write(ws.join("src/calc.py"), "def add(a, b):\n    return a - b\n").expect("write");
    std::fs::write(ws.join("gone.txt"), "bye\n").expect("write");
    std::fs::write(ws.join("moved.txt"), "moving\n").expect("write");
    std::fs::write(ws.join("run.sh"), "echo hi\n").expect("write");
    std::fs::write(ws.join("src/old/a.txt"), "a\n").expect("write");
    std::fs::write(ws.join(".gitignore"), "build/\n").expect("write");
    let changes = Changes::open(
        &dir.path().join("state"),
        &dir.path().join("state"),
        1 << 30,
    )
    .expect("open");
    (dir, ws, changes)
}

#[test]
fn a_call_s_writes_reach_the_workspace_only_when_committed_and_are_recorded_exactly() {
    let (_dir, ws, changes) = workspace();
    let overlay = changes.overlay(&ws, "call-1").expect("overlay");
    let merged = merged(&overlay);
    std::fs::write(
        merged.join("src/calc.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .expect("modify");
    std::fs::remove_file(merged.join("gone.txt")).expect("delete");
    std::fs::rename(merged.join("moved.txt"), merged.join("src/moved.txt")).expect("rename");
    std::fs::set_permissions(
        merged.join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::fs::remove_dir_all(merged.join("src/old")).expect("rmdir");
    std::fs::create_dir_all(merged.join("build/out")).expect("mkdir");
    std::fs::write(merged.join("build/out/app"), "binary").expect("excluded");
    std::os::unix::fs::symlink("../etc/passwd", merged.join("link")).expect("symlink");
    std::fs::write(merged.join("new.txt"), "new\n").expect("add");

    assert_eq!(
        std::fs::read_to_string(ws.join("src/calc.py")).expect("read"),
        "def add(a, b):\n    return a - b\n",
        "nothing reaches the workspace before the commit"
    );
    let set = changes.commit(overlay, &call(Exclusions::for_workspace(&ws, &[])));
    assert_eq!(set.not_applied, None);
    assert_eq!(
        kinds(&set),
        [
            ("build".into(), Kind::Added),
            ("build/out".into(), Kind::Added),
            ("build/out/app".into(), Kind::Added),
            ("gone.txt".into(), Kind::Deleted),
            ("link".into(), Kind::Added),
            ("new.txt".into(), Kind::Added),
            ("run.sh".into(), Kind::Modified),
            ("src/calc.py".into(), Kind::Modified),
            ("src/moved.txt".into(), Kind::Renamed),
            ("src/old".into(), Kind::Deleted),
            ("src/old/a.txt".into(), Kind::Deleted),
        ]
    );
    assert!(set.changes.iter().all(|change| change.applied));
    let by_path = |path: &str| {
        set.changes
            .iter()
            .find(|change| change.path == path)
            .expect("recorded")
    };
    assert_eq!(
        by_path("src/moved.txt").from,
        Some(RelPath::from("moved.txt"))
    );
    let chmod = by_path("run.sh");
    assert_eq!(
        (
            chmod.before.as_ref().map(|s| s.mode),
            chmod.after.as_ref().map(|s| s.mode)
        ),
        (Some(0o644), Some(0o755))
    );
    assert_eq!(
        chmod.before.as_ref().map(|s| &s.digest),
        chmod.after.as_ref().map(|s| &s.digest)
    );
    assert!(
        by_path("build/out/app").digest_only.is_some(),
        "the ignore file excludes build/"
    );
    assert_eq!(
        by_path("link").after.as_ref().map(|s| s.node),
        Some(Node::Symlink)
    );

    assert_eq!(
        std::fs::read_to_string(ws.join("src/calc.py")).expect("read"),
        "def add(a, b):\n    return a + b\n"
    );
    assert!(
        !ws.join("gone.txt").exists()
            && !ws.join("moved.txt").exists()
            && !ws.join("src/old").exists()
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/moved.txt")).expect("read"),
        "moving\n"
    );
    assert_eq!(
        std::fs::read_link(ws.join("link")).expect("link"),
        Path::new("../etc/passwd")
    );
    assert_eq!(
        std::fs::metadata(ws.join("run.sh"))
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("build/out/app")).expect("read"),
        "binary"
    );

    // Undo it all: everything is back but the excluded file's content, which is said.
    let plan = RevertPlan::new([&set]);
    let report = plan
        .execute_at(&ws, changes.blobs(), false)
        .expect("revert");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/calc.py")).expect("read"),
        "def add(a, b):\n    return a - b\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("gone.txt")).expect("read"),
        "bye\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("moved.txt")).expect("read"),
        "moving\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/old/a.txt")).expect("read"),
        "a\n"
    );
    assert!(
        !ws.join("src/moved.txt").exists()
            && !ws.join("link").exists()
            && !ws.join("new.txt").exists()
    );
    assert!(!ws.join("build").exists());
    assert_eq!(
        std::fs::metadata(ws.join("run.sh"))
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o644
    );
    assert!(report.unrestorable.is_empty(), "{report:?}");
}

#[test]
fn a_discarded_overlay_changes_nothing() {
    let (_dir, ws, changes) = workspace();
    let overlay = changes.overlay(&ws, "call-2").expect("overlay");
    let merged = merged(&overlay);
    std::fs::write(merged.join("src/calc.py"), "half").expect("write");
    let upper = overlay.finish();
    let upper_dir = upper.path.clone();
    drop(upper);
    assert!(!upper_dir.exists(), "the upper layer is removed");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/calc.py")).expect("read"),
        "def add(a, b):\n    return a - b\n"
    );
}

#[test]
fn a_revert_refuses_a_path_changed_since_unless_forced() {
    let (_dir, ws, changes) = workspace();
    let overlay = changes.overlay(&ws, "call-3").expect("overlay");
    let merged = merged(&overlay);
    std::fs::write(merged.join("src/calc.py"), "by the run\n").expect("write");
    let set = changes.commit(overlay, &call(Exclusions::none()));
    std::fs::write(ws.join("src/calc.py"), "by someone else\n").expect("outside edit");
    let plan = RevertPlan::new([&set]);
    match plan.execute_at(&ws, changes.blobs(), false) {
        Err(RevertError::Conflicts(conflicts)) => {
            assert_eq!(conflicts.len(), 1);
            assert_eq!(conflicts[0].path, "src/calc.py");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("src/calc.py")).expect("read"),
        "by someone else\n"
    );
    plan.execute_at(&ws, changes.blobs(), true).expect("forced");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/calc.py")).expect("read"),
        "def add(a, b):\n    return a - b\n"
    );
}

#[test]
fn a_directory_replaced_during_the_call_is_not_written_through() {
    let (dir, ws, changes) = workspace();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    let overlay = changes.overlay(&ws, "call-4").expect("overlay");
    let merged = merged(&overlay);
    std::fs::write(merged.join("src/planted"), "x").expect("write beneath src");
    // Meanwhile, someone swaps the workspace's `src` for a symlink out.
    std::fs::rename(ws.join("src"), ws.join("src.moved")).expect("move");
    std::os::unix::fs::symlink(&outside, ws.join("src")).expect("symlink");
    let set = changes.commit(overlay, &call(Exclusions::none()));
    assert!(
        set.skipped
            .iter()
            .any(|skipped| skipped.starts_with("src/ (replaced")),
        "{set:?}"
    );
    assert!(
        set.changes
            .iter()
            .all(|change| !change.path.starts_with(&RelPath::from("src")))
    );
    assert_eq!(
        std::fs::read_dir(&outside).expect("read").count(),
        0,
        "nothing outside"
    );
    assert!(
        ws.join("src")
            .symlink_metadata()
            .expect("meta")
            .file_type()
            .is_symlink()
    );
}
