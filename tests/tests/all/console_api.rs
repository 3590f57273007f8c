//! What a browser needs of the API to start and find work, over gRPC-Web as the console
//! calls it: a run started on a server stream that outlives it, a session continued without
//! naming its model again, runs searched by their task, and the models the operator offers.

use airlock_daemon::config::ConsoleSettings;
use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, TestDaemon, scripted_run};
use serde_json::json;
use tokio_stream::StreamExt as _;

use crate::console_serving::web_agent;

#[tokio::test]
async fn a_browser_starts_a_run_on_a_server_stream_that_the_run_outlives() {
    let daemon = TestDaemon::start(DaemonOptions::default()).await;
    let workspace = daemon.workspace("w");
    let script = json!({"turns": [{"final": "first answer"}]});
    let mut web = web_agent(&daemon.endpoint, &daemon.token);
    let mut start = scripted_run(&workspace, &script);
    start.input = "the first task".into();
    let mut events = web.start_run(start).await.unwrap().into_inner();
    let first = events.next().await.expect("an event").unwrap();
    let Some(pb::run_event::Event::RunStarted(started)) = first.event else {
        panic!("the first event is not RunStarted: {first:?}");
    };
    assert_eq!(started.input, "the first task");
    // The browser leaves; the run is the daemon's and finishes all the same.
    drop(events);
    let mut followed = daemon.attach_run(&first.run_id, 0).await;
    assert_eq!(followed.finished().await.final_text, "first answer");

    // The next run of its session, as the session page's box starts it: no model named, so
    // the session's latest run's is used, with its conversation.
    let mut events = web
        .start_run(pb::StartRun {
            session_id: started.session_id.clone(),
            input: "and then?".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        seen.extend(event.unwrap().event);
    }
    let Some(pb::run_event::Event::RunStarted(next)) = seen.first() else {
        panic!("the stream did not start with the run: {seen:?}");
    };
    assert_eq!(next.model, "scripted", "the latest run's model");
    assert_eq!(next.continues_run_id, first.run_id);
    assert_eq!(next.history_messages, 2, "the first task and its answer");
    let Some(pb::run_event::Event::RunFinished(finished)) = seen.last() else {
        panic!("the stream did not end with the run: {seen:?}");
    };
    // The scripted model counts only this run's answers: turn 0 again.
    assert_eq!(finished.final_text, "first answer");

    // A refusal comes as the stream's status, naming the field.
    let refused = web
        .start_run(pb::StartRun {
            workspace: "/nowhere/at/all".into(),
            input: "x".into(),
            ..scripted_run(&workspace, &script)
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused.message().starts_with("workspace"),
        "{}",
        refused.message()
    );
}

#[tokio::test]
async fn a_session_without_a_model_of_its_own_or_any_run_says_to_name_one() {
    let daemon = TestDaemon::start(DaemonOptions::default()).await;
    let mut agent = daemon.agent().await;
    let session = agent
        .create_session(pb::CreateSessionRequest {
            workspace: daemon.workspace("w").to_str().unwrap().to_owned(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let refused = web_agent(&daemon.endpoint, &daemon.token)
        .start_run(pb::StartRun {
            session_id: session.session_id.clone(),
            input: "go".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let message = refused.message();
    assert!(
        message.starts_with("model: ")
            && message.contains(&session.session_id)
            && message.contains("--model"),
        "{message}"
    );
}

#[tokio::test]
async fn runs_are_searched_by_their_task_live_and_listed() {
    let daemon = TestDaemon::start(DaemonOptions::default()).await;
    let workspace = daemon.workspace("w");
    let script = json!({"turns": [{"final": "done"}]});
    for input in [
        "Fix the PARSER",
        "parser tests: 100% of them",
        "write the docs",
    ] {
        let mut start = scripted_run(&workspace, &script);
        start.input = input.into();
        daemon.start_run(start).await.finished().await;
    }
    let mut web = web_agent(&daemon.endpoint, &daemon.token);
    let search = |query: &str| pb::ListRunsRequest {
        query: query.into(),
        ..Default::default()
    };
    let inputs = |runs: &[pb::RunInfo]| -> Vec<String> {
        runs.iter().map(|run| run.input.clone()).collect()
    };
    let found = web.list_runs(search("parser")).await.unwrap().into_inner();
    assert_eq!(
        inputs(&found.runs),
        ["parser tests: 100% of them", "Fix the PARSER"]
    );
    // `%` and `_` are text, not patterns.
    let found = web.list_runs(search("100%")).await.unwrap().into_inner();
    assert_eq!(inputs(&found.runs), ["parser tests: 100% of them"]);
    let found = web
        .list_runs(search("write_the"))
        .await
        .unwrap()
        .into_inner();
    assert!(found.runs.is_empty(), "{:?}", found.runs);
    let refused = web.list_runs(search(&"x".repeat(201))).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused.message().starts_with("query: "),
        "{}",
        refused.message()
    );

    // A live list with a search: the page, then only new runs that match.
    let mut watched = web.watch_runs(search("parser")).await.unwrap().into_inner();
    for _ in 0..2 {
        watched.next().await.expect("the page").unwrap();
    }
    for input in ["unrelated work", "one more parser fix"] {
        let mut start = scripted_run(&workspace, &script);
        start.input = input.into();
        daemon.start_run(start).await.finished().await;
    }
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), watched.next())
        .await
        .expect("a change in time")
        .expect("open")
        .unwrap();
    assert_eq!(next.input, "one more parser fix");
}

#[tokio::test]
async fn the_daemon_offers_the_models_its_operator_configured() {
    let models = vec![
        "openai:gpt-4.1".to_owned(),
        "anthropic:claude-sonnet-4".to_owned(),
    ];
    let daemon = TestDaemon::start(DaemonOptions {
        console: ConsoleSettings {
            models: models.clone(),
            ..ConsoleSettings::default()
        },
        ..DaemonOptions::default()
    })
    .await;
    let info = pb::daemon_client::DaemonClient::new(daemon.authed_channel().await)
        .get_info(pb::GetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.models, models);
}
