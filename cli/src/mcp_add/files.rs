//! What `airlock mcp add` leaves in a server's folder besides the installed packages: the
//! lock file (`airlock-lock.json`: every package installed, at its exact version, with the
//! hash of the archive it came from) and the manifest (`tool.toml`), whose command runs the
//! package's executable — the one the package declares, or the one `--command` picks — and,
//! once the server's tools were listed in its sandbox, pins each listed tool to what was
//! printed, with every other tool waiting for an operator's review.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::package::Package;

pub const LOCK_FILE: &str = "airlock-lock.json";
pub const MANIFEST_FILE: &str = "tool.toml";

/// The longest a call to one of the server's tools may take, as the manifest says.
const TIMEOUT_MS: u64 = 30_000;

/// What an installer left in the folder.
pub struct Installed {
    /// The version of the package installed.
    pub version: String,
    /// What installed it, with its version (`pip 23.0.1 (Python 3.11.2)`).
    pub installer: String,
    /// Every package installed, the server's own included.
    pub packages: Vec<Locked>,
    /// Each executable the package declares, by name: the command that runs it in the
    /// sandbox (the folder is `/tool` there).
    pub executables: BTreeMap<String, Vec<String>>,
    /// The shipped profile that runs it.
    pub profile: &'static str,
}

/// `airlock-lock.json`.
#[derive(Debug, Serialize)]
pub struct Lock<'a> {
    pub registry: &'static str,
    pub package: &'a str,
    pub version: &'a str,
    pub installer: &'a str,
    pub packages: &'a [Locked],
}

/// One installed package.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Locked {
    pub name: String,
    pub version: String,
    /// Where its archive was downloaded from.
    pub source: Option<String>,
    /// The archive's digest: `sha256:<hex>` from PyPI, the `integrity` (`sha512-<base64>`)
    /// from npm.
    pub hash: Option<String>,
}

/// Writes the lock file into `dir`.
pub fn write_lock(dir: &Path, package: &Package, installed: &Installed) -> Result<(), String> {
    let lock = Lock {
        registry: package.registry.as_str(),
        package: &package.name,
        version: &installed.version,
        installer: &installed.installer,
        packages: &installed.packages,
    };
    let mut text = serde_json::to_string_pretty(&lock)
        .map_err(|err| format!("cannot write {LOCK_FILE}: {err}"))?;
    text.push('\n');
    let path = dir.join(LOCK_FILE);
    std::fs::write(&path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))
}

/// Picks the executable to run: `requested`, else the only one, else the one named like
/// the package (`package_name` is compared case-blind, `-`, `_` and `.` alike).
pub fn pick_executable<'a>(
    executables: &'a BTreeMap<String, Vec<String>>,
    package_name: &str,
    requested: Option<&str>,
) -> Result<(&'a str, &'a [String]), String> {
    let names = || {
        executables
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(requested) = requested {
        return executables
            .get_key_value(requested)
            .map(|(name, command)| (name.as_str(), command.as_slice()))
            .ok_or_else(|| {
                format!(
                    "the package has no executable `{requested}`; it has: {}",
                    names()
                )
            });
    }
    if executables.len() == 1
        && let Some((name, command)) = executables.iter().next()
    {
        return Ok((name, command));
    }
    if executables.is_empty() {
        return Err(
            "the package declares no executable (console_scripts entry point or package.json `bin`) to run as a server"
                .into(),
        );
    }
    let wanted = canonical(package_name.rsplit('/').next().unwrap_or(package_name));
    executables
        .iter()
        .find(|(name, _)| canonical(name) == wanted)
        .map(|(name, command)| (name.as_str(), command.as_slice()))
        .ok_or_else(|| {
            format!(
                "the package has several executables and none is named like it: {}; pick one with --command",
                names()
            )
        })
}

/// A name as PyPI compares them: lowercase, runs of `-`, `_` and `.` as one `-`.
pub fn canonical(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

#[derive(Serialize)]
struct ManifestFile<'a> {
    name: &'a str,
    version: &'a str,
    description: String,
    risk: &'static str,
    engine: &'static str,
    profile: &'static str,
    timeout_ms: u64,
    mcp: McpTable<'a>,
}

#[derive(Serialize)]
struct McpTable<'a> {
    transport: &'static str,
    command: &'a [String],
    listing_workspace: Option<&'a str>,
    /// `"read-write"` for a server that may change its workspace; unset, it may not.
    workspace: Option<&'static str>,
    /// `"explicit"`: a tool not pinned waits for a review.
    trust: Option<&'static str>,
    /// Each listed tool's pin (the last field: TOML writes tables after values).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    tools: BTreeMap<&'a str, Pin<'a>>,
}

/// `[mcp.tools.NAME]`: the digest of the tool's listing that is trusted.
#[derive(Serialize)]
struct Pin<'a> {
    sha256: &'a str,
}

/// What the manifest says beyond what was installed.
pub struct ManifestChoices<'a> {
    pub name: &'a str,
    pub command: &'a [String],
    pub listing_workspace: Option<&'a str>,
    /// Whether the server may change its workspace (`--writes`).
    pub writes: bool,
    /// The command line that wrote it, for the header.
    pub written_by: &'a str,
    /// The listing printed at install (each tool's name on the server → its digest): served
    /// as printed, and nothing else without a review. None before the listing.
    pub pins: Option<&'a BTreeMap<String, String>>,
}

/// Writes `tool.toml` into `dir`.
pub fn write_manifest(
    dir: &Path,
    package: &Package,
    installed: &Installed,
    choices: &ManifestChoices<'_>,
) -> Result<(), String> {
    let title = package.registry.title();
    let file = ManifestFile {
        name: choices.name,
        version: &installed.version,
        description: format!(
            "{title}'s {} {}, hosted in airlock's sandbox.",
            package.name, installed.version
        ),
        // A server that may write its workspace may do so from any tool: each asks, unless
        // the operator lowers one (`[mcp.tools.NAME] risk = "read_only"`) — fail closed
        // rather than trust the server's own annotations to say which tools write.
        risk: if choices.writes { "write" } else { "read_only" },
        engine: "mcp",
        profile: installed.profile,
        timeout_ms: TIMEOUT_MS,
        mcp: McpTable {
            transport: "stdio",
            command: choices.command,
            listing_workspace: choices.listing_workspace,
            workspace: choices.writes.then_some("read-write"),
            // Explicit from the start: a server whose listing failed, fixed by hand later,
            // is not trusted on first use either.
            trust: Some("explicit"),
            tools: choices
                .pins
                .into_iter()
                .flatten()
                .map(|(tool, digest)| (tool.as_str(), Pin { sha256: digest }))
                .collect(),
        },
    };
    let body =
        toml::to_string(&file).map_err(|err| format!("cannot write {MANIFEST_FILE}: {err}"))?;
    let text = format!(
        "# Written by `{}`:\n\
         # {title}'s {} {} installed in this folder, with every package installed, its\n\
         # version and its archive's hash, in {LOCK_FILE}.\n\
         # `risk` is the default of its tools (a tool's annotations can raise it, never lower\n\
         # it; `--writes` makes it \"write\": lower a tool that only reads with\n\
         # `[mcp.tools.NAME] risk = \"read_only\"`); `[mcp] workspace = \"read-write\"`\n\
         # (`--writes`), `allow`/`deny` lists and per-tool settings are README.md's\n\
         # \"MCP, both ways\".\n{pinned}{body}",
        choices.written_by,
        package.name,
        installed.version,
        pinned = if choices.pins.is_some() {
            "# Each tool is pinned (`[mcp.tools.NAME] sha256`) to the listing printed when it was\n\
             # installed: a daemon serves those as printed, and a tool listed otherwise or anew\n\
             # only once an operator has reviewed it (`airlock tools trust NAME --show`; mind\n\
             # that a pin outranks trust: a reviewed change of a pinned tool needs its pin updated).\n"
        } else {
            ""
        },
    );
    let path = dir.join(MANIFEST_FILE);
    std::fs::write(&path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executables(names: &[&str]) -> BTreeMap<String, Vec<String>> {
        names
            .iter()
            .map(|name| ((*name).to_owned(), vec![format!("/tool/bin/{name}")]))
            .collect()
    }

    #[test]
    fn picks_the_only_executable_or_the_one_named_like_the_package() {
        let one = executables(&["mcp-server-time"]);
        assert_eq!(
            pick_executable(&one, "whatever", None).map(|p| p.0),
            Ok("mcp-server-time")
        );
        let several = executables(&["helper", "mcp-server-git"]);
        assert_eq!(
            pick_executable(&several, "mcp_server_git", None).map(|p| p.0),
            Ok("mcp-server-git")
        );
        assert_eq!(
            pick_executable(&several, "x", Some("helper")).map(|p| p.1.to_vec()),
            Ok(vec!["/tool/bin/helper".to_owned()])
        );
        let scoped = executables(&["server-memory", "other"]);
        assert_eq!(
            pick_executable(&scoped, "@modelcontextprotocol/server-memory", None).map(|p| p.0),
            Ok("server-memory")
        );
        for (found, requested, expected) in [
            (executables(&["a", "b"]), None, "pick one with --command"),
            (executables(&[]), None, "declares no executable"),
            (
                executables(&["a"]),
                Some("c"),
                "no executable `c`; it has: a",
            ),
        ] {
            let err = pick_executable(&found, "pkg", requested).expect_err("refused");
            assert!(err.contains(expected), "{err}");
        }
    }

    #[test]
    fn the_manifest_is_toml_the_daemon_reads() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let package = super::super::package::Package::parse("pypi:mcp-server-time@1.0")
            .map_err(anyhow::Error::msg)?;
        let installed = Installed {
            version: "1.0".into(),
            installer: "pip".into(),
            packages: Vec::new(),
            executables: BTreeMap::new(),
            profile: "mcp-python",
        };
        let command = vec![
            "/tool/venv/bin/python".to_owned(),
            "a \"quoted\" arg".to_owned(),
        ];
        write_manifest(
            dir.path(),
            &package,
            &installed,
            &ManifestChoices {
                name: "time",
                command: &command,
                listing_workspace: Some("git"),
                writes: true,
                written_by: "airlock mcp add pypi:mcp-server-time@1.0",
                pins: None,
            },
        )
        .map_err(anyhow::Error::msg)?;
        let text = std::fs::read_to_string(dir.path().join(MANIFEST_FILE))?;
        let value: toml::Table = toml::from_str(&text)?;
        assert_eq!(value["name"].as_str(), Some("time"));
        assert_eq!(value["engine"].as_str(), Some("mcp"));
        assert_eq!(value["profile"].as_str(), Some("mcp-python"));
        let mcp = value["mcp"].as_table().expect("[mcp]");
        assert_eq!(mcp["listing_workspace"].as_str(), Some("git"));
        assert_eq!(mcp["workspace"].as_str(), Some("read-write"));
        // A server that may write: every tool asks until the manifest lowers one.
        assert_eq!(value["risk"].as_str(), Some("write"));
        assert_eq!(mcp["command"][1].as_str(), Some("a \"quoted\" arg"));
        // Nothing pinned yet, and nothing trusted on first use either.
        assert_eq!(mcp["trust"].as_str(), Some("explicit"));
        assert!(mcp.get("tools").is_none());

        // Once listed, each tool is pinned as printed, and any other waits for a review.
        let pins: BTreeMap<String, String> = [
            ("get_current_time".to_owned(), "a".repeat(64)),
            ("convert \"time\"".to_owned(), "b".repeat(64)),
        ]
        .into_iter()
        .collect();
        write_manifest(
            dir.path(),
            &package,
            &installed,
            &ManifestChoices {
                name: "time",
                command: &command,
                listing_workspace: None,
                writes: false,
                written_by: "airlock mcp add pypi:mcp-server-time@1.0",
                pins: Some(&pins),
            },
        )
        .map_err(anyhow::Error::msg)?;
        let text = std::fs::read_to_string(dir.path().join(MANIFEST_FILE))?;
        let value: toml::Table = toml::from_str(&text)?;
        let mcp = value["mcp"].as_table().expect("[mcp]");
        assert_eq!(mcp["trust"].as_str(), Some("explicit"));
        for (tool, digest) in &pins {
            assert_eq!(
                mcp["tools"][tool.as_str()]["sha256"].as_str(),
                Some(digest.as_str()),
                "{text}"
            );
        }
        assert!(
            text.contains("pinned (`[mcp.tools.NAME] sha256`)"),
            "{text}"
        );
        Ok(())
    }
}
