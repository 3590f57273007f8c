//! Tests of `run_json.rs`.

use serde_json::{Value, json};

use super::*;
use crate::proto::{
    ApprovalRequested, ApprovalState, OutputStream, Risk, RunFinished, RunState, StepStarted,
    StopReason, ToolCallOutput, ToolFinished, ToolResult, ToolStatus,
};

fn event(kind: Event) -> RunEvent {
    RunEvent {
        run_id: "run_1".to_owned(),
        seq: 4,
        step_id: "step_1".to_owned(),
        time_ms: 1_700_000_000_000,
        turn_id: "turn_1".to_owned(),
        delta: false,
        event: Some(kind),
    }
}

fn parse(text: &str) -> anyhow::Result<Value> {
    assert!(text.ends_with('\n'), "{text:?}");
    assert_eq!(text.lines().count(), 1, "{text:?}");
    Ok(serde_json::from_str(text)?)
}

#[test]
fn an_event_is_one_line_keyed_by_its_kind() -> anyhow::Result<()> {
    let text = run_event_json(&event(Event::StepStarted(StepStarted { index: 2 })));
    assert_eq!(
        text,
        "{\"run_id\":\"run_1\",\"seq\":4,\"step_id\":\"step_1\",\"time_ms\":1700000000000,\
         \"turn_id\":\"turn_1\",\"step_started\":{\"index\":2}}\n"
    );
    parse(&text)?;
    Ok(())
}

#[test]
fn enums_are_named_and_results_nested() -> anyhow::Result<()> {
    let finished = parse(&run_event_json(&event(Event::RunFinished(RunFinished {
        reason: StopReason::BudgetExhausted as i32,
        final_text: String::new(),
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 2,
            model_calls: 1,
            tool_calls: 0,
        }),
        detail: "tokens: 12 used of a budget of 10".to_owned(),
        steps: 1,
    }))))?;
    assert_eq!(
        finished["run_finished"],
        json!({
            "reason": "BUDGET_EXHAUSTED",
            "final_text": "",
            "usage": {"input_tokens": 10, "output_tokens": 2, "model_calls": 1, "tool_calls": 0},
            "detail": "tokens: 12 used of a budget of 10",
            "steps": 1,
        })
    );

    let tool = parse(&run_event_json(&event(Event::ToolFinished(ToolFinished {
        provider_call_id: String::new(),
        call_id: "call_1".to_owned(),
        tool: "grep".to_owned(),
        result: Some(ToolResult {
            status: ToolStatus::Ok as i32,
            content: "{\"matches\":[]}".to_owned(),
            ..ToolResult::default()
        }),
    }))))?;
    assert_eq!(tool["tool_finished"]["result"]["status"], "OK");
    assert_eq!(
        tool["tool_finished"]["result"]["content"],
        "{\"matches\":[]}"
    );

    let output = parse(&run_event_json(&event(Event::ToolOutput(ToolCallOutput {
        call_id: "call_1".to_owned(),
        stream: OutputStream::Stderr as i32,
        data: b"warn\xff\n".to_vec(),
    }))))?;
    assert_eq!(
        output["tool_output"],
        json!({"call_id": "call_1", "stream": "STDERR", "data": "warn\u{fffd}\n"})
    );
    Ok(())
}

#[test]
fn deltas_are_kinds_of_their_own_marked_as_deltas() -> anyhow::Result<()> {
    let text = parse(&run_event_json(&RunEvent {
        delta: true,
        ..event(Event::TextDelta(crate::proto::ModelTextDelta {
            text: "Hel".to_owned(),
        }))
    }))?;
    assert_eq!(
        text,
        json!({
            "run_id": "run_1",
            "seq": 4,
            "step_id": "step_1",
            "time_ms": 1_700_000_000_000i64,
            "turn_id": "turn_1",
            "delta": true,
            "text_delta": {"text": "Hel"},
        })
    );
    let call = parse(&run_event_json(&RunEvent {
        delta: true,
        ..event(Event::ToolCallDelta(crate::proto::ToolCallDelta {
            index: 1,
            provider_call_id: "toolu_1".to_owned(),
            tool: "grep".to_owned(),
            arguments_delta: "{\"pat".to_owned(),
        }))
    }))?;
    assert_eq!(
        call["tool_call_delta"],
        json!({"index": 1, "provider_call_id": "toolu_1", "tool": "grep", "arguments_delta": "{\"pat"})
    );
    // A committed event has no `delta` key: it reads as it did before deltas existed.
    let committed = parse(&run_event_json(&event(Event::ModelText(
        crate::proto::ModelText {
            text: "Hello".to_owned(),
        },
    ))))?;
    assert_eq!(committed.get("delta"), None);
    assert_eq!(committed["model_text"]["text"], "Hello");
    Ok(())
}

#[test]
fn compaction_and_the_context_report_keep_their_fields() -> anyhow::Result<()> {
    let compacted = parse(&run_event_json(&event(Event::ContextCompacted(
        crate::proto::ContextCompacted {
            entries: 42,
            tokens_before: 31_200,
            summary_tokens: 640,
            summary: "Read calc.py; the tests fail.".to_owned(),
            usage: Some(Usage {
                input_tokens: 31_000,
                output_tokens: 640,
                model_calls: 1,
                tool_calls: 0,
            }),
            fallback: false,
            error: String::new(),
        },
    ))))?;
    assert_eq!(
        compacted["context_compacted"],
        json!({
            "entries": 42,
            "tokens_before": 31_200,
            "summary_tokens": 640,
            "summary": "Read calc.py; the tests fail.",
            "usage": {"input_tokens": 31_000, "output_tokens": 640, "model_calls": 1, "tool_calls": 0},
            "fallback": false,
            "error": "",
        })
    );
    let built = parse(&run_event_json(&event(Event::ContextBuilt(ContextBuilt {
        tokens: 900,
        budget: 1000,
        items: vec![crate::proto::ContextItem {
            kind: "observation".to_owned(),
            source: "call_1".to_owned(),
            tokens: 40,
            disposition: crate::proto::ContextDisposition::Dropped as i32,
            reason: "over the budget".to_owned(),
        }],
        tokenizer: "estimate".to_owned(),
        calibration: 1.25,
    }))))?;
    assert_eq!(built["context_built"]["tokenizer"], "estimate");
    assert_eq!(built["context_built"]["calibration"], 1.25);
    assert_eq!(
        built["context_built"]["items"][0],
        json!({
            "kind": "observation",
            "source": "call_1",
            "tokens": 40,
            "disposition": "DROPPED",
            "reason": "over the budget",
        })
    );
    Ok(())
}

#[test]
fn a_run_that_continues_a_session_says_from_where() -> anyhow::Result<()> {
    let started = parse(&run_event_json(&event(Event::RunStarted(RunStarted {
        session_id: "ses_1".to_owned(),
        continues_run_id: "run_0".to_owned(),
        history_messages: 6,
        project_instructions: true,
        budgets: Some(Budgets {
            max_repeated_calls: 3,
            max_idle_steps: 5,
            ..Budgets::default()
        }),
        ..RunStarted::default()
    }))))?;
    let started = &started["run_started"];
    assert_eq!(started["continues_run_id"], "run_0");
    assert_eq!(started["history_messages"], 6);
    assert_eq!(started["project_instructions"], true);
    assert_eq!(started["budgets"]["max_repeated_calls"], 3);
    assert_eq!(started["budgets"]["max_idle_steps"], 5);
    Ok(())
}

#[test]
fn approval_requests_keep_every_field() -> anyhow::Result<()> {
    let request = ApprovalRequest {
        approval_id: "apr_1".to_owned(),
        run_id: "run_1".to_owned(),
        tool: "write_file".to_owned(),
        arguments_json: "{\"path\":\"a\"}".to_owned(),
        risk: Risk::Write as i32,
        preview: Some(Preview {
            kind: "diff".to_owned(),
            text: "+a\n".to_owned(),
            truncated: false,
            error: String::new(),
        }),
        deadline_ms: 5,
        digest: "d".to_owned(),
        state: ApprovalState::Pending as i32,
        ..ApprovalRequest::default()
    };
    let line = parse(&approval_json(&request))?;
    assert_eq!(line["risk"], "write");
    assert_eq!(line["state"], "PENDING");
    assert_eq!(line["preview"]["kind"], "diff");
    assert_eq!(line["arguments_json"], "{\"path\":\"a\"}");

    let in_event = parse(&run_event_json(&event(Event::ApprovalRequested(
        ApprovalRequested {
            request: Some(request),
        },
    ))))?;
    assert_eq!(in_event["approval_requested"]["request"], line);
    Ok(())
}

#[test]
fn an_event_of_an_unknown_kind_has_only_its_envelope() -> anyhow::Result<()> {
    let unknown = RunEvent {
        event: None,
        ..event(Event::StepStarted(StepStarted { index: 1 }))
    };
    let value = parse(&run_event_json(&unknown))?;
    assert_eq!(
        value,
        json!({
            "run_id": "run_1",
            "seq": 4,
            "step_id": "step_1",
            "time_ms": 1_700_000_000_000i64,
            "turn_id": "turn_1",
        })
    );
    Ok(())
}

#[test]
fn runs_are_listed_with_named_states() -> anyhow::Result<()> {
    let run = RunInfo {
        run_id: "run_1".to_owned(),
        state: RunState::Finished as i32,
        stop_reason: StopReason::Final as i32,
        steps: 2,
        ..RunInfo::default()
    };
    let value: Value = serde_json::from_str(&runs_json(std::slice::from_ref(&run)))?;
    assert_eq!(value["runs"][0]["state"], "FINISHED");
    assert_eq!(value["runs"][0]["stop_reason"], "FINAL");
    assert_eq!(value["runs"][0]["usage"], Value::Null);
    let one: Value = serde_json::from_str(&run_info_json(&run))?;
    assert_eq!(one, value["runs"][0]);
    Ok(())
}

#[test]
fn a_trace_keeps_every_span_field_with_named_statuses() -> anyhow::Result<()> {
    let trace = Trace {
        run_id: "run_1".to_owned(),
        trace_id: "t1".to_owned(),
        spans: vec![Span {
            trace_id: "t1".to_owned(),
            span_id: "s1".to_owned(),
            parent_span_id: "r1".to_owned(),
            name: "tool".to_owned(),
            start_unix_nano: 1_700_000_000_000_000_000,
            end_unix_nano: 1_700_000_000_006_000_000,
            attributes: vec![SpanAttribute {
                key: "status".to_owned(),
                value: "TIMEOUT".to_owned(),
            }],
            status: crate::proto::SpanStatus::Error as i32,
            status_message: "ran past 200 ms".to_owned(),
        }],
    };
    let text = trace_json(&trace);
    assert!(text.ends_with("}\n"), "{text}");
    let value: Value = serde_json::from_str(&text)?;
    assert_eq!(
        value,
        json!({"run_id": "run_1", "trace_id": "t1", "spans": [{
            "trace_id": "t1",
            "span_id": "s1",
            "parent_span_id": "r1",
            "name": "tool",
            "start_unix_nano": 1_700_000_000_000_000_000i64,
            "end_unix_nano": 1_700_000_000_006_000_000i64,
            "attributes": [{"key": "status", "value": "TIMEOUT"}],
            "status": "ERROR",
            "status_message": "ran past 200 ms"
        }]})
    );
    Ok(())
}
