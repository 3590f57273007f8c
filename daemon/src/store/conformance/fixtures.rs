//! The records the suite's checks start from: a session, a run in it, an event of its log,
//! and a run recorded with its first event. Its own file so the checks (`runs`, `journal`,
//! `retention`) and the suite's entry point in `mod.rs` share them without importing each other.

use std::collections::BTreeMap;

use airlock_proto::v1 as pb;

use crate::domain::Usage;
use crate::ids::{RunId, SessionId, TraceId};
use crate::store::{RunRecord, RunState, SessionRecord, Store};

pub(in crate::store) fn session(tenant: &str, created_at_ms: i64) -> SessionRecord {
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
