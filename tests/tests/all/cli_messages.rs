//! What the `airlock` CLI says when something is wrong, class by class: the exit code of
//! the table in `airlock_client::exit_code`, and a message that names the flag, file or
//! command that fixes it — the same wording for the same mistake in every subcommand.

use std::path::Path;

use airlock_tests::cli::{Cli, CliRun};
use airlock_tests::{
    CI_TOKEN, DaemonOptions, TestDaemon, ToolsDir, ci_tenant, repo_root, test_module,
};

/// Runs `airlock --server ENDPOINT ARGS` in `cwd` with `token` (none: no token anywhere).
async fn airlock_in(
    endpoint: &str,
    cwd: &Path,
    token: Option<&str>,
    args: &[&str],
) -> (i32, String, String) {
    let mut cli = Cli::new(endpoint, args).current_dir(cwd);
    if let Some(token) = token {
        cli = cli.token(token);
    }
    let CliRun {
        code,
        stdout,
        stderr,
    } = cli.run().await;
    (code, stdout, stderr)
}

async fn daemon() -> (TestDaemon, ToolsDir, tempfile::TempDir) {
    let extra = ToolsDir::new();
    extra.add_file("spin", &test_module("spin"), "timeout_ms = 60000");
    extra.add_file("exit_code", &test_module("exit_code"), "");
    let secrets = tempfile::tempdir().unwrap();
    let mut auth = ci_tenant(secrets.path(), &["spin", "read_file"]);
    auth.tenants[0].max_concurrent_runs = Some(1);
    auth.tenants[0].max_concurrent_executions = Some(1);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins"), extra.path().to_owned()],
        auth,
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    (daemon, extra, secrets)
}

#[tokio::test]
async fn each_class_of_mistake_has_its_code_and_names_what_fixes_it() {
    let (daemon, _extra, _secrets) = daemon().await;
    let outside = tempfile::tempdir().unwrap();
    let at = outside.path();
    let token = Some(daemon.token.as_str());
    let endpoint = daemon.endpoint.as_str();

    // Usage: the same mistake, worded once, with one hint, whichever subcommand met it.
    for args in [
        &["tools", "exec", "nope"][..],
        &["tools", "show", "nope"],
        &["exec", "nope"],
    ] {
        let (code, _, stderr) = airlock_in(endpoint, at, token, args).await;
        assert_eq!(code, 64, "{args:?}: {stderr}");
        assert_eq!(
            stderr,
            "airlock: tool: no tool named `nope`\n\
             airlock: `airlock tools list` shows the tools airlockd serves\n",
            "{args:?}"
        );
    }
    // A workspace the daemon cannot use, named by its flag.
    let (code, _, stderr) = airlock_in(
        endpoint,
        at,
        token,
        &["tools", "exec", "read_file", "--workspace", "/nonexistent"],
    )
    .await;
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.starts_with("airlock: --workspace /nonexistent: "),
        "{stderr}"
    );
    // A file the command names that cannot be read.
    let (code, _, stderr) = airlock_in(
        endpoint,
        at,
        token,
        &[
            "tools",
            "exec",
            "read_file",
            "--args",
            "@/nonexistent/args.json",
        ],
    )
    .await;
    assert_eq!(code, 66, "{stderr}");
    assert!(stderr.contains("/nonexistent/args.json"), "{stderr}");

    // No token anywhere, and a wrong one: what to pass.
    let (code, _, stderr) = airlock_in(endpoint, at, None, &["tools", "list"]).await;
    assert_eq!(code, 77, "{stderr}");
    assert!(
        stderr.contains(
            "needs an access token, and none was given: pass --token TOKEN or set AIRLOCK_TOKEN"
        ),
        "{stderr}"
    );
    let (code, _, stderr) =
        airlock_in(endpoint, at, None, &["--token", "wrong", "tools", "list"]).await;
    assert_eq!(code, 77, "{stderr}");
    assert!(
        stderr.contains("does not accept the access token given with --token"),
        "{stderr}"
    );
    let (code, _, stderr) = airlock_in(endpoint, at, Some("wrong"), &["tools", "list"]).await;
    assert_eq!(code, 77, "{stderr}");
    assert!(
        stderr.contains("the access token in AIRLOCK_TOKEN"),
        "{stderr}"
    );

    // A tenant without the right, and one at its cap.
    let ci = Some(CI_TOKEN);
    let (code, _, stderr) = airlock_in(endpoint, at, ci, &["approvals"]).await;
    assert_eq!(code, 77, "{stderr}");
    assert!(
        stderr.contains("tenant `ci` may not answer approvals"),
        "{stderr}"
    );
    // The one-way approval calls refuse it the same way.
    let mut agent = airlock_proto::v1::agent_client::AgentClient::new(
        daemon.channel_with_token(CI_TOKEN).await,
    );
    let watch = agent
        .watch_approvals(airlock_proto::v1::WatchApprovalsRequest::default())
        .await
        .expect_err("no right to approvals");
    let decide = agent
        .decide_approval(airlock_proto::v1::ApprovalDecision::default())
        .await
        .expect_err("no right to approvals");
    for status in [watch, decide] {
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
        assert!(
            status.message().contains("may not answer approvals"),
            "{status:?}"
        );
    }
    // A call of the tenant's holds its only slot while it runs.
    let mut holder = airlock_proto::v1::tools_client::ToolsClient::new(
        daemon.channel_with_token(CI_TOKEN).await,
    );
    let mut running = holder
        .execute_tool(airlock_proto::v1::ExecuteToolRequest {
            tool: "spin".into(),
            arguments_json: "{}".into(),
            workspace: String::new(),
            timeout_ms: 0,
            require_approval: false,
        })
        .await
        .unwrap()
        .into_inner();
    let started = running.message().await.unwrap().unwrap();
    assert!(
        matches!(
            started.event,
            Some(airlock_proto::v1::execute_tool_event::Event::Started(_))
        ),
        "{started:?}"
    );
    let (code, _, stderr) = airlock_in(endpoint, at, ci, &["tools", "exec", "spin"]).await;
    drop(running);
    assert_eq!(code, 75, "{stderr}");
    assert!(stderr.contains("its limit"), "{stderr}");

    // Unavailable: nothing listens there (127.0.0.2: no test server binds there, so the
    // freed port cannot go to another test's server meanwhile).
    let closed = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (code, _, stderr) = airlock_in(&nowhere, at, token, &["tools", "list"]).await;
    assert_eq!(code, 69, "{stderr}");
    assert!(stderr.contains("is it running?"), "{stderr}");
}

#[tokio::test]
async fn the_tools_exit_code_is_labelled_as_the_tools() {
    let (daemon, _extra, _secrets) = daemon().await;
    let at = tempfile::tempdir().unwrap();
    let (code, _, stderr) = airlock_in(
        &daemon.endpoint,
        at.path(),
        Some(&daemon.token),
        &["tools", "exec", "exit_code", "--args", r#"{"code": 9}"#],
    )
    .await;
    assert_eq!(code, 1, "TOOL_ERROR: {stderr}");
    assert!(stderr.contains("status: TOOL_ERROR"), "{stderr}");
    assert!(stderr.contains("tool exit code: 9"), "{stderr}");
    assert!(!stderr.contains(", exit code:"), "{stderr}");
}

#[tokio::test]
async fn the_workspace_defaults_to_the_current_directory_inside_the_roots() {
    let (daemon, _extra, _secrets) = daemon().await;
    let project = daemon.workspace("project");
    std::fs::write(project.join("notes.txt"), "from the current directory\n").unwrap();
    let token = Some(daemon.token.as_str());
    let read = [
        "tools",
        "exec",
        "read_file",
        "--args",
        r#"{"path": "notes.txt"}"#,
    ];

    let (code, stdout, stderr) = airlock_in(&daemon.endpoint, &project, token, &read).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("from the current directory"), "{stdout}");

    // Outside the roots: refused before anything runs, naming the flag and the roots.
    let outside = tempfile::tempdir().unwrap();
    let roots = std::fs::canonicalize(daemon.workspace_root.path()).unwrap();
    let script = outside.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns": [{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}, {"final": "read"}]}"#,
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    for args in [&read[..], &["run", "read notes.txt", "--model", &model]] {
        let (code, _, stderr) = airlock_in(&daemon.endpoint, outside.path(), token, args).await;
        assert_eq!(code, 64, "{args:?}: {stderr}");
        assert!(
            stderr.contains("pass --workspace DIR"),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains(&roots.display().to_string()),
            "{args:?}: {stderr}"
        );
    }
    // No run was started for the refused one.
    let (code, stdout, _) =
        airlock_in(&daemon.endpoint, outside.path(), token, &["runs", "list"]).await;
    assert_eq!(code, 0);
    assert!(!stdout.contains("run_"), "{stdout}");

    // A run in the current directory finds its file.
    let (code, stdout, stderr) = airlock_in(
        &daemon.endpoint,
        &project,
        token,
        &[
            "run",
            "read notes.txt",
            "--model",
            &model,
            "--policy",
            "auto",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("read_file: OK"), "{stdout}");

    // `airlock info` says which roots those are.
    let (code, stdout, _) = airlock_in(&daemon.endpoint, outside.path(), token, &["info"]).await;
    assert_eq!(code, 0);
    assert!(
        stdout.contains(&format!("workspace roots: {}", roots.display())),
        "{stdout}"
    );
}

#[tokio::test]
async fn cancelling_a_finished_run_is_done_already() {
    let (daemon, _extra, _secrets) = daemon().await;
    let workspace = daemon.workspace("project");
    let mut run = daemon
        .start_run(airlock_tests::scripted_run(
            &workspace,
            &serde_json::json!({"turns": [{"final": "done"}]}),
        ))
        .await;
    run.finished().await;
    let run_id = run.run_id().to_owned();
    let at = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = airlock_in(
        &daemon.endpoint,
        at.path(),
        Some(&daemon.token),
        &["runs", "cancel", &run_id],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        format!("{stdout}{stderr}").contains("has already finished; nothing to cancel"),
        "{stdout}{stderr}"
    );
    let (code, _, stderr) = airlock_in(
        &daemon.endpoint,
        at.path(),
        Some(&daemon.token),
        &["runs", "show", &format!("run_{}", "0".repeat(32))],
    )
    .await;
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("`airlock runs list` shows your runs"),
        "{stderr}"
    );
}
