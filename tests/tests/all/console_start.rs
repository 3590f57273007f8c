//! Starting and continuing work from the web console, in a real browser against a real daemon:
//! the New run form (a model from the operator's `[console] models`, answered by a model API
//! on loopback), the runs list's task, model, workspace and outcome columns and its search by
//! task, and a session's page — its runs in order, and a box that continues it, held back
//! while a run of the session waits for approval. What the pages did is checked through the
//! API, not only in the DOM. Both new pages pass axe and fit a phone, light and dark.
//!
//! Each test saves screenshots of the pages it visits (`target/console-screenshots`).

use std::time::{Duration, Instant};

use airlock_daemon::config::{AgentSettings, ConsoleSettings};
use airlock_proto::v1 as pb;
use airlock_tests::browser::{Browser, Viewport};
use airlock_tests::model_api::ModelApi;
use airlock_tests::{DaemonOptions, TestDaemon, repo_root, scripted_run};
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use pb::run_event::Event;
use serde_json::{Value, json};

use crate::agent_approvals::{FIXED, daemon, waiting_write, workspace};
use crate::console_browser::{check_page, console_at};

/// The one model the operator offers in these tests, served by the model API on loopback.
const MODEL: &str = "openai:test-model";

fn css_attr(value: &str) -> String {
    serde_json::to_string(value).unwrap()
}

/// A daemon with the first-party plugins whose OpenAI provider is the model API at `api`
/// (whole answers, not streamed), offering [`MODEL`] in the console's New run form.
async fn model_daemon(api: &str) -> TestDaemon {
    let mut agent = AgentSettings::default();
    agent.providers.openai_base_url = format!("{api}/v1");
    agent.providers.stream = false;
    agent.providers.retry.initial_backoff = Duration::from_millis(10);
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        agent,
        console: ConsoleSettings {
            models: vec![MODEL.into()],
            ..ConsoleSettings::default()
        },
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:?}", daemon.refused());
    daemon
}

/// An OpenAI Chat Completions answer: the final text.
fn openai_final(text: &str) -> String {
    json!({"id": "chatcmpl-console", "object": "chat.completion", "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 60, "completion_tokens": 5, "total_tokens": 65}})
    .to_string()
}

/// An OpenAI Chat Completions answer: one call of `name`.
fn openai_call(name: &str, arguments: Value) -> String {
    json!({"id": "chatcmpl-console", "object": "chat.completion", "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_console_1", "type": "function",
             "function": {"name": name, "arguments": arguments.to_string()}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}})
    .to_string()
}

async fn text_of(browser: &Browser, css: &str) -> String {
    browser.wait_for(css).await.text().await.unwrap()
}

/// Ctrl+Enter on whatever has the focus, as a keyboard does.
async fn press_ctrl_enter(browser: &Browser) {
    let ctrl: char = Key::Control.into();
    let enter: char = Key::Enter.into();
    let actions = KeyActions::new("keyboard".into())
        .then(KeyAction::Down { value: ctrl })
        .then(KeyAction::Down { value: enter })
        .then(KeyAction::Up { value: enter })
        .then(KeyAction::Up { value: ctrl });
    browser
        .perform_actions(actions)
        .await
        .expect("Ctrl+Enter is pressed");
}

/// Waits until the page is some run's page; returns the run's id.
async fn landed_on_a_run(browser: &Browser) -> String {
    browser
        .wait_until(
            "a run's page",
            "return /^#\\/runs\\/run_[0-9a-f]+$/.test(location.hash);",
        )
        .await;
    let hash = browser.eval("return location.hash;").await;
    hash.as_str()
        .unwrap()
        .trim_start_matches("#/runs/")
        .to_owned()
}

/// The run as GetRun answers it once it has finished (within a minute).
async fn finished_info(daemon: &TestDaemon, run_id: &str) -> pb::RunInfo {
    let started = Instant::now();
    loop {
        let info = daemon.run_info(run_id).await;
        if info.state == pb::RunState::Finished as i32 {
            return info;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "run {run_id} did not finish: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn runs_of(daemon: &TestDaemon, request: pb::ListRunsRequest) -> Vec<pb::RunInfo> {
    daemon
        .agent()
        .await
        .list_runs(request)
        .await
        .unwrap()
        .into_inner()
        .runs
}

fn session_of(run: &airlock_tests::RunStream) -> String {
    run.of(|event| match event {
        Event::RunStarted(started) => Some(started.session_id.clone()),
        _ => None,
    })
    .remove(0)
}

/// Sets a select to `value` as choosing an option does (a `change` event).
async fn choose(browser: &Browser, css: &str, value: &str) {
    browser.wait_for(css).await;
    browser
        .eval(&format!(
            "const s = document.querySelector({}); s.value = {};
             s.dispatchEvent(new Event('change', {{bubbles: true}})); return true;",
            css_attr(css),
            css_attr(value)
        ))
        .await;
}

#[tokio::test]
async fn a_run_is_started_from_the_new_run_form_with_the_keyboard() {
    const TASK: &str = "Fix the mean in calc.py";
    const ANSWER: &str = "The mean now divides by len(v).";
    let api = ModelApi::default().reply(200, &[], openai_final(ANSWER));
    let daemon = model_daemon(&api.serve().await).await;
    let project = workspace(&daemon, "proj");
    let browser = console_at(&daemon, "#/new").await;

    // The operator's model is offered, and is the default.
    browser.wait_for("[data-testid=new-run] #nr-model").await;
    assert_eq!(
        browser
            .eval("return [...document.querySelectorAll('#nr-model option')].map(o => o.value);")
            .await,
        json!([MODEL, "[other]"])
    );
    assert_eq!(
        browser
            .eval("return document.querySelector('#nr-model').value;")
            .await,
        json!(MODEL)
    );

    // A path that climbs out of the root is refused before anything is sent.
    browser
        .wait_for("#nr-dir")
        .await
        .send_keys("../proj")
        .await
        .unwrap();
    let task = browser.wait_for("#nr-task").await;
    task.send_keys(TASK).await.unwrap();
    press_ctrl_enter(&browser).await;
    let error = browser
        .wait_for("[data-testid=error-workspace]")
        .await
        .text()
        .await
        .unwrap();
    assert!(error.contains(".."), "{error}");
    assert_eq!(
        browser.focused().await,
        "workspace-dir",
        "the focus is on the field to fix"
    );

    // The path fixed with the keyboard: select all, delete, type the right one.
    let ctrl: char = Key::Control.into();
    browser
        .perform_actions(
            KeyActions::new("keyboard".into())
                .then(KeyAction::Down { value: ctrl })
                .then(KeyAction::Down { value: 'a' })
                .then(KeyAction::Up { value: 'a' })
                .then(KeyAction::Up { value: ctrl }),
        )
        .await
        .unwrap();
    browser.press(Key::Backspace).await;
    assert_eq!(
        browser
            .eval("return document.querySelector('#nr-dir').value;")
            .await,
        json!("")
    );
    browser
        .wait_for("#nr-dir")
        .await
        .send_keys("proj")
        .await
        .unwrap();
    let shown = browser
        .wait_for("[data-testid=workspace-path]")
        .await
        .text()
        .await
        .unwrap();
    assert!(shown.ends_with("/proj"), "{shown}");

    // A model no provider serves: the daemon's refusal is shown, and nothing typed is lost.
    choose(&browser, "#nr-model", "[other]").await;
    browser
        .wait_for("#nr-model-other")
        .await
        .send_keys("nosuch:model")
        .await
        .unwrap();
    browser.wait_for("#nr-task").await.click().await.unwrap();
    press_ctrl_enter(&browser).await;
    let refusal = browser
        .wait_for("[data-testid=start-error]")
        .await
        .text()
        .await
        .unwrap();
    assert!(refusal.contains("model"), "{refusal}");
    assert_eq!(
        browser
            .eval(
                "return [document.querySelector('#nr-task').value,
                         document.querySelector('#nr-dir').value,
                         document.querySelector('[data-testid=start-run]').disabled,
                         document.querySelector('[data-testid=start-run]').textContent.trim()];"
            )
            .await,
        json!([TASK, "proj", false, "Start run"])
    );
    assert!(
        runs_of(&daemon, pb::ListRunsRequest::default())
            .await
            .is_empty(),
        "nothing was started"
    );
    browser.save_screenshot("new-run-refused").await;

    // Back to the offered model, and Ctrl+Enter in the task starts the run.
    choose(&browser, "#nr-model", MODEL).await;
    browser.wait_for("#nr-task").await.click().await.unwrap();
    press_ctrl_enter(&browser).await;
    let run_id = landed_on_a_run(&browser).await;
    browser
        .wait_for("[data-testid=run-state][data-state=FINISHED]")
        .await;
    let final_text = browser
        .wait_for("[data-testid=final-text]")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(final_text, ANSWER);
    browser.save_screenshot("new-run-done").await;

    // What the daemon ran: the task, the model, the workspace, as the form said.
    let info = finished_info(&daemon, &run_id).await;
    assert_eq!(info.input, TASK);
    assert_eq!(info.model, MODEL);
    assert_eq!(info.final_text, ANSWER);
    assert!(
        info.workspace.ends_with("/proj")
            && std::path::Path::new(&info.workspace)
                .canonicalize()
                .unwrap()
                == project.canonicalize().unwrap(),
        "{} is not {}",
        info.workspace,
        project.display()
    );
    assert_eq!(info.stop_reason, pb::StopReason::Final as i32);
    let received = api.received();
    assert_eq!(received.len(), 1, "one model call");
    assert_eq!(received[0].body["model"], json!("test-model"));
    assert!(received[0].body.to_string().contains(TASK));
    browser.close().await;
}

#[tokio::test]
async fn the_runs_list_shows_each_runs_task_and_searches_by_it() {
    let daemon = daemon().await;
    let start = |name: &str, input: &str| {
        let mut start = scripted_run(
            &daemon.workspace(name),
            &json!({"turns": [{"final": "done"}]}),
        );
        start.input = input.into();
        start
    };
    let mut parser = daemon
        .start_run(start("alpha", "Refactor the PARSER module"))
        .await;
    parser.finished().await;
    let mut notes = daemon
        .start_run(start("beta", "Write the release notes"))
        .await;
    notes.finished().await;
    let parser_id = parser.run_id().to_owned();
    let parser_session = session_of(&parser);

    let browser = console_at(&daemon, "#/runs").await;
    browser.wait_for_count("[data-testid=run-row]", 2).await;
    let row = format!(
        "[data-testid=run-row][data-run-id={}]",
        css_attr(&parser_id)
    );
    let cell = |testid: &str| format!("{row} [data-testid={testid}]");
    assert_eq!(
        text_of(&browser, &cell("run-task")).await,
        "Refactor the PARSER module"
    );
    assert_eq!(text_of(&browser, &cell("run-model")).await, "scripted");
    assert_eq!(text_of(&browser, &cell("run-workspace")).await, "alpha");
    assert_eq!(text_of(&browser, &cell("run-outcome")).await, "Answered");
    let workspace_title = browser
        .wait_for(&cell("run-workspace"))
        .await
        .attr("title")
        .await
        .unwrap()
        .unwrap();
    assert!(workspace_title.ends_with("/alpha"), "{workspace_title}");
    // The session is a link to its page.
    assert_eq!(
        browser
            .wait_for(&format!("{row} .c-session a"))
            .await
            .attr("href")
            .await
            .unwrap()
            .unwrap(),
        format!("#/sessions/{parser_session}")
    );

    // "Task contains": typed, applied after a pause, kept in the address.
    browser
        .wait_for("#filter-q")
        .await
        .send_keys("parser")
        .await
        .unwrap();
    browser
        .wait_until(
            "only the parser run",
            &format!(
                "const rows = [...document.querySelectorAll('[data-testid=run-row]')];
                 return rows.length === 1 && rows[0].dataset.runId === {}
                   && !!document.querySelector('[data-testid=runs-end]');",
                css_attr(&parser_id)
            ),
        )
        .await;
    let hash = browser.eval("return location.hash;").await;
    assert!(hash.as_str().unwrap().contains("q=parser"), "{hash}");
    // The daemon answers the same search the same way.
    let found = runs_of(
        &daemon,
        pb::ListRunsRequest {
            query: "parser".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        found.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        [parser_id.as_str()]
    );

    // Runs started later join the searched list only when their task matches.
    let mut unrelated = daemon.start_run(start("gamma", "Tidy the README")).await;
    unrelated.finished().await;
    let mut more = daemon
        .start_run(start("delta", "Speed up the Parser's lexer"))
        .await;
    more.finished().await;
    browser
        .wait_for(&format!(
            "[data-testid=run-row][data-run-id={}][data-state=FINISHED]",
            css_attr(more.run_id())
        ))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shown: Vec<String> = serde_json::from_value(
        browser
            .eval("return [...document.querySelectorAll('[data-testid=run-row]')].map(r => r.dataset.runId);")
            .await,
    )
    .unwrap();
    assert_eq!(
        shown,
        [more.run_id(), parser_id.as_str()],
        "newest first, matching only"
    );
    browser.save_screenshot("runs-search").await;

    // The page head's "New run" opens the form.
    browser
        .wait_for("[data-testid=new-run-link]")
        .await
        .click()
        .await
        .unwrap();
    browser.wait_for("[data-testid=new-run]").await;
    browser.close().await;
}

#[tokio::test]
async fn a_session_is_continued_from_its_page_once_its_run_is_answered() {
    const FIRST: &str = "fix the mean";
    const NEXT: &str = "now add a test for it";
    let api = ModelApi::default()
        .reply(
            200,
            &[],
            openai_call("write_file", json!({"path": "calc.py", "content": FIXED})),
        )
        .reply(200, &[], openai_final("first done"))
        .reply(200, &[], openai_final("second done"));
    let daemon = model_daemon(&api.serve().await).await;
    let workspace = workspace(&daemon, "w");
    let session = daemon
        .agent()
        .await
        .create_session(pb::CreateSessionRequest {
            workspace: workspace.to_str().unwrap().into(),
            labels: [("team".to_owned(), "web".to_owned())].into(),
            settings: Some(pb::SessionSettings {
                model: Some(pb::ModelConfig {
                    model: MODEL.into(),
                    ..Default::default()
                }),
                approval_policy: pb::ApprovalPolicy::Risky as i32,
                instructions: "Keep <b>answers</b> short.".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let session_id = session.session_id.clone();
    let mut first = daemon
        .start_run(pb::StartRun {
            session_id: session_id.clone(),
            input: FIRST.into(),
            ..Default::default()
        })
        .await;
    let request = first.approval_requested().await;

    let browser = console_at(&daemon, &format!("#/sessions/{session_id}")).await;
    browser
        .wait_for(&format!(
            "[data-testid=session-run][data-run-id={}][data-state=WAITING_FOR_APPROVAL]",
            css_attr(first.run_id())
        ))
        .await;
    // Its settings, as text (the instructions' markup too).
    let model = browser
        .wait_for("[data-testid=session-model]")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(model, MODEL);
    let instructions = browser
        .wait_for("[data-testid=session-instructions]")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(instructions, "Keep <b>answers</b> short.");
    assert_eq!(
        browser
            .wait_for("[data-testid=session-policy]")
            .await
            .attr("href")
            .await
            .unwrap()
            .unwrap(),
        format!("#/policy?session={session_id}")
    );

    // While the run waits, the box says why it cannot continue, and sends nothing.
    let busy = browser
        .wait_for("[data-testid=continue-busy]")
        .await
        .text()
        .await
        .unwrap();
    assert!(busy.contains("A run of this session is going on"), "{busy}");
    assert_eq!(
        browser
            .eval("return document.querySelector('[data-testid=continue]').disabled;")
            .await,
        Value::Bool(true)
    );
    browser
        .wait_for("#continue-input")
        .await
        .send_keys(NEXT)
        .await
        .unwrap();
    press_ctrl_enter(&browser).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let session_runs = || pb::ListRunsRequest {
        session_id: session_id.clone(),
        ..Default::default()
    };
    assert_eq!(runs_of(&daemon, session_runs()).await.len(), 1);
    browser.save_screenshot("session-busy").await;

    // Answered elsewhere: the run ends, the page sees it, the box opens.
    first.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    assert_eq!(first.finished().await.final_text, "first done");
    browser
        .wait_until(
            "the box open again",
            "const b = document.querySelector('[data-testid=continue]');
             return !!b && !b.disabled && !document.querySelector('[data-testid=continue-busy]');",
        )
        .await;
    assert_eq!(
        browser
            .eval("return document.querySelector('#continue-input').value;")
            .await,
        json!(NEXT),
        "what was typed is still there"
    );
    browser
        .wait_for("#continue-input")
        .await
        .click()
        .await
        .unwrap();
    press_ctrl_enter(&browser).await;
    let second_id = landed_on_a_run(&browser).await;

    // The next run of the same session, with the session's model, from its conversation.
    let second = finished_info(&daemon, &second_id).await;
    assert_eq!(second.session_id, session_id);
    assert_eq!(second.input, NEXT);
    assert_eq!(second.model, MODEL);
    assert_eq!(second.final_text, "second done");
    let listed = runs_of(&daemon, session_runs()).await;
    assert_eq!(
        listed.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        [second_id.as_str(), first.run_id()],
        "two runs in the session, newest first"
    );
    let received = api.received();
    assert_eq!(received.len(), 3);
    let asked = received[2].body.to_string();
    assert!(asked.contains(FIRST) && asked.contains(NEXT), "{asked}");

    // The session's page lists both, oldest first.
    browser
        .goto(&format!("{}/#/sessions/{session_id}", daemon.endpoint))
        .await
        .unwrap();
    browser
        .wait_for_count("[data-testid=session-run][data-state=FINISHED]", 2)
        .await;
    assert_eq!(
        browser
            .eval("return [...document.querySelectorAll('[data-testid=session-run]')].map(r => r.dataset.runId);")
            .await,
        json!([first.run_id(), second_id])
    );
    browser.save_screenshot("session").await;
    browser.close().await;
}

/// The New run form (with no model list: a model typed) and a session's page (its run
/// waiting for approval) at a desktop's and a phone's width, light and dark.
#[tokio::test]
async fn the_new_run_form_and_the_session_page_are_accessible_and_fit_a_phone() {
    let daemon = daemon().await;
    let (mut run, request) = waiting_write(&daemon, &workspace(&daemon, "w")).await;
    let session_id = session_of(&run);
    for (viewport, suffix) in [(Viewport::DESKTOP, ""), (Viewport::PHONE, "-phone")] {
        let browser = Browser::open(viewport).await;
        browser.sign_in(&daemon.endpoint, &daemon.token).await;
        browser.wait_for("[data-testid=approvals-count]").await;

        browser
            .goto(&format!("{}/#/new", daemon.endpoint))
            .await
            .unwrap();
        browser.wait_for("[data-testid=tool-choice]").await;
        // No `[console] models`: the model is typed.
        assert_eq!(
            browser
                .eval("return document.querySelector('#nr-model').tagName;")
                .await,
            json!("INPUT")
        );
        check_page(&browser, &format!("new-run{suffix}")).await;
        // The tools' section open, with its checkboxes.
        browser
            .wait_for("[data-testid=tools-summary]")
            .await
            .click()
            .await
            .unwrap();
        check_page(&browser, &format!("new-run-tools{suffix}")).await;

        browser
            .goto(&format!("{}/#/sessions/{session_id}", daemon.endpoint))
            .await
            .unwrap();
        browser
            .wait_for("[data-testid=session-run][data-state=WAITING_FOR_APPROVAL]")
            .await;
        browser.wait_for("[data-testid=continue-busy]").await;
        check_page(&browser, &format!("session{suffix}")).await;
        browser.close().await;
    }
    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    run.finished().await;
}
