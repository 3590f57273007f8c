//! Calls made outside any run, whichever edge they arrive at: gRPC's `ExecuteTool` (and its
//! gRPC-Web form) and the MCP endpoint's `tools/call` go through this one admission, so that a
//! tenant meets the same walls on both — the tools it may see and call, the workspace roots
//! it may use, the size of its arguments and its cap on calls in flight, counted together
//! across the edges.
//!
//! An edge authenticates, asks [`DirectCalls::admit`], and holds the returned [`Admitted`]
//! slot until the call has ended; it decides only how to speak: a gRPC status, or an MCP
//! result.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::direct_approval::DirectApprovals;
use super::error::ApiError;
use super::limits;
use super::quota::{Quota, Slot};
use super::request::{check_tool, check_workspace};
use super::tenants::Tenant;
use crate::audit::Act;
use crate::policy::rules::{self, Decision, Policy, RuleSet};
use crate::policy::{ApprovalPolicy, PolicyBook};
use crate::tools::{Call, CallRequest, Executor, Tool};

/// What every edge shares for direct calls: one executor, one approval bridge, one count of
/// each tenant's calls in flight.
pub struct DirectCalls {
    pub executor: Arc<Executor>,
    pub approvals: Arc<DirectApprovals>,
    /// The operator's rules, per tenant: a direct call has no session or run layers.
    policy: Arc<PolicyBook>,
    executions: Quota,
}

/// A call a client asked for, as it arrived.
pub struct DirectCall {
    pub tool: String,
    pub arguments_json: String,
    /// Absolute host path; none for a call without a workspace.
    pub workspace: Option<String>,
    /// Shortens the tool's timeout; never extends it.
    pub timeout: Option<Duration>,
    /// The caller wants calls above read-only put to a person where no rule speaks
    /// (`ExecuteTool.require_approval`; always at the MCP edge): level `risky`, else `auto`.
    pub ask_risky: bool,
}

/// A call let in: prepared, with the tenant's slot held until it is dropped.
pub struct Admitted {
    pub call: Call,
    pub slot: Slot,
}

impl DirectCalls {
    pub fn new(
        executor: Arc<Executor>,
        approvals: Arc<DirectApprovals>,
        policy: Arc<PolicyBook>,
    ) -> DirectCalls {
        DirectCalls {
            executor,
            approvals,
            policy,
            executions: Quota::default(),
        }
    }

    /// The tools `tenant` sees, in the registry's order.
    pub fn visible(&self, tenant: &Tenant) -> Vec<Arc<Tool>> {
        self.executor
            .registry()
            .tools()
            .filter(|tool| tenant.may_use_tool(tool.name()))
            .cloned()
            .collect()
    }

    /// Whether `tenant` sees a tool named `tool`: one it may not use is, to it, no tool.
    pub fn sees(&self, tenant: &Tenant, tool: &str) -> bool {
        tenant.may_use_tool(tool) && self.executor.registry().get(tool).is_some()
    }

    /// Lets `request` of `tenant` in, or says why not (each refusal names its field).
    pub fn admit(&self, tenant: &Tenant, request: DirectCall) -> Result<Admitted, ApiError> {
        if request.tool.is_empty() {
            return Err(ApiError::invalid("tool", "required: the name of a tool"));
        }
        limits::check_arguments(&request.arguments_json)?;
        check_tool(tenant, &request.tool).map_err(|err| err.at("tool"))?;
        check_workspace(tenant, request.workspace.as_deref())?;
        let slot = self.executions.acquire(
            &tenant.name,
            tenant.max_concurrent_executions,
            "tool executions",
        )?;
        let mut call = self.executor.prepare(CallRequest {
            tool: request.tool,
            arguments_json: request.arguments_json,
            workspace: request.workspace,
            timeout: request.timeout,
            read_only: false,
            tenant: Some(tenant.name.clone()),
            in_run: false,
            ignores: None,
        })?;
        let level = if request.ask_risky {
            ApprovalPolicy::Risky
        } else {
            ApprovalPolicy::Auto
        };
        let verdict = self.judge(tenant, &call, level);
        if let Some(rule) = verdict.rule() {
            self.executor.auditor().record(
                Act::new(&tenant.name, "policy.matched")
                    .actor("policy")
                    .subject(call.tool.name())
                    .reason(&verdict.reason)
                    .detail("rule", rule.name.as_str())
                    .detail("layer", rule.origin.layer.as_str())
                    .detail("source", rule.origin.source.as_str())
                    .detail("line", rule.origin.line)
                    .detail("decision", verdict.decision.as_str()),
            );
        }
        if verdict.decision == Decision::Deny {
            crate::metrics::global().tool_call(
                call.tool.name(),
                call.tool.manifest.engine().as_str(),
                Some(&tenant.name),
                crate::tools::ToolStatus::Denied.as_str(),
                std::time::Duration::ZERO,
            );
            return Err(ApiError::PolicyDenied(verdict.reason));
        }
        call.verdict = Some(Arc::new(verdict));
        Ok(Admitted { call, slot })
    }

    /// What the tenant's operator rules decide of `call`, no rule speaking leaving it to
    /// `level`. Arguments that do not parse are judged as none: the call fails on them.
    fn judge(&self, tenant: &Tenant, call: &Call, level: ApprovalPolicy) -> rules::Verdict {
        let arguments: Value = serde_json::from_str(&call.arguments_json).unwrap_or(Value::Null);
        let facts = call.tool.judged(&arguments);
        let workspace = call.workspace.as_deref();
        Policy::new(vec![self.policy.operator(&tenant.name)]).decide(
            &rules::Call {
                tool: call.tool.name(),
                risk: call.tool.manifest.risk,
                engine: call.tool.manifest.engine().as_str(),
                arguments: &arguments,
                workspace,
                command: facts.command.as_ref(),
                hosts: &facts.hosts,
                grant_key: "",
            },
            level,
            &RuleSet::default(),
        )
    }
}
