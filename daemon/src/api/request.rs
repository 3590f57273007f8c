//! What the gRPC services read out of requests in common: ids, pages and their tokens, the
//! run filter, a client's approval decision, and the checks every edge makes of a tool or a
//! workspace a tenant names. Each refusal is an [`ApiError`] naming the field it is about;
//! a caller that nests the field (`start.workspace`) adds the outer part with
//! [`ApiError::at`].

use airlock_proto::v1 as pb;

use super::error::ApiError;
use super::tenants::Tenant;
use crate::ids::{RunId, SessionId};
use crate::policy::Verdict;
use crate::store::{RunCursor, RunFilter, RunState, SessionCursor};
use crate::wire;
use crate::workspace::WorkspaceError;

/// Runs and sessions listed per page unless the client asks for fewer; and the most it may
/// ask for.
const DEFAULT_PAGE_SIZE: u32 = 50;
const MAX_PAGE_SIZE: u32 = 500;

/// Parses an id a client sent in request field `field` with `parse` (such as
/// [`RunId::parse`]), so a typo is told apart from an id that names nothing.
pub fn parse_id<T>(
    parse: fn(&str) -> Result<T, String>,
    text: &str,
    field: &str,
) -> Result<T, ApiError> {
    parse(text).map_err(|reason| ApiError::invalid(field, reason))
}

/// The page size a client asked for: the default for none, never more than the maximum.
pub fn page_size(asked: u32) -> usize {
    let size = match asked {
        0 => DEFAULT_PAGE_SIZE,
        size => size.min(MAX_PAGE_SIZE),
    };
    size as usize
}

/// The page token of the page of runs after `cursor`: opaque to clients, and checked like
/// any field when it comes back.
pub fn run_page_token(cursor: &RunCursor) -> String {
    format!("{}.{}", cursor.created_at_ms, cursor.run_id)
}

/// The page token of the page of sessions after `cursor`.
pub fn session_page_token(cursor: &SessionCursor) -> String {
    format!("{}.{}", cursor.last_active_ms, cursor.session_id)
}

/// Where a page of runs starts: at the first run for no token.
fn parse_run_page_token(token: &str) -> Result<Option<RunCursor>, ApiError> {
    if token.is_empty() {
        return Ok(None);
    }
    let (time, run_id) = token.split_once('.').ok_or_else(invalid_page_token)?;
    let created_at_ms = time.parse().map_err(|_| invalid_page_token())?;
    let run_id = RunId::parse(run_id).map_err(|_| invalid_page_token())?;
    Ok(Some(RunCursor {
        created_at_ms,
        run_id,
    }))
}

/// Where a page of sessions starts: at the first session for no token.
pub fn parse_session_page_token(token: &str) -> Result<Option<SessionCursor>, ApiError> {
    if token.is_empty() {
        return Ok(None);
    }
    let (time, session_id) = token.split_once('.').ok_or_else(invalid_page_token)?;
    Ok(Some(SessionCursor {
        last_active_ms: time.parse().map_err(|_| invalid_page_token())?,
        session_id: SessionId::parse(session_id).map_err(|_| invalid_page_token())?,
    }))
}

fn invalid_page_token() -> ApiError {
    ApiError::invalid(
        "page_token",
        "not a page token of this daemon: pass the `next_page_token` of the previous \
         response unchanged, or none for the first page",
    )
}

/// A search of runs by their input is a scan of the tenant's runs: 200 bytes is more than
/// anyone types into a search box, and bounds the work each row costs.
pub const MAX_RUN_QUERY_BYTES: usize = 200;

/// What a ListRuns or WatchRuns request asks for: the filter (always the caller's tenant),
/// the page size, and where the page starts.
pub fn runs_query(
    tenant: &Tenant,
    request: &pb::ListRunsRequest,
) -> Result<(RunFilter, usize, Option<RunCursor>), ApiError> {
    let state = match pb::RunState::try_from(request.state) {
        Ok(pb::RunState::Unspecified) => None,
        Ok(pb::RunState::Running) => Some(RunState::Running),
        Ok(pb::RunState::WaitingForApproval) => Some(RunState::WaitingForApproval),
        Ok(pb::RunState::Finished) => Some(RunState::Finished),
        Err(_) => {
            return Err(ApiError::invalid(
                "state",
                format!("unknown run state {}", request.state),
            ));
        }
    };
    let session_id = wire::non_empty(&request.session_id)
        .map(|id| parse_id(SessionId::parse, id, "session_id"))
        .transpose()?;
    let after = parse_run_page_token(&request.page_token)?;
    if request.query.len() > MAX_RUN_QUERY_BYTES {
        return Err(ApiError::invalid(
            "query",
            format!(
                "{} bytes, over the {MAX_RUN_QUERY_BYTES} a search of runs may be",
                request.query.len()
            ),
        ));
    }
    let filter = RunFilter {
        session_id,
        state,
        tenant: Some(tenant.name.clone()),
        text: wire::non_empty(&request.query).map(str::to_owned),
    };
    Ok((filter, page_size(request.page_size), after))
}

/// A decision as a client sent it, decoded once here.
pub fn verdict(decision: &pb::ApprovalDecision) -> Verdict {
    Verdict {
        approval_id: decision.approval_id.clone(),
        decision: pb::Decision::try_from(decision.decision)
            .ok()
            .and_then(wire::decision_from),
        reason: decision.reason.clone(),
        digest: decision.digest.clone(),
        grant_prefix: decision.grant_prefix.clone(),
    }
}

/// Checks that `tenant` may use `tool`; the caller names the field.
pub fn check_tool(tenant: &Tenant, tool: &str) -> Result<(), ApiError> {
    if tenant.may_use_tool(tool) {
        Ok(())
    } else {
        Err(ApiError::Forbidden {
            tenant: tenant.name.clone(),
            what: format!("may not use tool `{tool}`"),
        })
    }
}

/// Checks that `tenant` may use `workspace` (none: a call or run without one), inside its
/// own roots; a refusal names the field `workspace`.
pub fn check_workspace(tenant: &Tenant, workspace: Option<&str>) -> Result<(), ApiError> {
    tenant
        .may_use_workspace(workspace)
        .map_err(|err| forbidden_workspace(tenant, err).at("workspace"))
}

/// A workspace outside the tenant's own roots.
fn forbidden_workspace(tenant: &Tenant, err: WorkspaceError) -> ApiError {
    ApiError::Forbidden {
        tenant: tenant.name.clone(),
        what: format!("may not use this workspace: {err}"),
    }
}
