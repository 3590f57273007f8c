//! `write_ro`: in a workspace granted read-only, tries every way of changing it and reports
//! each attempt. Args: `{"base": string?}`, the directory the attempts work in (default `.`;
//! `/workspace` attacks the other name of the same preopen).
//!
//! Attacks the read-only grant. The test plants `existing.txt` (a file with known content)
//! and `existing_dir/` (an empty directory) in the workspace. Returns `{"ok": [attempt, …]}`
//! (see `Attempt`), with `<b>` the base, in this order: `create <b>/new.txt`,
//! `overwrite <b>/existing.txt`, `append <b>/existing.txt`, `truncate <b>/existing.txt`,
//! `write through a read-only handle <b>/existing.txt`,
//! `set_len through a read-only handle <b>/existing.txt`, `chmod <b>/existing.txt`,
//! `set_times <b>/existing.txt`, `hard_link <b>/existing.txt as <b>/hardlink.txt`,
//! `mkdir <b>/new_dir`, `rmdir <b>/existing_dir`, `symlink <b>/new_link to existing.txt`,
//! `rename <b>/existing.txt to <b>/renamed.txt`, `delete <b>/existing.txt`. The sandbox must
//! make every attempt fail; the test then checks that the host's files are unchanged (names,
//! content, permissions, times).

use std::ffi::{CString, c_char, c_int};
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::UNIX_EPOCH;

use airlock_hostile::{Attempt, ToolError, run};
use serde::Deserialize;

/// What every write attempt tries to put in a file: recognisable if it ever lands.
const PAYLOAD: &[u8] = b"written by airlock-hostile write_ro\n";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default = "default_base")]
    base: String,
}

fn default_base() -> String {
    ".".to_owned()
}

fn write_with(options: &OpenOptions, path: &Path) -> io::Result<Vec<u8>> {
    options.open(path)?.write_all(PAYLOAD)?;
    Ok(Vec::new())
}

/// Creates a symlink through the C library: std's WASI `symlink_path` is unstable, and both
/// wasi-libc (which std links on WASI) and the host libc provide POSIX `symlink`.
fn symlink(target: &str, link: &Path) -> io::Result<()> {
    unsafe extern "C" {
        fn symlink(target: *const c_char, link: *const c_char) -> c_int;
    }
    let invalid = |_| io::Error::from(io::ErrorKind::InvalidInput);
    let target = CString::new(target).map_err(invalid)?;
    let link = CString::new(link.to_string_lossy().as_bytes()).map_err(invalid)?;
    // SAFETY: both arguments are NUL-terminated strings that live across the call, which only
    // reads them.
    if unsafe { symlink(target.as_ptr(), link.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn attempts(base: &Path) -> Vec<Attempt> {
    let existing = base.join("existing.txt");
    let shown = |path: &Path| path.display().to_string();
    let done = |result: io::Result<()>| result.map(|()| Vec::new());
    let at = shown(&existing);

    vec![
        Attempt::record(
            format!("create {}", shown(&base.join("new.txt"))),
            write_with(
                OpenOptions::new().write(true).create_new(true),
                &base.join("new.txt"),
            ),
        ),
        Attempt::record(
            format!("overwrite {at}"),
            write_with(OpenOptions::new().write(true), &existing),
        ),
        Attempt::record(
            format!("append {at}"),
            write_with(OpenOptions::new().append(true), &existing),
        ),
        Attempt::record(
            format!("truncate {at}"),
            done(
                OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(&existing)
                    .map(drop),
            ),
        ),
        Attempt::record(
            format!("write through a read-only handle {at}"),
            done(File::open(&existing).and_then(|mut file| file.write_all(PAYLOAD))),
        ),
        Attempt::record(
            format!("set_len through a read-only handle {at}"),
            done(File::open(&existing).and_then(|file| file.set_len(0))),
        ),
        Attempt::record(
            format!("chmod {at}"),
            done(fs::metadata(&existing).and_then(|metadata| {
                let mut permissions = metadata.permissions();
                permissions.set_readonly(!permissions.readonly());
                fs::set_permissions(&existing, permissions)
            })),
        ),
        Attempt::record(
            format!("set_times {at}"),
            done(File::open(&existing).and_then(|file| {
                file.set_times(
                    FileTimes::new()
                        .set_accessed(UNIX_EPOCH)
                        .set_modified(UNIX_EPOCH),
                )
            })),
        ),
        Attempt::record(
            format!("hard_link {at} as {}", shown(&base.join("hardlink.txt"))),
            done(fs::hard_link(&existing, base.join("hardlink.txt"))),
        ),
        Attempt::record(
            format!("mkdir {}", shown(&base.join("new_dir"))),
            done(fs::create_dir(base.join("new_dir"))),
        ),
        Attempt::record(
            format!("rmdir {}", shown(&base.join("existing_dir"))),
            done(fs::remove_dir(base.join("existing_dir"))),
        ),
        Attempt::record(
            format!("symlink {} to existing.txt", shown(&base.join("new_link"))),
            done(symlink("existing.txt", &base.join("new_link"))),
        ),
        // Last, because should either succeed, `existing.txt` is gone for every attempt after.
        Attempt::record(
            format!("rename {at} to {}", shown(&base.join("renamed.txt"))),
            done(fs::rename(&existing, base.join("renamed.txt"))),
        ),
        Attempt::record(format!("delete {at}"), done(fs::remove_file(&existing))),
    ]
}

fn main() -> ExitCode {
    run(|args: Args| -> Result<Vec<Attempt>, ToolError> { Ok(attempts(Path::new(&args.base))) })
}
