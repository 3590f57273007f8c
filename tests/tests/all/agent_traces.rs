//! Traces and full outputs: a run's spans form a tree with timings, tokens, argument
//! digests and resource use; a call's full output can be paged after the model saw a cut.

use std::collections::HashMap;

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, TestDaemon, ToolsDir, repo_root, scripted_run, test_module};
use pb::run_event::Event;
use serde_json::json;

fn attribute<'a>(span: &'a pb::Span, key: &str) -> Option<&'a str> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .map(|a| a.value.as_str())
}

#[tokio::test]
async fn a_run_is_traced_as_a_tree_of_spans() {
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        ..DaemonOptions::default()
    })
    .await;
    let workspace = daemon.workspace("w");
    std::fs::write(workspace.join("notes.txt"), "alpha\n").unwrap();
    let script = json!({"turns": [
        {"tool_calls": [
            {"name": "read_file", "arguments": {"path": "notes.txt"}},
            {"name": "write_file", "arguments": {"path": "out.txt", "content": "x"}}
        ]},
        {"final": "done"}
    ]});
    let mut start = scripted_run(&workspace, &script);
    start.approval_policy = pb::ApprovalPolicy::Risky as i32;
    let mut run = daemon.start_run(start).await;
    let request = run.approval_requested().await;
    run.decide(&request.approval_id, pb::Decision::ApproveOnce, "");
    assert_eq!(run.finished().await.reason, pb::StopReason::Final as i32);
    let run_id = run.run_id().to_owned();

    let trace = daemon
        .agent()
        .await
        .get_trace(pb::GetTraceRequest {
            run_id: run_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(trace.run_id, run_id);
    assert_eq!(trace.trace_id.len(), 32);
    let by_id: HashMap<&str, &pb::Span> = trace
        .spans
        .iter()
        .map(|s| (s.span_id.as_str(), s))
        .collect();
    let named = |name: &str| {
        trace
            .spans
            .iter()
            .filter(|s| s.name == name)
            .collect::<Vec<_>>()
    };
    let root = named("run");
    assert_eq!(root.len(), 1);
    let root = root[0];
    assert!(root.parent_span_id.is_empty());
    assert_eq!(attribute(root, "stop_reason"), Some("FINAL"));
    assert_eq!(attribute(root, "tool_calls"), Some("2"));
    let steps = named("step");
    assert_eq!(steps.len(), 2);
    for step in &steps {
        assert_eq!(step.parent_span_id, root.span_id);
    }
    for (name, count) in [
        ("context", 2),
        ("model", 2),
        ("validate", 2),
        ("permission", 2),
        ("tool", 2),
    ] {
        let spans = named(name);
        assert_eq!(spans.len(), count, "{name}: {spans:#?}");
        for span in spans {
            let parent = by_id[span.parent_span_id.as_str()];
            assert_eq!(parent.name, "step", "{name} hangs from a step");
            assert!(
                span.start_unix_nano >= parent.start_unix_nano
                    && span.end_unix_nano <= parent.end_unix_nano
            );
            assert_eq!(span.trace_id, trace.trace_id);
        }
    }
    let model = named("model")[0];
    assert!(attribute(model, "input_tokens").is_some_and(|t| t.parse::<u64>().unwrap() > 0));
    assert_eq!(attribute(model, "model"), Some("scripted"));
    let validate = named("validate")[0];
    assert_eq!(
        attribute(validate, "arguments_sha256").map(str::len),
        Some(64)
    );
    let permission = named("permission");
    let write_permission = permission
        .iter()
        .find(|s| attribute(s, "tool") == Some("write_file"))
        .unwrap();
    assert_eq!(attribute(write_permission, "decision"), Some("ask"));
    assert_eq!(attribute(write_permission, "approved"), Some("true"));
    let tool = named("tool")[0];
    assert_eq!(attribute(tool, "status"), Some("OK"));
    assert!(attribute(tool, "execution_id").is_some_and(|id| id.starts_with("exe_")));
    assert!(attribute(tool, "peak_memory_bytes").is_some_and(|b| b.parse::<u64>().unwrap() > 0));
    assert!(attribute(tool, "cpu_time_us").is_some());
    assert!(
        trace
            .spans
            .iter()
            .all(|s| s.status == pb::SpanStatus::Ok as i32)
    );
}

#[tokio::test]
async fn a_cut_output_is_kept_whole_and_can_be_paged() {
    let tools = ToolsDir::new();
    tools.add_file(
        "big",
        &test_module("big_result"),
        "[output]\nmax_bytes = 1000\ntruncate = \"head\"",
    );
    tools.add_file("echo", &test_module("echo"), "");
    let daemon = TestDaemon::with_tools(&tools).await;
    let execution = daemon.exec("big", json!({"bytes": 300_000}), None).await;
    let result = execution.result();
    assert!(result.truncated);
    let execution_id = result.execution_id.clone();
    let mut tools_client = daemon.tools().await;
    let mut whole = Vec::new();
    let mut offset = 0;
    loop {
        let page = tools_client
            .read_output(pb::ReadOutputRequest {
                execution_id: execution_id.clone(),
                offset,
                length: 100_000,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.offset, offset);
        offset += page.data.len() as u64;
        whole.extend_from_slice(&page.data);
        if page.eof {
            assert_eq!(page.total_bytes, whole.len() as u64);
            break;
        }
    }
    // The kept output is the whole result (the `ok` value as the tool wrote it), and what
    // the caller saw is its first bytes.
    let document: serde_json::Value = serde_json::from_slice(&whole).unwrap();
    assert_eq!(document.as_str().unwrap().len(), 300_000);
    assert_eq!(result.original_bytes, whole.len() as u64);
    assert_eq!(result.head_bytes, result.content.len() as u64);
    assert_eq!(result.content.as_bytes(), &whole[..result.content.len()]);

    // Past the end, an unknown id, and a call that was not cut.
    let past = tools_client
        .read_output(pb::ReadOutputRequest {
            execution_id: execution_id.clone(),
            offset: offset + 1,
            length: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(past.code(), tonic::Code::OutOfRange);
    let unknown = tools_client
        .read_output(pb::ReadOutputRequest {
            execution_id: format!("exe_{}", "0".repeat(32)),
            offset: 0,
            length: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    let small = daemon.exec("echo", json!({}), None).await;
    let not_cut = tools_client
        .read_output(pb::ReadOutputRequest {
            execution_id: small.result().execution_id.clone(),
            offset: 0,
            length: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(not_cut.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn an_agent_run_keeps_the_full_output_of_a_cut_observation() {
    let tools = ToolsDir::new();
    tools.add_file(
        "big",
        &test_module("big_result"),
        "[output]\nmax_bytes = 500",
    );
    let daemon = TestDaemon::with_tools(&tools).await;
    let workspace = daemon.workspace("w");
    let script = json!({"turns": [{"tool_calls": [{"name": "big", "arguments": {"bytes": 5000}}]}, {"final": "ok"}]});
    let mut run = daemon.start_run(scripted_run(&workspace, &script)).await;
    run.finished().await;
    let result = run.of(|e| match e {
        Event::ToolFinished(finished) => finished.result.clone(),
        _ => None,
    })[0]
        .clone();
    assert!(result.truncated);
    let page = daemon
        .tools()
        .await
        .read_output(pb::ReadOutputRequest {
            execution_id: result.execution_id,
            offset: 0,
            length: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(page.total_bytes > 5000);
}
