//! The suite's checks of sessions, runs and their event log: round trips, pages, order.

use airlock_proto::v1 as pb;

use super::fixtures::{Steps, event, recorded_run, run, session};
use crate::domain::{StopReason, Usage};
use crate::ids::{RunId, SessionId};
use crate::store::{
    Effect, RunEnd, RunFilter, RunRecord, RunState, SessionRecord, Store, StoreError,
};

pub(super) async fn sessions_runs_and_events_round_trip(store: &dyn Store, tenant: &str) {
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
    // An end whose event the log does not hold (its write failed) leaves the run unfinished.
    // A model's answer and a provider's error may hold NUL, which PostgreSQL's text refuses:
    // every backend keeps it as U+FFFD (the run's events keep the text exactly).
    let end = RunEnd {
        stop_reason: StopReason::Final,
        stop_detail: "detail\0".into(),
        final_text: "done\0 at last".into(),
        finished_at_ms: 20,
        last_seq: 4,
    };
    assert!(matches!(
        store.finish_run(&run_id, &end).await,
        Err(StoreError::Unlogged {
            seq: 4,
            what: "end",
            ..
        })
    ));
    assert_eq!(
        store
            .run(&run_id)
            .await
            .expect("read")
            .expect("exists")
            .state,
        RunState::WaitingForApproval
    );
    store
        .finish_run(&run_id, &RunEnd { last_seq: 3, ..end })
        .await
        .expect("finish");
    let read = store.run(&run_id).await.expect("read").expect("exists");
    assert_eq!(read.state, RunState::Finished);
    assert_eq!(read.stop_reason, Some(StopReason::Final));
    assert_eq!(read.final_text, "done\u{fffd} at last");
    assert_eq!(read.stop_detail, "detail\u{fffd}");
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
pub(super) async fn sessions_page_by_activity_within_their_tenant(store: &dyn Store) {
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

pub(super) async fn the_log_refuses_gaps_and_duplicates(store: &dyn Store, tenant: &str) {
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

pub(super) async fn writes_handed_over_together_land_in_order(store: &dyn Store, tenant: &str) {
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

/// Two runs' events handed over together, interleaved with each other and with other
/// writes (a backend may write a run's events of one commit together), are each answered as
/// if written alone: all of them kept as they were handed over, of two spans with one id
/// the later; and among them, a duplicate and one past a gap refused, the events around
/// them kept.
pub(super) async fn interleaved_events_are_each_answered_as_if_alone(
    store: &dyn Store,
    tenant: &str,
) {
    let first = recorded_run(store, tenant, 14).await;
    let second = recorded_run(store, tenant, 15).await;
    let (a, b) = (&first.run_id, &second.run_id);
    let span = |id: &str, start: i64| pb::Span {
        span_id: id.into(),
        start_unix_nano: start,
        ..Default::default()
    };
    let spans = async |run_id| {
        let mut spans: Vec<(String, i64)> = store
            .spans(run_id)
            .await
            .expect("read")
            .into_iter()
            .map(|span| (span.span_id, span.start_unix_nano))
            .collect();
        spans.sort();
        spans
    };
    let events = async |run_id| store.events_after(run_id, 0, 100).await.expect("read");
    // Nothing refused: the batch commits as it is.
    let pending = vec![
        store.append_event(&event(a, 2), &[span("s", 1)]),
        store.append_event(&event(b, 2), &[]),
        store.append_event(&event(a, 3), &[span("t", 2)]),
        store.update_progress(b, 1, &Usage::default()),
        store.append_event(&event(a, 4), &[span("s", 3), span("u", 4)]),
        store.append_event(&event(b, 3), &[span("s", 5)]),
    ];
    for answer in pending {
        answer.await.expect("committed");
    }
    let expected = |run_id, last| (1..=last).map(|seq| event(run_id, seq)).collect::<Vec<_>>();
    assert_eq!(events(a).await, expected(a, 4));
    assert_eq!(events(b).await, expected(b, 3));
    assert_eq!(
        spans(a).await,
        [("s".into(), 3), ("t".into(), 2), ("u".into(), 4)]
    );
    assert_eq!(spans(b).await, [("s".into(), 5)]);
    // A duplicate of a number just taken, and one past a gap, among others: refused alone.
    let pending = vec![
        (a, 5, store.append_event(&event(a, 5), &[span("s", 6)])),
        (b, 4, store.append_event(&event(b, 4), &[])),
        (a, 6, store.append_event(&event(a, 6), &[span("v", 7)])),
        (a, 5, store.append_event(&event(a, 5), &[span("w", 8)])),
        (a, 8, store.append_event(&event(a, 8), &[])),
        (b, 5, store.append_event(&event(b, 5), &[])),
        (a, 7, store.append_event(&event(a, 7), &[span("v", 9)])),
        (a, 8, store.append_event(&event(a, 8), &[])),
    ];
    let mut answered = Vec::new();
    for (run_id, seq, answer) in pending {
        answered.push((run_id == a, seq, answer.await));
    }
    for (on_a, seq, outcome) in &answered {
        match (on_a, seq, outcome) {
            (
                true,
                5,
                Err(StoreError::OutOfOrder {
                    seq: 5, last: 6, ..
                }),
            ) => {}
            (
                true,
                8,
                Err(StoreError::OutOfOrder {
                    seq: 8, last: 6, ..
                }),
            ) => {}
            (_, _, Ok(())) => {}
            other => panic!("an unexpected answer: {other:?}"),
        }
    }
    let refused = answered.iter().filter(|(_, _, outcome)| outcome.is_err());
    assert_eq!(refused.count(), 2, "{answered:?}");
    assert_eq!(events(a).await, expected(a, 8));
    assert_eq!(events(b).await, expected(b, 5));
    assert_eq!(
        spans(a).await,
        [
            ("s".into(), 6),
            ("t".into(), 2),
            ("u".into(), 4),
            ("v".into(), 9)
        ]
    );
}

/// A step's writes handed over together (the run loop waits for none of them) commit in
/// the order they were handed over — a checkpoint over the event handed before it, a result
/// over its intent — and a write refused among them fails alone.
pub(super) async fn a_steps_writes_commit_in_order_and_a_refused_one_alone(
    store: &dyn Store,
    tenant: &str,
) {
    let run = recorded_run(store, tenant, 16).await;
    let mut steps = Steps::of(&run);
    let mut pending = steps.hand_over(store);
    pending.extend(steps.hand_over(store));
    for answer in pending {
        answer.await.expect("committed");
    }
    // Refused writes between two steps handed over together: a duplicate of the first
    // step's last event (which the store's check refuses) and of its call's intent (which
    // the database's key refuses, failing every statement after it in the transaction).
    let mut pending = steps.hand_over(store);
    let duplicate = store.append_event(&event(&run.run_id, Steps::events(1)), &[]);
    let intent = store.record_intent(&Effect {
        run_id: run.run_id.clone(),
        call_id: Steps::call(1),
        tool: "read_file".into(),
        arguments: "{}".into(),
        idempotent: true,
        intent_at_ms: 8,
        timeout_ms: None,
        result: None,
        pending_changes: None,
    });
    pending.extend(steps.hand_over(store));
    for answer in pending {
        answer.await.expect("committed beside refused writes");
    }
    assert!(matches!(
        duplicate.await,
        Err(StoreError::OutOfOrder { seq: 3, last, .. }) if last >= 3
    ));
    assert!(intent.await.is_err(), "a second intent for one call");
    let events = store.events_after(&run.run_id, 0, 100).await.expect("read");
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=Steps::events(4)).collect::<Vec<_>>()
    );
    assert_eq!(
        events[2],
        event(&run.run_id, 3),
        "the first write of seq 3 is kept"
    );
    assert_eq!(store.spans(&run.run_id).await.expect("read").len(), 4);
    assert_eq!(store.exchanges(&run.run_id).await.expect("read").len(), 4);
    let checkpoint = store
        .latest_checkpoint(&run.run_id)
        .await
        .expect("read")
        .expect("a checkpoint");
    assert_eq!(checkpoint.seq, Steps::events(4));
    assert_eq!(checkpoint.entries.len(), 8);
    assert_eq!(checkpoint.entries[6], b"call 4");
    let effect = store
        .effect(&run.run_id, &Steps::call(4))
        .await
        .expect("read")
        .expect("an intent");
    assert_eq!(effect.result.expect("a result").content, "read 4");
    let record = store
        .run(&run.run_id)
        .await
        .expect("read")
        .expect("the run");
    assert_eq!((record.steps, record.last_seq), (4, Steps::events(4)));
}

pub(super) async fn runs_page_newest_first_with_filters(store: &dyn Store, tenant: &str) {
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
        text: None,
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
    // A search by input: ASCII letters in either case, `%`, `_` and `!` taken literally.
    let searched = |text: &str| RunFilter {
        text: Some(text.to_owned()),
        ..every.clone()
    };
    let (found, _) = store
        .list_runs(&searched("TASK AT 102"), 100, None)
        .await
        .expect("search");
    assert_eq!(
        found.iter().map(|r| &r.run_id).collect::<Vec<_>>(),
        [&ids[2]]
    );
    for literal in ["task%", "task_at", "!"] {
        let (found, _) = store
            .list_runs(&searched(literal), 100, None)
            .await
            .expect("search");
        assert!(found.is_empty(), "{literal} matched {found:?}");
    }
    let (paged, cursor) = store
        .list_runs(&searched("task at 10"), 2, None)
        .await
        .expect("search");
    assert_eq!(
        paged.iter().map(|r| &r.run_id).collect::<Vec<_>>(),
        [&ids[4], &ids[3]]
    );
    assert!(cursor.is_some());
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
