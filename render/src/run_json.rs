//! The JSON of the agent commands: run events and approval updates one object per line (a
//! stream a program reads as it comes), runs and traces as indented documents.
//!
//! The shape is that of the API: proto field names, the event's kind as the key of its body
//! (`{"run_id": …, "seq": 3, …, "tool_call_proposed": {…}}`, as in the protobuf JSON mapping),
//! enum values by name without their prefix (`"FINAL"`, `"APPROVE_ONCE"`, `"RISKY"`) except
//! risks, which keep the manifest's names (`"write"`). A tool's output chunk is text (invalid
//! UTF-8 replaced), a tool's result as `airlock exec --json` prints it.
//!
//! Every event carries its `turn_id`. A streamed piece (`text_delta`, `tool_call_delta`) also
//! carries `"delta": true` and a kind of its own, so that a program that reads only the
//! committed kinds, or counts events by `seq`, sees exactly what it saw before: a delta has
//! the seq of the committed event it leads up to, and is never replayed to a later attach.

use std::borrow::Cow;

use serde::Serialize;

use super::names::{
    approval_state_name, decision_name, disposition_name, output_stream_name, policy_name,
    risk_name, run_state_name, span_status_name, stop_reason_name,
};
use super::views::{ResultView, to_json};
use crate::proto::run_event::Event;
use crate::proto::{
    ApprovalRequest, Budgets, ContextBuilt, Preview, RunEvent, RunInfo, RunStarted, Span,
    SpanAttribute, Trace, Usage,
};

/// One event as one line of JSON, ending with a newline.
pub fn run_event_json(event: &RunEvent) -> String {
    line(&EventView::from(event))
}

/// One approval request or update as one line of JSON, ending with a newline.
pub fn approval_json(request: &ApprovalRequest) -> String {
    line(&ApprovalView::from(request))
}

/// One run's record as an indented JSON document.
pub fn run_info_json(run: &RunInfo) -> String {
    to_json(&RunView::from(run))
}

/// `{"runs": [...]}`, each run as [`run_info_json`] prints it.
pub fn runs_json(runs: &[RunInfo]) -> String {
    #[derive(Serialize)]
    struct RunsView<'a> {
        runs: Vec<RunView<'a>>,
    }
    to_json(&RunsView {
        runs: runs.iter().map(RunView::from).collect(),
    })
}

/// One run's trace as an indented JSON document: every span as the daemon recorded it, in the
/// daemon's order, attributes as a list of `{"key", "value"}` (a key may repeat).
pub fn trace_json(trace: &Trace) -> String {
    to_json(&TraceView::from(trace))
}

fn line(view: &impl Serialize) -> String {
    #[expect(
        clippy::expect_used,
        reason = "the views hold only strings, numbers, booleans and nested views of those, \
                  which always serialize (serde_json writes a float that is not finite as null)"
    )]
    let mut text = serde_json::to_string(view).expect("views always serialize");
    text.push('\n');
    text
}

#[derive(Serialize)]
struct EventView<'a> {
    run_id: &'a str,
    seq: u64,
    step_id: &'a str,
    time_ms: i64,
    turn_id: &'a str,
    /// Present, and true, only on a streamed piece: as the protobuf JSON mapping leaves out a
    /// false bool, and so that committed events read as they did.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    delta: bool,
    #[serde(flatten)]
    event: Option<EventBody<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum EventBody<'a> {
    RunStarted(RunStartedView<'a>),
    StepStarted {
        index: u32,
    },
    ContextBuilt(ContextBuiltView<'a>),
    ModelText {
        text: &'a str,
    },
    TextDelta {
        text: &'a str,
    },
    ToolCallDelta {
        index: u32,
        provider_call_id: &'a str,
        tool: &'a str,
        arguments_delta: &'a str,
    },
    ContextCompacted {
        entries: u32,
        tokens_before: u64,
        summary_tokens: u64,
        summary: &'a str,
        usage: Option<UsageView>,
        fallback: bool,
        error: &'a str,
    },
    ModelRetry {
        attempt: u32,
        error: &'a str,
        delay_ms: u64,
    },
    ToolCallProposed {
        call_id: &'a str,
        provider_call_id: &'a str,
        tool: &'a str,
        arguments_json: &'a str,
    },
    ToolCallRejected {
        call_id: &'a str,
        provider_call_id: &'a str,
        tool: &'a str,
        reason: &'a str,
    },
    ApprovalRequested {
        request: Option<ApprovalView<'a>>,
    },
    ApprovalResolved {
        approval_id: &'a str,
        call_id: &'a str,
        decision: Cow<'static, str>,
        reason: &'a str,
        decided_by: &'a str,
    },
    ToolStarted {
        call_id: &'a str,
        tool: &'a str,
        execution_id: &'a str,
    },
    ToolOutput {
        call_id: &'a str,
        stream: Cow<'static, str>,
        data: Cow<'a, str>,
    },
    ToolFinished {
        call_id: &'a str,
        provider_call_id: &'a str,
        tool: &'a str,
        result: Option<ResultView<'a>>,
    },
    UserInput {
        text: &'a str,
    },
    DecisionRejected {
        approval_id: &'a str,
        reason: &'a str,
    },
    Changes {
        call_id: &'a str,
        tool: &'a str,
        changes: Vec<super::changes::ChangeView<'a>>,
        not_applied: &'a str,
    },
    RunResumed {
        checkpoint_id: &'a str,
        checkpoint_seq: u64,
        pending_calls: u32,
    },
    RunFinished {
        reason: Cow<'static, str>,
        final_text: &'a str,
        usage: Option<UsageView>,
        detail: &'a str,
        steps: u32,
    },
}

impl<'a> From<&'a RunEvent> for EventView<'a> {
    fn from(event: &'a RunEvent) -> Self {
        Self {
            run_id: &event.run_id,
            seq: event.seq,
            step_id: &event.step_id,
            time_ms: event.time_ms,
            turn_id: &event.turn_id,
            delta: event.delta,
            event: event.event.as_ref().map(EventBody::from),
        }
    }
}

impl<'a> From<&'a Event> for EventBody<'a> {
    fn from(event: &'a Event) -> Self {
        match event {
            Event::RunStarted(started) => Self::RunStarted(RunStartedView::from(started)),
            Event::StepStarted(step) => Self::StepStarted { index: step.index },
            Event::ContextBuilt(built) => Self::ContextBuilt(ContextBuiltView::from(built)),
            Event::ModelText(text) => Self::ModelText { text: &text.text },
            Event::TextDelta(delta) => Self::TextDelta { text: &delta.text },
            Event::ToolCallDelta(call) => Self::ToolCallDelta {
                index: call.index,
                provider_call_id: &call.provider_call_id,
                tool: &call.tool,
                arguments_delta: &call.arguments_delta,
            },
            Event::ContextCompacted(compacted) => Self::ContextCompacted {
                entries: compacted.entries,
                tokens_before: compacted.tokens_before,
                summary_tokens: compacted.summary_tokens,
                summary: &compacted.summary,
                usage: compacted.usage.as_ref().map(UsageView::from),
                fallback: compacted.fallback,
                error: &compacted.error,
            },
            Event::ModelRetry(retry) => Self::ModelRetry {
                attempt: retry.attempt,
                error: &retry.error,
                delay_ms: retry.delay_ms,
            },
            Event::ToolCallProposed(call) => Self::ToolCallProposed {
                call_id: &call.call_id,
                provider_call_id: &call.provider_call_id,
                tool: &call.tool,
                arguments_json: &call.arguments_json,
            },
            Event::ToolCallRejected(rejected) => Self::ToolCallRejected {
                call_id: &rejected.call_id,
                provider_call_id: &rejected.provider_call_id,
                tool: &rejected.tool,
                reason: &rejected.reason,
            },
            Event::ApprovalRequested(requested) => Self::ApprovalRequested {
                request: requested.request.as_ref().map(ApprovalView::from),
            },
            Event::ApprovalResolved(resolved) => Self::ApprovalResolved {
                approval_id: &resolved.approval_id,
                call_id: &resolved.call_id,
                decision: decision_name(resolved.decision),
                reason: &resolved.reason,
                decided_by: &resolved.decided_by,
            },
            Event::ToolStarted(started) => Self::ToolStarted {
                call_id: &started.call_id,
                tool: &started.tool,
                execution_id: &started.execution_id,
            },
            Event::ToolOutput(output) => Self::ToolOutput {
                call_id: &output.call_id,
                stream: output_stream_name(output.stream),
                data: String::from_utf8_lossy(&output.data),
            },
            Event::ToolFinished(finished) => Self::ToolFinished {
                call_id: &finished.call_id,
                provider_call_id: &finished.provider_call_id,
                tool: &finished.tool,
                result: finished.result.as_ref().map(ResultView::from),
            },
            Event::UserInput(input) => Self::UserInput { text: &input.text },
            Event::DecisionRejected(rejected) => Self::DecisionRejected {
                approval_id: &rejected.approval_id,
                reason: &rejected.reason,
            },
            Event::Changes(changes) => {
                let set = changes.change_set.as_ref();
                Self::Changes {
                    call_id: &changes.call_id,
                    tool: &changes.tool,
                    changes: set
                        .map(|set| {
                            set.changes
                                .iter()
                                .map(super::changes::ChangeView::from)
                                .collect()
                        })
                        .unwrap_or_default(),
                    not_applied: set.map_or("", |set| set.not_applied.as_str()),
                }
            }
            Event::RunResumed(resumed) => Self::RunResumed {
                checkpoint_id: &resumed.checkpoint_id,
                checkpoint_seq: resumed.checkpoint_seq,
                pending_calls: resumed.pending_calls,
            },
            Event::RunFinished(finished) => Self::RunFinished {
                reason: stop_reason_name(finished.reason),
                final_text: &finished.final_text,
                usage: finished.usage.as_ref().map(UsageView::from),
                detail: &finished.detail,
                steps: finished.steps,
            },
        }
    }
}

#[derive(Serialize)]
struct RunStartedView<'a> {
    session_id: &'a str,
    turn_id: &'a str,
    trace_id: &'a str,
    input: &'a str,
    model: &'a str,
    tools: &'a [String],
    approval_policy: Cow<'static, str>,
    budgets: Option<BudgetsView>,
    workspace: &'a str,
    stop_on_denial: bool,
    continues_run_id: &'a str,
    history_messages: u32,
    project_instructions: bool,
}

impl<'a> From<&'a RunStarted> for RunStartedView<'a> {
    fn from(started: &'a RunStarted) -> Self {
        Self {
            session_id: &started.session_id,
            turn_id: &started.turn_id,
            trace_id: &started.trace_id,
            input: &started.input,
            model: &started.model,
            tools: &started.tools,
            approval_policy: policy_name(started.approval_policy),
            budgets: started.budgets.as_ref().map(BudgetsView::from),
            workspace: &started.workspace,
            stop_on_denial: started.stop_on_denial,
            continues_run_id: &started.continues_run_id,
            history_messages: started.history_messages,
            project_instructions: started.project_instructions,
        }
    }
}

#[derive(Serialize)]
pub(super) struct BudgetsView {
    max_steps: u32,
    max_tokens: u64,
    max_wall_time_ms: u64,
    max_tool_calls: u32,
    max_repeated_errors: u32,
    context_tokens: u64,
    max_repeated_calls: u32,
    max_idle_steps: u32,
}

impl From<&Budgets> for BudgetsView {
    fn from(budgets: &Budgets) -> Self {
        Self {
            max_steps: budgets.max_steps,
            max_tokens: budgets.max_tokens,
            max_wall_time_ms: budgets.max_wall_time_ms,
            max_tool_calls: budgets.max_tool_calls,
            max_repeated_errors: budgets.max_repeated_errors,
            context_tokens: budgets.context_tokens,
            max_repeated_calls: budgets.max_repeated_calls,
            max_idle_steps: budgets.max_idle_steps,
        }
    }
}

#[derive(Serialize)]
struct ContextBuiltView<'a> {
    tokens: u64,
    budget: u64,
    items: Vec<ContextItemView<'a>>,
    tokenizer: &'a str,
    calibration: f64,
}

#[derive(Serialize)]
struct ContextItemView<'a> {
    kind: &'a str,
    source: &'a str,
    tokens: u64,
    disposition: Cow<'static, str>,
    reason: &'a str,
}

impl<'a> From<&'a ContextBuilt> for ContextBuiltView<'a> {
    fn from(built: &'a ContextBuilt) -> Self {
        Self {
            tokens: built.tokens,
            budget: built.budget,
            items: built
                .items
                .iter()
                .map(|item| ContextItemView {
                    kind: &item.kind,
                    source: &item.source,
                    tokens: item.tokens,
                    disposition: disposition_name(item.disposition),
                    reason: &item.reason,
                })
                .collect(),
            tokenizer: &built.tokenizer,
            calibration: built.calibration,
        }
    }
}

#[derive(Serialize)]
pub(super) struct UsageView {
    input_tokens: u64,
    output_tokens: u64,
    model_calls: u32,
    tool_calls: u32,
}

impl From<&Usage> for UsageView {
    fn from(usage: &Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            model_calls: usage.model_calls,
            tool_calls: usage.tool_calls,
        }
    }
}

#[derive(Serialize)]
struct ApprovalView<'a> {
    approval_id: &'a str,
    run_id: &'a str,
    session_id: &'a str,
    step_id: &'a str,
    call_id: &'a str,
    tool: &'a str,
    arguments_json: &'a str,
    risk: Cow<'static, str>,
    profile: &'a str,
    preview: Option<PreviewView<'a>>,
    deadline_ms: i64,
    digest: &'a str,
    reason: &'a str,
    state: Cow<'static, str>,
    detail: &'a str,
}

#[derive(Serialize)]
struct PreviewView<'a> {
    kind: &'a str,
    text: &'a str,
    truncated: bool,
    error: &'a str,
}

impl<'a> From<&'a ApprovalRequest> for ApprovalView<'a> {
    fn from(request: &'a ApprovalRequest) -> Self {
        Self {
            approval_id: &request.approval_id,
            run_id: &request.run_id,
            session_id: &request.session_id,
            step_id: &request.step_id,
            call_id: &request.call_id,
            tool: &request.tool,
            arguments_json: &request.arguments_json,
            risk: risk_name(request.risk),
            profile: &request.profile,
            preview: request.preview.as_ref().map(PreviewView::from),
            deadline_ms: request.deadline_ms,
            digest: &request.digest,
            reason: &request.reason,
            state: approval_state_name(request.state),
            detail: &request.detail,
        }
    }
}

impl<'a> From<&'a Preview> for PreviewView<'a> {
    fn from(preview: &'a Preview) -> Self {
        Self {
            kind: &preview.kind,
            text: &preview.text,
            truncated: preview.truncated,
            error: &preview.error,
        }
    }
}

#[derive(Serialize)]
struct RunView<'a> {
    run_id: &'a str,
    session_id: &'a str,
    state: Cow<'static, str>,
    stop_reason: Cow<'static, str>,
    stop_detail: &'a str,
    input: &'a str,
    final_text: &'a str,
    usage: Option<UsageView>,
    model: &'a str,
    workspace: &'a str,
    trace_id: &'a str,
    created_at_ms: i64,
    finished_at_ms: i64,
    last_seq: u64,
    steps: u32,
}

impl<'a> From<&'a RunInfo> for RunView<'a> {
    fn from(run: &'a RunInfo) -> Self {
        Self {
            run_id: &run.run_id,
            session_id: &run.session_id,
            state: run_state_name(run.state),
            stop_reason: stop_reason_name(run.stop_reason),
            stop_detail: &run.stop_detail,
            input: &run.input,
            final_text: &run.final_text,
            usage: run.usage.as_ref().map(UsageView::from),
            model: &run.model,
            workspace: &run.workspace,
            trace_id: &run.trace_id,
            created_at_ms: run.created_at_ms,
            finished_at_ms: run.finished_at_ms,
            last_seq: run.last_seq,
            steps: run.steps,
        }
    }
}

#[derive(Serialize)]
struct TraceView<'a> {
    run_id: &'a str,
    trace_id: &'a str,
    spans: Vec<SpanView<'a>>,
}

impl<'a> From<&'a Trace> for TraceView<'a> {
    fn from(trace: &'a Trace) -> Self {
        Self {
            run_id: &trace.run_id,
            trace_id: &trace.trace_id,
            spans: trace.spans.iter().map(SpanView::from).collect(),
        }
    }
}

#[derive(Serialize)]
struct SpanView<'a> {
    trace_id: &'a str,
    span_id: &'a str,
    parent_span_id: &'a str,
    name: &'a str,
    start_unix_nano: i64,
    end_unix_nano: i64,
    attributes: Vec<AttributeView<'a>>,
    status: Cow<'static, str>,
    status_message: &'a str,
}

impl<'a> From<&'a Span> for SpanView<'a> {
    fn from(span: &'a Span) -> Self {
        Self {
            trace_id: &span.trace_id,
            span_id: &span.span_id,
            parent_span_id: &span.parent_span_id,
            name: &span.name,
            start_unix_nano: span.start_unix_nano,
            end_unix_nano: span.end_unix_nano,
            attributes: span.attributes.iter().map(AttributeView::from).collect(),
            status: span_status_name(span.status),
            status_message: &span.status_message,
        }
    }
}

#[derive(Serialize)]
struct AttributeView<'a> {
    key: &'a str,
    value: &'a str,
}

impl<'a> From<&'a SpanAttribute> for AttributeView<'a> {
    fn from(attribute: &'a SpanAttribute) -> Self {
        Self {
            key: &attribute.key,
            value: &attribute.value,
        }
    }
}

#[cfg(test)]
mod tests {
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
}
