//! Starting a run: who may ([`RunOwner`]), what its request must hold, the session it
//! belongs to (a new one or one it continues), and the run's record and first event, written
//! as one before its loop is launched.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use airlock_proto::v1 as pb;

use super::context;
use super::error::AgentError;
use super::launch::{Missing, Point};
use super::live::Started;
use super::log::RunLog;
use super::registry::Slot;
use super::run::{LoopState, Resolved};
use super::runtime::AgentRuntime;
use super::session;
use crate::domain::Usage;
use crate::ids::{self, RunId, SessionId, TraceId, TurnId};
use crate::store::{RunFilter, RunRecord, RunState, SessionRecord};
use crate::wire;

/// The task's input is short: a sentence, a page at most.
pub const MAX_INPUT_BYTES: usize = 256 * 1024;

/// How long a new run of a session waits for the session's finishing run to commit its end
/// before it is refused as busy. A client that saw one run's `RunFinished` starts the next at
/// once; the end's writes are a few milliseconds, a store under load may take seconds.
const FINISHING_WAIT: Duration = Duration::from_secs(10);

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

impl AgentRuntime {
    /// Checks and records a new run of `owner`, then starts its loop.
    pub async fn start(
        &self,
        start: pb::StartRun,
        owner: &RunOwner,
    ) -> Result<Started, AgentError> {
        self.start_from(start, owner, None, None).await
    }

    /// A place among `owner`'s runs at work, held until the run it is for is launched (or
    /// given back on any way out before): refused when the tenant's runs fill its cap.
    pub(super) fn hold(&self, owner: &RunOwner) -> Result<Slot, AgentError> {
        self.live
            .hold(&owner.tenant, owner.max_live_runs as usize)
            .ok_or_else(|| AgentError::TooManyRuns {
                tenant: owner.tenant.clone(),
                max: owner.max_live_runs,
            })
    }

    /// Starts a run whose conversation begins with what it carries from another run (a
    /// fork's), then `start.input`; without, a run in an existing session continues its
    /// conversation. Its place under the tenant's cap is `held` (taken before the caller's
    /// own work, a fork's copy) or taken here.
    pub(super) async fn start_from(
        &self,
        start: pb::StartRun,
        owner: &RunOwner,
        carried: Option<Carried>,
        held: Option<Slot>,
    ) -> Result<Started, AgentError> {
        // Held until the run is launched, or given back on any way out before.
        let slot = match held {
            Some(slot) => slot,
            None => self.hold(owner)?,
        };
        check_input(&start.input, "input")?;
        let existing = self.existing_session(&start, owner).await?;
        let mut start = match &existing {
            Some(session) => self.continue_session(session, start).await?,
            None => start,
        };
        owner.restrict_tools(&mut start.tools, &self.registry())?;
        let resolved = self.resolve(&start, Missing::Refuse)?;
        self.check_workspace(existing.as_ref(), &start, &resolved)?;
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
        let opening = self.opening(&session, carried).await?;

        let run_id = RunId::new();
        let turn_id = TurnId::new();
        let record = run_record(run_id.clone(), &session, &start, &resolved, owner);
        let started = started_event(&record, &turn_id, &resolved, &opening);
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
        let mut state = LoopState::start_after(opening.earlier, &start.input);
        state.turn_id = Some(turn_id);
        state.project_instructions = opening.project;
        // Subscribed before the loop runs: a streamed piece reaches only those listening as
        // it goes, and the client that starts a run must not miss its first answer's.
        let events = log.follow(0, self.notices());
        let point = Point {
            state,
            log,
            recorded: HashSet::new(),
        };
        let live = self.launch(&record, session, resolved, point, Some(slot))?;
        Ok(Started { live, events })
    }

    /// The session `start` names, if it names one (of `owner`'s).
    async fn existing_session(
        &self,
        start: &pb::StartRun,
        owner: &RunOwner,
    ) -> Result<Option<SessionRecord>, AgentError> {
        if start.session_id.is_empty() {
            return Ok(None);
        }
        let session_id =
            SessionId::parse(&start.session_id).map_err(|reason| AgentError::Invalid {
                field: "session_id",
                reason,
            })?;
        Ok(Some(
            self.session(&session_id, &owner.tenant).await?.session,
        ))
    }

    /// `start` as the next run of `session`: with the session's settings where it leaves
    /// them unset, once the session's previous run has left (or refused as busy).
    async fn continue_session(
        &self,
        session: &SessionRecord,
        start: pb::StartRun,
    ) -> Result<pb::StartRun, AgentError> {
        if let Some(live) = self.live_run_in(&session.session_id)
            && !live.left_within(FINISHING_WAIT).await
        {
            return Err(AgentError::SessionBusy {
                session_id: session.session_id.to_string(),
                run_id: live.run_id.to_string(),
            });
        }
        let mut start = session::inherit(&session.settings, start)?;
        if start
            .model
            .as_ref()
            .is_none_or(|model| model.model.is_empty())
        {
            // A session a run started (`airlock run` without `--session`) has no model of
            // its own: its next runs go on with the model its latest run used.
            let latest = RunFilter {
                session_id: Some(session.session_id.clone()),
                ..RunFilter::default()
            };
            let (runs, _) = self.shared.store.list_runs(&latest, 1, None).await?;
            match runs
                .into_iter()
                .next()
                .and_then(|run| run.start.model)
                .filter(|model| !model.model.is_empty())
            {
                Some(model) => start.model = Some(model),
                None => {
                    return Err(AgentError::Invalid {
                        field: "model",
                        reason: format!(
                            "session {} has no model of its own and no earlier run to take one \
                             from: name the model (`--model` on the command line)",
                            session.session_id
                        ),
                    });
                }
            }
        }
        Ok(start)
    }

    /// Refuses a run without a workspace whose tools work in one.
    fn check_workspace(
        &self,
        existing: Option<&SessionRecord>,
        start: &pb::StartRun,
        resolved: &Resolved,
    ) -> Result<(), AgentError> {
        let has_workspace = match existing {
            Some(session) => session.workspace.is_some(),
            None => self
                .shared
                .executor
                .workspaces()
                .resolve(wire::non_empty(&start.workspace))?
                .is_some(),
        };
        if has_workspace {
            return Ok(());
        }
        // A run never starts with tools it could only fail: they would each end in a
        // sandbox error, and the model would answer without them.
        let needing: Vec<&str> = resolved
            .tools
            .values()
            .filter(|tool| tool.profile.grants_workspace())
            .map(|tool| tool.name())
            .collect();
        if needing.is_empty() {
            return Ok(());
        }
        Err(AgentError::Invalid {
            field: "workspace",
            reason: format!(
                "the run has no workspace, and its tools {} work in one: name a workspace \
                 inside the daemon's roots, or give the run only tools that need none",
                needing.join(", ")
            ),
        })
    }

    /// What a new run of `session` opens with: the conversation it continues (`earlier`, or
    /// the session's latest run's) and the workspace's project instructions.
    async fn opening(
        &self,
        session: &SessionRecord,
        carried: Option<Carried>,
    ) -> Result<Opening, AgentError> {
        let (continues, earlier, messages) = match carried {
            Some(Carried { from, earlier }) => {
                let messages = earlier.len();
                (Some(from), earlier, messages)
            }
            None => {
                let (continues, earlier) = self.history(&session.session_id).await?;
                let messages = earlier
                    .iter()
                    .filter(|entry| entry.part == context::Part::History)
                    .count();
                (continues, earlier, messages)
            }
        };
        let project = match session.workspace.clone() {
            Some(workspace) => tokio::task::spawn_blocking(move || {
                context::project::read(std::path::Path::new(&workspace))
            })
            .await
            .ok()
            .flatten(),
            None => None,
        };
        Ok(Opening {
            continues,
            earlier,
            messages,
            project,
        })
    }
}

/// A user's input: something, and not too much.
pub(super) fn check_input(text: &str, field: &'static str) -> Result<(), AgentError> {
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
    // No text a person writes holds one, and PostgreSQL's text columns refuse it.
    if let Some(at) = text.find('\0') {
        return invalid(format!("the input holds a NUL character (at byte {at})"));
    }
    Ok(())
}

/// What a new run opens with, besides its input.
struct Opening {
    /// The run whose conversation it continues (its session's latest, or the run it forks),
    /// if any.
    continues: Option<RunId>,
    /// The conversation before its input.
    earlier: Vec<context::Entry>,
    /// How many of `earlier`'s messages came from another run.
    messages: usize,
    /// The workspace's project instructions (AGENTS.md).
    project: Option<String>,
}

/// What a fork carries from the run it forks: that run, and its conversation up to the
/// step forked at.
pub(crate) struct Carried {
    pub(crate) from: RunId,
    pub(crate) earlier: Vec<context::Entry>,
}

/// The record of a new run.
fn run_record(
    run_id: RunId,
    session: &SessionRecord,
    start: &pb::StartRun,
    resolved: &Resolved,
    owner: &RunOwner,
) -> RunRecord {
    RunRecord {
        run_id,
        session_id: session.session_id.clone(),
        state: RunState::Running,
        start: start.clone(),
        model: resolved.model.clone(),
        workspace: session.workspace.clone(),
        trace_id: TraceId::new(),
        created_at_ms: ids::now_ms(),
        finished_at_ms: None,
        stop_reason: None,
        stop_detail: String::new(),
        final_text: String::new(),
        usage: Usage::default(),
        steps: 0,
        last_seq: 0,
        tenant: owner.tenant.clone(),
    }
}

/// The first event of a new run: what it starts with.
fn started_event(
    record: &RunRecord,
    turn_id: &TurnId,
    resolved: &Resolved,
    opening: &Opening,
) -> pb::RunEvent {
    let history_messages = opening.messages;
    let start = &record.start;
    pb::RunEvent {
        run_id: record.run_id.to_string(),
        seq: 1,
        step_id: String::new(),
        time_ms: ids::now_ms(),
        turn_id: turn_id.to_string(),
        delta: false,
        event: Some(pb::run_event::Event::RunStarted(pb::RunStarted {
            session_id: record.session_id.to_string(),
            turn_id: turn_id.to_string(),
            trace_id: record.trace_id.to_string(),
            input: start.input.clone(),
            model: resolved.model.clone(),
            tools: resolved.tools.keys().cloned().collect(),
            approval_policy: resolved.policy.to_wire() as i32,
            budgets: Some(resolved.limits.to_wire()),
            workspace: record.workspace.clone().unwrap_or_default(),
            stop_on_denial: start.stop_on_denial,
            continues_run_id: opening
                .continues
                .clone()
                .map(RunId::into_string)
                .unwrap_or_default(),
            history_messages: u32::try_from(history_messages).unwrap_or(u32::MAX),
            project_instructions: opening.project.is_some(),
        })),
    }
}
