//! The process sandbox against a hostile program (tests/process/hostile.py) and the example
//! process plugins, through gRPC on loopback, in real namespaces.
//!
//! Each attack asserts its outcome and that the host is unchanged: no process of the
//! sandbox's uid left on the host, no file changed, nothing received by a listener. The
//! tests need root and a kernel with user namespaces, Landlock (ABI 4) and seccomp; on a
//! host without them every test fails with the engine's message naming the missing layer.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, Execution, ProfilesDir, TestDaemon, ToolsDir, repo_root};
use pb::ToolStatus;
use serde_json::{Value, json};

/// What every test profile grants: the system's programs and the dynamic loader's files.
const SYSTEM: &[&str] = &["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache"];

/// Test limits: small, so that limit tests finish quickly.
const LIMITS: &[(&str, &str)] = &[
    ("memory", "\"128 MiB\""),
    ("wall_time_ms", "30000"),
    ("output", "\"1 MiB\""),
    ("processes", "16"),
    ("open_files", "64"),
    ("file_size", "\"1 MiB\""),
    ("tmp", "\"4 MiB\""),
];

/// A profile granting the system plus `read_only` and `read_write`, with `LIMITS` changed
/// by `limits`.
pub(crate) fn profile(read_only: &[&str], read_write: &[&str], limits: &[(&str, &str)]) -> String {
    let list = |items: &[&str]| {
        items
            .iter()
            .map(|item| format!("{item:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut all_read_only = SYSTEM.to_vec();
    all_read_only.extend_from_slice(read_only);
    let mut lines: BTreeMap<&str, &str> = LIMITS.iter().copied().collect();
    for (key, value) in limits {
        lines.insert(key, value);
    }
    let limits: String = lines
        .iter()
        .map(|(key, value)| format!("{key} = {value}\n"))
        .collect();
    format!(
        "description = \"process test\"\nnetwork = \"none\"\n[files]\nread_only = [{}]\nread_write = [{}]\n[env]\nset = {{ LANG = \"C.UTF-8\", PATH = \"/usr/bin:/bin\" }}\n[limits]\n{limits}",
        list(&all_read_only),
        list(read_write)
    )
}

/// A complete process-tool manifest.
fn manifest(name: &str, command: &[&str], abi: &str, profile: &str, schema: &str) -> String {
    let command = command
        .iter()
        .map(|item| format!("{item:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"test tool {name}\"\nrisk = \"read_only\"\nengine = \"process\"\ncommand = [{command}]\nabi = \"{abi}\"\nprofile = \"{profile}\"\ntimeout_ms = 30000\ninput_schema = {schema}\n"
    )
}

/// The hostile program as a JSON tool under `profile`.
pub(crate) fn hostile(name: &str, profile: &str) -> (String, String) {
    (
        name.to_owned(),
        manifest(
            name,
            &["./hostile.py"],
            "json-stdio",
            profile,
            "{ type = \"object\" }",
        ),
    )
}

pub(crate) struct Fixture {
    daemon: TestDaemon,
    _tools: ToolsDir,
    _profiles: ProfilesDir,
}

impl std::ops::Deref for Fixture {
    type Target = TestDaemon;

    fn deref(&self) -> &TestDaemon {
        &self.daemon
    }
}

/// A daemon serving `tools` (name, manifest; each folder also gets hostile.py) with the
/// repository's profiles plus `profiles`. Every tool must load: a refusal fails the test with
/// the engine's reason (for instance a layer this host lacks).
pub(crate) async fn start(tools: &[(String, String)], profiles: &[(&str, String)]) -> Fixture {
    let fixture = start_allowing_refusals(tools, profiles).await;
    assert!(
        fixture.daemon.refused().is_empty(),
        "tools were refused: {:#?}",
        fixture.daemon.refused()
    );
    fixture
}

async fn start_allowing_refusals(
    tools: &[(String, String)],
    profiles: &[(&str, String)],
) -> Fixture {
    let dir = ToolsDir::new();
    for (name, text) in tools {
        dir.write_manifest(name, text);
        let script = dir.path().join(name).join("hostile.py");
        std::fs::copy(repo_root().join("tests/process/hostile.py"), &script).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let profiles_dir = ProfilesDir::new();
    for (name, text) in profiles {
        profiles_dir.add(name, text);
    }
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![dir.path().to_owned()],
        profiles_dir: profiles_dir.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    Fixture {
        daemon,
        _tools: dir,
        _profiles: profiles_dir,
    }
}

/// A workspace owned by `uid` (the sandbox runs as its owner), with `files` in it.
fn workspace(daemon: &TestDaemon, name: &str, uid: u32, files: &[(&str, &str)]) -> PathBuf {
    let dir = daemon.workspace(name);
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    chown_tree(&dir, uid);
    dir
}

fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

async fn attack(
    daemon: &TestDaemon,
    tool: &str,
    args: Value,
    workspace: Option<&Path>,
) -> Execution {
    daemon.exec(tool, args, workspace).await
}

async fn attack_within(
    daemon: &TestDaemon,
    tool: &str,
    args: Value,
    workspace: Option<&Path>,
    timeout_ms: u64,
) -> Execution {
    daemon
        .exec_request(pb::ExecuteToolRequest {
            tool: tool.to_owned(),
            arguments_json: args.to_string(),
            workspace: workspace
                .map(|w| w.to_str().unwrap().to_owned())
                .unwrap_or_default(),
            timeout_ms,
            require_approval: false,
        })
        .await
        .expect("accepted")
}

/// The `ok` value of a successful call.
pub(crate) fn report(execution: &Execution) -> Value {
    execution.assert_status(ToolStatus::Ok);
    execution.json()
}

/// Attempts by name, from a list of `{"attempt", "succeeded", …}`.
fn attempts(report: &Value) -> BTreeMap<String, Value> {
    report
        .as_array()
        .expect("a list of attempts")
        .iter()
        .map(|attempt| {
            (
                attempt["attempt"].as_str().unwrap().to_owned(),
                attempt.clone(),
            )
        })
        .collect()
}

#[track_caller]
fn assert_all_failed(report: &Value) {
    let attempts = attempts(report);
    assert!(!attempts.is_empty());
    for (name, attempt) in attempts {
        assert_eq!(attempt["succeeded"], false, "{name} succeeded: {attempt}");
    }
}

/// Host processes whose real uid is `uid`, but the daemon's spare (a sandbox built ahead
/// for the tool's next call, which never ran tool code).
fn host_processes_of(uid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        if status.lines().next() == Some("Name:\tairlock-spare") {
            continue;
        }
        let real = status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next())
            .and_then(|id| id.parse::<u32>().ok());
        if real == Some(uid) {
            found.push(pid);
        }
    }
    found
}

/// Waits (a little) until no host process runs as `uid`: a stopped sandbox is killed at
/// once and reaped in the background.
async fn assert_no_processes_left(uid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = host_processes_of(uid);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes of uid {uid} are still running: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Names, content, mode and owner of everything under `dir`.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32, u32, i64)> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let content = if meta.is_file() {
                std::fs::read(entry.path()).unwrap()
            } else if meta.file_type().is_symlink() {
                std::fs::read_link(entry.path())
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                stack.push(entry.path());
                Vec::new()
            };
            files.insert(
                entry.path(),
                (
                    content,
                    meta.mode(),
                    meta.uid(),
                    meta.mtime_nsec() + meta.mtime() * 1_000_000_000,
                ),
            );
        }
    }
    files
}

#[tokio::test]
async fn the_example_plugins_run_end_to_end() {
    let plugins = repo_root().join("plugins");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![plugins.join("workspace_grep"), plugins.join("py_outline")],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let source = "import os\n\nclass Greeter(Base):\n    def greet(self, name: str) -> str:\n        return f'hi {name}'\n\n    async def wait(self):\n        pass\n\ndef main(argv=None):\n    Greeter().greet('x')\n";
    let ws = workspace(
        &daemon,
        "project",
        42001,
        &[
            ("app/greeter.py", source),
            ("notes.txt", "-rf is not a flag here\n"),
        ],
    );

    let found = daemon
        .exec(
            "workspace_grep",
            json!({"pattern": "def +[a-z]+"}),
            Some(&ws),
        )
        .await;
    found.assert_status(ToolStatus::Ok);
    let content = &found.result().content;
    assert!(
        content.contains("./app/greeter.py:4:    def greet"),
        "{content}"
    );
    assert!(
        content.contains("./app/greeter.py:10:def main"),
        "{content}"
    );
    assert_eq!(content.lines().count(), 3, "{content}");

    // A pattern that starts with `-` is searched for, not taken as an option.
    let dash = daemon
        .exec("workspace_grep", json!({"pattern": "-rf"}), Some(&ws))
        .await;
    dash.assert_status(ToolStatus::Ok);
    assert_eq!(
        dash.result().content.trim(),
        "./notes.txt:1:-rf is not a flag here"
    );

    let none = daemon
        .exec(
            "workspace_grep",
            json!({"pattern": "no such text anywhere"}),
            Some(&ws),
        )
        .await;
    none.assert_status(ToolStatus::ToolError);
    assert_eq!(none.result().exit_code, Some(1));

    let outline = daemon
        .exec("py_outline", json!({"path": "app/greeter.py"}), Some(&ws))
        .await;
    let outline = report(&outline);
    assert_eq!(outline["path"], "app/greeter.py");
    let symbols: Vec<(String, String, u64)> = outline["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap().to_owned(),
                s["name"].as_str().unwrap().to_owned(),
                s["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        symbols,
        vec![
            ("class".to_owned(), "Greeter".to_owned(), 3),
            ("method".to_owned(), "Greeter.greet".to_owned(), 4),
            ("async method".to_owned(), "Greeter.wait".to_owned(), 7),
            ("function".to_owned(), "main".to_owned(), 10),
        ]
    );
    let broken = daemon
        .exec("py_outline", json!({"path": "notes.txt"}), Some(&ws))
        .await;
    broken.assert_status(ToolStatus::ToolError);
    assert!(
        broken.result().error_message.contains("not valid Python"),
        "{:?}",
        broken.result()
    );
    let outside = daemon
        .exec("py_outline", json!({"path": "../../etc/passwd"}), Some(&ws))
        .await;
    outside.assert_status(ToolStatus::ToolError);

    let listed = daemon
        .tools()
        .await
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let outline_info = listed
        .tools
        .iter()
        .find(|t| t.name == "py_outline")
        .unwrap();
    assert_eq!(outline_info.engine, "process");
    let script = std::fs::read(plugins.join("py_outline/outline.py")).unwrap();
    use sha2::Digest;
    assert_eq!(
        outline_info.module_digest,
        hex::encode(sha2::Sha256::digest(script))
    );
}

#[tokio::test]
async fn argv_values_reach_the_program_as_exactly_one_element() {
    let schema = "{ type = \"object\", properties = { value = { type = \"string\" } }, required = [\"value\"] }";
    let show = manifest(
        "show_argv",
        &[
            "/usr/bin/python3",
            "-I",
            "-c",
            "import json, sys; print(json.dumps(sys.argv[1:]))",
            "--value=${value}",
            "--",
            "${value}",
            "x${value}y",
            "$${value}",
        ],
        "argv",
        "p",
        schema,
    );
    let fixture = start(
        &[("show_argv".into(), show)],
        &[("p", profile(&[], &[], &[]))],
    )
    .await;
    let marker = std::env::temp_dir().join(format!("airlock-pwned-{}", std::process::id()));
    let injection = format!("$(touch {})", marker.display());
    for value in [
        "two words",
        "it's \"quoted\"",
        injection.as_str(),
        "`touch /tmp/x`; echo $HOME",
        "-rf",
        "--help",
        "*",
        "line\nbreak",
        "ünïcödé ✓",
        "",
    ] {
        let execution = fixture
            .exec("show_argv", json!({"value": value}), None)
            .await;
        execution.assert_status(ToolStatus::Ok);
        let argv: Vec<String> = serde_json::from_str(&execution.result().content).unwrap();
        assert_eq!(
            argv,
            vec![
                format!("--value={value}"),
                "--".to_owned(),
                value.to_owned(),
                format!("x{value}y"),
                "${value}".to_owned(),
            ],
            "value {value:?}"
        );
    }
    assert!(!marker.exists(), "a value was run by a shell");
    // Arguments the schema cannot express are refused, clearly.
    let nul = fixture
        .exec("show_argv", json!({"value": "a\u{0}b"}), None)
        .await;
    nul.assert_status(ToolStatus::SandboxError);
    assert!(
        nul.result().error_message.contains("NUL"),
        "{:?}",
        nul.result()
    );
    let missing = fixture.exec("show_argv", json!({}), None).await;
    missing.assert_status(ToolStatus::InvalidArguments);
}

#[tokio::test]
async fn templates_that_could_turn_values_into_options_are_refused_at_load() {
    let schema = "{ type = \"object\", properties = { p = { type = \"string\" }, n = { type = \"integer\" } }, required = [\"p\", \"n\"] }";
    let tools = [
        (
            "leading",
            manifest(
                "leading",
                &["/usr/bin/grep", "-e", "${p}"],
                "argv",
                "p",
                schema,
            ),
        ),
        (
            "program",
            manifest("program", &["${p}"], "argv", "p", schema),
        ),
        (
            "number",
            manifest(
                "number",
                &["/usr/bin/grep", "--", "${n}"],
                "argv",
                "p",
                schema,
            ),
        ),
        (
            "stdio",
            manifest(
                "stdio",
                &["/usr/bin/grep", "--", "${p}"],
                "json-stdio",
                "p",
                schema,
            ),
        ),
    ];
    let tools: Vec<(String, String)> = tools.into_iter().map(|(n, m)| (n.to_owned(), m)).collect();
    let fixture = start_allowing_refusals(&tools, &[("p", profile(&[], &[], &[]))]).await;
    let refused = fixture.refused().join("\n");
    for (tool, expected) in [
        ("leading", "before any `--`"),
        ("program", "cannot come from an argument"),
        ("number", "type = \"string\""),
        ("stdio", "only substituted under abi = \"argv\""),
    ] {
        let line = fixture
            .refused()
            .iter()
            .find(|line| line.contains(&format!("/{tool}/tool.toml")))
            .unwrap_or_else(|| panic!("{tool} was not refused: {refused}"));
        assert!(line.contains(expected), "{tool}: {line}");
    }
}

#[tokio::test]
async fn what_a_host_or_profile_cannot_enforce_is_refused_with_the_layer_named() {
    let bin = tempfile::tempdir().unwrap();
    let writable_program = bin.path().join("tool");
    std::fs::copy("/usr/bin/true", &writable_program).unwrap();
    let writable = profile(&[], &[bin.path().to_str().unwrap()], &[]);
    let tools = [
        (
            "proc",
            manifest(
                "proc",
                &["/usr/bin/true"],
                "argv",
                "proc",
                "{ type = \"object\" }",
            ),
        ),
        (
            "writable",
            manifest(
                "writable",
                &[writable_program.to_str().unwrap()],
                "argv",
                "writable",
                "{ type = \"object\" }",
            ),
        ),
        (
            "unreachable",
            manifest(
                "unreachable",
                &["/opt/not/granted"],
                "argv",
                "p",
                "{ type = \"object\" }",
            ),
        ),
        (
            "pinned",
            format!(
                "{}sha256 = \"{}\"\n",
                manifest(
                    "pinned",
                    &["/usr/bin/true"],
                    "argv",
                    "p",
                    "{ type = \"object\" }"
                ),
                "0".repeat(64)
            ),
        ),
    ];
    let tools: Vec<(String, String)> = tools.into_iter().map(|(n, m)| (n.to_owned(), m)).collect();
    let fixture = start_allowing_refusals(
        &tools,
        &[
            ("proc", profile(&["/proc/self"], &[], &[])),
            ("writable", writable),
            ("p", profile(&[], &[], &[])),
        ],
    )
    .await;
    let refused = fixture.refused().join("\n");
    for (tool, expected) in [
        ("proc", "mounts its own /proc"),
        ("writable", "never executes what a tool can write"),
        ("unreachable", "not in the sandbox"),
        ("pinned", "refusing a changed module"),
    ] {
        let line = fixture
            .refused()
            .iter()
            .find(|line| line.contains(&format!("/{tool}/tool.toml")))
            .unwrap_or_else(|| panic!("{tool} was not refused: {refused}"));
        assert!(line.contains(expected), "{tool}: {line}");
    }
    // Refused tools are not served.
    let status = fixture
        .exec_request(pb::ExecuteToolRequest {
            tool: "proc".into(),
            arguments_json: "{}".into(),
            workspace: String::new(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .expect_err("a refused tool is unknown");
    assert_eq!(status.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn a_sandbox_has_its_own_identity_view_and_nothing_of_the_daemon() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[("p", profile(&["$WORKSPACE"], &[], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42002, &[("inside.txt", "inside")]);
    let identity = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "identity"}),
            Some(&ws),
        )
        .await,
    );
    assert_eq!(identity["uid"], 42002, "{identity}");
    assert_eq!(identity["euid"], 42002);
    assert_eq!(identity["gid"], 42002);
    assert!(
        identity["groups"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g != 0),
        "{identity}"
    );
    assert_eq!(identity["pid"], 1, "the tool is pid 1 of its own namespace");
    assert_eq!(identity["sid"], 1, "the tool leads its own session");
    assert_eq!(identity["hostname"], "airlock");
    assert_eq!(identity["cwd"], "/workspace");
    let status = &identity["status"];
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status[caps], "0000000000000000", "{caps}: {status}");
    }
    assert_eq!(status["NoNewPrivs"], "1");
    assert_eq!(status["Seccomp"], "2");
    let fds: Vec<u64> = identity["fds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_u64().unwrap())
        .collect();
    assert!(
        fds.iter().all(|fd| *fd <= 3),
        "descriptors leaked into the sandbox: {fds:?}"
    );
    assert_eq!(
        identity["env"],
        json!({"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    );
    assert_eq!(
        identity["root"],
        json!([
            "bin",
            "dev",
            "etc",
            "lib",
            "lib64",
            "proc",
            "tmp",
            "tool",
            "usr",
            "workspace"
        ])
    );
    assert_eq!(
        identity["dev"],
        json!([
            "fd", "full", "null", "random", "stderr", "stdin", "stdout", "urandom", "zero"
        ])
    );
    assert_eq!(identity["interfaces"], json!(["lo"]));
    let limits = identity["limits"].as_str().unwrap();
    // RLIMIT_NPROC is the profile's 16, or one above it where a pids cgroup holds the limit
    // (the fork bomb test checks what is effectively allowed).
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max processes") && (l.contains(" 16 ") || l.contains(" 17 "))),
        "{limits}"
    );
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max core file size") && l.contains(" 0 ")),
        "{limits}"
    );
    let mounts = identity["mounts"].as_str().unwrap();
    assert!(
        !mounts.contains(fixture.state_dir.to_str().unwrap()),
        "{mounts}"
    );
    // The host's view is unchanged: no sandbox mount leaked out.
    let host_mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !host_mounts.contains(fixture.state_dir.to_str().unwrap()),
        "{host_mounts}"
    );
}

#[tokio::test]
async fn secrets_of_the_host_and_the_daemon_cannot_be_read() {
    let fixture = start(
        &[hostile("plain", "plain"), hostile("with_etc", "with_etc")],
        &[
            ("plain", profile(&["$WORKSPACE"], &[], &[])),
            ("with_etc", profile(&["$WORKSPACE", "/etc"], &[], &[])),
        ],
    )
    .await;
    let ws = workspace(&fixture, "project", 42003, &[("inside.txt", "inside")]);
    let secret = "TOP-SECRET-7f3a";
    std::fs::write(ws.parent().unwrap().join("secret.txt"), secret).unwrap();
    std::os::unix::fs::symlink(ws.parent().unwrap().join("secret.txt"), ws.join("link_abs"))
        .unwrap();
    std::os::unix::fs::symlink("../secret.txt", ws.join("link_dotdot")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", ws.join("link_shadow")).unwrap();
    std::os::unix::fs::symlink(ws.parent().unwrap(), ws.join("link_dir")).unwrap();
    let state = fixture.state_dir.clone();
    std::fs::write(state.join("daemon-secret.txt"), secret).unwrap();
    let paths = json!([
        "/etc/shadow",
        "/etc/passwd",
        "/workspace/link_abs",
        "/workspace/link_dotdot",
        "/workspace/link_shadow",
        "/workspace/link_dir/secret.txt",
        "/workspace/../secret.txt",
        state.join("daemon-secret.txt"),
        "/proc/1/root/etc/shadow",
        "/proc/self/root/../secret.txt",
    ]);
    for tool in ["plain", "with_etc"] {
        let execution = attack(
            &fixture,
            tool,
            json!({"attack": "read", "paths": paths}),
            Some(&ws),
        )
        .await;
        let read = report(&execution);
        let attempts = attempts(&read);
        for (path, attempt) in &attempts {
            let leaked = attempt["succeeded"] == true
                && (attempt["value"].as_str().unwrap_or("").contains(secret)
                    || path.contains("shadow"));
            assert!(!leaked, "{tool}: {path} was read: {attempt}");
        }
        assert!(!execution.result().content.contains(secret));
        // Granted or not, /etc/passwd is the sandbox's own: its user, named, and none of
        // the host's.
        let passwd = attempts["/etc/passwd"]["value"].as_str().unwrap_or("");
        assert_eq!(
            attempts["/etc/passwd"]["succeeded"], true,
            "{tool}: {passwd}"
        );
        assert!(
            passwd.contains("\nairlock:x:42003:42003:"),
            "{tool}: {passwd}"
        );
        assert!(
            !passwd.contains("daemon:x:"),
            "{tool}: the host's users: {passwd}"
        );
        if tool == "plain" {
            assert_eq!(attempts["/etc/shadow"]["error"], "ENOENT");
        } else {
            assert_eq!(
                attempts["/etc/shadow"]["error"], "EACCES",
                "{tool}: only DAC stands before shadow here"
            );
        }
    }
}

#[tokio::test]
async fn host_processes_are_invisible_and_cannot_be_signalled() {
    let fixture = start(&[hostile("hostile", "p")], &[("p", profile(&[], &[], &[]))]).await;
    let pids = report(&attack(&fixture, "hostile", json!({"attack": "pids"}), None).await);
    assert_eq!(pids["pids"], json!([1]), "{pids}");
    let environ = report(&attack(&fixture, "hostile", json!({"attack": "environ"}), None).await);
    let proc1 = environ["proc1"].as_str().unwrap();
    let mut entries: Vec<&str> = proc1.split('\0').filter(|e| !e.is_empty()).collect();
    entries.sort_unstable();
    assert_eq!(
        entries,
        vec!["LANG=C.UTF-8", "PATH=/usr/bin:/bin"],
        "pid 1 is the tool itself"
    );
    for (name, _) in std::env::vars() {
        if name != "LANG" && name != "PATH" {
            assert!(
                !proc1.contains(&format!("{name}=")),
                "the daemon's {name} leaked"
            );
        }
    }
    let me = std::process::id();
    let mut target = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let killed = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "kill", "pids": [me, target.id()]}),
            None,
        )
        .await,
    );
    for (name, attempt) in attempts(&killed) {
        assert_eq!(attempt["succeeded"], false, "{name}: {attempt}");
        assert_eq!(attempt["error"], "ESRCH", "{name}: {attempt}");
    }
    assert!(
        target.try_wait().unwrap().is_none(),
        "the host process was signalled"
    );
    target.kill().unwrap();
    target.wait().unwrap();
}

#[tokio::test]
async fn the_network_is_unreachable_in_every_form() {
    let fixture = start(&[hostile("hostile", "p")], &[("p", profile(&[], &[], &[]))]).await;
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let sockets = tempfile::tempdir().unwrap();
    let unix_path = sockets.path().join("host.sock");
    let unix = std::os::unix::net::UnixListener::bind(&unix_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    std::fs::set_permissions(&unix_path, std::fs::Permissions::from_mode(0o777)).unwrap();
    let abstract_name = format!("airlock-test-{}", std::process::id());
    let abstract_address =
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    use std::os::linux::net::SocketAddrExt;
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&abstract_address).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let network = report(
        &attack(
            &fixture,
            "hostile",
            json!({
                "attack": "network",
                "tcp": tcp.local_addr().unwrap().to_string(),
                "udp": udp.local_addr().unwrap().to_string(),
                "dns": "example.com",
                "unix": unix_path,
                "abstract": abstract_name,
            }),
            None,
        )
        .await,
    );
    let attempts = attempts(&network);
    for name in [
        "tcp connect",
        "tcp bind+listen",
        "udp sendto",
        "udp connect+send",
        "dns lookup",
        "unix connect",
        "abstract unix connect",
    ] {
        assert_eq!(
            attempts[name]["succeeded"], false,
            "{name}: {}",
            attempts[name]
        );
    }
    assert!(tcp.accept().is_err(), "a TCP connection reached the host");
    let mut buf = [0u8; 64];
    assert!(
        udp.recv_from(&mut buf).is_err(),
        "a datagram reached the host"
    );
    assert!(unix.accept().is_err(), "a unix connection reached the host");
    assert!(
        abstract_listener.accept().is_err(),
        "an abstract-socket connection reached the host"
    );
}

#[tokio::test]
async fn a_fork_bomb_hits_the_process_limit_and_leaves_nothing() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[("p", profile(&["$WORKSPACE"], &[], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42004, &[]);
    let before = std::fs::read_dir("/proc").unwrap().count();
    let execution = attack(
        &fixture,
        "hostile",
        json!({"attack": "fork_bomb"}),
        Some(&ws),
    )
    .await;
    execution.assert_status(ToolStatus::LimitExceeded);
    assert!(
        execution
            .result()
            .error_message
            .contains("limits.processes"),
        "{:?}",
        execution.result()
    );
    let stderr = String::from_utf8_lossy(&execution.stderr);
    let forked: u32 = stderr
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("stderr: {stderr}"));
    assert!(forked < 16, "forked {forked} children under a limit of 16");
    assert_no_processes_left(42004).await;
    let after = std::fs::read_dir("/proc").unwrap().count();
    assert!(
        after < before + 16,
        "host processes grew from {before} to {after}"
    );
}

#[tokio::test]
async fn a_memory_bomb_hits_the_memory_limit() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[(
            "p",
            profile(&["$WORKSPACE"], &[], &[("memory", "\"64 MiB\"")]),
        )],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42005, &[]);
    let execution = attack(&fixture, "hostile", json!({"attack": "memory"}), Some(&ws)).await;
    execution.assert_status(ToolStatus::LimitExceeded);
    let result = execution.result();
    assert!(result.error_message.contains("limits.memory"), "{result:?}");
    let peak = result.metadata.as_ref().unwrap().peak_memory_bytes;
    assert!(
        peak > 32 << 20 && peak <= (64 << 20) + (1 << 20),
        "peak {peak}"
    );
    assert_no_processes_left(42005).await;
}

#[tokio::test]
async fn an_infinite_loop_is_killed_at_the_deadline_and_by_the_cpu_limit() {
    let fixture = start(
        &[hostile("hostile", "p"), hostile("cpu_bound", "cpu")],
        &[
            ("p", profile(&["$WORKSPACE"], &[], &[])),
            (
                "cpu",
                profile(&["$WORKSPACE"], &[], &[("cpu_time_ms", "300")]),
            ),
        ],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42006, &[]);
    let started = Instant::now();
    let execution = attack_within(
        &fixture,
        "hostile",
        json!({"attack": "spin"}),
        Some(&ws),
        500,
    )
    .await;
    execution.assert_status(ToolStatus::Timeout);
    assert!(
        execution.result().error_message.contains("500 ms"),
        "{:?}",
        execution.result()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_no_processes_left(42006).await;

    let execution = attack(&fixture, "cpu_bound", json!({"attack": "spin"}), Some(&ws)).await;
    execution.assert_status(ToolStatus::LimitExceeded);
    assert!(
        execution
            .result()
            .error_message
            .contains("limits.cpu_time_ms"),
        "{:?}",
        execution.result()
    );
    let cpu = execution.result().metadata.as_ref().unwrap().cpu_time_us;
    assert!((300_000..5_000_000).contains(&cpu), "cpu {cpu} us");
    assert_no_processes_left(42006).await;
}

#[tokio::test]
async fn cancelling_a_call_kills_the_whole_sandbox() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[("p", profile(&["$WORKSPACE"], &[], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42007, &[]);
    let mut stream = fixture
        .tools()
        .await
        .execute_tool(pb::ExecuteToolRequest {
            tool: "hostile".into(),
            arguments_json: json!({"attack": "fork_bomb", "max": 8, "hold": true}).to_string(),
            workspace: ws.to_str().unwrap().into(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .unwrap()
        .into_inner();
    let Some(pb::execute_tool_event::Event::Started(started)) =
        stream.message().await.unwrap().unwrap().event
    else {
        panic!("expected started");
    };
    // Wait until its children run, then cancel.
    let deadline = Instant::now() + Duration::from_secs(10);
    while host_processes_of(42007).len() < 9 {
        assert!(Instant::now() < deadline, "the children never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fixture
        .tools()
        .await
        .cancel_execution(pb::CancelExecutionRequest {
            execution_id: started.execution_id,
        })
        .await
        .unwrap();
    let mut status = None;
    while let Some(event) = stream.message().await.unwrap() {
        if let Some(pb::execute_tool_event::Event::Finished(result)) = event.event {
            status = Some(result.status);
        }
    }
    assert_eq!(status, Some(ToolStatus::Cancelled as i32));
    assert_no_processes_left(42007).await;
}

#[tokio::test]
async fn disk_fills_stop_at_the_tmp_and_file_size_limits() {
    let fixture = start(
        &[hostile("tmp_fill", "tmp"), hostile("file_fill", "file")],
        &[
            // Files may be larger than /tmp, so /tmp's own size is what stops the fill.
            (
                "tmp",
                profile(&[], &["$WORKSPACE"], &[("file_size", "\"8 MiB\"")]),
            ),
            ("file", profile(&[], &["$WORKSPACE"], &[])),
        ],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42008, &[]);
    let tmp = report(
        &attack(
            &fixture,
            "tmp_fill",
            json!({"attack": "fill", "path": "/tmp/fill"}),
            Some(&ws),
        )
        .await,
    );
    assert_eq!(tmp["error"], "ENOSPC", "{tmp}");
    let written = tmp["written"].as_u64().unwrap();
    assert!((3 << 20..=4 << 20).contains(&written), "{tmp}");
    // Python ignores SIGXFSZ, so the limit shows as EFBIG; the host file stops at the limit.
    let file = report(
        &attack(
            &fixture,
            "file_fill",
            json!({"attack": "fill", "path": "/workspace/big"}),
            Some(&ws),
        )
        .await,
    );
    assert_eq!(file["error"], "EFBIG", "{file}");
    let size = std::fs::metadata(ws.join("big")).unwrap().len();
    assert_eq!(size, 1 << 20, "the file stops exactly at limits.file_size");
    assert_eq!(
        std::fs::metadata(ws.join("big")).unwrap().uid(),
        42008,
        "files belong to the workspace's owner"
    );
}

#[tokio::test]
async fn stdout_and_stderr_floods_stop_at_the_output_limit() {
    let fixture = start(&[hostile("hostile", "p")], &[("p", profile(&[], &[], &[]))]).await;
    let execution = attack(&fixture, "hostile", json!({"attack": "flood"}), None).await;
    execution.assert_status(ToolStatus::LimitExceeded);
    let result = execution.result();
    assert!(result.error_message.contains("1048576 bytes"), "{result:?}");
    assert_eq!(execution.stdout.len() + execution.stderr.len(), 1 << 20);
    assert!(execution.stdout.iter().all(|b| *b == b'o'));
    assert!(execution.stderr.iter().all(|b| *b == b'e'));
    assert!(
        !execution.stdout.is_empty() && !execution.stderr.is_empty(),
        "both streams were read"
    );
}

#[tokio::test]
async fn setuid_binaries_do_not_gain_privileges() {
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("ids");
    let compiled = std::process::Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&program)
        .arg(repo_root().join("tests/process/ids.c"))
        .status()
        .expect("a C compiler (cc) is needed for the setuid test");
    assert!(compiled.success());
    std::os::unix::fs::chown(&program, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o6755)).unwrap();
    std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin_dir = bin.path().to_str().unwrap();
    let fixture = start(
        &[
            (
                "ids".to_owned(),
                manifest(
                    "ids",
                    &[program.to_str().unwrap()],
                    "argv",
                    "p",
                    "{ type = \"object\" }",
                ),
            ),
            hostile("hostile", "p"),
        ],
        &[("p", profile(&["$WORKSPACE", bin_dir], &[], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42009, &[]);
    let direct = fixture.exec("ids", json!({}), Some(&ws)).await;
    direct.assert_status(ToolStatus::Ok);
    assert_eq!(
        direct.result().content.trim(),
        "ruid=42009 euid=42009 suid=42009 rgid=42009 egid=42009 sgid=42009"
    );
    let via = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "exec", "argv": [program]}),
            Some(&ws),
        )
        .await,
    );
    assert_eq!(via["code"], 0, "{via}");
    assert_eq!(
        via["stdout"].as_str().unwrap().trim(),
        "ruid=42009 euid=42009 suid=42009 rgid=42009 egid=42009 sgid=42009"
    );
    // Host setuid helpers fail the same way.
    let su = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "exec", "argv": ["/usr/bin/su", "-c", "id"]}),
            Some(&ws),
        )
        .await,
    );
    assert_ne!(su["code"], 0, "{su}");
}

#[tokio::test]
async fn ptrace_namespaces_mounts_and_kernel_interfaces_are_refused() {
    let fixture = start(&[hostile("hostile", "p")], &[("p", profile(&[], &[], &[]))]).await;
    let ptrace = report(&attack(&fixture, "hostile", json!({"attack": "ptrace"}), None).await);
    assert_eq!(ptrace["attach"], "EPERM", "{ptrace}");
    assert_eq!(ptrace["process_vm_readv"], "EPERM", "{ptrace}");
    let syscalls = report(&attack(&fixture, "hostile", json!({"attack": "syscalls"}), None).await);
    for (name, outcome) in syscalls.as_object().unwrap() {
        let expected = if name == "clone3" { "ENOSYS" } else { "EPERM" };
        assert_eq!(outcome, expected, "{name}: {syscalls}");
    }
}

#[tokio::test]
async fn a_child_left_behind_is_killed_with_its_parent() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[("p", profile(&[], &["$WORKSPACE"], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42010, &[]);
    let marker = ws.join("orphan-was-here");
    let left = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "orphan", "marker": "/workspace/orphan-was-here", "delay": 1.0}),
            Some(&ws),
        )
        .await,
    );
    assert_eq!(left["left"], true);
    assert_no_processes_left(42010).await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(
        !marker.exists(),
        "the orphan survived its parent and wrote its marker"
    );
}

#[tokio::test]
async fn a_read_only_workspace_cannot_be_changed() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[("p", profile(&["$WORKSPACE"], &[], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42011, &[("existing.txt", "original\n")]);
    std::fs::create_dir(ws.join("existing_dir")).unwrap();
    chown_tree(&ws, 42011);
    let before = snapshot(&ws);
    let modified = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "modify", "base": "/workspace"}),
            Some(&ws),
        )
        .await,
    );
    assert_all_failed(&modified);
    assert_eq!(snapshot(&ws), before, "the workspace changed");
}

/// A preview runs the tool under a read-only view of its profile: a tool that writes anyway
/// when asked for a preview changes nothing, though its profile grants the workspace
/// read-write.
#[tokio::test]
async fn a_preview_call_cannot_change_a_read_write_workspace() {
    let (name, text) = hostile("liar", "p");
    let text = text.replace("risk = \"read_only\"", "risk = \"write\"\npreview = true");
    let fixture = start(
        &[(name, text)],
        &[("p", profile(&[], &["$WORKSPACE"], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42014, &[("existing.txt", "original\n")]);
    std::fs::create_dir(ws.join("existing_dir")).unwrap();
    chown_tree(&ws, 42014);
    let before = snapshot(&ws);

    let script = json!({"turns": [
        {"tool_calls": [{"name": "liar", "arguments": {"attack": "modify", "base": "/workspace"}}]},
        {"final": "done"}
    ]});
    let mut start = airlock_tests::scripted_run(&ws, &script);
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    let mut run = fixture.start_run(start).await;
    let request = run.approval_requested().await;
    let preview = request.preview.expect("a preview");
    assert_eq!(snapshot(&ws), before, "the preview changed the workspace");
    // The preview is the tool's own report: every write it tried was refused.
    let report: Value = serde_json::from_str(&preview.text).expect("the report is JSON");
    assert_all_failed(&report);

    run.decide(&request.approval_id, pb::Decision::Deny, "no");
    run.finished().await;
    assert_eq!(snapshot(&ws), before, "a denied call changed the workspace");
}

#[tokio::test]
async fn written_files_cannot_be_executed_and_hard_links_do_not_cross_mounts() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[("p", profile(&[], &["$WORKSPACE"], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42012, &[]);
    for path in ["/workspace/run.sh", "/tmp/run.sh"] {
        let run = report(
            &attack(
                &fixture,
                "hostile",
                json!({"attack": "write_and_run", "path": path}),
                Some(&ws),
            )
            .await,
        );
        assert_eq!(run["succeeded"], false, "{path}: {run}");
    }
    let python = std::fs::metadata("/usr/bin/python3.11")
        .map(|m| m.nlink())
        .ok();
    let shadow = std::fs::metadata("/etc/shadow").unwrap().nlink();
    let links = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "hardlink", "links": [
                ["/usr/bin/python3", "/workspace/python"],
                ["/usr/bin/python3", "/tmp/python"],
                ["/etc/ld.so.cache", "/workspace/cache"],
                ["/etc/shadow", "/workspace/shadow"],
            ]}),
            Some(&ws),
        )
        .await,
    );
    assert_all_failed(&links);
    assert_eq!(
        std::fs::metadata("/usr/bin/python3.11")
            .map(|m| m.nlink())
            .ok(),
        python
    );
    assert_eq!(std::fs::metadata("/etc/shadow").unwrap().nlink(), shadow);
    assert!(
        std::fs::read_dir(&ws).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("python"))
    );
}

#[tokio::test]
async fn a_symlink_planted_in_the_workspace_cannot_widen_a_grant() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[("p", profile(&["$WORKSPACE"], &["$WORKSPACE/out"], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42013, &[]);
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("out")).unwrap();
    let execution = attack(
        &fixture,
        "hostile",
        json!({"attack": "write", "paths": ["/workspace/out/planted"]}),
        Some(&ws),
    )
    .await;
    execution.assert_status(ToolStatus::SandboxError);
    assert!(
        execution
            .result()
            .error_message
            .contains("outside the workspace"),
        "{:?}",
        execution.result()
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

    // With a real directory there, the sub-grant is writable and the rest is not.
    std::fs::remove_file(ws.join("out")).unwrap();
    std::fs::create_dir(ws.join("out")).unwrap();
    chown_tree(&ws, 42013);
    let write = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "write", "paths": ["/workspace/out/allowed", "/workspace/denied"]}),
            Some(&ws),
        )
        .await,
    );
    let attempts = attempts(&write);
    assert_eq!(
        attempts["/workspace/out/allowed"]["succeeded"], true,
        "{write}"
    );
    assert_eq!(attempts["/workspace/out/allowed"]["value"], 42013);
    assert_eq!(attempts["/workspace/denied"]["succeeded"], false, "{write}");
    assert!(ws.join("out/allowed").exists() && !ws.join("denied").exists());
}

#[tokio::test]
async fn exit_codes_and_killing_signals_are_reported() {
    let fixture = start(&[hostile("hostile", "p")], &[("p", profile(&[], &[], &[]))]).await;
    let exited = attack(
        &fixture,
        "hostile",
        json!({"attack": "exit", "code": 7}),
        None,
    )
    .await;
    exited.assert_status(ToolStatus::ToolError);
    assert_eq!(exited.result().exit_code, Some(7));
    assert!(
        exited.result().error_message.contains("exiting with 7"),
        "{:?}",
        exited.result()
    );
    let crashed = attack(&fixture, "hostile", json!({"attack": "segfault"}), None).await;
    crashed.assert_status(ToolStatus::ToolError);
    // SIGSEGV.
    assert_eq!(crashed.result().metadata.as_ref().unwrap().signal, Some(11));
    assert!(
        crashed.result().error_message.contains("signal 11"),
        "{:?}",
        crashed.result()
    );
}

#[tokio::test]
async fn concurrent_calls_each_get_their_own_sandbox() {
    let fixture = start(&[hostile("hostile", "p")], &[("p", profile(&[], &[], &[]))]).await;
    let calls = (0..12).map(|_| {
        let daemon = &fixture.daemon;
        async move {
            report(
                &daemon
                    .exec("hostile", json!({"attack": "pids"}), None)
                    .await,
            )
        }
    });
    for pids in futures::future::join_all(calls).await {
        assert_eq!(pids["pids"], json!([1]));
    }
}

/// The pid of a spare of uid `uid` (a sandbox the daemon built ahead for the next call),
/// once one is parked, of a daemon running in this process.
pub(crate) async fn parked_spare(uid: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let spare = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .find_map(|entry| {
                let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
                let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
                let field = |name: &str| {
                    status
                        .lines()
                        .find_map(|line| line.strip_prefix(name))
                        .and_then(|value| value.split_whitespace().next())
                };
                let named = field("Name:") == Some("airlock-spare");
                let owned = field("Uid:") == Some(&uid.to_string());
                // This process's own (the daemon runs in it), and alive: an earlier test
                // process's spares linger as zombies until init reaps them.
                let ours = field("PPid:") == Some(&std::process::id().to_string())
                    && field("State:") != Some("Z");
                (named && owned && ours).then_some(pid)
            });
        if let Some(pid) = spare {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "no sandbox was built ahead for uid {uid}'s next call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A mount table without what differs between two equal views (mount ids, device numbers).
fn mount_points(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let (_, after) = line.split_once(" - ").unwrap();
            format!(
                "{} {} {}",
                fields[4],
                fields[5],
                after.split(' ').next().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn a_call_in_a_sandbox_built_ahead_finds_nothing_of_the_call_before() {
    let fixture = start(
        &[hostile("hostile", "p")],
        &[("p", profile(&["$WORKSPACE"], &[], &[]))],
    )
    .await;
    let ws = workspace(&fixture, "ws", 42020, &[("file.txt", "content\n")]);
    let identity = json!({"attack": "identity"});
    let fresh = report(&attack(&fixture, "hostile", identity.clone(), Some(&ws)).await);

    let traces = report(
        &attack(
            &fixture,
            "hostile",
            json!({"attack": "leave_traces"}),
            Some(&ws),
        )
        .await,
    );
    assert_eq!(traces["mount"], "EPERM", "{traces}");
    // The next call's sandbox is built while this one runs, from nothing of it.
    let spare = parked_spare(42020).await;
    let after = report(&attack(&fixture, "hostile", identity.clone(), Some(&ws)).await);
    let still_parked = std::fs::read_to_string(format!("/proc/{spare}/status"))
        .is_ok_and(|status| status.starts_with("Name:\tairlock-spare"));
    assert!(
        !still_parked,
        "the call did not run in the sandbox built ahead"
    );
    // Built while `after` ran: its network namespace may be the one `leave_traces` left,
    // where the abstract socket may still wait for the garbage collector.
    let later = report(&attack(&fixture, "hostile", identity, Some(&ws)).await);
    assert_eq!(fresh["unix_sockets"], json!([]), "{fresh}");
    for call in [&after, &later] {
        assert_eq!(call["unix_sockets"], json!([]), "{call}");
        assert_eq!(call["left_socket"]["error"], "ECONNREFUSED", "{call}");
    }

    assert_eq!(after["tmp"], json!([]), "{after}");
    assert_eq!(after["processes"], json!([1]), "{after}");
    assert_eq!(after["env"], fresh["env"]);
    assert_eq!(after["umask"], fresh["umask"]);
    assert_eq!(after["hostname"], fresh["hostname"]);
    assert_eq!(after["status"], fresh["status"]);
    assert_eq!(after["limits"], fresh["limits"]);
    assert_eq!(
        mount_points(after["mounts"].as_str().unwrap()),
        mount_points(fresh["mounts"].as_str().unwrap())
    );
    assert_no_processes_left(42020).await;
}
