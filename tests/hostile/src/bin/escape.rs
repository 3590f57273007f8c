//! `escape`: tries to read what lies outside the workspace and reports every attempt.
//! Args: `{"extra_paths": [string]?}`; each extra path is tried both as `read` and as `list`.
//!
//! Attacks the file sandbox with `..`, absolute paths, /proc, and symlinks. The test plants,
//! with W the workspace and P its parent directory:
//! - `P/secret.txt`, a file the tool must never read;
//! - `W/link_out` → P (a directory outside), `W/link_file` → `P/secret.txt`,
//!   `W/link_abs` → `/etc/passwd` (absolute target), `W/link_dotdot` → `../secret.txt`.
//!
//! Returns `{"ok": [attempt, …]}`, each `{"attempt", "succeeded", "error"?, "kind"?,
//! "content"?}` (see `Attempt`), in this order: `read ../secret.txt`,
//! `read /workspace/../secret.txt`, `read /etc/passwd`, `read /etc/hostname`,
//! `read /proc/self/environ`, `list /`, `list ..`, `list link_out`, `read link_out/secret.txt`,
//! `read link_file`, `read link_abs`, `read link_dotdot`, `list .`, `list /workspace`, then the
//! extra paths. The sandbox must make every attempt fail except the two workspace listings,
//! which must succeed (they prove the workspace was reachable, so the failures are the
//! sandbox's doing), and `list /`: wasi-libc resolves an absolute path that no other preopen
//! matches against the `.` preopen, so `list /` lists the workspace (and `/etc/passwd` names
//! `W/etc/passwd`). Its content must be the workspace's, never the host's root.

use std::process::ExitCode;

use airlock_hostile::{Attempt, ToolError, list_dir, read_head, run};
use serde::Deserialize;

/// Files reached through `..`, absolute paths, /proc and planted symlinks.
const READS: &[&str] = &[
    "../secret.txt",
    "/workspace/../secret.txt",
    "/etc/passwd",
    "/etc/hostname",
    "/proc/self/environ",
];

/// Directories outside the workspace.
const LISTS: &[&str] = &["/", "..", "link_out"];

/// Files behind the planted symlinks.
const LINK_READS: &[&str] = &[
    "link_out/secret.txt",
    "link_file",
    "link_abs",
    "link_dotdot",
];

/// The workspace under both of its names: these must succeed.
const WORKSPACE: &[&str] = &[".", "/workspace"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    extra_paths: Vec<String>,
}

fn read(path: &str) -> Attempt {
    Attempt::record(format!("read {path}"), read_head(path))
}

fn list(path: &str) -> Attempt {
    Attempt::record(format!("list {path}"), list_dir(path))
}

fn main() -> ExitCode {
    run(|args: Args| -> Result<Vec<Attempt>, ToolError> {
        let mut attempts = Vec::new();
        attempts.extend(READS.iter().copied().map(read));
        attempts.extend(LISTS.iter().copied().map(list));
        attempts.extend(LINK_READS.iter().copied().map(read));
        attempts.extend(WORKSPACE.iter().copied().map(list));
        for path in &args.extra_paths {
            attempts.push(read(path));
            attempts.push(list(path));
        }
        Ok(attempts)
    })
}
