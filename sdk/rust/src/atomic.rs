//! Writing a workspace file from inside a tool, atomically: [`write`](write()) replaces a
//! file's contents so that a reader (or a crash) sees the old file or the new one, never
//! half of each.
//!
//! Why a temporary file and a rename: writing the target in place truncates it first, so
//! a tool that fails or is stopped part-way (a full disk, its deadline, a trap) would leave
//! a half-written file in the user's workspace, and anything reading the file meanwhile
//! could see it half-written. A rename within a directory swaps the name over in one
//! step, so writing the new contents to a temporary file beside the target, syncing it,
//! then renaming it over the target never exposes a partial file. Where the sandbox
//! refuses the temporary file or the rename, [`write`](write()) falls back to writing in
//! place (see there).

use std::fs;
use std::fs::File;
use std::fs::OpenOptions;
use std::fs::Permissions;
use std::io;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

/// Temporary names tried before giving up on the atomic path. A clash needs another
/// writer picking the same name in the same nanosecond; a few tries rule that out.
const TEMP_NAME_ATTEMPTS: u32 = 8;

/// Writes `content` to `target`, keeping `permissions` (the replaced file's).
///
/// The temporary file and the rename are the atomic path. Where the sandbox refuses
/// either (a host whose WASI lacks rename, a directory that lets the file be written
/// but nothing be created beside it) the content is written in place instead. A
/// failure while writing the temporary file is reported, not retried in place: what
/// failed there (a full disk) would fail a direct write too, after truncating the
/// file.
pub fn write(target: &Path, content: &[u8], permissions: Option<Permissions>) -> io::Result<()> {
    let Some((temp, file)) = create_temp(target) else {
        return fs::write(target, content);
    };
    let written = fill(file, content, permissions);
    if let Err(err) = written {
        remove_quietly(&temp);
        return Err(err);
    }
    if fs::rename(&temp, target).is_err() {
        remove_quietly(&temp);
        return fs::write(target, content);
    }
    Ok(())
}

fn create_temp(target: &Path) -> Option<(PathBuf, File)> {
    let parent = target.parent()?;
    let name = target.file_name()?.to_string_lossy();
    // Only needs to differ between concurrent writers; the WASI clock is enough.
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    for attempt in 0..TEMP_NAME_ATTEMPTS {
        let temp = parent.join(format!(".{name}.{nonce:x}-{attempt}.airlock-tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Some((temp, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

fn fill(mut file: File, content: &[u8], permissions: Option<Permissions>) -> io::Result<()> {
    file.write_all(content)?;
    // Without the sync a crash after the rename could leave the new name pointing at
    // an empty file, losing both versions.
    ignore_unsupported(file.sync_all())?;
    if let Some(permissions) = permissions {
        // WASI has no file modes to keep; natively this keeps an executable script
        // executable.
        ignore_unsupported(file.set_permissions(permissions))?;
    }
    Ok(())
}

fn ignore_unsupported(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(err) if err.kind() == io::ErrorKind::Unsupported => Ok(()),
        other => other,
    }
}

fn remove_quietly(temp: &Path) {
    // The write already failed and that error is the one to report; a leftover
    // temporary file is named so that it is recognisable.
    if let Err(err) = fs::remove_file(temp) {
        eprintln!(
            "{}: could not remove the temporary file {}: {err}",
            tool_name(),
            temp.display()
        );
    }
}

/// The name to prefix a diagnostic with: the tool's, which the daemon passes as `argv[0]`
/// (sdk/ABI.md, "One call"); natively the binary's file name, which is the tool's too.
fn tool_name() -> String {
    std::env::args_os()
        .next()
        .as_deref()
        .and_then(|arg0| Path::new(arg0).file_name())
        .map_or_else(
            || "airlock-sdk".to_owned(),
            |name| name.to_string_lossy().into_owned(),
        )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn replaces_contents_and_leaves_no_temporary_file() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("a.txt");
        fs::write(&target, "old contents that are longer")?;
        write(&target, b"new", None)?;
        assert_eq!(fs::read_to_string(&target)?, "new");
        let names: Vec<_> = fs::read_dir(dir.path())?
            .map(|entry| entry.map(|entry| entry.file_name()))
            .collect::<io::Result<_>>()?;
        assert_eq!(names, ["a.txt"]);
        Ok(())
    }

    #[test]
    fn keeps_the_replaced_files_mode() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let target = dir.path().join("run.sh");
        fs::write(&target, "#!/bin/sh\n")?;
        fs::set_permissions(&target, Permissions::from_mode(0o751))?;
        let before = fs::metadata(&target)?.permissions();
        write(&target, b"#!/bin/sh\necho hi\n", Some(before))?;
        assert_eq!(fs::metadata(&target)?.permissions().mode() & 0o777, 0o751);
        Ok(())
    }

    #[test]
    fn a_missing_parent_is_an_error_not_a_panic() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let err = write(&dir.path().join("no/such/dir/a.txt"), b"x", None);
        assert_eq!(err.map_err(|err| err.kind()), Err(io::ErrorKind::NotFound));
        Ok(())
    }
}
