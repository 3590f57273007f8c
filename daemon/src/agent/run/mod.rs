//! The loop of one run, as the steps of DESIGN.md's "one run, step by step". A run was
//! created (step 1) before its loop starts; each step of the loop then
//!
//! 2. builds the context ([`RunLoop::build_context`]),
//! 3. asks the model, whose output is untrusted ([`RunLoop::propose`]),
//! 4. to 7. takes each proposed call through the call pipeline — validate, gate, approve,
//!    execute, record ([`pipeline`], [`approvals`], [`recorder`]) — and folds the observation
//!    back ([`RunLoop::fold`]),
//! 8. and decides whether to go on ([`budget`]).
//!
//! Every step of that is an event in the run's log, committed before anyone sees it, and a
//! run always ends with a typed stop reason.

mod approvals;
mod budget;
mod pipeline;
mod recorder;

use crate::changes::WorkspaceIgnores;
use std::collections::BTreeMap;
use std::sync::Arc;

use airlock_proto::v1 as pb;
use pb::run_event::Event;
use tokio::sync::mpsc;

use super::checkpoint::{PendingStep, SavedCall, Snapshot};
use super::context::{self, Entry, ToolSet};
use super::provider::{
    Message, ModelProvider, ModelRequest, ModelResponse, ProviderEvent, ToolCall, ToolDefinition,
};
use super::{LiveRun, Shared};
use crate::domain::StopReason;
use crate::ids::{CallId, StepId};
use crate::policy::ApprovalPolicy;
use crate::store::SessionRecord;
use crate::tools::Tool;
use crate::trace::Span;
use pipeline::Proposed;

pub(super) use approvals::Approvals;
pub use budget::RunLimits;
pub(super) use budget::{Budget, FailureKey, Halt, Stop, stop};
pub(super) use recorder::{CallEvent, Recorder};

pub(super) struct RunLoop {
    pub shared: Arc<Shared>,
    pub run: Arc<LiveRun>,
    pub session: SessionRecord,
    pub provider: Arc<dyn ModelProvider>,
    pub tools: BTreeMap<String, Arc<Tool>>,
    /// The same tools as the model reads them.
    pub tool_set: ToolSet,
    pub policy: ApprovalPolicy,
    pub system: String,
    pub stop_on_denial: bool,
    pub input: mpsc::UnboundedReceiver<String>,
    pub conversation: Vec<Entry>,
    pub budget: Budget,
    /// The calls of the latest model response not all observed yet.
    pub pending: Option<PendingStep>,
    pub recorder: Recorder,
    pub approvals: Arc<Approvals>,
    /// The span of the step in progress.
    pub step_span: Option<Span>,
    /// The workspace's ignore files as they were when the run started (or resumed): what
    /// its calls' change sets record by digest only does not move with them.
    pub ignores: Option<WorkspaceIgnores>,
}

impl RunLoop {
    /// Runs to the end and records how it ended.
    pub async fn drive(mut self) {
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
                return;
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
        if let Err(err) = self.recorder.finish(&stop, steps, &usage).await {
            tracing::error!(run = %self.run.run_id, error = %err, "cannot record the end of the run");
        }
    }

    /// One step: a model call and the calls it proposes, or — for a run resumed in the
    /// middle of one — the calls it had not finished.
    async fn step(&mut self) -> Result<(), Halt> {
        let mut span = self.recorder.span("step", self.recorder.root_id());
        if self.pending.is_some() {
            span.set("resumed", true);
        }
        self.step_span = Some(span);
        if self.pending.is_none() {
            self.budget.check()?;
            let step_id = self.begin_step();
            let request = self.build_context(&step_id);
            let response = self.propose(&step_id, &request).await?;
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
            self.fold(call, call_id, observation);
        }
        if let Some(mut span) = self.step_span.take() {
            span.set("index", self.budget.steps);
        }
        Ok(())
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
            self.recorder.emit(
                Some(&step_id),
                Event::UserInput(pb::UserInputReceived { text: text.clone() }),
            );
            self.conversation.push(Entry {
                message: Message::User { text },
                source: step_id.to_string(),
            });
        }
        if let Some(span) = &mut self.step_span {
            span.set("step_id", &step_id);
        }
        step_id
    }

    /// Step 2: the context, within its token budget, with a report of what went in.
    fn build_context(&mut self, step_id: &StepId) -> ModelRequest {
        let mut span = self.recorder.span("context", &self.step_parent());
        let built = context::build(
            &self.system,
            &self.tool_set,
            &self.conversation,
            self.budget.limits.context_tokens,
        );
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
        span.set("summarised", count(pb::ContextDisposition::Summarised));
        span.set("dropped", count(pb::ContextDisposition::Dropped));
        self.recorder
            .emit(Some(step_id), Event::ContextBuilt(built.report));
        ModelRequest {
            system: self.system.clone(),
            messages: built.messages,
            tools: self.tool_set.definitions.clone(),
            max_output_tokens: self.budget.limits.max_output_tokens,
            temperature: self.budget.limits.temperature,
        }
    }

    /// Step 3: one model call, its retries told as they happen.
    async fn propose(
        &mut self,
        step_id: &StepId,
        request: &ModelRequest,
    ) -> Result<ModelResponse, Halt> {
        let mut span = self.recorder.span("model", &self.step_parent());
        span.set("model", self.provider.describe());
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
            Ok(Ok(response)) => response,
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
            // The step's text is recorded whole once the model is done; streaming it to
            // clients as it comes is the sessions issue's (#18) to wire.
            ProviderEvent::TextDelta(_) => {}
        }
    }

    /// The model's answer: a final text ends the run; proposed calls become the pending step,
    /// checkpointed before any of them is touched.
    fn take_proposals(&mut self, step_id: StepId, response: ModelResponse) -> Result<(), Halt> {
        let text = response.text.clone().unwrap_or_default();
        if !text.is_empty() {
            self.recorder.emit(
                Some(&step_id),
                Event::ModelText(pb::ModelText { text: text.clone() }),
            );
        }
        if response.tool_calls.is_empty() {
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
        });
        self.pending = Some(PendingStep {
            step_id,
            calls: calls
                .iter()
                .map(|(call, call_id)| (SavedCall::from(call), call_id.clone()))
                .collect(),
            next: 0,
        });
        self.checkpoint();
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
    ) {
        self.conversation.push(Entry {
            message: Message::Tool {
                call_id: call.id,
                name: call.name,
                content: observation.content,
                is_error: observation.is_error,
            },
            source: call_id.to_string(),
        });
        if let Some(pending) = &mut self.pending {
            pending.next += 1;
            if pending.next >= pending.calls.len() {
                self.pending = None;
            }
        }
    }

    /// Saves the loop's state: where a restarted daemon goes on from.
    pub fn checkpoint(&self) {
        self.recorder.checkpoint(Snapshot {
            conversation: &self.conversation,
            usage: &self.budget.usage,
            steps: self.budget.steps,
            failures: &self.budget.failures,
            elapsed_ms: u64::try_from(self.budget.elapsed().as_millis()).unwrap_or(u64::MAX),
            pending: self.pending.as_ref(),
        });
    }
}

/// The run's tools as its model reads them.
pub(super) fn tool_set(tools: &BTreeMap<String, Arc<Tool>>) -> ToolSet {
    ToolSet::new(
        tools
            .values()
            .map(|tool| ToolDefinition {
                name: tool.name().to_owned(),
                description: tool.manifest.description.clone(),
                input_schema: tool.arguments.json().clone(),
            })
            .collect(),
    )
}

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
mod tests {
    use serde_json::json;

    use super::super::checkpoint::LoopState;
    use super::super::testing::{Harness, StalledDisk, finished, kinds};
    use super::*;

    #[tokio::test]
    async fn a_run_reads_as_its_steps_in_its_log_and_its_trace() {
        let harness = Harness::new();
        let script = json!({"turns": [
            {"text": "looking", "tool_calls": [{"name": "noop", "arguments": {"n": 1}}]},
            {"final": "done"}
        ]});
        let (run_id, mut follower) = harness.start(harness.scripted(&script, &["noop"])).await;
        let log = follower.rest().await;
        assert_eq!(
            kinds(&log),
            [
                "run_started",
                "step_started",
                "context_built",
                "model_text",
                "tool_call_proposed",
                "tool_started",
                "tool_output",
                "tool_finished",
                "step_started",
                "context_built",
                "model_text",
                "run_finished",
            ]
        );
        let end = finished(&log);
        assert_eq!(end.reason, pb::StopReason::Final as i32);
        assert_eq!(end.final_text, "done");
        assert_eq!(end.steps, 2);
        let usage = end.usage.expect("usage");
        assert_eq!((usage.model_calls, usage.tool_calls), (2, 1));

        // The trace: one root, a span per stage under its step, every span ended.
        let spans = harness.store.spans(&run_id).await.expect("spans");
        let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
        for expected in [
            "run",
            "step",
            "context",
            "model",
            "validate",
            "permission",
            "tool",
        ] {
            assert!(names.contains(&expected), "{expected} missing: {names:?}");
        }
        assert!(
            spans
                .iter()
                .all(|span| span.end_unix_nano >= span.start_unix_nano && span.end_unix_nano > 0)
        );
        let steps: Vec<&str> = spans
            .iter()
            .filter(|span| span.name == "step")
            .map(|span| span.span_id.as_str())
            .collect();
        assert_eq!(steps.len(), 2);
        for span in spans.iter().filter(|span| span.name == "tool") {
            assert!(steps.contains(&span.parent_span_id.as_str()), "{span:?}");
        }

        // The last checkpoint was taken with the last proposals, before their call ran: a
        // restart from it redoes the call from the effect journal.
        let checkpoint = harness
            .store
            .latest_checkpoint(&run_id)
            .await
            .expect("read")
            .expect("a checkpoint");
        let state = LoopState::decode(&checkpoint.state).expect("decodes");
        let pending = state.pending.expect("the proposals");
        assert_eq!((pending.calls.len(), pending.next), (1, 0));
        assert_eq!(state.usage.model_calls, 1);
        assert_eq!(state.steps, 1);
    }

    #[tokio::test]
    async fn the_calls_of_one_answer_are_observed_in_order_under_ids_of_their_own() {
        let harness = Harness::new();
        let script = json!({"turns": [
            {"tool_calls": [
                {"name": "noop", "arguments": {"n": 1}},
                {"name": "noop", "arguments": {"n": 2}}
            ]},
            {"final": "done"}
        ]});
        let log = harness.run(harness.scripted(&script, &["noop"])).await;
        let proposed: Vec<pb::ToolCallProposed> = log
            .iter()
            .filter_map(|event| match &event.event {
                Some(Event::ToolCallProposed(proposed)) => Some(proposed.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(proposed.len(), 2);
        assert_ne!(proposed[0].call_id, proposed[1].call_id);
        assert!(proposed[0].arguments_json.contains('1'));
        assert!(proposed[1].arguments_json.contains('2'));
        let finished_calls: Vec<String> = log
            .iter()
            .filter_map(|event| match &event.event {
                Some(Event::ToolFinished(finished)) => Some(finished.call_id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            finished_calls,
            [proposed[0].call_id.clone(), proposed[1].call_id.clone()]
        );
    }

    #[test]
    fn provider_ids_are_kept_unless_empty_or_repeated() {
        let call = |id: &str| ToolCall {
            id: id.to_owned(),
            name: "noop".to_owned(),
            arguments: "{}".to_owned(),
        };
        let owned = own_calls(vec![call("a"), call("a"), call(""), call("b")]);
        let provider_ids: Vec<String> = owned
            .iter()
            .map(|(call, call_id)| provider_call_id(call, call_id))
            .collect();
        assert_eq!(provider_ids, ["a", "", "", "b"]);
        // Every call the model reads about has an id of its own.
        let ids: std::collections::HashSet<&str> =
            owned.iter().map(|(call, _)| call.id.as_str()).collect();
        assert_eq!(ids.len(), 4);
    }

    /// On a runtime of one thread, a commit stuck on the disk must not stop anything else:
    /// another run's tool finishes and its next model call is made, while the first run waits
    /// for its acknowledgment. A store that blocked the runtime's thread would stop both
    /// (and this test would time out).
    #[tokio::test(flavor = "current_thread")]
    async fn a_stalled_disk_delays_acknowledgments_and_blocks_no_other_run() {
        use super::super::provider::test_server::{self, Reply, TestServer};

        // Run B: a model behind HTTP that calls `wait_gate`, then answers.
        let tool_call = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "wait_gate", "arguments": "{}"}}
        ]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
        let answer = json!({"choices": [{"message": {"role": "assistant", "content": "done"},
            "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
        let server = TestServer::start(vec![
            Reply::json(200, &tool_call.to_string()),
            Reply::json(200, &answer.to_string()),
        ])
        .await;
        let mut settings = crate::agent::AgentSettings::default();
        settings.providers = test_server::settings(&server.base_url);
        // Any variable that is set: the test server checks no key.
        settings.providers.openai_api_key_env = "PATH".into();

        let disk = Arc::new(StalledDisk::default());
        let harness = Harness::build(disk.options(), settings);
        let gate = harness.gate();

        let mut b_start = harness.scripted(&json!({}), &["wait_gate"]);
        b_start.model = Some(pb::ModelConfig {
            model: "openai:test".into(),
            ..Default::default()
        });
        let (_, mut b) = harness.start(b_start).await;
        b.until(|event| matches!(event, Event::ToolStarted(_)))
            .await;

        // The disk stalls; run A's start waits for its first commit.
        disk.set_closed(true);
        let runtime = harness.runtime.clone();
        let a_start = harness.scripted(&json!({"turns": [{"final": "a"}]}), &[]);
        let a = tokio::spawn(async move {
            let owner = crate::agent::RunOwner {
                tenant: "default".into(),
                max_live_runs: 10,
            };
            runtime
                .start(a_start, &owner)
                .await
                .map(|live| live.run_id.clone())
        });
        disk.stalled().await;

        // Meanwhile B's tool ends and B asks its model again, with the tool's result.
        let gate_writer = gate.clone();
        tokio::task::spawn_blocking(move || std::fs::write(gate_writer, b"x"))
            .await
            .expect("join")
            .expect("write the gate");
        let mut waited = 0;
        while server.requests().len() < 2 {
            assert!(waited < 6000, "run B made no second model call");
            waited += 1;
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let second = server.requests()[1].body.to_string();
        assert!(second.contains(r#"\"status\":\"OK\""#), "{second}");
        assert!(disk.is_closed(), "the disk was still stalled");
        assert!(
            !a.is_finished(),
            "A's start was acknowledged before its commit"
        );

        // The disk recovers: both runs finish, their logs whole.
        disk.set_closed(false);
        let a_run = a.await.expect("join").expect("A starts");
        let a_log = {
            let mut follower = harness.follow(&a_run).await;
            follower.rest().await
        };
        assert_eq!(finished(&a_log).final_text, "a");
        let b_log = b.rest().await;
        assert_eq!(finished(&b_log).final_text, "done");
    }
}
