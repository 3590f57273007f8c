//! What the `Agent` service's concerns share: which runs a tenant reaches, what a run it
//! starts may hold (workspace, tools), who may answer approvals; and the stream type its
//! streaming calls answer with.

use std::pin::Pin;
use std::sync::Arc;

use airlock_proto::v1 as pb;
use futures::Stream;
use tonic::Status;

use crate::agent::{AgentError, AgentRuntime, RunOwner};
use crate::api::error::ApiError;
use crate::api::request::{check_tool, check_workspace, parse_id};
use crate::api::tenants::Tenant;
use crate::config::ApprovalRights;
use crate::ids::{RunId, SessionId};
use crate::wire;

/// Messages queued for a streaming call's client (a run list, an approver console).
pub(super) const CONSOLE_BUFFER: usize = 256;

/// What a streaming call answers with.
pub(super) type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Checks that `run_id` (request field `field`) is a run of `tenant`. Another tenant's run is
/// NOT_FOUND, exactly like one that does not exist.
pub(super) async fn owned_run(
    runtime: &AgentRuntime,
    tenant: &Tenant,
    run_id: &str,
    field: &str,
) -> Result<RunId, ApiError> {
    let run_id = parse_id(RunId::parse, run_id, field)?;
    let owner = runtime
        .run_owner(&run_id)
        .await
        .map_err(|err| ApiError::from(err).at(field))?;
    if tenant.owns(&owner) {
        Ok(run_id)
    } else {
        Err(ApiError::from(AgentError::UnknownRun(run_id.into_string())).at(field))
    }
}

/// Who starts a run, as the runtime holds it to the tenant's limits.
pub(super) fn run_owner(tenant: &Tenant) -> RunOwner {
    RunOwner {
        tenant: tenant.name.clone(),
        max_live_runs: tenant.max_concurrent_runs,
        allowed_tools: tenant.allowed_tools().cloned(),
    }
}

/// `tenant`, when it may answer approvals at all.
pub(super) fn approver(tenant: Arc<Tenant>) -> Result<Arc<Tenant>, ApiError> {
    if tenant.approvals == ApprovalRights::None {
        return Err(ApiError::Forbidden {
            tenant: tenant.name.clone(),
            what: "may not answer approvals (its `approvals` is `none`)".into(),
        });
    }
    Ok(tenant)
}

/// Checks a run's start against what `tenant` may do, and narrows its tools to the tenant's.
/// Errors name fields inside the `StartRun`.
pub(super) fn check_start(
    runtime: &AgentRuntime,
    tenant: &Tenant,
    start: &mut pb::StartRun,
) -> Result<(), ApiError> {
    if !start.session_id.is_empty() {
        parse_id(SessionId::parse, &start.session_id, "session_id")?;
    }
    check_workspace(tenant, wire::non_empty(&start.workspace))?;
    check_session_tools(runtime, tenant, &mut start.tools)
}

/// Tools a request names for a run or a session, held to the tenant's: "every tool" becomes
/// every tool the tenant may use. (A run in a session that leaves its tools unset inherits
/// the session's, and the runtime holds those to the tenant's too.)
pub(super) fn check_session_tools(
    runtime: &AgentRuntime,
    tenant: &Tenant,
    tools: &mut Vec<String>,
) -> Result<(), ApiError> {
    let Some(allowed) = tenant.allowed_tools() else {
        return Ok(());
    };
    if tools.is_empty() {
        // "Every tool" means every tool this tenant may use.
        let registry = runtime.registry();
        *tools = allowed
            .iter()
            .filter(|name| registry.get(name).is_some())
            .cloned()
            .collect();
        if tools.is_empty() {
            return Err(ApiError::Forbidden {
                tenant: tenant.name.clone(),
                what: "may use none of the tools this daemon serves".into(),
            }
            .at("tools"));
        }
    }
    for tool in tools.iter() {
        check_tool(tenant, tool).map_err(|err| err.at("tools"))?;
    }
    Ok(())
}
