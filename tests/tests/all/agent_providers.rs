//! Runs driven by the HTTP model providers, end to end: the daemon talks to a model API
//! server on loopback that answers with recorded OpenAI and Anthropic responses, executes
//! the calls they propose, and sends the results back in each API's own format.

use airlock_proto::v1 as pb;
use airlock_tests::model_api::{self, ModelApi};
use airlock_tests::{TestDaemon, repo_root};
use pb::run_event::Event;
use serde_json::Value;

const TESTDATA: &str = "daemon/src/agent/provider/testdata";

fn recorded(name: &str) -> String {
    std::fs::read_to_string(repo_root().join(TESTDATA).join(name)).unwrap()
}

fn start(daemon: &TestDaemon, model: &str) -> pb::StartRun {
    let workspace = daemon.workspace("w");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(
        workspace.join("src/calc.py"),
        "def mean(values):\n    return sum(values) / (len(values) - 1)\n",
    )
    .unwrap();
    pb::StartRun {
        workspace: workspace.to_str().unwrap().to_owned(),
        input: "fix the mean".into(),
        model: Some(pb::ModelConfig {
            model: model.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn an_openai_run_retries_rate_limits_rejects_broken_calls_and_sends_results_back() {
    let api = ModelApi::default()
        .reply(
            429,
            &[("retry-after", "0")],
            recorded("openai_error_429.json"),
        )
        .reply(200, &[], recorded("openai_tool_calls.json"))
        .reply(200, &[], recorded("openai_final.json"));
    let daemon = model_api::daemon(&api.serve().await, false).await;
    let mut run = daemon.start_run(start(&daemon, "openai:gpt-4.1")).await;
    let finished = run.finished().await;

    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    assert!(finished.final_text.contains("now divides by `len(values)`"));
    let usage = finished.usage.unwrap();
    assert!(usage.input_tokens >= 412 + 655, "{usage:?}");
    // The rate limit is visible, and was retried.
    let retries = run.of(|e| match e {
        Event::ModelRetry(retry) => Some(retry.clone()),
        _ => None,
    });
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(retries[0].error.contains("429"), "{retries:?}");
    // The call with cut-off JSON arguments was rejected with a reason; the other ran.
    let rejected = run.of(|e| match e {
        Event::ToolCallRejected(rejected) => Some(rejected.clone()),
        _ => None,
    });
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].tool, "grep");
    let finished_calls = run.of(|e| match e {
        Event::ToolFinished(done) => Some(done.clone()),
        _ => None,
    });
    assert_eq!(finished_calls.len(), 1);
    assert_eq!(finished_calls[0].tool, "read_file");
    // Every event of a call carries the provider's id for it beside airlock's own.
    let proposed = run.of(|e| match e {
        Event::ToolCallProposed(proposed) => Some(proposed.clone()),
        _ => None,
    });
    assert_eq!(
        proposed
            .iter()
            .map(|p| p.provider_call_id.as_str())
            .collect::<Vec<_>>(),
        [
            "call_XbV1rk2YJ0x7Qm3pLs9Tn4Ud",
            "call_Hq8WcN5eZr2Kt6Yb1Pv0Xs3M"
        ]
    );
    assert!(proposed.iter().all(|p| p.call_id.starts_with("cal_")));
    assert_eq!(
        finished_calls[0].provider_call_id,
        "call_XbV1rk2YJ0x7Qm3pLs9Tn4Ud"
    );
    assert_eq!(
        rejected[0].provider_call_id,
        "call_Hq8WcN5eZr2Kt6Yb1Pv0Xs3M"
    );
    // And so does the call's tool span.
    let trace = daemon
        .agent()
        .await
        .get_trace(pb::GetTraceRequest {
            run_id: run.run_id().to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    let tool_span = trace
        .spans
        .iter()
        .find(|span| span.name == "tool")
        .expect("a tool span");
    assert!(
        tool_span
            .attributes
            .iter()
            .any(|a| a.key == "provider_call_id" && a.value == "call_XbV1rk2YJ0x7Qm3pLs9Tn4Ud"),
        "{tool_span:?}"
    );

    let received = api.received();
    assert_eq!(received.len(), 3);
    for request in &received {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(request.body["model"], "gpt-4.1");
        assert!(
            request.body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["function"]["name"] == "read_file"),
            "{}",
            request.body
        );
        // A local server gets no key it did not ask for.
        assert!(request.headers.iter().all(|(k, _)| k != "authorization"));
    }
    // The last request carries both calls' outcomes, each under its call id.
    let messages = received[2].body["messages"].as_array().unwrap();
    let tool_message = |id: &str| {
        messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("no result for {id} in {messages:#?}"))
            .clone()
    };
    let read = tool_message("call_XbV1rk2YJ0x7Qm3pLs9Tn4Ud");
    assert!(
        read["content"]
            .as_str()
            .unwrap()
            .contains("len(values) - 1"),
        "{read}"
    );
    let broken = tool_message("call_Hq8WcN5eZr2Kt6Yb1Pv0Xs3M");
    assert!(!broken["content"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn an_anthropic_run_executes_tool_use_blocks_and_answers_with_tool_results() {
    let api = ModelApi::default()
        .reply(200, &[], recorded("anthropic_tool_use.json"))
        .reply(200, &[], recorded("anthropic_final.json"));
    let daemon = model_api::daemon(&api.serve().await, false).await;
    let mut run = daemon
        .start_run(start(&daemon, "anthropic:claude-sonnet-4-5"))
        .await;
    let finished = run.finished().await;

    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    assert_eq!(
        finished.final_text,
        "Fixed: `mean` now divides by `len(values)`."
    );
    let tools: Vec<String> = run.of(|e| match e {
        Event::ToolFinished(done) => Some(done.tool.clone()),
        _ => None,
    });
    assert_eq!(tools, ["read_file", "list_dir"]);
    let provider_ids: Vec<String> = run.of(|e| match e {
        Event::ToolFinished(done) => Some(done.provider_call_id.clone()),
        _ => None,
    });
    assert_eq!(
        provider_ids,
        [
            "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
            "toolu_01NCdQ5xU8Lq9fXfPUm1qRrT"
        ]
    );
    let texts = run.of(|e| match e {
        Event::ModelText(text) => Some(text.text.clone()),
        _ => None,
    });
    assert!(
        texts.iter().any(|t| t.contains("read the module")),
        "{texts:?}"
    );

    let received = api.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].path, "/v1/messages");
    assert!(
        received[0]
            .headers
            .iter()
            .any(|(k, _)| k == "anthropic-version")
    );
    // The second request answers both tool_use blocks in one user turn of tool_results.
    let messages = received[1].body["messages"].as_array().unwrap();
    let results: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "tool_result")
        .collect();
    let ids: Vec<&str> = results
        .iter()
        .map(|r| r["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
            "toolu_01NCdQ5xU8Lq9fXfPUm1qRrT"
        ]
    );
    assert!(
        results[0].to_string().contains("len(values) - 1"),
        "{}",
        results[0]
    );
}

#[tokio::test]
async fn a_model_api_that_keeps_failing_ends_the_run_with_model_error() {
    let api = ModelApi::default();
    for _ in 0..4 {
        let api = api.clone();
        api.reply(500, &[], recorded("openai_error_500.json"));
    }
    let daemon = model_api::daemon(&api.serve().await, false).await;
    let mut run = daemon.start_run(start(&daemon, "openai:gpt-4.1")).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::ModelError as i32,
        "{finished:?}"
    );
    assert!(finished.detail.contains("500"), "{}", finished.detail);
    assert_eq!(api.received().len(), 4, "four attempts, then the run stops");
}
