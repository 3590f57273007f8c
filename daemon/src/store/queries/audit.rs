//! The audit log's chains: appending a record after its tenant's head (the head row's update
//! takes the row's lock, so two daemons of a fleet appending for one tenant take turns), and
//! reading, verifying and cutting a chain.

use super::{count_param, seq_param};
use crate::store::audit::{AuditDraft, AuditRecord, CHECKPOINT, GENESIS};
use crate::store::sql::{Row, Sql, args};
use crate::store::{StoreError, StoreResult};

const COLUMNS: &str = "tenant, seq, at_ms, kind, actor, subject, reason, details, prev, digest";

fn record(mut row: Row) -> StoreResult<AuditRecord> {
    Ok(AuditRecord {
        tenant: row.get(0)?,
        seq: u64::try_from(row.get::<i64>(1)?).unwrap_or(0),
        at_ms: row.get(2)?,
        kind: row.get(3)?,
        actor: row.get(4)?,
        subject: row.get(5)?,
        reason: row.get(6)?,
        details: row.get(7)?,
        prev: row.get(8)?,
        digest: row.get(9)?,
    })
}

pub(in crate::store) async fn append<S: Sql>(
    c: &S,
    draft: &AuditDraft,
) -> StoreResult<AuditRecord> {
    c.execute(
        "INSERT INTO audit_heads (tenant, seq, digest) VALUES ($1, 0, $2)
         ON CONFLICT (tenant) DO NOTHING",
        args![&draft.tenant, GENESIS],
    )
    .await?;
    let mut head = c
        .query_opt(
            "UPDATE audit_heads SET seq = seq + 1 WHERE tenant = $1 RETURNING seq, digest",
            args![&draft.tenant],
        )
        .await?
        .ok_or_else(|| StoreError::Io("the audit chain's head row is missing".into()))?;
    let seq = u64::try_from(head.get::<i64>(0)?).unwrap_or(0);
    let prev: String = head.get(1)?;
    let record = AuditRecord::chain(draft, seq, &prev);
    c.execute(
        "INSERT INTO audit_log (tenant, seq, at_ms, kind, actor, subject, reason, details, prev, digest)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        args![
            &record.tenant,
            seq_param(record.seq),
            record.at_ms,
            &record.kind,
            &record.actor,
            &record.subject,
            &record.reason,
            &record.details,
            &record.prev,
            &record.digest,
        ],
    )
    .await?;
    c.execute(
        "UPDATE audit_heads SET digest = $2 WHERE tenant = $1",
        args![&record.tenant, &record.digest],
    )
    .await?;
    Ok(record)
}

/// A tenant's records after `after_seq` and at or after `since_ms`, in order, at most `limit`.
pub(in crate::store) async fn records<S: Sql>(
    c: &S,
    tenant: &str,
    after_seq: u64,
    since_ms: i64,
    limit: usize,
) -> StoreResult<Vec<AuditRecord>> {
    c.query(
        &format!(
            "SELECT {COLUMNS} FROM audit_log WHERE tenant = $1 AND seq > $2 AND at_ms >= $3
             ORDER BY seq LIMIT $4"
        ),
        args![tenant, seq_param(after_seq), since_ms, count_param(limit)],
    )
    .await?
    .into_iter()
    .map(record)
    .collect()
}

/// The sequence number and digest the tenant's head row names; none for a tenant with no
/// chain.
pub(in crate::store) async fn head<S: Sql>(
    c: &S,
    tenant: &str,
) -> StoreResult<Option<(u64, String)>> {
    c.query_opt(
        "SELECT seq, digest FROM audit_heads WHERE tenant = $1",
        args![tenant],
    )
    .await?
    .map(|mut row| Ok((u64::try_from(row.get::<i64>(0)?).unwrap_or(0), row.get(1)?)))
    .transpose()
}

/// The tenants with a chain.
pub(in crate::store) async fn tenants<S: Sql>(c: &S) -> StoreResult<Vec<String>> {
    c.query("SELECT tenant FROM audit_heads ORDER BY tenant", args![])
        .await?
        .into_iter()
        .map(|mut row| row.get(0))
        .collect()
}

/// Deletes a tenant's records before its newest checkpoint older than `before_ms`; how many.
pub(in crate::store) async fn cut<S: Sql>(c: &S, tenant: &str, before_ms: i64) -> StoreResult<u64> {
    let checkpoint = c
        .query_opt(
            "SELECT seq FROM audit_log WHERE tenant = $1 AND kind = $2 AND at_ms < $3
             ORDER BY seq DESC LIMIT 1",
            args![tenant, CHECKPOINT, before_ms],
        )
        .await?;
    let Some(mut checkpoint) = checkpoint else {
        return Ok(0);
    };
    let seq: i64 = checkpoint.get(0)?;
    c.execute(
        "DELETE FROM audit_log WHERE tenant = $1 AND seq < $2",
        args![tenant, seq],
    )
    .await
}
