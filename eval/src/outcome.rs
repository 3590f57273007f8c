//! What one attempt's run did, as an eval records it: its ids, final text, stop reason,
//! steps, tokens, cost and wall time, every tool call in order (with its status and the hosts
//! it contacted) and every approval asked. The [`Recorder`] builds it from the run's events;
//! graders read it; the report writes it.

use std::collections::BTreeMap;

use airlock_client::proto::run_event::Event;
use airlock_client::proto::{
    Decision, NetworkContact, RunEvent, StopReason, ToolResult, ToolStatus,
};
use airlock_render::{decision_name, status_name};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::price::Cost;

/// The status of a proposed call that never got a result (the run ended first).
pub const PENDING: &str = "PENDING";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub run_id: String,
    pub trace_id: String,
    pub session_id: String,
    /// The model as the run reports it (`openai:gpt-4o`, `scripted`, `replay`).
    pub model: String,
    /// The model whose price the cost is: a replayed run's is the cassette's.
    pub priced_model: String,
    pub final_text: String,
    /// `final`, `max_steps`, … ([`stop_reason_key`]); `None` until the run finished.
    pub stop_reason: Option<String>,
    pub stop_detail: String,
    pub steps: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: Cost,
    /// From the start request to the run's last event, as this client saw it.
    pub wall_s: f64,
    pub tool_calls: Vec<ToolCall>,
    pub approvals: Vec<Approval>,
}

impl Outcome {
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub fn finished(&self) -> bool {
        self.stop_reason.is_some()
    }
}

/// One call the model proposed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub call_id: String,
    pub tool: String,
    /// As the model wrote them: the JSON value, or the text when it is not JSON.
    pub arguments: Value,
    /// `OK`, `TOOL_ERROR`, `DENIED`, … (the API's names); `INVALID_ARGUMENTS` for a call
    /// refused before it ran; [`PENDING`] when the run ended before its result.
    pub status: String,
    pub denied: bool,
    /// The error message of a failed call, the reason of a denied or refused one.
    pub error: String,
    pub duration_ms: u64,
    pub network: Vec<Contact>,
}

/// A host:port a call contacted or tried to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contact {
    pub host: String,
    pub port: u32,
    pub connections: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub refused: u64,
    pub refusal: String,
}

impl From<&NetworkContact> for Contact {
    fn from(contact: &NetworkContact) -> Self {
        Contact {
            host: contact.host.clone(),
            port: contact.port,
            connections: contact.connections,
            bytes_sent: contact.bytes_sent,
            bytes_received: contact.bytes_received,
            refused: contact.refused,
            refusal: contact.refusal.clone(),
        }
    }
}

/// One approval the run asked for, and how it was answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub approval_id: String,
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    /// `host:port` for a question about a connection of a running call.
    pub network: Option<String>,
    /// What the eval's approver sent (`APPROVE_ONCE`, `APPROVE_SESSION`, `DENY`); `None`
    /// when it sent nothing.
    pub answered: Option<String>,
    /// How the daemon resolved it; `None` when the run ended first.
    pub decision: Option<String>,
    /// `run client`, `deadline`, … as the daemon says.
    pub decided_by: String,
}

/// A stop reason as suites name it: `final`, `max_steps`, `budget_exhausted`,
/// `repeated_errors`, `cancelled`, `permission_denied`, `model_error`, `no_progress`.
pub fn stop_reason_key(raw: i32) -> String {
    let name = match StopReason::try_from(raw) {
        Ok(StopReason::Unspecified) => "unspecified",
        Ok(StopReason::Final) => "final",
        Ok(StopReason::MaxSteps) => "max_steps",
        Ok(StopReason::BudgetExhausted) => "budget_exhausted",
        Ok(StopReason::RepeatedErrors) => "repeated_errors",
        Ok(StopReason::Cancelled) => "cancelled",
        Ok(StopReason::PermissionDenied) => "permission_denied",
        Ok(StopReason::ModelError) => "model_error",
        Ok(StopReason::NoProgress) => "no_progress",
        Err(_) => return format!("stop_reason({raw})"),
    };
    name.to_owned()
}

/// Every stop reason a suite may name, in the API's order.
pub const STOP_REASONS: [&str; 8] = [
    "final",
    "max_steps",
    "budget_exhausted",
    "repeated_errors",
    "cancelled",
    "permission_denied",
    "model_error",
    "no_progress",
];

/// Every tool status a suite may name (the API's, without the prefix).
pub const TOOL_STATUSES: [&str; 9] = [
    "OK",
    "TOOL_ERROR",
    "INVALID_ARGUMENTS",
    "DENIED",
    "TIMEOUT",
    "CANCELLED",
    "LIMIT_EXCEEDED",
    "SANDBOX_ERROR",
    "OUTCOME_UNKNOWN",
];

fn arguments_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Folds a run's events into its [`Outcome`].
#[derive(Debug, Default)]
pub struct Recorder {
    outcome: Outcome,
    /// Index in `tool_calls` by call id.
    calls: BTreeMap<String, usize>,
    /// Index in `approvals` by approval id.
    approvals: BTreeMap<String, usize>,
}

impl Recorder {
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    pub fn into_outcome(self) -> Outcome {
        self.outcome
    }

    pub fn finished(&self) -> bool {
        self.outcome.finished()
    }

    pub fn on_event(&mut self, event: &RunEvent) {
        if self.outcome.run_id.is_empty() {
            self.outcome.run_id.clone_from(&event.run_id);
        }
        // A streamed piece is repeated whole by the committed event it leads up to.
        if event.delta {
            return;
        }
        let Some(kind) = &event.event else {
            return;
        };
        match kind {
            Event::RunStarted(started) => {
                self.outcome.trace_id.clone_from(&started.trace_id);
                self.outcome.session_id.clone_from(&started.session_id);
                self.outcome.model.clone_from(&started.model);
            }
            Event::StepStarted(step) => self.outcome.steps = self.outcome.steps.max(step.index),
            Event::ModelText(text) => self.outcome.final_text.clone_from(&text.text),
            Event::ToolCallProposed(proposed) => {
                self.calls
                    .insert(proposed.call_id.clone(), self.outcome.tool_calls.len());
                self.outcome.tool_calls.push(ToolCall {
                    call_id: proposed.call_id.clone(),
                    tool: proposed.tool.clone(),
                    arguments: arguments_value(&proposed.arguments_json),
                    status: PENDING.to_owned(),
                    ..ToolCall::default()
                });
            }
            Event::ToolCallRejected(rejected) => {
                let call = self.call(&rejected.call_id, &rejected.tool);
                call.status = status_name(ToolStatus::InvalidArguments as i32).into_owned();
                call.error.clone_from(&rejected.reason);
            }
            Event::ApprovalRequested(requested) => {
                if let Some(request) = &requested.request {
                    self.approvals
                        .insert(request.approval_id.clone(), self.outcome.approvals.len());
                    self.outcome.approvals.push(Approval {
                        approval_id: request.approval_id.clone(),
                        call_id: request.call_id.clone(),
                        tool: request.tool.clone(),
                        arguments: arguments_value(&request.arguments_json),
                        network: request
                            .network
                            .as_ref()
                            .map(|access| format!("{}:{}", access.host, access.port)),
                        ..Approval::default()
                    });
                }
            }
            Event::ApprovalResolved(resolved) => {
                let decision = decision_name(resolved.decision).into_owned();
                if let Some(&index) = self.approvals.get(&resolved.approval_id)
                    && let Some(approval) = self.outcome.approvals.get_mut(index)
                {
                    approval.decision = Some(decision);
                    approval.decided_by.clone_from(&resolved.decided_by);
                }
                // A denied call never runs: no result comes for it. A denied connection of a
                // running call is the call's own business: its result says what came of it.
                if resolved.decision == Decision::Deny as i32 && resolved.network.is_none() {
                    let call = self.call(&resolved.call_id, "");
                    call.status = status_name(ToolStatus::Denied as i32).into_owned();
                    call.denied = true;
                    call.error.clone_from(&resolved.reason);
                }
            }
            Event::ToolFinished(finished) => {
                let call = self.call(&finished.call_id, &finished.tool);
                if let Some(result) = &finished.result {
                    record_result(call, result);
                }
            }
            Event::RunFinished(finished) => {
                self.outcome.stop_reason = Some(stop_reason_key(finished.reason));
                self.outcome.stop_detail.clone_from(&finished.detail);
                self.outcome.steps = self.outcome.steps.max(finished.steps);
                if !finished.final_text.is_empty() {
                    self.outcome.final_text.clone_from(&finished.final_text);
                }
                if let Some(usage) = &finished.usage {
                    self.outcome.input_tokens = usage.input_tokens;
                    self.outcome.output_tokens = usage.output_tokens;
                }
            }
            Event::RunResumed(_)
            | Event::ContextBuilt(_)
            | Event::ContextCompacted(_)
            | Event::ModelRetry(_)
            | Event::ToolStarted(_)
            | Event::ToolOutput(_)
            | Event::UserInput(_)
            | Event::DecisionRejected(_)
            | Event::Changes(_)
            | Event::TextDelta(_)
            | Event::ToolCallDelta(_) => {}
        }
    }

    /// Records what the eval's approver answered to `approval_id`.
    pub fn answered(&mut self, approval_id: &str, decision: Decision) {
        if let Some(&index) = self.approvals.get(approval_id)
            && let Some(approval) = self.outcome.approvals.get_mut(index)
        {
            approval.answered = Some(decision_name(decision as i32).into_owned());
        }
    }

    /// The call with this id; one is added for an id no proposal announced (a resumed run's
    /// call proposed before the restart).
    fn call(&mut self, call_id: &str, tool: &str) -> &mut ToolCall {
        let index = match self.calls.get(call_id) {
            Some(&index) => index,
            None => {
                let index = self.outcome.tool_calls.len();
                self.calls.insert(call_id.to_owned(), index);
                self.outcome.tool_calls.push(ToolCall {
                    call_id: call_id.to_owned(),
                    tool: tool.to_owned(),
                    arguments: Value::Null,
                    status: PENDING.to_owned(),
                    ..ToolCall::default()
                });
                index
            }
        };
        &mut self.outcome.tool_calls[index]
    }
}

fn record_result(call: &mut ToolCall, result: &ToolResult) {
    call.status = status_name(result.status).into_owned();
    call.denied = result.status == ToolStatus::Denied as i32;
    call.error.clone_from(&result.error_message);
    call.duration_ms = result.duration_ms;
    call.network = result
        .metadata
        .as_ref()
        .map(|metadata| metadata.network.iter().map(Contact::from).collect())
        .unwrap_or_default();
}

#[cfg(test)]
pub mod tests {
    use airlock_client::proto::{
        ApprovalRequest, ApprovalRequested, ApprovalResolved, RunFinished, RunStarted, StepStarted,
        ToolCallProposed, ToolCallRejected, ToolFinished, ToolResultMetadata, Usage,
    };

    use super::*;

    fn event(seq: u64, kind: Event) -> RunEvent {
        RunEvent {
            run_id: "run_1".to_owned(),
            seq,
            event: Some(kind),
            ..RunEvent::default()
        }
    }

    /// The events of a small run: a read that ran, a write that was denied, a call with bad
    /// arguments, a fetch that was refused a host, then a final answer.
    pub fn sample_events() -> Vec<RunEvent> {
        let proposed = |call_id: &str, tool: &str, arguments: &str| {
            Event::ToolCallProposed(ToolCallProposed {
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                arguments_json: arguments.to_owned(),
                ..ToolCallProposed::default()
            })
        };
        let finished = |call_id: &str, tool: &str, status: ToolStatus, network| {
            Event::ToolFinished(ToolFinished {
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                result: Some(ToolResult {
                    status: status as i32,
                    duration_ms: 7,
                    metadata: Some(ToolResultMetadata {
                        network,
                        ..ToolResultMetadata::default()
                    }),
                    ..ToolResult::default()
                }),
                ..ToolFinished::default()
            })
        };
        vec![
            event(
                1,
                Event::RunStarted(RunStarted {
                    trace_id: "trace_1".to_owned(),
                    session_id: "ses_1".to_owned(),
                    model: "scripted".to_owned(),
                    ..RunStarted::default()
                }),
            ),
            event(2, Event::StepStarted(StepStarted { index: 1 })),
            event(3, proposed("call_1", "read_file", r#"{"path":"a.txt"}"#)),
            event(
                4,
                finished("call_1", "read_file", ToolStatus::Ok, Vec::new()),
            ),
            event(5, Event::StepStarted(StepStarted { index: 2 })),
            event(6, proposed("call_2", "write_file", r#"{"path":"a.txt"}"#)),
            event(
                7,
                Event::ApprovalRequested(ApprovalRequested {
                    request: Some(ApprovalRequest {
                        approval_id: "apr_1".to_owned(),
                        call_id: "call_2".to_owned(),
                        tool: "write_file".to_owned(),
                        arguments_json: r#"{"path":"a.txt"}"#.to_owned(),
                        ..ApprovalRequest::default()
                    }),
                }),
            ),
            event(
                8,
                Event::ApprovalResolved(ApprovalResolved {
                    approval_id: "apr_1".to_owned(),
                    call_id: "call_2".to_owned(),
                    decision: Decision::Deny as i32,
                    reason: "not today".to_owned(),
                    decided_by: "run client".to_owned(),
                    network: None,
                }),
            ),
            event(9, proposed("call_3", "grep", "{not json")),
            event(
                10,
                Event::ToolCallRejected(ToolCallRejected {
                    call_id: "call_3".to_owned(),
                    tool: "grep".to_owned(),
                    reason: "arguments are not JSON".to_owned(),
                    ..ToolCallRejected::default()
                }),
            ),
            event(
                11,
                proposed("call_4", "fetch", r#"{"url":"https://x.test"}"#),
            ),
            event(
                12,
                finished(
                    "call_4",
                    "fetch",
                    ToolStatus::ToolError,
                    vec![NetworkContact {
                        host: "x.test".to_owned(),
                        port: 443,
                        refused: 1,
                        refusal: "not in the profile's allow-list".to_owned(),
                        ..NetworkContact::default()
                    }],
                ),
            ),
            event(13, Event::StepStarted(StepStarted { index: 3 })),
            event(
                14,
                Event::RunFinished(RunFinished {
                    reason: StopReason::Final as i32,
                    final_text: "The mean is the average.\nDone.".to_owned(),
                    usage: Some(Usage {
                        input_tokens: 120,
                        output_tokens: 30,
                        ..Usage::default()
                    }),
                    detail: String::new(),
                    steps: 3,
                }),
            ),
        ]
    }

    #[test]
    fn a_run_is_recorded_call_by_call() {
        let mut recorder = Recorder::default();
        for event in sample_events() {
            recorder.on_event(&event);
            if event.seq == 7 {
                recorder.answered("apr_1", Decision::Deny);
            }
        }
        assert!(recorder.finished());
        let outcome = recorder.into_outcome();
        assert_eq!(outcome.run_id, "run_1");
        assert_eq!(outcome.trace_id, "trace_1");
        assert_eq!(outcome.model, "scripted");
        assert_eq!(outcome.stop_reason.as_deref(), Some("final"));
        assert_eq!(outcome.steps, 3);
        assert_eq!(outcome.tokens(), 150);
        assert_eq!(outcome.final_text, "The mean is the average.\nDone.");
        let calls: Vec<(&str, &str, bool)> = outcome
            .tool_calls
            .iter()
            .map(|call| (call.tool.as_str(), call.status.as_str(), call.denied))
            .collect();
        assert_eq!(
            calls,
            [
                ("read_file", "OK", false),
                ("write_file", "DENIED", true),
                ("grep", "INVALID_ARGUMENTS", false),
                ("fetch", "TOOL_ERROR", false),
            ]
        );
        assert_eq!(outcome.tool_calls[0].arguments["path"], "a.txt");
        assert_eq!(outcome.tool_calls[2].arguments, "{not json");
        assert_eq!(outcome.tool_calls[1].error, "not today");
        assert_eq!(outcome.tool_calls[3].network[0].refused, 1);
        assert_eq!(outcome.approvals.len(), 1);
        assert_eq!(outcome.approvals[0].answered.as_deref(), Some("DENY"));
        assert_eq!(outcome.approvals[0].decision.as_deref(), Some("DENY"));
        assert_eq!(outcome.approvals[0].decided_by, "run client");
    }

    #[test]
    fn every_stop_reason_has_its_suite_name() {
        for (raw, name) in (1..).zip(STOP_REASONS) {
            assert_eq!(stop_reason_key(raw), name);
        }
        assert_eq!(stop_reason_key(99), "stop_reason(99)");
        for (raw, name) in (1..).zip(TOOL_STATUSES) {
            assert_eq!(status_name(raw), name);
        }
    }
}
