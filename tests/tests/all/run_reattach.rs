//! Re-attaching to a run: a client that lost its stream comes back with the last `seq` it
//! saw and gets every later event, in order, then the live ones: no gap, no duplicate,
//! byte for byte what the first client saw.

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, TestDaemon, repo_root, scripted_run};
use pb::run_event::Event;
use prost::Message as _;
use serde_json::json;

async fn daemon() -> TestDaemon {
    TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await
}

fn bytes(events: &[pb::RunEvent]) -> Vec<Vec<u8>> {
    events.iter().map(|e| e.encode_to_vec()).collect()
}

#[tokio::test]
async fn attaching_to_a_finished_run_replays_exactly_what_follows_the_given_seq() {
    let daemon = daemon().await;
    let workspace = daemon.workspace("w");
    std::fs::write(workspace.join("a.txt"), "alpha\n").unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"tool_calls": [{"name": "list_dir", "arguments": {}}]},
        {"final": "done"}
    ]});
    let mut first = daemon.start_run(scripted_run(&workspace, &script)).await;
    first.finished().await;
    first.drain().await;
    let all = first.seen.clone();
    let run_id = all[0].run_id.clone();
    let last = all.len() as u64;
    assert!(last > 10, "a run of a few steps: {last} events");

    for after in [0, 1, last / 2, last - 1, last] {
        let mut again = daemon.attach_run(&run_id, after).await;
        again.drain().await;
        assert_eq!(
            bytes(&again.seen),
            bytes(&all[after as usize..]),
            "attached after seq {after}"
        );
    }
}

#[tokio::test]
async fn a_client_that_drops_mid_run_comes_back_and_misses_nothing() {
    let daemon = daemon().await;
    let workspace = daemon.workspace("w");
    std::fs::write(workspace.join("a.txt"), "alpha\n").unwrap();
    let script = json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "beta\n"}}]},
        {"final": "done"}
    ]});
    let mut start = scripted_run(&workspace, &script);
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;

    // The first client sees the run up to its approval request, then goes away.
    let mut first = daemon.start_run(start).await;
    let request = first.approval_requested().await;
    let seen_first = first.seen.clone();
    let run_id = seen_first[0].run_id.clone();
    let cut = seen_first.len() as u64;
    drop(first);

    // A watcher attached from an early point while the run is live sees the same prefix.
    let mut watcher = daemon.attach_run(&run_id, 2).await;
    let again = watcher.approval_requested().await;
    assert_eq!(again.approval_id, request.approval_id);
    assert_eq!(
        bytes(&watcher.seen),
        bytes(&seen_first[2..]),
        "the live replay"
    );

    // The first client comes back from the last seq it saw, answers, and follows to the end.
    let mut back = daemon.attach_run(&run_id, cut).await;
    back.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    let finished = back.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    assert_eq!(
        back.seen[0].seq,
        cut + 1,
        "it resumes right after its last event"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("b.txt")).unwrap(),
        "beta\n"
    );

    // What the two lives of the client saw is the whole log, once.
    let mut whole = seen_first.clone();
    whole.extend(back.seen.iter().cloned());
    for (index, event) in whole.iter().enumerate() {
        assert_eq!(event.seq, index as u64 + 1, "no gap, no duplicate");
    }
    let mut replay = daemon.attach_run(&run_id, 0).await;
    replay.drain().await;
    assert_eq!(bytes(&replay.seen), bytes(&whole));
    // And the watcher, still attached, saw the rest live.
    watcher.drain().await;
    assert_eq!(bytes(&watcher.seen), bytes(&whole[2..]));
    assert!(matches!(
        whole.last().and_then(|e| e.event.as_ref()),
        Some(Event::RunFinished(_))
    ));
}

#[tokio::test]
async fn attaching_to_an_unknown_run_is_not_found() {
    let daemon = daemon().await;
    let status = daemon
        .open_run(pb::run_request::Request::Attach(pb::AttachRun {
            run_id: "run_00000000000000000000000000000000".into(),
            after_seq: 0,
        }))
        .await
        .err()
        .expect("refused");
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
}
