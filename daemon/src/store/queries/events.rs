//! A run's log: its events (each with the spans that ended before it), the model exchanges
//! of its cassette, and its checkpoint.

use std::collections::HashSet;

use airlock_proto::v1 as pb;

use super::{count_param, seq_param};
use crate::ids::RunId;
use crate::pause::{self, Point};
use crate::store::rows::{EventRow, SpanRow, decode};
use crate::store::sql::{Arg, Sql, Statement, args};
use crate::store::{Checkpoint, StoreError, StoreResult};

pub(in crate::store) async fn append_event<S: Sql>(c: &S, row: &EventRow) -> StoreResult<()> {
    append_events(c, &[row]).await
}

/// Appends `rows`: events of one run, in order, their sequence numbers each the next. On
/// PostgreSQL they are one statement (the PostgreSQL writer hands a run's events of one
/// batch over together), all of them taken or none; elsewhere a few statements each, one
/// event after another, up to one whose number is not the next. The error says which
/// event was refused, and why.
pub(in crate::store) async fn append_events<S: Sql>(c: &S, rows: &[&EventRow]) -> StoreResult<()> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    if rows.windows(2).any(|pair| {
        pair[1].run_id != first.run_id || pair[0].seq.checked_add(1) != Some(pair[1].seq)
    }) {
        return Err(StoreError::Io(format!(
            "the events appended together for run {} are not one run's, in order",
            first.run_id
        )));
    }
    // The event whose number was not the next one (the others after it would not be either).
    let refused = match S::DIALECT.binds_arrays() {
        true => (!take_and_write_together(c, rows).await?).then_some(*first),
        false => {
            let mut refused = None;
            for row in rows {
                if !take_then_write(c, row).await? {
                    refused = Some(*row);
                    break;
                }
            }
            refused
        }
    };
    if let Some(row) = refused {
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
    // Inside the batch's transaction: a kill here loses the whole batch, which no client has
    // seen (events are published after their commit).
    pause::reached(Point::StoreCommit);
    Ok(())
}

/// [`append_events`] in one statement, their spans bound as arrays (PostgreSQL, where each
/// statement costs the server's time, and events are the writes a run makes most — and
/// where each update of the run's row in a transaction adds a version of it the next one
/// steps over): whether the sequence numbers were the next ones. The events and their spans
/// are written from the numbers' update, so only over numbers taken.
async fn take_and_write_together<S: Sql>(c: &S, rows: &[&EventRow]) -> StoreResult<bool> {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Ok(true);
    };
    // One statement may not write a row twice: of spans with one id, the last is kept, as a
    // statement for each would keep it.
    let mut seen = HashSet::new();
    let mut kept: Vec<&SpanRow> = rows
        .iter()
        .flat_map(|row| &row.spans)
        .rev()
        .filter(|span| seen.insert(span.span_id.as_str()))
        .collect();
    kept.reverse();
    let ids: Vec<String> = kept.iter().map(|span| span.span_id.clone()).collect();
    let starts: Vec<i64> = kept.iter().map(|span| span.start_unix_nano).collect();
    let spans: Vec<&[u8]> = kept.iter().map(|span| &span.span[..]).collect();
    let seqs: Vec<i64> = rows.iter().map(|row| seq_param(row.seq)).collect();
    let events: Vec<&[u8]> = rows.iter().map(|row| &row.event[..]).collect();
    let taken = c
        .execute_last_one(
            "WITH taken AS (
                 UPDATE runs SET last_seq = $3::bigint
                 WHERE run_id = $1 AND last_seq = $2::bigint - 1 RETURNING run_id
             ), event AS (
                 INSERT INTO events (run_id, seq, event)
                 SELECT run_id, seq, event
                 FROM taken, unnest($4::bigint[], $5::bytea[]) AS e (seq, event)
             ), spans AS (
                 INSERT INTO spans (run_id, span_id, start_unix_nano, span)
                 SELECT run_id, id, start, span
                 FROM taken, unnest($6::text[], $7::bigint[], $8::bytea[]) AS s (id, start, span)
                 ON CONFLICT (run_id, span_id)
                 DO UPDATE SET start_unix_nano = EXCLUDED.start_unix_nano, span = EXCLUDED.span
             )
             SELECT 1 FROM taken",
            &[
                Arg::from(&first.run_id),
                Arg::from(seq_param(first.seq)),
                Arg::from(seq_param(last.seq)),
                Arg::Ints(&seqs),
                Arg::Blobs(&events),
                Arg::Texts(&ids),
                Arg::Ints(&starts),
                Arg::Blobs(&spans),
            ],
        )
        .await?;
    Ok(taken == 1)
}

/// [`append_events`] for one event: a statement for the number, one for the event and one per span (SQLite,
/// where a statement costs a few µs): whether the sequence number was the next one.
async fn take_then_write<S: Sql>(c: &S, row: &EventRow) -> StoreResult<bool> {
    // Takes the sequence number only if it is the next one: one statement for the check and
    // the update, which every event pays. The event and its spans are written only over a
    // taken number, so that none of them fails when it was not (a duplicate's key would,
    // before the check could say why).
    let seq = seq_param(row.seq);
    let taken = args![&row.run_id, seq];
    let event = args![&row.run_id, seq, &row.event];
    let spans: Vec<[Arg<'_>; 5]> = row
        .spans
        .iter()
        .map(|span| {
            [
                Arg::from(&row.run_id),
                Arg::from(&span.span_id),
                Arg::from(span.start_unix_nano),
                Arg::from(&span.span),
                Arg::from(seq),
            ]
        })
        .collect();
    let mut statements: Vec<Statement<'_>> = vec![
        (
            "UPDATE runs SET last_seq = $2::bigint WHERE run_id = $1 AND last_seq = $2::bigint - 1",
            &taken[..],
        ),
        (
            "INSERT INTO events (run_id, seq, event) SELECT $1, $2, $3 FROM runs
             WHERE run_id = $1 AND last_seq = $2 ON CONFLICT DO NOTHING",
            &event[..],
        ),
    ];
    statements.extend(spans.iter().map(|span| {
        (
            "INSERT INTO spans (run_id, span_id, start_unix_nano, span)
             SELECT $1, $2, $3, $4 FROM runs WHERE run_id = $1 AND last_seq = $5
             ON CONFLICT (run_id, span_id)
             DO UPDATE SET start_unix_nano = EXCLUDED.start_unix_nano, span = EXCLUDED.span",
            &span[..],
        )
    }));
    let changed = c.execute_last(&statements).await?;
    Ok(changed.first() != Some(&0))
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
    c.execute_last_one(
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

/// Rows of checkpoint entries one statement writes, largest first: a few fixed shapes, so
/// the PostgreSQL connection's statement cache holds four statements for them; a step's two
/// new entries are one statement, and a conversation written whole (a run's first
/// checkpoint, one after a compaction) a statement per 32 entries.
const ENTRY_ROWS: [usize; 4] = [32, 8, 2, 1];

/// Saves a run's checkpoint: its entries from `entries_from` on, then the checkpoint itself,
/// which names how many entries are its conversation. Entries past that count, left from a
/// longer conversation before a compaction, are never read and are overwritten as the
/// conversation grows again (deleting them would cost every step a statement).
pub(in crate::store) async fn save_checkpoint<S: Sql>(
    c: &S,
    run_id: &RunId,
    checkpoint: &Checkpoint,
) -> StoreResult<()> {
    let mut rest: &[Vec<u8>] = &checkpoint.entries;
    let mut position = checkpoint.entries_from;
    let mut writes = Vec::new();
    for rows in ENTRY_ROWS {
        while rest.len() >= rows {
            let (chunk, after) = rest.split_at(rows);
            writes.push(entries(run_id, position, chunk));
            position += rows as u64;
            rest = after;
        }
    }
    // Only over a log that holds the event it covers (a checkpoint handed over after a
    // failed write of the log, committed in a later batch, would resume the run past a gap),
    // and over the checkpoint whose entries this one keeps (an earlier checkpoint's write
    // may have failed, or been of a conversation since compacted). Refused, the entries
    // above are undone with it.
    let row = args![
        run_id.as_str(),
        &checkpoint.checkpoint_id,
        seq_param(checkpoint.seq),
        &checkpoint.state,
        checkpoint.created_at_ms,
        seq_param(position),
        seq_param(checkpoint.entries_from),
        checkpoint.entries_base.as_deref().unwrap_or_default(),
    ];
    let mut statements: Vec<Statement<'_>> = writes
        .iter()
        .map(|(sql, params)| (sql.as_str(), &params[..]))
        .collect();
    statements.push((
        "INSERT INTO checkpoints (run_id, checkpoint_id, seq, state, created_at_ms, entries)
         SELECT $1, $2, $3, $4, $5, $6
         WHERE EXISTS (SELECT 1 FROM events WHERE run_id = $1 AND seq = $3)
         AND ($7::bigint = 0 OR EXISTS (SELECT 1 FROM checkpoints
              WHERE run_id = $1 AND checkpoint_id = $8 AND entries >= $7::bigint))
         ON CONFLICT (run_id) DO UPDATE SET checkpoint_id = $2, seq = $3, state = $4,
         created_at_ms = $5, entries = $6",
        &row[..],
    ));
    let saved = c.execute_last(&statements).await?.last().copied();
    if saved == Some(1) {
        return Ok(());
    }
    let logged = c
        .query_opt(
            "SELECT 1 FROM events WHERE run_id = $1 AND seq = $2",
            args![run_id.as_str(), seq_param(checkpoint.seq)],
        )
        .await?
        .is_some();
    Err(match logged {
        false => StoreError::Unlogged {
            run_id: run_id.to_string(),
            seq: checkpoint.seq,
            what: "checkpoint",
        },
        true => StoreError::ConversationGap {
            run_id: run_id.to_string(),
            from: checkpoint.entries_from,
        },
    })
}

/// The statement that writes `entries` at `position` on, over any left there.
fn entries<'a>(run_id: &'a RunId, position: u64, entries: &'a [Vec<u8>]) -> (String, Vec<Arg<'a>>) {
    let mut sql = String::from("INSERT INTO checkpoint_entries (run_id, position, entry) VALUES ");
    let mut params = vec![Arg::from(run_id.as_str())];
    for (offset, entry) in entries.iter().enumerate() {
        let at = params.len() + 1;
        if offset > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("($1, ${at}::bigint, ${}::bytea)", at + 1));
        params.push(Arg::from(seq_param(position + offset as u64)));
        params.push(Arg::from(entry));
    }
    sql.push_str(" ON CONFLICT (run_id, position) DO UPDATE SET entry = EXCLUDED.entry");
    (sql, params)
}

/// How many times a read of a checkpoint is tried while writes keep replacing it between its
/// statements (on PostgreSQL another daemon, or this one's writer, may commit in between).
const CHECKPOINT_READS: usize = 5;

/// A run's checkpoint with its whole conversation. Read in two statements, so the
/// checkpoint's id is read again after its entries: the same id means no save came between
/// them (each save has an id of its own and writes its entries and its row in one
/// transaction), so the entries read are its own.
pub(in crate::store) async fn latest_checkpoint<S: Sql>(
    c: &S,
    run_id: &RunId,
) -> StoreResult<Option<Checkpoint>> {
    for _ in 0..CHECKPOINT_READS {
        let Some(mut row) = c
            .query_opt(
                "SELECT checkpoint_id, seq, state, created_at_ms, entries FROM checkpoints
                 WHERE run_id = $1",
                args![run_id.as_str()],
            )
            .await?
        else {
            return Ok(None);
        };
        let checkpoint_id: String = row.get(0)?;
        let held: i64 = row.get(4)?;
        let entries = c
            .query(
                "SELECT entry FROM checkpoint_entries WHERE run_id = $1 AND position < $2
                 ORDER BY position",
                args![run_id.as_str(), held],
            )
            .await?
            .iter_mut()
            .map(|row| row.get(0))
            .collect::<StoreResult<Vec<Vec<u8>>>>()?;
        let still: Option<String> = c
            .query_opt(
                "SELECT checkpoint_id FROM checkpoints WHERE run_id = $1",
                args![run_id.as_str()],
            )
            .await?
            .map(|mut row| row.get(0))
            .transpose()?;
        if still.as_deref() != Some(checkpoint_id.as_str()) {
            continue;
        }
        if entries.len() as u64 != u64::try_from(held).unwrap_or(0) {
            return Err(StoreError::Corrupt(format!(
                "the checkpoint of run {run_id} holds {} of its {held} conversation entries",
                entries.len()
            )));
        }
        return Ok(Some(Checkpoint {
            checkpoint_id,
            seq: row.get(1)?,
            state: row.get(2)?,
            created_at_ms: row.get(3)?,
            entries_from: 0,
            entries_base: None,
            entries,
        }));
    }
    Err(StoreError::Io(format!(
        "the checkpoint of run {run_id} was replaced while it was read, {CHECKPOINT_READS} times"
    )))
}
