//! The statements of a fleet's leases: a node's lease renewed and given up, runs claimed
//! from nodes whose lease lapsed, and a run given back. They run on a connection of the pool
//! of their own, outside the writer's queue: a lease must be renewed on time however long
//! the queue of writes is.

use tokio_postgres::Row;

use super::client::{self, Conn, io};
use crate::ids::{NodeId, RunId};
use crate::store::rows::{self, RUN_COLUMNS};
use crate::store::{RunRecord, StoreResult};

/// Extends `node`'s lease to `lease_ms` from now (the server's clock), creating its row on
/// its first renewal. A renewal that finds the lease lapsed (the daemon was frozen, starved,
/// or cut off from the database) starts its unbroken stretch again: see [`claim`].
pub(super) async fn renew(c: Conn, node: NodeId, lease_ms: i64) -> StoreResult<()> {
    let statement = c
        .prepare_cached(
            "INSERT INTO nodes (node_id, started_at_ms, expires_at_ms, live_since_ms)
             VALUES ($1, airlock_now_ms(), airlock_now_ms() + $2, airlock_now_ms())
             ON CONFLICT (node_id) DO UPDATE SET
                 expires_at_ms = EXCLUDED.expires_at_ms,
                 live_since_ms = CASE WHEN nodes.expires_at_ms < airlock_now_ms()
                                      THEN EXCLUDED.live_since_ms
                                      ELSE nodes.live_since_ms END",
        )
        .await
        .map_err(io)?;
    c.execute(&statement, &[&node.as_str(), &lease_ms])
        .await
        .map_err(io)
        .map(|_| ())
}

/// Ends `node`'s lease now.
pub(super) async fn release(c: Conn, node: NodeId) -> StoreResult<()> {
    c.execute("DELETE FROM nodes WHERE node_id = $1", &[&node.as_str()])
        .await
        .map_err(io)
        .map(|_| ())
}

/// How long a node's row stays once its lease has lapsed. A lapsed row counts for nothing (to
/// a claim it is as good as none), but an operator reading the table after an incident sees
/// which daemons were there in the last hour; past that, the rows of daemons that died
/// without giving their lease up — one per start — would pile up for ever.
const LAPSED_NODE_KEPT_MS: i64 = 60 * 60 * 1000;

/// Claims for `node` at most `limit` runs no live node owns, none of whose calls may still
/// act, leaving out `skip`; each with the epoch the claim gave it. Rows of nodes lapsed
/// longer than [`LAPSED_NODE_KEPT_MS`] go on the way.
///
/// One statement: the inner select locks each row it picks and skips those another
/// transaction holds (a concurrent claim, or the owner's writer checking its fence), and the
/// update raises the epoch, so two claims never take the same run, and the owner's later
/// writes are refused.
///
/// A lapsed lease alone does not prove its node gone: after the database was away longer
/// than a lease, every lease has lapsed, the live daemons' too. So a run is claimed only
///
/// - by a node whose own lease holds now, and never from itself (the runs it owns are
///   either executing here or given back first);
/// - from no owner, an owner that gave its lease up, or one whose lease lapsed while the
///   database answered: some node's lease has held without a break since before that
///   owner's ran out — or, when none has (the database was away for all of them), the
///   claimer's own has held for a whole lease (`lease_ms`) since, time in which a live
///   owner renews too.
pub(super) async fn claim(
    c: Conn,
    node: NodeId,
    limit: i64,
    skip: Vec<String>,
    lease_ms: i64,
) -> StoreResult<Vec<(RunRecord, i64)>> {
    let returned = RUN_COLUMNS
        .split(',')
        .map(|column| format!("runs.{}", column.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "WITH pruned AS (
             DELETE FROM nodes WHERE expires_at_ms < airlock_now_ms() - $4
         ),
         claimer AS (
             SELECT live_since_ms FROM nodes
             WHERE node_id = $1 AND expires_at_ms > airlock_now_ms()
         ),
         claimable AS (
             SELECT r.run_id FROM runs r
             WHERE r.state <> 'finished'
               AND EXISTS (SELECT 1 FROM claimer)
               AND r.owner IS DISTINCT FROM $1
               AND NOT (r.run_id = ANY($3))
               AND NOT EXISTS (
                   SELECT 1 FROM nodes n
                   WHERE n.node_id = r.owner
                     AND (n.expires_at_ms > airlock_now_ms()
                          OR (NOT EXISTS (SELECT 1 FROM nodes w
                                          WHERE w.expires_at_ms > airlock_now_ms()
                                            AND w.live_since_ms <= n.expires_at_ms)
                              AND (SELECT live_since_ms FROM claimer)
                                  > airlock_now_ms() - $5)))
               AND NOT EXISTS (SELECT 1 FROM effects e
                               WHERE e.run_id = r.run_id AND e.result IS NULL
                                 AND e.deadline_at_ms > airlock_now_ms())
             ORDER BY r.created_at_ms
             LIMIT $2
             FOR UPDATE OF r SKIP LOCKED
         )
         UPDATE runs SET owner = $1, epoch = runs.epoch + 1
         FROM claimable WHERE runs.run_id = claimable.run_id
         RETURNING {returned}, runs.epoch"
    );
    let statement = c.prepare_cached(&sql).await.map_err(io)?;
    let rows: Vec<Row> = c
        .query(
            &statement,
            &[
                &node.as_str(),
                &limit,
                &skip,
                &LAPSED_NODE_KEPT_MS,
                &lease_ms,
            ],
        )
        .await
        .map_err(io)?;
    rows.iter()
        .map(|row| {
            let mut record = client::row(row)?;
            let epoch: i64 = record.get(16)?;
            Ok((rows::run(&mut record)?, epoch))
        })
        .collect()
}

/// Of the runs `node` executes, at the epoch it holds each at, those it no longer owns:
/// another node claimed them while this one could not renew (frozen, starved, cut off). A
/// run not in the store yet (its creation still in the writer's queue) is not lost.
pub(super) async fn lost(
    c: Conn,
    node: NodeId,
    runs: Vec<String>,
    epochs: Vec<i64>,
) -> StoreResult<Vec<RunId>> {
    let statement = c
        .prepare_cached(
            "SELECT mine.run_id FROM unnest($1::text[], $2::bigint[]) AS mine(run_id, epoch)
             WHERE EXISTS (SELECT 1 FROM runs r WHERE r.run_id = mine.run_id)
               AND NOT EXISTS (SELECT 1 FROM runs r
                               WHERE r.run_id = mine.run_id AND r.owner = $3
                                 AND r.epoch = mine.epoch)",
        )
        .await
        .map_err(io)?;
    let rows = c
        .query(&statement, &[&runs, &epochs, &node.as_str()])
        .await
        .map_err(io)?;
    rows.iter()
        .map(|row| client::get::<String>(row, 0).map(|id| RunId::from_stored(&id)))
        .collect()
}

/// Gives a run `node` holds at `epoch` back: no owner, so the next claim may take it.
/// Whether it was still `node`'s at that epoch.
pub(super) async fn disown(c: Conn, node: NodeId, run_id: RunId, epoch: i64) -> StoreResult<bool> {
    c.execute(
        "UPDATE runs SET owner = NULL WHERE run_id = $1 AND owner = $2 AND epoch = $3",
        &[&run_id.as_str(), &node.as_str(), &epoch],
    )
    .await
    .map_err(io)
    .map(|changed| changed == 1)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::ids::CallId;
    use crate::store::postgres::PostgresStore;
    use crate::store::postgres::testing::{self, node};
    use crate::store::{Effect, Leases, RunState, Store, StoreError, recorded_run};

    /// A run of `store`'s node in a fresh session, as its first event records it.
    async fn started_run(store: &PostgresStore) -> crate::store::RunRecord {
        recorded_run(store, "fleet", 1).await
    }

    #[tokio::test]
    async fn a_live_owner_keeps_its_runs_and_a_lapsed_one_loses_them_to_exactly_one_claimer() {
        let url = testing::fresh_database().await;
        let owner = node(&url).await;
        owner.renew(Duration::from_secs(60)).await.expect("renew");
        let run = started_run(&owner).await;
        let claimers: Vec<_> = futures::future::join_all((0..4).map(|_| node(&url))).await;
        for claimer in &claimers {
            claimer.renew(Duration::from_secs(60)).await.expect("renew");
            assert!(
                claimer.claim(10, &[]).await.expect("claim").is_empty(),
                "a run of a live owner was claimed"
            );
        }
        // The owner's lease lapses (as a daemon killed or stopped would let it): four
        // daemons race to claim, and exactly one gets the run.
        owner.renew(Duration::ZERO).await.expect("lapse");
        let claims = futures::future::join_all(claimers.iter().map(|c| c.claim(10, &[]))).await;
        let won: Vec<_> = claims
            .into_iter()
            .enumerate()
            .map(|(index, claimed)| (index, claimed.expect("claim")))
            .filter(|(_, claimed)| !claimed.is_empty())
            .collect();
        assert_eq!(won.len(), 1, "{won:?}");
        let (winner, claimed) = &won[0];
        assert_eq!(claimed[0].run_id, run.run_id);
        // The previous owner can no longer write for the run; the new one can. Its fenced
        // write fails alone: a write for a run it still holds, handed over in the same
        // batch, commits.
        let kept = started_run(&owner).await;
        let fenced = owner.set_run_state(&run.run_id, RunState::WaitingForApproval);
        let written = owner.append_event(&crate::store::conformance::event(&kept.run_id, 2), &[]);
        let err = fenced.await.expect_err("fenced");
        assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
        written
            .await
            .expect("a write of a run still held commits beside a fenced one");
        assert_eq!(
            owner
                .events_after(&kept.run_id, 1, 10)
                .await
                .expect("read")
                .len(),
            1
        );
        claimers[*winner]
            .set_run_state(&run.run_id, RunState::Running)
            .await
            .expect("the new owner writes");
        // And once the previous owner is back, a claim finds nothing: the run is the
        // winner's while its lease holds.
        owner.renew(Duration::from_secs(60)).await.expect("renew");
        assert!(owner.claim(10, &[]).await.expect("claim").is_empty());
    }

    #[tokio::test]
    async fn a_claim_forgets_nodes_lapsed_long_ago_and_keeps_the_others() {
        let url = testing::fresh_database().await;
        let live = node(&url).await;
        live.renew(Duration::from_secs(60)).await.expect("renew");
        let lapsed = node(&url).await;
        lapsed.renew(Duration::ZERO).await.expect("lapse");
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        let driver = tokio::spawn(connection);
        // A daemon killed a day ago, which never gave its lease up.
        client
            .execute(
                "INSERT INTO nodes (node_id, started_at_ms, expires_at_ms)
                 VALUES ('gone', 0, airlock_now_ms() - 86400000)",
                &[],
            )
            .await
            .expect("insert");
        live.claim(10, &[]).await.expect("claim");
        let mut left: Vec<String> = client
            .query("SELECT node_id FROM nodes", &[])
            .await
            .expect("select")
            .iter()
            .map(|row| row.get(0))
            .collect();
        left.sort();
        let mut expected = vec![
            live.node.as_str().to_owned(),
            lapsed.node.as_str().to_owned(),
        ];
        expected.sort();
        assert_eq!(left, expected);
        drop(client);
        let _ = driver.await;
    }

    #[tokio::test]
    async fn a_claim_waits_until_every_call_in_flight_is_past_its_timeout() {
        let url = testing::fresh_database().await;
        let owner = node(&url).await;
        owner.renew(Duration::from_secs(60)).await.expect("renew");
        let run = started_run(&owner).await;
        let intent = Effect {
            run_id: run.run_id.clone(),
            call_id: CallId::new(),
            tool: "append".into(),
            arguments: "{}".into(),
            idempotent: false,
            intent_at_ms: 3,
            timeout_ms: Some(60_000),
            result: None,
            pending_changes: None,
        };
        owner.record_intent(&intent).await.expect("intent");
        owner.release().await.expect("release");
        let claimer = node(&url).await;
        claimer.renew(Duration::from_secs(60)).await.expect("renew");
        assert!(
            claimer.claim(10, &[]).await.expect("claim").is_empty(),
            "taken while a call might still act"
        );
        // Once the call has a result it no longer holds the run.
        owner
            .record_effect_result(
                &run.run_id,
                &intent.call_id,
                &airlock_proto::v1::ToolResult::default(),
            )
            .await
            .expect("result");
        assert_eq!(claimer.claim(10, &[]).await.expect("claim").len(), 1);
    }

    #[tokio::test]
    async fn a_run_given_back_or_skipped_is_left_to_others() {
        let url = testing::fresh_database().await;
        let owner = node(&url).await;
        let run = started_run(&owner).await;
        owner.release().await.expect("release");
        let claimer = node(&url).await;
        claimer.renew(Duration::from_secs(60)).await.expect("renew");
        assert!(
            claimer
                .claim(10, std::slice::from_ref(&run.run_id))
                .await
                .expect("claim")
                .is_empty()
        );
        assert_eq!(claimer.claim(10, &[]).await.expect("claim").len(), 1);
        assert!(claimer.disown(&run.run_id).await.expect("disown"));
        assert!(
            !claimer.disown(&run.run_id).await.expect("disown"),
            "given twice"
        );
        let other = node(&url).await;
        other.renew(Duration::from_secs(60)).await.expect("renew");
        assert_eq!(other.claim(10, &[]).await.expect("claim").len(), 1);
    }

    /// Runs `sql` on the database at `url`, as an outage or an operator leaves it.
    async fn on_database(url: &str, sql: &str) {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        let driver = tokio::spawn(connection);
        client.batch_execute(sql).await.expect("statement");
        drop(client);
        let _ = driver.await;
    }

    #[tokio::test]
    async fn a_node_whose_lease_lapsed_claims_nothing() {
        let url = testing::fresh_database().await;
        let owner = node(&url).await;
        let run = started_run(&owner).await;
        owner.release().await.expect("release");
        let claimer = node(&url).await;
        assert!(claimer.claim(10, &[]).await.expect("claim").is_empty());
        claimer.renew(Duration::ZERO).await.expect("lapse");
        assert!(claimer.claim(10, &[]).await.expect("claim").is_empty());
        claimer.renew(Duration::from_secs(60)).await.expect("renew");
        let claimed = claimer.claim(10, &[]).await.expect("claim");
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].run_id, run.run_id);
    }

    #[tokio::test]
    async fn after_an_outage_a_run_is_claimed_only_from_an_owner_that_had_a_lease_to_renew() {
        let url = testing::fresh_database().await;
        let owner = node(&url).await;
        owner.renew(Duration::from_secs(60)).await.expect("renew");
        let run = started_run(&owner).await;
        let claimer = node(&url).await;
        claimer.renew(Duration::from_secs(60)).await.expect("renew");
        let outage = "UPDATE nodes SET expires_at_ms = airlock_now_ms() - 1";
        // Six seconds ago, as seen from now: longer than the nodes' lease of five.
        let a_lease_ago = "UPDATE nodes SET live_since_ms = live_since_ms - 6000";

        // The database was away longer than every lease. The claimer is back first: its
        // lease holds again, but the owner has not had the time to renew.
        on_database(&url, outage).await;
        claimer.renew(Duration::from_secs(60)).await.expect("renew");
        assert!(
            claimer.claim(10, &[]).await.expect("claim").is_empty(),
            "claimed from an owner that had no time to renew"
        );
        // The owner renews in time: its run stays its own, however long the claimer waits.
        owner.renew(Duration::from_secs(60)).await.expect("renew");
        on_database(&url, a_lease_ago).await;
        assert!(claimer.claim(10, &[]).await.expect("claim").is_empty());

        // A second outage, after which the owner never comes back. A renewal after a lapse
        // starts the claimer's unbroken stretch again: nothing until a lease has passed.
        on_database(&url, outage).await;
        claimer.renew(Duration::from_secs(60)).await.expect("renew");
        assert!(claimer.claim(10, &[]).await.expect("claim").is_empty());
        on_database(&url, a_lease_ago).await;
        let claimed = claimer.claim(10, &[]).await.expect("claim");
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].run_id, run.run_id);
        // And the owner, back at last, learns that it lost the run.
        owner.renew(Duration::from_secs(60)).await.expect("renew");
        assert_eq!(
            owner
                .lost(std::slice::from_ref(&run.run_id))
                .await
                .expect("lost"),
            vec![run.run_id.clone()]
        );
        assert!(
            claimer
                .lost(std::slice::from_ref(&run.run_id))
                .await
                .expect("lost")
                .is_empty()
        );
    }
}
