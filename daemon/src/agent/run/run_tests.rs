//! Tests of the run loop as a whole: steps, limits, checkpoints and the provider's call ids.

use std::sync::Arc;

use serde_json::json;

use super::super::testing::{Harness, StalledDisk, finished, kinds};
use super::LoopState;
use super::*;

#[tokio::test]
async fn a_run_reads_as_its_steps_in_its_log_and_its_trace() {
    let harness = Harness::new();
    let script = json!({"turns": [
        {"text": "looking", "tool_calls": [{"name": "noop", "arguments": {"n": 1}}]},
        {"final": "done"}
    ]});
    let (run_id, mut follower) = harness.start(harness.scripted(&script, &["noop"])).await;
    let log = follower.rest().await;
    assert_eq!(
        kinds(&log),
        [
            "run_started",
            "step_started",
            "context_built",
            "model_text",
            "tool_call_proposed",
            "tool_started",
            "tool_output",
            "tool_finished",
            "step_started",
            "context_built",
            "model_text",
            "run_finished",
        ]
    );
    let end = finished(&log);
    assert_eq!(end.reason, pb::StopReason::Final as i32);
    assert_eq!(end.final_text, "done");
    assert_eq!(end.steps, 2);
    let usage = end.usage.expect("usage");
    assert_eq!((usage.model_calls, usage.tool_calls), (2, 1));

    // The trace: one root, a span per stage under its step, every span ended.
    let spans = harness.store.spans(&run_id).await.expect("spans");
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    for expected in [
        "run",
        "step",
        "context",
        "model",
        "validate",
        "permission",
        "tool",
    ] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    assert!(
        spans
            .iter()
            .all(|span| span.end_unix_nano >= span.start_unix_nano && span.end_unix_nano > 0)
    );
    let steps: Vec<&str> = spans
        .iter()
        .filter(|span| span.name == "step")
        .map(|span| span.span_id.as_str())
        .collect();
    assert_eq!(steps.len(), 2);
    for span in spans.iter().filter(|span| span.name == "tool") {
        assert!(steps.contains(&span.parent_span_id.as_str()), "{span:?}");
    }

    // The last checkpoint was saved once the end was recorded: the conversation with
    // the final answer, for the session's next run to continue, and nothing pending.
    let checkpoint = harness
        .store
        .latest_checkpoint(&run_id)
        .await
        .expect("read")
        .expect("a checkpoint");
    let state = LoopState::decode(&checkpoint.state, &checkpoint.entries).expect("decodes");
    assert_eq!(state.pending, None);
    assert_eq!(state.usage.model_calls, 2);
    assert!(matches!(
        state.conversation.last().map(|entry| &entry.message),
        Some(Message::Assistant { text: Some(text), .. }) if text == "done"
    ));
    assert!(state.turn_id.is_some());
}

#[tokio::test]
async fn the_calls_of_one_answer_are_observed_in_order_under_ids_of_their_own() {
    let harness = Harness::new();
    let script = json!({"turns": [
        {"tool_calls": [
            {"name": "noop", "arguments": {"n": 1}},
            {"name": "noop", "arguments": {"n": 2}}
        ]},
        {"final": "done"}
    ]});
    let log = harness.run(harness.scripted(&script, &["noop"])).await;
    let proposed: Vec<pb::ToolCallProposed> = log
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::ToolCallProposed(proposed)) => Some(proposed.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(proposed.len(), 2);
    assert_ne!(proposed[0].call_id, proposed[1].call_id);
    assert!(proposed[0].arguments_json.contains('1'));
    assert!(proposed[1].arguments_json.contains('2'));
    let finished_calls: Vec<String> = log
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::ToolFinished(finished)) => Some(finished.call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished_calls,
        [proposed[0].call_id.clone(), proposed[1].call_id.clone()]
    );
}

/// A compaction is saved at once: the checkpoint after it holds the summary in place of
/// the steps it covers, so a daemon that resumes the run from there does not ask again.
#[tokio::test]
async fn a_compaction_is_checkpointed_in_place_of_what_it_summarises() {
    let harness = Harness::new();
    let turns: Vec<serde_json::Value> = (0..12)
            .map(|n| json!({"text": "x".repeat(400), "tool_calls": [{"name": "noop", "arguments": {"n": n}}]}))
            .chain([json!({"final": "done"})])
            .collect();
    let script = json!({"turns": turns, "compaction": {"summary": "twelve noops"}});
    let mut start = harness.scripted(&script, &["noop"]);
    start.budgets = Some(pb::Budgets {
        context_tokens: 1500,
        ..Default::default()
    });
    let (run_id, mut follower) = harness.start(start).await;
    let log = follower.rest().await;
    assert_eq!(finished(&log).final_text, "done");
    let compactions: Vec<u64> = log
        .iter()
        .filter(|event| matches!(event.event, Some(Event::ContextCompacted(_))))
        .map(|event| event.seq)
        .collect();
    assert!(!compactions.is_empty(), "{:?}", kinds(&log));
    let saved = harness
        .store
        .latest_checkpoint(&run_id)
        .await
        .expect("read")
        .expect("a checkpoint");
    let state = LoopState::decode(&saved.state, &saved.entries).expect("decodes");
    let summaries: Vec<&Entry> = state
        .conversation
        .iter()
        .filter(|entry| matches!(entry.part, Part::Summary { .. }))
        .collect();
    assert_eq!(
        summaries.len(),
        1,
        "the last summary stands for the earlier ones"
    );
    let Message::User { text } = &summaries[0].message else {
        panic!("a summary is a user message");
    };
    assert!(text.contains("twelve noops"), "{text}");
    // The run's answers are all still counted: the next turn of a scripted model stays
    // where it was.
    let answers: u32 = state
        .conversation
        .iter()
        .map(|entry| match (entry.part, &entry.message) {
            (Part::Summary { answers }, _) => answers,
            (_, Message::Assistant { .. }) => 1,
            _ => 0,
        })
        .sum();
    assert_eq!(answers, 13);
}

#[test]
fn provider_ids_are_kept_unless_empty_or_repeated() {
    let call = |id: &str| ToolCall {
        id: id.to_owned(),
        name: "noop".to_owned(),
        arguments: "{}".to_owned(),
    };
    let owned = own_calls(vec![call("a"), call("a"), call(""), call("b")]);
    let provider_ids: Vec<String> = owned
        .iter()
        .map(|(call, call_id)| provider_call_id(call, call_id))
        .collect();
    assert_eq!(provider_ids, ["a", "", "", "b"]);
    // Every call the model reads about has an id of its own.
    let ids: std::collections::HashSet<&str> =
        owned.iter().map(|(call, _)| call.id.as_str()).collect();
    assert_eq!(ids.len(), 4);
}

/// On a runtime of one thread, a commit stuck on the disk must not stop anything else:
/// another run's tool finishes and its next model call is made, while the first run waits
/// for its acknowledgment. A store that blocked the runtime's thread would stop both
/// (and this test would time out).
#[tokio::test(flavor = "current_thread")]
async fn a_stalled_disk_delays_acknowledgments_and_blocks_no_other_run() {
    use super::super::provider::test_server::{self, Reply, TestServer};

    // Run B: a model behind HTTP that calls `wait_gate`, then answers.
    let tool_call = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "wait_gate", "arguments": "{}"}}
        ]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let answer = json!({"choices": [{"message": {"role": "assistant", "content": "done"},
            "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let server = TestServer::start(vec![
        Reply::json(200, &tool_call.to_string()),
        Reply::json(200, &answer.to_string()),
    ])
    .await;
    let mut settings = crate::agent::AgentSettings::default();
    settings.providers = test_server::settings(&server.base_url);
    // Any variable that is set: the test server checks no key.
    settings.providers.openai_api_key_env = "PATH".into();

    let disk = Arc::new(StalledDisk::default());
    let harness = Harness::build(disk.options(), settings);
    let gate = harness.gate();

    let mut b_start = harness.scripted(&json!({}), &["wait_gate"]);
    b_start.model = Some(pb::ModelConfig {
        model: "openai:test".into(),
        ..Default::default()
    });
    let (_, mut b) = harness.start(b_start).await;
    b.until(|event| matches!(event, Event::ToolStarted(_)))
        .await;

    // The disk stalls; run A's start waits for its first commit.
    disk.set_closed(true);
    let runtime = harness.runtime.clone();
    let a_start = harness.scripted(&json!({"turns": [{"final": "a"}]}), &[]);
    let a = tokio::spawn(async move {
        let owner = crate::agent::RunOwner {
            tenant: "default".into(),
            max_live_runs: 10,
            allowed_tools: None,
        };
        runtime
            .start(a_start, &owner)
            .await
            .map(|started| started.live.run_id.clone())
    });
    disk.stalled().await;

    // Meanwhile B's tool ends and B asks its model again, with the tool's result.
    let gate_writer = gate.clone();
    tokio::task::spawn_blocking(move || std::fs::write(gate_writer, b"x"))
        .await
        .expect("join")
        .expect("write the gate");
    let mut waited = 0;
    while server.requests().len() < 2 {
        assert!(waited < 6000, "run B made no second model call");
        waited += 1;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let second = server.requests()[1].body.to_string();
    assert!(second.contains(r#"\"status\":\"OK\""#), "{second}");
    assert!(disk.is_closed(), "the disk was still stalled");
    assert!(
        !a.is_finished(),
        "A's start was acknowledged before its commit"
    );

    // The disk recovers: both runs finish, their logs whole.
    disk.set_closed(false);
    let a_run = a.await.expect("join").expect("A starts");
    let a_log = {
        let mut follower = harness.follow(&a_run).await;
        follower.rest().await
    };
    assert_eq!(finished(&a_log).final_text, "a");
    let b_log = b.rest().await;
    assert_eq!(finished(&b_log).final_text, "done");
}

/// Starts of one tenant made at once cannot all pass its cap: each waits on the store (here a
/// stalled disk) between its check and its launch, and the place it holds meanwhile counts
/// as a run at work. Before, all five passed a cap of two.
#[tokio::test(flavor = "current_thread")]
async fn starts_made_at_once_do_not_pass_their_tenants_cap_together() {
    const CAP: u32 = 2;
    const STARTS: usize = 5;
    let disk = Arc::new(StalledDisk::default());
    let harness = Harness::build(disk.options(), crate::agent::AgentSettings::default());
    /// Opens the disk again however the test ends: the store's thread, waiting on it, is
    /// joined when the harness is dropped.
    struct Reopen(Arc<StalledDisk>);
    impl Drop for Reopen {
        fn drop(&mut self) {
            self.0.set_closed(false);
        }
    }
    let _reopen = Reopen(disk.clone());
    disk.set_closed(true);
    let owner = crate::agent::RunOwner {
        tenant: "default".into(),
        max_live_runs: CAP,
        allowed_tools: None,
    };
    let starts: Vec<_> = (0..STARTS)
        .map(|_| {
            let runtime = harness.runtime.clone();
            let start = harness.scripted(&json!({"turns": [{"final": "x"}]}), &[]);
            let owner = owner.clone();
            tokio::spawn(async move {
                runtime
                    .start(start, &owner)
                    .await
                    .map(|started| started.live.run_id.clone())
            })
        })
        .collect();
    // The refusals come at once, while the disk holds the starts that fit.
    let mut waited = 0;
    while starts.iter().filter(|start| start.is_finished()).count() < STARTS - CAP as usize {
        assert!(waited < 2000, "the starts over the cap were not refused");
        waited += 1;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    disk.set_closed(false);
    let mut started = 0;
    for start in starts {
        match start.await.expect("join") {
            Ok(_) => started += 1,
            Err(crate::agent::AgentError::TooManyRuns { max, .. }) => assert_eq!(max, CAP),
            Err(other) => panic!("a start failed otherwise: {other}"),
        }
    }
    assert_eq!(started, CAP as usize);
}
