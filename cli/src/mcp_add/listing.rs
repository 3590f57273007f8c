//! After the install, what the server's tools are: listed by the daemon's own loader
//! (`airlockd check-tool`), which starts the server in its sandbox under its profile exactly
//! as a daemon does at load — never on this machine outside one — and prints each tool as a
//! daemon would serve it, trusting nothing (its trust records are a scratch folder's), and
//! hands back that listing for the manifest to pin. Then whether the running daemon serves
//! them: it loads its tools when it starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use airlock_client::exit_code;

use super::super::author::{AIRLOCKD_ENV, airlockd};
use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;

/// The file `airlockd check-tool` writes the listing it printed to, in the server's folder
/// for the moment of the check.
const LISTING_FILE: &str = ".airlock-listing.json";

/// Lists the tools of the server in `folder` in its sandbox; the listing printed (each
/// tool's name on the server → its digest) when the daemon would serve it, none when it
/// would not (the report is on stdout either way).
pub fn check<O: std::io::Write, E: std::io::Write>(
    folder: &Path,
    profiles_dir: Option<&Path>,
    out: &mut Output<O, E>,
) -> Result<Option<BTreeMap<String, String>>, CliError> {
    let airlockd = airlockd();
    let listing_file = folder.join(LISTING_FILE);
    let mut command = Command::new(&airlockd);
    if let Some(dir) = profiles_dir {
        command.arg("--profiles-dir").arg(dir);
    }
    command
        .arg("check-tool")
        .arg(folder)
        .arg("--listing-out")
        .arg(&listing_file);
    command.env("AIRLOCK_LOG", "warn");
    let done = command.output().map_err(|err| {
        CliError::NoInput(format!(
            "cannot run {} to list the server's tools: {err} (set {AIRLOCKD_ENV} to the airlockd binary)",
            airlockd.display()
        ))
    })?;
    out.stdout(&String::from_utf8_lossy(&done.stdout))?;
    let stderr = String::from_utf8_lossy(&done.stderr);
    for line in stderr.lines().filter(|line| !line.trim().is_empty()) {
        out.line(line)?;
    }
    let listing = std::fs::read_to_string(&listing_file);
    let _ = std::fs::remove_file(&listing_file);
    match done.status.code() {
        Some(0) => {
            let listing = listing.map_err(|err| {
                CliError::Install(format!(
                    "{} check-tool wrote no listing to {}: {err}",
                    airlockd.display(),
                    listing_file.display()
                ))
            })?;
            serde_json::from_str(&listing).map(Some).map_err(|err| {
                CliError::Install(format!(
                    "{} check-tool wrote a listing that does not read: {err}",
                    airlockd.display()
                ))
            })
        }
        Some(code) if code == i32::from(exit_code::CHECK_FAILED) => Ok(None),
        _ => Err(CliError::Install(format!(
            "{} check-tool failed ({})",
            airlockd.display(),
            done.status
        ))),
    }
}

/// Says whether the daemon at `server` serves server `name`'s tools, and if not, how to make
/// it. A daemon that cannot be reached is no error: the install stands.
pub async fn probe<O: std::io::Write, E: std::io::Write>(
    server: &Server,
    name: &str,
    tools_dir: &Path,
    out: &mut Output<O, E>,
) -> Result<(), CliError> {
    let dir = absolute(tools_dir);
    let serve = format!(
        "airlockd serves it when it starts with `--tools-dir {}` (or from the folder holding \
         it as ./plugins), each tool as pinned above",
        dir.display()
    );
    let client = match server.connect().await {
        Ok(client) => client,
        Err(err) => {
            out.line(&format!("· no daemon to ask ({err}); {serve}"))?;
            return Ok(());
        }
    };
    let prefix = format!("{name}__");
    let served: Vec<String> = match client.list_tools().await {
        Ok(tools) => tools
            .into_iter()
            .map(|tool| tool.name)
            .filter(|tool| tool.starts_with(&prefix))
            .collect(),
        Err(err) => {
            out.line(&format!(
                "· airlockd at {} did not list its tools ({err}); {serve}",
                client.endpoint()
            ))?;
            return Ok(());
        }
    };
    if served.is_empty() {
        out.line(&format!(
            "· airlockd at {} does not serve `{name}` yet: it loads tools when it starts — restart it; {serve}",
            client.endpoint()
        ))?;
    } else {
        out.line(&format!(
            "· airlockd at {} serves {} (as it loaded them when it started)",
            client.endpoint(),
            served.join(", ")
        ))?;
    }
    Ok(())
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
