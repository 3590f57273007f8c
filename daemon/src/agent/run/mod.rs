//! The loop of one run, as the steps of DESIGN.md's "one run, step by step". A run was
//! created (step 1) before its loop starts; each step of the loop then
//!
//! 2. builds the context ([`RunLoop::build_context`]), compacting older steps into a model's
//!    summary when they no longer fit ([`RunLoop::compact`]),
//! 3. asks the model, whose output is untrusted ([`RunLoop::propose`]), streaming its text
//!    and calls to the attached clients as they arrive,
//! 4. to 7. takes each proposed call through the call pipeline — validate, gate, approve,
//!    execute, record ([`pipeline`], [`approvals`], [`recorder`]) — and folds the observation
//!    back ([`RunLoop::fold`]),
//! 8. and decides whether to go on ([`budget`], [`progress`]).
//!
//! Each user input starts a turn: the run's own, and any sent while it goes on.
//!
//! The loop is assembled by [`RunLoop::new`] (`assemble`) from a new run's state or a
//! checkpoint's; the state it saves at each checkpoint is `state`. The loop itself, the
//! [`RunLoop`] struct the files here share, is defined in `run_loop`.
//!
//! Every step of that is an event in the run's log, committed before anyone sees it, and a
//! run always ends with a typed stop reason.

mod approvals;
mod assemble;
mod budget;
mod pipeline;
mod progress;
mod recorder;
mod run_loop;
mod state;

use crate::changes::WorkspaceIgnores;
use crate::metrics::ModelCall;
use crate::telemetry::otlp::spans::provider_and_model;

use airlock_proto::v1 as pb;
use pb::run_event::Event;
use tokio::sync::mpsc;

use super::context::{self, Counted, Entry, Part};
use super::provider::{Message, ModelRequest, ModelResponse, ProviderEvent, Purpose, ToolCall};
use crate::domain::StopReason;
use crate::ids::{CallId, StepId, TurnId};
use crate::store::Pending;
use pipeline::Proposed;
use state::{PendingStep, SavedCall, Snapshot};

pub(super) use assemble::{Parts, Resolved};
pub use budget::RunLimits;
pub(super) use budget::{Halt, Stop, stop};
pub(super) use recorder::CallEvent;
use recorder::Entries;
pub(super) use run_loop::RunLoop;
pub(super) use state::LoopState;

/// How a run's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The run's end is recorded.
    Recorded,
    /// The run's log could not be written (the store failed, or another daemon of the
    /// fleet took the run over): nothing more ran, and the store has the run unfinished
    /// for a daemon to resume.
    Abandoned,
}

impl RunLoop {
    /// Runs to the end and records how it ended.
    pub async fn drive(mut self) -> Ending {
        if let Some(workspace) = self.session.workspace.clone() {
            self.ignores = tokio::task::spawn_blocking(move || {
                WorkspaceIgnores::read(std::path::Path::new(&workspace))
            })
            .await
            .ok();
        }
        let halt = loop {
            if let Err(halt) = self.step().await {
                break halt;
            }
        };
        let stop = match halt {
            Halt::Stop(stop) => stop,
            Halt::Store(err) => {
                // Nothing more is run or recorded: the log already refuses what follows a
                // failed write, and the run goes on when a daemon with a working store
                // resumes it.
                tracing::error!(
                    run = %self.run.run_id,
                    error = %err,
                    "the run's log cannot be written; the run stops without running anything more"
                );
                return Ending::Abandoned;
            }
        };
        if let Some(mut step) = self.step_span.take() {
            // The step the run ends in never reaches the end of `step`, which numbers the others.
            step.set("index", self.budget.steps);
            if stop.reason != StopReason::Final {
                step.fail(format!("{}: {}", stop.reason, stop.detail));
            }
        }
        let (steps, usage) = (self.budget.steps, self.budget.usage);
        // From here on a client may hold the run's end; a next run of its session waits for
        // the end to be committed rather than finding the session busy.
        self.registry.finishing(&self.run);
        if let Err(err) = self.recorder.finish(&stop, steps, &usage).await {
            tracing::error!(run = %self.run.run_id, error = %err, "cannot record the end of the run");
            return Ending::Abandoned;
        }
        // The conversation as the run ended, for the next run of the session to continue.
        // Saved once the end is recorded, so that a resumed run never starts from it (a crash
        // in between costs the next run this step's observations, not the final answer,
        // which the run's record has).
        if let Err(err) = self.last_checkpoint().await {
            tracing::error!(run = %self.run.run_id, error = %err, "cannot save the run's last conversation");
        }
        Ending::Recorded
    }

    /// One step: a model call and the calls it proposes, or — for a run resumed in the
    /// middle of one — the calls it had not finished.
    async fn step(&mut self) -> Result<(), Halt> {
        let started = std::time::Instant::now();
        let mut span = self.recorder.span("step", self.recorder.root_id());
        if self.pending.is_some() {
            span.set("resumed", true);
        }
        self.step_span = Some(span);
        if self.pending.is_none() {
            self.budget.check()?;
            let step_id = self.begin_step();
            let (request, raw_tokens) = self.build_context(&step_id).await?;
            let response = self.propose(&step_id, &request, raw_tokens).await?;
            self.take_proposals(step_id, response)?;
        }
        while let Some(pending) = &self.pending {
            let Some((call, call_id)) = pending.next_call() else {
                self.pending = None;
                break;
            };
            let step_id = pending.step_id.clone();
            let observation = self
                .handle_call(Proposed {
                    step_id: &step_id,
                    call_id: &call_id,
                    call: &call,
                    provider_call_id: provider_call_id(&call, &call_id),
                })
                .await?;
            self.fold(call, call_id, observation)?;
        }
        if let Some(mut span) = self.step_span.take() {
            span.set("index", self.budget.steps);
        }
        crate::metrics::global().run_step(&self.run.tenant, started.elapsed());
        self.progress
            .end_step(self.budget.limits.max_idle_steps)
            .map_err(|no| stop(StopReason::NoProgress, no.0))
    }

    /// The span new spans of this step hang from.
    fn step_parent(&self) -> String {
        self.step_span.as_ref().map_or_else(
            || self.recorder.root_id().to_owned(),
            |span| span.id().to_owned(),
        )
    }

    /// A new step: numbered, with any input the user sent since the last one.
    fn begin_step(&mut self) -> StepId {
        self.budget.steps += 1;
        let step_id = StepId::new();
        self.recorder.emit(
            Some(&step_id),
            Event::StepStarted(pb::StepStarted {
                index: self.budget.steps,
            }),
        );
        while let Ok(text) = self.input.try_recv() {
            // Each input starts a turn, its own event first.
            self.turn_id = TurnId::new();
            self.recorder.log().start_turn(&self.turn_id);
            self.recorder.emit(
                Some(&step_id),
                Event::UserInput(pb::UserInputReceived { text: text.clone() }),
            );
            self.conversation.push(Entry {
                message: Message::User { text },
                source: step_id.to_string(),
                part: Part::Run,
                counted: Counted::default(),
            });
            self.progress.user_spoke();
        }
        if let Some(span) = &mut self.step_span {
            span.set("step_id", &step_id);
        }
        step_id
    }

    fn sources(&self) -> context::Sources<'_> {
        context::Sources {
            system: &self.system,
            tools: &self.tool_set,
            project: self.project.as_deref(),
            conversation: &self.conversation,
            budget: self.budget.limits.context_tokens,
            counter: &self.counter,
            fixed: &self.fixed,
        }
    }

    /// Step 2: the context, within its token budget, with a report of what went in; older
    /// steps compacted (under the context's span) when they no longer fit, and the context
    /// built again from the summary. With the request, its tokens as counted
    /// before calibration (what the provider's reported usage calibrates).
    async fn build_context(&mut self, step_id: &StepId) -> Result<(ModelRequest, u64), Halt> {
        let mut span = self.recorder.span("context", &self.step_parent());
        let mut built = context::build(&self.sources());
        let may_compact = self
            .compaction_retry_step
            .is_none_or(|step| self.budget.steps >= step);
        if may_compact && built.cut() {
            let plan = context::compact::plan(
                &self.sources(),
                built.answers,
                self.budget.limits.max_output_tokens,
            );
            if let Some(plan) = plan {
                self.compact(step_id, plan, span.id()).await?;
                built = context::build(&self.sources());
            }
        }
        let count = |disposition: pb::ContextDisposition| {
            built
                .report
                .items
                .iter()
                .filter(|item| item.disposition == disposition as i32)
                .count()
        };
        span.set("tokens", built.report.tokens);
        span.set("budget", built.report.budget);
        span.set("tokenizer", built.report.tokenizer.clone());
        span.set("summarised", count(pb::ContextDisposition::Summarised));
        span.set("dropped", count(pb::ContextDisposition::Dropped));
        self.recorder
            .emit(Some(step_id), Event::ContextBuilt(built.report));
        let request = ModelRequest {
            system: self.system.clone(),
            messages: built.messages,
            tools: self.tool_set.definitions.clone(),
            max_output_tokens: self.budget.limits.max_output_tokens,
            temperature: self.budget.limits.temperature,
            answers: built.answers,
            purpose: Purpose::Step,
        };
        Ok((request, built.raw_tokens))
    }

    /// Asks the model to summarise older steps, and puts the summary in their place — or,
    /// when that call fails, records why and leaves the cutting to the builder for a while.
    /// The call is traced and its tokens count in the run's budget.
    async fn compact(
        &mut self,
        step_id: &StepId,
        plan: context::compact::Plan,
        parent: &str,
    ) -> Result<(), Halt> {
        let mut span = self.recorder.span("compact", parent);
        span.set("model", self.provider.describe());
        span.set("entries", plan.covered.len());
        span.set("tokens_before", plan.tokens);
        let ignore = |_: ProviderEvent| {};
        let outcome = self
            .budget
            .guard(self.provider.complete(&plan.request, &ignore))
            .await?;
        let mut event = pb::ContextCompacted {
            entries: u32::try_from(plan.covered.len()).unwrap_or(u32::MAX),
            tokens_before: plan.tokens,
            ..Default::default()
        };
        match outcome {
            Ok(response) => {
                let usage = &mut self.budget.usage;
                usage.model_calls += 1;
                usage.input_tokens += response.usage.input_tokens;
                usage.output_tokens += response.usage.output_tokens;
                event.usage = Some(pb::Usage {
                    input_tokens: response.usage.input_tokens,
                    output_tokens: response.usage.output_tokens,
                    model_calls: 1,
                    tool_calls: 0,
                });
                span.set("input_tokens", response.usage.input_tokens);
                span.set("output_tokens", response.usage.output_tokens);
                let summary = response.text.unwrap_or_default();
                let first = plan.covered.first().copied().unwrap_or(0);
                self.recorder.conversation_changed_from(first);
                context::compact::apply(
                    &mut self.conversation,
                    &plan.covered,
                    &summary,
                    format!("compaction at step {}", self.budget.steps),
                );
                event.summary_tokens = self.counter.text(&summary);
                event.summary = summary;
                span.set("summary_tokens", event.summary_tokens);
                self.compaction_retry_step = None;
            }
            Err(err) => {
                span.fail(err.to_string());
                event.fallback = true;
                event.error = err.to_string();
                self.compaction_retry_step = Some(self.budget.steps + COMPACTION_RETRY_STEPS);
            }
        }
        self.recorder
            .emit(Some(step_id), Event::ContextCompacted(event));
        self.recorder
            .progress(self.budget.steps, &self.budget.usage);
        // A resumed run starts from the summary and does not ask for it again.
        drop(self.checkpoint());
        self.budget.check_tokens()
    }

    /// Step 3: one model call, its retries told as they happen.
    async fn propose(
        &mut self,
        step_id: &StepId,
        request: &ModelRequest,
        raw_tokens: u64,
    ) -> Result<ModelResponse, Halt> {
        let mut span = self.recorder.span("model", &self.step_parent());
        let described = self.provider.describe();
        span.set("model", &described);
        let started = std::time::Instant::now();
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let events = move |event: ProviderEvent| {
            let _ = sender.send(event);
        };
        let call = self.provider.complete(request, &events);
        tokio::pin!(call);
        let outcome = self
            .budget
            .guard(async {
                loop {
                    tokio::select! {
                        result = &mut call => break result,
                        Some(event) = receiver.recv() => self.provider_event(step_id, event),
                    }
                }
            })
            .await;
        while let Ok(event) = receiver.try_recv() {
            self.provider_event(step_id, event);
        }
        let response = match outcome {
            Ok(Ok(response)) => {
                if response.usage.input_tokens > 0 {
                    self.counter
                        .observe(raw_tokens, response.usage.input_tokens);
                }
                response
            }
            Ok(Err(err)) => {
                span.fail(err.to_string());
                return Err(stop(StopReason::ModelError, err.to_string()));
            }
            Err(halt) => {
                if let Halt::Stop(stop) = &halt {
                    span.fail(stop.detail.clone());
                }
                return Err(halt);
            }
        };
        let (provider, model) = if self.provider.replayed() {
            ("airlock", "replay")
        } else {
            provider_and_model(&described)
        };
        crate::metrics::global().model_call(&ModelCall {
            provider,
            model,
            duration: started.elapsed(),
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
        });
        span.set("input_tokens", response.usage.input_tokens);
        span.set("output_tokens", response.usage.output_tokens);
        span.set("tool_calls", response.tool_calls.len());
        span.set("finish", format!("{:?}", response.finish));
        let usage = &mut self.budget.usage;
        usage.model_calls += 1;
        usage.input_tokens += response.usage.input_tokens;
        usage.output_tokens += response.usage.output_tokens;
        self.recorder
            .progress(self.budget.steps, &self.budget.usage);
        Ok(response)
    }

    fn provider_event(&self, step_id: &StepId, event: ProviderEvent) {
        match event {
            ProviderEvent::Retrying {
                attempt,
                error,
                delay,
            } => {
                self.recorder.emit(
                    Some(step_id),
                    Event::ModelRetry(pb::ModelRetry {
                        attempt,
                        error,
                        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    }),
                );
            }
            // Pieces go to the attached clients as they come; the step's text and calls
            // are recorded whole once the model is done.
            ProviderEvent::TextDelta(text) => {
                self.recorder
                    .log()
                    .stream(Some(step_id), Event::TextDelta(pb::ModelTextDelta { text }));
            }
            ProviderEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                self.recorder.log().stream(
                    Some(step_id),
                    Event::ToolCallDelta(pb::ToolCallDelta {
                        index,
                        provider_call_id: id.unwrap_or_default(),
                        tool: name.unwrap_or_default(),
                        arguments_delta: arguments,
                    }),
                );
            }
            // The run's provider keeps exchanges with the run (`recording.rs`); none
            // reaches here.
            ProviderEvent::Exchange(_) => {}
        }
    }

    /// The model's answer: a final text ends the run, unless the user sent input meanwhile;
    /// proposed calls become the pending step, checkpointed before any of them is touched.
    fn take_proposals(&mut self, step_id: StepId, response: ModelResponse) -> Result<(), Halt> {
        let text = response.text.clone().unwrap_or_default();
        if !text.is_empty() {
            self.recorder.emit(
                Some(&step_id),
                Event::ModelText(pb::ModelText { text: text.clone() }),
            );
        }
        if response.tool_calls.is_empty() {
            // The answer ends the conversation the session's next run continues.
            self.conversation.push(Entry {
                message: Message::Assistant {
                    text: Some(text.clone()),
                    tool_calls: Vec::new(),
                },
                source: step_id.to_string(),
                part: Part::Run,
                counted: Counted::default(),
            });
            if !self.input.is_empty() {
                // The user spoke while the model answered: the answer is not the last word,
                // and the next step reads what was said. (Input that arrives after this
                // check is not read: the run has ended.)
                return Ok(());
            }
            return Err(Halt::Stop(Stop {
                reason: StopReason::Final,
                detail: String::new(),
                final_text: text,
            }));
        }
        self.budget.check_tokens()?;
        let calls = own_calls(response.tool_calls);
        self.conversation.push(Entry {
            message: Message::Assistant {
                text: (!text.is_empty()).then_some(text),
                tool_calls: calls.iter().map(|(call, _)| call.clone()).collect(),
            },
            source: step_id.to_string(),
            part: Part::Run,
            counted: Counted::default(),
        });
        self.pending = Some(PendingStep {
            step_id,
            calls: calls
                .iter()
                .map(|(call, call_id)| (SavedCall::from(call), call_id.clone()))
                .collect(),
            next: 0,
        });
        drop(self.checkpoint());
        Ok(())
    }

    /// Folds a call's observation back into the conversation. No checkpoint: the one taken
    /// with the proposals and the effect journal are enough to redo the step's calls
    /// without running any twice, and a step then costs one encoding of the state, not
    /// one per call.
    fn fold(
        &mut self,
        call: ToolCall,
        call_id: CallId,
        observation: super::observation::Observation,
    ) -> Result<(), Halt> {
        let repeated = self.progress.observe(
            &call.name,
            &call.arguments,
            &observation.content,
            observation.changed,
            self.budget.limits.max_repeated_calls,
        );
        self.conversation.push(Entry {
            message: Message::Tool {
                call_id: call.id,
                name: call.name,
                content: observation.content,
                is_error: observation.is_error,
            },
            source: call_id.to_string(),
            part: Part::Run,
            counted: Counted::default(),
        });
        if let Some(pending) = &mut self.pending {
            pending.next += 1;
            if pending.next >= pending.calls.len() {
                self.pending = None;
            }
        }
        repeated.map_err(|no| stop(StopReason::NoProgress, no.0))
    }

    /// Saves the loop's state: where a restarted daemon goes on from. Its outcome shows at
    /// the next commit the loop waits for, or where the returned answer is awaited.
    pub fn checkpoint(&self) -> Pending<()> {
        self.save(Entries::Added)
    }

    /// The run's last checkpoint, its conversation written whole: what the session's next
    /// run continues from must not hang on an earlier checkpoint having been kept.
    fn last_checkpoint(&self) -> Pending<()> {
        self.save(Entries::Whole)
    }

    fn save(&self, entries: Entries) -> Pending<()> {
        self.recorder.checkpoint(
            entries,
            Snapshot {
                conversation: &self.conversation,
                usage: &self.budget.usage,
                steps: self.budget.steps,
                failures: &self.budget.failures,
                elapsed_ms: u64::try_from(self.budget.elapsed().as_millis()).unwrap_or(u64::MAX),
                pending: self.pending.as_ref(),
                turn_id: &self.turn_id,
                project_instructions: self.project.as_deref(),
                calibration: self.counter.state(),
                progress: &self.progress,
                compaction_retry_step: self.compaction_retry_step,
            },
        )
    }
}

/// After a failed summarising call, this many steps go by (cut mechanically) before the
/// loop asks again: a provider that failed once often fails again at once, and each try
/// costs a call.
const COMPACTION_RETRY_STEPS: u32 = 5;

/// Gives each proposed call an id of ours. The model's ids are kept for the conversation,
/// except empty or repeated ones, which would make observations ambiguous.
fn own_calls(proposed: Vec<ToolCall>) -> Vec<(ToolCall, CallId)> {
    let mut seen = std::collections::HashSet::new();
    proposed
        .into_iter()
        .map(|mut call| {
            let call_id = CallId::new();
            if call.id.is_empty() || !seen.insert(call.id.clone()) {
                call.id = call_id.to_string();
            }
            (call, call_id)
        })
        .collect()
}

/// The provider's id of `call`, or empty where [`own_calls`] had to give it ours.
fn provider_call_id(call: &ToolCall, call_id: &CallId) -> String {
    if call.id == call_id.as_str() {
        String::new()
    } else {
        call.id.clone()
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
