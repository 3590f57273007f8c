//! Copying a workspace for a forked run: files, directories and symlinks, with their modes
//! and owners, never following a symlink (a link is copied as the link it is). Other kinds of
//! entries (fifos, sockets, devices) are left out: no tool's change set can hold them either.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Copies the tree at `from` to `to`, which must not exist yet (blocking).
#[cfg(test)]
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    copy_contents(from, to)
}

/// Copies what the directory `from` holds into the empty directory `to`, and gives `to` its
/// owner and mode (blocking).
pub fn copy_contents(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = from.symlink_metadata()?;
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            from.display()
        )));
    }
    copy_dir(from, to)?;
    finish(to, &meta)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let meta = source.symlink_metadata()?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
            std::os::unix::fs::lchown(&target, Some(meta.uid()), Some(meta.gid()))?;
        } else if kind.is_dir() {
            std::fs::create_dir(&target)?;
            copy_dir(&source, &target)?;
            finish(&target, &meta)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target)?;
            finish(&target, &meta)?;
        }
    }
    Ok(())
}

fn finish(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<()> {
    std::os::unix::fs::chown(path, Some(meta.uid()), Some(meta.gid()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(meta.mode() & 0o7777))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_keeps_contents_modes_and_links_and_follows_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("sub")).expect("mkdir");
        std::fs::write(from.join("sub/run.sh"), "echo hi\n").expect("write");
        std::fs::set_permissions(
            from.join("sub/run.sh"),
            std::fs::Permissions::from_mode(0o750),
        )
        .expect("chmod");
        std::os::unix::fs::symlink("/etc/passwd", from.join("out")).expect("symlink");
        let to = dir.path().join("to");
        copy_tree(&from, &to).expect("copy");
        assert_eq!(
            std::fs::read_to_string(to.join("sub/run.sh")).expect("read"),
            "echo hi\n"
        );
        let mode = std::fs::metadata(to.join("sub/run.sh"))
            .expect("meta")
            .mode()
            & 0o777;
        assert_eq!(mode, 0o750);
        assert_eq!(
            std::fs::read_link(to.join("out")).expect("link"),
            Path::new("/etc/passwd")
        );
        assert!(copy_tree(&from, &to).is_err(), "the target must not exist");
    }
}
