//! `airlock.v1.Policy`: what the rules would decide for a call and why, the rules in force
//! for the caller's tenant (and a session's own rules and grants), and the withdrawal of a
//! grant. Translation only: the decisions are the agent's (`agent::judge`), the very code a
//! run's gate uses.

use std::sync::Arc;

use airlock_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::auth::caller;
use super::error::ApiError;
use super::limits;
use super::request::{check_tool, check_workspace, parse_id};
use crate::agent::judge::{self, PolicyCheck};
use crate::agent::{AgentError, AgentRuntime};
use crate::ids::SessionId;
use crate::policy::ApprovalPolicy;
use crate::policy::rules::{Decision, Layer};
use crate::store::GrantRecord;
use crate::wire;

pub struct PolicyService {
    agents: Arc<AgentRuntime>,
}

impl PolicyService {
    pub fn new(agents: Arc<AgentRuntime>) -> PolicyService {
        PolicyService { agents }
    }
}

fn session_id(text: &str) -> Result<Option<SessionId>, ApiError> {
    (!text.is_empty())
        .then(|| parse_id(SessionId::parse, text, "session_id"))
        .transpose()
}

/// A grant as a rule of the grant layer.
fn grant_rule(grant: &GrantRecord) -> pb::PolicyRule {
    pb::PolicyRule {
        name: format!("grant {}", judge::short(&grant.grant_key)),
        decision: wire::policy_decision(Decision::Allow) as i32,
        grantable: false,
        layer: wire::policy_layer(Layer::Grant) as i32,
        source: format!("session {}", grant.session_id),
        line: 0,
        grant_id: grant.grant_key.clone(),
        session_id: grant.session_id.to_string(),
        covers: grant.covers.clone(),
        created_at_ms: grant.created_at_ms,
    }
}

#[tonic::async_trait]
impl pb::policy_server::Policy for PolicyService {
    async fn check_policy(
        &self,
        request: Request<pb::CheckPolicyRequest>,
    ) -> Result<Response<pb::PolicyVerdict>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        if request.tool.is_empty() {
            return Err(ApiError::invalid("tool", "required: the name of a tool").into());
        }
        check_tool(&tenant, &request.tool).map_err(|err| err.at("tool"))?;
        limits::check_arguments(&request.arguments_json)?;
        let workspace = (!request.workspace.is_empty()).then_some(request.workspace);
        check_workspace(&tenant, workspace.as_deref())?;
        let workspace = self
            .agents
            .workspaces()
            .resolve(workspace.as_deref())
            .map_err(|err| ApiError::from(crate::agent::AgentError::Workspace(err)))?
            .map(|path| path.to_string_lossy().into_owned());
        let level = match pb::ApprovalPolicy::try_from(request.approval_policy) {
            Ok(pb::ApprovalPolicy::Unspecified) => None,
            Ok(level) => Some(ApprovalPolicy::from_wire(level)),
            Err(_) => {
                return Err(ApiError::invalid(
                    "approval_policy",
                    format!("unknown approval policy {}", request.approval_policy),
                )
                .into());
            }
        };
        let verdict = self
            .agents
            .check_policy(
                &tenant.name,
                PolicyCheck {
                    tool: request.tool,
                    arguments_json: request.arguments_json,
                    session_id: session_id(&request.session_id)?,
                    workspace,
                    level,
                    run_rules: request.rules,
                },
            )
            .await
            .map_err(|err| match err {
                // The tool is this request's `tool`, not a run's `tools` list.
                AgentError::UnknownTool(_) | AgentError::ToolNotAllowed { .. } => {
                    ApiError::Agent(err).at("tool")
                }
                other => ApiError::from(other),
            })?;
        Ok(Response::new(wire::policy_verdict(&verdict)))
    }

    async fn list_policy_rules(
        &self,
        request: Request<pb::ListPolicyRulesRequest>,
    ) -> Result<Response<pb::ListPolicyRulesResponse>, Status> {
        let tenant = caller(&request)?;
        let session = session_id(&request.get_ref().session_id)?;
        let listing = self
            .agents
            .policy_rules(&tenant.name, session.as_ref())
            .await
            .map_err(ApiError::from)?;
        let mut rules: Vec<pb::PolicyRule> = listing.rules.iter().map(wire::policy_rule).collect();
        rules.extend(listing.grants.iter().map(grant_rule));
        Ok(Response::new(pb::ListPolicyRulesResponse { rules }))
    }

    async fn revoke_grant(
        &self,
        request: Request<pb::RevokeGrantRequest>,
    ) -> Result<Response<pb::RevokeGrantResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let Some(session) = session_id(&request.session_id)? else {
            return Err(ApiError::invalid(
                "session_id",
                "required: the session the grant holds in",
            )
            .into());
        };
        self.agents
            .revoke_grant(&tenant.name, &session, &request.grant_id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::RevokeGrantResponse {}))
    }
}
