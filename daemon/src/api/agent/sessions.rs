//! Sessions: `CreateSession`, `GetSession`, `ListSessions`. A session holds a workspace,
//! labels and the settings its runs start from; a tenant sees only its own.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use airlock_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::access::check_session_tools;
use crate::agent::AgentRuntime;
use crate::api::auth::caller;
use crate::api::error::ApiError;
use crate::api::request::{
    check_workspace, page_size, parse_id, parse_session_page_token, session_page_token,
};
use crate::ids::{RunId, SessionId};
use crate::store::SessionSummary;
use crate::wire;

/// A session's labels: a few short tags (a ticket, a repository), not a document store.
const MAX_LABELS: usize = 64;
const MAX_LABEL_BYTES: usize = 256;

/// The session calls of the `Agent` service.
pub(super) struct Sessions {
    runtime: Arc<AgentRuntime>,
}

impl Sessions {
    pub(super) fn new(runtime: Arc<AgentRuntime>) -> Sessions {
        Sessions { runtime }
    }

    pub(super) async fn create(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        check_workspace(&tenant, wire::non_empty(&request.workspace))?;
        check_labels(&request.labels)?;
        let labels: BTreeMap<String, String> = request.labels.into_iter().collect();
        let mut settings = request.settings.unwrap_or_default();
        check_session_tools(&self.runtime, &tenant, &mut settings.tools)
            .map_err(|err| err.at("settings"))?;
        let session = self
            .runtime
            .create_session(
                wire::non_empty(&request.workspace),
                labels,
                settings,
                &tenant.name,
            )
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(session_info(SessionSummary {
            last_active_ms: session.created_at_ms,
            session,
            runs: 0,
            last_run_id: None,
            running: false,
        })))
    }

    pub(super) async fn get(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let tenant = caller(&request)?;
        let session_id = parse_id(
            SessionId::parse,
            &request.get_ref().session_id,
            "session_id",
        )?;
        let summary = self
            .runtime
            .session(&session_id, &tenant.name)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(session_info(summary)))
    }

    pub(super) async fn list(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let after = parse_session_page_token(&request.page_token)?;
        let (sessions, next) = self
            .runtime
            .list_sessions(&tenant.name, page_size(request.page_size), after.as_ref())
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListSessionsResponse {
            sessions: sessions.into_iter().map(session_info).collect(),
            next_page_token: next.as_ref().map(session_page_token).unwrap_or_default(),
        }))
    }
}

/// Refuses labels past the bounds above, naming the label.
fn check_labels(labels: &HashMap<String, String>) -> Result<(), ApiError> {
    if labels.len() > MAX_LABELS {
        return Err(ApiError::invalid(
            "labels",
            format!("{} labels; the limit is {MAX_LABELS}", labels.len()),
        ));
    }
    for (key, value) in labels {
        if key.is_empty() || key.len() > MAX_LABEL_BYTES || value.len() > MAX_LABEL_BYTES {
            let shown: String = key.chars().take(40).collect();
            return Err(ApiError::invalid(
                "labels",
                format!(
                    "label `{shown}`: keys must be 1 to {MAX_LABEL_BYTES} bytes and values at \
                     most {MAX_LABEL_BYTES}"
                ),
            ));
        }
    }
    Ok(())
}

fn session_info(summary: SessionSummary) -> pb::Session {
    let session = summary.session;
    pb::Session {
        session_id: session.session_id.into_string(),
        workspace: session.workspace.unwrap_or_default(),
        labels: session.labels.into_iter().collect(),
        created_at_ms: session.created_at_ms,
        settings: Some(session.settings),
        runs: summary.runs,
        last_run_id: summary
            .last_run_id
            .map(RunId::into_string)
            .unwrap_or_default(),
        last_active_ms: summary.last_active_ms,
        running: summary.running,
    }
}
