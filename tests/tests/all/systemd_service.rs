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

async fn served_names(daemon: &DaemonProcess) -> Vec<String> {
    pb::tools_client::ToolsClient::new(daemon.channel().await)
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools
        .into_iter()
        .map(|tool| tool.name)
        .collect()
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
    assert!(served_names(&daemon).await.contains(&"echo".to_owned()));

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
    let names = served_names(&daemon).await;
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
