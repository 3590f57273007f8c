//! `airlock gc` against a real daemon: what finished long enough ago goes — the run with its
//! log, its session, a kept output — while a run that has not finished keeps everything and
//! goes on; only the operator's tenant may ask, and an age is needed when the daemon has no
//! retention of its own.

use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::cli::Cli;
use airlock_tests::{
    CI_TOKEN, DaemonOptions, TestDaemon, ToolsDir, ci_tenant, repo_root, scripted_run, test_module,
};
use serde_json::json;

#[tokio::test]
async fn gc_deletes_what_finished_and_keeps_what_has_not() {
    let tools = ToolsDir::new();
    tools.add_file(
        "big",
        &test_module("big_result"),
        "[output]\nmax_bytes = 100\ntruncate = \"head\"",
    );
    let secrets = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins"), tools.path().to_owned()],
        auth: ci_tenant(secrets.path(), &["*"]),
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("notes.txt"), "alpha\n").unwrap();

    // A finished run, a kept output, and a run waiting for an approval.
    let mut done = daemon
        .start_run(scripted_run(
            &workspace,
            &json!({"turns": [{"final": "done"}]}),
        ))
        .await;
    done.finished().await;
    let finished_id = done.run_id().to_owned();
    let big = daemon.exec("big", json!({"bytes": 5000}), None).await;
    assert!(big.result().truncated);
    let execution_id = big.result().execution_id.clone();
    let mut waiting_start = scripted_run(
        &workspace,
        &json!({"turns": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"final": "read"}
        ]}),
    );
    waiting_start.approval_policy = pb::ApprovalPolicy::Always as i32;
    let mut waiting = daemon.start_run(waiting_start).await;
    let request = waiting.approval_requested().await;
    tokio::time::sleep(Duration::from_millis(5)).await;

    // No age, and none configured: the command says what to pass.
    let no_age = Cli::new(&daemon.endpoint, &["gc"])
        .token(&daemon.token)
        .run()
        .await;
    assert_eq!(no_age.code, 64, "{no_age:?}");
    assert!(no_age.stderr.contains("--older-than"), "{}", no_age.stderr);

    // Another tenant may not.
    let forbidden = Cli::new(&daemon.endpoint, &["gc", "--older-than", "1ms"])
        .token(CI_TOKEN)
        .run()
        .await;
    assert_eq!(forbidden.code, 77, "{forbidden:?}");
    assert!(
        forbidden.stderr.contains("only the `default` tenant"),
        "{}",
        forbidden.stderr
    );

    let gc = Cli::new(&daemon.endpoint, &["gc", "--older-than", "1ms", "--json"])
        .token(&daemon.token)
        .run()
        .await;
    assert_eq!(gc.code, 0, "{gc:?}");
    let swept: serde_json::Value = serde_json::from_str(&gc.stdout).unwrap();
    assert_eq!(swept["runs"], 1, "{swept}");
    assert_eq!(swept["sessions"], 1, "{swept}");
    assert_eq!(swept["outputs"], 1, "{swept}");
    // The direct call's owner stays: an execution may run for up to an hour, and its owner
    // is what keeps other tenants from it.
    assert_eq!(swept["executions"], 0, "{swept}");

    let mut agent = pb::agent_client::AgentClient::new(daemon.authed_channel().await);
    let gone = agent
        .get_run(pb::GetRunRequest {
            run_id: finished_id,
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), tonic::Code::NotFound, "{gone:?}");
    let output = daemon
        .tools()
        .await
        .read_output(pb::ReadOutputRequest {
            execution_id,
            offset: 0,
            length: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(output.code(), tonic::Code::NotFound, "{output:?}");

    // The waiting run lost nothing: answered now, it runs to its end.
    waiting.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    let finished = waiting.finished().await;
    assert_eq!(finished.final_text, "read");
    let seqs: Vec<u64> = waiting.seen.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());

    let again = Cli::new(&daemon.endpoint, &["gc", "--older-than", "30d"])
        .token(&daemon.token)
        .run()
        .await;
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(
        again.stdout,
        "deleted 0 runs, 0 sessions, 0 kept outputs and 0 execution records older than 30 days\n"
    );
}
