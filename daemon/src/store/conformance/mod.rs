//! What every backend of [`Store`] must do, as one suite any backend's tests run. It makes
//! fresh ids and a tenant of its own, so it can run against a shared database beside other
//! data.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod journal;
mod retention;
mod runs;

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
    runs::sessions_runs_and_events_round_trip(store, &tenant).await;
    runs::sessions_page_by_activity_within_their_tenant(store).await;
    runs::the_log_refuses_gaps_and_duplicates(store, &tenant).await;
    runs::writes_handed_over_together_land_in_order(store, &tenant).await;
    runs::runs_page_newest_first_with_filters(store, &tenant).await;
    journal::checkpoints_effects_approvals_and_grants_round_trip(store, &tenant).await;
    journal::spans_ride_with_their_event(store, &tenant).await;
    journal::exchanges_keep_their_order(store, &tenant).await;
    retention::outputs_and_owners_round_trip(store).await;
    retention::old_outputs_and_owners_go_and_nothing_else(store, &tenant).await;
    retention::old_finished_runs_are_deleted_and_nothing_else(store, &tenant).await;
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

pub(super) fn run(session: &SessionRecord, created_at_ms: i64) -> RunRecord {
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

pub(super) fn event(run_id: &RunId, seq: u64) -> pb::RunEvent {
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
