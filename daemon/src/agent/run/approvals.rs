//! Step 5's second half, "ask": one approvals service for every subject a run asks about —
//! a tool call, or a connection a running call makes to a host its profile does not list.
//! Every question is built, persisted, recorded and put to the approvers the same way, and
//! its answer is persisted and recorded the same way: only how the question is bound (its
//! digest) and what an answer covers differ.
//!
//! A question is put to approvers only once it is committed — the request row and its
//! `approval_requested` event — so no approver ever answers a question a crash could lose;
//! and a resumed run waiting on a call's question waits again for the same request, with its
//! deadline.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use pb::run_event::Event;
use serde_json::Value;

use super::super::log::RunLog;
use crate::audit::TenantAudit;
use crate::domain::{DecidedBy, Decision};
use crate::egress::EgressApprover;
use crate::ids::{self, ApprovalId, CallId, RunId, SessionId, StepId};
use crate::policy::{
    ApprovalBroker, ApprovalPolicy, Asked, Binding, Outcome, binding_digest, connect_digest,
    prefix_grant_key,
};
use crate::store::{ApprovalResolution, GrantRecord, RunState, Store, StoreError};

/// The most characters of a call's arguments a grant keeps to show what it covers.
const MAX_COVERS_CHARS: usize = 512;
use crate::tools::{Risk, Tool};
use crate::wire;

/// What a question is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// Whether the call may run at all.
    Call,
    /// Whether the running call may connect to `host:port`.
    Connection { host: String, port: u16 },
}

/// One question about one call.
pub struct Question<'a> {
    pub subject: Subject,
    pub step_id: &'a StepId,
    pub call_id: &'a CallId,
    pub tool: &'a Arc<Tool>,
    /// The call's canonical arguments.
    pub arguments: &'a Value,
    /// Why the policy asks.
    pub why: String,
    pub preview: pb::Preview,
    /// What an answer "for the session" is remembered as.
    pub grant_key: String,
    /// The policy's decision that asked (none for a connection's question).
    pub policy: Option<pb::PolicyVerdict>,
}

/// A question's answer, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    pub approval_id: Option<ApprovalId>,
    pub resolution: ApprovalResolution,
}

impl Answered {
    /// `None` when the subject may go ahead, the refusal (for the model) when not.
    pub fn refusal(&self) -> Option<String> {
        let resolution = &self.resolution;
        if resolution.decision.approves() {
            return None;
        }
        Some(
            match (resolution.decided_by, resolution.reason.is_empty()) {
                (DecidedBy::Deadline, _) => {
                    "nobody approved this call before its deadline, so it did not run".to_owned()
                }
                (by, true) => format!("the {by} denied this call"),
                (by, false) => format!("the {by} denied this call: {}", resolution.reason),
            },
        )
    }
}

/// The hosts approved so far in one run, shared by all its calls.
type ApprovedHosts = Arc<Mutex<HashSet<(String, u16)>>>;

pub struct Approvals {
    broker: Arc<ApprovalBroker>,
    store: Arc<dyn Store>,
    log: Arc<RunLog>,
    run_id: RunId,
    session_id: SessionId,
    /// The run's tenant's audit chain: where its questions and answers are recorded.
    audit: TenantAudit,
    policy: ApprovalPolicy,
    timeout: Duration,
    approved_hosts: ApprovedHosts,
}

impl Approvals {
    pub fn new(
        broker: Arc<ApprovalBroker>,
        store: Arc<dyn Store>,
        log: Arc<RunLog>,
        session_id: SessionId,
        audit: TenantAudit,
        policy: ApprovalPolicy,
        timeout: Duration,
    ) -> Approvals {
        Approvals {
            run_id: log.run_id().clone(),
            broker,
            store,
            log,
            session_id,
            audit,
            policy,
            timeout,
            approved_hosts: ApprovedHosts::default(),
        }
    }

    /// The request a question becomes: bound by its digest to exactly this call (and host),
    /// with the run's deadline for answers.
    fn request(&self, question: &Question<'_>) -> pb::ApprovalRequest {
        let profile = question.tool.profile.name.clone();
        let binding = Binding {
            run_id: self.run_id.as_str(),
            step_id: question.step_id.as_str(),
            call_id: question.call_id.as_str(),
            tool: question.tool.name(),
            tool_digest: question.tool.digest(),
            arguments: question.arguments,
            profile: &profile,
            policy: self.policy.as_str(),
        };
        let (digest, risk, network) = match &question.subject {
            Subject::Call => (binding_digest(&binding), question.tool.manifest.risk, None),
            // Bound to the call's own binding as well, so an answer cannot be moved to
            // another call or host.
            Subject::Connection { host, port } => (
                connect_digest(&binding, host, *port),
                Risk::Network,
                Some(pb::NetworkAccess {
                    host: host.clone(),
                    port: u32::from(*port),
                }),
            ),
        };
        let timeout_ms = i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX);
        pb::ApprovalRequest {
            approval_id: ApprovalId::new().into_string(),
            run_id: self.run_id.to_string(),
            session_id: self.session_id.to_string(),
            step_id: question.step_id.to_string(),
            call_id: question.call_id.to_string(),
            tool: question.tool.name().to_owned(),
            arguments_json: question.arguments.to_string(),
            risk: wire::risk(risk) as i32,
            profile,
            preview: Some(question.preview.clone()),
            deadline_ms: ids::now_ms().saturating_add(timeout_ms),
            digest,
            reason: question.why.clone(),
            state: pb::ApprovalState::Pending as i32,
            detail: String::new(),
            network,
            // A run's requests are owned through the run.
            tenant: String::new(),
            policy: question.policy.clone(),
        }
    }

    /// A new question: registered, kept, recorded, committed, then put to the approvers.
    pub async fn ask(&self, question: &Question<'_>) -> Result<Answered, StoreError> {
        let request = self.request(question);
        // Registered before its event can be published: the run's own client may answer
        // the moment it reads it.
        let asked = self.broker.register(request.clone());
        self.audit.record(
            self.audit
                .act("approval.requested")
                .actor("policy")
                .subject(&request.tool)
                .reason(&request.reason)
                .detail("approval_id", request.approval_id.as_str())
                .detail("run_id", request.run_id.as_str())
                .detail("call_id", request.call_id.as_str())
                .detail("digest", request.digest.as_str()),
        );
        let saved = self.store.save_approval(&request);
        self.log
            .append(Some(question.step_id), Approvals::requested(&request));
        saved.await?;
        self.answer(question, asked).await
    }

    /// Waits again for the answer to `request`, asked by a daemon that has since stopped.
    pub async fn wait_again(
        &self,
        question: &Question<'_>,
        request: pb::ApprovalRequest,
    ) -> Result<Answered, StoreError> {
        let asked = self.broker.register(request);
        self.answer(question, asked).await
    }

    /// Waits for the answer to a registered question, then keeps and records it.
    async fn answer(&self, question: &Question<'_>, asked: Asked) -> Result<Answered, StoreError> {
        // Approvers see only what a crash cannot lose.
        self.log.committed().await?;
        drop(
            self.store
                .set_run_state(&self.run_id, RunState::WaitingForApproval),
        );
        let approval_id = ApprovalId::from_stored(asked.approval_id());
        let outcome = asked.outcome().await;
        drop(self.store.set_run_state(&self.run_id, RunState::Running));
        let mut grant_prefix = Vec::new();
        let resolution = match outcome {
            Outcome::Answered(answer) => {
                grant_prefix = answer.grant_prefix;
                ApprovalResolution {
                    decision: answer.decision,
                    reason: answer.reason,
                    decided_by: answer.decided_by,
                    resolved_at_ms: ids::now_ms(),
                }
            }
            Outcome::Expired => ApprovalResolution {
                decision: Decision::Deny,
                reason: "no answer by the deadline".into(),
                decided_by: DecidedBy::Deadline,
                resolved_at_ms: ids::now_ms(),
            },
        };
        if resolution.decision == Decision::ApproveSession && question.subject == Subject::Call {
            drop(
                self.store
                    .add_session_grant(&self.grant(question, grant_prefix)),
            );
        }
        let outcome = match (resolution.decision, resolution.decided_by) {
            (_, DecidedBy::Deadline) => "expired",
            (Decision::Deny, _) => "denied",
            (Decision::ApproveOnce | Decision::ApproveSession, _) => "approved",
        };
        let scope = match resolution.decision {
            Decision::ApproveOnce => "once",
            Decision::ApproveSession => "session",
            Decision::Deny => "none",
        };
        crate::metrics::global().approval_decided(outcome);
        self.audit.record(
            self.audit
                .act("approval.decided")
                .actor(resolution.decided_by.as_str())
                .subject(question.tool.name())
                .reason(&resolution.reason)
                .detail("approval_id", approval_id.as_str())
                .detail("run_id", self.run_id.as_str())
                .detail("decision", outcome)
                .detail("scope", scope),
        );
        let kept = self.store.resolve_approval(&approval_id, &resolution);
        let answered = Answered {
            approval_id: Some(approval_id),
            resolution,
        };
        self.log
            .append(Some(question.step_id), self.resolved(question, &answered));
        kept.await?;
        Ok(answered)
    }

    /// What an approval for the session keeps: every command starting with `prefix` in the
    /// tool (the broker checked it is one the question asked about), or the exact call.
    fn grant(&self, question: &Question<'_>, prefix: Vec<String>) -> GrantRecord {
        let tool = question.tool.name();
        if prefix.is_empty() {
            let mut covers = format!("{tool} {}", question.arguments);
            if let Some((cut, _)) = covers.char_indices().nth(MAX_COVERS_CHARS) {
                covers.truncate(cut);
                covers.push('…');
            }
            return GrantRecord {
                session_id: self.session_id.clone(),
                grant_key: question.grant_key.clone(),
                tool: tool.to_owned(),
                prefix: None,
                covers,
                created_at_ms: ids::now_ms(),
            };
        }
        GrantRecord {
            session_id: self.session_id.clone(),
            grant_key: prefix_grant_key(self.session_id.as_str(), tool, &prefix),
            tool: tool.to_owned(),
            covers: format!("`{} …` in {tool}", prefix.join(" ")),
            prefix: Some(prefix),
            created_at_ms: ids::now_ms(),
        }
    }

    /// The event that records an answer (also one nobody was asked for: a policy's, a
    /// session grant's, one recorded before a restart).
    pub fn resolved(&self, question: &Question<'_>, answered: &Answered) -> Event {
        let network = match &question.subject {
            Subject::Call => None,
            Subject::Connection { host, port } => Some(pb::NetworkAccess {
                host: host.clone(),
                port: u32::from(*port),
            }),
        };
        let resolution = &answered.resolution;
        Event::ApprovalResolved(pb::ApprovalResolved {
            approval_id: answered
                .approval_id
                .as_ref()
                .map(ApprovalId::to_string)
                .unwrap_or_default(),
            call_id: question.call_id.to_string(),
            decision: wire::decision(resolution.decision) as i32,
            reason: resolution.reason.clone(),
            decided_by: resolution.decided_by.as_str().to_owned(),
            network,
        })
    }

    /// The event that records a question.
    pub fn requested(request: &pb::ApprovalRequest) -> Event {
        Event::ApprovalRequested(pb::ApprovalRequested {
            request: Some(request.clone()),
        })
    }

    /// The asker for the unlisted hosts of one running call.
    pub fn for_connections(
        self: &Arc<Self>,
        step_id: StepId,
        call_id: CallId,
        tool: Arc<Tool>,
        arguments: Value,
    ) -> Arc<dyn EgressApprover> {
        Arc::new(Connections {
            approvals: self.clone(),
            step_id,
            call_id,
            tool,
            arguments,
        })
    }
}

/// Asks about the unlisted hosts of one call: when its profile has `ask_for_unlisted`, a
/// connect to a host outside the allow-list waits for an approval. An approval holds for the
/// rest of the run only; a denial, or no answer by the deadline, fails that connection and
/// the tool sees the gate's refusal. Under the `never` policy nobody is asked: the
/// connection is refused at once.
struct Connections {
    approvals: Arc<Approvals>,
    step_id: StepId,
    call_id: CallId,
    tool: Arc<Tool>,
    arguments: Value,
}

impl Connections {
    async fn ask_once(&self, host: String, port: u16) -> bool {
        let approvals = &self.approvals;
        let key = (host, port);
        let approved = || {
            approvals
                .approved_hosts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if approved().contains(&key) {
            return true;
        }
        // `never` asks nobody: a run left unattended must not wait on a question no one
        // will answer, so what would need asking is refused at once.
        if approvals.policy == ApprovalPolicy::Never {
            return false;
        }
        let (host, port) = (key.0.clone(), key.1);
        let question = Question {
            preview: pb::Preview {
                kind: "connect".into(),
                text: format!(
                    "{tool} wants to connect to {host}:{port}, which profile `{profile}` does not \
                     list; an approval lets this run connect to it until the run ends",
                    tool = self.tool.name(),
                    profile = self.tool.profile.name,
                ),
                truncated: false,
                error: String::new(),
            },
            why: format!("a connection to {host}:{port}, outside the allow-list"),
            // "Approve for the session" must not outlive the run for a connection.
            grant_key: format!("connect:{}:{host}:{port}", approvals.run_id),
            policy: None,
            subject: Subject::Connection { host, port },
            step_id: &self.step_id,
            call_id: &self.call_id,
            tool: &self.tool,
            arguments: &self.arguments,
        };
        match approvals.ask(&question).await {
            Ok(answered) if answered.resolution.decision.approves() => {
                approved().insert(key);
                true
            }
            Ok(_) => false,
            Err(err) => {
                // A question that cannot be recorded is not asked: the connection is refused.
                tracing::warn!(run = %approvals.run_id, error = %err, "cannot record a connection's approval");
                false
            }
        }
    }
}

impl EgressApprover for Connections {
    fn ask(&self, host: &str, port: u16) -> BoxFuture<'_, bool> {
        self.ask_once(host.to_ascii_lowercase(), port).boxed()
    }
}

#[cfg(test)]
#[path = "approvals_tests.rs"]
mod tests;
