//! Sessions, their listing by activity, and their "always" grants.

use prost::Message as _;

use crate::ids::SessionId;
use crate::store::rows::{self, SESSION_COLUMNS, page, workspace_column};
use crate::store::sql::{Sql, args};
use crate::store::{
    GrantRecord, SessionCursor, SessionRecord, SessionSummary, StoreError, StoreResult,
};

pub(in crate::store) async fn create_session<S: Sql>(
    c: &S,
    session: &SessionRecord,
) -> StoreResult<()> {
    let labels =
        serde_json::to_string(&session.labels).map_err(|e| StoreError::Io(e.to_string()))?;
    c.execute(
        "INSERT INTO sessions (session_id, workspace, labels, created_at_ms, tenant, settings)
         VALUES ($1, $2, $3, $4, $5, $6)",
        args![
            session.session_id.as_str(),
            workspace_column(&session.workspace),
            &labels,
            session.created_at_ms,
            &session.tenant,
            &session.settings.encode_to_vec(),
        ],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn session_summary<S: Sql>(
    c: &S,
    session_id: &SessionId,
) -> StoreResult<Option<SessionSummary>> {
    c.query_opt(
        &format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.session_id = $1"),
        args![session_id.as_str()],
    )
    .await?
    .map(|mut row| rows::session_summary(&mut row))
    .transpose()
}

pub(in crate::store) async fn session<S: Sql>(
    c: &S,
    session_id: &SessionId,
) -> StoreResult<Option<SessionRecord>> {
    Ok(session_summary(c, session_id)
        .await?
        .map(|summary| summary.session))
}

pub(in crate::store) async fn list_sessions<S: Sql>(
    c: &S,
    tenant: &str,
    limit: usize,
    after: Option<&SessionCursor>,
) -> StoreResult<(Vec<SessionSummary>, Option<SessionCursor>)> {
    let sessions = c
        .query(
            &format!(
                "SELECT * FROM (SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.tenant = $1) page
                 WHERE ($2::bigint IS NULL OR last_active_ms < $2
                        OR (last_active_ms = $2 AND session_id < $3))
                 ORDER BY last_active_ms DESC, session_id DESC
                 LIMIT $4"
            ),
            args![
                tenant,
                after.map(|cursor| cursor.last_active_ms),
                after.map(|cursor| cursor.session_id.as_str()),
                super::count_param(limit.saturating_add(1)),
            ],
        )
        .await?
        .iter_mut()
        .map(rows::session_summary)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(page(sessions, limit, |summary| SessionCursor {
        last_active_ms: summary.last_active_ms,
        session_id: summary.session.session_id.clone(),
    }))
}

pub(in crate::store) async fn add_session_grant<S: Sql>(
    c: &S,
    grant: &GrantRecord,
) -> StoreResult<()> {
    let prefix = grant
        .prefix
        .as_ref()
        .map(|prefix| serde_json::Value::from(prefix.clone()).to_string());
    c.execute(
        "INSERT INTO session_grants (session_id, grant_key, tool, prefix, covers, created_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT DO NOTHING",
        args![
            grant.session_id.as_str(),
            grant.grant_key.as_str(),
            grant.tool.as_str(),
            prefix.as_deref(),
            grant.covers.as_str(),
            grant.created_at_ms
        ],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn session_grants<S: Sql>(
    c: &S,
    session_id: &SessionId,
) -> StoreResult<Vec<GrantRecord>> {
    c.query(
        "SELECT grant_key, tool, prefix, covers, created_at_ms FROM session_grants
         WHERE session_id = $1 ORDER BY created_at_ms, grant_key",
        args![session_id.as_str()],
    )
    .await?
    .iter_mut()
    .map(|row| {
        let prefix: Option<String> = row.get(2)?;
        let prefix = match prefix {
            None => None,
            Some(text) => Some(serde_json::from_str::<Vec<String>>(&text).map_err(|err| {
                StoreError::Corrupt(format!(
                    "a session grant's prefix is not a list of words: {err}"
                ))
            })?),
        };
        Ok(GrantRecord {
            session_id: session_id.clone(),
            grant_key: row.get(0)?,
            tool: row.get(1)?,
            prefix,
            covers: row.get(3)?,
            created_at_ms: row.get(4)?,
        })
    })
    .collect()
}

pub(in crate::store) async fn revoke_session_grant<S: Sql>(
    c: &S,
    session_id: &SessionId,
    grant_key: &str,
) -> StoreResult<bool> {
    c.execute(
        "DELETE FROM session_grants WHERE session_id = $1 AND grant_key = $2",
        args![session_id.as_str(), grant_key],
    )
    .await
    .map(|deleted| deleted > 0)
}
