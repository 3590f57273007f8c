//! The loop of one run: build the context, ask the model, validate each proposed call, pass
//! it through the permission gate (asking an approver when the policy says so), execute it,
//! fold the observation back, and decide whether to go on. Every step of that is an event in
//! the run's log, written before anyone sees it. A run always ends with a stop reason.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use airlock_proto::v1 as pb;
use pb::run_event::Event;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::checkpoint::{LoopState, PendingStep, SavedCall, SavedMessage};
use super::context;
use super::network_approval::{ApprovedHosts, NetworkApprover};
use super::observation::{self, Observation};
use super::preview;
use super::provider::{
    Message, ModelProvider, ModelRequest, ModelResponse, ProviderEvent, ToolCall, ToolDefinition,
};
use super::{LiveRun, Shared};
use crate::ids;
use crate::policy::{self, ApprovalPolicy, Gate, Outcome};
use crate::profile::NetworkPolicy;
use crate::store::{
    ApprovalResolution, Checkpoint, Effect, RunEnd, RunState, SessionRecord, StoreError,
};
use crate::tools::{CallRequest, ExecutionEvent, Tool, ToolResult, ToolStatus};
use crate::trace::{self, RunTrace, Span};
use crate::wire;

/// The limits of one run, resolved from the client's budgets and the daemon's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLimits {
    pub max_steps: u32,
    pub max_tokens: Option<u64>,
    pub wall_time: Duration,
    pub max_tool_calls: u32,
    pub max_repeated_errors: u32,
    pub context_tokens: u64,
    pub approval_timeout: Duration,
    pub max_output_tokens: u32,
    pub temperature: Option<f32>,
}

/// Why the loop stops.
enum Halt {
    Stop {
        reason: pb::StopReason,
        detail: String,
        final_text: String,
    },
    /// The log cannot be written: nothing more may happen, not even unrecorded side effects.
    Store(StoreError),
}

impl From<StoreError> for Halt {
    fn from(err: StoreError) -> Halt {
        Halt::Store(err)
    }
}

/// What a tool span records of the call's result.
/// The provider's id of `call`, or empty where `own_calls` had to give it ours.
fn provider_call_id(call: &ToolCall, call_id: &str) -> String {
    if call.id == call_id {
        String::new()
    } else {
        call.id.clone()
    }
}

fn tool_attributes(span: &mut Span, call_id: &str, tool: &str, result: &pb::ToolResult) {
    span.set("call_id", call_id);
    span.set("tool", tool);
    span.set("execution_id", &result.execution_id);
    let status = pb::ToolStatus::try_from(result.status).unwrap_or(pb::ToolStatus::Unspecified);
    span.set(
        "status",
        status.as_str_name().trim_start_matches("TOOL_STATUS_"),
    );
    span.set("duration_ms", result.duration_ms);
    if let Some(code) = result.exit_code {
        span.set("exit_code", code);
    }
    if let Some(metadata) = &result.metadata {
        span.set("peak_memory_bytes", metadata.peak_memory_bytes);
        span.set("cpu_time_us", metadata.cpu_time_us);
        span.set(
            "output_bytes",
            metadata.stdout_bytes + metadata.stderr_bytes,
        );
        span.set("profile", &metadata.profile);
        // One attribute per host contacted or refused: the connection record the trace keeps.
        for contact in &metadata.network {
            let mut record = format!(
                "{} connections, {} bytes sent, {} bytes received",
                contact.connections, contact.bytes_sent, contact.bytes_received
            );
            if contact.refused > 0 {
                record.push_str(&format!(
                    ", {} refused ({})",
                    contact.refused, contact.refusal
                ));
            }
            span.set(
                &format!("connect {}:{}", contact.host, contact.port),
                record,
            );
        }
    }
    if result.truncated {
        span.set("truncated_from_bytes", result.original_bytes);
    }
    if status != pb::ToolStatus::Ok {
        span.fail(result.error_message.clone());
    }
}

fn stop(reason: pb::StopReason, detail: impl Into<String>) -> Halt {
    Halt::Stop {
        reason,
        detail: detail.into(),
        final_text: String::new(),
    }
}

pub(super) struct RunLoop {
    pub shared: Arc<Shared>,
    pub run: Arc<LiveRun>,
    pub session: SessionRecord,
    pub provider: Arc<dyn ModelProvider>,
    pub tools: BTreeMap<String, Arc<Tool>>,
    pub policy: ApprovalPolicy,
    pub limits: RunLimits,
    pub system: String,
    pub stop_on_denial: bool,
    pub input: mpsc::UnboundedReceiver<String>,
    pub conversation: Vec<Message>,
    /// Where each conversation message came from, for the context report.
    pub sources: Vec<String>,
    pub usage: pb::Usage,
    pub steps: u32,
    pub deadline: Instant,
    /// How often each failing call (tool and arguments) has failed.
    pub failures: BTreeMap<String, u32>,
    /// The calls of the latest model response not all observed yet.
    pub pending: Option<PendingStep>,
    /// Wall time used before this daemon took the run over, and when it did.
    pub elapsed_before: Duration,
    pub resumed_at: Instant,
    /// Per-call events already in the log when the run was resumed, by kind and call id: a
    /// resumed run does not record them twice.
    pub recorded: HashSet<(CallEvent, String)>,
    pub trace: RunTrace,
    /// When the run was created, for its root span.
    pub created_at_ms: i64,
    /// The span of the step in progress.
    pub step_span: Option<Span>,
    /// Hosts outside a profile's allow-list approved in this run.
    pub approved_hosts: ApprovedHosts,
}

/// The events recorded once per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallEvent {
    Proposed,
    Rejected,
    ApprovalRequested,
    ApprovalResolved,
    Finished,
}

impl CallEvent {
    /// The kind and call id of a per-call event.
    pub fn of(event: &Event) -> Option<(CallEvent, String)> {
        match event {
            Event::ToolCallProposed(e) => Some((CallEvent::Proposed, e.call_id.clone())),
            Event::ToolCallRejected(e) => Some((CallEvent::Rejected, e.call_id.clone())),
            Event::ApprovalRequested(e) => e
                .request
                .as_ref()
                .map(|request| (CallEvent::ApprovalRequested, request.call_id.clone())),
            Event::ApprovalResolved(e) => Some((CallEvent::ApprovalResolved, e.call_id.clone())),
            Event::ToolFinished(e) => Some((CallEvent::Finished, e.call_id.clone())),
            _ => None,
        }
    }
}

impl RunLoop {
    /// Runs to the end and records how it ended.
    pub async fn drive(mut self) {
        let halt = loop {
            if let Err(halt) = self.step().await {
                break halt;
            }
        };
        let (status, detail_for_trace) = match &halt {
            Halt::Stop { reason, detail, .. } => (
                reason
                    .as_str_name()
                    .trim_start_matches("STOP_REASON_")
                    .to_owned(),
                detail.clone(),
            ),
            Halt::Store(err) => ("STORE_FAILED".to_owned(), err.to_string()),
        };
        self.end_traces(&status, &detail_for_trace);
        match halt {
            Halt::Stop {
                reason,
                detail,
                final_text,
            } => {
                if let Err(err) = self.finish(reason, detail, final_text) {
                    tracing::error!(run = %self.run.run_id, error = %err, "cannot record the end of the run");
                }
            }
            Halt::Store(err) => {
                tracing::error!(
                    run = %self.run.run_id,
                    error = %err,
                    "the run's log cannot be written; the run stops without running anything more"
                );
                self.run.log.fail(format!(
                    "the run stopped because its log cannot be written ({err}); nothing more was run, \
                     and the run will go on when the daemon restarts with a working store"
                ));
            }
        }
    }

    /// Ends the open step span and the run's root span with how the run stopped.
    fn end_traces(&mut self, stop: &str, detail: &str) {
        let failed = !matches!(stop, "FINAL");
        if let Some(mut step) = self.step_span.take() {
            // The step the run ends in never reaches the end of `step`, which numbers the others.
            step.set("index", self.steps);
            if failed {
                step.fail(format!("{stop}: {detail}"));
            }
            self.trace.end(step);
        }
        let mut root = self
            .trace
            .root(self.created_at_ms.saturating_mul(1_000_000));
        root.set("stop_reason", stop);
        root.set("steps", self.steps);
        root.set("input_tokens", self.usage.input_tokens);
        root.set("output_tokens", self.usage.output_tokens);
        root.set("model_calls", self.usage.model_calls);
        root.set("tool_calls", self.usage.tool_calls);
        if failed && !detail.is_empty() {
            root.fail(detail);
        }
        self.trace.end(root);
    }

    /// The span new spans of this step hang from.
    fn step_parent(&self) -> String {
        self.step_span.as_ref().map_or_else(
            || self.trace.root_id().to_owned(),
            |span| span.id().to_owned(),
        )
    }

    fn finish(
        &mut self,
        reason: pb::StopReason,
        detail: String,
        final_text: String,
    ) -> Result<(), StoreError> {
        let _ = self
            .shared
            .store
            .update_progress(&self.run.run_id, self.steps, &self.usage);
        self.emit(
            "",
            Event::RunFinished(pb::RunFinished {
                reason: reason as i32,
                final_text: final_text.clone(),
                usage: Some(self.usage),
                detail: detail.clone(),
                steps: self.steps,
            }),
        )?;
        self.shared.store.finish_run(
            &self.run.run_id,
            &RunEnd {
                stop_reason: reason,
                stop_detail: detail,
                final_text,
                finished_at_ms: ids::now_ms(),
            },
        )
    }

    fn emit(&self, step_id: &str, event: Event) -> Result<pb::RunEvent, StoreError> {
        self.run.log.append(step_id, event)
    }

    /// Records a per-call event unless a resumed run already has it.
    fn emit_once(&self, step_id: &str, event: Event) -> Result<(), StoreError> {
        if let Some(key) = CallEvent::of(&event)
            && self.recorded.contains(&key)
        {
            return Ok(());
        }
        self.emit(step_id, event).map(|_| ())
    }

    /// Saves the loop's state: where a restarted daemon goes on from.
    pub(super) fn checkpoint(&self) -> Result<(), StoreError> {
        let state = LoopState {
            conversation: self.conversation.iter().map(SavedMessage::from).collect(),
            sources: self.sources.clone(),
            usage: self.usage.into(),
            steps: self.steps,
            failures: self.failures.clone(),
            elapsed_ms: u64::try_from(self.elapsed().as_millis()).unwrap_or(u64::MAX),
            pending: self.pending.clone(),
        };
        self.shared.store.save_checkpoint(
            &self.run.run_id,
            &Checkpoint {
                checkpoint_id: ids::checkpoint_id(),
                seq: self.run.log.last_seq(),
                state: state.encode(),
                created_at_ms: ids::now_ms(),
            },
        )
    }

    fn elapsed(&self) -> Duration {
        self.elapsed_before + self.resumed_at.elapsed()
    }

    fn cancelled(&self) -> Halt {
        stop(pb::StopReason::Cancelled, self.run.cancel_reason())
    }

    fn wall_time_exhausted(&self) -> Halt {
        stop(
            pb::StopReason::BudgetExhausted,
            format!(
                "wall time: the run's budget of {} ms is used up",
                self.limits.wall_time.as_millis()
            ),
        )
    }

    fn check_budgets(&self) -> Result<(), Halt> {
        if self.run.cancel.is_cancelled() {
            return Err(self.cancelled());
        }
        if Instant::now() >= self.deadline {
            return Err(self.wall_time_exhausted());
        }
        if self.steps >= self.limits.max_steps {
            return Err(stop(
                pb::StopReason::MaxSteps,
                format!("the run took its {} steps", self.limits.max_steps),
            ));
        }
        self.check_tokens()
    }

    fn check_tokens(&self) -> Result<(), Halt> {
        let used = self.usage.input_tokens + self.usage.output_tokens;
        match self.limits.max_tokens {
            Some(max) if used >= max => Err(stop(
                pb::StopReason::BudgetExhausted,
                format!("tokens: {used} used of a budget of {max}"),
            )),
            _ => Ok(()),
        }
    }

    async fn step(&mut self) -> Result<(), Halt> {
        if self.step_span.is_none() {
            let mut span = self.trace.start("step", self.trace.root_id());
            if self.pending.is_some() {
                span.set("resumed", true);
            }
            self.step_span = Some(span);
        }
        if self.pending.is_none() {
            self.ask_model().await?;
        }
        self.observe_pending().await?;
        if let Some(mut span) = self.step_span.take() {
            span.set("index", self.steps);
            self.trace.end(span);
        }
        Ok(())
    }

    /// One model call: the step's context in, the model's answer out. A final answer ends the
    /// run; proposed calls become the pending step, checkpointed before any of them is touched.
    async fn ask_model(&mut self) -> Result<(), Halt> {
        self.check_budgets()?;
        self.steps += 1;
        let step_id = ids::step_id();
        self.emit(
            &step_id,
            Event::StepStarted(pb::StepStarted { index: self.steps }),
        )?;
        while let Ok(text) = self.input.try_recv() {
            self.emit(
                &step_id,
                Event::UserInput(pb::UserInputReceived { text: text.clone() }),
            )?;
            self.conversation.push(Message::User { text });
            self.sources.push(step_id.clone());
        }
        let definitions: Vec<ToolDefinition> = self
            .tools
            .values()
            .map(|tool| ToolDefinition {
                name: tool.name().to_owned(),
                description: tool.manifest.description.clone(),
                input_schema: tool.arguments.json().clone(),
            })
            .collect();
        if let Some(span) = &mut self.step_span {
            span.set("step_id", &step_id);
        }
        let mut context_span = self.trace.start("context", &self.step_parent());
        let built = context::build(
            &self.system,
            &definitions,
            &self.conversation,
            &self.sources,
            self.limits.context_tokens,
        );
        let count = |disposition: pb::ContextDisposition| {
            built
                .report
                .items
                .iter()
                .filter(|item| item.disposition == disposition as i32)
                .count()
        };
        context_span.set("tokens", built.report.tokens);
        context_span.set("budget", built.report.budget);
        context_span.set("summarised", count(pb::ContextDisposition::Summarised));
        context_span.set("dropped", count(pb::ContextDisposition::Dropped));
        self.trace.end(context_span);
        self.emit(&step_id, Event::ContextBuilt(built.report))?;
        let request = ModelRequest {
            system: self.system.clone(),
            messages: built.messages,
            tools: definitions,
            max_output_tokens: self.limits.max_output_tokens,
            temperature: self.limits.temperature,
        };
        let mut model_span = self.trace.start("model", &self.step_parent());
        model_span.set("model", self.provider.describe());
        let response = match self.call_model(&step_id, &request).await {
            Ok(response) => response,
            Err(halt) => {
                if let Halt::Stop { detail, .. } = &halt {
                    model_span.fail(detail.clone());
                }
                self.trace.end(model_span);
                return Err(halt);
            }
        };
        model_span.set("input_tokens", response.usage.input_tokens);
        model_span.set("output_tokens", response.usage.output_tokens);
        model_span.set("tool_calls", response.tool_calls.len());
        model_span.set("finish", format!("{:?}", response.finish));
        self.trace.end(model_span);
        self.usage.model_calls += 1;
        self.usage.input_tokens += response.usage.input_tokens;
        self.usage.output_tokens += response.usage.output_tokens;
        self.shared
            .store
            .update_progress(&self.run.run_id, self.steps, &self.usage)?;
        let text = response.text.clone().unwrap_or_default();
        if !text.is_empty() {
            self.emit(
                &step_id,
                Event::ModelText(pb::ModelText { text: text.clone() }),
            )?;
        }
        if response.tool_calls.is_empty() {
            return Err(Halt::Stop {
                reason: pb::StopReason::Final,
                detail: String::new(),
                final_text: text,
            });
        }
        self.check_tokens()?;
        let calls = self.own_calls(response);
        self.conversation.push(Message::Assistant {
            text: (!text.is_empty()).then_some(text),
            tool_calls: calls.iter().map(|(call, _)| call.clone()).collect(),
        });
        self.sources.push(step_id.clone());
        self.pending = Some(PendingStep {
            step_id,
            calls: calls
                .iter()
                .map(|(call, call_id)| (SavedCall::from(call), call_id.clone()))
                .collect(),
            next: 0,
        });
        self.checkpoint()?;
        Ok(())
    }

    /// Takes each pending call to its observation, checkpointing after each.
    async fn observe_pending(&mut self) -> Result<(), Halt> {
        while let Some(pending) = self.pending.clone() {
            let Some((call, call_id)) = pending.calls.get(pending.next).cloned() else {
                self.pending = None;
                break;
            };
            let call = ToolCall::from(call);
            let observation = self.handle_call(&pending.step_id, &call_id, &call).await?;
            self.conversation.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: observation.content,
                is_error: observation.is_error,
            });
            self.sources.push(call_id);
            let mut next = pending;
            next.next += 1;
            self.pending = (next.next < next.calls.len()).then_some(next);
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Gives each proposed call an id of ours. The model's ids are kept for the conversation,
    /// except empty or repeated ones, which would make observations ambiguous.
    fn own_calls(&self, response: ModelResponse) -> Vec<(ToolCall, String)> {
        let mut seen = std::collections::HashSet::new();
        response
            .tool_calls
            .into_iter()
            .map(|mut call| {
                let call_id = ids::call_id();
                if call.id.is_empty() || !seen.insert(call.id.clone()) {
                    call.id = call_id.clone();
                }
                (call, call_id)
            })
            .collect()
    }

    async fn call_model(
        &self,
        step_id: &str,
        request: &ModelRequest,
    ) -> Result<ModelResponse, Halt> {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let events = move |event: ProviderEvent| {
            let _ = sender.send(event);
        };
        let call = self.provider.complete(request, &events);
        tokio::pin!(call);
        let outcome = loop {
            tokio::select! {
                result = &mut call => break result,
                Some(event) = receiver.recv() => self.provider_event(step_id, event)?,
                () = self.run.cancel.cancelled() => return Err(self.cancelled()),
                () = tokio::time::sleep_until(self.deadline) => return Err(self.wall_time_exhausted()),
            }
        };
        while let Ok(event) = receiver.try_recv() {
            self.provider_event(step_id, event)?;
        }
        outcome.map_err(|err| stop(pb::StopReason::ModelError, err.to_string()))
    }

    fn provider_event(&self, step_id: &str, event: ProviderEvent) -> Result<(), StoreError> {
        match event {
            ProviderEvent::Retrying {
                attempt,
                error,
                delay,
            } => {
                self.emit(
                    step_id,
                    Event::ModelRetry(pb::ModelRetry {
                        attempt,
                        error,
                        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    }),
                )?;
            }
            // The step's text is recorded whole once the model is done.
            ProviderEvent::TextDelta(_) => {}
        }
        Ok(())
    }

    /// Takes one proposed call from proposal to observation.
    async fn handle_call(
        &mut self,
        step_id: &str,
        call_id: &str,
        call: &ToolCall,
    ) -> Result<Observation, Halt> {
        let provider_call_id = provider_call_id(call, call_id);
        self.emit_once(
            step_id,
            Event::ToolCallProposed(pb::ToolCallProposed {
                call_id: call_id.to_owned(),
                tool: call.name.clone(),
                arguments_json: call.arguments.clone(),
                provider_call_id: provider_call_id.clone(),
            }),
        )?;
        let failure_key = format!("{}\u{0}{}", call.name, call.arguments);
        let mut validate = self.trace.start("validate", &self.step_parent());
        validate.set("call_id", call_id);
        validate.set("provider_call_id", &provider_call_id);
        validate.set("tool", &call.name);
        let checked = match self.tools.get(&call.name).cloned() {
            None => Err(format!(
                "there is no tool `{}` in this run; the tools are: {}",
                call.name,
                self.tools.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
            Some(tool) => match tool.arguments.validate(&call.arguments) {
                Ok(arguments) => Ok((tool, arguments)),
                Err(err) => Err(err.to_string()),
            },
        };
        let (tool, arguments) = match checked {
            Ok(checked) => checked,
            Err(reason) => {
                validate.fail(reason.clone());
                self.trace.end(validate);
                return self.reject(step_id, call_id, call, &failure_key, &reason);
            }
        };
        let canonical = arguments.to_string();
        validate.set("arguments_sha256", trace::arguments_digest(&canonical));
        self.trace.end(validate);
        let failure_key = format!("{}\u{0}{canonical}", call.name);

        let result = match self.shared.store.effect(&self.run.run_id, call_id)? {
            // The daemon stopped after this call was let through: never ask or run it anew.
            Some(effect) => {
                self.resume_effect(step_id, call_id, &tool, &canonical, effect)
                    .await?
            }
            None => {
                if self.usage.tool_calls >= self.limits.max_tool_calls {
                    return Err(stop(
                        pb::StopReason::BudgetExhausted,
                        format!(
                            "tool calls: the run's {} are used up",
                            self.limits.max_tool_calls
                        ),
                    ));
                }
                let mut permission = self.trace.start("permission", &self.step_parent());
                permission.set("call_id", call_id);
                permission.set("tool", tool.name());
                permission.set("risk", tool.manifest.risk.as_str());
                permission.set("policy", self.policy.as_str());
                let refusal = match policy::gate(self.policy, tool.manifest.risk) {
                    Gate::Allow => {
                        permission.set("decision", "allow");
                        None
                    }
                    Gate::Deny(reason) => {
                        permission.set("decision", "deny");
                        self.emit_once(
                            step_id,
                            Event::ApprovalResolved(pb::ApprovalResolved {
                                approval_id: String::new(),
                                call_id: call_id.to_owned(),
                                decision: pb::Decision::Deny as i32,
                                reason: reason.clone(),
                                decided_by: "policy".into(),
                            }),
                        )?;
                        Some(reason)
                    }
                    Gate::Ask(why) => {
                        permission.set("decision", "ask");
                        let refusal = self.ask(step_id, call_id, &tool, &arguments, &why).await;
                        let refusal = match refusal {
                            Ok(refusal) => refusal,
                            Err(halt) => {
                                permission.fail("the run stopped while waiting for an approval");
                                self.trace.end(permission);
                                return Err(halt);
                            }
                        };
                        permission.set("approved", refusal.is_none());
                        refusal
                    }
                };
                if let Some(reason) = &refusal {
                    permission.set("refusal", reason);
                }
                self.trace.end(permission);
                if let Some(reason) = refusal {
                    return self.denied(&failure_key, &reason);
                }
                let mut tool_span = self.trace.start("tool", &self.step_parent());
                let executed = self
                    .execute(step_id, call_id, &tool, &canonical, true)
                    .await;
                tool_span.set("provider_call_id", &provider_call_id);
                match &executed {
                    Ok(result) => tool_attributes(&mut tool_span, call_id, tool.name(), result),
                    Err(_) => tool_span.fail("the run stopped during the call"),
                }
                self.trace.end(tool_span);
                executed?
            }
        };
        self.usage.tool_calls += 1;
        self.emit_once(
            step_id,
            Event::ToolFinished(pb::ToolFinished {
                call_id: call_id.to_owned(),
                tool: tool.name().to_owned(),
                result: Some(result.clone()),
                provider_call_id,
            }),
        )?;
        let status = pb::ToolStatus::try_from(result.status).unwrap_or(pb::ToolStatus::Unspecified);
        match status {
            pb::ToolStatus::Cancelled if self.run.cancel.is_cancelled() => {
                return Err(self.cancelled());
            }
            pb::ToolStatus::Cancelled if Instant::now() >= self.deadline => {
                return Err(self.wall_time_exhausted());
            }
            _ => {}
        }
        let observation = observation::of_result(&result);
        if status != pb::ToolStatus::Ok {
            self.count_failure(&failure_key, &call.name, &result.error_message)?;
        }
        Ok(observation)
    }

    /// A call whose intent was recorded before the daemon stopped: its recorded result, or —
    /// when it was still running — a new run if the tool is idempotent, OUTCOME_UNKNOWN if not.
    async fn resume_effect(
        &self,
        step_id: &str,
        call_id: &str,
        tool: &Arc<Tool>,
        canonical: &str,
        effect: Effect,
    ) -> Result<pb::ToolResult, Halt> {
        if let Some(result) = effect.result {
            return Ok(result);
        }
        if tool.manifest.idempotent {
            return self.execute(step_id, call_id, tool, canonical, false).await;
        }
        let mut result = wire::tool_result(ToolResult::refused(
            ToolStatus::OutcomeUnknown,
            "the daemon stopped while this call was running: it may or may not have taken effect, \
             and it was not run again because the tool is not idempotent; check its effect before \
             calling it again",
        ));
        if let Some(metadata) = &mut result.metadata {
            metadata.engine = tool.manifest.engine.as_str().to_owned();
        }
        self.shared
            .store
            .record_effect_result(&self.run.run_id, call_id, &result)?;
        Ok(result)
    }

    fn reject(
        &mut self,
        step_id: &str,
        call_id: &str,
        call: &ToolCall,
        failure_key: &str,
        reason: &str,
    ) -> Result<Observation, Halt> {
        self.emit_once(
            step_id,
            Event::ToolCallRejected(pb::ToolCallRejected {
                call_id: call_id.to_owned(),
                tool: call.name.clone(),
                reason: reason.to_owned(),
                provider_call_id: provider_call_id(call, call_id),
            }),
        )?;
        self.count_failure(failure_key, &call.name, reason)?;
        Ok(observation::refused(ToolStatus::InvalidArguments, reason))
    }

    fn denied(&mut self, failure_key: &str, reason: &str) -> Result<Observation, Halt> {
        if self.stop_on_denial {
            return Err(stop(pb::StopReason::PermissionDenied, reason.to_owned()));
        }
        self.count_failure(failure_key, "", reason)?;
        Ok(observation::refused(ToolStatus::Denied, reason))
    }

    /// Counts a failure of this exact call; the same call failing too often ends the run.
    fn count_failure(&mut self, key: &str, tool: &str, error: &str) -> Result<(), Halt> {
        let count = self.failures.entry(key.to_owned()).or_insert(0);
        *count += 1;
        if *count >= self.limits.max_repeated_errors {
            let what = if tool.is_empty() {
                "the same call".to_owned()
            } else {
                format!("`{tool}` with the same arguments")
            };
            return Err(stop(
                pb::StopReason::RepeatedErrors,
                format!("{what} failed {count} times; last: {error}"),
            ));
        }
        Ok(())
    }

    /// Asks an approver about a call; `None` when it may run, the reason when it may not.
    /// A run resumed while waiting waits again for the same request, with its deadline.
    async fn ask(
        &mut self,
        step_id: &str,
        call_id: &str,
        tool: &Arc<Tool>,
        arguments: &Value,
        why: &str,
    ) -> Result<Option<String>, Halt> {
        let profile = tool.profile.name.clone();
        let grant_key = policy::session_grant_key(
            &self.session.session_id,
            tool.name(),
            tool.digest(),
            arguments,
            &profile,
        );
        let request = match self
            .shared
            .store
            .approval_for_call(&self.run.run_id, call_id)?
        {
            Some((request, Some(resolution))) => {
                return Ok(self.resolved(step_id, call_id, &request.approval_id, &resolution)?);
            }
            Some((request, None)) => request,
            None => {
                if self.shared.approvals.has_session_grant(&grant_key) {
                    self.emit_once(
                        step_id,
                        Event::ApprovalResolved(pb::ApprovalResolved {
                            approval_id: String::new(),
                            call_id: call_id.to_owned(),
                            decision: pb::Decision::ApproveSession as i32,
                            reason: "approved earlier for this session".into(),
                            decided_by: "session grant".into(),
                        }),
                    )?;
                    return Ok(None);
                }
                let preview = tokio::select! {
                    preview = preview::preview(
                        &self.shared.executor,
                        tool,
                        arguments,
                        &self.session.workspace,
                        self.run.cancel.child_token(),
                    ) => preview,
                    () = self.run.cancel.cancelled() => return Err(self.cancelled()),
                };
                let digest = policy::binding_digest(&policy::Binding {
                    run_id: &self.run.run_id,
                    step_id,
                    call_id,
                    tool: tool.name(),
                    tool_digest: tool.digest(),
                    arguments,
                    profile: &profile,
                    policy: self.policy.as_str(),
                });
                let timeout_ms =
                    i64::try_from(self.limits.approval_timeout.as_millis()).unwrap_or(i64::MAX);
                let request = pb::ApprovalRequest {
                    approval_id: ids::approval_id(),
                    run_id: self.run.run_id.clone(),
                    session_id: self.session.session_id.clone(),
                    step_id: step_id.to_owned(),
                    call_id: call_id.to_owned(),
                    tool: tool.name().to_owned(),
                    arguments_json: arguments.to_string(),
                    risk: wire::risk(tool.manifest.risk) as i32,
                    profile,
                    preview: Some(preview),
                    deadline_ms: ids::now_ms().saturating_add(timeout_ms),
                    digest,
                    reason: why.to_owned(),
                    state: pb::ApprovalState::Pending as i32,
                    detail: String::new(),
                    network: None,
                };
                self.shared.store.save_approval(&request)?;
                request
            }
        };
        self.emit_once(
            step_id,
            Event::ApprovalRequested(pb::ApprovalRequested {
                request: Some(request.clone()),
            }),
        )?;
        self.shared
            .store
            .set_run_state(&self.run.run_id, RunState::WaitingForApproval)?;
        let approval_id = request.approval_id.clone();
        let outcome = tokio::select! {
            outcome = self.shared.approvals.ask(request, grant_key.clone()) => outcome,
            () = self.run.cancel.cancelled() => return Err(self.cancelled()),
            () = tokio::time::sleep_until(self.deadline) => return Err(self.wall_time_exhausted()),
        };
        self.shared
            .store
            .set_run_state(&self.run.run_id, RunState::Running)?;
        let resolution = match outcome {
            Outcome::Answered(answer) => {
                if answer.decision == pb::Decision::ApproveSession {
                    self.shared
                        .store
                        .add_session_grant(&self.session.session_id, &grant_key)?;
                }
                ApprovalResolution {
                    decision: answer.decision,
                    reason: answer.reason,
                    decided_by: answer.decided_by,
                    resolved_at_ms: ids::now_ms(),
                }
            }
            Outcome::Expired => ApprovalResolution {
                decision: pb::Decision::Deny,
                reason: "no answer by the deadline".into(),
                decided_by: "deadline".into(),
                resolved_at_ms: ids::now_ms(),
            },
        };
        self.shared
            .store
            .resolve_approval(&approval_id, &resolution)?;
        Ok(self.resolved(step_id, call_id, &approval_id, &resolution)?)
    }

    /// Records an approval's answer; `None` when the call may run, the refusal when not.
    fn resolved(
        &self,
        step_id: &str,
        call_id: &str,
        approval_id: &str,
        resolution: &ApprovalResolution,
    ) -> Result<Option<String>, StoreError> {
        self.emit_once(
            step_id,
            Event::ApprovalResolved(pb::ApprovalResolved {
                approval_id: approval_id.to_owned(),
                call_id: call_id.to_owned(),
                decision: resolution.decision as i32,
                reason: resolution.reason.clone(),
                decided_by: resolution.decided_by.clone(),
            }),
        )?;
        Ok(match resolution.decision {
            pb::Decision::ApproveOnce | pb::Decision::ApproveSession => None,
            pb::Decision::Deny | pb::Decision::Unspecified
                if resolution.decided_by == "deadline" =>
            {
                Some("nobody approved this call before its deadline, so it did not run".to_owned())
            }
            pb::Decision::Deny | pb::Decision::Unspecified if resolution.reason.is_empty() => {
                Some(format!("the {} denied this call", resolution.decided_by))
            }
            pb::Decision::Deny | pb::Decision::Unspecified => Some(format!(
                "the {} denied this call: {}",
                resolution.decided_by, resolution.reason
            )),
        })
    }

    /// Runs the call, recording its start and output as they happen. The intent is written
    /// to the effect journal before anything runs (`record_intent` false only when re-running
    /// an idempotent call whose intent is already there), and the result after.
    async fn execute(
        &self,
        step_id: &str,
        call_id: &str,
        tool: &Arc<Tool>,
        canonical: &str,
        record_intent: bool,
    ) -> Result<pb::ToolResult, Halt> {
        if record_intent {
            self.shared.store.record_intent(&Effect {
                run_id: self.run.run_id.clone(),
                call_id: call_id.to_owned(),
                tool: tool.name().to_owned(),
                arguments: canonical.to_owned(),
                idempotent: tool.manifest.idempotent,
                intent_at_ms: ids::now_ms(),
                result: None,
            })?;
        }
        let result = match self.shared.executor.prepare(CallRequest {
            tool: tool.name().to_owned(),
            arguments_json: canonical.to_owned(),
            workspace: self.session.workspace.clone(),
            timeout: None,
            read_only: false,
        }) {
            Ok(call) => {
                // Only a profile that asks about unlisted hosts needs an approver: other calls
                // (nearly all) make none.
                let asks = matches!(
                    tool.profile.network,
                    NetworkPolicy::AllowList {
                        ask_for_unlisted: true,
                        ..
                    }
                );
                let call = if !asks {
                    call
                } else {
                    call.with_egress_approver(Arc::new(NetworkApprover {
                        approvals: self.shared.approvals.clone(),
                        log: self.run.log.clone(),
                        approved: self.approved_hosts.clone(),
                        session_id: self.session.session_id.clone(),
                        step_id: step_id.to_owned(),
                        call_id: call_id.to_owned(),
                        tool: tool.clone(),
                        arguments: canonical.to_owned(),
                        policy: self.policy,
                        timeout: self.limits.approval_timeout,
                    }))
                };
                let (sender, mut receiver) = mpsc::unbounded_channel();
                let cancel = self.run.cancel.child_token();
                let run = self.shared.executor.run(call, sender, cancel.clone());
                tokio::pin!(run);
                let mut deadline_passed = false;
                let result = loop {
                    tokio::select! {
                        biased;
                        Some(event) = receiver.recv() => self.forward(step_id, call_id, tool, event)?,
                        result = &mut run => break result,
                        () = tokio::time::sleep_until(self.deadline), if !deadline_passed => {
                            deadline_passed = true;
                            cancel.cancel();
                        }
                    }
                };
                while let Ok(event) = receiver.try_recv() {
                    self.forward(step_id, call_id, tool, event)?;
                }
                result
            }
            Err(err) => ToolResult::refused(
                ToolStatus::SandboxError,
                format!("the tool cannot run in this session: {err}"),
            ),
        };
        let result = wire::tool_result(result);
        self.shared
            .store
            .record_effect_result(&self.run.run_id, call_id, &result)?;
        Ok(result)
    }

    fn forward(
        &self,
        step_id: &str,
        call_id: &str,
        tool: &Tool,
        event: ExecutionEvent,
    ) -> Result<(), StoreError> {
        match event {
            ExecutionEvent::Started { execution_id, .. } => {
                // Its kept output and its cancel belong to the run's tenant alone.
                self.shared
                    .store
                    .record_execution_owner(&execution_id, &self.run.tenant)?;
                self.emit(
                    step_id,
                    Event::ToolStarted(pb::ToolStarted {
                        call_id: call_id.to_owned(),
                        tool: tool.name().to_owned(),
                        execution_id,
                    }),
                )?;
            }
            ExecutionEvent::Output(chunk) => {
                let output = wire::output(chunk);
                self.emit(
                    step_id,
                    Event::ToolOutput(pb::ToolCallOutput {
                        call_id: call_id.to_owned(),
                        stream: output.stream,
                        data: output.data,
                    }),
                )?;
            }
            // The result is recorded from the executor's return value.
            ExecutionEvent::Finished(_) => {}
        }
        Ok(())
    }
}
