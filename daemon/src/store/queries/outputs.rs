//! Kept outputs and the owners of tool executions, and their retention.

use super::count_param;
use crate::ids::{ExecutionId, RunId};
use crate::store::rows::{self, OUTPUT_COLUMNS};
use crate::store::sql::{Sql, args};
use crate::store::{ExecutionOwner, OutputRecord, StoreResult};

pub(in crate::store) async fn record_output<S: Sql>(
    c: &S,
    output: &OutputRecord,
) -> StoreResult<()> {
    c.execute(
        "INSERT INTO outputs (execution_id, digest, size, created_at_ms) VALUES ($1, $2, $3, $4)
         ON CONFLICT (execution_id) DO UPDATE SET digest = EXCLUDED.digest,
         size = EXCLUDED.size, created_at_ms = EXCLUDED.created_at_ms",
        args![
            output.execution_id.as_str(),
            &output.digest,
            i64::try_from(output.size).unwrap_or(i64::MAX),
            output.created_at_ms,
        ],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn output<S: Sql>(
    c: &S,
    execution_id: &ExecutionId,
) -> StoreResult<Option<OutputRecord>> {
    c.query_opt(
        &format!("SELECT {OUTPUT_COLUMNS} FROM outputs o WHERE o.execution_id = $1"),
        args![execution_id.as_str()],
    )
    .await?
    .map(|mut row| rows::output(&mut row))
    .transpose()
}

pub(in crate::store) async fn oldest_outputs<S: Sql>(
    c: &S,
    limit: usize,
) -> StoreResult<Vec<OutputRecord>> {
    c.query(
        &format!(
            "SELECT {OUTPUT_COLUMNS} FROM outputs o
             ORDER BY o.created_at_ms, o.execution_id LIMIT $1"
        ),
        args![count_param(limit)],
    )
    .await?
    .iter_mut()
    .map(rows::output)
    .collect()
}

pub(in crate::store) async fn outputs_before<S: Sql>(
    c: &S,
    before_ms: i64,
    limit: usize,
) -> StoreResult<Vec<OutputRecord>> {
    c.query(
        &format!(
            "SELECT {OUTPUT_COLUMNS} FROM outputs o
             LEFT JOIN execution_owners e ON e.execution_id = o.execution_id
             LEFT JOIN runs r ON r.run_id = e.run_id
             WHERE o.created_at_ms < $1 AND (r.run_id IS NULL OR r.state = 'finished')
             ORDER BY o.created_at_ms, o.execution_id LIMIT $2"
        ),
        args![before_ms, count_param(limit)],
    )
    .await?
    .iter_mut()
    .map(rows::output)
    .collect()
}

pub(in crate::store) async fn remove_output<S: Sql>(
    c: &S,
    execution_id: &ExecutionId,
) -> StoreResult<()> {
    c.execute(
        "DELETE FROM outputs WHERE execution_id = $1",
        args![execution_id.as_str()],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn output_references<S: Sql>(c: &S, digest: &str) -> StoreResult<u64> {
    match c
        .query_opt(
            "SELECT COUNT(*) FROM outputs WHERE digest = $1",
            args![digest],
        )
        .await?
    {
        Some(mut row) => row.get(0),
        None => Ok(0),
    }
}

pub(in crate::store) async fn record_execution_owner<S: Sql>(
    c: &S,
    execution_id: &ExecutionId,
    owner: &ExecutionOwner,
) -> StoreResult<()> {
    c.execute(
        "INSERT INTO execution_owners (execution_id, tenant, run_id, started_at_ms)
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        args![
            execution_id.as_str(),
            &owner.tenant,
            owner.run_id.as_ref().map(RunId::as_str),
            owner.started_at_ms,
        ],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn forget_executions<S: Sql>(c: &S, before_ms: i64) -> StoreResult<u64> {
    // An owner goes only with its output: a kept output without one would read as the
    // default tenant's.
    c.execute(
        "DELETE FROM execution_owners WHERE started_at_ms < $1
         AND execution_id NOT IN (SELECT execution_id FROM outputs)
         AND (run_id IS NULL OR run_id NOT IN (SELECT run_id FROM runs WHERE state <> 'finished'))",
        args![before_ms],
    )
    .await
}

pub(in crate::store) async fn execution_owner<S: Sql>(
    c: &S,
    execution_id: &ExecutionId,
) -> StoreResult<Option<String>> {
    c.query_opt(
        "SELECT tenant FROM execution_owners WHERE execution_id = $1",
        args![execution_id.as_str()],
    )
    .await?
    .map(|mut row| row.get(0))
    .transpose()
}
