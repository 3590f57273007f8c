//! The suite's checks of kept outputs and execution owners, and of retention: what goes, and
//! that nothing else does.

use super::fixtures::recorded_run;
use crate::domain::StopReason;
use crate::ids::{CheckpointId, ExecutionId, RunId};
use crate::store::{Checkpoint, ExecutionOwner, GrantRecord, OutputRecord, RunEnd, Store};

pub(super) async fn outputs_and_owners_round_trip(store: &dyn Store) {
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
pub(super) async fn old_outputs_and_owners_go_and_nothing_else(store: &dyn Store, tenant: &str) {
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

pub(super) async fn old_finished_runs_are_deleted_and_nothing_else(
    store: &dyn Store,
    tenant: &str,
) {
    let tenant = format!("{tenant}-retention");
    let old = recorded_run(store, &tenant, 1_000).await;
    let end = |at| RunEnd {
        stop_reason: StopReason::Final,
        stop_detail: String::new(),
        final_text: String::new(),
        finished_at_ms: at,
        last_seq: 1,
    };
    store
        .finish_run(&old.run_id, &end(1_001))
        .await
        .expect("end");
    store
        .add_session_grant(&GrantRecord {
            session_id: old.session_id.clone(),
            grant_key: "old-grant".into(),
            tool: "t".into(),
            prefix: None,
            covers: String::new(),
            created_at_ms: 1_000,
        })
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
    store
        .save_checkpoint(
            &old.run_id,
            &Checkpoint {
                checkpoint_id: CheckpointId::new().into_string(),
                seq: 1,
                state: vec![1],
                created_at_ms: 1_000,
                entries_from: 0,
                entries_base: None,
                entries: vec![vec![2], vec![3]],
            },
        )
        .await
        .expect("checkpoint");
    let live = recorded_run(store, &tenant, 1_000).await;
    let deleted = store.delete_finished_runs(2_000, 100).await.expect("sweep");
    assert!(store.exchanges(&old.run_id).await.expect("read").is_empty());
    assert!(deleted.runs >= 1, "{deleted:?}");
    assert_eq!(store.run(&old.run_id).await.expect("read"), None);
    assert_eq!(
        store.latest_checkpoint(&old.run_id).await.expect("read"),
        None
    );
    assert!(
        store
            .events_after(&old.run_id, 0, 10)
            .await
            .expect("read")
            .is_empty()
    );
    assert_eq!(store.session(&old.session_id).await.expect("read"), None);
    assert!(
        store
            .session_grants(&old.session_id)
            .await
            .expect("read")
            .is_empty()
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
