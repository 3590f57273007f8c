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
#[path = "run_json_tests.rs"]
mod tests;
