//! `airlockd check-tool` on a hosted MCP server's manifest: the server started in its
//! sandbox exactly as a daemon starts it at load, its tools listed, and each printed as the
//! daemon would serve it — what a daemon's trust on first use would trust, and what
//! `airlock mcp add` pins (`--listing-out`).
//!
//! The check trusts nothing: its trust records and listing workspace are in a scratch folder
//! of the state dir, removed when the check ends, so a daemon's own first listing of the
//! server is still the one it trusts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::egress::Resolver;
use crate::engine::mcp::McpEngine;
use crate::engine::process::ProcessEngine;
use crate::tools::Registry;

/// The scratch folder of one check, removed when dropped.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A fresh folder in `state_dir`, named for this process.
    pub fn new(state_dir: &Path) -> Scratch {
        Scratch {
            dir: state_dir.join(format!("check-mcp-{}", std::process::id())),
        }
    }

    /// An MCP engine over `process` that keeps its trust records and listing workspace in
    /// the scratch folder.
    pub fn engine(&self, process: Arc<ProcessEngine>) -> McpEngine {
        McpEngine::new(
            process,
            self.dir.clone(),
            self.dir.join("trust"),
            Arc::new(Resolver::new(Default::default())),
            None,
        )
        .for_review()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The tools of server `name` that `registry` serves, with their names on the server.
fn served<'a>(
    registry: &'a Registry,
    name: &'a str,
) -> impl Iterator<Item = (&'a crate::tools::Tool, &'a str)> {
    registry.tools().filter_map(move |tool| {
        let origin = tool.manifest.origin.as_ref()?;
        (origin.server == name).then_some((tool.as_ref(), origin.tool.as_str()))
    })
}

/// Writes the listing [`report`] printed to `path` as JSON: each tool's name on the server
/// → the digest a manifest pins it by (`[mcp.tools.NAME] sha256`).
pub fn write_listing(registry: &Registry, name: &str, path: &Path) -> std::io::Result<()> {
    let listing: std::collections::BTreeMap<&str, &str> = served(registry, name)
        .map(|(tool, on_server)| (on_server, tool.digest()))
        .collect();
    let text = serde_json::to_string_pretty(&listing).map_err(std::io::Error::other)?;
    std::fs::write(path, text)
}

/// Prints the tools of server `name` that `registry` serves; whether there is at least one
/// (the refusals were printed already).
pub fn report(registry: &Registry, name: &str, out: &mut impl Write) -> std::io::Result<bool> {
    let tools: Vec<_> = served(registry, name).map(|(tool, _)| tool).collect();
    if tools.is_empty() {
        writeln!(out, "✗ MCP server `{name}` serves no tools")?;
        return Ok(false);
    }
    let count = match tools.len() {
        1 => "1 tool".to_owned(),
        n => format!("{n} tools"),
    };
    writeln!(
        out,
        "✓ MCP server `{name}` started in its sandbox and listed {count}; a daemon serves, and \
         on first use trusts, this listing:"
    )?;
    for tool in tools {
        // The server's words: its first line, its control characters shown escaped.
        let description: String = tool
            .manifest
            .description
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .flat_map(|c| {
                let escaped: Vec<char> = if c.is_control() {
                    c.escape_default().collect()
                } else {
                    vec![c]
                };
                escaped
            })
            .collect();
        writeln!(
            out,
            "  {} ({}, listing sha256 {}): {description}",
            tool.name(),
            tool.manifest.risk.as_str(),
            tool.digest()
        )?;
    }
    writeln!(
        out,
        "· call one with `airlock tools exec {name}__<tool>` once a daemon serves the folder"
    )?;
    Ok(true)
}
