//! The author's toolkit: `airlock tools new | build | check | digest`. These work on a tool
//! project on this machine and need no running daemon: `new` writes a project from the
//! embedded templates (scaffold.rs), `build` runs the command its manifest names, `digest`
//! prints (or writes) the pin, and `check` hands the project to `airlockd check-tool`, so
//! that the daemon's own loader and executor judge it.

mod scaffold;

use std::path::{Path, PathBuf};
use std::process::Command;

use airlock_client::exit_code;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::CliError;
use crate::output::Output;

pub use scaffold::{NewArgs, new};

/// The manifest's file name in a tool's folder.
const MANIFEST_FILE: &str = "tool.toml";

/// The variable that names the `airlockd` to check with, before the one beside `airlock`.
pub(super) const AIRLOCKD_ENV: &str = "AIRLOCKD";

#[derive(Debug, clap::Args)]
pub struct ProjectArgs {
    /// The tool's folder (the one holding tool.toml).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct DigestArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Write the pin into tool.toml (replacing an older one) instead of printing it.
    #[arg(long)]
    pub write: bool,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// The sandbox profiles the tool's profile is looked up in [default: airlockd's,
    /// ./sandbox-profiles].
    #[arg(long, value_name = "DIR")]
    pub profiles_dir: Option<PathBuf>,
    /// The workspace the example calls run in [default: the `workspace` of examples.json].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Run one call with these arguments (JSON) instead of the examples of examples.json.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Where compiled modules are cached [default: airlockd's state dir, so a daemon
    /// started later finds the tool compiled].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// What the toolkit reads of a manifest; the daemon checks the rest.
#[derive(Debug, Deserialize)]
struct ProjectManifest {
    name: String,
    module: Option<PathBuf>,
    build: Option<BuildSection>,
}

#[derive(Debug, Deserialize)]
struct BuildSection {
    command: Vec<String>,
}

struct Project {
    dir: PathBuf,
    manifest_path: PathBuf,
    manifest: ProjectManifest,
}

impl Project {
    fn open(dir: &Path) -> Result<Project, CliError> {
        let manifest_path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&manifest_path).map_err(|err| {
            CliError::NoInput(format!(
                "{}: {err} (give the tool's folder, or make one with `airlock tools new`)",
                manifest_path.display()
            ))
        })?;
        let manifest = toml::from_str(&text)
            .map_err(|err| CliError::Usage(format!("{}: {err}", manifest_path.display())))?;
        Ok(Project {
            dir: dir.to_owned(),
            manifest_path,
            manifest,
        })
    }

    /// The module's path; an error for a manifest that names none.
    fn module(&self) -> Result<PathBuf, CliError> {
        match &self.manifest.module {
            Some(module) => Ok(self.dir.join(module)),
            None => Err(CliError::Usage(format!(
                "{}: names no `module` (only WebAssembly tools are built and pinned here)",
                self.manifest_path.display()
            ))),
        }
    }

    /// The module's sha256, lowercase hex, and its size.
    fn digest(&self) -> Result<(String, u64), CliError> {
        let module = self.module()?;
        let bytes = std::fs::read(&module).map_err(|err| {
            CliError::NoInput(format!(
                "{}: {err} (build it first: `airlock tools build {}`)",
                module.display(),
                self.dir.display()
            ))
        })?;
        Ok((hex::encode(Sha256::digest(&bytes)), bytes.len() as u64))
    }
}

/// `airlock tools build`: runs the manifest's `[build] command` in the tool's folder, its
/// output shown as it comes, then reports the module.
pub fn build<O: std::io::Write, E: std::io::Write>(
    args: ProjectArgs,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let project = Project::open(&args.dir)?;
    let Some(build) = &project.manifest.build else {
        return Err(CliError::Usage(format!(
            "{}: has no [build] section; add one, e.g. `[build]\\ncommand = [\"sh\", \"build.sh\"]`",
            project.manifest_path.display()
        )));
    };
    let Some((program, arguments)) = build.command.split_first() else {
        return Err(CliError::Usage(format!(
            "{}: [build] command is empty",
            project.manifest_path.display()
        )));
    };
    out.line(&format!(
        "building {} in {}: {}",
        project.manifest.name,
        project.dir.display(),
        build.command.join(" ")
    ))?;
    let status = Command::new(program)
        .args(arguments)
        .current_dir(&project.dir)
        .status()
        .map_err(|err| {
            CliError::NoInput(format!(
                "cannot run `{program}` (the [build] command of {}): {err}",
                project.manifest_path.display()
            ))
        })?;
    if !status.success() {
        out.line(&format!(
            "the build of {} failed ({status}); its output is above",
            project.manifest.name
        ))?;
        return Ok(exit_code::CHECK_FAILED);
    }
    let (digest, size) = project.digest()?;
    out.line(&format!(
        "built {} ({size} bytes, sha256 {digest}); next: `airlock tools check {}`",
        project.module()?.display(),
        project.dir.display()
    ))?;
    Ok(exit_code::OK)
}

/// `airlock tools digest`: the pin for the manifest, printed or written into it.
pub fn digest<O: std::io::Write, E: std::io::Write>(
    args: DigestArgs,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let project = Project::open(&args.project.dir)?;
    let (digest, _) = project.digest()?;
    let pin = format!("sha256 = \"{digest}\"");
    if !args.write {
        out.stdout(&format!("{pin}\n"))?;
        return Ok(exit_code::OK);
    }
    let text = std::fs::read_to_string(&project.manifest_path)
        .map_err(|err| CliError::NoInput(format!("{}: {err}", project.manifest_path.display())))?;
    let pinned = with_pin(&text, &pin);
    std::fs::write(&project.manifest_path, pinned).map_err(CliError::Output)?;
    out.line(&format!("{}: {pin}", project.manifest_path.display()))?;
    Ok(exit_code::OK)
}

/// `text` with its top-level `sha256 = …` line replaced by `pin`, or `pin` added after the
/// `module = …` line (the manifest's shape: both are top-level keys, before any table).
fn with_pin(text: &str, pin: &str) -> String {
    let is_key = |line: &str, key: &str| {
        line.strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    };
    let mut lines: Vec<String> = Vec::new();
    let mut placed = false;
    let mut in_table = false;
    for line in text.lines() {
        in_table |= line.trim_start().starts_with('[');
        if !in_table && is_key(line, "sha256") {
            if !placed {
                lines.push(pin.to_owned());
                placed = true;
            }
            continue;
        }
        lines.push(line.to_owned());
        if !in_table && !placed && is_key(line, "module") {
            lines.push(pin.to_owned());
            placed = true;
        }
    }
    if !placed {
        lines.insert(0, pin.to_owned());
    }
    let mut pinned = lines.join("\n");
    pinned.push('\n');
    pinned
}

/// `airlock tools check`: `airlockd check-tool`, whose report and verdict are this command's.
pub fn check(args: CheckArgs) -> Result<u8, CliError> {
    Project::open(&args.project.dir)?;
    let airlockd = airlockd();
    let mut command = Command::new(&airlockd);
    if let Some(dir) = &args.profiles_dir {
        command.arg("--profiles-dir").arg(dir);
    }
    if let Some(dir) = &args.state_dir {
        command.arg("--state-dir").arg(dir);
    }
    command.arg("check-tool").arg(&args.project.dir);
    if let Some(dir) = &args.workspace {
        command.arg("--workspace").arg(dir);
    }
    if let Some(arguments) = &args.args {
        command.arg("--args").arg(arguments);
    }
    // The daemon's logs would only repeat the report, which it prints line by line as it
    // goes (compiling a large component takes seconds): straight to this terminal.
    command.env("AIRLOCK_LOG", "warn");
    let status = command.status().map_err(|err| {
        CliError::NoInput(format!(
            "cannot run {} to check the tool: {err} (set {AIRLOCKD_ENV} to the airlockd binary)",
            airlockd.display()
        ))
    })?;
    match status.code() {
        Some(0) => Ok(exit_code::OK),
        Some(1) => Ok(exit_code::CHECK_FAILED),
        _ => Err(CliError::NoInput(format!(
            "{} check-tool failed ({status})",
            airlockd.display()
        ))),
    }
}

/// `$AIRLOCKD`, else the `airlockd` beside this binary, else the one on PATH.
pub(super) fn airlockd() -> PathBuf {
    if let Some(path) = std::env::var_os(AIRLOCKD_ENV) {
        return PathBuf::from(path);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("airlockd")))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("airlockd"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "sha256 = \"ab\"";

    #[test]
    fn a_pin_goes_after_the_module_line() {
        let text =
            "name = \"t\"\nmodule = \"t.wasm\"\nprofile = \"p\"\n\n[build]\nmodule = \"x\"\n";
        assert_eq!(
            with_pin(text, PIN),
            "name = \"t\"\nmodule = \"t.wasm\"\nsha256 = \"ab\"\nprofile = \"p\"\n\n[build]\nmodule = \"x\"\n"
        );
    }

    #[test]
    fn a_pin_replaces_the_old_one_and_leaves_tables_alone() {
        let text = "module = \"t.wasm\"\nsha256 = \"00\"\n[output]\nsha256 = \"keep\"\n";
        assert_eq!(
            with_pin(text, PIN),
            "module = \"t.wasm\"\nsha256 = \"ab\"\n[output]\nsha256 = \"keep\"\n"
        );
    }
}
