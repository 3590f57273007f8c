//! A run's log: its events (each with the spans that ended before it), the model exchanges
//! of its cassette, and its checkpoint.

use airlock_proto::v1 as pb;

use super::{count_param, seq_param};
use crate::ids::RunId;
use crate::pause::{self, Point};
use crate::store::rows::{EventRow, decode};
use crate::store::sql::{Sql, args};
use crate::store::{Checkpoint, StoreError, StoreResult};

pub(in crate::store) async fn append_event<S: Sql>(c: &S, row: &EventRow) -> StoreResult<()> {
    // Takes the sequence number only if it is the next one: one statement for the check and
    // the update, which every event pays.
    let taken = c
        .execute(
            "UPDATE runs SET last_seq = $2::bigint WHERE run_id = $1 AND last_seq = $2::bigint - 1",
            args![&row.run_id, seq_param(row.seq)],
        )
        .await?;
    if taken == 0 {
        let last: Option<i64> = c
            .query_opt(
                "SELECT last_seq FROM runs WHERE run_id = $1",
                args![&row.run_id],
            )
            .await?
            .map(|mut found| found.get(0))
            .transpose()?;
        return Err(match last {
            None => StoreError::UnknownRun(row.run_id.clone()),
            Some(last) => StoreError::OutOfOrder {
                run_id: row.run_id.clone(),
                seq: row.seq,
                last: u64::try_from(last).unwrap_or(0),
            },
        });
    }
    c.execute(
        "INSERT INTO events (run_id, seq, event) VALUES ($1, $2, $3)",
        args![&row.run_id, seq_param(row.seq), &row.event],
    )
    .await?;
    for span in &row.spans {
        c.execute(
            "INSERT INTO spans (run_id, span_id, start_unix_nano, span) VALUES ($1, $2, $3, $4)
             ON CONFLICT (run_id, span_id)
             DO UPDATE SET start_unix_nano = EXCLUDED.start_unix_nano, span = EXCLUDED.span",
            args![&row.run_id, &span.span_id, span.start_unix_nano, &span.span],
        )
        .await?;
    }
    // Inside the batch's transaction: a kill here loses the whole batch, which no client has
    // seen (events are published after their commit).
    pause::reached(Point::StoreCommit);
    Ok(())
}

pub(in crate::store) async fn events_after<S: Sql>(
    c: &S,
    run_id: &RunId,
    after_seq: u64,
    limit: usize,
) -> StoreResult<Vec<pb::RunEvent>> {
    c.query(
        "SELECT event FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        args![run_id.as_str(), seq_param(after_seq), count_param(limit)],
    )
    .await?
    .iter_mut()
    .map(|row| decode(&row.get::<Vec<u8>>(0)?))
    .collect()
}

pub(in crate::store) async fn spans<S: Sql>(c: &S, run_id: &RunId) -> StoreResult<Vec<pb::Span>> {
    c.query(
        "SELECT span FROM spans WHERE run_id = $1 ORDER BY start_unix_nano, span_id",
        args![run_id.as_str()],
    )
    .await?
    .iter_mut()
    .map(|row| decode(&row.get::<Vec<u8>>(0)?))
    .collect()
}

/// Keeps a run's next exchange. Its ordinal is found from the key's last (not by counting the
/// run's rows, which read every exchange kept so far: a step of a long run did that).
pub(in crate::store) async fn record_exchange<S: Sql>(
    c: &S,
    run_id: &RunId,
    exchange: &str,
) -> StoreResult<()> {
    c.execute(
        "INSERT INTO exchanges (run_id, ordinal, exchange)
         VALUES ($1, COALESCE((SELECT MAX(ordinal) + 1 FROM exchanges WHERE run_id = $1), 0), $2)",
        args![run_id.as_str(), exchange],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn exchanges<S: Sql>(c: &S, run_id: &RunId) -> StoreResult<Vec<String>> {
    c.query(
        "SELECT exchange FROM exchanges WHERE run_id = $1 ORDER BY ordinal",
        args![run_id.as_str()],
    )
    .await?
    .iter_mut()
    .map(|row| row.get(0))
    .collect()
}

pub(in crate::store) async fn save_checkpoint<S: Sql>(
    c: &S,
    run_id: &RunId,
    checkpoint: &Checkpoint,
) -> StoreResult<()> {
    // Only over a log that holds the event it covers: a checkpoint handed over after a
    // failed write of the log (committed in a later batch) would resume the run past a gap.
    let saved = c
        .execute(
            "INSERT INTO checkpoints (run_id, checkpoint_id, seq, state, created_at_ms)
             SELECT $1, $2, $3, $4, $5
             WHERE EXISTS (SELECT 1 FROM events WHERE run_id = $1 AND seq = $3)
             ON CONFLICT (run_id) DO UPDATE SET checkpoint_id = $2, seq = $3, state = $4,
             created_at_ms = $5",
            args![
                run_id.as_str(),
                &checkpoint.checkpoint_id,
                seq_param(checkpoint.seq),
                &checkpoint.state,
                checkpoint.created_at_ms,
            ],
        )
        .await?;
    if saved == 0 {
        return Err(StoreError::Unlogged {
            run_id: run_id.to_string(),
            seq: checkpoint.seq,
            what: "checkpoint",
        });
    }
    Ok(())
}

pub(in crate::store) async fn latest_checkpoint<S: Sql>(
    c: &S,
    run_id: &RunId,
) -> StoreResult<Option<Checkpoint>> {
    c.query_opt(
        "SELECT checkpoint_id, seq, state, created_at_ms FROM checkpoints WHERE run_id = $1",
        args![run_id.as_str()],
    )
    .await?
    .map(|mut row| {
        Ok(Checkpoint {
            checkpoint_id: row.get(0)?,
            seq: row.get(1)?,
            state: row.get(2)?,
            created_at_ms: row.get(3)?,
        })
    })
    .transpose()
}
