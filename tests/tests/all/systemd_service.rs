//! `airlockd` as its systemd units run it: started by its socket unit (the socket handed
//! over, `--listen systemd`), telling systemd when it is ready, reloading and stopping
//! (`Type=notify`), and reloading its tools on SIGHUP (`ExecReload=`). The units themselves
//! are checked by deploy/test.sh; systemd does not run on these machines, so its own
//! `systemd-socket-activate` and a datagram socket in the test's place stand in for it.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonProcess, ToolsDir, airlockd_command, repo_root, test_module};

/// The socket systemd reads notifications from, in the test's place.
struct Notifications(UnixDatagram);

impl Notifications {
    fn bind(path: &Path) -> Notifications {
        let socket = UnixDatagram::bind(path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Notifications(socket)
    }

    /// The next notification's `NAME=value` lines.
    fn next(&self) -> Vec<String> {
        let mut buffer = [0u8; 4096];
        let read = self
            .0
            .recv(&mut buffer)
            .expect("a notification within a minute");
        String::from_utf8_lossy(&buffer[..read])
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test]
async fn socket_activated_it_notifies_systemd_and_reloads_its_tools_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("airlockd.sock");
    let notify_path = dir.path().join("notify");
    let notifications = Notifications::bind(&notify_path);
    let tools = ToolsDir::new();
    tools.add_file("echo", &test_module("echo"), "");
    let state = dir.path().join("state");
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let mut daemon = DaemonProcess::socket_activated(
        &[
            "--tools-dir",
            tools.path().to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--workspace-root",
            root.to_str().unwrap(),
        ],
        &repo_root(),
        &socket,
        &[("NOTIFY_SOCKET", notify_path.to_str().unwrap())],
    )
    .await;
    let ready = notifications.next();
    assert!(ready.contains(&"READY=1".to_owned()), "{ready:?}");
    assert!(
        ready
            .iter()
            .any(|line| line.starts_with("STATUS=serving ") && line.contains("airlockd.sock")),
        "{ready:?}"
    );
    assert!(daemon.tool_names().await.contains(&"echo".to_owned()));

    tools.add_file("added", &test_module("echo"), "");
    daemon.signal(libc::SIGHUP);
    let reloading = notifications.next();
    assert!(
        reloading.contains(&"RELOADING=1".to_owned()),
        "{reloading:?}"
    );
    assert!(
        reloading
            .iter()
            .any(|line| line.starts_with("MONOTONIC_USEC=")),
        "{reloading:?}"
    );
    let reloaded = notifications.next();
    assert!(reloaded.contains(&"READY=1".to_owned()), "{reloaded:?}");
    let names = daemon.tool_names().await;
    assert!(
        names.contains(&"added".to_owned()) && names.contains(&"echo".to_owned()),
        "{names:?}\n{}",
        daemon.log()
    );
    daemon.await_log("tools reloaded").await;

    daemon.signal(libc::SIGTERM);
    let stopping = notifications.next();
    assert!(stopping.contains(&"STOPPING=1".to_owned()), "{stopping:?}");
    let status = daemon.wait().await;
    assert!(status.success(), "{status:?}\n{}", daemon.log());
    // The socket is its unit's: the daemon leaves it for the next start.
    assert!(socket.exists(), "the socket unit's socket was removed");
}

#[tokio::test]
async fn without_a_socket_handed_over_or_with_trust_on_an_open_one_it_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let alone = airlockd_command(
        &["--state-dir", state.to_str().unwrap()],
        &repo_root(),
        &airlock_tests::ProcessOptions {
            listen: "systemd".into(),
            ..Default::default()
        },
    )
    .output()
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&alone.stderr);
    assert!(!alone.status.success(), "{said}");
    assert!(
        said.contains("--listen systemd: no socket was handed over"),
        "{said}"
    );

    // A socket every user may write to, trusted without tokens: refused, since anyone
    // would act as the default tenant. (The activator makes it 0644; a unit's
    // SocketMode=0666 would make it so, as the chmod does before the daemon starts.)
    let socket = dir.path().join("open.sock");
    let mut activator = tokio::process::Command::new("systemd-socket-activate")
        .arg(format!("--listen={}", socket.display()))
        .arg(airlock_tests::cargo_bin("airlockd"))
        .args(["--listen", "systemd", "--unix-socket-trust", "--state-dir"])
        .arg(&state)
        .current_dir(repo_root())
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(tokio::time::Instant::now() < deadline, "never bound");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let _first = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(60), activator.wait())
        .await
        .expect("exits")
        .unwrap();
    let mut said = String::new();
    use tokio::io::AsyncReadExt as _;
    activator
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .await
        .unwrap();
    assert!(!refused.success(), "{said}");
    assert!(
        said.contains("--unix-socket-trust on unix:") && said.contains("SocketMode=0600"),
        "{said}"
    );
}

/// The ids the next test runs the daemon as: no user of the host's, as a system user of its
/// own would be.
const UNPRIVILEGED: u32 = 64_123;

/// `airlockd` run as [`UNPRIVILEGED`], serving the shipped tools, until dropped.
struct Unprivileged {
    /// What it logged until it served.
    log: String,
    endpoint: String,
    token: String,
    /// Its workspace root, which that user owns.
    root: std::path::PathBuf,
    _daemon: tokio::process::Child,
    _dir: tempfile::TempDir,
}

/// Starts `airlockd` as [`UNPRIVILEGED`] with `capabilities` (as `setpriv` names them:
/// `+sys_admin,…`; empty for none) ambient and as the bounding set, and no new privileges,
/// as the unit's `AmbientCapabilities=`, `CapabilityBoundingSet=` and `NoNewPrivileges=`
/// make it; waits until it serves.
async fn start_unprivileged(capabilities: &str) -> Unprivileged {
    use std::os::unix::fs::{PermissionsExt as _, chown};
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Its own copies: the checkout may lie where that user cannot look.
    let airlockd = dir.path().join("airlockd");
    std::fs::copy(airlock_tests::cargo_bin("airlockd"), &airlockd).unwrap();
    let profiles = dir.path().join("profiles");
    std::fs::create_dir(&profiles).unwrap();
    for entry in std::fs::read_dir(repo_root().join("sandbox-profiles")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, profiles.join(path.file_name().unwrap())).unwrap();
    }
    let tools = ToolsDir::new();
    std::fs::set_permissions(tools.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for tool in ["write_file", "workspace_grep"] {
        tools.add_plugin(tool);
    }
    let tools_dir = dir.path().join("tools");
    std::fs::rename(tools.path(), &tools_dir).unwrap();
    let (state, root) = (dir.path().join("state"), dir.path().join("root"));
    for owned in [&state, &root] {
        std::fs::create_dir(owned).unwrap();
        chown(owned, Some(UNPRIVILEGED), Some(UNPRIVILEGED)).unwrap();
    }
    let bounding = if capabilities.is_empty() {
        "-all".to_owned()
    } else {
        format!("-all,{capabilities}")
    };
    let mut setpriv = tokio::process::Command::new("setpriv");
    setpriv.args([
        "--reuid",
        &UNPRIVILEGED.to_string(),
        "--regid",
        &UNPRIVILEGED.to_string(),
        "--clear-groups",
        "--no-new-privs",
        "--bounding-set",
        &bounding,
    ]);
    if !capabilities.is_empty() {
        setpriv.args(["--inh-caps", capabilities, "--ambient-caps", capabilities]);
    }
    let mut daemon = setpriv
        .arg(&airlockd)
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(&state)
        .arg("--profiles-dir")
        .arg(&profiles)
        .arg("--tools-dir")
        .arg(&tools_dir)
        .arg("--workspace-root")
        .arg(&root)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("setpriv (util-linux) starts");
    use tokio::io::AsyncBufReadExt as _;
    let mut lines = tokio::io::BufReader::new(daemon.stderr.take().unwrap()).lines();
    let mut log = String::new();
    let serving = loop {
        let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("airlockd serves within two minutes")
            .unwrap()
            .unwrap_or_else(|| panic!("airlockd exited before serving:\n{log}"));
        log.push_str(&line);
        log.push('\n');
        if line.contains("airlockd serving") {
            break line;
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let addr = serving
        .split("listen=Some(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("a TCP address");
    let token = std::fs::read_to_string(state.join("token"))
        .unwrap()
        .trim()
        .to_owned();
    Unprivileged {
        log,
        endpoint: format!("http://{addr}"),
        token,
        root,
        _daemon: daemon,
        _dir: dir,
    }
}

impl Unprivileged {
    async fn exec(
        &self,
        tool: &str,
        arguments: serde_json::Value,
        workspace: &Path,
    ) -> pb::ToolResult {
        let channel = airlock_tests::connect_with_token(&self.endpoint, &self.token).await;
        let mut events = pb::tools_client::ToolsClient::new(channel)
            .execute_tool(pb::ExecuteToolRequest {
                tool: tool.into(),
                arguments_json: arguments.to_string(),
                workspace: workspace.to_str().unwrap().into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        while let Some(event) = events.message().await.unwrap() {
            if let Some(pb::execute_tool_event::Event::Finished(result)) = event.event {
                return result;
            }
        }
        panic!("no result")
    }
}

/// Run as a user of its own, the daemon needs exactly the capabilities the packaged unit
/// grants (deploy/debian/test.sh runs a write and a command with them); with fewer, it serves
/// what it can and names what it lacks for the rest.
#[tokio::test]
async fn as_a_user_of_its_own_it_names_each_capability_it_lacks() {
    let unit = std::fs::read_to_string(repo_root().join("deploy/debian/airlockd.service"))
        .expect("the unit");
    let granted: Vec<String> = unit
        .lines()
        .find_map(|line| line.strip_prefix("AmbientCapabilities="))
        .expect("the unit grants capabilities")
        .split_whitespace()
        .map(|name| format!("+{}", name.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert_eq!(
        granted,
        ["+sys_admin", "+setuid", "+setgid", "+dac_override"],
        "the unit's capabilities changed: this test and SECURITY.md say why each is needed"
    );

    let all = start_unprivileged(&granted.join(",")).await;
    assert!(
        !all.log.contains("will be refused") && !all.log.contains("unavailable"),
        "with the unit's capabilities nothing is refused:\n{}",
        all.log
    );
    // A write through the overlay, then sandbox after sandbox: each one's first process
    // clears the daemon's dumpable flag as it takes its ids, which the next one's id maps
    // need set (engine/process/sys.rs).
    let workspace = all.root.join("w");
    std::fs::create_dir(&workspace).unwrap();
    std::os::unix::fs::chown(&workspace, Some(UNPRIVILEGED), Some(UNPRIVILEGED)).unwrap();
    let wrote = all
        .exec(
            "write_file",
            serde_json::json!({"path": "a.txt", "content": "needle\n"}),
            &workspace,
        )
        .await;
    assert_eq!(wrote.status(), pb::ToolStatus::Ok, "{wrote:?}");
    for _ in 0..4 {
        let found = all
            .exec(
                "workspace_grep",
                serde_json::json!({"pattern": "needle"}),
                &workspace,
            )
            .await;
        assert_eq!(found.status(), pb::ToolStatus::Ok, "{found:?}");
        assert!(found.content.contains("a.txt"), "{found:?}");
    }

    let without_dac = start_unprivileged(&granted[..3].join(",")).await.log;
    assert!(
        without_dac.contains("tools that write the workspace will be refused")
            && without_dac.contains("lacks CAP_DAC_OVERRIDE"),
        "{without_dac}"
    );
    assert!(
        !without_dac.contains("process tools are unavailable"),
        "{without_dac}"
    );

    let none = start_unprivileged("").await.log;
    assert!(
        none.contains("process tools are unavailable")
            && none.contains("the daemon lacks CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID"),
        "{none}"
    );
    assert!(
        none.contains("tools that write the workspace will be refused")
            && none.contains("CAP_SETUID"),
        "{none}"
    );
}
