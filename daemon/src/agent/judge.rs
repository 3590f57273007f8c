//! How the agent applies the policy: a call's facts read off its tool and arguments, the
//! session's grants as the grant layer's rules, and the same decision for a client that only
//! asks what would happen (`CheckPolicy`) as for a run's gate.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::error::AgentError;
use super::runtime::AgentRuntime;
use crate::ids::SessionId;
use crate::policy::rules::{Call, Decision, Layer, Policy, Rule, RuleRef, RuleSet, Verdict, file};
use crate::policy::{ApprovalPolicy, session_grant_key};
use crate::store::{GrantRecord, Store, StoreError};
use crate::tools::Tool;

/// What one decision needs besides the rules.
pub struct Judging<'a> {
    pub tool: &'a Tool,
    pub arguments: &'a Value,
    /// None for a call outside any session (a client's check): no grants apply.
    pub session_id: Option<&'a SessionId>,
    pub workspace: Option<&'a str>,
    pub level: ApprovalPolicy,
}

/// Decides a call: first without grants, then — only when it would ask — with the session's.
pub async fn decide(
    store: &Arc<dyn Store>,
    rules: &Policy,
    judging: &Judging<'_>,
) -> Result<Verdict, StoreError> {
    let facts = judging.tool.judged(judging.arguments);
    let grant_key = grant_key(judging);
    let call = Call {
        tool: judging.tool.name(),
        risk: judging.tool.manifest.risk,
        engine: judging.tool.manifest.engine().as_str(),
        arguments: judging.arguments,
        workspace: judging.workspace.map(Path::new),
        command: facts.command.as_ref(),
        hosts: &facts.hosts,
        grant_key: &grant_key,
    };
    let verdict = rules.decide(&call, judging.level, &RuleSet::default());
    let Some(session_id) = judging
        .session_id
        .filter(|_| verdict.decision == Decision::Ask)
    else {
        return Ok(verdict);
    };
    let grants = store.session_grants(session_id).await?;
    if grants.is_empty() {
        return Ok(verdict);
    }
    Ok(rules.decide(&call, judging.level, &grant_rules(&grants)))
}

/// The key an exact grant of this call has.
pub fn grant_key(judging: &Judging<'_>) -> String {
    session_grant_key(
        judging
            .session_id
            .map(SessionId::as_str)
            .unwrap_or_default(),
        judging.tool.name(),
        judging.tool.digest(),
        judging.arguments,
        &judging.tool.profile.name,
    )
}

/// The session's grants as the grant layer's rules.
pub fn grant_rules(grants: &[GrantRecord]) -> RuleSet {
    RuleSet::new(grants.iter().map(grant_rule).collect())
}

fn grant_rule(grant: &GrantRecord) -> Rule {
    let name = format!("grant {}", short(&grant.grant_key));
    let source = format!("session {}", grant.session_id);
    match &grant.prefix {
        Some(prefix) => Rule::prefix_grant(name, source, &grant.tool, prefix),
        None => Rule::exact_grant(name, source, grant.grant_key.clone()),
    }
}

/// How a grant is shown: its key's first sixteen characters are its id for a person.
pub fn short(key: &str) -> &str {
    key.get(..16).unwrap_or(key)
}

impl AgentRuntime {
    /// The rules a call of `tenant` in a session (its rules `session_text`) would be judged by,
    /// with `run_text` added as a run's rules.
    pub fn policy_for(
        &self,
        tenant: &str,
        session_text: &str,
        session_source: &str,
        run_text: &str,
    ) -> Result<Policy, AgentError> {
        let invalid = |field, reason| AgentError::Invalid { field, reason };
        let session = self::session_rules(session_text, session_source)
            .map_err(|reason| invalid("settings.rules", reason))?;
        let run = self::run_rules(run_text).map_err(|reason| invalid("rules", reason))?;
        Ok(Policy::new(vec![
            self.shared.policy.operator(tenant),
            Arc::new(RuleSet::new(session)),
            Arc::new(RuleSet::new(run)),
        ]))
    }
}

/// A client's question: what would the policy decide for this call?
pub struct PolicyCheck {
    pub tool: String,
    pub arguments_json: String,
    pub session_id: Option<SessionId>,
    /// Absolute, already checked against the tenant's roots; the session's when unset.
    pub workspace: Option<String>,
    /// The session's level (else the daemon's default) when unset.
    pub level: Option<ApprovalPolicy>,
    /// A run's rules to judge with.
    pub run_rules: String,
}

/// The rules in force for a tenant, and a session's own.
pub struct PolicyListing {
    pub rules: Vec<RuleRef>,
    pub grants: Vec<GrantRecord>,
}

impl AgentRuntime {
    /// What the policy would decide for `check`, made by `tenant`; runs and asks nothing.
    pub async fn check_policy(
        &self,
        tenant: &str,
        check: PolicyCheck,
    ) -> Result<Verdict, AgentError> {
        let tool = self
            .registry()
            .get(&check.tool)
            .ok_or_else(|| AgentError::UnknownTool(check.tool.clone()))?;
        let arguments = tool
            .arguments
            .validate(&check.arguments_json)
            .map_err(|err| AgentError::Invalid {
                field: "arguments_json",
                reason: err.to_string(),
            })?;
        let session = match &check.session_id {
            Some(id) => Some(self.session(id, tenant).await?.session),
            None => None,
        };
        let (session_rules, source, session_level, session_workspace) = match &session {
            Some(session) => (
                session.settings.rules.as_str(),
                format!("session {}", session.session_id),
                airlock_proto::v1::ApprovalPolicy::try_from(session.settings.approval_policy)
                    .ok()
                    .map(ApprovalPolicy::from_wire),
                session.workspace.clone(),
            ),
            None => ("", String::new(), None, None),
        };
        let rules = self.policy_for(tenant, session_rules, &source, &check.run_rules)?;
        let workspace = check.workspace.or(session_workspace);
        let judging = Judging {
            tool: &tool,
            arguments: &arguments,
            session_id: check.session_id.as_ref(),
            workspace: workspace.as_deref(),
            level: check
                .level
                .or(session_level)
                .unwrap_or(ApprovalPolicy::Risky),
        };
        Ok(decide(&self.shared.store, &rules, &judging).await?)
    }

    /// The operator's rules for `tenant`, and with `session` its own rules and grants.
    pub async fn policy_rules(
        &self,
        tenant: &str,
        session_id: Option<&SessionId>,
    ) -> Result<PolicyListing, AgentError> {
        let mut rules: Vec<RuleRef> = self
            .shared
            .policy
            .operator(tenant)
            .rules()
            .iter()
            .map(Rule::reference)
            .collect();
        let mut grants = Vec::new();
        if let Some(id) = session_id {
            let session = self.session(id, tenant).await?.session;
            let source = format!("session {id}");
            let own = session_rules(&session.settings.rules, &source).map_err(|reason| {
                AgentError::Invalid {
                    field: "settings.rules",
                    reason,
                }
            })?;
            rules.extend(own.iter().map(Rule::reference));
            grants = self.shared.store.session_grants(id).await?;
        }
        Ok(PolicyListing { rules, grants })
    }

    /// Withdraws the grant of `session_id` whose id starts with `grant_id` (at least the
    /// sixteen characters a listing shows).
    pub async fn revoke_grant(
        &self,
        tenant: &str,
        session_id: &SessionId,
        grant_id: &str,
    ) -> Result<GrantRecord, AgentError> {
        self.session(session_id, tenant).await?;
        if grant_id.len() < 16 {
            return Err(AgentError::Invalid {
                field: "grant_id",
                reason: format!(
                    "`{grant_id}` is too short: give at least the 16 characters a listing shows"
                ),
            });
        }
        let grants = self.shared.store.session_grants(session_id).await?;
        let mut matching = grants
            .iter()
            .filter(|grant| grant.grant_key.starts_with(grant_id));
        let (Some(grant), None) = (matching.next(), matching.next()) else {
            return Err(AgentError::UnknownGrant(format!(
                "session `{session_id}` has no grant `{grant_id}`"
            )));
        };
        self.shared
            .store
            .revoke_session_grant(session_id, &grant.grant_key)
            .await?;
        Ok(grant.clone())
    }
}

/// The rules a run's request adds, checked: ask and deny only, examples behaving.
pub(crate) fn run_rules(text: &str) -> Result<Vec<Rule>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    file::parse(text, "the run's rules", Layer::Run)
}

/// The rules a session's settings add, checked the same way.
pub(crate) fn session_rules(text: &str, source: &str) -> Result<Vec<Rule>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    file::parse(text, source, Layer::Session)
}
