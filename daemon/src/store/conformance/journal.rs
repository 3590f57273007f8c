//! The suite's checks of what resumption and tracing keep: checkpoints, the effect journal,
//! approvals and grants, spans, model exchanges.

use airlock_proto::v1 as pb;

use super::fixtures::{event, recorded_run};
use crate::domain::{DecidedBy, Decision};
use crate::ids::{ApprovalId, CallId, CheckpointId, RunId};
use crate::store::{ApprovalResolution, Checkpoint, Effect, GrantRecord, Store, StoreError};

/// A checkpoint's conversation is written from where the one before left it, read whole,
/// and never goes on from a checkpoint the store does not hold.
pub(super) async fn a_checkpoints_conversation_is_kept_entry_by_entry(
    store: &dyn Store,
    tenant: &str,
) {
    let run = recorded_run(store, tenant, 13).await;
    let run_id = &run.run_id;
    for seq in 2..=3 {
        store
            .append_event(&event(run_id, seq), &[])
            .await
            .expect("append");
    }
    let entries = |names: &[&str]| {
        names
            .iter()
            .map(|name| name.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    let checkpoint = |seq: u64, base: Option<&Checkpoint>, entries_from, entries| Checkpoint {
        checkpoint_id: CheckpointId::new().into_string(),
        seq,
        state: vec![seq as u8],
        created_at_ms: 5,
        entries_from,
        entries_base: base.map(|base| base.checkpoint_id.clone()),
        entries,
    };
    let held = async || {
        let latest = store
            .latest_checkpoint(run_id)
            .await
            .expect("read")
            .expect("a checkpoint");
        assert_eq!(latest.entries_from, 0);
        latest.entries
    };
    let save = async |checkpoint: &Checkpoint| store.save_checkpoint(run_id, checkpoint).await;
    let first = checkpoint(1, None, 0, entries(&["goal", "a", "b"]));
    save(&first).await.expect("first");
    let second = checkpoint(2, Some(&first), 3, entries(&["c"]));
    save(&second).await.expect("appended");
    assert_eq!(held().await, entries(&["goal", "a", "b", "c"]));
    // Going on from a checkpoint the store does not hold — one whose write failed, or an
    // older one — is refused, and what it wrote is undone: had it kept its entry, the third
    // would read `x`.
    let lost = checkpoint(3, None, 0, Vec::new());
    for base in [&lost, &first] {
        assert!(matches!(
            save(&checkpoint(3, Some(base), 2, entries(&["x"]))).await,
            Err(StoreError::ConversationGap { from: 2, .. })
        ));
        assert_eq!(held().await, entries(&["goal", "a", "b", "c"]));
    }
    // A checkpoint past the log is refused with its entries.
    assert!(matches!(
        save(&checkpoint(9, Some(&second), 1, entries(&["y"]))).await,
        Err(StoreError::Unlogged { seq: 9, .. })
    ));
    assert_eq!(held().await, entries(&["goal", "a", "b", "c"]));
    // A compaction rewrites from its first entry: the ones after are gone from what is read.
    let compacted = checkpoint(3, Some(&second), 1, entries(&["summary"]));
    save(&compacted).await.expect("rewritten");
    assert_eq!(held().await, entries(&["goal", "summary"]));
    // Then it grows again over the left-over rows, in statements of every size.
    let many: Vec<Vec<u8>> = (0..43).map(|i| format!("e{i}").into_bytes()).collect();
    let grown = checkpoint(3, Some(&compacted), 2, many.clone());
    save(&grown).await.expect("grown");
    let mut expected = entries(&["goal", "summary"]);
    expected.extend(many);
    assert_eq!(held().await, expected);
    let latest = store
        .latest_checkpoint(run_id)
        .await
        .expect("read")
        .expect("a checkpoint");
    assert_eq!(
        (latest.checkpoint_id, latest.state),
        (grown.checkpoint_id, vec![3])
    );
    // Written whole, it needs no checkpoint before it.
    save(&checkpoint(3, None, 0, entries(&["z"])))
        .await
        .expect("whole");
    assert_eq!(held().await, entries(&["z"]));
}

pub(super) async fn checkpoints_effects_approvals_and_grants_round_trip(
    store: &dyn Store,
    tenant: &str,
) {
    let run = recorded_run(store, tenant, 13).await;
    let run_id = &run.run_id;
    assert_eq!(store.latest_checkpoint(run_id).await.expect("read"), None);
    let checkpoint = |seq| Checkpoint {
        checkpoint_id: CheckpointId::new().into_string(),
        seq,
        state: vec![1, 2, 3],
        created_at_ms: 5,
        entries_from: 0,
        entries_base: None,
        entries: Vec::new(),
    };
    store
        .save_checkpoint(run_id, &checkpoint(1))
        .await
        .expect("first");
    // A checkpoint past the log (its events' write failed) is refused; the last one stays.
    assert!(matches!(
        store.save_checkpoint(run_id, &checkpoint(4)).await,
        Err(StoreError::Unlogged {
            seq: 4,
            what: "checkpoint",
            ..
        })
    ));
    assert_eq!(
        store
            .latest_checkpoint(run_id)
            .await
            .expect("read")
            .map(|kept| kept.seq),
        Some(1)
    );
    for seq in 2..=4 {
        store
            .append_event(&event(run_id, seq), &[])
            .await
            .expect("append");
    }
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
    // A reason the daemon records is stored whatever it holds: NUL, which PostgreSQL's text
    // refuses, reads back as U+FFFD from every backend.
    let resolution = ApprovalResolution {
        decision: Decision::ApproveSession,
        reason: "fine\0".into(),
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
    // A second resolution (a daemon that lost the run, recording its own expiry) changes
    // nothing: the first stands.
    store
        .resolve_approval(
            &ApprovalId::from_stored(asked.approval_id.clone()),
            &ApprovalResolution {
                decision: Decision::Deny,
                reason: "no answer by the deadline".into(),
                decided_by: DecidedBy::Deadline,
                resolved_at_ms: 10,
            },
        )
        .await
        .expect("a late resolution is no error");
    assert_eq!(
        store
            .approval_for_call(run_id, &call_id)
            .await
            .expect("read"),
        Some((
            asked,
            Some(ApprovalResolution {
                reason: "fine\u{fffd}".into(),
                ..resolution
            })
        ))
    );

    let exact = GrantRecord {
        session_id: run.session_id.clone(),
        grant_key: "grant-1".into(),
        tool: "write_file".into(),
        prefix: None,
        covers: "write_file {\"path\":\"a\"}".into(),
        created_at_ms: 1_000,
    };
    let prefix = GrantRecord {
        grant_key: "grant-2".into(),
        tool: "run_command".into(),
        prefix: Some(vec!["git".into(), "push".into()]),
        covers: "`git push …` in run_command".into(),
        created_at_ms: 2_000,
        ..exact.clone()
    };
    store.add_session_grant(&exact).await.expect("grant");
    store
        .add_session_grant(&exact)
        .await
        .expect("a grant twice is one grant");
    store.add_session_grant(&prefix).await.expect("grant");
    let grants = store.session_grants(&run.session_id).await.expect("read");
    assert_eq!(grants, vec![exact.clone(), prefix.clone()]);
    assert!(
        store
            .revoke_session_grant(&run.session_id, "grant-1")
            .await
            .expect("revoke")
    );
    assert!(
        !store
            .revoke_session_grant(&run.session_id, "grant-1")
            .await
            .expect("revoke again"),
        "a revoked grant is gone"
    );
    assert_eq!(
        store.session_grants(&run.session_id).await.expect("read"),
        vec![prefix]
    );
}

pub(super) async fn spans_ride_with_their_event(store: &dyn Store, tenant: &str) {
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
    // Two spans of one id with an event: the last is kept, as two writes of it would keep
    // it, and the others ride along.
    store
        .append_event(
            &event(&run.run_id, 4),
            &[span("e", 5), span("f", 6), span("e", 7)],
        )
        .await
        .expect("event with a repeated span");
    let spans = store.spans(&run.run_id).await.expect("read");
    assert_eq!(
        spans
            .iter()
            .map(|s| (s.span_id.as_str(), s.start_unix_nano))
            .collect::<Vec<_>>(),
        [("a", 1), ("b", 2), ("c", 3), ("f", 6), ("e", 7)]
    );
}

pub(super) async fn exchanges_keep_their_order(store: &dyn Store, tenant: &str) {
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
