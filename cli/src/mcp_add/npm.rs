//! A server from npm: a node project in the folder (`package.json`, `node_modules/`), the
//! package installed there by `npm install` at an exact version, with its install scripts
//! off — a package's scripts would run here, outside any sandbox. `package-lock.json`'s
//! `integrity` of every package is the lock. The executables are the package's
//! `package.json` `bin` entries; each runs as `node` (the system's, under `/usr`, which the
//! `mcp-node` profile grants) on the entry's file under `/tool`, where the sandbox shows the
//! folder.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde::Deserialize;

use super::files::{Installed, Locked};
use super::installer::{output, step};
use super::package::Package;

/// Where the system's Node.js may be: both under `/usr`, which the profile grants.
const NODES: &[&str] = &["/usr/bin/node", "/usr/local/bin/node"];
const GUEST_DIR: &str = "/tool";
pub const PROFILE: &str = "mcp-node";

/// What of an installed package's `package.json` is read.
#[derive(Deserialize)]
struct PackageJson {
    version: String,
    bin: Option<Bin>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Bin {
    /// One executable, named like the package (without its scope).
    One(String),
    Many(BTreeMap<String, String>),
}

#[derive(Deserialize)]
struct PackageLock {
    #[serde(default)]
    packages: BTreeMap<String, LockEntry>,
}

#[derive(Deserialize)]
struct LockEntry {
    version: Option<String>,
    resolved: Option<String>,
    integrity: Option<String>,
}

/// Installs `package` into `dir`.
pub fn install(dir: &Path, package: &Package) -> Result<Installed, String> {
    let node = NODES
        .iter()
        .find(|path| Path::new(path).is_file())
        .ok_or("Node.js is not installed under /usr, where the mcp-node profile runs it (Debian: apt-get install nodejs npm)")?;
    let project = serde_json::json!({
        "name": "airlock-mcp-server",
        "private": true,
        "description": format!("npm's {}, hosted in airlock's sandbox (airlock mcp add)", package.name),
    });
    let path = dir.join("package.json");
    std::fs::write(&path, format!("{project:#}\n"))
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    let spec = match &package.version {
        Some(version) => format!("{}@{version}", package.name),
        None => package.name.clone(),
    };
    step(
        Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--save-exact",
                // A package's install scripts would run here, outside any sandbox.
                "--ignore-scripts",
                "--loglevel=error",
                "--",
            ])
            .arg(&spec)
            .current_dir(dir),
        &format!("npm install {spec} (install scripts off: they would run outside the sandbox)"),
    )?;
    let installed_dir = dir.join("node_modules").join(&package.name);
    let manifest: PackageJson = read_json(&installed_dir.join("package.json"))?;
    let lock: PackageLock = read_json(&dir.join("package-lock.json"))?;
    let packages = lock
        .packages
        .iter()
        .filter_map(|(path, entry)| {
            let name = path.rsplit_once("node_modules/")?.1;
            Some(Locked {
                name: name.to_owned(),
                version: entry.version.clone().unwrap_or_default(),
                source: entry.resolved.clone(),
                hash: entry.integrity.clone(),
            })
        })
        .collect();
    let executables = executables(&package.name, manifest.bin, node, &installed_dir);
    let npm = output(Command::new("npm").arg("--version"))?;
    let node_version = output(Command::new(node).arg("--version"))?;
    Ok(Installed {
        version: manifest.version,
        installer: format!("npm {npm} (Node.js {node_version})"),
        packages,
        executables,
        profile: PROFILE,
    })
}

/// Each `bin` entry whose file was installed, as the command that runs it in the sandbox.
fn executables(
    package: &str,
    bin: Option<Bin>,
    node: &str,
    installed_dir: &Path,
) -> BTreeMap<String, Vec<String>> {
    let entries = match bin {
        None => BTreeMap::new(),
        Some(Bin::One(file)) => {
            let name = package.rsplit('/').next().unwrap_or(package).to_owned();
            BTreeMap::from([(name, file)])
        }
        Some(Bin::Many(entries)) => entries,
    };
    entries
        .into_iter()
        .filter_map(|(name, file)| {
            let file = file.trim_start_matches("./");
            // A `bin` path is relative to the package and stays inside it.
            let inside = !file.is_empty()
                && !file.starts_with('/')
                && !Path::new(file).components().any(|c| c.as_os_str() == "..");
            (inside && installed_dir.join(file).is_file()).then(|| {
                let guest = format!("{GUEST_DIR}/node_modules/{package}/{file}");
                (name, vec![node.to_owned(), guest])
            })
        })
        .collect()
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    serde_json::from_str(&text).map_err(|err| format!("cannot read {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bin_runs_under_node_from_the_tool_folder_and_never_leaves_its_package()
    -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("dist"))?;
        std::fs::write(dir.path().join("dist/index.js"), "")?;
        let one = executables(
            "@scope/server-x",
            Some(Bin::One("./dist/index.js".into())),
            "/usr/bin/node",
            dir.path(),
        );
        assert_eq!(
            one["server-x"],
            [
                "/usr/bin/node",
                "/tool/node_modules/@scope/server-x/dist/index.js"
            ]
        );
        let many = executables(
            "pkg",
            Some(Bin::Many(BTreeMap::from([
                ("ok".to_owned(), "dist/index.js".to_owned()),
                ("escape".to_owned(), "../../etc/passwd".to_owned()),
                ("absent".to_owned(), "dist/none.js".to_owned()),
            ]))),
            "/usr/bin/node",
            dir.path(),
        );
        assert_eq!(many.keys().collect::<Vec<_>>(), ["ok"]);
        Ok(())
    }
}
