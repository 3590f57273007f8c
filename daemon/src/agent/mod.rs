//! The agent runtime: sessions, the runs of the agent loop, and their live state.
//!
//! A run belongs to the daemon, not to the client that started it: it goes on when its
//! client disconnects, and any client can follow it from any point of its event log. Live
//! runs are kept here; finished ones live only in the store.

mod checkpoint;
mod context;
mod log;
mod network_approval;
mod observation;
mod preview;
mod prompt;
pub mod provider;
mod run;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ids;
use crate::policy::{ApprovalBroker, ApprovalPolicy, Approver, DecisionError};
use crate::store::{
    RunCursor, RunEnd, RunFilter, RunRecord, RunState, SessionRecord, Store, StoreError,
};

use crate::tools::{Executor, Tool};
use crate::trace::{RunTrace, Tracer};
use crate::workspace::WorkspaceError;
use checkpoint::LoopState;
use run::CallEvent;

pub use log::RunLog;
pub use provider::{ModelSpec, ProviderSettings};
pub use run::RunLimits;

/// Defaults for what a client leaves unset, and ceilings it cannot pass.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDefaults {
    pub max_steps: u32,
    pub wall_time: Duration,
    pub max_tool_calls: u32,
    pub max_repeated_errors: u32,
    pub context_tokens: u64,
    pub approval_timeout: Duration,
    pub max_output_tokens: u32,
}

impl Default for RunDefaults {
    fn default() -> Self {
        RunDefaults {
            max_steps: 50,
            wall_time: Duration::from_secs(30 * 60),
            max_tool_calls: 200,
            max_repeated_errors: 3,
            context_tokens: 100_000,
            approval_timeout: Duration::from_secs(5 * 60),
            max_output_tokens: 4096,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct AgentSettings {
    pub providers: ProviderSettings,
    pub defaults: RunDefaults,
}

/// A run's own stream may send this many refused decisions before they stop being recorded:
/// enough to debug a client, too few to flood the log.
const MAX_RECORDED_REJECTIONS: u32 = 100;

/// The task's input is short: a sentence, a page at most.
pub const MAX_INPUT_BYTES: usize = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A field of the request that starts a run (a path inside `StartRun`) is wrong.
    #[error("{reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("no session `{0}`")]
    UnknownSession(String),
    #[error("no run `{0}`")]
    UnknownRun(String),
    #[error("no tool named `{0}`")]
    UnknownTool(String),
    /// A recorded run the daemon cannot take up again (its checkpoint does not decode).
    #[error("{0}")]
    Unresumable(String),
    #[error("run `{0}` has finished")]
    RunFinished(String),
    #[error(
        "tenant `{tenant}` already has {max} runs going, its limit; wait for one to finish or cancel one"
    )]
    TooManyRuns { tenant: String, max: u32 },
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who starts a run, and how many runs that tenant may have going at once.
#[derive(Debug, Clone)]
pub struct RunOwner {
    pub tenant: String,
    pub max_live_runs: u32,
}

/// What every run shares.
pub(crate) struct Shared {
    pub executor: Arc<Executor>,
    pub store: Arc<dyn Store>,
    pub approvals: Arc<ApprovalBroker>,
    pub tracer: Arc<Tracer>,
    pub settings: AgentSettings,
}

/// A run that is going on now.
pub struct LiveRun {
    pub run_id: String,
    pub session_id: String,
    /// The tenant that started it.
    pub tenant: String,
    pub log: Arc<RunLog>,
    input: mpsc::UnboundedSender<String>,
    cancel: CancellationToken,
    cancel_reason: Mutex<Option<String>>,
    rejections: AtomicU32,
}

impl LiveRun {
    fn cancel_reason(&self) -> String {
        self.cancel_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "cancelled".into())
    }
}

/// What `launch` needs to start a recorded run's loop.
struct Launch<'a> {
    record: &'a RunRecord,
    session: SessionRecord,
    provider: Arc<dyn provider::ModelProvider>,
    tools: BTreeMap<String, Arc<Tool>>,
    policy: ApprovalPolicy,
    limits: RunLimits,
    state: LoopState,
    log: Arc<RunLog>,
    recorded: HashSet<(CallEvent, String)>,
}

pub struct AgentRuntime {
    shared: Arc<Shared>,
    live: Arc<Mutex<HashMap<String, Arc<LiveRun>>>>,
}

impl AgentRuntime {
    pub fn new(
        executor: Arc<Executor>,
        store: Arc<dyn Store>,
        tracer: Arc<Tracer>,
        settings: AgentSettings,
    ) -> AgentRuntime {
        AgentRuntime {
            shared: Arc::new(Shared {
                executor,
                store,
                approvals: Arc::new(ApprovalBroker::default()),
                tracer,
                settings,
            }),
            live: Arc::default(),
        }
    }

    /// The tools runs may be given.
    pub fn registry(&self) -> &Arc<crate::tools::Registry> {
        self.shared.executor.registry()
    }

    pub fn approvals(&self) -> &Arc<ApprovalBroker> {
        &self.shared.approvals
    }

    fn live_run(&self, run_id: &str) -> Option<Arc<LiveRun>> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned()
    }

    /// How many runs of `tenant` are going on.
    pub fn live_runs_of(&self, tenant: &str) -> usize {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|run| run.tenant == tenant)
            .count()
    }

    /// The tenant that owns run `run_id`.
    pub fn run_owner(&self, run_id: &str) -> Result<String, AgentError> {
        if let Some(live) = self.live_run(run_id) {
            return Ok(live.tenant.clone());
        }
        Ok(self.run(run_id)?.tenant)
    }

    /// How many runs are going on.
    pub fn live_runs(&self) -> usize {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// A new session of `tenant`.
    pub fn create_session(
        &self,
        workspace: &str,
        labels: BTreeMap<String, String>,
        tenant: &str,
    ) -> Result<SessionRecord, AgentError> {
        let workspace = self
            .shared
            .executor
            .workspaces()
            .resolve(workspace)?
            .map(|path| path.to_string_lossy().into_owned())
            .unwrap_or_default();
        let session = SessionRecord {
            session_id: ids::session_id(),
            workspace,
            labels,
            created_at_ms: ids::now_ms(),
            tenant: tenant.to_owned(),
        };
        self.shared.store.create_session(&session)?;
        Ok(session)
    }

    /// Checks and records a new run of `owner`, then starts its loop.
    pub fn start(&self, start: pb::StartRun, owner: &RunOwner) -> Result<Arc<LiveRun>, AgentError> {
        let invalid = |field, reason: String| AgentError::Invalid { field, reason };
        if self.live_runs_of(&owner.tenant) >= owner.max_live_runs as usize {
            return Err(AgentError::TooManyRuns {
                tenant: owner.tenant.clone(),
                max: owner.max_live_runs,
            });
        }
        if start.input.trim().is_empty() {
            return Err(invalid(
                "input",
                "a run needs an input: what the user asks for".into(),
            ));
        }
        if start.input.len() > MAX_INPUT_BYTES {
            return Err(invalid(
                "input",
                format!(
                    "the input is {} bytes; the limit is {MAX_INPUT_BYTES} bytes",
                    start.input.len()
                ),
            ));
        }
        let policy = pb::ApprovalPolicy::try_from(start.approval_policy)
            .map(ApprovalPolicy::from_wire)
            .map_err(|_| {
                invalid(
                    "approval_policy",
                    format!("unknown approval policy {}", start.approval_policy),
                )
            })?;
        let model = start.model.clone().unwrap_or_default();
        let spec = parse_model(&model)?;
        let provider = provider::build(&spec, &self.shared.settings.providers).map_err(|err| {
            let field = match spec {
                ModelSpec::Scripted { .. } => "model.script",
                ModelSpec::OpenAi { .. } | ModelSpec::Anthropic { .. } => "model.model",
            };
            invalid(field, err.to_string())
        })?;
        let existing = if start.session_id.is_empty() {
            None
        } else {
            // Another tenant's session is as unknown as one that does not exist.
            Some(
                self.shared
                    .store
                    .session(&start.session_id)?
                    .filter(|session| session.tenant == owner.tenant)
                    .ok_or_else(|| AgentError::UnknownSession(start.session_id.clone()))?,
            )
        };
        let has_workspace = match &existing {
            Some(session) => !session.workspace.is_empty(),
            None => self
                .shared
                .executor
                .workspaces()
                .resolve(&start.workspace)?
                .is_some(),
        };
        let tools = self.resolve_tools(&start.tools)?;
        if !has_workspace {
            // A run never starts with tools it could only fail: they would each end in a
            // sandbox error, and the model would answer without them.
            let needing: Vec<&str> = tools
                .values()
                .filter(|tool| tool.profile.grants_workspace())
                .map(|tool| tool.name())
                .collect();
            if !needing.is_empty() {
                return Err(invalid(
                    "workspace",
                    format!(
                        "the run has no workspace, and its tools {} work in one: name a \
                         workspace inside the daemon's roots, or give the run only tools that \
                         need none",
                        needing.join(", ")
                    ),
                ));
            }
        }
        let session = match existing {
            Some(session) => session,
            None => self.create_session(&start.workspace, BTreeMap::new(), &owner.tenant)?,
        };
        let limits = self.limits(&start, &model);

        let run_id = ids::run_id();
        let trace_id = ids::trace_id();
        let record = RunRecord {
            run_id: run_id.clone(),
            session_id: session.session_id.clone(),
            state: RunState::Running,
            start: start.clone(),
            model: spec.to_string(),
            workspace: session.workspace.clone(),
            trace_id: trace_id.clone(),
            created_at_ms: ids::now_ms(),
            finished_at_ms: None,
            stop_reason: None,
            stop_detail: String::new(),
            final_text: String::new(),
            usage: pb::Usage::default(),
            steps: 0,
            last_seq: 0,
            tenant: owner.tenant.clone(),
        };
        let started = pb::RunEvent {
            run_id: run_id.clone(),
            seq: 1,
            step_id: String::new(),
            time_ms: ids::now_ms(),
            event: Some(pb::run_event::Event::RunStarted(pb::RunStarted {
                session_id: session.session_id.clone(),
                turn_id: ids::turn_id(),
                trace_id,
                input: start.input.clone(),
                model: spec.to_string(),
                tools: tools.keys().cloned().collect(),
                approval_policy: policy.to_wire() as i32,
                budgets: Some(pb::Budgets {
                    max_steps: limits.max_steps,
                    max_tokens: limits.max_tokens.unwrap_or(0),
                    max_wall_time_ms: u64::try_from(limits.wall_time.as_millis())
                        .unwrap_or(u64::MAX),
                    max_tool_calls: limits.max_tool_calls,
                    max_repeated_errors: limits.max_repeated_errors,
                    context_tokens: limits.context_tokens,
                }),
                workspace: session.workspace.clone(),
                stop_on_denial: start.stop_on_denial,
            })),
        };
        // The run and the event that says it started are one write: a crash in between
        // would leave a run that resumes without ever having started.
        self.shared.store.create_run(&record, &started)?;
        let log = Arc::new(RunLog::new(run_id.clone(), self.shared.store.clone(), 1));

        let live = self.launch(Launch {
            record: &record,
            session,
            provider,
            tools,
            policy,
            limits,
            state: LoopState {
                conversation: vec![checkpoint::SavedMessage::User {
                    text: start.input.clone(),
                }],
                sources: vec![String::new()],
                ..LoopState::default()
            },
            log,
            recorded: HashSet::new(),
        })?;
        Ok(live)
    }

    /// Starts the loop of a run that is recorded, from `state`.
    fn launch(&self, launch: Launch<'_>) -> Result<Arc<LiveRun>, AgentError> {
        let Launch {
            record,
            session,
            provider,
            tools,
            policy,
            limits,
            state,
            log,
            recorded,
        } = launch;
        let (input, input_receiver) = mpsc::unbounded_channel();
        let live = Arc::new(LiveRun {
            run_id: record.run_id.clone(),
            session_id: session.session_id.clone(),
            tenant: record.tenant.clone(),
            log,
            input,
            cancel: CancellationToken::new(),
            cancel_reason: Mutex::new(None),
            rejections: AtomicU32::new(0),
        });
        let elapsed_before = Duration::from_millis(state.elapsed_ms);
        let now = tokio::time::Instant::now();
        let run_loop = run::RunLoop {
            shared: self.shared.clone(),
            run: live.clone(),
            provider,
            tools,
            policy,
            deadline: now + limits.wall_time.saturating_sub(elapsed_before),
            limits,
            system: prompt::system_prompt(&record.start.instructions),
            stop_on_denial: record.start.stop_on_denial,
            input: input_receiver,
            conversation: state
                .conversation
                .into_iter()
                .map(provider::Message::from)
                .collect(),
            sources: state.sources,
            usage: state.usage.into(),
            steps: state.steps,
            failures: state.failures,
            pending: state.pending,
            elapsed_before,
            resumed_at: now,
            recorded,
            trace: RunTrace::new(
                self.shared.tracer.clone(),
                live.log.clone(),
                &record.trace_id,
            ),
            created_at_ms: record.created_at_ms,
            step_span: None,
            approved_hosts: Default::default(),
            session,
        };
        run_loop.checkpoint()?;
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(record.run_id.clone(), live.clone());
        let registry = self.live.clone();
        let run_id = record.run_id.clone();
        tokio::spawn(async move {
            run_loop.drive().await;
            registry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&run_id);
        });
        Ok(live)
    }

    /// Takes up every run a previous daemon left unfinished, each from its last checkpoint.
    /// Returns how many were resumed; a run that cannot be is finished with the reason.
    pub fn resume_unfinished(&self) -> Result<usize, AgentError> {
        for grant in self.shared.store.session_grants()? {
            self.shared.approvals.add_session_grant(grant);
        }
        let mut resumed = 0;
        for record in self.shared.store.unfinished_runs()? {
            let run_id = record.run_id.clone();
            match self.resume(&record) {
                Ok(true) => resumed += 1,
                Ok(false) => {}
                Err(err) => {
                    tracing::error!(run = %run_id, error = %err, "cannot resume run; finishing it");
                    let log =
                        RunLog::new(run_id.clone(), self.shared.store.clone(), record.last_seq);
                    let detail = format!("the run could not be resumed after a restart: {err}");
                    log.append(
                        "",
                        pb::run_event::Event::RunFinished(pb::RunFinished {
                            reason: pb::StopReason::ModelError as i32,
                            final_text: String::new(),
                            usage: Some(record.usage),
                            detail: detail.clone(),
                            steps: record.steps,
                        }),
                    )?;
                    self.shared.store.finish_run(
                        &run_id,
                        &RunEnd {
                            stop_reason: pb::StopReason::ModelError,
                            stop_detail: detail,
                            final_text: String::new(),
                            finished_at_ms: ids::now_ms(),
                        },
                    )?;
                }
            }
        }
        Ok(resumed)
    }

    /// Resumes one run; false when its log shows it had already finished.
    fn resume(&self, record: &RunRecord) -> Result<bool, AgentError> {
        let checkpoint = self.shared.store.latest_checkpoint(&record.run_id)?;
        let (state, checkpoint_id, checkpoint_seq) = match checkpoint {
            Some(checkpoint) => (
                LoopState::decode(&checkpoint.state).map_err(AgentError::Unresumable)?,
                checkpoint.checkpoint_id,
                checkpoint.seq,
            ),
            None => (
                LoopState {
                    conversation: vec![checkpoint::SavedMessage::User {
                        text: record.start.input.clone(),
                    }],
                    sources: vec![String::new()],
                    ..LoopState::default()
                },
                String::new(),
                0,
            ),
        };
        // What the log holds past the checkpoint: events not to record twice, or the end.
        let mut recorded = HashSet::new();
        let mut after = checkpoint_seq;
        loop {
            let batch = self.shared.store.events_after(&record.run_id, after, 512)?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for event in &batch {
                match &event.event {
                    Some(pb::run_event::Event::RunFinished(finished)) => {
                        self.shared.store.finish_run(
                            &record.run_id,
                            &RunEnd {
                                stop_reason: pb::StopReason::try_from(finished.reason)
                                    .unwrap_or(pb::StopReason::Unspecified),
                                stop_detail: finished.detail.clone(),
                                final_text: finished.final_text.clone(),
                                finished_at_ms: event.time_ms,
                            },
                        )?;
                        return Ok(false);
                    }
                    Some(event) => {
                        if let Some(key) = CallEvent::of(event) {
                            recorded.insert(key);
                        }
                    }
                    None => {}
                }
            }
        }
        let session = self
            .shared
            .store
            .session(&record.session_id)?
            .ok_or_else(|| AgentError::UnknownSession(record.session_id.clone()))?;
        let model = record.start.model.clone().unwrap_or_default();
        let spec = parse_model(&model)?;
        let provider = provider::build(&spec, &self.shared.settings.providers)
            .map_err(|err| AgentError::Unresumable(err.to_string()))?;
        // Tools gone since the run started are simply absent: the model is told so if it
        // proposes one.
        let registry = self.shared.executor.registry();
        let tools: BTreeMap<String, Arc<Tool>> = if record.start.tools.is_empty() {
            registry
                .tools()
                .map(|t| (t.name().to_owned(), t.clone()))
                .collect()
        } else {
            record
                .start
                .tools
                .iter()
                .filter_map(|name| registry.get(name).map(|tool| (name.clone(), tool)))
                .collect()
        };
        let limits = self.limits(&record.start, &model);
        let policy = ApprovalPolicy::from_wire(
            pb::ApprovalPolicy::try_from(record.start.approval_policy)
                .unwrap_or(pb::ApprovalPolicy::Unspecified),
        );
        self.shared
            .store
            .set_run_state(&record.run_id, RunState::Running)?;
        let log = Arc::new(RunLog::new(
            record.run_id.clone(),
            self.shared.store.clone(),
            after,
        ));
        let pending_calls = state.pending.as_ref().map_or(0, |pending| {
            pending.calls.len().saturating_sub(pending.next)
        });
        log.append(
            "",
            pb::run_event::Event::RunResumed(pb::RunResumed {
                checkpoint_id,
                checkpoint_seq,
                pending_calls: u32::try_from(pending_calls).unwrap_or(u32::MAX),
            }),
        )?;
        tracing::info!(run = %record.run_id, pending_calls, "resuming run");
        self.launch(Launch {
            record,
            session,
            provider,
            tools,
            policy,
            limits,
            state,
            log,
            recorded,
        })?;
        Ok(true)
    }

    fn resolve_tools(&self, names: &[String]) -> Result<BTreeMap<String, Arc<Tool>>, AgentError> {
        let registry = self.shared.executor.registry();
        if names.is_empty() {
            return Ok(registry
                .tools()
                .map(|tool| (tool.name().to_owned(), tool.clone()))
                .collect());
        }
        names
            .iter()
            .map(|name| {
                registry
                    .get(name)
                    .map(|tool| (name.clone(), tool))
                    .ok_or_else(|| AgentError::UnknownTool(name.clone()))
            })
            .collect()
    }

    fn limits(&self, start: &pb::StartRun, model: &pb::ModelConfig) -> RunLimits {
        let defaults = &self.shared.settings.defaults;
        let budgets = start.budgets.unwrap_or_default();
        let or = |value: u32, default: u32| if value == 0 { default } else { value };
        RunLimits {
            max_steps: or(budgets.max_steps, defaults.max_steps),
            max_tokens: (budgets.max_tokens > 0).then_some(budgets.max_tokens),
            wall_time: if budgets.max_wall_time_ms == 0 {
                defaults.wall_time
            } else {
                Duration::from_millis(budgets.max_wall_time_ms)
            },
            max_tool_calls: or(budgets.max_tool_calls, defaults.max_tool_calls),
            max_repeated_errors: or(budgets.max_repeated_errors, defaults.max_repeated_errors),
            context_tokens: if budgets.context_tokens == 0 {
                defaults.context_tokens
            } else {
                budgets.context_tokens
            },
            approval_timeout: if start.approval_timeout_ms == 0 {
                defaults.approval_timeout
            } else {
                Duration::from_millis(start.approval_timeout_ms)
            },
            max_output_tokens: or(model.max_output_tokens, defaults.max_output_tokens),
            temperature: model.temperature,
        }
    }

    /// Every event of a run after `after_seq`, then live ones until the run finishes.
    pub fn follow(
        &self,
        run_id: &str,
        after_seq: u64,
    ) -> Result<mpsc::Receiver<Result<pb::RunEvent, StoreError>>, AgentError> {
        if let Some(live) = self.live_run(run_id) {
            return Ok(live.log.follow(after_seq));
        }
        if self.shared.store.run(run_id)?.is_none() {
            return Err(AgentError::UnknownRun(run_id.to_owned()));
        }
        Ok(log::replay(
            self.shared.store.clone(),
            run_id.to_owned(),
            after_seq,
        ))
    }

    pub fn cancel(&self, run_id: &str, reason: &str) -> Result<(), AgentError> {
        let Some(live) = self.live_run(run_id) else {
            return Err(self.not_live(run_id)?);
        };
        let reason = if reason.trim().is_empty() {
            "cancelled by a client".to_owned()
        } else {
            format!("cancelled by a client: {}", reason.trim())
        };
        live.cancel_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
        live.cancel.cancel();
        Ok(())
    }

    /// More input from the user, read before the run's next model call.
    pub fn send_input(&self, run_id: &str, text: String) -> Result<(), AgentError> {
        if text.len() > MAX_INPUT_BYTES {
            return Err(AgentError::Invalid {
                field: "input.text",
                reason: format!(
                    "the input is {} bytes; the limit is {MAX_INPUT_BYTES} bytes",
                    text.len()
                ),
            });
        }
        let Some(live) = self.live_run(run_id) else {
            return Err(self.not_live(run_id)?);
        };
        live.input
            .send(text)
            .map_err(|_| AgentError::RunFinished(run_id.to_owned()))
    }

    /// A decision from a run's own stream: it may only answer that run's approvals. A refused
    /// decision is recorded in the run's log, which is how that client learns of it.
    pub fn decide_for_run(&self, run_id: &str, decision: &pb::ApprovalDecision) {
        let approver = Approver::RunClient {
            run_id: run_id.to_owned(),
        };
        let Err(err) = self.shared.approvals.decide(decision, &approver) else {
            return;
        };
        self.refuse_decision_for_run(run_id, &decision.approval_id, &err.to_string());
    }

    /// Records in a run's log that a decision sent on its stream did not count, and why.
    pub fn refuse_decision_for_run(&self, run_id: &str, approval_id: &str, reason: &str) {
        let Some(live) = self.live_run(run_id) else {
            return;
        };
        if live.rejections.fetch_add(1, Ordering::Relaxed) >= MAX_RECORDED_REJECTIONS {
            return;
        }
        let recorded = live.log.append(
            "",
            pb::run_event::Event::DecisionRejected(pb::DecisionRejected {
                approval_id: approval_id.to_owned(),
                reason: reason.to_owned(),
            }),
        );
        if let Err(store) = recorded {
            tracing::warn!(run = run_id, error = %store, "cannot record a refused decision");
        }
    }

    /// A decision from an approver console, for any run.
    pub fn decide(&self, decision: &pb::ApprovalDecision) -> Result<(), DecisionError> {
        self.shared.approvals.decide(decision, &Approver::Console)
    }

    /// The sequence number of a run's last event.
    pub fn last_seq(&self, run_id: &str) -> Result<u64, AgentError> {
        match self.live_run(run_id) {
            Some(live) => Ok(live.log.last_seq()),
            None => Ok(self.run(run_id)?.last_seq),
        }
    }

    pub fn run(&self, run_id: &str) -> Result<RunRecord, AgentError> {
        self.shared
            .store
            .run(run_id)?
            .ok_or_else(|| AgentError::UnknownRun(run_id.to_owned()))
    }

    /// A run and its spans.
    pub fn trace(&self, run_id: &str) -> Result<(RunRecord, Vec<pb::Span>), AgentError> {
        let run = self.run(run_id)?;
        let spans = self.shared.store.spans(run_id)?;
        Ok((run, spans))
    }

    pub fn list_runs(
        &self,
        filter: &RunFilter,
        limit: usize,
        after: Option<&RunCursor>,
    ) -> Result<(Vec<RunRecord>, Option<RunCursor>), AgentError> {
        Ok(self.shared.store.list_runs(filter, limit, after)?)
    }

    /// The error for a run that is not live: unknown, or finished.
    fn not_live(&self, run_id: &str) -> Result<AgentError, AgentError> {
        Ok(match self.shared.store.run(run_id)? {
            Some(_) => AgentError::RunFinished(run_id.to_owned()),
            None => AgentError::UnknownRun(run_id.to_owned()),
        })
    }

    /// Cancels every live run (at shutdown).
    pub fn cancel_all(&self, reason: &str) {
        let runs: Vec<_> = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        for run_id in runs {
            let _ = self.cancel(&run_id, reason);
        }
    }
}

/// `openai:MODEL`, `anthropic:MODEL` or `scripted` (with the script in the config).
fn parse_model(config: &pb::ModelConfig) -> Result<ModelSpec, AgentError> {
    let invalid = |field, reason: String| Err(AgentError::Invalid { field, reason });
    match config.model.split_once(':') {
        Some(("openai", model)) if !model.is_empty() => Ok(ModelSpec::OpenAi {
            model: model.to_owned(),
        }),
        Some(("anthropic", model)) if !model.is_empty() => Ok(ModelSpec::Anthropic {
            model: model.to_owned(),
        }),
        None if config.model == "scripted" => {
            if config.script.trim().is_empty() {
                return invalid(
                    "model.script",
                    "the scripted model needs its script in `model.script`".into(),
                );
            }
            Ok(ModelSpec::Scripted {
                script: config.script.clone(),
            })
        }
        _ => invalid(
            "model.model",
            format!(
                "unknown model `{}`: use openai:MODEL, anthropic:MODEL or scripted",
                config.model
            ),
        ),
    }
}
