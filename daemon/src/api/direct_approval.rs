//! Approvals of calls made outside any run: `ExecuteTool` with `require_approval`, which is
//! how MCP clients' calls reach airlock (through `airlock mcp`, or the daemon's own MCP
//! endpoint).
//!
//! Such a call is put to the same broker as a run's: the approver consoles of the caller's
//! tenant see it (with the run left empty and the tenant named), and so may the caller
//! itself, which is how an MCP client's elicitation answers. The first answer wins; the
//! request is bound by its digest to exactly this call — tool, its digest, the canonical
//! arguments, the profile — and no answer by the deadline is a denial.

use std::sync::Arc;
use std::time::Duration;

use airlock_proto::v1 as pb;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::domain::Decision;
use crate::ids::{self, ApprovalId};
use crate::policy::{ApprovalBroker, Asked, Binding, Outcome, binding_digest};
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

impl DirectApprovals {
    /// Asks through the runs' broker, with their default deadline.
    pub fn new(executor: Arc<Executor>, agents: &crate::agent::AgentRuntime) -> DirectApprovals {
        DirectApprovals {
            broker: agents.approvals().clone(),
            executor,
            timeout: agents.approval_timeout(),
        }
    }

    /// Whether `call` must wait for a person: any risk above read-only.
    pub fn needed(call: &Call) -> bool {
        call.tool.manifest.risk != Risk::ReadOnly
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
        let digest = binding_digest(&Binding {
            run_id: "",
            step_id: "",
            call_id: &approval_id,
            tool: call.tool.name(),
            tool_digest: call.tool.digest(),
            arguments: &arguments,
            profile: &call.profile.name,
            policy: POLICY,
        });
        let workspace = call
            .workspace
            .as_ref()
            .map(|path| path.display().to_string());
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
            reason: format!(
                "a {} tool, called directly (no run)",
                call.tool.manifest.risk.as_str()
            ),
            state: pb::ApprovalState::Pending as i32,
            tenant: tenant.to_owned(),
            ..Default::default()
        };
        // No session: an "approve for the session" answers this call alone.
        let asked = self.broker.register(request.clone(), approval_id);
        Some((request, asked))
    }
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
        let asked = self.broker.register(request, approval_id);
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
