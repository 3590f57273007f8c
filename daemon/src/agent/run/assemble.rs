//! The assembly of a run's loop ([`RunLoop::new`]) from what the runtime hands it: the
//! resolved request ([`Resolved`]), the state it goes on from, its log and live handles, and
//! the events already recorded past its checkpoint. A new run and a resumed one are assembled
//! the same way; they differ only in where their state comes from.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::super::context::{Counter, Fixed};
use super::super::live::{LiveRun, Shared};
use super::super::log::RunLog;
use super::super::prompt;
use super::super::provider::ModelProvider;
use super::super::recording::Recording;
use super::super::registry::LiveRuns;
use super::super::tokens::Tokenizer;
use super::approvals::Approvals;
use super::budget::{Budget, RunLimits};
use super::recorder::{CallEvent, Recorder};
use super::run_loop::{RunLoop, tool_set};
use super::state::LoopState;
use crate::audit::TenantAudit;
use crate::ids::{CallId, TurnId};
use crate::policy::ApprovalPolicy;
use crate::policy::rules::{Policy, RuleSet};
use crate::store::{RunRecord, SessionRecord};
use crate::tools::Tool;
use crate::trace::RunTrace;

/// What a run's request resolves to, the same for a new run and a resumed one.
pub(in crate::agent) struct Resolved {
    pub provider: Arc<dyn ModelProvider>,
    /// How the model counts tokens.
    pub tokenizer: Tokenizer,
    pub model: String,
    pub tools: BTreeMap<String, Arc<Tool>>,
    pub policy: ApprovalPolicy,
    /// The rules the run's request added (`StartRun.rules`).
    pub run_rules: Arc<RuleSet>,
    pub limits: RunLimits,
}

/// Everything a run's loop is assembled from.
pub(in crate::agent) struct Parts<'a> {
    pub shared: Arc<Shared>,
    /// The run's live handles, and the input sent to it.
    pub run: Arc<LiveRun>,
    /// Where the run is live, told when it starts recording its end.
    pub registry: LiveRuns,
    pub input: mpsc::UnboundedReceiver<String>,
    pub record: &'a RunRecord,
    pub session: SessionRecord,
    pub resolved: Resolved,
    /// Every layer of rules the run's calls are judged by.
    pub rules: Policy,
    /// The state the loop goes on from: a new run's first, or a checkpoint's.
    pub state: LoopState,
    pub log: Arc<RunLog>,
    /// The events the log holds past the checkpoint, not to be recorded twice.
    pub recorded: HashSet<(CallEvent, CallId)>,
}

impl RunLoop {
    pub(in crate::agent) fn new(parts: Parts<'_>) -> RunLoop {
        let Parts {
            shared,
            run,
            registry,
            input,
            record,
            session,
            resolved,
            rules,
            state,
            log,
            recorded,
        } = parts;
        let trace = RunTrace::new(
            shared.tracer.clone(),
            log.clone(),
            record.run_id.as_str(),
            record.trace_id.as_str(),
        );
        let approvals = Arc::new(Approvals::new(
            shared.approvals.clone(),
            shared.store.clone(),
            log.clone(),
            session.session_id.clone(),
            TenantAudit {
                tenant: record.tenant.clone(),
                auditor: shared.executor.auditor().clone(),
            },
            resolved.policy,
            resolved.limits.approval_timeout,
        ));
        let budget = Budget::new(
            resolved.limits,
            state.usage,
            state.steps,
            state.failures,
            Duration::from_millis(state.elapsed_ms),
            run.cancel.clone(),
        );
        let provider = if shared.settings.keep_exchanges {
            Recording::wrap(
                resolved.provider,
                shared.store.clone(),
                record.run_id.clone(),
            )
        } else {
            resolved.provider
        };
        let recorder = Recorder::new(
            log,
            trace,
            shared.store.clone(),
            recorded,
            record.created_at_ms,
        );
        let tokenizer = resolved.tokenizer;
        RunLoop {
            shared,
            run,
            registry,
            provider,
            tool_set: tool_set(&resolved.tools, &tokenizer),
            counter: Counter::new(tokenizer, state.calibration),
            tools: resolved.tools,
            policy: resolved.policy,
            rules,
            system: prompt::system_prompt(&record.start.instructions),
            stop_on_denial: record.start.stop_on_denial,
            input,
            conversation: state.conversation,
            project: state.project_instructions,
            fixed: Fixed::default(),
            turn_id: state.turn_id.unwrap_or_else(TurnId::new),
            progress: state.progress,
            compaction_retry_step: state.compaction_retry_step,
            budget,
            pending: state.pending,
            recorder,
            approvals,
            step_span: None,
            session,
            ignores: None,
        }
    }
}
