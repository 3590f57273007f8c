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

/// Text as a text column keeps it: as it is, but for NUL (which PostgreSQL's `text` refuses),
/// made U+FFFD — on every backend, so a record reads back the same from either. For what
/// the daemon records from untrusted text (a model's final answer, an error a provider or a
/// tool wrote): the run's events, stored as bytes, keep such text exactly. A run's input is
/// checked for NUL as the run starts; runs recorded before that check may hold one.
fn text_column(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{fffd}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// A sequence number as a column holds it.
fn seq_param(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// A count (a limit) as a parameter.
fn count_param(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
