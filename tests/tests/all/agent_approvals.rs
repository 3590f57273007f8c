//! Approvals end to end: each policy, previews, approve / deny / session grants / deadlines,
//! decisions that must not count (forged, replayed, for another run), and approver consoles
//! that come and go.

use std::path::{Path, PathBuf};
use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{Console, DaemonOptions, RunStream, TestDaemon, repo_root, scripted_run};
use pb::run_event::Event;
use serde_json::{Value, json};

pub(crate) async fn daemon() -> TestDaemon {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    daemon
}

pub(crate) fn workspace(daemon: &TestDaemon, name: &str) -> PathBuf {
    let workspace = daemon.workspace(name);
    std::fs::write(
        workspace.join("calc.py"),
        "def mean(v):\n    return sum(v) / (len(v) - 1)\n",
    )
    .unwrap();
    workspace
}

pub(crate) const FIXED: &str = "def mean(v):\n    return sum(v) / len(v)\n";

pub(crate) fn write_call() -> Value {
    json!({"name": "write_file", "arguments": {"path": "calc.py", "content": FIXED}})
}

/// Writes the fix, then answers depending on what the model was told.
pub(crate) fn write_then_react() -> Value {
    json!({"turns": [
        {"tool_calls": [write_call()]},
        {"alternatives": [
            // The delay keeps the run open for decisions sent after the call (replays).
            {"when": {"status": "OK"}, "final": "written", "delay_ms": 200},
            {"when": {"contains": "not today"}, "final": "the approver said not today"},
            {"when": {"contains": "deadline"}, "final": "nobody answered"},
            {"final": "denied"}
        ]}
    ]})
}

pub(crate) fn start(workspace: &Path, script: &Value, policy: pb::ApprovalPolicy) -> pb::StartRun {
    let mut start = scripted_run(workspace, script);
    start.approval_policy = policy as i32;
    start
}

/// A run in `workspace` waiting for approval of the write of the fix, with its request.
pub(crate) async fn waiting_write(
    daemon: &TestDaemon,
    workspace: &Path,
) -> (RunStream, pb::ApprovalRequest) {
    let mut run = daemon
        .start_run(start(
            workspace,
            &write_then_react(),
            pb::ApprovalPolicy::Risky,
        ))
        .await;
    let request = run.approval_requested().await;
    (run, request)
}

/// The next message of a server stream, which must come within 30 s and before it ends.
async fn next<T>(stream: &mut tonic::Streaming<T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .expect("a message within 30 s")
        .unwrap()
        .expect("the stream stays open")
}

pub(crate) fn resolutions(run: &RunStream) -> Vec<pb::ApprovalResolved> {
    run.of(|event| match event {
        Event::ApprovalResolved(resolved) => Some(resolved.clone()),
        _ => None,
    })
}

fn rejections(run: &RunStream) -> Vec<pb::DecisionRejected> {
    run.of(|event| match event {
        Event::DecisionRejected(rejected) => Some(rejected.clone()),
        _ => None,
    })
}

#[tokio::test]
async fn a_risky_write_waits_for_approval_with_its_diff_then_runs() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let (mut run, request) = waiting_write(&daemon, &workspace).await;
    assert_eq!(request.tool, "write_file");
    assert_eq!(request.risk, pb::Risk::Write as i32);
    assert_eq!(request.profile, "workspace-write");
    assert_eq!(request.digest.len(), 64);
    assert!(request.approval_id.starts_with("apr_"));
    let preview = request.preview.clone().unwrap();
    assert_eq!(preview.kind, "diff", "{preview:?}");
    assert!(
        preview.text.contains("-    return sum(v) / (len(v) - 1)"),
        "{}",
        preview.text
    );
    assert!(
        preview.text.contains("+    return sum(v) / len(v)"),
        "{}",
        preview.text
    );
    // Nothing was written by asking, nor by the preview.
    assert!(
        std::fs::read_to_string(workspace.join("calc.py"))
            .unwrap()
            .contains("len(v) - 1")
    );
    let info = daemon.run_info(run.run_id()).await;
    assert_eq!(info.state, pb::RunState::WaitingForApproval as i32);

    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    let finished = run.finished().await;
    assert_eq!(finished.final_text, "written");
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        FIXED
    );
    let resolved = resolutions(&run);
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].decision, pb::Decision::ApproveOnce as i32);
    assert_eq!(resolved[0].decided_by, "run client");
}

#[tokio::test]
async fn a_denial_reaches_the_model_with_its_reason() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let (mut run, request) = waiting_write(&daemon, &workspace).await;
    run.decide(&request.approval_id, pb::Decision::Deny, "not today");
    let finished = run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::Final as i32);
    assert_eq!(finished.final_text, "the approver said not today");
    assert!(
        std::fs::read_to_string(workspace.join("calc.py"))
            .unwrap()
            .contains("len(v) - 1")
    );
    assert!(
        run.of(|e| matches!(e, Event::ToolStarted(_)).then_some(()))
            .is_empty(),
        "a denied call ran"
    );
}

#[tokio::test]
async fn no_answer_by_the_deadline_is_a_denial_and_the_run_goes_on() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let mut start = start(&workspace, &write_then_react(), pb::ApprovalPolicy::Risky);
    start.approval_timeout_ms = 300;
    let mut run = daemon.start_run(start).await;
    let finished = run.finished().await;
    assert_eq!(finished.final_text, "nobody answered");
    let resolved = resolutions(&run);
    assert_eq!(resolved[0].decided_by, "deadline");
    assert_eq!(resolved[0].decision, pb::Decision::Deny as i32);
}

#[tokio::test]
async fn each_policy_asks_denies_or_runs_as_documented() {
    let daemon = daemon().await;
    let read_then_write = json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"tool_calls": [write_call()]},
        {"final": "done"}
    ]});

    // auto: nothing is asked, both calls run.
    let workspace_auto = workspace(&daemon, "auto");
    let mut run = daemon
        .start_run(start(
            &workspace_auto,
            &read_then_write,
            pb::ApprovalPolicy::Auto,
        ))
        .await;
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    assert!(resolutions(&run).is_empty());
    assert_eq!(
        std::fs::read_to_string(workspace_auto.join("calc.py")).unwrap(),
        FIXED
    );

    // never: the read runs, the write is denied without asking anyone.
    let workspace_never = workspace(&daemon, "never");
    let mut run = daemon
        .start_run(start(
            &workspace_never,
            &read_then_write,
            pb::ApprovalPolicy::Never,
        ))
        .await;
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    assert!(
        run.of(|e| matches!(e, Event::ApprovalRequested(_)).then_some(()))
            .is_empty()
    );
    assert_eq!(
        run.of(|e| matches!(e, Event::ToolFinished(_)).then_some(()))
            .len(),
        1
    );
    assert!(
        std::fs::read_to_string(workspace_never.join("calc.py"))
            .unwrap()
            .contains("len(v) - 1")
    );

    // never, with stop_on_denial: the denial ends the run.
    let mut stop = start(
        &workspace_never,
        &read_then_write,
        pb::ApprovalPolicy::Never,
    );
    stop.stop_on_denial = true;
    let finished = daemon.start_run(stop).await.finished().await;
    assert_eq!(finished.reason, pb::StopReason::PermissionDenied as i32);
    assert!(finished.detail.contains("never"), "{}", finished.detail);

    // always: even the read-only call is asked.
    let workspace_always = workspace(&daemon, "always");
    let mut run = daemon
        .start_run(start(
            &workspace_always,
            &read_then_write,
            pb::ApprovalPolicy::Always,
        ))
        .await;
    let first = run.approval_requested().await;
    assert_eq!(first.tool, "read_file");
    assert_eq!(first.preview.unwrap().kind, "arguments");
    run.decide(&first.approval_id, pb::Decision::ApproveOnce, "");
    let second = run.approval_requested().await;
    assert_eq!(second.tool, "write_file");
    run.decide(&second.approval_id, pb::Decision::ApproveOnce, "");
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
}

#[tokio::test]
async fn a_session_approval_covers_the_same_call_and_nothing_else() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let other =
        json!({"name": "write_file", "arguments": {"path": "other.py", "content": "x = 1\n"}});
    let script = json!({"turns": [
        {"tool_calls": [write_call()]},
        {"tool_calls": [write_call()]},
        {"tool_calls": [other]},
        {"final": "done"}
    ]});
    let mut run = daemon
        .start_run(start(&workspace, &script, pb::ApprovalPolicy::Risky))
        .await;
    let first = run.approval_requested().await;
    run.decide(&first.approval_id, pb::Decision::ApproveSession, "");
    let asked_again = run.approval_requested().await;
    assert_eq!(
        asked_again.arguments_json,
        json!({"path": "other.py", "content": "x = 1\n"}).to_string()
    );
    run.decide(&asked_again.approval_id, pb::Decision::ApproveOnce, "");
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    let resolved = resolutions(&run);
    let by: Vec<&str> = resolved.iter().map(|r| r.decided_by.as_str()).collect();
    assert_eq!(by, ["run client", "session grant", "run client"]);

    // A later run in the same session is covered too.
    let session_id = run.of(|e| match e {
        Event::RunStarted(started) => Some(started.session_id.clone()),
        _ => None,
    })[0]
        .clone();
    let mut again = start(
        &workspace,
        &json!({"turns": [{"tool_calls": [write_call()]}, {"final": "ok"}]}),
        pb::ApprovalPolicy::Risky,
    );
    again.session_id = session_id;
    let mut run = daemon.start_run(again).await;
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    assert_eq!(resolutions(&run)[0].decided_by, "session grant");
}

#[tokio::test]
async fn forged_replayed_and_foreign_decisions_do_not_count() {
    let daemon = daemon().await;
    let workspace_a = workspace(&daemon, "a");
    let workspace_b = workspace(&daemon, "b");
    let mut run_a = daemon
        .start_run(start(
            &workspace_a,
            &write_then_react(),
            pb::ApprovalPolicy::Risky,
        ))
        .await;
    let mut run_b = daemon
        .start_run(start(
            &workspace_b,
            &write_then_react(),
            pb::ApprovalPolicy::Risky,
        ))
        .await;
    let request_a = run_a.approval_requested().await;
    let request_b = run_b.approval_requested().await;

    // Run B's client answers run A's request: refused, recorded in B's log.
    run_b.decide(&request_a.approval_id, pb::Decision::ApproveOnce, "");
    let rejected = run_b
        .until(|e| match e {
            Event::DecisionRejected(rejected) => Some(rejected.clone()),
            _ => None,
        })
        .await;
    assert!(
        rejected.reason.contains("another run"),
        "{}",
        rejected.reason
    );

    // An id nobody issued, and a digest of another call.
    run_a.decide("apr_0000000000000000", pb::Decision::ApproveOnce, "");
    run_a.send(pb::run_request::Request::Decision(pb::ApprovalDecision {
        approval_id: request_a.approval_id.clone(),
        decision: pb::Decision::ApproveOnce as i32,
        reason: String::new(),
        digest: request_b.digest.clone(),
        grant_prefix: Vec::new(),
    }));
    let first = run_a
        .until(|e| match e {
            Event::DecisionRejected(r) => Some(r.clone()),
            _ => None,
        })
        .await;
    assert!(
        first.reason.contains("no pending approval"),
        "{}",
        first.reason
    );
    let second = run_a
        .until(|e| match e {
            Event::DecisionRejected(r) => Some(r.clone()),
            _ => None,
        })
        .await;
    assert!(second.reason.contains("digest"), "{}", second.reason);

    // The right answer, with the right digest, counts; replaying it does not.
    run_a.send(pb::run_request::Request::Decision(pb::ApprovalDecision {
        approval_id: request_a.approval_id.clone(),
        decision: pb::Decision::ApproveOnce as i32,
        reason: String::new(),
        digest: request_a.digest.clone(),
        grant_prefix: Vec::new(),
    }));
    // Sent right behind the answer on the same stream, so it reaches the run while the
    // approved call is still running.
    run_a.decide(&request_a.approval_id, pb::Decision::ApproveOnce, "");
    let replayed = run_a
        .until(|e| match e {
            Event::DecisionRejected(r) => Some(r.clone()),
            _ => None,
        })
        .await;
    assert!(
        replayed.reason.contains("no pending approval"),
        "{}",
        replayed.reason
    );
    assert_eq!(run_a.finished().await.final_text, "written");
    assert_eq!(rejections(&run_a).len(), 3);

    // Run B is still waiting, untouched by all of that.
    run_b.decide(&request_b.approval_id, pb::Decision::Deny, "not today");
    assert_eq!(
        run_b.finished().await.final_text,
        "the approver said not today"
    );
}

#[tokio::test]
async fn two_consoles_see_the_request_and_only_the_first_answer_counts() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let mut first = Console::open(&daemon).await;
    let mut second = Console::open(&daemon).await;
    let mut run = daemon
        .start_run(start(
            &workspace,
            &write_then_react(),
            pb::ApprovalPolicy::Risky,
        ))
        .await;
    let seen_first = first.next_in(pb::ApprovalState::Pending).await;
    let seen_second = second.next_in(pb::ApprovalState::Pending).await;
    assert_eq!(seen_first.approval_id, seen_second.approval_id);
    assert_eq!(seen_first.preview.as_ref().unwrap().kind, "diff");

    first.decide(&seen_first.approval_id, pb::Decision::ApproveOnce);
    let resolved = second.next_in(pb::ApprovalState::Resolved).await;
    assert_eq!(resolved.approval_id, seen_first.approval_id);
    assert!(
        resolved.detail.contains("approved once"),
        "{}",
        resolved.detail
    );
    second.decide(&seen_first.approval_id, pb::Decision::Deny);
    let refused = second.next_in(pb::ApprovalState::DecisionRejected).await;
    assert!(
        refused.detail.contains("no pending approval"),
        "{}",
        refused.detail
    );

    assert_eq!(run.finished().await.final_text, "written");
    assert_eq!(resolutions(&run)[0].decided_by, "approver");
}

#[tokio::test]
async fn a_console_that_drops_and_returns_gets_the_pending_request_again() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let (mut run, asked) = waiting_write(&daemon, &workspace).await;
    {
        let mut console = Console::open(&daemon).await;
        let pending = console.next_in(pb::ApprovalState::Pending).await;
        assert_eq!(pending.approval_id, asked.approval_id);
        // Gone without answering.
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut console = Console::open(&daemon).await;
    let pending = console.next_in(pb::ApprovalState::Pending).await;
    assert_eq!(
        pending.approval_id, asked.approval_id,
        "the request is still pending"
    );
    console.decide(&pending.approval_id, pb::Decision::ApproveOnce);
    assert_eq!(run.finished().await.final_text, "written");
}

#[tokio::test]
async fn a_run_goes_on_when_its_client_disconnects_and_can_be_approved_by_a_console() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let mut console = Console::open(&daemon).await;
    let run_id = {
        let (run, _) = waiting_write(&daemon, &workspace).await;
        run.run_id().to_owned()
        // The run's own client leaves here.
    };
    let pending = console.next_in(pb::ApprovalState::Pending).await;
    assert_eq!(pending.run_id, run_id);
    console.decide(&pending.approval_id, pb::Decision::ApproveOnce);
    // Another client follows the run to its end from the start of its log.
    let mut follower = daemon
        .open_run(pb::run_request::Request::Attach(pb::AttachRun {
            run_id: run_id.clone(),
            after_seq: 0,
        }))
        .await
        .unwrap();
    let finished = follower.finished().await;
    assert_eq!(finished.final_text, "written");
    assert_eq!(follower.seen[0].seq, 1);
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        FIXED
    );
}

/// WatchRun, WatchApprovals and DecideApproval: the calls of a client that cannot stream both
/// ways (a browser over gRPC-Web) do what Run and Approvals do, with every refusal a status.
#[tokio::test]
async fn a_run_is_watched_and_approved_with_one_way_streams_and_unary_decisions() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let mut agent = daemon.agent().await;
    let run_id = {
        let (run, _) = waiting_write(&daemon, &workspace).await;
        run.run_id().to_owned()
    };
    let mut approvals = agent
        .watch_approvals(pb::WatchApprovalsRequest {
            run_id: run_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let pending = next(&mut approvals).await;
    assert_eq!(pending.run_id, run_id);
    assert_eq!(pending.state, pb::ApprovalState::Pending as i32);
    assert_eq!(pending.preview.as_ref().unwrap().kind, "diff");

    let decide = |decision: pb::Decision, digest: &str| pb::ApprovalDecision {
        approval_id: pending.approval_id.clone(),
        decision: decision as i32,
        reason: String::new(),
        digest: digest.to_owned(),
        grant_prefix: Vec::new(),
    };
    let forged = agent
        .decide_approval(decide(pb::Decision::ApproveOnce, &"0".repeat(64)))
        .await
        .expect_err("a digest of another call");
    assert_eq!(forged.code(), tonic::Code::FailedPrecondition, "{forged:?}");
    assert!(forged.message().starts_with("digest: "), "{forged:?}");
    let empty = agent
        .decide_approval(decide(pb::Decision::Unspecified, &pending.digest))
        .await
        .expect_err("no decision");
    assert_eq!(empty.code(), tonic::Code::InvalidArgument, "{empty:?}");

    agent
        .decide_approval(decide(pb::Decision::ApproveOnce, &pending.digest))
        .await
        .expect("the pending request is approved");
    let resolved = next(&mut approvals).await;
    assert_eq!(resolved.state, pb::ApprovalState::Resolved as i32);
    let replayed = agent
        .decide_approval(decide(pb::Decision::Deny, &pending.digest))
        .await
        .expect_err("already answered");
    assert_eq!(replayed.code(), tonic::Code::NotFound, "{replayed:?}");

    // The run, watched from its start to its end.
    let mut events = agent
        .watch_run(pb::AttachRun {
            run_id: run_id.clone(),
            after_seq: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut seqs = Vec::new();
    let finished = loop {
        let event = next(&mut events).await;
        if !event.delta {
            seqs.push(event.seq);
        }
        if let Some(Event::RunFinished(finished)) = event.event {
            break finished;
        }
    };
    assert_eq!(finished.final_text, "written");
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        FIXED
    );

    let past = agent
        .watch_run(pb::AttachRun {
            run_id: run_id.clone(),
            after_seq: 10_000,
        })
        .await
        .expect_err("past the end");
    assert_eq!(past.code(), tonic::Code::OutOfRange, "{past:?}");
    assert!(past.message().starts_with("after_seq: "), "{past:?}");
    let unknown = agent
        .watch_approvals(pb::WatchApprovalsRequest {
            run_id: format!("run_{}", "0".repeat(32)),
        })
        .await
        .expect_err("no such run");
    assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown:?}");
}

/// WatchRuns: the page ListRuns would answer, then each run again as it changes — here one
/// that waits for an approval, is approved with DecideApproval, and finishes.
#[tokio::test]
async fn a_live_list_of_runs_follows_a_run_through_its_states() {
    let daemon = daemon().await;
    let workspace = workspace(&daemon, "w");
    let mut agent = daemon.agent().await;
    let mut earlier = daemon
        .start_run(start(
            &workspace,
            &json!({"turns": [{"final": "done"}]}),
            pb::ApprovalPolicy::Risky,
        ))
        .await;
    earlier.finished().await;
    let mut runs = agent
        .watch_runs(pb::ListRunsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let first = next(&mut runs).await;
    assert_eq!(first.run_id, earlier.run_id());
    assert_eq!(first.state, pb::RunState::Finished as i32);

    let (mut run, asked) = waiting_write(&daemon, &workspace).await;
    let mut states = Vec::new();
    while states.last() != Some(&pb::RunState::WaitingForApproval) {
        let update = next(&mut runs).await;
        assert_eq!(update.run_id, run.run_id(), "only the run that changed");
        states.push(pb::RunState::try_from(update.state).unwrap());
    }
    agent
        .decide_approval(pb::ApprovalDecision {
            approval_id: asked.approval_id.clone(),
            decision: pb::Decision::ApproveOnce as i32,
            reason: String::new(),
            digest: asked.digest.clone(),
            grant_prefix: Vec::new(),
        })
        .await
        .unwrap();
    let last = loop {
        let update = next(&mut runs).await;
        assert_eq!(update.run_id, run.run_id());
        if update.state == pb::RunState::Finished as i32 {
            break update;
        }
    };
    assert_eq!(last.final_text, "written");
    assert_eq!(last.stop_reason, pb::StopReason::Final as i32);
    assert_eq!(run.finished().await.final_text, "written");
}

/// A reload (SIGHUP) while a call waits for its approval: the call runs if its tool is
/// unchanged (the same tool, across the reload), and is refused, never made, if the tool of
/// that name changed since the run judged it — the approval was for the tool as it was.
#[tokio::test]
async fn a_reload_while_a_call_waits_runs_it_only_if_its_tool_is_unchanged() {
    let tools = airlock_tests::ToolsDir::new();
    let folder = tools.add_plugin("write_file");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());

    let unchanged = workspace(&daemon, "unchanged");
    let (mut run, request) = waiting_write(&daemon, &unchanged).await;
    assert_eq!(daemon.reload().await.served, 1);
    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    assert_eq!(run.finished().await.final_text, "written");
    assert_eq!(
        std::fs::read_to_string(unchanged.join("calc.py")).unwrap(),
        FIXED
    );

    let changed = workspace(&daemon, "changed");
    let (mut run, request) = waiting_write(&daemon, &changed).await;
    let manifest = folder.join("tool.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("timeout_ms = ", "timeout_ms = 1")).unwrap();
    assert_eq!(daemon.reload().await.served, 1);
    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    run.finished().await;
    let results = run.of(|e| match e {
        Event::ToolFinished(finished) => finished.result.clone(),
        _ => None,
    });
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].status, pb::ToolStatus::SandboxError as i32);
    assert!(
        results[0].error_message.contains("was reloaded"),
        "{results:?}"
    );
    assert!(
        std::fs::read_to_string(changed.join("calc.py"))
            .unwrap()
            .contains("len(v) - 1"),
        "the changed tool wrote"
    );
}
