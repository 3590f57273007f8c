//! What every backend of [`Store`] must do, as one suite any backend's tests run. It makes
//! fresh ids and a tenant of its own, so it can run against a shared database beside other
//! data.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;

use airlock_proto::v1 as pb;

use super::{
    ApprovalResolution, Checkpoint, Effect, ExecutionOwner, OutputRecord, RunEnd, RunFilter,
    RunRecord, RunState, SessionRecord, Store, StoreError,
};
use crate::domain::{DecidedBy, Decision, StopReason, Usage};
use crate::ids::{ApprovalId, CallId, CheckpointId, ExecutionId, RunId, SessionId, TraceId};

/// Runs every check of the suite against `store`.
pub async fn conformance(store: &dyn Store) {
    let tenant = format!("conformance-{}", uuid::Uuid::new_v4().simple());
    sessions_runs_and_events_round_trip(store, &tenant).await;
    sessions_page_by_activity_within_their_tenant(store).await;
    the_log_refuses_gaps_and_duplicates(store, &tenant).await;
    writes_handed_over_together_land_in_order(store, &tenant).await;
    runs_page_newest_first_with_filters(store, &tenant).await;
    checkpoints_effects_approvals_and_grants_round_trip(store, &tenant).await;
    spans_ride_with_their_event(store, &tenant).await;
    exchanges_keep_their_order(store, &tenant).await;
    outputs_and_owners_round_trip(store).await;
    old_outputs_and_owners_go_and_nothing_else(store, &tenant).await;
    old_finished_runs_are_deleted_and_nothing_else(store, &tenant).await;
}

pub(super) fn session(tenant: &str, created_at_ms: i64) -> SessionRecord {
    SessionRecord {
        session_id: SessionId::new(),
        workspace: Some("/srv/ws".into()),
        labels: BTreeMap::from([("team".to_owned(), "core".to_owned())]),
        created_at_ms,
        tenant: tenant.to_owned(),
        settings: pb::SessionSettings {
            instructions: "be brief".into(),
            tools: vec!["read_file".into()],
            ..Default::default()
        },
    }
}

fn run(session: &SessionRecord, created_at_ms: i64) -> RunRecord {
    RunRecord {
        run_id: RunId::new(),
        session_id: session.session_id.clone(),
        state: RunState::Running,
        start: pb::StartRun {
            input: format!("task at {created_at_ms}"),
            ..Default::default()
        },
        model: "scripted".into(),
        workspace: session.workspace.clone(),
        trace_id: TraceId::new(),
        created_at_ms,
        finished_at_ms: None,
        stop_reason: None,
        stop_detail: String::new(),
        final_text: String::new(),
        usage: Usage::default(),
        steps: 0,
        last_seq: 1,
        tenant: session.tenant.clone(),
    }
}

fn event(run_id: &RunId, seq: u64) -> pb::RunEvent {
    pb::RunEvent {
        run_id: run_id.to_string(),
        seq,
        step_id: String::new(),
        time_ms: 7,
        turn_id: "trn_0".into(),
        delta: false,
        event: Some(pb::run_event::Event::ModelText(pb::ModelText {
            text: format!("event {seq}"),
        })),
    }
}

/// A session and one run in it, recorded with the run's first event (for other modules' tests
/// too).
pub async fn recorded_run(store: &dyn Store, tenant: &str, created_at_ms: i64) -> RunRecord {
    let session = session(tenant, created_at_ms);
    store.create_session(&session).await.expect("session");
    let run = run(&session, created_at_ms);
    store
        .create_run(&run, &event(&run.run_id, 1))
        .await
        .expect("run");
    run
}

async fn sessions_runs_and_events_round_trip(store: &dyn Store, tenant: &str) {
    let session = session(tenant, 1);
    store.create_session(&session).await.expect("session");
    assert_eq!(
        store.session(&session.session_id).await.expect("read"),
        Some(session.clone())
    );
    assert_eq!(store.session(&SessionId::new()).await.expect("read"), None);
    let record = run(&session, 10);
    let run_id = record.run_id.clone();
    store
        .create_run(&record, &event(&run_id, 1))
        .await
        .expect("run");
    for seq in 2..=3 {
        store
            .append_event(&event(&run_id, seq), &[])
            .await
            .expect("append");
    }
    assert_eq!(
        store.events_after(&run_id, 1, 100).await.expect("read"),
        vec![event(&run_id, 2), event(&run_id, 3)]
    );
    assert_eq!(
        store.events_after(&run_id, 0, 1).await.expect("read"),
        vec![event(&run_id, 1)]
    );
    let read = store.run(&run_id).await.expect("read").expect("exists");
    assert_eq!(read.last_seq, 3);
    assert_eq!(read.start.input, "task at 10");
    assert_eq!(read.workspace.as_deref(), Some("/srv/ws"));
    let usage = Usage {
        input_tokens: 12,
        output_tokens: 3,
        model_calls: 1,
        tool_calls: 2,
    };
    store
        .update_progress(&run_id, 2, &usage)
        .await
        .expect("progress");
    store
        .set_run_state(&run_id, RunState::WaitingForApproval)
        .await
        .expect("state");
    assert!(
        store
            .unfinished_runs()
            .await
            .expect("list")
            .iter()
            .any(|r| r.run_id == run_id && r.state == RunState::WaitingForApproval)
    );
    store
        .finish_run(
            &run_id,
            &RunEnd {
                stop_reason: StopReason::Final,
                stop_detail: String::new(),
                final_text: "done".into(),
                finished_at_ms: 20,
            },
        )
        .await
        .expect("finish");
    let read = store.run(&run_id).await.expect("read").expect("exists");
    assert_eq!(read.state, RunState::Finished);
    assert_eq!(read.stop_reason, Some(StopReason::Final));
    assert_eq!(read.final_text, "done");
    assert_eq!(read.usage, usage);
    assert_eq!(read.steps, 2);
    assert!(
        !store
            .unfinished_runs()
            .await
            .expect("list")
            .iter()
            .any(|r| r.run_id == run_id)
    );
    assert!(matches!(
        store.set_run_state(&RunId::new(), RunState::Running).await,
        Err(StoreError::UnknownRun(_))
    ));
}

/// Sessions are listed most recently active first (a run started in an old session brings it
/// to the top), a page at a time, each with its runs counted, and only to their tenant.
async fn sessions_page_by_activity_within_their_tenant(store: &dyn Store) {
    let tenant = format!("sessions-{}", SessionId::new());
    let sessions: Vec<SessionRecord> = (0..3).map(|i| session(&tenant, 100 + i)).collect();
    for session in &sessions {
        store.create_session(session).await.expect("session");
    }
    store
        .create_session(&session("someone-else", 500))
        .await
        .expect("session");
    // The oldest session gets a run, unfinished: it becomes the most recently active.
    let record = run(&sessions[0], 200);
    store
        .create_run(&record, &event(&record.run_id, 1))
        .await
        .expect("run");

    let (first, next) = store.list_sessions(&tenant, 2, None).await.expect("list");
    let ids: Vec<&SessionId> = first.iter().map(|s| &s.session.session_id).collect();
    assert_eq!(ids, [&sessions[0].session_id, &sessions[2].session_id]);
    assert_eq!(first[0].runs, 1);
    assert_eq!(first[0].last_run_id.as_ref(), Some(&record.run_id));
    assert_eq!(first[0].last_active_ms, 200);
    assert!(first[0].running);
    assert_eq!((first[1].runs, first[1].running), (0, false));
    assert_eq!(first[1].last_active_ms, 102);
    assert_eq!(first[1].session, sessions[2]);
    let (rest, end) = store
        .list_sessions(&tenant, 2, next.as_ref())
        .await
        .expect("list");
    let ids: Vec<&SessionId> = rest.iter().map(|s| &s.session.session_id).collect();
    assert_eq!(ids, [&sessions[1].session_id]);
    assert_eq!(end, None);

    let summary = store
        .session_summary(&sessions[0].session_id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(summary, first[0]);
    assert_eq!(summary.session.settings.instructions, "be brief");
    assert_eq!(
        store
            .session_summary(&SessionId::new())
            .await
            .expect("read"),
        None
    );
}

async fn the_log_refuses_gaps_and_duplicates(store: &dyn Store, tenant: &str) {
    let run = recorded_run(store, tenant, 11).await;
    assert!(matches!(
        store.append_event(&event(&run.run_id, 1), &[]).await,
        Err(StoreError::OutOfOrder { .. })
    ));
    assert!(matches!(
        store.append_event(&event(&run.run_id, 3), &[]).await,
        Err(StoreError::OutOfOrder { .. })
    ));
    assert!(matches!(
        store.append_event(&event(&RunId::new(), 1), &[]).await,
        Err(StoreError::UnknownRun(_))
    ));
    // A run's first event is its creation's; another creation with a later one is refused.
    let other = run.clone();
    assert!(
        store
            .create_run(
                &RunRecord {
                    run_id: RunId::new(),
                    ..other
                },
                &event(&RunId::new(), 1)
            )
            .await
            .is_err()
    );
    // After the refusals the log goes on where it was.
    store
        .append_event(&event(&run.run_id, 2), &[])
        .await
        .expect("the next event");
}

async fn writes_handed_over_together_land_in_order(store: &dyn Store, tenant: &str) {
    let run = recorded_run(store, tenant, 12).await;
    // Handed over without waiting for each, as the run loop does.
    let pending: Vec<_> = (2..=50)
        .map(|seq| store.append_event(&event(&run.run_id, seq), &[]))
        .collect();
    for answer in pending {
        answer.await.expect("committed");
    }
    let events = store.events_after(&run.run_id, 0, 100).await.expect("read");
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=50).collect::<Vec<_>>()
    );
}

async fn runs_page_newest_first_with_filters(store: &dyn Store, tenant: &str) {
    let tenant = format!("{tenant}-paging");
    let session = session(&tenant, 100);
    store.create_session(&session).await.expect("session");
    let mut ids = Vec::new();
    for at in 100..105 {
        let record = run(&session, at);
        store
            .create_run(&record, &event(&record.run_id, 1))
            .await
            .expect("run");
        ids.push(record.run_id);
    }
    let other = recorded_run(store, &tenant, 200).await;
    let filter = RunFilter {
        session_id: Some(session.session_id.clone()),
        state: None,
        tenant: Some(tenant.clone()),
    };
    let (first, cursor) = store.list_runs(&filter, 2, None).await.expect("page");
    assert_eq!(
        first.iter().map(|r| &r.run_id).collect::<Vec<_>>(),
        [&ids[4], &ids[3]]
    );
    let (second, cursor) = store
        .list_runs(&filter, 2, cursor.as_ref())
        .await
        .expect("page");
    assert_eq!(
        second.iter().map(|r| &r.run_id).collect::<Vec<_>>(),
        [&ids[2], &ids[1]]
    );
    let (third, cursor) = store
        .list_runs(&filter, 2, cursor.as_ref())
        .await
        .expect("page");
    assert_eq!(
        third.iter().map(|r| &r.run_id).collect::<Vec<_>>(),
        [&ids[0]]
    );
    assert!(cursor.is_none());
    let every = RunFilter {
        tenant: Some(tenant.clone()),
        ..RunFilter::default()
    };
    let (all, _) = store.list_runs(&every, 100, None).await.expect("all");
    assert_eq!(all.len(), 6);
    assert_eq!(all[0].run_id, other.run_id);
    let finished = RunFilter {
        state: Some(RunState::Finished),
        ..every.clone()
    };
    assert!(
        store
            .list_runs(&finished, 100, None)
            .await
            .expect("none")
            .0
            .is_empty()
    );
    let nobody = RunFilter {
        tenant: Some(format!("{tenant}-nobody")),
        ..RunFilter::default()
    };
    assert!(
        store
            .list_runs(&nobody, 100, None)
            .await
            .expect("none")
            .0
            .is_empty()
    );
}

async fn checkpoints_effects_approvals_and_grants_round_trip(store: &dyn Store, tenant: &str) {
    let run = recorded_run(store, tenant, 13).await;
    let run_id = &run.run_id;
    assert_eq!(store.latest_checkpoint(run_id).await.expect("read"), None);
    let checkpoint = |seq| Checkpoint {
        checkpoint_id: CheckpointId::new().into_string(),
        seq,
        state: vec![1, 2, 3],
        created_at_ms: 5,
    };
    store
        .save_checkpoint(run_id, &checkpoint(1))
        .await
        .expect("first");
    let latest = checkpoint(4);
    store
        .save_checkpoint(run_id, &latest)
        .await
        .expect("second");
    assert_eq!(
        store.latest_checkpoint(run_id).await.expect("read"),
        Some(latest)
    );

    let call_id = CallId::new();
    let intent = Effect {
        run_id: run_id.clone(),
        call_id: call_id.clone(),
        tool: "append".into(),
        arguments: "{}".into(),
        idempotent: false,
        intent_at_ms: 6,
        timeout_ms: Some(30_000),
        result: None,
        pending_changes: None,
    };
    store.record_intent(&intent).await.expect("intent");
    assert_eq!(
        store.effect(run_id, &call_id).await.expect("read"),
        Some(intent.clone())
    );
    let result = pb::ToolResult {
        status: pb::ToolStatus::Ok as i32,
        content: "ok".into(),
        ..Default::default()
    };
    store
        .record_effect_result(run_id, &call_id, &result)
        .await
        .expect("result");
    assert_eq!(
        store
            .effect(run_id, &call_id)
            .await
            .expect("read")
            .and_then(|e| e.result),
        Some(result.clone())
    );
    assert!(
        store
            .record_effect_result(run_id, &CallId::new(), &result)
            .await
            .is_err(),
        "a result without its intent"
    );
    let pending = pb::ChangeSet {
        changes: vec![pb::FileChange {
            path: "src/lib.rs".into(),
            kind: pb::ChangeKind::Modified as i32,
            ..Default::default()
        }],
        ..Default::default()
    };
    store
        .record_pending_changes(run_id, &call_id, &pending)
        .await
        .expect("pending changes");
    assert_eq!(
        store
            .effect(run_id, &call_id)
            .await
            .expect("read")
            .and_then(|e| e.pending_changes),
        Some(pending.clone())
    );
    assert!(
        store
            .record_pending_changes(run_id, &CallId::new(), &pending)
            .await
            .is_err(),
        "changes without their intent"
    );

    let request = |network: Option<pb::NetworkAccess>| pb::ApprovalRequest {
        approval_id: ApprovalId::new().into_string(),
        run_id: run_id.to_string(),
        call_id: call_id.to_string(),
        tool: "append".into(),
        network,
        ..Default::default()
    };
    let asked = request(None);
    store.save_approval(&asked).await.expect("save");
    assert_eq!(
        store
            .approval_for_call(run_id, &call_id)
            .await
            .expect("read"),
        Some((asked.clone(), None))
    );
    // A connection's approval of the same call is not the call's own.
    let connection = request(Some(pb::NetworkAccess {
        host: "example.com".into(),
        port: 443,
    }));
    store.save_approval(&connection).await.expect("save");
    let resolution = ApprovalResolution {
        decision: Decision::ApproveSession,
        reason: "fine".into(),
        decided_by: DecidedBy::Console,
        resolved_at_ms: 9,
    };
    store
        .resolve_approval(
            &ApprovalId::from_stored(asked.approval_id.clone()),
            &resolution,
        )
        .await
        .expect("resolve");
    assert_eq!(
        store
            .approval_for_call(run_id, &call_id)
            .await
            .expect("read"),
        Some((asked, Some(resolution)))
    );

    store
        .add_session_grant(&run.session_id, "grant-1")
        .await
        .expect("grant");
    store
        .add_session_grant(&run.session_id, "grant-1")
        .await
        .expect("a grant twice is one grant");
    let grants = store.session_grants().await.expect("read");
    assert_eq!(grants.iter().filter(|g| *g == "grant-1").count(), 1);
}

async fn spans_ride_with_their_event(store: &dyn Store, tenant: &str) {
    let run = recorded_run(store, tenant, 14).await;
    let span = |id: &str, start| pb::Span {
        span_id: id.into(),
        start_unix_nano: start,
        ..Default::default()
    };
    store
        .append_event(&event(&run.run_id, 2), &[span("b", 2)])
        .await
        .expect("event with a span");
    store
        .append_event(&event(&run.run_id, 3), &[span("a", 1), span("c", 3)])
        .await
        .expect("event with spans");
    let ids = |spans: Vec<pb::Span>| spans.into_iter().map(|s| s.span_id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.spans(&run.run_id).await.expect("read")),
        ["a", "b", "c"]
    );
    // An event refused (out of order) takes its spans with it: no span without its event.
    assert!(
        store
            .append_event(&event(&run.run_id, 9), &[span("d", 4)])
            .await
            .is_err()
    );
    assert_eq!(store.spans(&run.run_id).await.expect("read").len(), 3);
}

async fn outputs_and_owners_round_trip(store: &dyn Store) {
    let digest = format!("digest-{}", uuid::Uuid::new_v4().simple());
    let output = |at| OutputRecord {
        execution_id: ExecutionId::new(),
        digest: digest.clone(),
        size: 10,
        created_at_ms: at,
    };
    let (older, newer) = (output(1), output(2));
    store.record_output(&newer).await.expect("record");
    store.record_output(&older).await.expect("record");
    assert_eq!(
        store.output(&older.execution_id).await.expect("read"),
        Some(older.clone())
    );
    assert_eq!(store.output_references(&digest).await.expect("count"), 2);
    let before = store.outputs_before(2, 10).await.expect("before");
    assert!(before.contains(&older) && !before.contains(&newer));
    store
        .remove_output(&older.execution_id)
        .await
        .expect("remove");
    assert_eq!(store.output(&older.execution_id).await.expect("read"), None);
    assert_eq!(store.output_references(&digest).await.expect("count"), 1);

    let execution = ExecutionId::new();
    assert_eq!(store.execution_owner(&execution).await.expect("read"), None);
    store
        .record_execution_owner(&execution, &owner("alice", None, 1))
        .await
        .expect("owner");
    store
        .record_execution_owner(&execution, &owner("bob", None, 1))
        .await
        .expect("a second claim changes nothing");
    assert_eq!(
        store.execution_owner(&execution).await.expect("read"),
        Some("alice".to_owned())
    );
}

fn owner(tenant: &str, run_id: Option<&RunId>, started_at_ms: i64) -> ExecutionOwner {
    ExecutionOwner {
        tenant: tenant.to_owned(),
        run_id: run_id.cloned(),
        started_at_ms,
    }
}

/// Retention of outputs and execution owners: never an unfinished run's, and never an
/// owner whose output is still kept.
async fn old_outputs_and_owners_go_and_nothing_else(store: &dyn Store, tenant: &str) {
    let live = recorded_run(store, tenant, 1).await;
    let kept = |execution_id: &ExecutionId| OutputRecord {
        execution_id: execution_id.clone(),
        digest: format!("digest-{execution_id}"),
        size: 1,
        created_at_ms: 1,
    };
    let (direct, of_live_run, with_output, young) = (
        ExecutionId::new(),
        ExecutionId::new(),
        ExecutionId::new(),
        ExecutionId::new(),
    );
    store
        .record_execution_owner(&direct, &owner(tenant, None, 1))
        .await
        .expect("owner");
    store
        .record_execution_owner(&of_live_run, &owner(tenant, Some(&live.run_id), 1))
        .await
        .expect("owner");
    store
        .record_execution_owner(&with_output, &owner(tenant, None, 1))
        .await
        .expect("owner");
    store
        .record_execution_owner(&young, &owner(tenant, None, 1_000))
        .await
        .expect("owner");
    store
        .record_output(&kept(&of_live_run))
        .await
        .expect("output");
    store
        .record_output(&kept(&with_output))
        .await
        .expect("output");

    let old: Vec<ExecutionId> = store
        .outputs_before(500, 10_000)
        .await
        .expect("old outputs")
        .into_iter()
        .map(|output| output.execution_id)
        .collect();
    assert!(old.contains(&with_output));
    assert!(
        !old.contains(&of_live_run),
        "a live run's output is never old"
    );

    store.forget_executions(500).await.expect("forget");
    assert_eq!(store.execution_owner(&direct).await.expect("read"), None);
    for remains in [&of_live_run, &with_output, &young] {
        assert_eq!(
            store.execution_owner(remains).await.expect("read"),
            Some(tenant.to_owned()),
            "{remains}"
        );
    }
}

async fn exchanges_keep_their_order(store: &dyn Store, tenant: &str) {
    let run = recorded_run(store, tenant, 40).await;
    let other = recorded_run(store, tenant, 41).await;
    // Handed over together, as a run's calls are: they land in order, each run's apart.
    let writes = [
        store.record_exchange(&run.run_id, r#"{"n":0}"#),
        store.record_exchange(&other.run_id, r#"{"n":"other"}"#),
        store.record_exchange(&run.run_id, r#"{"n":1}"#),
        store.record_exchange(&run.run_id, r#"{"n":2}"#),
    ];
    for write in writes {
        write.await.expect("exchange");
    }
    assert_eq!(
        store.exchanges(&run.run_id).await.expect("read"),
        [r#"{"n":0}"#, r#"{"n":1}"#, r#"{"n":2}"#]
    );
    assert_eq!(
        store.exchanges(&other.run_id).await.expect("read"),
        [r#"{"n":"other"}"#]
    );
    assert!(
        store
            .exchanges(&RunId::new())
            .await
            .expect("read")
            .is_empty()
    );
}

async fn old_finished_runs_are_deleted_and_nothing_else(store: &dyn Store, tenant: &str) {
    let tenant = format!("{tenant}-retention");
    let old = recorded_run(store, &tenant, 1_000).await;
    let end = |at| RunEnd {
        stop_reason: StopReason::Final,
        stop_detail: String::new(),
        final_text: String::new(),
        finished_at_ms: at,
    };
    store
        .finish_run(&old.run_id, &end(1_001))
        .await
        .expect("end");
    store
        .add_session_grant(&old.session_id, "old-grant")
        .await
        .expect("grant");
    let young = recorded_run(store, &tenant, 5_000).await;
    store
        .finish_run(&young.run_id, &end(5_001))
        .await
        .expect("end");
    store
        .record_exchange(&old.run_id, "{}")
        .await
        .expect("exchange");
    let live = recorded_run(store, &tenant, 1_000).await;
    let deleted = store.delete_finished_runs(2_000, 100).await.expect("sweep");
    assert!(store.exchanges(&old.run_id).await.expect("read").is_empty());
    assert!(deleted.runs >= 1, "{deleted:?}");
    assert_eq!(store.run(&old.run_id).await.expect("read"), None);
    assert!(
        store
            .events_after(&old.run_id, 0, 10)
            .await
            .expect("read")
            .is_empty()
    );
    assert_eq!(store.session(&old.session_id).await.expect("read"), None);
    assert!(
        !store
            .session_grants()
            .await
            .expect("read")
            .contains(&"old-grant".to_owned())
    );
    // A run that finished later, and one still going however old, are kept.
    assert!(store.run(&young.run_id).await.expect("read").is_some());
    assert!(store.run(&live.run_id).await.expect("read").is_some());
    assert!(
        store
            .session(&live.session_id)
            .await
            .expect("read")
            .is_some()
    );
}
