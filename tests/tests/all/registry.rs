//! The tool registry: what gets served, what gets refused and why, and what `ListTools` says.

use airlock_proto::v1 as pb;
use airlock_tests::{
    DaemonOptions, ProfilesDir, TestDaemon, ToolsDir, standard_manifest, test_module, wat_module,
};
use serde_json::json;
use sha2::{Digest, Sha256};

fn echo() -> Vec<u8> {
    std::fs::read(test_module("echo")).unwrap()
}

/// What `ListTools` says `daemon` serves.
pub(crate) async fn list_tools(daemon: &TestDaemon) -> Vec<pb::ToolInfo> {
    daemon
        .tools()
        .await
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools
}

/// Starts a daemon over `tools` and returns it with the names it serves.
pub(crate) async fn serve(
    tools: &ToolsDir,
    profiles: Option<&ProfilesDir>,
) -> (TestDaemon, Vec<String>) {
    let mut options = DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        ..DaemonOptions::default()
    };
    if let Some(profiles) = profiles {
        options.profiles_dir = profiles.path().to_owned();
    }
    let daemon = TestDaemon::start(options).await;
    let names = list_tools(&daemon)
        .await
        .into_iter()
        .map(|tool| tool.name)
        .collect();
    (daemon, names)
}

/// The refusal that names `folder`, if any.
fn refusal<'a>(daemon: &'a TestDaemon, folder: &str) -> &'a str {
    daemon
        .refused()
        .iter()
        .find(|message| message.contains(&format!("/{folder}/tool.toml")))
        .unwrap_or_else(|| panic!("no refusal for {folder}: {:?}", daemon.refused()))
}

#[tokio::test]
async fn each_broken_tool_is_refused_alone_with_its_reason() {
    let tools = ToolsDir::new();
    tools.add("good", &echo(), "");
    tools.add("unknown_key", &echo(), "colour = \"blue\"");
    tools.add("missing_schema", &echo(), "input_schema = \"nope.json\"");
    tools.write_manifest(
        "no_schema",
        &standard_manifest("no_schema", "").replace("input_schema = { type = \"object\" }\n", ""),
    );
    tools.add("missing_module", &echo(), "module = \"elsewhere.wasm\"");
    tools.add("unknown_profile", &echo(), "profile = \"nonexistent\"");
    tools.add("malformed", b"\0asm\x01\0\0\0garbage", "");
    tools.add("not_wasm", b"#!/bin/sh\necho hi\n", "");
    tools.add("bad_import", &wat_module("bad_import"), "");
    tools.add(
        "no_start",
        &wat::parse_str("(module (memory (export \"memory\") 1))").unwrap(),
        "",
    );
    tools.add(
        "bad_schema",
        &echo(),
        "input_schema = { type = \"object\", properties = { n = { type = \"integr\" } } }",
    );
    tools.write_manifest("not_toml", "this is = = not toml");
    let (daemon, names) = serve(&tools, None).await;
    assert_eq!(names, vec!["good"]);
    for (folder, reason) in [
        ("unknown_key", "unknown field `colour`"),
        ("missing_schema", "nope.json"),
        ("no_schema", "`input_schema` is missing"),
        ("missing_module", "elsewhere.wasm"),
        ("unknown_profile", "no profile named `nonexistent`"),
        ("malformed", "not a valid tool"),
        ("not_wasm", "not a valid tool"),
        ("bad_import", "host_secret"),
        ("no_start", "_start"),
        ("bad_schema", "not a valid JSON Schema"),
        ("not_toml", "tool.toml"),
    ] {
        let message = refusal(&daemon, folder);
        assert!(
            message.contains(reason),
            "{folder}: expected {reason:?} in {message}"
        );
    }
    daemon
        .exec("good", json!({}), None)
        .await
        .assert_status(pb::ToolStatus::Ok);
}

#[tokio::test]
async fn a_pinned_digest_admits_only_that_module() {
    let module = echo();
    let digest = hex::encode(Sha256::digest(&module));
    let tools = ToolsDir::new();
    tools.add("pinned", &module, &format!("sha256 = \"{digest}\""));
    tools.add(
        "changed",
        &module,
        &format!("sha256 = \"{}\"", "0".repeat(64)),
    );
    let (daemon, names) = serve(&tools, None).await;
    assert_eq!(names, vec!["pinned"]);
    let message = refusal(&daemon, "changed");
    assert!(message.contains("refusing a changed module"), "{message}");
    assert!(
        message.contains(&digest),
        "the refusal names the actual digest: {message}"
    );
}

#[tokio::test]
async fn a_profile_the_engine_cannot_enforce_refuses_its_tools() {
    let profiles = ProfilesDir::new();
    profiles.add(
        "files_limit",
        "description = \"x\"\n[limits]\nopen_files = 10",
    );
    profiles.add(
        "egress",
        "description = \"x\"\nnetwork = { allow = [\"example.com:443\"] }",
    );
    profiles.add(
        "missing_dir",
        "description = \"x\"\n[files]\nread_only = [\"/nonexistent/airlock\"]",
    );
    profiles.add("broken", "description = 3");
    let tools = ToolsDir::new();
    tools.add("files_limit", &echo(), "profile = \"files_limit\"");
    tools.add("egress", &echo(), "profile = \"egress\"");
    tools.add("missing_dir", &echo(), "profile = \"missing_dir\"");
    tools.add("broken", &echo(), "profile = \"broken\"");
    let (daemon, names) = serve(&tools, Some(&profiles)).await;
    assert!(names.is_empty(), "{names:?}");
    for (folder, reason) in [
        ("files_limit", "cannot enforce limits.open_files"),
        ("egress", "WASI preview 1 has no network"),
        ("missing_dir", "/nonexistent/airlock"),
        ("broken", "broken.toml"),
    ] {
        let message = refusal(&daemon, folder);
        assert!(
            message.contains(reason),
            "{folder}: expected {reason:?} in {message}"
        );
    }
}

#[tokio::test]
async fn a_second_tool_with_the_same_name_is_refused() {
    let first = ToolsDir::new();
    first.add("echo", &echo(), "");
    let second = ToolsDir::new();
    second.add("echo", &echo(), "description = \"an impostor\"");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![first.path().to_owned(), second.path().to_owned()],
        ..DaemonOptions::default()
    })
    .await;
    assert_eq!(daemon.refused().len(), 1, "{:?}", daemon.refused());
    assert!(
        daemon.refused()[0].contains("already served"),
        "{:?}",
        daemon.refused()
    );
    let listed = list_tools(&daemon).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].description, "test tool echo");
}

#[tokio::test]
async fn list_tools_describes_each_tool_completely() {
    let tools = ToolsDir::new();
    tools.add(
        "described",
        &echo(),
        r#"
risk = "write"
profile = "workspace-write"
timeout_ms = 1234
idempotent = true
input_schema = { type = "object", properties = { path = { type = "string" } }, required = ["path"] }
[output]
max_bytes = 4096
truncate = "tail"
"#,
    );
    let (daemon, _) = serve(&tools, None).await;
    let tool = list_tools(&daemon).await.remove(0);
    assert_eq!(tool.name, "described");
    assert_eq!(tool.version, "0.1.0");
    assert_eq!(tool.risk, pb::Risk::Write as i32);
    assert_eq!(tool.engine, "wasm");
    assert_eq!(tool.profile, "workspace-write");
    assert_eq!(tool.timeout_ms, 1234);
    assert!(tool.idempotent);
    assert_eq!(tool.module_digest, hex::encode(Sha256::digest(echo())));
    let schema: serde_json::Value = serde_json::from_str(&tool.input_schema_json).unwrap();
    assert_eq!(schema["required"], json!(["path"]));
    let output = tool.output.unwrap();
    assert_eq!(output.max_bytes, 4096);
    assert_eq!(output.truncate, pb::TruncateMode::Tail as i32);
}

#[tokio::test]
async fn a_restart_loads_modules_from_the_cache_instead_of_compiling() {
    let tools = ToolsDir::new();
    tools.add("echo", &echo(), "");
    let state = tempfile::tempdir().unwrap();
    let options = || DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        state_dir: Some(state.path().to_owned()),
        module_cache_dir: None,
        ..DaemonOptions::default()
    };
    let first = TestDaemon::start(options()).await;
    first
        .exec("echo", json!({}), None)
        .await
        .assert_status(pb::ToolStatus::Ok);
    first.stop().await;
    let cache = state.path().join("modules");
    let entries = |dir: &std::path::Path| {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let meta = entry.metadata().unwrap();
                (entry.file_name(), meta.len(), meta.modified().unwrap())
            })
            .collect();
        entries.sort();
        entries
    };
    let before = entries(&cache);
    assert_eq!(before.len(), 1, "one compiled module: {before:?}");

    let second = TestDaemon::start(options()).await;
    second
        .exec("echo", json!({"again": true}), None)
        .await
        .assert_status(pb::ToolStatus::Ok);
    assert_eq!(entries(&cache), before, "the restart rewrote the cache");

    // A damaged entry is not trusted: it is recompiled and replaced.
    second.stop().await;
    let entry = cache.join(&before[0].0);
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&entry, &bytes).unwrap();
    let third = TestDaemon::start(options()).await;
    third
        .exec("echo", json!({}), None)
        .await
        .assert_status(pb::ToolStatus::Ok);
    assert_ne!(
        std::fs::read(&entry).unwrap(),
        bytes,
        "the damaged entry was kept"
    );
}

/// A reload (SIGHUP) serves what the folders hold now: a tool added is served, one changed
/// is served changed, one removed is not, and a broken manifest or a profile gone refuses
/// its tools alone, each named; the daemon served throughout.
#[tokio::test]
async fn a_reload_serves_what_the_folders_hold_now_and_refuses_the_broken_alone() {
    let tools = ToolsDir::new();
    tools.add("kept", &echo(), "");
    tools.add("broken_later", &echo(), "");
    tools.add("removed_later", &echo(), "");
    tools.add("on_doomed", &echo(), "profile = \"doomed\"");
    let profiles = ProfilesDir::new();
    let strict = std::fs::read_to_string(profiles.path().join("strict.toml")).unwrap();
    profiles.add("doomed", &strict);
    let (daemon, names) = serve(&tools, Some(&profiles)).await;
    assert_eq!(
        names,
        ["broken_later", "kept", "on_doomed", "removed_later"],
        "{:?}",
        daemon.refused()
    );

    tools.add("added", &echo(), "");
    tools.add("kept", &echo(), "description = \"kept, described anew\"");
    tools.write_manifest("broken_later", "name = \"broken_later\"\nversion = ");
    std::fs::remove_dir_all(tools.path().join("removed_later")).unwrap();
    std::fs::remove_file(profiles.path().join("doomed.toml")).unwrap();
    let reloaded = daemon.reload().await;

    assert_eq!(reloaded.served, 2, "{reloaded:?}");
    let refused: Vec<String> = reloaded.refused.iter().map(ToString::to_string).collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused
            .iter()
            .any(|why| why.contains("/broken_later/tool.toml")),
        "{refused:?}"
    );
    assert!(
        refused
            .iter()
            .any(|why| why.contains("/on_doomed/tool.toml") && why.contains("doomed")),
        "{refused:?}"
    );
    let listed = list_tools(&daemon).await;
    let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["added", "kept"]);
    assert_eq!(listed[1].description, "kept, described anew");
    daemon
        .exec("kept", json!({"said": "after the reload"}), None)
        .await
        .assert_status(pb::ToolStatus::Ok);
    let gone = daemon
        .exec_request(pb::ExecuteToolRequest {
            tool: "removed_later".into(),
            arguments_json: "{}".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), tonic::Code::NotFound, "{gone:?}");

    // Put right, the broken one is served by the next reload.
    tools.add("broken_later", &echo(), "");
    let again = daemon.reload().await;
    assert_eq!(again.served, 3, "{again:?}");
}
