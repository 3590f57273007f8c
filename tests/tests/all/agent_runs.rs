//! Runs of the agent loop end to end over gRPC, with the scripted model and real tools:
//! the events a client sees, validation of what the model proposes, and every stop reason.

use std::path::PathBuf;

use airlock_proto::v1 as pb;
use airlock_tests::{
    DaemonOptions, RunStream, TestDaemon, ToolsDir, repo_root, scripted_run, test_module,
};
use pb::run_event::Event;
use serde_json::{Value, json};

/// A daemon with the first-party plugins and a few test tools.
async fn daemon() -> (TestDaemon, ToolsDir) {
    let extra = ToolsDir::new();
    extra.add_file("spin", &test_module("spin"), "timeout_ms = 60000");
    extra.add_file("exit_code", &test_module("exit_code"), "");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins"), extra.path().to_owned()],
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    (daemon, extra)
}

fn workspace(daemon: &TestDaemon) -> PathBuf {
    let workspace = daemon.workspace("project");
    std::fs::write(workspace.join("notes.txt"), "alpha\nbeta\n").unwrap();
    workspace
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

fn observations(run: &RunStream) -> Vec<pb::ToolResult> {
    run.of(|event| match event {
        Event::ToolFinished(finished) => finished.result.clone(),
        _ => None,
    })
}

#[tokio::test]
async fn a_run_reads_a_file_and_finishes_with_numbered_events() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script = json!({"turns": [
        {"text": "Reading the notes.", "tool_calls": [call("read_file", json!({"path": "notes.txt"}))]},
        {"final": "The notes say alpha and beta."}
    ]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    assert_eq!(finished.final_text, "The notes say alpha and beta.");
    assert_eq!(finished.steps, 2);
    let usage = finished.usage.unwrap();
    assert_eq!((usage.model_calls, usage.tool_calls), (2, 1));

    // Numbered from 1 without gaps, all for this run, with step ids on step events.
    let run_id = run.run_id().to_owned();
    for (index, event) in run.seen.iter().enumerate() {
        assert_eq!(event.seq, index as u64 + 1);
        assert_eq!(event.run_id, run_id);
        assert!(event.time_ms > 0);
    }
    let kinds: Vec<&str> = run
        .seen
        .iter()
        .map(|event| event.event.as_ref().unwrap().kind())
        .filter(|kind| *kind != "tool_output")
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "step_started",
            "context_built",
            "model_text",
            "tool_call_proposed",
            "tool_started",
            "tool_finished",
            "step_started",
            "context_built",
            "model_text",
            "run_finished"
        ]
    );
    let started = run.of(|event| match event {
        Event::RunStarted(started) => Some(started.clone()),
        _ => None,
    });
    assert_eq!(started[0].model, "scripted");
    assert_eq!(started[0].trace_id.len(), 32);
    assert!(started[0].session_id.starts_with("ses_"));
    let step_events = run
        .seen
        .iter()
        .filter(|e| matches!(e.event, Some(Event::ToolFinished(_))));
    for event in step_events {
        assert!(event.step_id.starts_with("stp_"));
    }
    let result = &observations(&run)[0];
    assert_eq!(result.status, pb::ToolStatus::Ok as i32);
    assert!(result.content.contains("alpha"));

    // GetRun and ListRuns read the same run back.
    let mut agent = daemon.agent().await;
    let info = agent
        .get_run(pb::GetRunRequest {
            run_id: run_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.state, pb::RunState::Finished as i32);
    assert_eq!(info.stop_reason, pb::StopReason::Final as i32);
    assert_eq!(info.final_text, "The notes say alpha and beta.");
    assert_eq!(info.last_seq, run.seen.len() as u64);
    let listed = agent
        .list_runs(pb::ListRunsRequest {
            session_id: started[0].session_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.runs.len(), 1);
    assert_eq!(listed.runs[0].run_id, run_id);
}

#[tokio::test]
async fn two_calls_in_one_step_each_run_and_are_observed() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script = json!({"turns": [
        {"tool_calls": [
            call("read_file", json!({"path": "notes.txt"})),
            call("list_dir", json!({}))
        ]},
        {"final": "done"}
    ]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    let proposed = run.of(|event| match event {
        Event::ToolCallProposed(proposed) => Some(proposed.clone()),
        _ => None,
    });
    assert_eq!(proposed.len(), 2);
    assert_ne!(proposed[0].call_id, proposed[1].call_id);
    let results = observations(&run);
    assert_eq!(results.len(), 2);
    assert!(
        results
            .iter()
            .all(|r| r.status == pb::ToolStatus::Ok as i32)
    );
}

#[tokio::test]
async fn invalid_calls_become_observations_and_the_run_goes_on() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script = json!({"turns": [
        {"tool_calls": [
            call("no_such_tool", json!({})),
            {"name": "read_file", "arguments_raw": "{\"path\": "},
            call("read_file", json!({"path": 42})),
            call("read_file", json!({"pat": "notes.txt"}))
        ]},
        {"final": "I give up politely."}
    ]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::Final as i32,
        "{finished:?}"
    );
    let rejected = run.of(|event| match event {
        Event::ToolCallRejected(rejected) => Some(rejected.reason.clone()),
        _ => None,
    });
    assert_eq!(rejected.len(), 4, "{rejected:?}");
    assert!(
        rejected[0].contains("no tool `no_such_tool`"),
        "{}",
        rejected[0]
    );
    assert!(rejected[1].contains("not valid JSON"), "{}", rejected[1]);
    assert!(rejected[2].contains("/path"), "{}", rejected[2]);
    assert!(rejected[3].contains("pat"), "{}", rejected[3]);
    assert!(observations(&run).is_empty(), "nothing ran");
}

#[tokio::test]
async fn the_same_failing_call_ends_the_run_with_repeated_errors() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let failing = call("exit_code", json!({"code": 2}));
    let script = json!({"turns": [
        {"tool_calls": [failing.clone()]},
        {"tool_calls": [failing.clone()]},
        {"tool_calls": [failing.clone()]},
        {"final": "never reached"}
    ]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    let finished = run.finished().await;
    assert_eq!(
        finished.reason,
        pb::StopReason::RepeatedErrors as i32,
        "{finished:?}"
    );
    assert!(
        finished.detail.contains("exit_code") && finished.detail.contains("3 times"),
        "{}",
        finished.detail
    );
}

#[tokio::test]
async fn max_steps_stops_a_run_that_never_finishes() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let turns: Vec<Value> = (0..10)
        .map(|i| json!({"tool_calls": [call("read_file", json!({"path": "notes.txt", "max_lines": i + 1}))]}))
        .collect();
    let mut start = scripted_run(&workspace, &json!({ "turns": turns }));
    start.budgets = Some(pb::Budgets {
        max_steps: 3,
        ..Default::default()
    });
    let mut run = daemon.start_run(start).await;
    let finished = run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::MaxSteps as i32);
    assert_eq!(finished.steps, 3);
}

#[tokio::test]
async fn budgets_of_tokens_tool_calls_and_wall_time_are_enforced() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let read = |i: u64| json!({"tool_calls": [call("read_file", json!({"path": "notes.txt", "max_lines": i}))]});
    let script = json!({"turns": [read(1), read(2), read(3), read(4), {"final": "done"}]});

    let mut tokens = scripted_run(&workspace, &script);
    tokens.budgets = Some(pb::Budgets {
        max_tokens: 20,
        ..Default::default()
    });
    let finished = daemon.start_run(tokens).await.finished().await;
    assert_eq!(finished.reason, pb::StopReason::BudgetExhausted as i32);
    assert!(finished.detail.starts_with("tokens"), "{}", finished.detail);

    let mut calls = scripted_run(&workspace, &script);
    calls.budgets = Some(pb::Budgets {
        max_tool_calls: 2,
        ..Default::default()
    });
    let finished = daemon.start_run(calls).await.finished().await;
    assert_eq!(finished.reason, pb::StopReason::BudgetExhausted as i32);
    assert!(
        finished.detail.starts_with("tool calls"),
        "{}",
        finished.detail
    );
    assert_eq!(finished.usage.unwrap().tool_calls, 2);

    let mut wall = scripted_run(
        &workspace,
        &json!({"turns": [{"tool_calls": [call("spin", json!({}))]}]}),
    );
    wall.budgets = Some(pb::Budgets {
        max_wall_time_ms: 500,
        ..Default::default()
    });
    let mut run = daemon.start_run(wall).await;
    let finished = run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::BudgetExhausted as i32);
    assert!(
        finished.detail.starts_with("wall time"),
        "{}",
        finished.detail
    );
    // The spinning tool was stopped, not left running.
    let results = observations(&run);
    assert_eq!(results[0].status, pb::ToolStatus::Cancelled as i32);
}

#[tokio::test]
async fn cancelling_stops_a_long_tool_and_ends_the_run() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script =
        json!({"turns": [{"tool_calls": [call("spin", json!({}))]}, {"final": "unreachable"}]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    run.until(|event| matches!(event, Event::ToolStarted(_)).then_some(()))
        .await;
    let run_id = run.run_id().to_owned();
    daemon
        .agent()
        .await
        .cancel_run(pb::CancelRunRequest {
            run_id,
            reason: "changed my mind".into(),
        })
        .await
        .unwrap();
    let finished = run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::Cancelled as i32);
    assert!(
        finished.detail.contains("changed my mind"),
        "{}",
        finished.detail
    );
    assert_eq!(
        observations(&run)[0].status,
        pb::ToolStatus::Cancelled as i32
    );
}

#[tokio::test]
async fn a_cancel_message_on_the_stream_stops_a_model_call() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script = json!({"turns": [{"final": "too late", "delay_ms": 60000}]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    run.until(|event| matches!(event, Event::ContextBuilt(_)).then_some(()))
        .await;
    run.send(pb::run_request::Request::Cancel(pb::CancelRun {
        reason: "stop".into(),
    }));
    let finished = run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::Cancelled as i32);
}

#[tokio::test]
async fn a_model_that_cannot_answer_ends_the_run_with_model_error() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script =
        json!({"turns": [{"tool_calls": [call("read_file", json!({"path": "notes.txt"}))]}]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    let finished = run.finished().await;
    assert_eq!(finished.reason, pb::StopReason::ModelError as i32);
    assert!(
        finished.detail.contains("no turn left"),
        "{}",
        finished.detail
    );
}

#[tokio::test]
async fn bad_start_requests_are_refused_before_anything_runs() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script = json!({"turns": [{"final": "x"}]});
    let mut no_input = scripted_run(&workspace, &script);
    no_input.input = "  ".into();
    let mut unknown_tool = scripted_run(&workspace, &script);
    unknown_tool.tools = vec!["nope".into()];
    let mut bad_model = scripted_run(&workspace, &script);
    bad_model.model = Some(pb::ModelConfig {
        model: "gpt-7".into(),
        ..Default::default()
    });
    let mut outside = scripted_run(&workspace, &script);
    outside.workspace = "/etc".into();
    let mut unknown_session = scripted_run(&workspace, &script);
    unknown_session.session_id = format!("ses_{}", "0".repeat(32));
    for (start, code) in [
        (no_input, tonic::Code::InvalidArgument),
        (unknown_tool, tonic::Code::NotFound),
        (bad_model, tonic::Code::InvalidArgument),
        (outside, tonic::Code::InvalidArgument),
        (unknown_session, tonic::Code::NotFound),
    ] {
        let status = daemon
            .open_run(pb::run_request::Request::Start(start))
            .await
            .err()
            .expect("refused");
        assert_eq!(status.code(), code, "{status:?}");
    }
    let status = daemon
        .open_run(pb::run_request::Request::Input(pb::UserInput {
            text: "hi".into(),
        }))
        .await
        .err()
        .expect("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn the_context_report_says_what_went_to_the_model() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    std::fs::write(workspace.join("big.txt"), "line of text\n".repeat(3000)).unwrap();
    let read = |n: u64| json!({"tool_calls": [call("read_file", json!({"path": "big.txt", "max_lines": 1000 + n}))]});
    let script = json!({"turns": [read(1), read(2), read(3), {"final": "done"}]});
    let mut start = scripted_run(&workspace, &script);
    start.budgets = Some(pb::Budgets {
        context_tokens: 8000,
        ..Default::default()
    });
    let mut run = daemon.start_run(start).await;
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    let reports = run.of(|event| match event {
        Event::ContextBuilt(report) => Some(report.clone()),
        _ => None,
    });
    assert_eq!(reports.len(), 4);
    let last = reports.last().unwrap();
    assert_eq!(last.budget, 8000);
    assert!(last.tokens <= 8000, "{}", last.tokens);
    // The older reads no longer fit: the model compacted them into a summary, which the
    // report lists with the goal, each item with its reason.
    let compacted = run.of(|event| match event {
        Event::ContextCompacted(compacted) => Some(compacted.clone()),
        _ => None,
    });
    assert!(!compacted.is_empty(), "{last:#?}");
    assert!(!compacted[0].fallback, "{compacted:?}");
    assert!(compacted[0].entries >= 2 && compacted[0].tokens_before > 0);
    assert!(
        last.items.iter().any(|item| item.kind == "summary"),
        "{last:#?}"
    );
    assert!(last.items.iter().any(|item| item.kind == "goal"));
    assert!(last.items.iter().all(|item| !item.reason.is_empty()));
    assert_eq!(last.tokenizer, "estimate");
}

#[tokio::test]
async fn user_input_during_a_run_reaches_the_model() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script = json!({"turns": [
        {"tool_calls": [call("read_file", json!({"path": "notes.txt"}))], "delay_ms": 300},
        {"final": "thanks"}
    ]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    run.until(|event| matches!(event, Event::ContextBuilt(_)).then_some(()))
        .await;
    run.send(pb::run_request::Request::Input(pb::UserInput {
        text: "also check the README".into(),
    }));
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    let inputs = run.of(|event| match event {
        Event::UserInput(input) => Some(input.text.clone()),
        _ => None,
    });
    assert_eq!(inputs, ["also check the README"]);
}

#[tokio::test]
async fn input_sent_while_the_model_gives_its_final_answer_is_read_by_another_step() {
    let (daemon, _extra) = daemon().await;
    let workspace = workspace(&daemon);
    let script = json!({"turns": [
        {"final": "first answer", "delay_ms": 500},
        {"final": "second answer"}
    ]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    run.until(|event| matches!(event, Event::ContextBuilt(_)).then_some(()))
        .await;
    run.send(pb::run_request::Request::Input(pb::UserInput {
        text: "one more thing".into(),
    }));
    let finished = run.finished().await;
    assert_eq!(finished.final_text, "second answer", "{finished:?}");
    assert_eq!(finished.steps, 2, "{finished:?}");
    let inputs = run.of(|event| match event {
        Event::UserInput(input) => Some(input.text.clone()),
        _ => None,
    });
    assert_eq!(inputs, ["one more thing"]);
}
