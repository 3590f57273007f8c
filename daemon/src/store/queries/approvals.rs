//! The effect journal (each call's intent, result and pending change set) and approval
//! requests with their answers.

use airlock_proto::v1 as pb;
use prost::Message as _;

use super::text_column;
use crate::domain;
use crate::ids::{ApprovalId, CallId, RunId};
use crate::store::rows::{corrupt, decode, resolution};
use crate::store::sql::{Sql, args};
use crate::store::{ApprovalResolution, Effect, StoreError, StoreResult};

/// How much later than its intent's time plus its timeout a call may still act: the time
/// between the intent and the call's start (its sandbox made, its module instantiated) —
/// milliseconds as a rule, a second on a host under load. Kept by stores with leases.
const CALL_START_MARGIN_MS: i64 = 1_000;

pub(in crate::store) async fn record_intent<S: Sql>(c: &S, effect: &Effect) -> StoreResult<()> {
    if S::DIALECT.leases() {
        // The deadline a takeover waits for, on the server's clock.
        return c
            .execute_last_one(
                "INSERT INTO effects (run_id, call_id, tool, arguments, idempotent, intent_at_ms,
                                      timeout_ms, deadline_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, airlock_now_ms() + $7 + $8)",
                args![
                    effect.run_id.as_str(),
                    effect.call_id.as_str(),
                    &effect.tool,
                    &effect.arguments,
                    effect.idempotent,
                    effect.intent_at_ms,
                    effect
                        .timeout_ms
                        .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX / 2)),
                    CALL_START_MARGIN_MS,
                ],
            )
            .await
            .map(|_| ());
    }
    c.execute_last_one(
        "INSERT INTO effects (run_id, call_id, tool, arguments, idempotent, intent_at_ms,
                              timeout_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        args![
            effect.run_id.as_str(),
            effect.call_id.as_str(),
            &effect.tool,
            &effect.arguments,
            effect.idempotent,
            effect.intent_at_ms,
            effect
                .timeout_ms
                .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)),
        ],
    )
    .await
    .map(|_| ())
}

/// Sets one column of a call's journal entry; an error when no intent was recorded for it.
async fn update_effect<S: Sql>(
    c: &S,
    sql: &str,
    run_id: &RunId,
    call_id: &CallId,
    value: &[u8],
) -> StoreResult<()> {
    let changed = c
        .execute_last_one(sql, args![run_id.as_str(), call_id.as_str(), value])
        .await?;
    if changed == 0 {
        return Err(StoreError::Io(format!(
            "no intent recorded for call {call_id} of run {run_id}"
        )));
    }
    Ok(())
}

pub(in crate::store) async fn record_effect_result<S: Sql>(
    c: &S,
    run_id: &RunId,
    call_id: &CallId,
    result: &pb::ToolResult,
) -> StoreResult<()> {
    update_effect(
        c,
        "UPDATE effects SET result = $3 WHERE run_id = $1 AND call_id = $2",
        run_id,
        call_id,
        &result.encode_to_vec(),
    )
    .await
}

pub(in crate::store) async fn record_pending_changes<S: Sql>(
    c: &S,
    run_id: &RunId,
    call_id: &CallId,
    changes: &pb::ChangeSet,
) -> StoreResult<()> {
    update_effect(
        c,
        "UPDATE effects SET pending_changes = $3 WHERE run_id = $1 AND call_id = $2",
        run_id,
        call_id,
        &changes.encode_to_vec(),
    )
    .await
}

pub(in crate::store) async fn effect<S: Sql>(
    c: &S,
    run_id: &RunId,
    call_id: &CallId,
) -> StoreResult<Option<Effect>> {
    let Some(mut row) = c
        .query_opt(
            "SELECT tool, arguments, idempotent, intent_at_ms, result, pending_changes, timeout_ms
             FROM effects WHERE run_id = $1 AND call_id = $2",
            args![run_id.as_str(), call_id.as_str()],
        )
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(Effect {
        tool: row.get(0)?,
        arguments: row.get(1)?,
        idempotent: row.get(2)?,
        intent_at_ms: row.get(3)?,
        timeout_ms: row
            .get::<Option<i64>>(6)?
            .map(|ms| u64::try_from(ms).map_err(corrupt))
            .transpose()?,
        result: row
            .get::<Option<Vec<u8>>>(4)?
            .map(|bytes| decode(&bytes))
            .transpose()?,
        pending_changes: row
            .get::<Option<Vec<u8>>>(5)?
            .map(|bytes| decode(&bytes))
            .transpose()?,
        run_id: run_id.clone(),
        call_id: call_id.clone(),
    }))
}

pub(in crate::store) async fn save_approval<S: Sql>(
    c: &S,
    request: &pb::ApprovalRequest,
) -> StoreResult<()> {
    let subject = if request.network.is_some() {
        "connection"
    } else {
        "call"
    };
    c.execute(
        "INSERT INTO approvals (approval_id, run_id, call_id, request, subject)
         VALUES ($1, $2, $3, $4, $5)",
        args![
            &request.approval_id,
            &request.run_id,
            &request.call_id,
            &request.encode_to_vec(),
            subject,
        ],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn resolve_approval<S: Sql>(
    c: &S,
    approval_id: &ApprovalId,
    resolution: &ApprovalResolution,
) -> StoreResult<()> {
    let reason = text_column(&resolution.reason);
    c.execute(
        // The first resolution stands: a daemon that lost the run (frozen while it waited)
        // must not overwrite how the daemon that took it over had it answered.
        "UPDATE approvals SET decision = $2, reason = $3, decided_by = $4, resolved_at_ms = $5
         WHERE approval_id = $1 AND resolved_at_ms IS NULL",
        args![
            approval_id.as_str(),
            domain::decision(resolution.decision) as i32,
            reason.as_ref(),
            resolution.decided_by.as_str(),
            resolution.resolved_at_ms,
        ],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn approval_for_call<S: Sql>(
    c: &S,
    run_id: &RunId,
    call_id: &CallId,
) -> StoreResult<Option<(pb::ApprovalRequest, Option<ApprovalResolution>)>> {
    let order = S::DIALECT.approval_order();
    c.query_opt(
        &format!(
            "SELECT request, decision, reason, decided_by, resolved_at_ms FROM approvals
             WHERE run_id = $1 AND call_id = $2 AND subject = 'call' ORDER BY {order} DESC LIMIT 1"
        ),
        args![run_id.as_str(), call_id.as_str()],
    )
    .await?
    .map(|mut row| {
        Ok((
            decode(&row.get::<Vec<u8>>(0)?)?,
            resolution(row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)?,
        ))
    })
    .transpose()
}
