//! The launch plan: never root, ancestors outermost first, grants kept inside the workspace.

use super::*;

#[test]
fn sandboxes_never_run_as_root() {
    assert_eq!(sandbox_identity(0, 0), (NOBODY, NOBODY));
    assert_eq!(sandbox_identity(1000, 0), (1000, NOBODY));
    assert_eq!(sandbox_identity(1000, 1001), (1000, 1001));
}

#[test]
fn ancestors_come_outermost_first() {
    assert_eq!(
        ancestors(Path::new("a/b/c")),
        vec![PathBuf::from("a"), PathBuf::from("a/b")]
    );
    assert!(ancestors(Path::new("a")).is_empty());
    assert_eq!(
        relative(Path::new("/workspace/out")),
        PathBuf::from("workspace/out")
    );
}

#[test]
fn writable_grants_are_executable_only_when_the_profile_says_so() {
    assert_ne!(
        grant_flags(Access::ReadWrite, false) & sys::MOUNT_ATTR_NOEXEC,
        0
    );
    assert_eq!(
        grant_flags(Access::ReadWrite, true) & sys::MOUNT_ATTR_NOEXEC,
        0
    );
    assert!(!rights(Access::ReadWrite, true, false).contains(AccessFs::Execute));
    assert!(rights(Access::ReadWrite, true, true).contains(AccessFs::Execute));
    assert_eq!(
        grant_flags(Access::ReadWrite, false) & sys::MOUNT_ATTR_RDONLY,
        0
    );
    assert_ne!(
        grant_flags(Access::ReadOnly, true) & sys::MOUNT_ATTR_RDONLY,
        0
    );
    for access in [Access::ReadOnly, Access::ReadWrite] {
        for executable in [false, true] {
            assert_ne!(grant_flags(access, executable) & sys::MOUNT_ATTR_NOSUID, 0);
            assert_ne!(grant_flags(access, executable) & sys::MOUNT_ATTR_NODEV, 0);
        }
    }
}

#[test]
fn sub_grants_never_leave_the_workspace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(workspace.join("inside")).expect("mkdir");
    std::os::unix::fs::symlink("/etc", workspace.join("out")).expect("symlink");
    std::os::unix::fs::symlink("inside", workspace.join("alias")).expect("symlink");
    let root = open_workspace(&workspace).expect("open");
    assert!(
        open_beneath(root.as_fd(), Path::new("inside"))
            .expect("opens")
            .is_some()
    );
    assert!(
        open_beneath(root.as_fd(), Path::new("alias"))
            .expect("opens")
            .is_some()
    );
    assert!(
        open_beneath(root.as_fd(), Path::new("missing"))
            .expect("absent")
            .is_none()
    );
    let err = open_beneath(root.as_fd(), Path::new("out")).expect_err("escapes");
    assert!(err.contains("outside the workspace"), "{err}");
    let err = open_beneath(root.as_fd(), Path::new("../ws")).expect_err("escapes");
    assert!(err.contains("outside the workspace"), "{err}");
    // A workspace path that is not canonical is refused.
    std::os::unix::fs::symlink(&workspace, dir.path().join("link")).expect("symlink");
    assert!(open_workspace(&dir.path().join("link")).is_err());
}
