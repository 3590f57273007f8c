//! Third-party MCP servers that write their workspace, hosted while a person works in the
//! same one: PyPI's `mcp-server-git` commits beside a person who commits too, npm's
//! `@modelcontextprotocol/server-memory` keeps its graph in a file a person appends to.
//!
//! What each test holds: every call is shown the workspace as it is when the call starts
//! (the server reads the person's commits and lines), each call's change set is what that
//! call wrote, and nothing a person did is undone. The servers run as the sandbox's user,
//! which has a name (`airlock`, from the sandbox's own `/etc/passwd`): GitPython asks for it
//! when it commits. Both come from `tests/mcp/install.sh`.

use std::path::Path;
use std::process::Command;

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, Execution, ProfilesDir, TestDaemon, ToolsDir, mcp};
use pb::ToolStatus;
use serde_json::json;

/// A profile for a writing server: the system and `extra` read-only, the workspace
/// read-write, `env` set.
fn profile(extra: &Path, env: &[(&str, String)]) -> String {
    let mut set = vec![
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("HOME".to_owned(), "/tmp".to_owned()),
    ];
    set.extend(
        env.iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone())),
    );
    let set: Vec<String> = set
        .iter()
        .map(|(name, value)| format!("{name} = {value:?}"))
        .collect();
    format!(
        r#"description = "a writing MCP server"
network = "none"
[files]
read_only = ["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", {extra:?}]
read_write = ["$WORKSPACE"]
[env]
set = {{ {set} }}
[limits]
memory = "512 MiB"
wall_time_ms = 30000
output = "4 MiB"
processes = 64
open_files = 256
file_size = "16 MiB"
tmp = "16 MiB"
"#,
        extra = extra.display().to_string(),
        set = set.join(", ")
    )
}

/// A daemon hosting `manifest` (named `name`) under `profile`.
async fn hosting(name: &str, manifest: &str, profile: &str) -> (TestDaemon, ToolsDir, ProfilesDir) {
    let tools = ToolsDir::new();
    tools.write_manifest(name, manifest);
    let profiles = ProfilesDir::new();
    profiles.add("writer", profile);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    (daemon, tools, profiles)
}

fn text(execution: &Execution) -> String {
    let result = execution.result();
    format!("{}{}", result.content, result.error_message)
}

/// The paths a call's change set holds.
fn changed(execution: &Execution) -> Vec<String> {
    execution
        .result()
        .changes
        .as_ref()
        .map(|set| {
            set.changes
                .iter()
                .map(|change| change.path.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// `git` on the host, as the person, in `repo`; its standard output.
pub(crate) fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Person",
            "-c",
            "user.email=person@example.com",
        ])
        .args(args)
        .current_dir(repo)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_server_commits_beside_a_person_and_never_moves_their_head() {
    let site = mcp::python_site_packages();
    let manifest = r#"name = "repo"
version = "2026.10.19"
description = "PyPI's mcp-server-git"
risk = "read_only"
engine = "mcp"
profile = "writer"
timeout_ms = 30000
[mcp]
transport = "stdio"
# No `--repository`: the daemon lists a server's tools in an empty workspace, which the
# server would refuse as no repository. The sandbox is what confines it to /workspace.
command = ["/usr/bin/python3", "-m", "mcp_server_git"]
workspace = "read-write"
"#;
    let (daemon, _tools, _profiles) = hosting(
        "repo",
        manifest,
        &profile(&site, &[("PYTHONPATH", site.display().to_string())]),
    )
    .await;
    // A root-owned repository: the person is root on the host, the server `nobody` through
    // the idmapped workspace, and each sees the repository as its own.
    let ws = daemon.workspace("project");
    git(&ws, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(ws.join("README"), "hello\n").unwrap();
    git(&ws, &["add", "README"]);
    git(&ws, &["commit", "--quiet", "-m", "initial"]);
    let call = |tool: &str, arguments: serde_json::Value| {
        let daemon = &daemon;
        let ws = ws.clone();
        let tool = format!("repo__{tool}");
        async move { daemon.exec(&tool, arguments, Some(&ws)).await }
    };

    // The server stages and commits a file the person made: it has a name to commit as.
    std::fs::write(ws.join("server.txt"), "by the server\n").unwrap();
    call(
        "git_add",
        json!({"repo_path": "/workspace", "files": ["server.txt"]}),
    )
    .await
    .assert_status(ToolStatus::Ok);
    let commit = call(
        "git_commit",
        json!({"repo_path": "/workspace", "message": "server 1"}),
    )
    .await;
    commit.assert_status(ToolStatus::Ok);
    assert!(
        text(&commit).contains("committed successfully"),
        "{commit:?}"
    );
    assert!(
        changed(&commit)
            .iter()
            .any(|path| path == ".git/refs/heads/main"),
        "{:?}",
        changed(&commit)
    );
    assert_eq!(
        git(&ws, &["log", "--format=%s <%an>", "-1"]),
        "server 1 <airlock>\n",
        "the sandbox's user, named"
    );

    // The person commits on the host, leaving the index, HEAD and COMMIT_EDITMSG as git does.
    std::fs::write(ws.join("person.txt"), "by the person\n").unwrap();
    git(&ws, &["add", "person.txt"]);
    git(&ws, &["commit", "--quiet", "-m", "person 1"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);
    let index = std::fs::read(ws.join(".git/index")).unwrap();

    // The server's next, read-only call sees the person's commit and changes nothing.
    let log = call(
        "git_log",
        json!({"repo_path": "/workspace", "max_count": 5}),
    )
    .await;
    log.assert_status(ToolStatus::Ok);
    let logged = text(&log);
    let (person, server) = (
        logged
            .find("person 1")
            .expect("the person's commit is seen"),
        logged.find("server 1").expect("its own commit"),
    );
    assert!(person < server, "newest first: {logged}");
    assert_eq!(changed(&log), Vec::<String>::new(), "{log:?}");
    assert_eq!(
        git(&ws, &["rev-parse", "HEAD"]),
        head,
        "HEAD stays the person's"
    );
    assert_eq!(std::fs::read(ws.join(".git/index")).unwrap(), index);
    assert!(ws.join(".git/COMMIT_EDITMSG").exists());
    // `git status` sees the person's index (it may refresh its stat data: the server sees
    // root's files as its own, so that is a write of the index and no more).
    let status = call("git_status", json!({"repo_path": "/workspace"})).await;
    status.assert_status(ToolStatus::Ok);
    assert!(text(&status).contains("nothing to commit"), "{status:?}");
    assert!(
        changed(&status).iter().all(|path| path == ".git/index"),
        "{:?}",
        changed(&status)
    );
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), head);

    // Its next commit builds on the person's: one line of history, nobody's work undone.
    std::fs::write(ws.join("server2.txt"), "again\n").unwrap();
    call(
        "git_add",
        json!({"repo_path": "/workspace", "files": ["server2.txt"]}),
    )
    .await
    .assert_status(ToolStatus::Ok);
    call(
        "git_commit",
        json!({"repo_path": "/workspace", "message": "server 2"}),
    )
    .await
    .assert_status(ToolStatus::Ok);
    assert_eq!(
        git(&ws, &["log", "--format=%s", "main"]),
        "server 2\nperson 1\nserver 1\ninitial\n"
    );
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
    git(&ws, &["fsck", "--no-progress"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_server_reads_a_persons_lines_and_keeps_them() {
    let node_modules = mcp::dir().join("node_modules");
    let server = mcp::npm_server("@modelcontextprotocol/server-memory", "dist/index.js");
    let manifest = format!(
        r#"name = "memory"
version = "2026.8.31"
description = "npm's @modelcontextprotocol/server-memory"
risk = "read_only"
engine = "mcp"
profile = "writer"
timeout_ms = 30000
[mcp]
transport = "stdio"
command = ["/usr/bin/node", {:?}]
workspace = "read-write"
"#,
        server.display().to_string()
    );
    let (daemon, _tools, _profiles) = hosting(
        "memory",
        &manifest,
        &profile(
            &node_modules,
            &[("MEMORY_FILE_PATH", "/workspace/memory.jsonl".to_owned())],
        ),
    )
    .await;
    let ws = daemon.workspace("notes");
    let call = |tool: &str, arguments: serde_json::Value| {
        let daemon = &daemon;
        let ws = ws.clone();
        let tool = format!("memory__{tool}");
        async move { daemon.exec(&tool, arguments, Some(&ws)).await }
    };
    let file = ws.join("memory.jsonl");

    let created = call(
        "create_entities",
        json!({"entities": [{"name": "airlock", "entityType": "project", "observations": ["a sandbox"]}]}),
    )
    .await;
    created.assert_status(ToolStatus::Ok);
    assert_eq!(changed(&created), ["memory.jsonl"]);
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("a sandbox")
    );

    // The person appends an entity of their own on the host.
    let mut lines = std::fs::read_to_string(&file).unwrap();
    if !lines.ends_with('\n') {
        lines.push('\n');
    }
    lines.push_str(
        r#"{"type":"entity","name":"person","entityType":"human","observations":["wrote this line"]}"#,
    );
    lines.push('\n');
    std::fs::write(&file, &lines).unwrap();

    // The server reads it, and its next write keeps it.
    let graph = call("read_graph", json!({})).await;
    graph.assert_status(ToolStatus::Ok);
    assert!(text(&graph).contains("wrote this line"), "{graph:?}");
    assert_eq!(changed(&graph), Vec::<String>::new());
    let added = call(
        "add_observations",
        json!({"observations": [{"entityName": "airlock", "contents": ["hosts MCP servers"]}]}),
    )
    .await;
    added.assert_status(ToolStatus::Ok);
    let kept = std::fs::read_to_string(&file).unwrap();
    assert!(
        kept.contains("wrote this line") && kept.contains("hosts MCP servers"),
        "{kept}"
    );
}
