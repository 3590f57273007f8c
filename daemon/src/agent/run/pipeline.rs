//! Steps 4 to 7 for one proposed call: validate → gate → approve → execute → observe. Each
//! stage is a method of its own; a call leaves the pipeline as an observation for the model —
//! always structured, for a result and a refusal alike — or as a halt of the whole run.
//!
//! The effect journal makes a call run at most once: its intent is committed before it runs
//! (with every event before it), its result after. A resumed run that finds an intent
//! without a result runs the call again only if the tool is idempotent; otherwise the model
//! is told the outcome is unknown.

use std::sync::Arc;

use airlock_proto::v1 as pb;
use pb::run_event::Event;
use serde_json::Value;
use tokio::sync::mpsc;

use super::super::judge::{self, Judging};
use super::super::observation::{self, Observation};
use super::super::preview;
use super::super::provider::ToolCall;
use super::approvals::{Answered, Approvals, Question, Subject};
use super::budget::{FailureKey, FailureKind, Halt, stop};
use super::recorder::CallEvent;
use super::run_loop::RunLoop;
use crate::audit::Act;
use crate::changes;
use crate::domain::ExecutionOwner;
use crate::domain::{DecidedBy, Decision as DecidedDecision, StopReason};
use crate::ids::{self, CallId, RunId, StepId};
use crate::policy::rules::{self, By, Decision, Layer};
use crate::profile::NetworkPolicy;
use crate::store::{ApprovalResolution, Effect, Store};
use crate::tools::{CallRequest, ChangeJournal, ExecutionEvent, Tool, ToolResult, ToolStatus};
use crate::trace::{self, Span};
use crate::wire;

/// One proposed call, as it goes through the pipeline.
pub struct Proposed<'a> {
    pub step_id: &'a StepId,
    pub call_id: &'a CallId,
    pub call: &'a ToolCall,
    /// The model provider's own id for the call; empty where it gave none.
    pub provider_call_id: String,
}

/// A call that passed validation.
struct Valid {
    tool: Arc<Tool>,
    arguments: Value,
    canonical: String,
}

impl RunLoop {
    /// Takes one proposed call from proposal to observation.
    pub(super) async fn handle_call(
        &mut self,
        proposed: Proposed<'_>,
    ) -> Result<Observation, Halt> {
        self.recorder.emit_once(
            Some(proposed.step_id),
            Event::ToolCallProposed(pb::ToolCallProposed {
                call_id: proposed.call_id.to_string(),
                tool: proposed.call.name.clone(),
                arguments_json: proposed.call.arguments.clone(),
                provider_call_id: proposed.provider_call_id.clone(),
            }),
        );
        let valid = match self.validate(&proposed) {
            Ok(valid) => valid,
            Err(reason) => return self.reject(&proposed, &reason),
        };
        let key = FailureKey {
            tool: proposed.call.name.clone(),
            arguments: valid.canonical.clone(),
        };
        // Only a call a resumed run had proposed before its restart can have an effect on
        // record (its intent is committed after its proposal): a new call costs no read.
        let stored = if self
            .recorder
            .recorded_before(CallEvent::Proposed, proposed.call_id)
        {
            self.shared
                .store
                .effect(self.recorder.log().run_id(), proposed.call_id)
                .await?
        } else {
            None
        };
        let result = match stored {
            // The daemon stopped after this call was let through: never ask or run it anew.
            Some(effect) => self.resume_effect(&proposed, &valid, effect).await?,
            None => {
                self.budget.check_tool_calls()?;
                if let Some(refusal) = self.gate(&proposed, &valid).await? {
                    if self.stop_on_denial {
                        return Err(stop(StopReason::PermissionDenied, refusal));
                    }
                    self.budget
                        .count_failure(key, FailureKind::Denied, &refusal)?;
                    return Ok(observation::refused(ToolStatus::Denied, &refusal));
                }
                self.execute(&proposed, &valid, true).await?
            }
        };
        self.observe(&proposed, &valid, key, result)
    }

    /// Step 4: the tool exists in this run and the arguments match its schema. The reason
    /// goes back to the model, which may try again.
    fn validate(&self, proposed: &Proposed<'_>) -> Result<Valid, String> {
        let mut span = self.recorder.span("validate", &self.step_parent());
        span.set("call_id", proposed.call_id);
        span.set("provider_call_id", &proposed.provider_call_id);
        span.set("tool", &proposed.call.name);
        let checked = match self.tools.get(&proposed.call.name).cloned() {
            None => Err(format!(
                "there is no tool `{}` in this run; the tools are: {}",
                proposed.call.name,
                self.tools.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
            Some(tool) => match tool.arguments.validate(&proposed.call.arguments) {
                Ok(arguments) => Ok(Valid {
                    canonical: arguments.to_string(),
                    tool,
                    arguments,
                }),
                Err(err) => Err(err.to_string()),
            },
        };
        match &checked {
            Ok(valid) => span.set(
                "arguments_sha256",
                trace::arguments_digest(&valid.canonical),
            ),
            Err(reason) => span.fail(reason.clone()),
        }
        checked
    }

    fn reject(&mut self, proposed: &Proposed<'_>, reason: &str) -> Result<Observation, Halt> {
        self.recorder.emit_once(
            Some(proposed.step_id),
            Event::ToolCallRejected(pb::ToolCallRejected {
                call_id: proposed.call_id.to_string(),
                tool: proposed.call.name.clone(),
                reason: reason.to_owned(),
                provider_call_id: proposed.provider_call_id.clone(),
            }),
        );
        let key = FailureKey {
            tool: proposed.call.name.clone(),
            arguments: proposed.call.arguments.clone(),
        };
        self.budget
            .count_failure(key, FailureKind::Failed, reason)?;
        Ok(observation::refused(ToolStatus::InvalidArguments, reason))
    }

    /// Steps 5 and 5½: the rules (operator's, session's, run's, and the session's grants)
    /// decide over the session's level, asking an approver when they say to. `None` when the
    /// call may run, the refusal when not. The permission span names the rule that decided.
    async fn gate(
        &mut self,
        proposed: &Proposed<'_>,
        valid: &Valid,
    ) -> Result<Option<String>, Halt> {
        let mut span = self.recorder.span("permission", &self.step_parent());
        span.set("call_id", proposed.call_id);
        span.set("tool", valid.tool.name());
        span.set("risk", valid.tool.manifest.risk.as_str());
        span.set("policy", self.policy.as_str());
        let verdict = judge::decide(&self.shared.store, &self.rules, &self.judging(valid)).await?;
        span.set("decision", verdict.decision.as_str());
        span.set("policy.reason", &verdict.reason);
        if let Some(rule) = verdict.rule() {
            span.set("policy.rule", &rule.name);
            span.set("policy.rule.layer", rule.origin.layer.as_str());
            span.set("policy.rule.source", &rule.origin.source);
            span.set("policy.rule.line", rule.origin.line);
            self.shared.executor.auditor().record(
                Act::new(&self.run.tenant, "policy.matched")
                    .actor("policy")
                    .subject(valid.tool.name())
                    .reason(&verdict.reason)
                    .detail("rule", rule.name.as_str())
                    .detail("layer", rule.origin.layer.as_str())
                    .detail("source", rule.origin.source.as_str())
                    .detail("line", rule.origin.line)
                    .detail("decision", verdict.decision.as_str())
                    .detail("run_id", self.recorder.log().run_id().as_str())
                    .detail("call_id", proposed.call_id.as_str()),
            );
        }
        let refusal = match verdict.decision {
            Decision::Allow => {
                if let Some(grant) = granted_by(&verdict) {
                    // Recorded as before grants were rules: the question a grant answered.
                    let answered = Answered {
                        approval_id: None,
                        resolution: ApprovalResolution {
                            decision: DecidedDecision::ApproveSession,
                            reason: format!("approved earlier for this session ({grant})"),
                            decided_by: DecidedBy::SessionGrant,
                            resolved_at_ms: ids::now_ms(),
                        },
                    };
                    let question = self.question(proposed, valid, String::new(), None, None);
                    self.recorder.emit_once(
                        Some(proposed.step_id),
                        self.approvals.resolved(&question, &answered),
                    );
                }
                None
            }
            Decision::Deny => {
                let reason = verdict.reason.clone();
                let answered = Answered {
                    approval_id: None,
                    resolution: ApprovalResolution {
                        decision: DecidedDecision::Deny,
                        reason: reason.clone(),
                        decided_by: DecidedBy::Policy,
                        resolved_at_ms: ids::now_ms(),
                    },
                };
                let question = self.question(proposed, valid, String::new(), None, None);
                self.recorder.emit_once(
                    Some(proposed.step_id),
                    self.approvals.resolved(&question, &answered),
                );
                Some(reason)
            }
            Decision::Ask => match self.approve(proposed, valid, &verdict, &mut span).await {
                Ok(refusal) => {
                    span.set("approved", refusal.is_none());
                    refusal
                }
                Err(halt) => {
                    span.fail("the run stopped while waiting for an approval");
                    return Err(halt);
                }
            },
        };
        if let Some(reason) = &refusal {
            span.set("refusal", reason);
            crate::metrics::global().tool_call(
                valid.tool.name(),
                valid.tool.manifest.engine().as_str(),
                Some(&self.run.tenant),
                crate::tools::ToolStatus::Denied.as_str(),
                std::time::Duration::ZERO,
            );
        }
        Ok(refusal)
    }

    /// What the policy needs of a call of this run.
    fn judging<'a>(&'a self, valid: &'a Valid) -> Judging<'a> {
        Judging {
            tool: &valid.tool,
            arguments: &valid.arguments,
            session_id: Some(&self.session.session_id),
            workspace: self.session.workspace.as_deref(),
            level: self.policy,
        }
    }

    fn question<'a>(
        &self,
        proposed: &Proposed<'a>,
        valid: &'a Valid,
        why: String,
        preview: Option<pb::Preview>,
        verdict: Option<&rules::Verdict>,
    ) -> Question<'a> {
        Question {
            subject: Subject::Call,
            step_id: proposed.step_id,
            call_id: proposed.call_id,
            tool: &valid.tool,
            arguments: &valid.arguments,
            why,
            preview: preview.unwrap_or_default(),
            grant_key: judge::grant_key(&self.judging(valid)),
            policy: verdict.map(wire::policy_verdict),
        }
    }

    /// Puts the call to the approvers: the answer already recorded for it (a resumed run),
    /// or a new question with a preview of what the call would do and the policy's reasons.
    async fn approve(
        &mut self,
        proposed: &Proposed<'_>,
        valid: &Valid,
        verdict: &rules::Verdict,
        span: &mut Span,
    ) -> Result<Option<String>, Halt> {
        let why = verdict.reason.clone();
        let run_id = self.recorder.log().run_id().clone();
        let asked_before = self
            .shared
            .store
            .approval_for_call(&run_id, proposed.call_id)
            .await?;
        let answered = match asked_before {
            // Asked before a restart: the question and its answer are recorded once.
            Some((request, Some(resolution))) => {
                let question = self.question(proposed, valid, why, None, Some(verdict));
                self.recorder
                    .emit_once(Some(proposed.step_id), Approvals::requested(&request));
                let answered = Answered {
                    approval_id: Some(ids::ApprovalId::from_stored(request.approval_id)),
                    resolution,
                };
                self.recorder.emit_once(
                    Some(proposed.step_id),
                    self.approvals.resolved(&question, &answered),
                );
                answered
            }
            Some((request, None)) => {
                let question = self.question(proposed, valid, why, None, Some(verdict));
                self.recorder
                    .emit_once(Some(proposed.step_id), Approvals::requested(&request));
                self.budget
                    .guard(self.approvals.wait_again(&question, request))
                    .await??
            }
            None => {
                let preview = self
                    .budget
                    .guard(preview::preview(
                        &self.shared.executor,
                        &valid.tool,
                        &valid.arguments,
                        self.session.workspace.as_deref(),
                        self.run.cancel.token().child_token(),
                    ))
                    .await?;
                let question = self.question(proposed, valid, why, Some(preview), Some(verdict));
                self.budget.guard(self.approvals.ask(&question)).await??
            }
        };
        if let Some(id) = &answered.approval_id {
            span.set("approval_id", id);
        }
        Ok(answered.refusal())
    }

    /// A call whose intent was recorded before the daemon stopped: its recorded result, or —
    /// when it was still running — a new run if the tool is idempotent, OUTCOME_UNKNOWN if not.
    async fn resume_effect(
        &mut self,
        proposed: &Proposed<'_>,
        valid: &Valid,
        effect: Effect,
    ) -> Result<ToolResult, Halt> {
        if let Some(result) = effect.result {
            return Ok(wire::tool_result_from(&result));
        }
        if valid.tool.manifest.idempotent {
            return self.execute(proposed, valid, false).await;
        }
        let mut result = ToolResult::refused(
            ToolStatus::OutcomeUnknown,
            "the daemon stopped while this call was running: it may or may not have taken effect, \
             and it was not run again because the tool is not idempotent; check its effect before \
             calling it again",
        );
        result.metadata.engine = Some(valid.tool.manifest.engine());
        // Stopped while its change set was being applied: which paths landed is read off the
        // workspace, against the journaled set.
        if let (Some(pending), Some(workspace)) =
            (effect.pending_changes, self.session.workspace.clone())
        {
            let mut set = wire::change_set_from(&pending);
            let reconciled = tokio::task::spawn_blocking(move || {
                changes::reconcile(std::path::Path::new(&workspace), &mut set).map(|()| set)
            })
            .await;
            match reconciled {
                Ok(Ok(set)) => {
                    // The journal holds the whole set, which path by path now: what ListChanges
                    // and a revert read when the event holds only the first changes.
                    if let Err(err) = self
                        .shared
                        .store
                        .record_pending_changes(
                            self.recorder.log().run_id(),
                            proposed.call_id,
                            &wire::change_set(&set),
                        )
                        .await
                    {
                        tracing::warn!(error = %err, "cannot journal which of a call's changes landed");
                    }
                    result.changes = Some(Box::new(set));
                }
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "cannot check which of a call's changes landed")
                }
                Err(err) => tracing::warn!(error = %err, "checking a call's changes panicked"),
            }
        }
        drop(self.shared.store.record_effect_result(
            self.recorder.log().run_id(),
            proposed.call_id,
            &wire::tool_result(result.clone()),
        ));
        Ok(result)
    }

    /// Step 6: runs the call, recording its start and output as they happen. The intent of a
    /// call that must not run twice is committed (with every event before it) before anything
    /// runs — `record_intent` false only when re-running an idempotent call whose intent is
    /// there — and the result after.
    async fn execute(
        &mut self,
        proposed: &Proposed<'_>,
        valid: &Valid,
        record_intent: bool,
    ) -> Result<ToolResult, Halt> {
        let run_id = self.recorder.log().run_id().clone();
        if record_intent {
            let intent = self.shared.store.record_intent(&Effect {
                run_id: run_id.clone(),
                call_id: proposed.call_id.clone(),
                tool: valid.tool.name().to_owned(),
                arguments: valid.canonical.clone(),
                idempotent: valid.tool.manifest.idempotent,
                intent_at_ms: ids::now_ms(),
                timeout_ms: Some(
                    u64::try_from(valid.tool.timeout().as_millis()).unwrap_or(u64::MAX),
                ),
                result: None,
                pending_changes: None,
            });
            if valid.tool.manifest.idempotent {
                // Running an idempotent call twice is harmless, so it need not wait for its
                // intent: were the daemon to stop before the commit, the resumed run would find
                // no intent and run the call again, as it may. The intent is still written
                // before the call's events, so a recorded result always has its intent; a
                // failed write shows at the next commit the loop waits for.
                drop(intent);
            } else {
                self.recorder.committed().await?;
                intent.await?;
            }
        }
        let mut span = self.recorder.span("tool", &self.step_parent());
        span.set("provider_call_id", &proposed.provider_call_id);
        let request = CallRequest {
            tool: valid.tool.name().to_owned(),
            arguments_json: valid.canonical.clone(),
            workspace: self.session.workspace.clone(),
            timeout: None,
            read_only: false,
            tenant: Some(self.run.tenant.clone()),
            in_run: true,
            ignores: self.ignores.clone(),
        };
        let result = match self.shared.executor.prepare(request) {
            // The run judged (and a person may have approved) the tool it was started with;
            // a reload since then that changed the tool of that name makes this another
            // tool, which nobody judged. An unchanged tool is the same one across a reload.
            Ok(call) if !Arc::ptr_eq(&call.tool, &valid.tool) => ToolResult::refused(
                ToolStatus::SandboxError,
                format!(
                    "`{}` was reloaded (changed) after this run started, so the call was not \
                     made: the run judged the tool as it was; a new run gets the tool as it is now",
                    valid.tool.name()
                ),
            ),
            Ok(call) => {
                // Only a profile that asks about unlisted hosts needs an approver: other calls
                // (nearly all) make none.
                let asks = matches!(
                    valid.tool.profile.network,
                    NetworkPolicy::AllowList {
                        ask_for_unlisted: true,
                        ..
                    }
                );
                let call = call
                    .with_change_journal(Arc::new(EffectJournal {
                        store: self.shared.store.clone(),
                        run_id: run_id.clone(),
                        call_id: proposed.call_id.clone(),
                    }))
                    .with_trace_parent(span.traceparent());
                let call = if asks {
                    call.with_egress_approver(self.approvals.for_connections(
                        proposed.step_id.clone(),
                        proposed.call_id.clone(),
                        valid.tool.clone(),
                        valid.arguments.clone(),
                    ))
                } else {
                    call
                };
                let (sender, mut receiver) = mpsc::unbounded_channel();
                let cancel = self.run.cancel.token().child_token();
                let run = self.shared.executor.run(call, sender, cancel.clone());
                tokio::pin!(run);
                let mut deadline_passed = false;
                let deadline = self.budget.deadline();
                let result = loop {
                    tokio::select! {
                        biased;
                        Some(event) = receiver.recv() => self.forward(proposed, valid, event),
                        result = &mut run => break result,
                        () = tokio::time::sleep_until(deadline), if !deadline_passed => {
                            // The tool is stopped, and reports itself cancelled.
                            deadline_passed = true;
                            cancel.cancel();
                        }
                    }
                };
                while let Ok(event) = receiver.try_recv() {
                    self.forward(proposed, valid, event);
                }
                result
            }
            Err(err) => ToolResult::refused(
                ToolStatus::SandboxError,
                format!("the tool cannot run in this session: {err}"),
            ),
        };
        tool_attributes(&mut span, proposed.call_id, valid.tool.name(), &result);
        drop(self.shared.store.record_effect_result(
            &run_id,
            proposed.call_id,
            &wire::tool_result(result.clone()),
        ));
        Ok(result)
    }

    fn forward(&self, proposed: &Proposed<'_>, valid: &Valid, event: ExecutionEvent) {
        match event {
            ExecutionEvent::Started { execution_id, .. } => {
                // Its kept output and its cancel belong to the run's tenant alone.
                drop(self.shared.store.record_execution_owner(
                    &execution_id,
                    &ExecutionOwner {
                        tenant: self.run.tenant.clone(),
                        run_id: Some(self.run.run_id.clone()),
                        started_at_ms: ids::now_ms(),
                    },
                ));
                self.recorder.emit(
                    Some(proposed.step_id),
                    Event::ToolStarted(pb::ToolStarted {
                        call_id: proposed.call_id.to_string(),
                        tool: valid.tool.name().to_owned(),
                        execution_id: execution_id.into_string(),
                    }),
                );
            }
            ExecutionEvent::Output(chunk) => {
                let output = wire::output(chunk);
                self.recorder.emit(
                    Some(proposed.step_id),
                    Event::ToolOutput(pb::ToolCallOutput {
                        call_id: proposed.call_id.to_string(),
                        stream: output.stream,
                        data: output.data,
                    }),
                );
            }
            // The result is recorded from the executor's return value.
            ExecutionEvent::Finished(_) => {}
        }
    }

    /// The end of the pipeline: the result recorded, the run's stops checked, and what the
    /// model reads made.
    fn observe(
        &mut self,
        proposed: &Proposed<'_>,
        valid: &Valid,
        key: FailureKey,
        result: ToolResult,
    ) -> Result<Observation, Halt> {
        self.budget.usage.tool_calls += 1;
        // The change set is its own event, after the result, not repeated inside it.
        let mut finished = result.clone();
        let changes = finished.changes.take();
        self.recorder.emit_once(
            Some(proposed.step_id),
            Event::ToolFinished(pb::ToolFinished {
                call_id: proposed.call_id.to_string(),
                tool: valid.tool.name().to_owned(),
                result: Some(wire::tool_result(finished)),
                provider_call_id: proposed.provider_call_id.clone(),
            }),
        );
        if let Some(changes) = &changes {
            self.recorder.emit(
                Some(proposed.step_id),
                Event::Changes(pb::ChangesRecorded {
                    call_id: proposed.call_id.to_string(),
                    tool: valid.tool.name().to_owned(),
                    change_set: Some(wire::change_set_summary(changes)),
                }),
            );
        }
        if result.status == ToolStatus::Cancelled {
            // A call the run's own cancel or deadline stopped ends the run with that reason.
            self.budget.check_stopped()?;
        }
        if result.status != ToolStatus::Ok {
            self.budget
                .count_failure(key, FailureKind::Failed, &result.error_message)?;
        }
        Ok(observation::of_result(&result))
    }
}

/// A run's effect journal, keeping each call's change set before it is applied.
struct EffectJournal {
    store: Arc<dyn Store>,
    run_id: RunId,
    call_id: CallId,
}

#[async_trait::async_trait]
impl ChangeJournal for EffectJournal {
    async fn pending(&self, changes: &crate::changes::ChangeSet) -> Result<(), String> {
        self.store
            .record_pending_changes(&self.run_id, &self.call_id, &wire::change_set(changes))
            .await
            .map_err(|err| err.to_string())
    }
}

/// What a tool span records of the call's result.
fn tool_attributes(span: &mut Span, call_id: &CallId, tool: &str, result: &ToolResult) {
    span.set("call_id", call_id);
    span.set("tool", tool);
    if let Some(execution_id) = &result.execution_id {
        span.set("execution_id", execution_id);
    }
    span.set("status", result.status.as_str());
    span.set("duration_ms", result.duration.as_millis());
    if let Some(code) = result.exit_code {
        span.set("exit_code", code);
    }
    let metadata = &result.metadata;
    if let Some(engine) = metadata.engine {
        span.set("engine", engine.as_str());
    }
    span.set("peak_memory_bytes", metadata.peak_memory_bytes);
    span.set("cpu_time_us", metadata.cpu_time.as_micros());
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
    if result.truncated {
        span.set("truncated_from_bytes", result.original_bytes);
    }
    // The change set's shape; its paths are the run's `changes` event.
    if let Some(changes) = &result.changes {
        span.set("changes.paths", changes.changes.len());
        span.set(
            "changes.applied",
            changes
                .changes
                .iter()
                .filter(|change| change.applied)
                .count(),
        );
        if let Some(why) = &changes.not_applied {
            span.set("changes.not_applied", why);
        }
    }
    if result.status != ToolStatus::Ok {
        span.fail(result.error_message.clone());
    }
}

/// The grant that answered the question a call would have been, when one did.
fn granted_by(verdict: &rules::Verdict) -> Option<&rules::RuleRef> {
    verdict.judged.iter().find_map(|judged| match &judged.by {
        By::Rule(rule) if rule.origin.layer == Layer::Grant => Some(rule),
        _ => None,
    })
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
