//! The store's requests, each written once as an async function over a connection of either
//! backend ([`Sql`](super::sql::Sql)): the statements in PostgreSQL's words (SQLite's are
//! rendered from them), the records typed on the way in and decoded on the way out
//! ([`super::rows`]). A backend runs them on its own connection: PostgreSQL awaits them,
//! SQLite's writer thread completes them at once. Writes run inside the writer's batch
//! transaction; none of them begins or ends one.

pub(super) mod approvals;
pub(super) mod audit;
pub(super) mod events;
pub(super) mod outputs;
pub(super) mod runs;
pub(super) mod sessions;

/// A sequence number as a column holds it.
fn seq_param(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// A count (a limit) as a parameter.
fn count_param(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
