//! The records the suite's checks start from: a session, a run in it, an event of its log,
//! and a run recorded with its first event. Its own file so the checks (`runs`, `journal`,
//! `retention`) and the suite's entry point in `mod.rs` share them without importing each other.

use std::collections::BTreeMap;

use airlock_proto::v1 as pb;

use crate::domain::Usage;
use crate::ids::{CallId, CheckpointId, RunId, SessionId, TraceId};
use crate::store::{Checkpoint, Effect, Pending, RunRecord, RunState, SessionRecord, Store};

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

pub(in crate::store) fn event(run_id: &RunId, seq: u64) -> pb::RunEvent {
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

/// A run's steps, their writes handed over as the run loop hands them: each step's without
/// waiting for any of them.
pub(in crate::store) struct Steps {
    run_id: RunId,
    done: u64,
    checkpoint: Option<String>,
}

impl Steps {
    /// Steps of `run`, whose log holds its first event only.
    pub(in crate::store) fn of(run: &RunRecord) -> Steps {
        Steps {
            run_id: run.run_id.clone(),
            done: 0,
            checkpoint: None,
        }
    }

    /// The events a run of `steps` steps has logged: its first and two a step.
    pub(in crate::store) fn events(steps: u64) -> u64 {
        1 + 2 * steps
    }

    /// The call of step `step` (from 1).
    pub(in crate::store) fn call(step: u64) -> CallId {
        CallId::from_stored(format!("call_step{step:04}"))
    }

    /// Hands over the next step's writes: two events (the first with a span), its call's
    /// intent and result, a kept exchange, the run's progress, and a checkpoint that keeps
    /// the last one's entries and adds two.
    pub(in crate::store) fn hand_over(&mut self, store: &dyn Store) -> Vec<Pending<()>> {
        self.done += 1;
        let step = self.done;
        let (seq, run_id) = (Steps::events(step), &self.run_id);
        let span = pb::Span {
            span_id: format!("span{step}"),
            start_unix_nano: i64::try_from(step).expect("small"),
            ..Default::default()
        };
        let effect = Effect {
            run_id: run_id.clone(),
            call_id: Steps::call(step),
            tool: "read_file".into(),
            arguments: format!("{{\"path\":\"f{step}\"}}"),
            idempotent: true,
            intent_at_ms: 8,
            timeout_ms: Some(1_000),
            result: None,
            pending_changes: None,
        };
        let checkpoint = Checkpoint {
            checkpoint_id: CheckpointId::new().into_string(),
            seq,
            state: vec![1],
            created_at_ms: 9,
            entries_from: 2 * (step - 1),
            entries_base: self.checkpoint.take(),
            entries: vec![
                format!("call {step}").into_bytes(),
                format!("result {step}").into_bytes(),
            ],
        };
        self.checkpoint = Some(checkpoint.checkpoint_id.clone());
        let steps = u32::try_from(step).expect("small");
        vec![
            store.append_event(&event(run_id, seq - 1), &[span]),
            store.record_intent(&effect),
            store.record_effect_result(
                run_id,
                &effect.call_id,
                &pb::ToolResult {
                    content: format!("read {step}"),
                    ..Default::default()
                },
            ),
            store.record_exchange(run_id, &format!("exchange {step}")),
            store.append_event(&event(run_id, seq), &[]),
            store.update_progress(run_id, steps, &Usage::default()),
            store.save_checkpoint(run_id, &checkpoint),
        ]
    }
}
