//! Runs: created with their first event, listed, moved through their states, and deleted
//! with everything recorded for them once finished long enough ago.

use airlock_proto::v1 as pb;
use prost::Message as _;

use super::{count_param, seq_param, text_column};
use crate::domain;
use crate::domain::Usage;
use crate::ids::{NodeId, RunId};
use crate::store::rows::{self, RUN_COLUMNS, page, workspace_column};
use crate::store::sql::{Arg, Sql, args};
use crate::store::{
    Deleted, RunCursor, RunEnd, RunFilter, RunRecord, RunState, StoreError, StoreResult,
};

/// The epoch a run is created at in a store with leases; each claim raises it.
pub(in crate::store) const FIRST_EPOCH: i64 = 1;

/// Records a run and its first event; in a store with leases, owned by `owner` at
/// [`FIRST_EPOCH`].
pub(in crate::store) async fn create_run<S: Sql>(
    c: &S,
    run: &RunRecord,
    first: &pb::RunEvent,
    owner: Option<&NodeId>,
) -> StoreResult<()> {
    if first.run_id != run.run_id.as_str() || first.seq != 1 {
        return Err(StoreError::OutOfOrder {
            run_id: first.run_id.clone(),
            seq: first.seq,
            last: 0,
        });
    }
    let (start, usage) = (
        run.start.encode_to_vec(),
        domain::usage(&run.usage).encode_to_vec(),
    );
    let input = text_column(&run.start.input);
    let (stop_detail, final_text) = (text_column(&run.stop_detail), text_column(&run.final_text));
    let columns: [Arg<'_>; 16] = [
        run.run_id.as_str().into(),
        run.session_id.as_str().into(),
        run.state.as_str().into(),
        (&start).into(),
        (&run.model).into(),
        workspace_column(&run.workspace).into(),
        run.trace_id.as_str().into(),
        run.created_at_ms.into(),
        run.finished_at_ms.into(),
        run.stop_reason
            .map(|r| domain::stop_reason(r) as i32)
            .into(),
        stop_detail.as_ref().into(),
        final_text.as_ref().into(),
        (&usage).into(),
        i64::from(run.steps).into(),
        seq_param(first.seq).into(),
        (&run.tenant).into(),
    ];
    let values = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16";
    match owner {
        Some(owner) if S::DIALECT.leases() => {
            let mut owned = columns.to_vec();
            owned.push(owner.as_str().into());
            owned.push(input.as_ref().into());
            c.execute(
                &format!(
                    "INSERT INTO runs ({RUN_COLUMNS}, owner, epoch, input)
                     VALUES ({values}, $17, {FIRST_EPOCH}, $18)"
                ),
                &owned,
            )
            .await?
        }
        _ => {
            let mut with_input = columns.to_vec();
            with_input.push(input.as_ref().into());
            c.execute(
                &format!("INSERT INTO runs ({RUN_COLUMNS}, input) VALUES ({values}, $17)"),
                &with_input,
            )
            .await?
        }
    };
    c.execute(
        "INSERT INTO events (run_id, seq, event) VALUES ($1, $2, $3)",
        args![&first.run_id, seq_param(first.seq), &first.encode_to_vec()],
    )
    .await
    .map(|_| ())
}

/// Copies each run's input out of its `start` into the `input` column searches read, for
/// the runs recorded before the column was (schema 11 of SQLite's, 7 of PostgreSQL's); a
/// daemon does it as it opens the store. The runs still to copy are found through a partial
/// index (`runs_without_input`), in run id order from where the last batch ended, so the
/// copy is one pass however many runs there are, and an open after it costs one empty
/// index lookup; each batch is one transaction. Idempotent: daemons of a fleet opening at
/// once write the same values. A `start` that does not decode costs its run the search,
/// never the store's opening: its input is kept empty.
pub(in crate::store) async fn copy_out_inputs<S: Sql>(c: &S) -> StoreResult<u64> {
    /// Rows read at once: a run's `start` holds its input, up to 256 KiB, so a batch stays
    /// within tens of MiB however long the inputs, and a transaction holds a few hundred rows.
    const BATCH: usize = 200;
    let mut copied = 0;
    let mut after = String::new();
    loop {
        let rows = c
            .query(
                "SELECT run_id, start FROM runs WHERE input IS NULL AND run_id > $1
                 ORDER BY run_id LIMIT $2",
                args![&after, count_param(BATCH)],
            )
            .await?;
        if rows.is_empty() {
            return Ok(copied);
        }
        c.execute("BEGIN", &[]).await?;
        let batch = async {
            let mut copied = 0;
            for mut row in rows {
                let run_id: String = row.get(0)?;
                let input = match pb::StartRun::decode(row.get::<Vec<u8>>(1)?.as_slice()) {
                    Ok(start) => text_column(&start.input).into_owned(),
                    Err(err) => {
                        tracing::warn!(run = %run_id, error = %err, "a run's start does not decode: it cannot be searched by its input");
                        String::new()
                    }
                };
                copied += c
                    .execute(
                        "UPDATE runs SET input = $2 WHERE run_id = $1",
                        args![&run_id, &input],
                    )
                    .await?;
                after = run_id;
            }
            Ok::<u64, StoreError>(copied)
        }
        .await;
        match batch {
            Ok(batch) => {
                c.execute("COMMIT", &[]).await?;
                copied += batch;
            }
            Err(err) => {
                let _ = c.execute("ROLLBACK", &[]).await;
                return Err(err);
            }
        }
    }
}

pub(in crate::store) async fn run<S: Sql>(c: &S, run_id: &RunId) -> StoreResult<Option<RunRecord>> {
    c.query_opt(
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"),
        args![run_id.as_str()],
    )
    .await?
    .map(|mut row| rows::run(&mut row))
    .transpose()
}

pub(in crate::store) async fn list_runs<S: Sql>(
    c: &S,
    filter: &RunFilter,
    limit: usize,
    after: Option<&RunCursor>,
) -> StoreResult<(Vec<RunRecord>, Option<RunCursor>)> {
    let pattern = filter.like_pattern();
    let (sql, params) = listing(filter, pattern.as_deref(), limit, after);
    let runs = c
        .query(&sql, &params)
        .await?
        .iter_mut()
        .map(rows::run)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(page(runs, limit, |run| RunCursor {
        created_at_ms: run.created_at_ms,
        run_id: run.run_id.clone(),
    }))
}

/// The statement [`list_runs`] runs, and its parameters.
///
/// Only the filters given are in it, so each combination is a statement, and a plan, of its
/// own. One statement for all (`$1 IS NULL OR session_id = $1`, ...) had one plan, which
/// could use no filter's index: a session's latest run, which every start reads, was a walk
/// over every run in the store.
pub(in crate::store) fn listing<'a>(
    filter: &'a RunFilter,
    pattern: Option<&'a str>,
    limit: usize,
    after: Option<&'a RunCursor>,
) -> (String, Vec<Arg<'a>>) {
    let mut conditions: Vec<String> = Vec::new();
    let mut params: Vec<Arg<'a>> = Vec::new();
    if let Some(session) = &filter.session_id {
        let at = bind(&mut params, Arg::from(session.as_str()));
        conditions.push(format!("session_id = {at}"));
    }
    if let Some(state) = filter.state {
        let at = bind(&mut params, Arg::from(state.as_str()));
        conditions.push(format!("state = {at}"));
    }
    if let Some(tenant) = &filter.tenant {
        let at = bind(&mut params, Arg::from(tenant));
        conditions.push(format!("tenant = {at}"));
    }
    if let Some(pattern) = pattern {
        let at = bind(&mut params, Arg::from(pattern));
        conditions.push(format!("lower(input) LIKE lower({at}) ESCAPE '!'"));
    }
    if let Some(cursor) = after {
        let time = bind(&mut params, Arg::from(cursor.created_at_ms));
        let id = bind(&mut params, Arg::from(cursor.run_id.as_str()));
        conditions.push(format!(
            "(created_at_ms < {time}::bigint OR (created_at_ms = {time}::bigint AND run_id < {id}))"
        ));
    }
    let most = bind(&mut params, Arg::from(count_param(limit.saturating_add(1))));
    let clause = match conditions.is_empty() {
        true => String::new(),
        false => format!("WHERE {}", conditions.join(" AND ")),
    };
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs {clause}
         ORDER BY created_at_ms DESC, run_id DESC
         LIMIT {most}"
    );
    (sql, params)
}

/// Adds `value` to a statement's `params` and names it as the statement does.
fn bind<'a>(params: &mut Vec<Arg<'a>>, value: Arg<'a>) -> String {
    params.push(value);
    format!("${}", params.len())
}

pub(in crate::store) async fn set_run_state<S: Sql>(
    c: &S,
    run_id: &RunId,
    state: RunState,
) -> StoreResult<()> {
    let changed = c
        .execute_last_one(
            "UPDATE runs SET state = $2 WHERE run_id = $1",
            args![run_id.as_str(), state.as_str()],
        )
        .await?;
    if changed == 0 {
        return Err(StoreError::UnknownRun(run_id.to_string()));
    }
    Ok(())
}

pub(in crate::store) async fn update_progress<S: Sql>(
    c: &S,
    run_id: &RunId,
    steps: u32,
    usage: &Usage,
) -> StoreResult<()> {
    c.execute_last_one(
        "UPDATE runs SET steps = $2, usage = $3 WHERE run_id = $1",
        args![
            run_id.as_str(),
            i64::from(steps),
            &domain::usage(usage).encode_to_vec(),
        ],
    )
    .await
    .map(|_| ())
}

pub(in crate::store) async fn finish_run<S: Sql>(
    c: &S,
    run_id: &RunId,
    end: &RunEnd,
) -> StoreResult<()> {
    let last_seq = super::seq_param(end.last_seq);
    let (stop_detail, final_text) = (text_column(&end.stop_detail), text_column(&end.final_text));
    let updated = c
        .execute(
            "UPDATE runs SET state = 'finished', stop_reason = $2, stop_detail = $3,
             final_text = $4, finished_at_ms = $5
             WHERE run_id = $1 AND EXISTS (SELECT 1 FROM events WHERE run_id = $1 AND seq = $6)",
            args![
                run_id.as_str(),
                domain::stop_reason(end.stop_reason) as i32,
                stop_detail.as_ref(),
                final_text.as_ref(),
                end.finished_at_ms,
                last_seq,
            ],
        )
        .await?;
    if updated == 0 {
        return Err(StoreError::Unlogged {
            run_id: run_id.to_string(),
            seq: end.last_seq,
            what: "end",
        });
    }
    Ok(())
}

pub(in crate::store) async fn unfinished_runs<S: Sql>(c: &S) -> StoreResult<Vec<RunRecord>> {
    c.query(
        &format!("SELECT {RUN_COLUMNS} FROM runs WHERE state <> 'finished' ORDER BY created_at_ms"),
        args![],
    )
    .await?
    .iter_mut()
    .map(rows::run)
    .collect()
}

pub(in crate::store) async fn delete_finished_runs<S: Sql>(
    c: &S,
    before_ms: i64,
    limit: usize,
) -> StoreResult<Deleted> {
    let runs: Vec<String> = c
        .query(
            "SELECT run_id FROM runs WHERE state = 'finished' AND finished_at_ms < $1
             ORDER BY finished_at_ms LIMIT $2",
            args![before_ms, count_param(limit)],
        )
        .await?
        .iter_mut()
        .map(|row| row.get(0))
        .collect::<StoreResult<_>>()?;
    let tables = S::DIALECT.run_tables();
    if S::DIALECT.binds_arrays() {
        // One statement per table for the whole page of runs.
        for table in tables {
            c.execute(
                &format!("DELETE FROM {table} WHERE run_id = ANY($1)"),
                &[Arg::Texts(&runs)],
            )
            .await?;
        }
    } else {
        for run_id in &runs {
            for table in tables {
                c.execute(
                    &format!("DELETE FROM {table} WHERE run_id = $1"),
                    args![run_id],
                )
                .await?;
            }
        }
    }
    // Sessions as old, with no run left, go too (and their "always" approvals).
    let empty = "SELECT session_id FROM sessions WHERE created_at_ms < $1
                 AND session_id NOT IN (SELECT session_id FROM runs)";
    c.execute(
        &format!("DELETE FROM session_grants WHERE session_id IN ({empty})"),
        args![before_ms],
    )
    .await?;
    let sessions = c
        .execute(
            &format!("DELETE FROM sessions WHERE session_id IN ({empty})"),
            args![before_ms],
        )
        .await?;
    Ok(Deleted {
        runs: runs.len() as u64,
        sessions,
    })
}
