//! A server from PyPI: a virtualenv made with Debian's `/usr/bin/python3` in the folder
//! (`venv/`), the package installed there by the venv's pip — wheels only, so that nothing
//! of the package runs on this machine while it installs — with `--report`, whose archive
//! hashes are the lock. The executables are the package's `console_scripts`; each runs as
//! the venv's `python` (a symlink to `/usr/bin/python3`, which the `mcp-python` profile
//! grants) on the script, both under `/tool`, where the sandbox shows the folder. Python
//! finds the venv from the path it was started as, so the venv's packages are its own
//! without a `PYTHONPATH`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::files::{Installed, Locked, canonical};
use super::installer::step;
use super::package::Package;

/// The interpreter the venv is made with: the one the sandbox's `/usr` holds.
const PYTHON: &str = "/usr/bin/python3";
const VENV: &str = "venv";
/// pip's installation report, read for the lock and then removed.
const REPORT: &str = "pip-report.json";
/// Where the sandbox shows the server's folder.
const GUEST_DIR: &str = "/tool";
pub const PROFILE: &str = "mcp-python";

/// `pip install --report`: what was installed, from where.
#[derive(Deserialize)]
struct Report {
    pip_version: String,
    install: Vec<Item>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Item {
    metadata: Metadata,
    download_info: DownloadInfo,
    #[serde(default)]
    requested: bool,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
    version: String,
}

#[derive(Deserialize)]
struct DownloadInfo {
    url: String,
    archive_info: Option<ArchiveInfo>,
}

#[derive(Deserialize)]
struct ArchiveInfo {
    #[serde(default)]
    hashes: BTreeMap<String, String>,
    /// `sha256=<hex>`: what pip versions before `hashes` wrote.
    hash: Option<String>,
}

/// Installs `package` into `dir`.
pub fn install(dir: &Path, package: &Package) -> Result<Installed, String> {
    if !Path::new(PYTHON).is_file() {
        return Err(format!(
            "{PYTHON} is missing: the mcp-python profile runs the system's Python (Debian: apt-get install python3 python3-venv)"
        ));
    }
    let venv = dir.join(VENV);
    step(
        Command::new(PYTHON).args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    let report = dir.join(REPORT);
    let requirement = match &package.version {
        Some(version) => format!("{}=={version}", package.name),
        None => package.name.clone(),
    };
    step(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--quiet",
                // An sdist would be built, running the package's code here, outside any sandbox.
                "--only-binary=:all:",
                "--report",
            ])
            .arg(&report)
            .arg("--")
            .arg(&requirement),
        &format!(
            "pip install {requirement} (wheels only: building an sdist would run its code outside the sandbox)"
        ),
    )?;
    let text = std::fs::read_to_string(&report)
        .map_err(|err| format!("cannot read {}: {err}", report.display()))?;
    let _ = std::fs::remove_file(&report);
    let report: Report =
        serde_json::from_str(&text).map_err(|err| format!("cannot read pip's report: {err}"))?;
    let wanted = canonical(&package.name);
    let version = report
        .install
        .iter()
        .find(|item| item.requested && canonical(&item.metadata.name) == wanted)
        .map(|item| item.metadata.version.clone())
        .ok_or_else(|| format!("pip's report names no installed {}", package.name))?;
    let packages = report.install.iter().map(locked).collect();
    let executables = console_scripts(&venv, &wanted)?;
    let python = report
        .environment
        .get("python_full_version")
        .map_or(String::new(), |version| format!(" (Python {version})"));
    Ok(Installed {
        version,
        installer: format!("pip {}{python}", report.pip_version),
        packages,
        executables,
        profile: PROFILE,
    })
}

fn locked(item: &Item) -> Locked {
    let hash = item.download_info.archive_info.as_ref().and_then(|info| {
        info.hashes
            .get("sha256")
            .map(|hex| format!("sha256:{hex}"))
            .or_else(|| info.hash.as_ref().map(|hash| hash.replacen('=', ":", 1)))
    });
    Locked {
        name: item.metadata.name.clone(),
        version: item.metadata.version.clone(),
        source: Some(item.download_info.url.clone()),
        hash,
    }
}

/// The `console_scripts` of the installed distribution `wanted` (a canonical name), each as
/// the command that runs it in the sandbox.
fn console_scripts(venv: &Path, wanted: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let dist_info = find_dist_info(venv, wanted)?;
    let text = match std::fs::read_to_string(dist_info.join("entry_points.txt")) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => {
            return Err(format!(
                "cannot read {}/entry_points.txt: {err}",
                dist_info.display()
            ));
        }
    };
    let guest = |path: &str| format!("{GUEST_DIR}/{VENV}/bin/{path}");
    Ok(entry_points(&text, "console_scripts")
        .into_iter()
        .filter(|name| venv.join("bin").join(name).is_file())
        .map(|name| {
            let command = vec![guest("python"), guest(&name)];
            (name, command)
        })
        .collect())
}

/// The `.dist-info` folder of distribution `wanted` in the venv's site-packages.
fn find_dist_info(venv: &Path, wanted: &str) -> Result<PathBuf, String> {
    let lib = venv.join("lib");
    let unreadable =
        |path: &Path, err: std::io::Error| format!("cannot read {}: {err}", path.display());
    for python in std::fs::read_dir(&lib).map_err(|err| unreadable(&lib, err))? {
        let site = python
            .map_err(|err| unreadable(&lib, err))?
            .path()
            .join("site-packages");
        let Ok(entries) = std::fs::read_dir(&site) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_none_or(|ext| ext != "dist-info") {
                continue;
            }
            let metadata = std::fs::read_to_string(path.join("METADATA")).unwrap_or_default();
            let name = metadata
                .lines()
                .find_map(|line| line.strip_prefix("Name:"))
                .map(str::trim);
            if name.is_some_and(|name| canonical(name) == wanted) {
                return Ok(path);
            }
        }
    }
    Err(format!(
        "no installed distribution `{wanted}` under {}",
        lib.display()
    ))
}

/// The names of the entry points in `section` of an `entry_points.txt` (INI: `[section]`,
/// then `name = module:attr` lines).
fn entry_points(text: &str, section: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = header.trim() == section;
        } else if inside && let Some((name, _)) = line.split_once('=') {
            names.push(name.trim().to_owned());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_console_scripts_only() {
        let text = "[console_scripts]\nmcp-server-git = mcp_server_git:main\n\n\
                    [gui_scripts]\nviewer = x:y\n[console_scripts]\nhelper=mcp_server_git.h:main [extra]\n";
        assert_eq!(
            entry_points(text, "console_scripts"),
            ["mcp-server-git", "helper"]
        );
        assert!(entry_points("", "console_scripts").is_empty());
    }

    #[test]
    fn locks_each_archive_by_its_sha256() -> anyhow::Result<()> {
        let report: Report = serde_json::from_str(
            r#"{"version": "1", "pip_version": "23.0.1", "install": [
                {"metadata": {"name": "mcp-server-time", "version": "2026.10.19"}, "requested": true,
                 "download_info": {"url": "https://files.pythonhosted.org/t.whl",
                   "archive_info": {"hash": "sha256=ab", "hashes": {"sha256": "ab"}}}},
                {"metadata": {"name": "tzdata", "version": "2026.6"}, "requested": false,
                 "download_info": {"url": "https://files.pythonhosted.org/z.whl",
                   "archive_info": {"hash": "sha256=cd"}}}],
              "environment": {"python_full_version": "3.11.2"}}"#,
        )?;
        let locked: Vec<Locked> = report.install.iter().map(locked).collect();
        assert_eq!(locked[0].hash.as_deref(), Some("sha256:ab"));
        assert_eq!(locked[1].hash.as_deref(), Some("sha256:cd"));
        assert_eq!(locked[1].version, "2026.6");
        Ok(())
    }
}
