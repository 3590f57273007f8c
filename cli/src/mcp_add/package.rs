//! What `airlock mcp add` is asked to install: `pypi:NAME[@VERSION]` or `npm:NAME[@VERSION]`,
//! checked so that neither part can become a flag of pip or npm, and the server name a
//! manifest gets from it when `--name` gives none.

use std::fmt;

/// The longest server name derived from a package: its tools are served as
/// `<server>__<tool>`, and a manifest name is at most 64 bytes.
const MAX_DERIVED_NAME: usize = 32;

/// Words that say "MCP server" in a package's name, dropped from the server name derived
/// from it (`mcp-server-time` is `time`), as prefixes and as suffixes.
const PREFIXES: &[&str] = &["mcp-server-", "server-", "mcp-"];
const SUFFIXES: &[&str] = &["-mcp-server", "-server", "-mcp"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    Pypi,
    Npm,
}

impl Registry {
    pub fn as_str(self) -> &'static str {
        match self {
            Registry::Pypi => "pypi",
            Registry::Npm => "npm",
        }
    }

    /// The registry's name as people write it.
    pub fn title(self) -> &'static str {
        match self {
            Registry::Pypi => "PyPI",
            Registry::Npm => "npm",
        }
    }
}

/// A package of a registry, at a version or the latest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub registry: Registry,
    pub name: String,
    pub version: Option<String>,
}

impl fmt::Display for Package {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.registry.as_str(), self.name)?;
        if let Some(version) = &self.version {
            write!(f, "@{version}")?;
        }
        Ok(())
    }
}

impl Package {
    /// Parses `pypi:NAME[@VERSION]` or `npm:NAME[@VERSION]` (an npm name may be scoped:
    /// `npm:@scope/name@1.0.0`).
    pub fn parse(spec: &str) -> Result<Package, String> {
        let usage = "write the package as pypi:NAME[@VERSION] or npm:NAME[@VERSION]";
        let (registry, rest) = match spec.split_once(':') {
            Some(("pypi", rest)) => (Registry::Pypi, rest),
            Some(("npm", rest)) => (Registry::Npm, rest),
            Some((other, _)) => {
                return Err(format!(
                    "`{other}` is not a registry airlock installs from: {usage}"
                ));
            }
            None => return Err(format!("`{spec}` names no registry: {usage}")),
        };
        // The version follows the last `@`, except the one that starts a scoped npm name.
        let (name, version) = match rest.rfind('@') {
            Some(at) if at > 0 => (&rest[..at], Some(&rest[at + 1..])),
            _ => (rest, None),
        };
        check_name(registry, name).map_err(|why| format!("`{spec}`: {why}"))?;
        if let Some(version) = version {
            check_version(version).map_err(|why| format!("`{spec}`: {why}"))?;
        }
        Ok(Package {
            registry,
            name: name.to_owned(),
            version: version.map(str::to_owned),
        })
    }

    /// The server name for the manifest: the package's name without its scope and without
    /// the words that say "MCP server", in `[a-z0-9_]`, starting with a letter.
    pub fn server_name(&self) -> String {
        let base = self.name.rsplit('/').next().unwrap_or(&self.name);
        let lower = base.to_ascii_lowercase().replace(['_', '.'], "-");
        let mut short = lower.as_str();
        if let Some(rest) = PREFIXES.iter().find_map(|p| short.strip_prefix(p)) {
            short = rest;
        }
        if let Some(rest) = SUFFIXES.iter().find_map(|s| short.strip_suffix(s)) {
            short = rest;
        }
        if short.is_empty() {
            short = &lower;
        }
        let mut name = String::new();
        for c in short.chars() {
            let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            };
            if !(c == '_' && (name.is_empty() || name.ends_with('_'))) {
                name.push(c);
            }
        }
        name.truncate(MAX_DERIVED_NAME);
        let name = name.trim_end_matches('_');
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            name.to_owned()
        } else {
            format!("mcp_{name}").trim_end_matches('_').to_owned()
        }
    }
}

/// A package name of `registry`: the characters its registry allows, never a flag.
fn check_name(registry: Registry, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the package name is empty".into());
    }
    let allowed = |c: char| match registry {
        // PEP 508: letters, digits, `-`, `_`, `.`.
        Registry::Pypi => c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'),
        // npm: URL-safe characters, and `@scope/` in front.
        Registry::Npm => {
            c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '@' | '/')
        }
    };
    if let Some(bad) = name.chars().find(|c| !allowed(*c)) {
        return Err(format!(
            "`{bad}` cannot be in a {} package name",
            registry.title()
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '@') {
        return Err("a package name starts with a letter or a digit".into());
    }
    if registry == Registry::Npm {
        let scoped = name.starts_with('@');
        let parts: Vec<&str> = name.trim_start_matches('@').split('/').collect();
        let well_formed = if scoped {
            parts.len() == 2 && parts.iter().all(|part| !part.is_empty())
        } else {
            parts.len() == 1
        };
        if !well_formed || name[1..].contains('@') {
            return Err("an npm package is `name` or `@scope/name`".into());
        }
    }
    Ok(())
}

/// An exact version (or an npm dist-tag): letters, digits and `.+-_!`, never a flag.
fn check_version(version: &str) -> Result<(), String> {
    let valid = version.starts_with(|c: char| c.is_ascii_alphanumeric())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '_' | '!'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{version}` is not an exact version (a range is not: the lock records one version)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_registries_with_and_without_a_version() -> Result<(), String> {
        let time = Package::parse("pypi:mcp-server-time@2026.10.19")?;
        assert_eq!(time.registry, Registry::Pypi);
        assert_eq!(time.name, "mcp-server-time");
        assert_eq!(time.version.as_deref(), Some("2026.10.19"));
        let scoped = Package::parse("npm:@modelcontextprotocol/server-memory")?;
        assert_eq!(scoped.name, "@modelcontextprotocol/server-memory");
        assert_eq!(scoped.version, None);
        let pinned = Package::parse("npm:@modelcontextprotocol/server-memory@2026.8.31")?;
        assert_eq!(pinned.version.as_deref(), Some("2026.8.31"));
        assert_eq!(
            pinned.to_string(),
            "npm:@modelcontextprotocol/server-memory@2026.8.31"
        );
        Ok(())
    }

    #[test]
    fn refuses_what_could_become_a_flag_or_a_range() {
        for (spec, expected) in [
            ("mcp-server-time", "names no registry"),
            ("cargo:ripgrep", "not a registry"),
            ("pypi:--index-url=http://evil", "`=` cannot be"),
            ("pypi:-e", "starts with a letter"),
            ("pypi:", "empty"),
            ("npm:@scope", "`name` or `@scope/name`"),
            ("npm:a/b", "`name` or `@scope/name`"),
            ("pypi:x@>=1.0", "not an exact version"),
            ("npm:x@--save", "not an exact version"),
            ("pypi:x y", "` ` cannot be"),
        ] {
            let err = Package::parse(spec).expect_err(spec);
            assert!(err.contains(expected), "{spec}: {err}");
        }
    }

    #[test]
    fn derives_a_short_manifest_name() -> Result<(), String> {
        for (spec, name) in [
            ("pypi:mcp-server-time", "time"),
            ("pypi:mcp_server_git", "git"),
            (
                "npm:@modelcontextprotocol/server-sequential-thinking",
                "sequential_thinking",
            ),
            ("npm:github-mcp-server", "github"),
            ("npm:mcp-server", "server"),
            ("pypi:Weather.Tools", "weather_tools"),
            ("npm:@x/123-api", "mcp_123_api"),
        ] {
            assert_eq!(Package::parse(spec)?.server_name(), name, "{spec}");
        }
        Ok(())
    }
}
