//! A hosted server's question reaches the MCP client whose call raised it: a server run over
//! stdio (the hostile test server, 2025-11-25, asking with a request of its own in the
//! middle of the call) asked through airlock's endpoint by the official Python SDK's client
//! on each revision — on the call's stream for 2025-11-25, as an input-required result over
//! a parked call for 2026-07-28 — and the server gets that client's answer, attributed to the
//! server that asked. A parked call's request state opens for that very call's retry only,
//! once. (The conformance suite drives the same paths against a 2026-07-28 server's
//! input-required rounds, tests/tests/all/mcp_conformance.rs.)

use std::path::PathBuf;

use airlock_tests::{DaemonOptions, TestDaemon, mcp};
use serde_json::{Value, json};

use crate::mcp_host::{Fixture, fixture};
use crate::mcp_mrtr::{Modern, endpoint};

/// A daemon hosting the hostile server, with its MCP endpoint.
struct Asking {
    daemon: TestDaemon,
    url: String,
    _fixture: Fixture,
}

async fn asking() -> Asking {
    let fixture = fixture("questions", "");
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![fixture.tools.path().to_owned()],
        profiles_dir: fixture.profiles.path().to_owned(),
        mcp_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..DaemonOptions::default()
    })
    .await;
    assert!(daemon.refused().is_empty(), "{:#?}", daemon.refused());
    let workspace: PathBuf = daemon.workspace("default");
    let url = endpoint(daemon.mcp_addr.unwrap(), &workspace);
    Asking {
        daemon,
        url,
        _fixture: fixture,
    }
}

/// What the Python SDK's client on `mode` was asked, and the call's result.
async fn ask_with_sdk(asking: &Asking, mode: &str, question: &str) -> Value {
    let output = tokio::process::Command::new(mcp::python())
        .arg(mcp::dir().join("questions_client.py"))
        .args([&asking.url, mode, "hostile__ask"])
        .arg(json!({"question": question}).to_string())
        .env("AIRLOCK_TOKEN", &asking.daemon.token)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_servers_question_reaches_the_calling_client_on_either_revision() {
    let asking = asking().await;
    for mode in ["legacy", "2026-07-28"] {
        let question = format!("Keep the report ({mode})?");
        let seen = ask_with_sdk(&asking, mode, &question).await;
        assert_eq!(seen["error"], false, "{mode}: {seen}");
        // `proceed` false is the client's answer: the tenant's approvers would have given
        // the form's default, true.
        assert!(
            seen["text"]
                .as_str()
                .unwrap()
                .contains("accepted: proceed=False"),
            "{mode}: {seen}"
        );
        assert_eq!(
            seen["asked"],
            json!([format!("MCP server `hostile` asks: {question}")]),
            "{mode}: asked once, saying which server asks"
        );
    }
}

/// The JSON-RPC answer to a 2026-07-28 `tools/call` of `hostile__ask`.
async fn call(
    client: &Modern,
    question: &str,
    state: Option<&str>,
    answer: Option<Value>,
) -> Value {
    let mut params = json!({"name": "hostile__ask", "arguments": {"question": question}});
    if let Some(state) = state {
        params["requestState"] = json!(state);
    }
    if let Some(answer) = answer {
        params["inputResponses"] = json!({"question": answer});
    }
    client.request("tools/call", params).await
}

fn refused(answer: &Value, what: &str) {
    let error = answer
        .get("error")
        .unwrap_or_else(|| panic!("{what}: a JSON-RPC error, got {answer}"));
    assert_eq!(error["code"], -32602, "{what}: {answer}");
    assert!(
        error["message"].as_str().unwrap().contains("request state"),
        "{what}: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_calls_state_opens_for_its_own_retry_only_and_once() {
    let asking = asking().await;
    let token: &'static str = Box::leak(asking.daemon.token.clone().into_boxed_str());
    let client = Modern::new(asking.url.clone(), token);
    let first = call(&client, "Keep it?", None, None).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let question = &result["inputRequests"]["question"];
    assert_eq!(question["method"], "elicitation/create", "{first}");
    assert_eq!(
        question["params"]["message"],
        "MCP server `hostile` asks: Keep it?"
    );
    let state = result["requestState"].as_str().expect("a state").to_owned();
    let answer = json!({"action": "accept", "content": {"proceed": false}});

    // Another call's retry (other arguments), a changed state, and a state with no answer
    // to the question it parks.
    refused(
        &call(
            &client,
            "Keep the rest?",
            Some(&state),
            Some(answer.clone()),
        )
        .await,
        "other arguments",
    );
    let mut changed = state.clone().into_bytes();
    let middle = changed.len() / 2;
    changed[middle] = if changed[middle] == b'A' { b'B' } else { b'A' };
    refused(
        &call(
            &client,
            "Keep it?",
            Some(&String::from_utf8(changed).unwrap()),
            Some(answer.clone()),
        )
        .await,
        "a changed state",
    );
    let unanswered = call(&client, "Keep it?", Some(&state), None).await;
    assert_eq!(
        unanswered["result"]["resultType"], "input_required",
        "asked again: {unanswered}"
    );
    let state = unanswered["result"]["requestState"]
        .as_str()
        .expect("a new state")
        .to_owned();

    // Its own retry resumes the call with the client's answer; the state is spent.
    let done = call(&client, "Keep it?", Some(&state), Some(answer.clone())).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("accepted: proceed=False"),
        "{done}"
    );
    refused(
        &call(&client, "Keep it?", Some(&state), Some(answer)).await,
        "a replayed state",
    );
}

/// `names = "bare"` serves a hosted server's tools under their own names, and never one
/// that airlock serves from a manifest of its own: the hosted tool with that name is
/// refused, whichever folder is read first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_named_server_never_takes_the_name_of_airlocks_own_tool() {
    let fixture = fixture("bare", "names = \"bare\"");
    let own = airlock_tests::ToolsDir::new();
    own.write_manifest(
        "whoami",
        "name = \"whoami\"\nversion = \"1\"\ndescription = \"airlock's own\"\nrisk = \"read_only\"\nengine = \"process\"\ncommand = [\"/usr/bin/printf\", \"%s\", \"airlock's own whoami\"]\nabi = \"argv\"\nprofile = \"mcp-node\"\ninput_schema = { type = \"object\" }\n",
    );
    let daemon = TestDaemon::start(DaemonOptions {
        // The hosted server's folder first.
        tools_dirs: vec![fixture.tools.path().to_owned(), own.path().to_owned()],
        profiles_dir: fixture.profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    let refused = daemon.refused().join("\n");
    assert!(
        refused.contains("a tool named `whoami` is already served"),
        "{refused}"
    );
    let ws = daemon.workspace("default");
    let whoami = daemon.exec("whoami", json!({}), Some(&ws)).await;
    whoami.assert_status(airlock_proto::v1::ToolStatus::Ok);
    assert_eq!(whoami.result().content, "airlock's own whoami");
    let tools = daemon
        .tools()
        .await
        .list_tools(airlock_proto::v1::ListToolsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .tools;
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert!(names.contains(&"ask"), "served bare: {names:?}");
    assert!(
        !names.iter().any(|name| name.starts_with("hostile__")),
        "{names:?}"
    );
}
