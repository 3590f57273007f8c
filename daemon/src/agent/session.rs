//! Sessions: what a session's runs share — its workspace, its settings, and the conversation
//! each run continues from.
//!
//! A run in a session inherits the session's settings and may only narrow them
//! ([`inherit`]): a stricter approval policy, lower budgets, a subset of the tools. It starts
//! from the conversation its session's latest run ended with ([`AgentRuntime::history`]): that
//! run's last checkpoint, with its final answer, and any call it proposed and never ran
//! answered as not run, so the conversation stays well-formed for every provider. One run of
//! a session goes on at a time: a second would fork the conversation behind the first one's
//! back (input for a run that is going on is sent to it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use airlock_proto::v1 as pb;
use serde_json::json;

use super::context::{Counted, Entry, Part};
use super::error::AgentError;
use super::launch::parse_model;
use super::live::LiveRun;
use super::provider::Message;
use super::run::LoopState;
use super::runtime::AgentRuntime;
use crate::ids::{self, RunId, SessionId};
use crate::policy::ApprovalPolicy;
use crate::store::{RunFilter, SessionCursor, SessionRecord, SessionSummary};

impl AgentRuntime {
    /// A new session of `tenant`, its settings checked.
    pub async fn create_session(
        &self,
        workspace: Option<&str>,
        labels: BTreeMap<String, String>,
        settings: pb::SessionSettings,
        tenant: &str,
    ) -> Result<SessionRecord, AgentError> {
        self.check_settings(&settings)?;
        let workspace = self
            .shared
            .executor
            .workspaces()
            .resolve(workspace)?
            .map(|path| path.to_string_lossy().into_owned());
        let session = SessionRecord {
            session_id: SessionId::new(),
            workspace,
            labels,
            created_at_ms: ids::now_ms(),
            tenant: tenant.to_owned(),
            settings,
        };
        self.shared.store.create_session(&session).await?;
        Ok(session)
    }

    /// What a session's runs inherit must make sense on its own: a model that exists, a policy
    /// that does, tools the daemon serves.
    fn check_settings(&self, settings: &pb::SessionSettings) -> Result<(), AgentError> {
        let invalid = |field, reason: String| AgentError::Invalid { field, reason };
        if let Some(model) = settings.model.as_ref().filter(|m| !m.model.is_empty()) {
            parse_model(model).map_err(|err| invalid("settings.model", err.to_string()))?;
        }
        pb::ApprovalPolicy::try_from(settings.approval_policy).map_err(|_| {
            invalid(
                "settings.approval_policy",
                format!("unknown approval policy {}", settings.approval_policy),
            )
        })?;
        let registry = self.shared.executor.registry();
        if let Some(tool) = settings
            .tools
            .iter()
            .find(|tool| registry.get(tool).is_none())
        {
            return Err(invalid(
                "settings.tools",
                format!("no tool named `{tool}` is served"),
            ));
        }
        super::judge::session_rules(&settings.rules, "the session's rules")
            .map_err(|reason| invalid("settings.rules", reason))?;
        Ok(())
    }

    /// A session of `tenant` (another tenant's is as unknown as one that does not exist).
    pub async fn session(
        &self,
        session_id: &SessionId,
        tenant: &str,
    ) -> Result<SessionSummary, AgentError> {
        self.shared
            .store
            .session_summary(session_id)
            .await?
            .filter(|summary| summary.session.tenant == tenant)
            .ok_or_else(|| AgentError::UnknownSession(session_id.to_string()))
    }

    pub async fn list_sessions(
        &self,
        tenant: &str,
        limit: usize,
        after: Option<&SessionCursor>,
    ) -> Result<(Vec<SessionSummary>, Option<SessionCursor>), AgentError> {
        Ok(self
            .shared
            .store
            .list_sessions(tenant, limit, after)
            .await?)
    }

    /// The run of `session` that is going on, if one is.
    pub(super) fn live_run_in(&self, session: &SessionId) -> Option<Arc<LiveRun>> {
        self.live.in_session(session)
    }

    /// The conversation a new run of `session` continues: its latest run's, and that run.
    pub(super) async fn history(
        &self,
        session: &SessionId,
    ) -> Result<(Option<RunId>, Vec<Entry>), AgentError> {
        let store = &self.shared.store;
        let filter = RunFilter {
            session_id: Some(session.clone()),
            ..RunFilter::default()
        };
        let (runs, _) = store.list_runs(&filter, 1, None).await?;
        let Some(run) = runs.into_iter().next() else {
            return Ok((None, Vec::new()));
        };
        let conversation = match store.latest_checkpoint(&run.run_id).await? {
            Some(checkpoint) => {
                LoopState::decode(&checkpoint.state, &checkpoint.entries)
                    .map_err(AgentError::Unresumable)?
                    .conversation
            }
            None => LoopState::start(&run.start.input).conversation,
        };
        Ok((Some(run.run_id), carried(conversation, &run.final_text)))
    }
}

/// A finished run's conversation as the next run's history: every entry marked as such, the
/// final answer last, and calls that never ran answered so.
fn carried(conversation: Vec<Entry>, final_text: &str) -> Vec<Entry> {
    let mut history: Vec<Entry> = Vec::with_capacity(conversation.len() + 1);
    let mut unanswered: Vec<(String, String)> = Vec::new();
    let close = |history: &mut Vec<Entry>, unanswered: &mut Vec<(String, String)>| {
        for (call_id, name) in unanswered.drain(..) {
            history.push(Entry {
                message: Message::Tool {
                    call_id,
                    name,
                    content: json!({
                        "status": "NOT_RUN",
                        "error": "the run ended before this call ran",
                    })
                    .to_string(),
                    is_error: true,
                },
                source: String::new(),
                part: Part::History,
                counted: Counted::default(),
            });
        }
    };
    for entry in conversation {
        match &entry.message {
            Message::Tool { call_id, .. } => {
                unanswered.retain(|(id, _)| id != call_id);
            }
            Message::Assistant { tool_calls, .. } => {
                close(&mut history, &mut unanswered);
                unanswered = tool_calls
                    .iter()
                    .map(|call| (call.id.clone(), call.name.clone()))
                    .collect();
            }
            Message::User { .. } => close(&mut history, &mut unanswered),
        }
        let part = match entry.part {
            // What a summary stood for were the earlier run's answers, not this one's.
            Part::Summary { .. } => Part::Summary { answers: 0 },
            Part::History | Part::Goal | Part::Run => Part::History,
        };
        history.push(Entry { part, ..entry });
    }
    close(&mut history, &mut unanswered);
    let answered = matches!(
        history.last().map(|entry| &entry.message),
        Some(Message::Assistant { text: Some(text), tool_calls }) if tool_calls.is_empty() && text == final_text
    );
    if !final_text.is_empty() && !answered {
        history.push(Entry {
            message: Message::Assistant {
                text: Some(final_text.to_owned()),
                tool_calls: Vec::new(),
            },
            source: String::new(),
            part: Part::History,
            counted: Counted::default(),
        });
    }
    history
}

/// A run's request with what its session's settings give it: unset fields inherited, set
/// ones checked to narrow the session's, never to widen them.
pub(super) fn inherit(
    settings: &pb::SessionSettings,
    mut start: pb::StartRun,
) -> Result<pb::StartRun, AgentError> {
    let invalid = |field, reason: String| AgentError::Invalid { field, reason };
    if start
        .model
        .as_ref()
        .is_none_or(|model| model.model.is_empty())
        && let Some(model) = &settings.model
    {
        start.model = Some(model.clone());
    }
    let session_policy = pb::ApprovalPolicy::try_from(settings.approval_policy)
        .unwrap_or(pb::ApprovalPolicy::Unspecified);
    let run_policy = pb::ApprovalPolicy::try_from(start.approval_policy)
        .unwrap_or(pb::ApprovalPolicy::Unspecified);
    match (session_policy, run_policy) {
        (_, pb::ApprovalPolicy::Unspecified) => start.approval_policy = settings.approval_policy,
        (pb::ApprovalPolicy::Unspecified, _) => {}
        (session, run) => {
            let (session, run) = (
                ApprovalPolicy::from_wire(session),
                ApprovalPolicy::from_wire(run),
            );
            if !run.narrows(session) {
                return Err(invalid(
                    "approval_policy",
                    format!(
                        "the session's approval policy is {}; a run of it may ask for one that \
                         runs no more without asking ({})",
                        session.as_str(),
                        session
                            .narrower()
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    let ceilings = settings.budgets.unwrap_or_default();
    let mut budgets = start.budgets.unwrap_or_default();
    narrow(
        &mut budgets.max_steps,
        ceilings.max_steps,
        "budgets.max_steps",
    )?;
    narrow(
        &mut budgets.max_tokens,
        ceilings.max_tokens,
        "budgets.max_tokens",
    )?;
    narrow(
        &mut budgets.max_wall_time_ms,
        ceilings.max_wall_time_ms,
        "budgets.max_wall_time_ms",
    )?;
    narrow(
        &mut budgets.max_tool_calls,
        ceilings.max_tool_calls,
        "budgets.max_tool_calls",
    )?;
    narrow(
        &mut budgets.max_repeated_errors,
        ceilings.max_repeated_errors,
        "budgets.max_repeated_errors",
    )?;
    narrow(
        &mut budgets.context_tokens,
        ceilings.context_tokens,
        "budgets.context_tokens",
    )?;
    narrow(
        &mut budgets.max_repeated_calls,
        ceilings.max_repeated_calls,
        "budgets.max_repeated_calls",
    )?;
    narrow(
        &mut budgets.max_idle_steps,
        ceilings.max_idle_steps,
        "budgets.max_idle_steps",
    )?;
    start.budgets = Some(budgets);
    narrow(
        &mut start.approval_timeout_ms,
        settings.approval_timeout_ms,
        "approval_timeout_ms",
    )?;
    if !settings.tools.is_empty() {
        if start.tools.is_empty() {
            start.tools.clone_from(&settings.tools);
        } else {
            let allowed: BTreeSet<&String> = settings.tools.iter().collect();
            if let Some(tool) = start.tools.iter().find(|tool| !allowed.contains(tool)) {
                return Err(invalid(
                    "tools",
                    format!(
                        "`{tool}` is not among the session's tools ({})",
                        settings.tools.join(", ")
                    ),
                ));
            }
        }
    }
    start.instructions = [settings.instructions.trim(), start.instructions.trim()]
        .into_iter()
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    start.stop_on_denial |= settings.stop_on_denial;
    Ok(start)
}

/// A limit a run asks for against its session's ceiling: 0 means "unset" on both sides.
fn narrow<T: Copy + Default + PartialOrd + std::fmt::Display>(
    run: &mut T,
    session: T,
    field: &'static str,
) -> Result<(), AgentError> {
    let unset = T::default();
    if session == unset {
        return Ok(());
    }
    if *run == unset {
        *run = session;
        return Ok(());
    }
    if *run > session {
        return Err(AgentError::Invalid {
            field,
            reason: format!(
                "{run} is more than the session allows ({session}); a run may only ask for less"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::provider::ToolCall;
    use super::*;

    fn settings() -> pb::SessionSettings {
        pb::SessionSettings {
            model: Some(pb::ModelConfig {
                model: "openai:gpt-4o".into(),
                ..Default::default()
            }),
            approval_policy: pb::ApprovalPolicy::Risky as i32,
            budgets: Some(pb::Budgets {
                max_steps: 10,
                ..Default::default()
            }),
            tools: vec!["read_file".into(), "list_dir".into()],
            instructions: "Answer in French.".into(),
            approval_timeout_ms: 0,
            stop_on_denial: false,
            rules: String::new(),
        }
    }

    /// A client starts a session's next run as soon as it sees the last one's `RunFinished`:
    /// the run is neither refused as busy (the end's writes may still be in flight — here a
    /// disk stalls them) nor started from a conversation that lacks the end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_next_run_starts_as_soon_as_the_last_one_is_seen_to_finish() {
        use std::time::Duration;

        use super::super::testing::{Follower, Harness, StalledDisk};
        use super::super::{AgentSettings, RunOwner};

        let disk = Arc::new(StalledDisk::default());
        let harness = Harness::build(disk.options(), AgentSettings::default());
        let runtime = harness.runtime.clone();
        let start = harness.scripted(&json!({"turns": [{"final": "done"}]}), &[]);
        let session = runtime
            .create_session(
                Some(&start.workspace),
                BTreeMap::new(),
                pb::SessionSettings::default(),
                "default",
            )
            .await
            .expect("session");
        let turn = |n: usize| pb::StartRun {
            session_id: session.session_id.to_string(),
            input: format!("turn {n}"),
            ..start.clone()
        };
        let owner = RunOwner {
            tenant: "default".into(),
            max_live_runs: 100,
            allowed_tools: None,
        };
        const RUNS: usize = 4;
        // Only the events are kept: a run's log closes once nothing holds the run.
        let mut events = runtime.start(turn(0), &owner).await.expect("turn 0").events;
        for n in 1..RUNS {
            Follower::of(events)
                .until(|event| matches!(event, pb::run_event::Event::RunFinished(_)))
                .await;
            // The end seen; what the run writes after it waits on the disk a while.
            disk.set_closed(true);
            let next = {
                let (runtime, owner, start) = (runtime.clone(), owner.clone(), turn(n));
                tokio::spawn(async move { runtime.start(start, &owner).await })
            };
            disk.stalled().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            disk.set_closed(false);
            events = next
                .await
                .expect("joined")
                .unwrap_or_else(|err| panic!("turn {n}: {err}"))
                .events;
        }
        Follower::of(events).rest().await;
        while runtime.live_run_in(&session.session_id).is_some() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (_, conversation) = runtime.history(&session.session_id).await.expect("history");
        let said: Vec<&str> = conversation
            .iter()
            .filter_map(|entry| match &entry.message {
                Message::User { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let expected: Vec<String> = (0..RUNS).map(|n| format!("turn {n}")).collect();
        assert_eq!(said, expected);
    }

    #[test]
    fn a_run_inherits_what_it_leaves_unset() {
        let start = inherit(
            &settings(),
            pb::StartRun {
                input: "hi".into(),
                instructions: "Be brief.".into(),
                ..Default::default()
            },
        )
        .expect("inherits");
        assert_eq!(start.model.expect("model").model, "openai:gpt-4o");
        assert_eq!(start.approval_policy, pb::ApprovalPolicy::Risky as i32);
        assert_eq!(start.budgets.expect("budgets").max_steps, 10);
        assert_eq!(start.tools, ["read_file", "list_dir"]);
        assert_eq!(start.instructions, "Answer in French.\n\nBe brief.");
    }

    #[test]
    fn a_run_may_narrow_and_never_widen() {
        let narrowed = inherit(
            &settings(),
            pb::StartRun {
                approval_policy: pb::ApprovalPolicy::Always as i32,
                budgets: Some(pb::Budgets {
                    max_steps: 3,
                    ..Default::default()
                }),
                tools: vec!["read_file".into()],
                ..Default::default()
            },
        )
        .expect("narrower");
        assert_eq!(narrowed.budgets.expect("budgets").max_steps, 3);
        assert_eq!(narrowed.tools, ["read_file"]);

        let wider = |start: pb::StartRun| inherit(&settings(), start).expect_err("wider");
        let err = wider(pb::StartRun {
            approval_policy: pb::ApprovalPolicy::Auto as i32,
            ..Default::default()
        });
        assert!(
            matches!(
                err,
                AgentError::Invalid {
                    field: "approval_policy",
                    ..
                }
            ),
            "{err}"
        );
        let err = wider(pb::StartRun {
            budgets: Some(pb::Budgets {
                max_steps: 11,
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(
            matches!(
                err,
                AgentError::Invalid {
                    field: "budgets.max_steps",
                    ..
                }
            ),
            "{err}"
        );
        let err = wider(pb::StartRun {
            tools: vec!["write_file".into()],
            ..Default::default()
        });
        assert!(err.to_string().contains("write_file"), "{err}");
    }

    #[test]
    fn history_closes_calls_that_never_ran_and_ends_with_the_answer() {
        let call = ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        let conversation = vec![
            Entry {
                message: Message::User { text: "go".into() },
                source: String::new(),
                part: Part::Goal,
                counted: Counted::default(),
            },
            Entry {
                message: Message::Assistant {
                    text: None,
                    tool_calls: vec![call],
                },
                source: "stp_1".into(),
                part: Part::Run,
                counted: Counted::default(),
            },
        ];
        let history = carried(conversation, "");
        assert_eq!(history.len(), 3);
        assert!(history.iter().all(|entry| entry.part == Part::History));
        let Message::Tool {
            call_id, content, ..
        } = &history[2].message
        else {
            panic!("the call is answered");
        };
        assert_eq!(call_id, "c1");
        assert!(content.contains("NOT_RUN"));

        let history = carried(history, "done");
        assert_eq!(history.len(), 4);
        assert!(
            matches!(&history[3].message, Message::Assistant { text: Some(t), .. } if t == "done")
        );
        // Carried again, nothing is added twice.
        assert_eq!(carried(history.clone(), "done"), history);
    }
}
