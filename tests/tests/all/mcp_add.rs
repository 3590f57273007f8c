//! `airlock mcp add`: MCP servers from PyPI and npm hosted in one command each. The real
//! `airlock` binary installs servers the rest of the suite does not use — PyPI's
//! `mcp-server-time`, npm's `@modelcontextprotocol/server-sequential-thinking` — and PyPI's
//! git server with `--repository /workspace`, which lists its tools only in a repository
//! (`listing_workspace = "git"`), each at the version `tests/mcp/mcp-add.txt` pins, through
//! pip's and npm's caches in `tests/mcp/.cache` (which `tests/mcp/install.sh` fills). Each
//! is listed in its sandbox by the daemon's loader as it installs; then a daemon serves the
//! tools directory and one tool of each is called.

use std::path::Path;

use airlock_proto::v1 as pb;
use airlock_tests::cli::{Cli, CliRun};
use airlock_tests::{DaemonOptions, TestDaemon, ToolsDir, cargo_bin, mcp, repo_root};
use serde_json::json;

use crate::mcp_writers::git;

/// No daemon answers here: the install stands without one.
const NO_DAEMON: &str = "http://127.0.0.1:1";

/// The line of `tests/mcp/mcp-add.txt` that starts with `spec_start`: a pinned package.
pub(super) fn pinned(spec_start: &str) -> String {
    let list = mcp::dir().join("mcp-add.txt");
    let text = std::fs::read_to_string(&list).unwrap();
    text.lines()
        .find(|line| line.starts_with(spec_start))
        .unwrap_or_else(|| panic!("{} pins no {spec_start}", list.display()))
        .to_owned()
}

/// `airlock mcp add SPEC --tools-dir TOOLS EXTRA…`, through the suite's package caches.
pub(super) async fn add(tools: &Path, spec: &str, extra: &[&str]) -> CliRun {
    let cache = mcp::dir().join(".cache");
    let profiles = repo_root().join("sandbox-profiles");
    let mut args = vec![
        "mcp",
        "add",
        spec,
        "--tools-dir",
        tools.to_str().unwrap(),
        "--profiles-dir",
        profiles.to_str().unwrap(),
    ];
    args.extend(extra);
    let run = Cli::new(NO_DAEMON, &args)
        .env("AIRLOCKD", cargo_bin("airlockd").to_str().unwrap())
        .env("PIP_CACHE_DIR", cache.join("pip").to_str().unwrap())
        .env("npm_config_cache", cache.join("npm").to_str().unwrap())
        .run()
        .await;
    assert_eq!(run.code, 0, "{spec}: {run:#?}");
    run
}

fn lock(folder: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(folder.join("airlock-lock.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The lock's entry for package `name`.
fn locked<'a>(lock: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    lock["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|package| package["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {lock:#}"))
}

/// The pins a listing printed: each `  <server>__<tool> (<risk>, listing sha256 <hex>)` line,
/// as the tool's name on the server → its digest.
fn printed_pins(stdout: &str, server: &str) -> Vec<(String, String)> {
    let prefix = format!("  {server}__");
    stdout
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(&prefix)?;
            let (tool, rest) = rest.split_once(' ')?;
            let digest = rest.split("listing sha256 ").nth(1)?.get(..64)?;
            Some((tool.to_owned(), digest.to_owned()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_from_pypi_and_npm_are_hosted_in_one_command_each() {
    let tools = ToolsDir::new();
    let time_spec = pinned("pypi:mcp-server-time@");
    let thinking_spec = pinned("npm:@modelcontextprotocol/server-sequential-thinking@");
    let git_spec = pinned("pypi:mcp-server-git@");

    // PyPI: a venv of the system's Python in the folder, the lock from pip's report.
    let time = add(tools.path(), &time_spec, &[]).await;
    assert!(time.stdout.contains("time__get_current_time"), "{time:#?}");
    assert!(time.stderr.contains("no daemon to ask"), "{time:#?}");
    let folder = tools.path().join("time");
    let time_lock = lock(&folder);
    let version = time_spec.rsplit('@').next().unwrap();
    assert_eq!(time_lock["registry"], "pypi");
    assert_eq!(time_lock["version"], version);
    assert_eq!(locked(&time_lock, "mcp-server-time")["version"], version);
    // Every package, its dependencies included, is locked with its archive's sha256.
    for package in time_lock["packages"].as_array().unwrap() {
        let hash = package["hash"].as_str().unwrap_or_default();
        assert!(hash.starts_with("sha256:") && hash.len() == 71, "{package}");
    }
    assert!(locked(&time_lock, "mcp")["version"].is_string());
    let manifest = std::fs::read_to_string(folder.join("tool.toml")).unwrap();
    assert!(manifest.contains("profile = \"mcp-python\""), "{manifest}");
    assert!(
        manifest
            .contains(r#"command = ["/tool/venv/bin/python", "/tool/venv/bin/mcp-server-time"]"#),
        "{manifest}"
    );
    // Each tool is pinned to the digest the listing printed; any other waits for a review.
    let pins = printed_pins(&time.stdout, "time");
    assert!(!pins.is_empty(), "{time:#?}");
    assert!(manifest.contains("trust = \"explicit\""), "{manifest}");
    for (tool, digest) in &pins {
        assert!(
            manifest.contains(&format!("[mcp.tools.{tool}]\nsha256 = \"{digest}\"")),
            "{manifest}"
        );
    }
    assert!(time.stderr.contains("pinned the"), "{time:#?}");

    // npm: a node project in the folder, the lock from package-lock.json's integrity.
    let thinking = add(tools.path(), &thinking_spec, &[]).await;
    assert!(
        thinking
            .stdout
            .contains("sequential_thinking__sequentialthinking"),
        "{thinking:#?}"
    );
    let thinking_lock = lock(&tools.path().join("sequential_thinking"));
    assert_eq!(thinking_lock["registry"], "npm");
    assert_eq!(
        thinking_lock["version"],
        thinking_spec.rsplit('@').next().unwrap()
    );
    for package in thinking_lock["packages"].as_array().unwrap() {
        let hash = package["hash"].as_str().unwrap_or_default();
        assert!(hash.starts_with("sha512-"), "{package}");
    }

    // A server that exits outside a repository is listed in an empty one.
    let repo_server = add(
        tools.path(),
        &git_spec,
        &[
            "--arg=--repository",
            "--arg=/workspace",
            "--listing-workspace",
            "git",
        ],
    )
    .await;
    assert!(
        repo_server.stdout.contains("git__git_log"),
        "{repo_server:#?}"
    );

    // A second add of the same name would replace the folder: only with --force.
    let again = Cli::new(
        NO_DAEMON,
        &[
            "mcp",
            "add",
            &time_spec,
            "--tools-dir",
            tools.path().to_str().unwrap(),
        ],
    )
    .run()
    .await;
    assert_eq!(again.code, 64, "{again:#?}");
    assert!(again.stderr.contains("pass --force"), "{again:#?}");

    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let ws = daemon.workspace("project");

    let now = daemon
        .exec(
            "time__get_current_time",
            json!({"timezone": "UTC"}),
            Some(&ws),
        )
        .await;
    now.assert_status(pb::ToolStatus::Ok);
    let now = now.json();
    assert_eq!(now["timezone"], "UTC", "{now}");
    assert!(
        now["datetime"]
            .as_str()
            .is_some_and(|at| at.ends_with("+00:00")),
        "{now}"
    );

    let thought = daemon
        .exec(
            "sequential_thinking__sequentialthinking",
            json!({"thought": "Hosted from npm in one command.", "nextThoughtNeeded": false,
                   "thoughtNumber": 1, "totalThoughts": 1}),
            Some(&ws),
        )
        .await;
    thought.assert_status(pb::ToolStatus::Ok);
    let thought = thought.json();
    assert_eq!(thought["thoughtNumber"], 1, "{thought}");
    assert_eq!(thought["thoughtHistoryLength"], 1, "{thought}");

    // The git server, in a workspace that is a repository, reads it.
    git(&ws, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(ws.join("README"), "hosted\n").unwrap();
    git(&ws, &["add", "README"]);
    git(
        &ws,
        &["commit", "--quiet", "-m", "first commit from the person"],
    );
    let log = daemon
        .exec(
            "git__git_log",
            json!({"repo_path": "/workspace"}),
            Some(&ws),
        )
        .await;
    log.assert_status(pb::ToolStatus::Ok);
    let text = &log.result().content;
    assert!(text.contains("first commit from the person"), "{text}");
}
