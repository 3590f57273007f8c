//! Section 6, a hosted MCP server's tool: the `echo` tool of a server written with the
//! official Python SDK (tests/mcp/servers/echo_server.py), called through `ExecuteTool` with
//! the server hosted in airlock's process sandbox, against the same server called directly
//! by the SDK's own client over stdio (tests/mcp/bench_direct.py), with no sandbox and no
//! daemon. Both call a warm server: the instance is started by the warm-up calls.
//!
//! The peers come from tests/mcp/install.sh; without them the cases are skipped, saying so.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_proto::v1::tools_client::ToolsClient;
use anyhow::Context;

use crate::Bench;
use crate::client;
use crate::daemon::{Airlockd, DaemonSpec};
use crate::report::Report;
use crate::stats::Samples;

const SECTION: &str = "6 hosted MCP server";

/// The profile the server runs under: the system read-only, the SDK's packages, no network.
fn python_profile(site_packages: &Path) -> String {
    format!(
        r#"description = "a Python MCP server"
network = "none"
[files]
read_only = ["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", {site:?}]
[env]
set = {{ LANG = "C.UTF-8", PATH = "/usr/bin:/bin", HOME = "/tmp", PYTHONPATH = {site:?} }}
[limits]
memory = "512 MiB"
wall_time_ms = 30000
output = "1 MiB"
processes = 64
open_files = 256
file_size = "1 MiB"
tmp = "4 MiB"
"#,
        site = site_packages.display().to_string()
    )
}

const MANIFEST: &str = r#"name = "echo"
version = "1.0.0"
description = "the Python SDK's smallest server"
risk = "read_only"
engine = "mcp"
profile = "mcp-python"
idempotent = true
[mcp]
transport = "stdio"
# Section 4 keeps a hundred instances alive while it measures: none may be reaped meanwhile.
idle_timeout_ms = 600000
command = ["/usr/bin/python3", "/tool/echo_server.py"]
"#;

/// Why the cases that host the echo server are skipped on a machine without it.
pub const NOT_INSTALLED: &str = "the MCP Python SDK is not installed (tests/mcp/install.sh)";

/// The SDK's virtualenv, when tests/mcp/install.sh made it.
fn peers(repo: &Path) -> Option<(PathBuf, PathBuf)> {
    let venv = repo.join("tests/mcp/.venv");
    let site = std::fs::read_dir(venv.join("lib"))
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("site-packages"))
        .find(|path| path.join("mcp").is_dir())?;
    Some((venv.join("bin/python"), site))
}

/// The echo server installed as a hosted tool, beside the bench's own tools and profiles.
pub struct EchoServer {
    /// Holds `echo/` (its manifest and program) and nothing else.
    pub tools_dir: PathBuf,
    /// The bench's profiles and `mcp-python`.
    pub profiles_dir: PathBuf,
    /// The SDK's Python, for the direct peer.
    pub python: PathBuf,
}

/// Installs the echo server in fresh directories; `None` when tests/mcp/install.sh has not
/// made the SDK's virtualenv.
pub fn install(bench: &Bench) -> anyhow::Result<Option<EchoServer>> {
    let repo = &bench.fixtures.repo;
    let Some((python, site)) = peers(repo) else {
        return Ok(None);
    };
    let tools_dir = bench.fixtures.fresh_dir("mcp-tools-")?;
    let folder = tools_dir.join("echo");
    std::fs::create_dir_all(&folder)?;
    std::fs::write(folder.join("tool.toml"), MANIFEST)?;
    std::fs::copy(
        repo.join("tests/mcp/servers/echo_server.py"),
        folder.join("echo_server.py"),
    )
    .context("cannot copy the echo server")?;
    let profiles_dir = bench.fixtures.fresh_dir("mcp-profiles-")?;
    for entry in std::fs::read_dir(&bench.fixtures.profiles_dir)? {
        let path = entry?.path();
        if let Some(name) = path.file_name().filter(|_| path.is_file()) {
            std::fs::copy(&path, profiles_dir.join(name))
                .with_context(|| format!("cannot copy {}", path.display()))?;
        }
    }
    std::fs::write(profiles_dir.join("mcp-python.toml"), python_profile(&site))?;
    Ok(Some(EchoServer {
        tools_dir,
        profiles_dir,
        python,
    }))
}

pub async fn run(bench: &Bench, report: &mut Report) -> anyhow::Result<()> {
    let repo = &bench.fixtures.repo;
    let hosted = "hosted: echo through ExecuteTool, the server in airlock's sandbox";
    let direct = "direct: echo by the Python SDK's client over stdio, no sandbox";
    let Some(server) = install(bench)? else {
        report.skipped(SECTION, "mcp-hosted", hosted, NOT_INSTALLED);
        report.skipped(SECTION, "mcp-direct", direct, NOT_INSTALLED);
        return Ok(());
    };
    eprintln!("{SECTION}: echo");
    let daemon = Airlockd::start(&DaemonSpec {
        binary: bench.airlockd.clone(),
        tools_dirs: vec![server.tools_dir],
        profiles_dir: server.profiles_dir,
        workspace_root: bench.fixtures.workspace_root.clone(),
        state_dir: bench.fixtures.fresh_dir("mcp-state-")?,
        module_cache_dir: bench.fixtures.fresh_dir("modules-")?,
        config_tables: String::new(),
    })
    .await?;

    let runs = bench.count(500, 5);
    let warmup = bench.count(20, 2);
    let samples = client::load(&daemon, 1, warmup, runs, move |channel| async move {
        client::execute(
            &mut ToolsClient::new(channel),
            "echo__echo",
            r#"{"text": "ping"}"#,
            None,
            "ping",
        )
        .await
    })
    .await?;
    report.measured(SECTION, "mcp-hosted", hosted, samples);
    daemon.stop().await?;

    let output = tokio::process::Command::new(&server.python)
        .arg(repo.join("tests/mcp/bench_direct.py"))
        .arg(warmup.to_string())
        .arg(runs.to_string())
        .output()
        .await
        .with_context(|| format!("cannot run {}", server.python.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "bench_direct.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    #[derive(serde::Deserialize)]
    struct Direct {
        latencies_ns: Vec<u64>,
    }
    let direct_run: Direct = serde_json::from_slice(&output.stdout)
        .context("bench_direct.py did not print its latencies")?;
    let latencies = direct_run
        .latencies_ns
        .into_iter()
        .map(Duration::from_nanos)
        .collect();
    report.measured(
        SECTION,
        "mcp-direct",
        direct,
        Samples::sequential(latencies),
    );
    report.compare("mcp-hosted", "mcp-direct");
    Ok(())
}
