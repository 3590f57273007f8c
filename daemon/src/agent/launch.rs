//! What a run's request resolves to — its provider, tools, policy and limits — and the
//! launch of its loop, the same for a new run and a resumed one: they differ only in where
//! their state comes from.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;

use super::error::AgentError;
use super::judge::{run_rules, session_rules};
use super::live::LiveRun;
use super::log::RunLog;
use super::provider::{self, ModelSpec};
use super::registry::Slot;
use super::run::{CallEvent, Ending, LoopState, Parts, Resolved, RunLimits, RunLoop};
use super::runtime::AgentRuntime;
use super::tokens;
use crate::ids::{self, RunId};
use crate::policy::ApprovalPolicy;
use crate::policy::rules::{Policy, RuleSet};
use crate::store::{RunRecord, SessionRecord};
use crate::tools::Tool;

/// How [`AgentRuntime::resolve`] treats tools that are not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Missing {
    /// A new run naming one is refused.
    Refuse,
    /// A resumed run goes on without it: the model is told so if it proposes it.
    Skip,
}

/// Where a run's loop goes on from: its state, its log, and the events the log holds past
/// the state (not to be recorded twice).
pub(super) struct Point {
    pub state: LoopState,
    pub log: Arc<RunLog>,
    pub recorded: HashSet<(CallEvent, ids::CallId)>,
}

impl AgentRuntime {
    /// The provider, tools, policy and limits a run's request asks for.
    pub(super) fn resolve(
        &self,
        start: &pb::StartRun,
        missing: Missing,
    ) -> Result<Resolved, AgentError> {
        let invalid = |field, reason: String| AgentError::Invalid { field, reason };
        let policy = pb::ApprovalPolicy::try_from(start.approval_policy)
            .map(ApprovalPolicy::from_wire)
            .map_err(|_| {
                invalid(
                    "approval_policy",
                    format!("unknown approval policy {}", start.approval_policy),
                )
            })?;
        let run_rules = Arc::new(RuleSet::new(
            run_rules(&start.rules).map_err(|err| invalid("rules", err))?,
        ));
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
            run_rules,
            limits: self.limits(start, &model),
        })
    }

    /// Starts the loop of a recorded run, from `point`, in the place `slot` holds for it
    /// among its tenant's runs (a new run's; a resumed run holds none).
    pub(super) fn launch(
        &self,
        record: &RunRecord,
        session: SessionRecord,
        resolved: Resolved,
        point: Point,
        slot: Option<Slot>,
    ) -> Result<Arc<LiveRun>, AgentError> {
        let Point {
            state,
            log,
            recorded,
        } = point;
        let rules = self.rules_of(&record.tenant, &session, &resolved)?;
        let (live, input) = LiveRun::new(record, &session.session_id, log.clone());
        let live = Arc::new(live);
        let run_loop = RunLoop::new(Parts {
            shared: self.shared.clone(),
            run: live.clone(),
            registry: self.live.clone(),
            input,
            record,
            session,
            resolved,
            rules,
            state,
            log,
            recorded,
        });
        drop(run_loop.checkpoint());
        self.live.insert(live.clone(), slot);
        self.drive(record.run_id.clone(), run_loop);
        Ok(live)
    }

    /// Every layer of rules a run of `tenant` in `session` is judged by.
    fn rules_of(
        &self,
        tenant: &str,
        session: &SessionRecord,
        resolved: &Resolved,
    ) -> Result<Policy, AgentError> {
        let source = format!("session {}", session.session_id);
        let session_rules = session_rules(&session.settings.rules, &source).map_err(|reason| {
            AgentError::Invalid {
                field: "settings.rules",
                reason,
            }
        })?;
        Ok(Policy::new(vec![
            self.shared.policy.operator(tenant),
            Arc::new(RuleSet::new(session_rules)),
            resolved.run_rules.clone(),
        ]))
    }

    /// Drives `run_loop` to its end on a task of its own; then the run leaves the live
    /// registry, and a run whose loop gave up unfinished is announced (see [`Ending`]).
    fn drive(&self, run_id: RunId, run_loop: RunLoop) {
        let registry = self.live.clone();
        let abandoned = self.abandoned.clone();
        tokio::spawn(async move {
            let ending = run_loop.drive().await;
            let left = registry.remove(&run_id);
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
    }

    pub(super) fn limits(&self, start: &pb::StartRun, model: &pb::ModelConfig) -> RunLimits {
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
}

/// `openai:MODEL`, `anthropic:MODEL`, `scripted` (with the script in the config) or `replay`
/// (with the cassette).
pub(super) fn parse_model(config: &pb::ModelConfig) -> Result<ModelSpec, AgentError> {
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
