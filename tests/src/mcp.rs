//! The MCP peers the tests run — the official Python SDK and the reference servers from
//! npm — as `tests/mcp/install.sh` installed them. A missing peer is a panic that says how
//! to install it, never a skipped test.

use std::path::PathBuf;

use crate::repo_root;

/// `tests/mcp`.
pub fn dir() -> PathBuf {
    repo_root().join("tests/mcp")
}

/// The site-packages of the virtualenv holding the Python SDK: what a sandboxed Python
/// server's `PYTHONPATH` names (the interpreter is Debian's, under `/usr`).
pub fn python_site_packages() -> PathBuf {
    let lib = dir().join(".venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|entry| entry.path().join("site-packages"))
            .find(|path| path.join("mcp").is_dir())
    });
    found.unwrap_or_else(|| {
        panic!(
            "the MCP Python SDK is not installed under {}: run tests/mcp/install.sh",
            lib.display()
        )
    })
}

/// The virtualenv's interpreter, for Python clients the tests run on the host.
pub fn python() -> PathBuf {
    let python = dir().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run tests/mcp/install.sh",
        python.display()
    );
    python
}

/// The entry point of an npm package's server, e.g. `@modelcontextprotocol/server-everything`.
pub fn npm_server(package: &str, entry: &str) -> PathBuf {
    let path = dir().join("node_modules").join(package).join(entry);
    assert!(
        path.exists(),
        "{} is missing: run tests/mcp/install.sh",
        path.display()
    );
    path
}
