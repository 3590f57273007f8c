//! Running the programs an install calls on (python's `venv` and pip, npm, node): an
//! installer step, whose messages are shown when it fails, and a program's version line.
//! Shared by `pypi.rs` and `npm.rs`, and uses neither.

use std::process::{Command, Stdio};

/// The most of a failed installer's messages shown.
const MAX_ERROR_LINES: usize = 20;

/// Runs an installer step; its messages, when it fails.
pub fn step(command: &mut Command, what: &str) -> Result<(), String> {
    let done = command
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("cannot run {what}: {err}"))?;
    if done.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&done.stderr);
    let stdout = String::from_utf8_lossy(&done.stdout);
    let lines: Vec<&str> = stderr
        .lines()
        .chain(stdout.lines())
        .filter(|line| !line.trim().is_empty())
        .collect();
    let shown = &lines[lines.len().saturating_sub(MAX_ERROR_LINES)..];
    Err(format!(
        "{what} failed ({}):\n{}",
        done.status,
        shown.join("\n")
    ))
}

/// A program's version line.
pub fn output(command: &mut Command) -> Result<String, String> {
    let done = command
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("cannot run {:?}: {err}", command.get_program()))?;
    Ok(String::from_utf8_lossy(&done.stdout).trim().to_owned())
}
