//! Tests of the call pipeline: rejected calls, gates, and calls that run at most once.

use std::time::Duration;

use serde_json::json;

use super::super::super::testing::{Harness, finished, kinds};
use super::*;

fn rejections(log: &[pb::RunEvent]) -> Vec<String> {
    log.iter()
        .filter_map(|event| match &event.event {
            Some(Event::ToolCallRejected(rejected)) => Some(rejected.reason.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn calls_that_fail_validation_are_told_to_the_model_and_never_run() {
    let harness = Harness::new();
    let script = json!({"turns": [
        {"tool_calls": [
            {"name": "nothere", "arguments": {}},
            {"name": "noop", "arguments": {"n": "one"}},
            {"name": "noop", "arguments_raw": "{not json"}
        ]},
        {"final": "gave up"}
    ]});
    let log = harness.run(harness.scripted(&script, &["noop"])).await;
    let reasons = rejections(&log);
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].contains("no tool `nothere`") && reasons[0].contains("noop"));
    assert!(reasons[1].contains("/n"), "{}", reasons[1]);
    assert!(!kinds(&log).contains(&"tool_started"));
    assert_eq!(finished(&log).final_text, "gave up");
}

#[tokio::test]
async fn the_same_failing_call_again_and_again_stops_the_run() {
    let harness = Harness::new();
    let bad = json!({"tool_calls": [{"name": "noop", "arguments": {"n": "x"}}]});
    let script = json!({"turns": [bad, bad, bad, bad, {"final": "never"}]});
    let log = harness.run(harness.scripted(&script, &["noop"])).await;
    let end = finished(&log);
    assert_eq!(end.reason, pb::StopReason::RepeatedErrors as i32);
    assert_eq!(rejections(&log).len(), 3, "the third failure stops the run");
}

#[tokio::test]
async fn a_call_runs_after_its_intent_is_recorded_and_its_result_is_journaled() {
    let harness = Harness::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "noop", "arguments": {}}]},
        {"final": "done"}
    ]});
    let (run_id, mut follower) = harness.start(harness.scripted(&script, &["noop"])).await;
    let log = follower.rest().await;
    let call_id = log
        .iter()
        .find_map(|event| match &event.event {
            Some(Event::ToolFinished(finished)) => Some(finished.call_id.clone()),
            _ => None,
        })
        .expect("a finished call");
    let effect = harness
        .store
        .effect(&run_id, &CallId::from_stored(call_id))
        .await
        .expect("read")
        .expect("an effect");
    assert_eq!(effect.tool, "noop");
    assert!(effect.idempotent);
    let result = effect.result.expect("its result");
    assert_eq!(result.status, pb::ToolStatus::Ok as i32);
    assert_eq!(result.content, "{}");
}

/// Whether some process has the FIFO `gate` open for reading: a tool waiting on it is
/// running. When it is, a byte is written for it, and it finishes.
fn release_if_running(gate: &std::path::Path) -> bool {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(gate)
    {
        Ok(mut writer) => {
            writer.write_all(b"x").expect("write the gate");
            true
        }
        // ENXIO: nobody reads the FIFO yet.
        Err(err) if err.raw_os_error() == Some(libc::ENXIO) => false,
        Err(err) => panic!("cannot open the gate: {err}"),
    }
}

/// A call that must not run twice runs only once its intent is committed; an idempotent
/// one does not wait for that commit (run again after a crash, it does no harm). With
/// commits stalled, the idempotent tool starts; its twin that is not idempotent starts
/// only once the disk is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_call_that_must_not_run_twice_waits_for_its_intent() {
    use super::super::super::testing::StalledDisk;
    use crate::agent::AgentSettings;

    for (tool, idempotent) in [("wait_other", true), ("wait_other_once", false)] {
        let disk = Arc::new(StalledDisk::default());
        let harness = Harness::build(disk.options(), AgentSettings::default());
        let gate = harness.gate();
        let other = harness.fifo("other");
        // A first call holds the run while the disk is made to stall.
        let script = json!({"turns": [
            {"tool_calls": [{"name": "wait_gate", "arguments": {}}]},
            {"tool_calls": [{"name": tool, "arguments": {}}]},
            {"final": "done"}
        ]});
        let mut start = harness.scripted(&script, &["wait_gate", tool]);
        start.approval_policy = pb::ApprovalPolicy::Auto as i32;
        let (_, mut follower) = harness.start(start).await;
        follower
            .until(|event| matches!(event, Event::ToolStarted(_)))
            .await;
        disk.set_closed(true);
        let first = gate.clone();
        let released = tokio::task::spawn_blocking(move || {
            while !release_if_running(&first) {
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        released.await.expect("join");
        disk.stalled().await;

        // The second call: started while the disk stalls only if it is idempotent. The
        // idempotent one is given all the time it needs; the other half a second, in
        // which it would start too if it did not wait.
        let tries = if idempotent { 30_000 } else { 250 };
        let mut started = false;
        for _ in 0..tries {
            let other = other.clone();
            if tokio::task::spawn_blocking(move || release_if_running(&other))
                .await
                .expect("join")
            {
                started = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // Opened before anything is asserted: a failing test must not leave the store's
        // thread waiting for the disk, which would hang the test rather than fail it.
        let stalled_throughout = disk.is_closed();
        disk.set_closed(false);
        assert!(stalled_throughout);
        assert_eq!(started, idempotent, "{tool}");
        if !started {
            let other = other.clone();
            tokio::task::spawn_blocking(move || {
                while !release_if_running(&other) {
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
            .await
            .expect("join");
        }
        let log = follower.rest().await;
        assert_eq!(finished(&log).final_text, "done", "{tool}");
        let statuses: Vec<i32> = log
            .iter()
            .filter_map(|event| match &event.event {
                Some(Event::ToolFinished(finished)) => {
                    finished.result.as_ref().map(|result| result.status)
                }
                _ => None,
            })
            .collect();
        assert_eq!(statuses, [pb::ToolStatus::Ok as i32; 2], "{tool}");
    }
}

#[tokio::test]
async fn a_denial_goes_back_to_the_model_or_ends_the_run_when_asked_to() {
    let harness = Harness::new();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "touch", "arguments": {}}]},
        {"final": "denied, then"}
    ]});
    // Policy `never`: a write tool is denied without asking anyone.
    let log = harness.run(harness.scripted(&script, &["touch"])).await;
    let resolved = log
        .iter()
        .find_map(|event| match &event.event {
            Some(Event::ApprovalResolved(resolved)) => Some(resolved.clone()),
            _ => None,
        })
        .expect("the denial is recorded");
    assert_eq!(resolved.decided_by, "policy");
    assert_eq!(resolved.decision, pb::Decision::Deny as i32);
    assert!(!kinds(&log).contains(&"tool_started"));
    assert_eq!(finished(&log).reason, pb::StopReason::Final as i32);

    let mut start = harness.scripted(&script, &["touch"]);
    start.stop_on_denial = true;
    let log = harness.run(start).await;
    let end = finished(&log);
    assert_eq!(end.reason, pb::StopReason::PermissionDenied as i32);
    assert!(end.detail.contains("policy `never`"), "{}", end.detail);
}
