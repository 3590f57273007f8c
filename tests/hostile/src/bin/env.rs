//! `env`: reports what of its surroundings the tool can see. Args: `{"extra_paths":
//! [string]?}`, more directories to list.
//!
//! Attacks the environment, argv and directory grants by looking at them. Returns
//! `{"ok": {"argv": [string], "env": {name: value}, "preopens": [string] | null,
//! "preopens_error"?: string, "probes": [attempt, …]}}` where `preopens` are the guest paths
//! of every preopened directory in descriptor order, the WASI preview 1 view
//! (`fd_prestat_get` from fd 3 on; `null` where that view does not exist: natively and under
//! preview 2), and `probes` (see `Attempt`) are
//! `cwd`, `list /`, `list .`, `list /workspace`, then `list <p>` for each extra path. The test
//! asserts that the sandbox passed exactly the variables, argv (`[<tool name>]`) and preopens
//! its profile grants and nothing of the daemon's own.

use std::collections::BTreeMap;
use std::env;
use std::process::ExitCode;

use airlock_hostile::{Attempt, ToolError, list_dir, run};
use serde::{Deserialize, Serialize};

/// Directories every report lists: the root and the workspace under both of its names.
const LISTS: &[&str] = &["/", ".", "/workspace"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    extra_paths: Vec<String>,
}

#[derive(Serialize)]
struct Report {
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    preopens: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preopens_error: Option<String>,
    probes: Vec<Attempt>,
}

fn main() -> ExitCode {
    run(|args: Args| -> Result<Report, ToolError> {
        // First, before anything else opens a descriptor that could be mistaken for one.
        let (preopens, preopens_error) = match preopens::list() {
            Ok(found) => (Some(found), None),
            Err(error) => (None, Some(error)),
        };
        let lossy = |text: std::ffi::OsString| text.to_string_lossy().into_owned();
        let mut probes = vec![Attempt::record(
            "cwd",
            env::current_dir().map(|dir| dir.to_string_lossy().into_owned().into_bytes()),
        )];
        for path in LISTS
            .iter()
            .copied()
            .chain(args.extra_paths.iter().map(String::as_str))
        {
            probes.push(Attempt::record(format!("list {path}"), list_dir(path)));
        }
        Ok(Report {
            argv: env::args_os().map(lossy).collect(),
            env: env::vars_os()
                .map(|(name, value)| (lossy(name), lossy(value)))
                .collect(),
            preopens,
            preopens_error,
            probes,
        })
    })
}

/// The preopened directories as WASI preview 1 hands them to the guest.
#[cfg(all(target_os = "wasi", target_env = "p1"))]
mod preopens {
    /// `__wasi_prestat_t`: a tag (0: a directory) and, for a directory, its name's length.
    #[repr(C)]
    struct Prestat {
        tag: u8,
        dir_name_len: usize,
    }

    /// `__WASI_PREOPENTYPE_DIR`.
    const PREOPENTYPE_DIR: u8 = 0;
    /// `__WASI_ERRNO_BADF`: returned for the first descriptor past the preopens.
    const ERRNO_BADF: i32 = 8;
    /// Preopens are numbered from 3, after stdio.
    const FIRST_FD: u32 = 3;
    /// A sandbox that hands out more preopens than this is reported as broken rather than
    /// walked without end.
    const MAX_PREOPENS: u32 = 1024;

    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    unsafe extern "C" {
        fn fd_prestat_get(fd: u32, prestat: *mut Prestat) -> i32;
        fn fd_prestat_dir_name(fd: u32, path: *mut u8, path_len: usize) -> i32;
    }

    pub fn list() -> Result<Vec<String>, String> {
        let mut found = Vec::new();
        for fd in FIRST_FD..FIRST_FD + MAX_PREOPENS {
            let mut prestat = Prestat {
                tag: PREOPENTYPE_DIR,
                dir_name_len: 0,
            };
            // SAFETY: `prestat` is a live, writable value with the layout the call fills in.
            match unsafe { fd_prestat_get(fd, &mut prestat) } {
                0 => {}
                ERRNO_BADF => return Ok(found),
                errno => return Err(format!("fd_prestat_get({fd}) failed: errno {errno}")),
            }
            if prestat.tag != PREOPENTYPE_DIR {
                continue;
            }
            let mut name = vec![0; prestat.dir_name_len];
            // SAFETY: `name` is a live, writable buffer exactly as long as the length passed.
            match unsafe { fd_prestat_dir_name(fd, name.as_mut_ptr(), name.len()) } {
                0 => {}
                errno => return Err(format!("fd_prestat_dir_name({fd}) failed: errno {errno}")),
            }
            found.push(String::from_utf8_lossy(&name).into_owned());
        }
        Err(format!("more than {MAX_PREOPENS} preopened descriptors"))
    }
}

/// Where the preview 1 view does not exist there is nothing to enumerate.
#[cfg(not(all(target_os = "wasi", target_env = "p1")))]
mod preopens {
    pub fn list() -> Result<Vec<String>, String> {
        Err("only a WASI preview 1 module can enumerate its preopens".to_owned())
    }
}
