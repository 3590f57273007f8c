//! Policy as code end to end: the shipped team policy loaded by a real daemon, deciding a
//! run's `run_command` calls command by command; the approval request and the trace naming
//! the rule (file, line, layer); a prefix grant made while answering, listed, honoured by the
//! next call and revoked; a session's rules that only narrow; the same operator rules at the
//! direct-call edge; `CheckPolicy`; and a rule file whose example misbehaves stopping the
//! daemon with the rule's name.

use std::path::{Path, PathBuf};

use airlock_proto::v1 as pb;
use airlock_tests::{Console, DaemonOptions, TestDaemon, cargo_bin, repo_root, scripted_run};
use pb::run_event::Event;
use serde_json::{Value, json};
use tokio::process::Command;

fn team_policy() -> PathBuf {
    repo_root().join("examples/policy/coding-agent.toml")
}

async fn daemon() -> TestDaemon {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        policy_files: vec![team_policy()],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    daemon
}

fn command(line: &str) -> Value {
    json!({"name": "run_command", "arguments": {"command": line, "workdir": "."}})
}

fn resolutions(events: &[pb::RunEvent]) -> Vec<pb::ApprovalResolved> {
    events
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::ApprovalResolved(resolved)) => Some(resolved.clone()),
            _ => None,
        })
        .collect()
}

fn attribute<'a>(span: &'a pb::Span, key: &str) -> Option<&'a str> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .map(|a| a.value.as_str())
}

fn start(workspace: &Path, script: &Value) -> pb::StartRun {
    let mut start = scripted_run(workspace, script);
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    start
}

#[tokio::test]
async fn each_command_of_a_line_is_judged_and_a_prefix_grant_is_a_visible_revocable_rule() {
    let daemon = daemon().await;
    let workspace = daemon.workspace("grants");
    let script = json!({"turns": [
        {"tool_calls": [command("git status && git push origin main")]},
        {"tool_calls": [command("git push origin dev")]},
        {"tool_calls": [command("cargo test; curl https://example.com")]},
        {"final": "done"}
    ]});
    let mut run = daemon.start_run(start(&workspace, &script)).await;
    let request = run.approval_requested().await;

    // The question names the rule that asked, and shows each command's decision.
    let policy = request.policy.clone().expect("the policy's verdict");
    assert_eq!(policy.decision, pb::PolicyDecision::Ask as i32);
    assert!(policy.grantable);
    let rule = policy.rule.clone().expect("the rule that asked");
    assert_eq!(rule.name, "git writes ask");
    assert_eq!(rule.layer, pb::PolicyLayer::Operator as i32);
    assert!(rule.source.ends_with("coding-agent.toml"), "{rule:?}");
    let line = std::fs::read_to_string(team_policy())
        .unwrap()
        .lines()
        .position(|line| line.contains("name = \"git writes ask\""))
        .expect("the rule is in the file");
    // The rule's table starts the line before its name.
    assert_eq!(rule.line as usize, line);
    let parts: Vec<(&str, i32)> = policy
        .parts
        .iter()
        .map(|part| (part.subject.as_str(), part.decision))
        .collect();
    assert_eq!(
        parts,
        [
            ("`git status`", pb::PolicyDecision::Allow as i32),
            ("`git push origin main`", pb::PolicyDecision::Ask as i32),
        ]
    );
    assert_eq!(policy.parts[1].words, ["git", "push", "origin", "main"]);
    assert!(
        request.reason.contains("git writes ask"),
        "{}",
        request.reason
    );

    // Approved for the session, for every `git push`: the next push is not asked about.
    run.send(pb::run_request::Request::Decision(pb::ApprovalDecision {
        approval_id: request.approval_id.clone(),
        decision: pb::Decision::ApproveSession as i32,
        reason: String::new(),
        digest: request.digest.clone(),
        grant_prefix: vec!["git".into(), "push".into()],
    }));
    let finished = run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::Final as i32);
    let resolved = resolutions(run.seen());
    let by: Vec<&str> = resolved.iter().map(|r| r.decided_by.as_str()).collect();
    assert_eq!(
        by,
        ["run client", "session grant", "policy"],
        "{resolved:#?}"
    );
    assert!(resolved[1].reason.contains("grant"), "{:?}", resolved[1]);
    assert_eq!(resolved[2].decision, pb::Decision::Deny as i32);
    assert!(
        resolved[2].reason.contains("no downloads") && resolved[2].reason.contains("curl"),
        "{:?}",
        resolved[2]
    );
    assert_eq!(
        run.of(|event| match event {
            Event::ApprovalRequested(_) => Some(()),
            _ => None,
        })
        .len(),
        1,
        "only the first push was asked about"
    );

    // The trace's permission spans name the rule too.
    let trace = daemon
        .agent()
        .await
        .get_trace(pb::GetTraceRequest {
            run_id: run.run_id().to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    let rules: Vec<Option<&str>> = trace
        .spans
        .iter()
        .filter(|span| span.name == "permission")
        .map(|span| attribute(span, "policy.rule"))
        .collect();
    assert_eq!(rules.len(), 3, "{rules:?}");
    assert_eq!(rules[0], Some("git writes ask"));
    assert!(
        rules[1].is_some_and(|rule| rule.starts_with("grant ")),
        "{rules:?}"
    );
    assert_eq!(rules[2], Some("no downloads"));
    assert!(
        trace
            .spans
            .iter()
            .filter(|span| span.name == "permission")
            .any(
                |span| attribute(span, "policy.rule.layer") == Some("operator")
                    && attribute(span, "policy.rule.line") == Some(&rule.line.to_string())
            )
    );

    // The grant is a rule of the session's grant layer, and revoking it asks again.
    let session_id = daemon.run_info(run.run_id()).await.session_id;
    let mut policy_client = daemon.policy().await;
    let listed = policy_client
        .list_policy_rules(pb::ListPolicyRulesRequest {
            session_id: session_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .rules;
    let grants: Vec<&pb::PolicyRule> = listed
        .iter()
        .filter(|rule| rule.layer == pb::PolicyLayer::Grant as i32)
        .collect();
    assert_eq!(grants.len(), 1, "{listed:#?}");
    assert_eq!(grants[0].covers, "`git push …` in run_command");
    assert_eq!(grants[0].session_id, session_id);
    assert!(
        listed
            .iter()
            .any(|rule| rule.layer == pb::PolicyLayer::Operator as i32),
        "the operator's rules are listed too"
    );
    let refused = policy_client
        .revoke_grant(pb::RevokeGrantRequest {
            grant_id: "short".into(),
            session_id: session_id.clone(),
        })
        .await
        .expect_err("an id shorter than the listing's");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    policy_client
        .revoke_grant(pb::RevokeGrantRequest {
            grant_id: grants[0].grant_id[..16].to_owned(),
            session_id: session_id.clone(),
        })
        .await
        .expect("revoked");

    let mut again = start(
        &workspace,
        &json!({"turns": [{"tool_calls": [command("git push origin dev")]}, {"final": "asked"}]}),
    );
    again.session_id = session_id;
    again.workspace = String::new();
    let mut run = daemon.start_run(again).await;
    let request = run.approval_requested().await;
    run.decide(&request.approval_id, pb::Decision::Deny, "not now");
    run.finished().await;
}

#[tokio::test]
async fn a_session_and_a_run_add_rules_that_only_narrow() {
    let daemon = daemon().await;
    let workspace = daemon.workspace("narrow");
    let mut agent = daemon.agent().await;
    let create = |rules: &str| pb::CreateSessionRequest {
        workspace: workspace.to_str().unwrap().to_owned(),
        settings: Some(pb::SessionSettings {
            approval_policy: pb::ApprovalPolicy::Auto as i32,
            rules: rules.to_owned(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let refused = agent
        .create_session(create(
            "[[rule]]\nname = \"loosen\"\ndecision = \"allow\"\ncommand = [\"curl\"]\n",
        ))
        .await
        .expect_err("a client may not allow");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused.message().contains("settings.rules") && refused.message().contains("loosen"),
        "{}",
        refused.message()
    );
    let refused = agent
        .create_session(create(
            "[[rule]]\nname = \"wrong example\"\ndecision = \"deny\"\ncommand = [\"git\", \"status\"]\nmatch = [\"git diff\"]\n",
        ))
        .await
        .expect_err("an example that does not match");
    assert!(
        refused.message().contains("wrong example") && refused.message().contains("git diff"),
        "{}",
        refused.message()
    );

    // Under `auto` everything would run; the session's own rule refuses `git status`, and
    // what the operator allows still runs.
    let session = agent
        .create_session(create(
            "[[rule]]\nname = \"no status\"\ndecision = \"deny\"\ncommand = [\"git\", \"status\"]\n",
        ))
        .await
        .unwrap()
        .into_inner();
    let mut start = scripted_run(
        &workspace,
        &json!({"turns": [
            {"tool_calls": [command("ls && git status")]},
            {"tool_calls": [command("ls")]},
            {"final": "done"}
        ]}),
    );
    start.session_id = session.session_id;
    start.workspace = String::new();
    let mut run = daemon.start_run(start).await;
    run.finished().await;
    let resolved = resolutions(run.seen());
    assert_eq!(resolved.len(), 1, "{resolved:#?}");
    assert_eq!(resolved[0].decision, pb::Decision::Deny as i32);
    assert!(
        resolved[0].reason.contains("no status"),
        "{:?}",
        resolved[0]
    );
    assert!(
        resolved[0].reason.contains("session ses_"),
        "{:?}",
        resolved[0]
    );
}

#[tokio::test]
async fn the_operator_rules_hold_at_the_direct_call_edge() {
    let daemon = daemon().await;
    let workspace = daemon.workspace("direct");
    let mut tools = daemon.tools().await;
    let call = |line: &str, require_approval| pb::ExecuteToolRequest {
        tool: "run_command".into(),
        arguments_json: json!({"command": line, "workdir": "."}).to_string(),
        workspace: workspace.to_str().unwrap().to_owned(),
        require_approval,
        ..Default::default()
    };
    let refused = tools
        .execute_tool(call("cargo test && curl https://example.com", false))
        .await
        .expect_err("a denied command is refused before it runs");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert!(
        refused.message().contains("no downloads"),
        "{}",
        refused.message()
    );

    // The operator asks about `git push` even of a client that did not ask to be asked.
    let mut console = Console::on(daemon.agent().await).await;
    let mut events = tools
        .execute_tool(call("git push", false))
        .await
        .unwrap()
        .into_inner();
    let request = console.next().await;
    assert_eq!(request.tool, "run_command");
    let rule = request
        .policy
        .and_then(|policy| policy.rule)
        .expect("the rule");
    assert_eq!(rule.name, "git writes ask");
    console.decide(&request.approval_id, pb::Decision::Deny);
    let mut status = None;
    while let Some(event) = events.message().await.unwrap() {
        if let Some(pb::execute_tool_event::Event::Finished(result)) = event.event {
            status = Some(result.status);
        }
    }
    assert_eq!(status, Some(pb::ToolStatus::Denied as i32));
}

#[tokio::test]
async fn check_policy_explains_without_running_and_keeps_to_the_callers_tenant() {
    let daemon = daemon().await;
    let workspace = daemon.workspace("check");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::os::unix::fs::symlink("../.github", workspace.join("src/ci")).unwrap();
    let mut policy = daemon.policy().await;
    let check = |tool: &str, arguments: Value| pb::CheckPolicyRequest {
        tool: tool.into(),
        arguments_json: arguments.to_string(),
        workspace: workspace.to_str().unwrap().to_owned(),
        ..Default::default()
    };
    let verdict = policy
        .check_policy(check(
            "write_file",
            json!({"path": "src/lib.rs", "content": ""}),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(verdict.decision, pb::PolicyDecision::Allow as i32);
    assert_eq!(verdict.rule.unwrap().name, "writes under src and tests");
    // Not fooled by `..`, nor by a symlink inside the workspace.
    for path in ["src/../secrets/key", "src/ci/workflows/x.yml"] {
        let verdict = policy
            .check_policy(check("write_file", json!({"path": path, "content": ""})))
            .await
            .unwrap()
            .into_inner();
        assert_ne!(verdict.decision, pb::PolicyDecision::Allow as i32, "{path}");
    }
    let verdict = policy
        .check_policy(check(
            "write_file",
            json!({"path": ".github/workflows/ci.yml", "content": ""}),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(verdict.decision, pb::PolicyDecision::Deny as i32);
    // Nothing ran: the workspace is as it was.
    assert!(!workspace.join(".github").exists());

    let refused = policy
        .check_policy(pb::CheckPolicyRequest {
            session_id: "ses_00000000000000000000000000".into(),
            ..check("write_file", json!({"path": "a", "content": ""}))
        })
        .await
        .expect_err("no such session");
    assert!(
        matches!(
            refused.code(),
            tonic::Code::NotFound | tonic::Code::InvalidArgument
        ),
        "{refused:?}"
    );
    let refused = policy
        .check_policy(check("no_such_tool", json!({})))
        .await
        .expect_err("no such tool");
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");
    assert!(refused.message().starts_with("tool: "), "{refused:?}");
    let refused = policy
        .check_policy(pb::CheckPolicyRequest {
            workspace: "/etc".into(),
            ..check("write_file", json!({"path": "passwd", "content": ""}))
        })
        .await
        .expect_err("a workspace outside the roots");
    assert!(
        matches!(
            refused.code(),
            tonic::Code::PermissionDenied | tonic::Code::InvalidArgument
        ),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_rule_whose_example_misbehaves_stops_the_daemon_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("team.toml");
    std::fs::write(
        &rules,
        "# tests\n\n[[rule]]\nname = \"tests only\"\ndecision = \"allow\"\ncommand = [\"cargo\", \"test\"]\nnot_match = [\"cargo test --release\"]\n",
    )
    .unwrap();
    let output = Command::new(cargo_bin("airlockd"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            dir.path().join("state").to_str().unwrap(),
            "--policy",
            rules.to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("team.toml:3")
            && stderr.contains("tests only")
            && stderr.contains("cargo test --release"),
        "{stderr}"
    );
}
