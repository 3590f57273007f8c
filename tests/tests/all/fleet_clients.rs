//! A fleet as its clients see it: a client of any daemon follows a run another daemon
//! executes, in sequence order without gaps (also while the run moves to a third daemon
//! after a kill), sees its approval requests on an approver console, and answers or cancels
//! it — applied once, by the daemon executing the run; and the same token, kept outputs and
//! change sets serve it on every daemon.

use std::time::Duration;

use airlock_proto::v1 as pb;
use airlock_tests::{Console, Execution, RunStream, scripted_run};
use pb::run_event::Event;
use prost::Message as _;

use super::fleet::{
    Fleet, await_finished, check_finished_once, check_taken_over, follow, kind, read_to_end,
    script, start_and_read, start_writing, stored_log,
};

/// The stored events among `events` (streamed pieces left out), encoded, for comparison.
fn stored(events: &[pb::RunEvent]) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter(|event| !event.delta)
        .map(|event| event.encode_to_vec())
        .collect()
}

fn decision(request: &pb::ApprovalRequest, digest: &str) -> pb::ApprovalDecision {
    pb::ApprovalDecision {
        approval_id: request.approval_id.clone(),
        decision: pb::Decision::ApproveOnce as i32,
        reason: String::new(),
        digest: digest.into(),
        grant_prefix: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_one_daemon_executes_is_followed_and_answered_through_the_others() {
    let fleet = Fleet::new().await;
    let (a, b, c) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"), fleet.daemon("c"));
    // An approver console on c, open before the run starts.
    let mut console = Console::on(c.agent().await).await;
    let mut start = scripted_run(&fleet.workspace(), &script(0, "log.txt"));
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    let mut on_a = RunStream::open(a.agent().await, pb::run_request::Request::Start(start))
        .await
        .unwrap();
    let run_id = on_a.next().await.unwrap().run_id;
    let on_b = follow(&b, &run_id).await;

    // The write waits for an approval, which c's console is shown.
    let request = console.next_in(pb::ApprovalState::Pending).await;
    assert_eq!(request.run_id, run_id, "{request:?}");
    assert_eq!(request.tool, "append", "{request:?}");
    // Answered on b: a's broker judges it, and b's client hears why it does not count.
    let refused = b
        .agent()
        .await
        .decide_approval(decision(&request, "not-the-digest"))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(refused.message().contains("digest"), "{refused:?}");
    b.agent()
        .await
        .decide_approval(decision(&request, &request.digest))
        .await
        .unwrap();
    let resolved = console.next_in(pb::ApprovalState::Resolved).await;
    assert_eq!(resolved.approval_id, request.approval_id);
    assert_eq!(
        resolved.detail, "approved once by the approver",
        "{resolved:?}"
    );
    // Answered once: a second answer, on c, finds nothing pending.
    let again = c
        .agent()
        .await
        .decide_approval(decision(&request, &request.digest))
        .await
        .unwrap_err();
    assert_eq!(again.code(), tonic::Code::NotFound, "{again:?}");

    // b's client saw what a's did, every stored event in order, to the run's end.
    let followed = read_to_end(on_b).await;
    on_a.drain().await;
    assert_eq!(stored(&followed), stored(on_a.seen()));
    let log = stored_log(&c, &run_id).await;
    check_finished_once("followed on b", &followed, &log, fleet.effects());
    assert_eq!(followed.len(), log.len());
    let answers: Vec<_> = log
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::ApprovalResolved(resolved)) => Some(resolved.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].decided_by, "approver", "{answers:?}");
    assert_eq!(fleet.effects(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_another_daemon_sees_no_gap_when_the_run_moves_after_a_kill() {
    let fleet = Fleet::new().await;
    let (a, b, c) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"), fleet.daemon("c"));
    let (run_id, received) = start_and_read(&a, &fleet.workspace(), 1_500, |seen| {
        seen.iter().filter(|e| kind(e) == "context_built").count() == 2
    })
    .await;
    let mut on_b = follow(&b, &run_id).await;
    // Caught up with what a's client saw before a goes.
    let mut followed = Vec::new();
    while followed.len() < received.len() {
        let event = tokio::time::timeout(Duration::from_secs(60), on_b.message())
            .await
            .expect("an event within a minute")
            .unwrap()
            .expect("the stream is open");
        followed.push(event);
    }
    a.kill().await;
    followed.extend(read_to_end(on_b).await);
    let log = stored_log(&c, &run_id).await;
    assert_eq!(stored(&followed), stored(&log));
    check_taken_over(
        "followed on b across the kill",
        &received,
        &followed,
        fleet.effects(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_another_daemon_executes_is_cancelled_through_this_one() {
    let fleet = Fleet::new().await;
    let (a, b) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"));
    let (run_id, _) = start_and_read(&a, &fleet.workspace(), 60_000, |seen| {
        seen.iter().filter(|e| kind(e) == "context_built").count() == 2
    })
    .await;
    b.agent()
        .await
        .cancel_run(pb::CancelRunRequest {
            run_id: run_id.clone(),
            reason: "asked on b".into(),
        })
        .await
        .unwrap();
    await_finished(&b, &run_id).await;
    let log = stored_log(&b, &run_id).await;
    let Some(Event::RunFinished(finished)) = log.last().and_then(|e| e.event.clone()) else {
        panic!("the run did not finish: {log:#?}");
    };
    assert_eq!(
        finished.reason,
        pb::StopReason::Cancelled as i32,
        "{finished:?}"
    );
    assert!(finished.detail.contains("asked on b"), "{finished:?}");
    // Finished, the run takes no more commands, wherever they are sent.
    let late = b
        .agent()
        .await
        .cancel_run(pb::CancelRunRequest {
            run_id,
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(late.code(), tonic::Code::FailedPrecondition, "{late:?}");
    assert_eq!(fleet.effects(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_kept_outputs_and_change_sets_serve_on_every_daemon() {
    let fleet = Fleet::new().await;
    let (a, b) = tokio::join!(fleet.daemon("a"), fleet.daemon("b"));
    // Both started at once on the shared dir, and agree on one token.
    assert_eq!(a.token, b.token);

    // A call on a, cut and kept whole; read on b.
    let stream = pb::tools_client::ToolsClient::new(a.channel().await)
        .execute_tool(pb::ExecuteToolRequest {
            tool: "big".into(),
            arguments_json: r#"{"bytes": 50000}"#.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let result = Execution::read(stream).await.unwrap().result().clone();
    assert!(result.truncated, "{result:?}");
    let page = pb::tools_client::ToolsClient::new(b.channel().await)
        .read_output(pb::ReadOutputRequest {
            execution_id: result.execution_id.clone(),
            offset: 0,
            length: 100_000,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(page.eof);
    assert_eq!(page.total_bytes, result.original_bytes);

    // A run on a changes a file; b puts it back as it was, from the contents a kept.
    let notes = fleet.workspace().join("notes.txt");
    let (run_id, _) = start_writing(&a, &fleet.workspace(), 0, "notes.txt", |_| false).await;
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "alpha\neffect\n");
    b.agent()
        .await
        .revert_run(pb::RevertRunRequest {
            run_id,
            to_step: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "alpha\n");
}
