//! Approvals of calls made outside any run: `ExecuteTool` with `require_approval`, which is
//! how MCP clients' calls reach airlock (through `airlock mcp`, or the daemon's own MCP
//! endpoint).
//!
//! Such a call is put to the same broker as a run's: the approver consoles of the caller's
//! tenant see it (with the run left empty and the tenant named), and so may the caller
//! itself, which is how an MCP client's elicitation answers. The first answer wins; the
//! request is bound by its digest to exactly this call — tool, its digest, the canonical
//! arguments, the profile — and no answer by the deadline is a denial.
//!
//! An MCP client of the 2026-07-28 revision cannot be asked mid-call (that revision has no
//! server-to-client requests): its question is held here ([`InBand::ask`])
//! — registered with the broker and announced to the approvers at once — while the client
//! puts it to its person and retries the call with the answer. The retry's answer is
//! recorded with the broker like any approver's ([`InBand::answer`]): the
//! call runs only on an approval the broker recorded, the first answer counts, and a held
//! question is answered in-band once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::error::ApiError;
use super::tenants::Tenant;
use crate::audit::Act;
use crate::domain::Decision;
use crate::ids::{self, ApprovalId};
use crate::policy::rules;
use crate::policy::{ApprovalBroker, Approver, Asked, Binding, Outcome, Verdict, binding_digest};
use crate::tools::{Call, Executor, Risk, ToolResult, ToolStatus};
use crate::wire;

/// The policy name direct calls' digests are bound to.
const POLICY: &str = "direct";

pub struct DirectApprovals {
    pub broker: Arc<ApprovalBroker>,
    pub executor: Arc<Executor>,
    /// How long a question waits for an answer.
    pub timeout: Duration,
}

/// Questions asked in-band (MCP's 2026-07-28 revision), waiting for their call's retry: an
/// MCP endpoint's, one per daemon.
#[derive(Default)]
pub struct InBand {
    /// By approval id.
    held: Mutex<HashMap<String, Held>>,
}

/// A question asked in-band: pending with the broker, its outcome awaited by a task of its
/// own until the client's retry takes it.
struct Held {
    tenant: String,
    /// The question's digest: the retry must be the same call (tool, its digest, arguments,
    /// profile)…
    digest: String,
    /// … in the same workspace, which the digest does not name.
    workspace: Option<String>,
    deadline_ms: i64,
    outcome: oneshot::Receiver<Outcome>,
    /// Awaits the broker's outcome; aborted, it withdraws the question.
    waiter: tokio::task::JoinHandle<()>,
}

/// Withdraws a held question whose retry went away before its outcome.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl DirectApprovals {
    /// Asks through the runs' broker, with their default deadline.
    pub fn new(executor: Arc<Executor>, agents: &crate::agent::AgentRuntime) -> DirectApprovals {
        DirectApprovals {
            broker: agents.approvals().clone(),
            executor,
            timeout: agents.approval_timeout(),
        }
    }

    /// Whether `call` must wait for a person: the policy said `ask` when it was admitted.
    pub fn needed(call: &Call) -> bool {
        call.verdict
            .as_ref()
            .is_some_and(|verdict| verdict.decision == rules::Decision::Ask)
    }

    /// Registers the question for `call` of `tenant`; answers count from now on. `None` when
    /// the arguments do not validate: the call then fails on its own, unasked.
    pub async fn register(
        &self,
        tenant: &str,
        call: &Call,
        cancel: &CancellationToken,
    ) -> Option<(pb::ApprovalRequest, Asked)> {
        let arguments: Value = call.tool.arguments.validate(&call.arguments_json).ok()?;
        let approval_id = ApprovalId::new().into_string();
        let digest = digest_of(call, &arguments, &approval_id);
        let workspace = workspace_of(call);
        let preview = crate::agent::preview(
            &self.executor,
            &call.tool,
            &arguments,
            workspace.as_deref(),
            cancel.clone(),
        )
        .await;
        let timeout_ms = i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX);
        let request = pb::ApprovalRequest {
            approval_id: approval_id.clone(),
            call_id: approval_id.clone(),
            tool: call.tool.name().to_owned(),
            arguments_json: arguments.to_string(),
            risk: wire::risk(call.tool.manifest.risk) as i32,
            profile: call.profile.name.clone(),
            preview: Some(preview),
            deadline_ms: ids::now_ms().saturating_add(timeout_ms),
            digest,
            reason: match &call.verdict {
                Some(verdict) => verdict.reason.clone(),
                None => format!(
                    "a {} tool, called directly (no run)",
                    call.tool.manifest.risk.as_str()
                ),
            },
            state: pb::ApprovalState::Pending as i32,
            tenant: tenant.to_owned(),
            policy: call.verdict.as_deref().map(wire::policy_verdict),
            ..Default::default()
        };
        // No session: an "approve for the session" answers this call alone.
        let asked = self.broker.register(request.clone());
        self.executor.auditor().record(
            Act::new(tenant, "approval.requested")
                .actor("policy")
                .subject(&request.tool)
                .reason(&request.reason)
                .detail("approval_id", request.approval_id.as_str())
                .detail("digest", request.digest.as_str()),
        );
        Some((request, asked))
    }

    /// Records how the question about `call` of `tenant` was answered — the audit log's
    /// decision and who made it, the metrics' outcome, a denied call — and returns the
    /// result of a call it refused (`None`: approved).
    pub fn settle(
        &self,
        tenant: &str,
        call: &Call,
        approval_id: &str,
        outcome: Outcome,
    ) -> Option<ToolResult> {
        let (label, decided_by, reason) = match &outcome {
            Outcome::Answered(answer) => (
                if answer.decision.approves() {
                    "approved"
                } else {
                    "denied"
                },
                answer.decided_by.as_str(),
                answer.reason.clone(),
            ),
            Outcome::Expired => (
                "expired",
                "deadline",
                "no answer by the deadline".to_owned(),
            ),
        };
        crate::metrics::global().approval_decided(label);
        self.executor.auditor().record(
            Act::new(tenant, "approval.decided")
                .actor(decided_by)
                .subject(call.tool.name())
                .reason(reason)
                .detail("approval_id", approval_id)
                .detail("decision", label),
        );
        let refused = refusal(outcome);
        if refused.is_some() {
            crate::metrics::global().tool_call(
                call.tool.name(),
                call.tool.manifest.engine().as_str(),
                Some(tenant),
                ToolStatus::Denied.as_str(),
                std::time::Duration::ZERO,
            );
        }
        refused
    }
}

impl InBand {
    /// Asks about `call` of `tenant` for an answer that comes with the call's retry: the
    /// question is registered and announced to the tenant's approvers now, and held until
    /// the retry ([`InBand::answer`]) or its deadline. `None` when the
    /// arguments do not validate (the call then fails on its own, unasked). A tenant holds
    /// at most as many such questions as it may have calls in flight: each is a call
    /// waiting for its approval.
    pub async fn ask(
        &self,
        approvals: &DirectApprovals,
        tenant: &Tenant,
        call: &Call,
        cancel: &CancellationToken,
    ) -> Result<Option<pb::ApprovalRequest>, ApiError> {
        let now = ids::now_ms();
        {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            // Past their deadline, held questions are answered (expired) and their retry
            // would find them so: forgotten.
            held.retain(|_, question| question.deadline_ms >= now);
            let holds = held
                .values()
                .filter(|question| question.tenant == tenant.name)
                .count();
            let max = tenant.max_concurrent_executions;
            if holds >= usize::try_from(max).unwrap_or(usize::MAX) {
                return Err(ApiError::Capacity {
                    tenant: tenant.name.clone(),
                    max,
                    what: "approvals waiting for their call's retry",
                });
            }
        }
        let Some((question, asked)) = approvals.register(&tenant.name, call, cancel).await else {
            return Ok(None);
        };
        let (sender, outcome) = oneshot::channel();
        // Awaiting the outcome is what announces the question to the approvers.
        let waiter = tokio::spawn(async move {
            let _ = sender.send(asked.outcome().await);
        });
        let question_held = Held {
            tenant: tenant.name.clone(),
            digest: question.digest.clone(),
            workspace: workspace_of(call),
            deadline_ms: question.deadline_ms,
            outcome,
            waiter,
        };
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(question.approval_id.clone(), question_held);
        Ok(Some(question))
    }

    /// The outcome of held question `approval_id` for the retry of `call` by `tenant`, its
    /// person's answer (`None`: the retry carries none) recorded with the broker first.
    /// The broker's outcome is the answer: a console's earlier answer stands, and a retry
    /// without an answer waits for the approvers until the deadline.
    ///
    /// `None` — the retry is refused — unless the question is held here, is `tenant`'s,
    /// and asked about this very call in this workspace. Taking the question makes the
    /// answer count once: a replayed retry finds nothing.
    pub async fn answer(
        &self,
        approvals: &DirectApprovals,
        tenant: &str,
        call: &Call,
        approval_id: &str,
        answer: Option<Decision>,
        cancel: &CancellationToken,
    ) -> Option<Outcome> {
        let arguments: Value = call.tool.arguments.validate(&call.arguments_json).ok()?;
        let digest = digest_of(call, &arguments, approval_id);
        let workspace = workspace_of(call);
        let question = {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            let matches = held.get(approval_id).is_some_and(|question| {
                question.tenant == tenant
                    && question.digest == digest
                    && question.workspace == workspace
            });
            // A question another call's retry names stays held for its own.
            if !matches {
                return None;
            }
            held.remove(approval_id)?
        };
        let _withdraw = AbortOnDrop(question.waiter.abort_handle());
        if let Some(decision) = answer {
            let verdict = Verdict {
                approval_id: approval_id.to_owned(),
                decision: Some(decision),
                reason: if decision == Decision::Deny {
                    "declined at the MCP client".to_owned()
                } else {
                    String::new()
                },
                digest,
                grant_prefix: Vec::new(),
            };
            // Too late when an approver answered first: the broker says so, and that
            // answer stands.
            let _ = approvals.broker.decide(&verdict, &Approver::Console);
        }
        tokio::select! {
            outcome = question.outcome => Some(outcome.unwrap_or(Outcome::Expired)),
            () = cancel.cancelled() => None,
        }
    }
}

/// The digest a question about `call` with `arguments` is bound by, as the approvers and
/// the broker check it.
fn digest_of(call: &Call, arguments: &Value, approval_id: &str) -> String {
    binding_digest(&Binding {
        run_id: "",
        step_id: "",
        call_id: approval_id,
        tool: call.tool.name(),
        tool_digest: call.tool.digest(),
        arguments,
        profile: &call.profile.name,
        policy: POLICY,
    })
}

fn workspace_of(call: &Call) -> Option<String> {
    call.workspace
        .as_ref()
        .map(|path| path.display().to_string())
}

/// A hosted MCP server's question (an elicitation), put to its tenant's approvers.
impl crate::engine::mcp::Asker for DirectApprovals {
    fn ask(
        &self,
        tenant: Option<String>,
        server: String,
        message: String,
    ) -> futures::future::BoxFuture<'static, bool> {
        let approval_id = ApprovalId::new().into_string();
        let timeout_ms = i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX);
        let question = serde_json::json!({ "message": message });
        let request = pb::ApprovalRequest {
            approval_id: approval_id.clone(),
            call_id: approval_id.clone(),
            tool: format!("{server} (a question from the MCP server)"),
            arguments_json: question.to_string(),
            risk: wire::risk(Risk::Write) as i32,
            preview: Some(pb::Preview {
                kind: "arguments".into(),
                text: message.clone(),
                ..Default::default()
            }),
            deadline_ms: ids::now_ms().saturating_add(timeout_ms),
            digest: crate::policy::sha256_of(&serde_json::json!({
                "elicitation": approval_id,
                "server": server,
                "message": message,
            })),
            reason: format!("MCP server `{server}` asks: {message}"),
            state: pb::ApprovalState::Pending as i32,
            tenant: tenant.unwrap_or_else(|| super::tenants::DEFAULT_TENANT.to_owned()),
            ..Default::default()
        };
        let asked = self.broker.register(request);
        Box::pin(async move { refusal(asked.outcome().await).is_none() })
    }
}

/// The result of a call its approval refused; `None` when it was approved.
pub fn refusal(outcome: Outcome) -> Option<ToolResult> {
    match outcome {
        Outcome::Answered(answer) => match answer.decision {
            Decision::ApproveOnce | Decision::ApproveSession => None,
            Decision::Deny => {
                let reason = if answer.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", answer.reason)
                };
                Some(ToolResult::refused(
                    ToolStatus::Denied,
                    format!("the call was denied by the {}{reason}", answer.decided_by),
                ))
            }
        },
        Outcome::Expired => Some(ToolResult::refused(
            ToolStatus::Denied,
            "nobody answered the call's approval by its deadline",
        )),
    }
}
