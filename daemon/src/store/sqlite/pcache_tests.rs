use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, params};

use super::COUNTS;
use crate::store::sqlite::{StoreOptions, open_connection};
use crate::test_random::Xorshift;

/// What this thread's caches did since the last call: pages moved to the temporary key,
/// truncations passed on, truncations spared, and spared ones that would have dropped a
/// page (checked against SQLite's own cache in test builds).
fn take_counts() -> [u64; 4] {
    COUNTS.with(|counts| counts.replace([0; 4]))
}

/// A connection as the store opens one (the wrapper installed, WAL, the store's cache), on
/// this thread so that `COUNTS` sees its caches.
fn open(dir: &Path) -> Connection {
    super::install().expect("the page cache is installed before any connection opens");
    let connection =
        open_connection(&dir.join("pcache.db"), &StoreOptions::default()).expect("opens");
    connection
        .execute_batch(
            "CREATE TABLE t (k INTEGER PRIMARY KEY, r INTEGER NOT NULL, v BLOB NOT NULL); \
             CREATE INDEX t_r ON t (r);",
        )
        .expect("schema");
    connection
}

/// The tests' generator, the same sequence on every run; a failing seed is named.
fn random(seed: u64) -> Xorshift {
    // Xorshift stays at zero from zero, and small seeds start with small numbers.
    Xorshift(0x9e37_79b9_7f4a_7c15 ^ (seed + 1))
}

#[test]
fn a_commit_after_a_split_through_the_temporary_key_walks_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let connection = open(dir.path());
    let mut rng = random(54);
    take_counts();
    // Index entries at random places split pages in the middle of the index; deleting a
    // third of the rows puts pages on the free list, whose reuse gives the new pages of a
    // split numbers out of order: the swaps through the temporary key.
    let mut next = 0i64;
    for round in 0..6 {
        for _ in 0..400 {
            let tx = connection.unchecked_transaction().expect("begin");
            for _ in 0..10 {
                next += 1;
                tx.execute(
                    "INSERT INTO t (k, r, v) VALUES (?1, ?2, zeroblob(?3))",
                    params![next, rng.next() as i64, 64 + rng.below(256) as i64],
                )
                .expect("insert");
            }
            tx.commit().expect("commit");
        }
        connection
            .execute("DELETE FROM t WHERE k % 3 = ?1", params![round % 3])
            .expect("delete");
    }
    let [temporary, passed, spared, wrong] = take_counts();
    assert_eq!(wrong, 0, "a spared truncation would have dropped pages");
    assert!(
        temporary > 0,
        "the workload never split a page through the temporary key: it tests nothing"
    );
    assert_eq!(
        passed, 0,
        "no page past the database's end was cached, yet {passed} truncations walked the cache \
         ({temporary} moves through the temporary key)"
    );
    assert!(spared >= 2400, "each commit truncates the cache: {spared}");
}

/// One row as the model holds it: the indexed value and the blob's length and byte.
type Row = (i64, u64, u8);

fn blob(row: &Row) -> Vec<u8> {
    vec![row.2; row.1 as usize]
}

/// Every row, in key order, checked against the model; the whole file checked every so
/// often.
fn check(connection: &Connection, model: &BTreeMap<i64, Row>, seed: u64, step: usize) {
    let mut statement = connection
        .prepare_cached("SELECT k, r, v FROM t ORDER BY k")
        .expect("select");
    let rows: Vec<(i64, i64, Vec<u8>)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(
        rows.len(),
        model.len(),
        "seed {seed}, step {step}: row count"
    );
    for ((k, r, v), (mk, mrow)) in rows.iter().zip(model) {
        assert_eq!(
            (k, r),
            (mk, &mrow.0),
            "seed {seed}, step {step}: key and index value"
        );
        assert!(*v == blob(mrow), "seed {seed}, step {step}: row {k}'s blob");
    }
    // The index read alone: a stale index page shows here if not in the table.
    let indexed: i64 = connection
        .query_row(
            "SELECT count(*) FROM t INDEXED BY t_r WHERE r IS NOT NULL",
            [],
            |row| row.get(0),
        )
        .expect("index count");
    assert_eq!(
        indexed as usize,
        model.len(),
        "seed {seed}, step {step}: index"
    );
    if step.is_multiple_of(8) {
        let verdict: String = connection
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .expect("integrity_check");
        assert_eq!(verdict, "ok", "seed {seed}, step {step}");
    }
}

#[test]
fn random_transactions_read_back_what_a_model_holds() {
    // Transactions that grow the file and roll back, savepoints undone, deletes and
    // vacuums that shrink it, small caches that evict: the data reads back as the model
    // holds it, and no truncation the wrapper spared would have dropped a page of
    // SQLite's own cache (which the test build checks at each one).
    let (mut temporary, mut passed) = (0, 0);
    for seed in 0..12u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let connection = open(dir.path());
        if seed % 2 == 1 {
            // A small cache: pages are evicted unseen and read back.
            connection
                .execute_batch("PRAGMA cache_size = 40")
                .expect("cache size");
        }
        let mut rng = random(seed);
        let mut model: BTreeMap<i64, Row> = BTreeMap::new();
        let mut next = 0i64;
        take_counts();
        for step in 0..60 {
            if rng.below(12) == 0 {
                connection.execute_batch("VACUUM").expect("vacuum");
                check(&connection, &model, seed, step);
                continue;
            }
            let mut pending = model.clone();
            connection.execute_batch("BEGIN").expect("begin");
            let mut savepoint: Option<BTreeMap<i64, Row>> = None;
            for _ in 0..1 + rng.below(6) {
                match rng.below(8) {
                    0..=3 => {
                        for _ in 0..1 + rng.below(120) {
                            next += 1;
                            // Some rows overflow their page: chains of pages to allocate
                            // and to free.
                            let row = (
                                rng.next() as i64,
                                if rng.below(10) == 0 {
                                    (4000 + rng.below(9000)) as u64
                                } else {
                                    rng.below(400) as u64
                                },
                                rng.below(256) as u8,
                            );
                            connection
                                .execute(
                                    "INSERT INTO t (k, r, v) VALUES (?1, ?2, ?3)",
                                    params![next, row.0, blob(&row)],
                                )
                                .expect("insert");
                            pending.insert(next, row);
                        }
                    }
                    4 | 5 => {
                        let (modulus, rest) = (2 + rng.below(4) as i64, rng.below(2) as i64);
                        connection
                            .execute("DELETE FROM t WHERE k % ?1 = ?2", params![modulus, rest])
                            .expect("delete");
                        pending.retain(|k, _| k % modulus != rest);
                    }
                    6 => {
                        let byte = rng.below(256) as u8;
                        let modulus = 2 + rng.below(5) as i64;
                        connection
                            .execute(
                                "UPDATE t SET v = ?1 WHERE k % ?2 = 0",
                                params![vec![byte; 700], modulus],
                            )
                            .expect("update");
                        for (k, row) in pending.iter_mut() {
                            if k % modulus == 0 {
                                *row = (row.0, 700, byte);
                            }
                        }
                    }
                    _ => match savepoint.take() {
                        None => {
                            connection.execute_batch("SAVEPOINT s").expect("savepoint");
                            savepoint = Some(pending.clone());
                        }
                        Some(before) => {
                            connection
                                .execute_batch("ROLLBACK TO s; RELEASE s")
                                .expect("rollback to");
                            pending = before;
                        }
                    },
                }
            }
            if savepoint.is_some() {
                connection.execute_batch("RELEASE s").expect("release");
            }
            if rng.below(3) == 0 {
                connection.execute_batch("ROLLBACK").expect("rollback");
            } else {
                connection.execute_batch("COMMIT").expect("commit");
                model = pending;
            }
            check(&connection, &model, seed, step);
        }
        let counts = take_counts();
        assert_eq!(
            counts[3], 0,
            "seed {seed}: {} spared truncations would have dropped pages",
            counts[3]
        );
        temporary += counts[0];
        passed += counts[1];
    }
    assert!(
        passed > 0,
        "no truncation was ever needed: the test exercised nothing the wrapper decides"
    );
    assert!(
        temporary > 0,
        "no split went through the temporary key: the test exercised nothing the wrapper keeps"
    );
}
