//! Cassettes, end to end: a run against a real model API (on loopback) is captured with
//! `GetCassette` in the provider's wire format with no key in it, replayed with no model
//! server at all to the same answers and calls, and a replay whose run asks something else
//! (a tool now answers differently) stops with the difference named. Live runs and runs that
//! continue a session have no cassette.

use airlock_proto::v1 as pb;
use airlock_tests::model_api::{self, ModelApi};
use airlock_tests::{TestDaemon, scripted_run};
use serde_json::{Value, json};

/// An OpenAI chat completion answering with `message`.
fn completion(message: Value, finish: &str) -> String {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 9}
    })
    .to_string()
}

/// A model API that reads `src/calc.py`, then answers.
fn api() -> ModelApi {
    ModelApi::default()
        .reply(
            200,
            &[],
            completion(
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_a1", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":\"src/calc.py\"}"}}]}),
                "tool_calls",
            ),
        )
        .reply(
            200,
            &[],
            completion(
                json!({"role": "assistant", "content": "mean() divides by len(values)."}),
                "stop",
            ),
        )
}

fn workspace(daemon: &TestDaemon, name: &str, calc: &str) -> String {
    let workspace = daemon.workspace(name);
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("src/calc.py"), calc).unwrap();
    workspace.to_str().unwrap().to_owned()
}

const CALC: &str = "def mean(values):\n    return sum(values) / len(values)\n";

fn start(workspace: String, model: pb::ModelConfig) -> pb::StartRun {
    pb::StartRun {
        workspace,
        input: "what does mean() do?".into(),
        model: Some(model),
        tools: vec!["read_file".into()],
        ..Default::default()
    }
}

async fn cassette(
    daemon: &TestDaemon,
    run_id: &str,
) -> Result<pb::GetCassetteResponse, tonic::Status> {
    daemon
        .agent()
        .await
        .get_cassette(pb::GetCassetteRequest {
            run_id: run_id.into(),
        })
        .await
        .map(tonic::Response::into_inner)
}

/// Records a run of `openai:gpt-4.1` and returns the daemon, its model API and the cassette.
async fn recorded() -> (TestDaemon, ModelApi, pb::GetCassetteResponse) {
    let api = api();
    let url = api.serve().await;
    let daemon = model_api::daemon(&url, false).await;
    let model = pb::ModelConfig {
        model: "openai:gpt-4.1".into(),
        ..Default::default()
    };
    let mut run = daemon
        .start_run(start(workspace(&daemon, "rec", CALC), model))
        .await;
    let finished = run.finished().await;
    assert_eq!(finished.reason(), pb::StopReason::Final, "{finished:?}");
    let cassette = cassette(&daemon, run.run_id()).await.expect("a cassette");
    (daemon, api, cassette)
}

fn replay(cassette: &str) -> pb::ModelConfig {
    pb::ModelConfig {
        model: "replay".into(),
        cassette: cassette.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_recorded_run_replays_without_its_model() {
    let (daemon, api, cassette) = recorded().await;
    assert_eq!(cassette.model, "openai:gpt-4.1");
    assert_eq!(cassette.exchanges, 2);
    let document: Value = serde_json::from_str(&cassette.cassette).unwrap();
    assert_eq!(document["cassette"], 1);
    assert_eq!(document["provider"], "openai");
    // The wire format: the request body as sent, the reply as received.
    let first = &document["exchanges"][0];
    assert_eq!(first["purpose"], "step");
    assert_eq!(first["answers"], 0);
    assert_eq!(first["request"]["model"], "gpt-4.1");
    assert_eq!(first["request"], api.received()[0].body);
    assert_eq!(
        first["reply"]["whole"]["choices"][0]["message"]["tool_calls"][0]["id"],
        "call_a1"
    );
    let second = &document["exchanges"][1];
    assert_eq!(second["answers"], 1);
    assert_eq!(second["request"], api.received()[1].body);
    assert!(!cassette.cassette.to_lowercase().contains("authorization"));

    // No model server answers now: the replay reads the same file and gives the same answer.
    let asked = api.received().len();
    let mut run = daemon
        .start_run(start(
            workspace(&daemon, "replay", CALC),
            replay(&cassette.cassette),
        ))
        .await;
    let finished = run.finished().await;
    assert_eq!(finished.reason(), pb::StopReason::Final, "{finished:?}");
    assert_eq!(finished.final_text, "mean() divides by len(values).");
    let calls = run.of(|event| match event {
        pb::run_event::Event::ToolCallProposed(proposed) => Some(proposed.tool.clone()),
        _ => None,
    });
    assert_eq!(calls, ["read_file"]);
    assert_eq!(
        api.received().len(),
        asked,
        "the replay asked the model API"
    );
    // The usage is the recording's: the replayed run costs what the recorded one did.
    let info = daemon.run_info(run.run_id()).await;
    assert_eq!(info.usage.unwrap().input_tokens, 240);
    // A replayed run is recorded too: its cassette is the same exchanges.
    let again = self::cassette(&daemon, run.run_id())
        .await
        .expect("a cassette");
    let again: Value = serde_json::from_str(&again.cassette).unwrap();
    assert_eq!(again["exchanges"], document["exchanges"]);
}

#[tokio::test]
async fn a_replay_whose_tool_answers_otherwise_stops_at_the_difference() {
    let (daemon, _api, cassette) = recorded().await;
    // The file the tool reads changed: the second request carries another observation.
    let changed = "def mean(values):\n    return sum(values) / (len(values) - 1)\n";
    let mut run = daemon
        .start_run(start(
            workspace(&daemon, "changed", changed),
            replay(&cassette.cassette),
        ))
        .await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason(),
        pb::StopReason::ModelError,
        "{finished:?}"
    );
    let detail = &finished.detail;
    assert!(detail.contains("diverged from its cassette"), "{detail}");
    assert!(detail.contains("model call after 1 answer(s)"), "{detail}");
    assert!(detail.contains("/messages/"), "{detail}");
    assert!(detail.contains("len(values) - 1"), "{detail}");
    // The first call, which matched, was answered: the tool ran for real.
    let statuses = run.of(|event| match event {
        pb::run_event::Event::ToolFinished(done) => done.result.as_ref().map(|r| r.status()),
        _ => None,
    });
    assert_eq!(statuses, [pb::ToolStatus::Ok]);
}

#[tokio::test]
async fn a_replay_past_its_recording_or_of_a_broken_cassette_is_refused_clearly() {
    let (daemon, _api, cassette) = recorded().await;
    // Two answers recorded; a run whose model gets an error back asks a third.
    let mut document: Value = serde_json::from_str(&cassette.cassette).unwrap();
    document["exchanges"].as_array_mut().unwrap().pop();
    let mut run = daemon
        .start_run(start(
            workspace(&daemon, "short", CALC),
            replay(&document.to_string()),
        ))
        .await;
    let finished = run.finished().await;
    assert_eq!(finished.reason(), pb::StopReason::ModelError);
    assert!(
        finished.detail.contains("the cassette recorded none"),
        "{}",
        finished.detail
    );

    let status = daemon
        .agent()
        .await
        .run(tokio_stream::iter([pb::RunRequest {
            request: Some(pb::run_request::Request::Start(start(
                workspace(&daemon, "broken", CALC),
                replay(r#"{"cassette": 1, "provider": "openai"}"#),
            ))),
        }]))
        .await
        .expect_err("a broken cassette is refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("cassette"),
        "{}",
        status.message()
    );
    assert!(
        status.message().contains("model.cassette"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn live_runs_and_continued_sessions_have_no_cassette() {
    let daemon = model_api::daemon("http://127.0.0.1:9", false).await;
    let slow = json!({"turns": [{"final": "done", "delay_ms": 60000}]});
    let mut run = daemon
        .start_run(scripted_run(&daemon.workspace("live"), &slow))
        .await;
    run.until(|event| matches!(event, pb::run_event::Event::StepStarted(_)).then_some(()))
        .await;
    let status = cassette(&daemon, run.run_id()).await.expect_err("live");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(
        status.message().contains("still going"),
        "{}",
        status.message()
    );
    run.send(pb::run_request::Request::Cancel(pb::CancelRun {
        reason: "done".into(),
    }));
    run.finished().await;

    let quick = json!({"turns": [{"final": "first"}]});
    let mut first = daemon
        .start_run(scripted_run(&daemon.workspace("session"), &quick))
        .await;
    first.finished().await;
    let started = first.of(|event| match event {
        pb::run_event::Event::RunStarted(started) => Some(started.session_id.clone()),
        _ => None,
    });
    let captured = cassette(&daemon, first.run_id())
        .await
        .expect("the first run's");
    assert_eq!(captured.model, "scripted");
    let mut next = scripted_run(&daemon.workspace("session"), &quick);
    next.session_id = started[0].clone();
    next.workspace = String::new();
    let mut second = daemon.start_run(next).await;
    second.finished().await;
    let status = cassette(&daemon, second.run_id())
        .await
        .expect_err("continued");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(
        status.message().contains("starts from"),
        "{}",
        status.message()
    );
}
