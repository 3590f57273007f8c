//! The agent runtime: sessions, the runs of the agent loop, and their live state.
//!
//! A run belongs to the daemon, not to the client that started it: it goes on when its
//! client disconnects, and any client can follow it from any point of its event log. Live
//! runs are kept here; finished ones live only in the store. A new run and a resumed one are
//! set up by the same code ([`AgentRuntime::resolve`], [`AgentRuntime::launch`]): they differ
//! only in where their state comes from.

mod changes;

pub use changes::changes_page;
mod context;
mod log;
mod observation;
mod preview;
mod prompt;
pub mod provider;
mod recording;
mod remote;
mod run;
mod session;
#[cfg(test)]
pub(crate) mod testing;
mod tokens;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::domain::{StopReason, Usage};
use crate::ids::{self, RunId, SessionId, TraceId, TurnId};
use crate::policy::{ApprovalBroker, ApprovalPolicy, Approver, DecisionError, Verdict};
use crate::store::{
    RunCommand, RunCursor, RunEnd, RunFilter, RunRecord, RunState, SessionRecord, Store, StoreError,
};
use crate::tools::{Executor, Tool};
use crate::trace::{RunTrace, Tracer};
use crate::wire;
use crate::workspace::WorkspaceError;
use log::{RunChanges, RunLog};
use run::LoopState;
use run::{Approvals, Budget, CallEvent, Ending, Recorder, RunLoop};

pub(crate) use preview::preview;
pub use provider::{ModelSpec, ProviderSettings, RetryPolicy};
pub use run::RunLimits;

/// Defaults for what a client leaves unset, and ceilings it cannot pass.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDefaults {
    pub max_steps: u32,
    pub wall_time: Duration,
    pub max_tool_calls: u32,
    pub max_repeated_errors: u32,
    pub context_tokens: u64,
    pub max_repeated_calls: u32,
    pub max_idle_steps: u32,
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
            // Five identical answers to the same question are four too many; a model that
            // re-reads a file after an edit gets a different result and is not counted.
            max_repeated_calls: 5,
            // Eight steps in a row that learn and change nothing: long enough for a model
            // that checks a few things before it acts, short enough to stop a spinning one.
            max_idle_steps: 8,
            approval_timeout: Duration::from_secs(5 * 60),
            max_output_tokens: 4096,
        }
    }
}

#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub providers: ProviderSettings,
    pub defaults: RunDefaults,
    /// Whether each model call's wire exchange is kept with its run, the run's cassette
    /// (`GetCassette`). On by default: any run can become an eval case. An operator may
    /// turn it off where the requests are too large to keep twice (they are in the
    /// checkpoints' conversation already) or must not be kept at all.
    pub keep_exchanges: bool,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            providers: ProviderSettings::default(),
            defaults: RunDefaults::default(),
            keep_exchanges: true,
        }
    }
}

/// A run's own stream may send this many refused decisions before they stop being recorded:
/// enough to debug a client, too few to flood the log.
const MAX_RECORDED_REJECTIONS: u32 = 100;

/// The task's input is short: a sentence, a page at most.
pub const MAX_INPUT_BYTES: usize = 256 * 1024;

/// Events read from the store per query while a resumed run reads its log.
const RESUME_BATCH: usize = 512;

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
    #[error("run `{0}` is still going; cancel it or wait for it to finish first")]
    RunLive(String),
    #[error("run `{run_id}` has no cassette: {reason}")]
    NoCassette { run_id: String, reason: String },
    #[error(
        "session `{session_id}` has run `{run_id}` going; send it input, or wait for it to \
         finish, then start the next run"
    )]
    SessionBusy { session_id: String, run_id: String },
    #[error("tenant `{tenant}` may not use tool `{tool}`")]
    ToolNotAllowed { tenant: String, tool: String },
    #[error("no content `{0}` among the run's changes (or the blob store no longer keeps it)")]
    UnknownBlob(String),
    /// A revert would overwrite changes made since by something other than the run.
    #[error("{0}; revert with force (`airlock revert --force`) to overwrite them anyway")]
    RevertConflicts(String),
    /// The change-set store failed (reading a blob, copying or reverting a workspace).
    #[error("{0}")]
    Changes(String),
    /// An approval's answer that did not count.
    #[error(transparent)]
    Decision(#[from] DecisionError),
    /// The daemon of the fleet that executes the run did not answer a command in time.
    #[error(
        "the daemon executing run `{run_id}` did not answer within its lease, so the request {}; \
         try again once another daemon took the run over",
        if *.maybe_applied { "may or may not have been applied" } else { "was not applied" }
    )]
    Unanswered { run_id: String, maybe_applied: bool },
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
    /// The tools the tenant may use; none = every tool.
    pub allowed_tools: Option<BTreeSet<String>>,
}

impl RunOwner {
    /// Holds a run's tools to the tenant's: "every tool" becomes every tool the tenant may use
    /// that is served, and a tool it may not use is refused.
    fn restrict_tools(
        &self,
        tools: &mut Vec<String>,
        registry: &crate::tools::Registry,
    ) -> Result<(), AgentError> {
        let Some(allowed) = &self.allowed_tools else {
            return Ok(());
        };
        if tools.is_empty() {
            tools.extend(
                allowed
                    .iter()
                    .filter(|name| registry.get(name).is_some())
                    .cloned(),
            );
        }
        match tools.iter().find(|tool| !allowed.contains(*tool)) {
            Some(tool) => Err(AgentError::ToolNotAllowed {
                tenant: self.tenant.clone(),
                tool: tool.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// What every run shares.
pub(crate) struct Shared {
    pub executor: Arc<Executor>,
    pub store: Arc<dyn Store>,
    pub approvals: Arc<ApprovalBroker>,
    pub tracer: Arc<Tracer>,
    pub settings: AgentSettings,
    /// Every run's committed events, by run: what live lists of runs follow.
    pub run_changes: RunChanges,
    /// The fleet, when the store is shared: how runs other daemons execute are followed and
    /// steered.
    pub remote: OnceLock<remote::Remote>,
}

/// How a run is stopped from outside: a token its waits watch, and why it was pulled.
#[derive(Debug, Default)]
pub struct CancelSwitch {
    token: CancellationToken,
    reason: Mutex<Option<String>>,
}

impl CancelSwitch {
    /// Pulls the switch; the first reason given is the one kept.
    pub fn pull(&self, reason: String) {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
        self.token.cancel();
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    pub fn is_pulled(&self) -> bool {
        self.token.is_cancelled()
    }

    pub fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "cancelled".into())
    }
}

/// A run that is going on now.
pub struct LiveRun {
    pub run_id: RunId,
    pub session_id: SessionId,
    /// The tenant that started it.
    pub tenant: String,
    pub log: Arc<RunLog>,
    input: mpsc::UnboundedSender<String>,
    cancel: Arc<CancelSwitch>,
    rejections: AtomicU32,
    /// Set as the loop starts recording the run's end: a client may already hold the
    /// `RunFinished` event, and the run does no more work.
    finishing: AtomicBool,
    /// Turns true once the run has left the live registry, its end and its last
    /// conversation committed.
    gone: watch::Sender<bool>,
}

/// How long a new run of a session waits for the session's finishing run to commit its end
/// before it is refused as busy. A client that saw one run's `RunFinished` starts the next at
/// once; the end's writes are a few milliseconds, a store under load may take seconds.
const FINISHING_WAIT: Duration = Duration::from_secs(10);

impl LiveRun {
    /// Whether the run is recording its end (or has recorded it).
    pub fn is_finishing(&self) -> bool {
        self.finishing.load(Ordering::Acquire)
    }

    /// Waits, at most `limit`, for a finishing run to leave the live registry; false for a
    /// run still at work, or one whose end is not committed within `limit`.
    async fn left_within(&self, limit: Duration) -> bool {
        if !self.is_finishing() {
            return false;
        }
        let mut gone = self.gone.subscribe();
        tokio::time::timeout(limit, gone.wait_for(|gone| *gone))
            .await
            .is_ok_and(|waited| waited.is_ok())
    }
}

/// A run just started, and its events from the first on.
pub struct Started {
    pub live: Arc<LiveRun>,
    pub events: mpsc::Receiver<Result<pb::RunEvent, StoreError>>,
}

/// What a run's request resolves to, the same for a new run and a resumed one.
struct Resolved {
    provider: Arc<dyn provider::ModelProvider>,
    /// How the model counts tokens.
    tokenizer: tokens::Tokenizer,
    model: String,
    tools: BTreeMap<String, Arc<Tool>>,
    policy: ApprovalPolicy,
    limits: RunLimits,
}

/// How [`AgentRuntime::resolve`] treats tools that are not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// A new run naming one is refused.
    Refuse,
    /// A resumed run goes on without it: the model is told so if it proposes it.
    Skip,
}

pub struct AgentRuntime {
    shared: Arc<Shared>,
    live: Arc<Mutex<HashMap<RunId, Arc<LiveRun>>>>,
    /// Where runs whose loop gave up unfinished are announced (see [`Ending::Abandoned`]),
    /// once a fleet listens; a daemon on a store of its own resumes them at its next start.
    abandoned: Arc<Mutex<Option<mpsc::UnboundedSender<RunId>>>>,
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
                run_changes: RunChanges::default(),
                remote: OnceLock::new(),
            }),
            live: Arc::default(),
            abandoned: Arc::default(),
        }
    }

    /// The runs whose loop gives up unfinished from now on (their log could not be
    /// written), for the fleet to hand on.
    pub fn abandoned_runs(&self) -> mpsc::UnboundedReceiver<RunId> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *self
            .abandoned
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(sender);
        receiver
    }

    /// The tools runs may be given.
    pub fn registry(&self) -> &Arc<crate::tools::Registry> {
        self.shared.executor.registry()
    }

    /// The daemon's workspace roots.
    pub fn workspaces(&self) -> &crate::workspace::WorkspaceRoots {
        self.shared.executor.workspaces()
    }

    pub fn approvals(&self) -> &Arc<ApprovalBroker> {
        &self.shared.approvals
    }

    /// How long a question waits for an answer unless a run says otherwise.
    pub fn approval_timeout(&self) -> std::time::Duration {
        self.shared.settings.defaults.approval_timeout
    }

    /// The runs going on now.
    pub fn live_run_ids(&self) -> Vec<RunId> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    fn live_run(&self, run_id: &RunId) -> Option<Arc<LiveRun>> {
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
            .filter(|run| run.tenant == tenant && !run.is_finishing())
            .count()
    }

    /// The tenant that owns run `run_id`.
    pub async fn run_owner(&self, run_id: &RunId) -> Result<String, AgentError> {
        if let Some(live) = self.live_run(run_id) {
            return Ok(live.tenant.clone());
        }
        Ok(self.run(run_id).await?.tenant)
    }

    /// Checks and records a new run of `owner`, then starts its loop.
    pub async fn start(
        &self,
        start: pb::StartRun,
        owner: &RunOwner,
    ) -> Result<Started, AgentError> {
        self.start_from(start, owner, Vec::new()).await
    }

    /// Starts a run whose conversation begins with `earlier` (a fork's), then `start.input`;
    /// without `earlier`, a run in an existing session continues its conversation.
    pub(crate) async fn start_from(
        &self,
        start: pb::StartRun,
        owner: &RunOwner,
        earlier: Vec<context::Entry>,
    ) -> Result<Started, AgentError> {
        let invalid = |field, reason: String| AgentError::Invalid { field, reason };
        if self.live_runs_of(&owner.tenant) >= owner.max_live_runs as usize {
            return Err(AgentError::TooManyRuns {
                tenant: owner.tenant.clone(),
                max: owner.max_live_runs,
            });
        }
        check_input(&start.input, "input")?;
        let existing = if start.session_id.is_empty() {
            None
        } else {
            let session_id = SessionId::parse(&start.session_id)
                .map_err(|reason| invalid("session_id", reason))?;
            Some(self.session(&session_id, &owner.tenant).await?.session)
        };
        let mut start = match &existing {
            Some(session) => {
                if let Some(live) = self.live_run_in(&session.session_id)
                    && !live.left_within(FINISHING_WAIT).await
                {
                    return Err(AgentError::SessionBusy {
                        session_id: session.session_id.to_string(),
                        run_id: live.run_id.to_string(),
                    });
                }
                session::inherit(&session.settings, start)?
            }
            None => start,
        };
        owner.restrict_tools(&mut start.tools, self.registry())?;
        let resolved = self.resolve(&start, Missing::Refuse)?;
        let has_workspace = match &existing {
            Some(session) => session.workspace.is_some(),
            None => self
                .shared
                .executor
                .workspaces()
                .resolve(wire::non_empty(&start.workspace))?
                .is_some(),
        };
        if !has_workspace {
            // A run never starts with tools it could only fail: they would each end in a
            // sandbox error, and the model would answer without them.
            let needing: Vec<&str> = resolved
                .tools
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
            None => {
                self.create_session(
                    wire::non_empty(&start.workspace),
                    BTreeMap::new(),
                    pb::SessionSettings::default(),
                    &owner.tenant,
                )
                .await?
            }
        };
        let (continues, earlier) = if earlier.is_empty() {
            self.history(&session.session_id).await?
        } else {
            (None, earlier)
        };
        let history_messages = earlier
            .iter()
            .filter(|entry| entry.part == context::Part::History)
            .count();
        let project = match session.workspace.clone() {
            Some(workspace) => tokio::task::spawn_blocking(move || {
                context::project::read(std::path::Path::new(&workspace))
            })
            .await
            .ok()
            .flatten(),
            None => None,
        };

        let run_id = RunId::new();
        let trace_id = TraceId::new();
        let turn_id = TurnId::new();
        let record = RunRecord {
            run_id: run_id.clone(),
            session_id: session.session_id.clone(),
            state: RunState::Running,
            start: start.clone(),
            model: resolved.model.clone(),
            workspace: session.workspace.clone(),
            trace_id: trace_id.clone(),
            created_at_ms: ids::now_ms(),
            finished_at_ms: None,
            stop_reason: None,
            stop_detail: String::new(),
            final_text: String::new(),
            usage: Usage::default(),
            steps: 0,
            last_seq: 0,
            tenant: owner.tenant.clone(),
        };
        let limits = &resolved.limits;
        let started = pb::RunEvent {
            run_id: run_id.to_string(),
            seq: 1,
            step_id: String::new(),
            time_ms: ids::now_ms(),
            turn_id: turn_id.to_string(),
            delta: false,
            event: Some(pb::run_event::Event::RunStarted(pb::RunStarted {
                session_id: session.session_id.to_string(),
                turn_id: turn_id.to_string(),
                trace_id: trace_id.to_string(),
                input: start.input.clone(),
                model: resolved.model.clone(),
                tools: resolved.tools.keys().cloned().collect(),
                approval_policy: resolved.policy.to_wire() as i32,
                budgets: Some(limits.to_wire()),
                workspace: session.workspace.clone().unwrap_or_default(),
                stop_on_denial: start.stop_on_denial,
                continues_run_id: continues.map(RunId::into_string).unwrap_or_default(),
                history_messages: u32::try_from(history_messages).unwrap_or(u32::MAX),
                project_instructions: project.is_some(),
            })),
        };
        // The run and the event that says it started are one write: a crash in between
        // would leave a run that resumes without ever having started.
        self.shared.store.create_run(&record, &started).await?;
        let log = Arc::new(RunLog::new(
            run_id,
            self.shared.store.clone(),
            1,
            &turn_id,
            self.shared.run_changes.clone(),
        ));
        let mut state = LoopState::start_after(earlier, &start.input);
        state.turn_id = Some(turn_id);
        state.project_instructions = project;
        // Subscribed before the loop runs: a streamed piece reaches only those listening as
        // it goes, and the client that starts a run must not miss its first answer's.
        let events = log.follow(0, self.notices());
        let live = self.launch(&record, session, resolved, state, log, HashSet::new())?;
        Ok(Started { live, events })
    }

    /// The provider, tools, policy and limits a run's request asks for.
    fn resolve(&self, start: &pb::StartRun, missing: Missing) -> Result<Resolved, AgentError> {
        let invalid = |field, reason: String| AgentError::Invalid { field, reason };
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
                ModelSpec::Replay { .. } => "model.cassette",
                ModelSpec::OpenAi { .. } | ModelSpec::Anthropic { .. } => "model.model",
            };
            invalid(field, err.to_string())
        })?;
        let registry = self.shared.executor.registry();
        let tools: BTreeMap<String, Arc<Tool>> = if start.tools.is_empty() {
            registry
                .tools()
                .map(|tool| (tool.name().to_owned(), tool.clone()))
                .collect()
        } else {
            let mut tools = BTreeMap::new();
            for name in &start.tools {
                match (registry.get(name), missing) {
                    (Some(tool), _) => {
                        tools.insert(name.clone(), tool);
                    }
                    (None, Missing::Skip) => {}
                    (None, Missing::Refuse) => return Err(AgentError::UnknownTool(name.clone())),
                }
            }
            tools
        };
        // By the model that answers: a replayed run counts as its recording did, so that
        // its context is cut where the recording's was.
        let described = provider.describe();
        let tokenizer = match described.split_once(':') {
            Some(("openai", model)) => tokens::Tokenizer::for_openai(model),
            _ => tokens::Tokenizer::estimate(),
        };
        Ok(Resolved {
            provider,
            tokenizer,
            model: spec.to_string(),
            tools,
            policy,
            limits: self.limits(start, &model),
        })
    }

    /// Starts the loop of a recorded run, from `state`.
    fn launch(
        &self,
        record: &RunRecord,
        session: SessionRecord,
        resolved: Resolved,
        state: LoopState,
        log: Arc<RunLog>,
        recorded: HashSet<(CallEvent, ids::CallId)>,
    ) -> Result<Arc<LiveRun>, AgentError> {
        let (input, input_receiver) = mpsc::unbounded_channel();
        let live = Arc::new(LiveRun {
            run_id: record.run_id.clone(),
            session_id: session.session_id.clone(),
            tenant: record.tenant.clone(),
            log: log.clone(),
            input,
            cancel: Arc::default(),
            rejections: AtomicU32::new(0),
            finishing: AtomicBool::new(false),
            gone: watch::Sender::new(false),
        });
        let trace = RunTrace::new(
            self.shared.tracer.clone(),
            log.clone(),
            record.run_id.as_str(),
            record.trace_id.as_str(),
        );
        let approvals = Arc::new(Approvals::new(
            self.shared.approvals.clone(),
            self.shared.store.clone(),
            log.clone(),
            session.session_id.clone(),
            resolved.policy,
            resolved.limits.approval_timeout,
        ));
        let budget = Budget::new(
            resolved.limits,
            state.usage,
            state.steps,
            state.failures,
            Duration::from_millis(state.elapsed_ms),
            live.cancel.clone(),
        );
        let tokenizer = resolved.tokenizer.clone();
        let run_loop = RunLoop {
            shared: self.shared.clone(),
            run: live.clone(),
            provider: if self.shared.settings.keep_exchanges {
                recording::Recording::wrap(
                    resolved.provider,
                    self.shared.store.clone(),
                    record.run_id.clone(),
                )
            } else {
                resolved.provider
            },
            tool_set: run::tool_set(&resolved.tools, &tokenizer),
            counter: context::Counter::new(tokenizer, state.calibration),
            tools: resolved.tools,
            policy: resolved.policy,
            system: prompt::system_prompt(&record.start.instructions),
            stop_on_denial: record.start.stop_on_denial,
            input: input_receiver,
            conversation: state.conversation,
            project: state.project_instructions,
            fixed: context::Fixed::default(),
            turn_id: state.turn_id.unwrap_or_else(TurnId::new),
            progress: state.progress,
            compaction_retry_step: state.compaction_retry_step,
            budget,
            pending: state.pending,
            recorder: Recorder::new(
                log,
                trace,
                self.shared.store.clone(),
                recorded,
                record.created_at_ms,
            ),
            approvals,
            step_span: None,
            session,
            ignores: None,
        };
        drop(run_loop.checkpoint());
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(record.run_id.clone(), live.clone());
        let registry = self.live.clone();
        let abandoned = self.abandoned.clone();
        let run_id = record.run_id.clone();
        tokio::spawn(async move {
            let ending = run_loop.drive().await;
            let left = registry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&run_id);
            if let Some(left) = left {
                left.gone.send_replace(true);
            }
            if ending == Ending::Abandoned
                && let Some(listener) = abandoned
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
            {
                let _ = listener.send(run_id);
            }
        });
        Ok(live)
    }

    /// Loads the approvals granted for whole sessions, as a daemon starts.
    pub async fn load_session_grants(&self) -> Result<(), AgentError> {
        for grant in self.shared.store.session_grants().await? {
            self.shared.approvals.add_session_grant(grant);
        }
        Ok(())
    }

    /// Takes up every run a previous daemon left unfinished, each from its last checkpoint.
    /// Returns how many were resumed.
    pub async fn resume_unfinished(&self) -> Result<usize, AgentError> {
        let mut resumed = 0;
        for record in self.shared.store.unfinished_runs().await? {
            if self.take_over(&record).await? {
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// Takes up one run another daemon (or this one's previous life) left unfinished, from
    /// its last checkpoint; false when its log shows it had finished. A run that cannot be
    /// resumed is finished with the reason; a store that fails on the way (or a run another
    /// daemon of the fleet took meanwhile) is the caller's error, and the run stays as it is.
    pub async fn take_over(&self, record: &RunRecord) -> Result<bool, AgentError> {
        match self.resume(record).await {
            Ok(resumed) => Ok(resumed),
            Err(err @ AgentError::Store(_)) => Err(err),
            Err(err) => {
                tracing::error!(run = %record.run_id, error = %err, "cannot resume run; finishing it");
                self.give_up(record, &err).await?;
                Ok(false)
            }
        }
    }

    /// Ends a run that cannot be resumed, saying why.
    async fn give_up(&self, record: &RunRecord, err: &AgentError) -> Result<(), AgentError> {
        // The last event's turn is the one the run ends in.
        let turn_id = self
            .shared
            .store
            .events_after(&record.run_id, record.last_seq.saturating_sub(1), 1)
            .await?
            .first()
            .filter(|event| !event.turn_id.is_empty())
            .map_or_else(TurnId::new, |event| {
                TurnId::from_stored(event.turn_id.clone())
            });
        let log = RunLog::new(
            record.run_id.clone(),
            self.shared.store.clone(),
            record.last_seq,
            &turn_id,
            self.shared.run_changes.clone(),
        );
        let detail = format!("the run could not be resumed after a restart: {err}");
        log.append(
            None,
            pb::run_event::Event::RunFinished(pb::RunFinished {
                reason: pb::StopReason::ModelError as i32,
                final_text: String::new(),
                usage: Some(wire::usage(&record.usage)),
                detail: detail.clone(),
                steps: record.steps,
            }),
        );
        log.committed().await?;
        self.shared
            .store
            .finish_run(
                &record.run_id,
                &RunEnd {
                    stop_reason: StopReason::ModelError,
                    stop_detail: detail,
                    final_text: String::new(),
                    finished_at_ms: ids::now_ms(),
                },
            )
            .await?;
        Ok(())
    }

    /// Resumes one run; false when its log shows it had already finished.
    async fn resume(&self, record: &RunRecord) -> Result<bool, AgentError> {
        let store = &self.shared.store;
        let checkpoint = store.latest_checkpoint(&record.run_id).await?;
        let (state, checkpoint_id, checkpoint_seq): (LoopState, String, u64) = match checkpoint {
            Some(checkpoint) => (
                LoopState::decode(&checkpoint.state).map_err(AgentError::Unresumable)?,
                checkpoint.checkpoint_id,
                checkpoint.seq,
            ),
            None => (LoopState::start(&record.start.input), String::new(), 0),
        };
        let mut state = state;
        // What the log holds past the checkpoint: events not to record twice, input the
        // checkpoint does not have yet, the turn it started, or the end.
        let mut recorded = HashSet::new();
        let mut after = checkpoint_seq;
        loop {
            let batch = store
                .events_after(&record.run_id, after, RESUME_BATCH)
                .await?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for event in &batch {
                match &event.event {
                    Some(pb::run_event::Event::RunFinished(finished)) => {
                        let reason = pb::StopReason::try_from(finished.reason)
                            .ok()
                            .and_then(wire::stop_reason_from)
                            .unwrap_or(StopReason::ModelError);
                        store
                            .finish_run(
                                &record.run_id,
                                &RunEnd {
                                    stop_reason: reason,
                                    stop_detail: finished.detail.clone(),
                                    final_text: finished.final_text.clone(),
                                    finished_at_ms: event.time_ms,
                                },
                            )
                            .await?;
                        return Ok(false);
                    }
                    Some(pb::run_event::Event::UserInput(input)) => {
                        state.conversation.push(context::Entry {
                            message: provider::Message::User {
                                text: input.text.clone(),
                            },
                            source: event.step_id.clone(),
                            part: context::Part::Run,
                            counted: context::Counted::default(),
                        });
                    }
                    Some(event) => {
                        if let Some(key) = CallEvent::of(event) {
                            recorded.insert(key);
                        }
                    }
                    None => {}
                }
                if !event.turn_id.is_empty() {
                    state.turn_id = Some(TurnId::from_stored(event.turn_id.clone()));
                }
            }
        }
        let session = store
            .session(&record.session_id)
            .await?
            .ok_or_else(|| AgentError::UnknownSession(record.session_id.to_string()))?;
        let resolved = self
            .resolve(&record.start, Missing::Skip)
            .map_err(|err| AgentError::Unresumable(err.to_string()))?;
        drop(store.set_run_state(&record.run_id, RunState::Running));
        let turn_id = state.turn_id.get_or_insert_with(TurnId::new).clone();
        let log = Arc::new(RunLog::new(
            record.run_id.clone(),
            store.clone(),
            after,
            &turn_id,
            self.shared.run_changes.clone(),
        ));
        let pending_calls = state.pending.as_ref().map_or(0, |pending| {
            pending.calls.len().saturating_sub(pending.next)
        });
        log.append(
            None,
            pb::run_event::Event::RunResumed(pb::RunResumed {
                checkpoint_id,
                checkpoint_seq,
                pending_calls: u32::try_from(pending_calls).unwrap_or(u32::MAX),
            }),
        );
        log.committed().await?;
        tracing::info!(run = %record.run_id, pending_calls, "resuming run");
        self.launch(record, session, resolved, state, log, recorded)?;
        Ok(true)
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
            max_repeated_calls: or(budgets.max_repeated_calls, defaults.max_repeated_calls),
            max_idle_steps: or(budgets.max_idle_steps, defaults.max_idle_steps),
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
    pub async fn follow(
        &self,
        run_id: &RunId,
        after_seq: u64,
    ) -> Result<mpsc::Receiver<Result<pb::RunEvent, StoreError>>, AgentError> {
        if let Some(live) = self.live_run(run_id) {
            return Ok(live.log.follow(after_seq, self.notices()));
        }
        // Subscribed before the store is read: an event committed in between is announced.
        let notices = self.notices();
        if self.shared.store.run(run_id).await?.is_none() {
            return Err(AgentError::UnknownRun(run_id.to_string()));
        }
        Ok(log::replay(
            self.shared.store.clone(),
            run_id.clone(),
            after_seq,
            notices,
        ))
    }

    pub async fn cancel(&self, run_id: &RunId, reason: &str) -> Result<(), AgentError> {
        let Some(live) = self.live_run(run_id) else {
            let command = RunCommand::Cancel {
                reason: reason.to_owned(),
            };
            return self.command_elsewhere(run_id, &command).await;
        };
        live.cancel.pull(cancel_reason(reason));
        Ok(())
    }

    /// More input from the user, read before the run's next model call: a new turn.
    pub async fn send_input(&self, run_id: &RunId, text: String) -> Result<(), AgentError> {
        check_input(&text, "input.text")?;
        let Some(live) = self.live_run(run_id) else {
            return self
                .command_elsewhere(run_id, &RunCommand::Input { text })
                .await;
        };
        live.input
            .send(text)
            .map_err(|_| AgentError::RunFinished(run_id.to_string()))
    }

    /// A decision from a run's own stream: it may only answer that run's approvals. A refused
    /// decision is recorded in the run's log, which is how that client learns of it — also
    /// when another daemon of the fleet executes the run, and applies it.
    pub async fn decide_for_run(&self, run_id: &RunId, verdict: &Verdict) {
        if self.live_run(run_id).is_none() && self.remote().is_some() {
            let command = RunCommand::Decide {
                verdict: verdict.clone(),
                from_run_stream: true,
            };
            if let Err(err) = self.command_elsewhere(run_id, &command).await {
                tracing::debug!(run = %run_id, error = %err, "a decision from a run stream was not applied");
            }
            return;
        }
        let approver = Approver::RunClient {
            run_id: run_id.clone(),
        };
        let Err(err) = self.shared.approvals.decide(verdict, &approver) else {
            return;
        };
        self.refuse_decision_for_run(run_id, &verdict.approval_id, &err.to_string());
    }

    /// Records in a run's log that a decision sent on its stream did not count, and why.
    pub fn refuse_decision_for_run(&self, run_id: &RunId, approval_id: &str, reason: &str) {
        let Some(live) = self.live_run(run_id) else {
            return;
        };
        if live.rejections.fetch_add(1, Ordering::Relaxed) >= MAX_RECORDED_REJECTIONS {
            return;
        }
        live.log.append(
            None,
            pb::run_event::Event::DecisionRejected(pb::DecisionRejected {
                approval_id: approval_id.to_owned(),
                reason: reason.to_owned(),
            }),
        );
    }

    /// The id of each run as its events are committed, from now on.
    pub fn run_changes(&self) -> tokio::sync::broadcast::Receiver<RunId> {
        self.shared.run_changes.subscribe()
    }

    pub async fn run(&self, run_id: &RunId) -> Result<RunRecord, AgentError> {
        self.shared
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| AgentError::UnknownRun(run_id.to_string()))
    }

    /// A finished run's model exchanges as a cassette.
    pub async fn cassette(&self, run_id: &RunId) -> Result<pb::GetCassetteResponse, AgentError> {
        let run = self.run(run_id).await?;
        if self.live_run(run_id).is_some() || run.state != RunState::Finished {
            return Err(AgentError::RunLive(run_id.to_string()));
        }
        let first = self.shared.store.events_after(run_id, 0, 1).await?;
        let started = first.iter().find_map(|event| match &event.event {
            Some(pb::run_event::Event::RunStarted(started)) => Some(started),
            _ => None,
        });
        let stored = self.shared.store.exchanges(run_id).await?;
        let cassette = recording::cassette(&run, started, &stored)?;
        Ok(pb::GetCassetteResponse {
            cassette: recording::encode(&cassette, &run)?,
            model: cassette.model,
            exchanges: u32::try_from(cassette.exchanges.len()).unwrap_or(u32::MAX),
        })
    }

    /// The sequence number of a run's last event.
    pub async fn last_seq(&self, run_id: &RunId) -> Result<u64, AgentError> {
        match self.live_run(run_id) {
            Some(live) => Ok(live.log.last_seq()),
            None => Ok(self.run(run_id).await?.last_seq),
        }
    }

    /// A run and its spans.
    pub async fn trace(&self, run_id: &RunId) -> Result<(RunRecord, Vec<pb::Span>), AgentError> {
        let run = self.run(run_id).await?;
        let spans = self.shared.store.spans(run_id).await?;
        Ok((run, spans))
    }

    pub async fn list_runs(
        &self,
        filter: &RunFilter,
        limit: usize,
        after: Option<&RunCursor>,
    ) -> Result<(Vec<RunRecord>, Option<RunCursor>), AgentError> {
        Ok(self.shared.store.list_runs(filter, limit, after).await?)
    }

    /// Cancels every live run (at shutdown).
    pub fn cancel_all(&self, reason: &str) {
        let runs: Vec<Arc<LiveRun>> = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for live in runs {
            live.cancel.pull(reason.to_owned());
        }
    }
}

/// Why a run was cancelled, as its end records it.
fn cancel_reason(reason: &str) -> String {
    if reason.trim().is_empty() {
        "cancelled by a client".to_owned()
    } else {
        format!("cancelled by a client: {}", reason.trim())
    }
}

/// A user's input: something, and not too much.
fn check_input(text: &str, field: &'static str) -> Result<(), AgentError> {
    let invalid = |reason: String| Err(AgentError::Invalid { field, reason });
    if text.trim().is_empty() {
        return invalid("a run needs an input: what the user asks for".into());
    }
    if text.len() > MAX_INPUT_BYTES {
        return invalid(format!(
            "the input is {} bytes; the limit is {MAX_INPUT_BYTES} bytes",
            text.len()
        ));
    }
    Ok(())
}

/// `openai:MODEL`, `anthropic:MODEL`, `scripted` (with the script in the config) or `replay`
/// (with the cassette).
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
        None if config.model == "replay" => {
            if config.cassette.trim().is_empty() {
                return invalid(
                    "model.cassette",
                    "the replay model needs a cassette in `model.cassette`".into(),
                );
            }
            Ok(ModelSpec::Replay {
                cassette: config.cassette.clone(),
            })
        }
        _ => invalid(
            "model.model",
            format!(
                "unknown model `{}`: use openai:MODEL, anthropic:MODEL, scripted or replay",
                config.model
            ),
        ),
    }
}
