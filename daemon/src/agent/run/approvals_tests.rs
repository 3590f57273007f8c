//! Tests of the approvals service: questions, answers, timeouts and waiting again after a resume.

use serde_json::json;

use super::super::super::testing::{Follower, Harness, finished, kinds};
use super::*;
use crate::policy::{Approver, Verdict};

/// The first request approvers are shown, once there is one.
async fn next_request(broker: &ApprovalBroker) -> pb::ApprovalRequest {
    let (pending, mut updates) = broker.subscribe();
    if let Some(request) = pending.into_iter().next() {
        return request;
    }
    loop {
        let update = tokio::time::timeout(Duration::from_secs(60), updates.recv())
            .await
            .expect("a request comes")
            .expect("updates");
        if update.state == pb::ApprovalState::Pending as i32 {
            return update;
        }
    }
}

fn verdict(request: &pb::ApprovalRequest, decision: Decision) -> Verdict {
    Verdict {
        approval_id: request.approval_id.clone(),
        decision: Some(decision),
        reason: String::new(),
        digest: request.digest.clone(),
        grant_prefix: Vec::new(),
    }
}

fn resolutions(log: &[pb::RunEvent]) -> Vec<pb::ApprovalResolved> {
    log.iter()
        .filter_map(|event| match &event.event {
            Some(Event::ApprovalResolved(resolved)) => Some(resolved.clone()),
            _ => None,
        })
        .collect()
}

fn risky(harness: &Harness, script: &Value, timeout_ms: u64) -> pb::StartRun {
    let mut start = harness.scripted(script, &["touch"]);
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    start.approval_timeout_ms = timeout_ms;
    start
}

#[tokio::test]
async fn approvers_see_only_committed_questions_and_answers_are_kept() {
    let harness = Harness::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "touch", "arguments": {}}]},
        {"final": "done"}
    ]});
    let (run_id, mut follower) = harness.start(risky(&harness, &script, 0)).await;
    let request = next_request(harness.runtime.approvals()).await;
    // What the approver sees is already in the store and in the log.
    let call_id = CallId::from_stored(request.call_id.clone());
    let (kept, resolution) = harness
        .store
        .approval_for_call(&run_id, &call_id)
        .await
        .expect("read")
        .expect("the request is kept");
    assert_eq!(kept, request);
    assert_eq!(resolution, None);
    let seen = follower
        .until(|event| matches!(event, Event::ApprovalRequested(_)))
        .await;
    assert_eq!(kinds(&seen).last(), Some(&"approval_requested"));

    harness
        .runtime
        .decide(&verdict(&request, Decision::ApproveOnce))
        .await
        .expect("decides");
    let log = follower.rest().await;
    assert!(kinds(&log).contains(&"tool_started"));
    assert_eq!(finished(&log).final_text, "done");
    let (_, resolution) = harness
        .store
        .approval_for_call(&run_id, &call_id)
        .await
        .expect("read")
        .expect("kept");
    let resolution = resolution.expect("answered");
    assert_eq!(resolution.decision, Decision::ApproveOnce);
    assert_eq!(resolution.decided_by, DecidedBy::Console);
}

/// The run's own client reads a question as soon as it is committed, possibly before the
/// loop that asked it has gone on: its answer must count all the same. Several runs,
/// each answered the moment the question is read, on a runtime of several threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_own_client_may_answer_the_moment_it_reads_the_question() {
    let harness = Harness::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "touch", "arguments": {}}]},
        {"final": "done"}
    ]});
    for _ in 0..20 {
        let (run_id, mut follower) = harness.start(risky(&harness, &script, 0)).await;
        let seen = follower
            .until(|event| matches!(event, Event::ApprovalRequested(_)))
            .await;
        let Some(Event::ApprovalRequested(requested)) =
            seen.last().and_then(|event| event.event.clone())
        else {
            unreachable!("until stops at the question");
        };
        let request = requested.request.expect("the request");
        harness
            .runtime
            .decide_for_run(&run_id, &verdict(&request, Decision::ApproveOnce))
            .await;
        let log = follower.rest().await;
        assert!(!kinds(&log).contains(&"decision_rejected"), "{log:#?}");
        assert_eq!(finished(&log).final_text, "done");
    }
}

#[tokio::test]
async fn no_answer_by_the_deadline_is_a_denial_the_model_is_told_about() {
    let harness = Harness::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "touch", "arguments": {}}]},
        {"final": "nobody came"}
    ]});
    let log = harness.run(risky(&harness, &script, 50)).await;
    let resolved = resolutions(&log);
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].decided_by, "deadline");
    assert_eq!(resolved[0].decision, pb::Decision::Deny as i32);
    assert!(!kinds(&log).contains(&"tool_started"));
    assert_eq!(finished(&log).final_text, "nobody came");
}

#[tokio::test]
async fn approval_for_the_session_answers_the_same_call_again_without_asking() {
    let harness = Harness::new();
    let call = json!({"tool_calls": [{"name": "touch", "arguments": {"a": 1}}]});
    let script = json!({"turns": [call, call, {"final": "twice"}]});
    let (_, mut follower) = harness.start(risky(&harness, &script, 0)).await;
    let request = next_request(harness.runtime.approvals()).await;
    harness
        .runtime
        .decide(&verdict(&request, Decision::ApproveSession))
        .await
        .expect("decides");
    let log = follower.rest().await;
    let resolved = resolutions(&log);
    let by: Vec<&str> = resolved.iter().map(|r| r.decided_by.as_str()).collect();
    assert_eq!(by, ["approver", "session grant"]);
    assert_eq!(
        kinds(&log)
            .iter()
            .filter(|kind| **kind == "approval_requested")
            .count(),
        1
    );
    let session = crate::ids::SessionId::from_stored(request.session_id.clone());
    assert_eq!(
        harness
            .store
            .session_grants(&session)
            .await
            .expect("grants")
            .len(),
        1
    );
}

/// A connection's question goes the way of a call's — kept, recorded, committed, then
/// asked — and its approval holds for the rest of the run.
#[tokio::test]
async fn a_connection_is_asked_about_like_a_call_and_approved_for_the_run() {
    let harness = Harness::new();
    let run = crate::store::recorded_run(harness.store.as_ref(), "default", 1).await;
    let log = Arc::new(RunLog::new(
        run.run_id.clone(),
        harness.store.clone(),
        1,
        &crate::ids::TurnId::new(),
        Default::default(),
    ));
    let broker = harness.runtime.approvals().clone();
    let approvals = Arc::new(Approvals::new(
        broker.clone(),
        harness.store.clone(),
        log.clone(),
        run.session_id.clone(),
        crate::audit::TenantAudit {
            tenant: "default".to_owned(),
            auditor: crate::audit::Auditor::default(),
        },
        ApprovalPolicy::Risky,
        Duration::from_secs(60),
    ));
    let tool = harness.runtime.registry().get("noop").expect("noop");
    let asker = approvals.for_connections(StepId::new(), CallId::new(), tool, json!({}));
    let asking = tokio::spawn({
        let asker = asker.clone();
        async move { asker.ask("API.Example.com", 443).await }
    });
    let request = next_request(&broker).await;
    assert_eq!(
        request.network,
        Some(pb::NetworkAccess {
            host: "api.example.com".into(),
            port: 443
        })
    );
    assert_eq!(request.risk, pb::Risk::Network as i32);
    broker
        .decide(
            &verdict(&request, Decision::ApproveOnce),
            &Approver::Console,
        )
        .expect("decides");
    assert!(asking.await.expect("join"));
    // Approved for the run: asked no more.
    assert!(asker.ask("api.example.com", 443).await);
    assert_eq!(broker.pending_count(), 0);

    log.committed().await.expect("committed");
    let mut follower = Follower::of(log.follow(0, None));
    let mut events = Vec::new();
    while events.len() < 3 {
        events.push(follower.next().await.expect("an event"));
    }
    assert_eq!(
        kinds(&events),
        ["model_text", "approval_requested", "approval_resolved"]
    );
    let resolved = resolutions(&events);
    assert_eq!(resolved[0].network, request.network);
    assert_eq!(resolved[0].decided_by, "approver");
    // Not a call's question: the call's own approval is still unasked.
    assert_eq!(
        harness
            .store
            .approval_for_call(&run.run_id, &CallId::from_stored(request.call_id))
            .await
            .expect("read"),
        None
    );
}

#[tokio::test]
async fn under_never_a_connection_is_refused_without_asking() {
    let harness = Harness::new();
    let run = crate::store::recorded_run(harness.store.as_ref(), "default", 1).await;
    let log = Arc::new(RunLog::new(
        run.run_id.clone(),
        harness.store.clone(),
        1,
        &crate::ids::TurnId::new(),
        Default::default(),
    ));
    let approvals = Arc::new(Approvals::new(
        harness.runtime.approvals().clone(),
        harness.store.clone(),
        log.clone(),
        run.session_id.clone(),
        crate::audit::TenantAudit {
            tenant: "default".to_owned(),
            auditor: crate::audit::Auditor::default(),
        },
        ApprovalPolicy::Never,
        Duration::from_secs(60),
    ));
    let tool = harness.runtime.registry().get("noop").expect("noop");
    let asker = approvals.for_connections(StepId::new(), CallId::new(), tool, json!({}));
    assert!(!asker.ask("example.com", 443).await);
    assert_eq!(log.last_seq(), 1, "nothing recorded");
}
