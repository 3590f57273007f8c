//! A database of its own for each test, on the PostgreSQL server the test script starts
//! (for the store's own tests and, through `airlock_daemon::testing`, the fleet's).

/// Where the test script's server is (scripts/test.sh sets it; scripts/postgres.sh
/// starts one by hand).
const SERVER_VAR: &str = "AIRLOCK_TEST_POSTGRES";

/// The URL of a fresh, empty database on the test server. Fails loudly without one:
/// a store test that skips itself would pass on a machine that never ran it.
pub async fn fresh_database() -> String {
    let Ok(server) = std::env::var(SERVER_VAR) else {
        panic!(
            "{SERVER_VAR} is not set: the PostgreSQL store's tests need a server \
             (scripts/test.sh starts one; by hand: \
             export {SERVER_VAR}=$(scripts/postgres.sh start /tmp/airlock-postgres 54329))"
        );
    };
    let name = format!("airlock_test_{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(&server, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|err| panic!("cannot reach the test server at {server}: {err}"));
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|err| panic!("cannot create a test database: {err}"));
    drop(client);
    let _ = driver.await;
    let (base, _) = server.rsplit_once('/').unwrap_or((&server, ""));
    format!("{base}/{name}")
}

/// A store of a daemon (node) of its own on the database at `url`, with a lease of 5 s.
#[cfg(test)]
pub(in crate::store) async fn node(url: &str) -> std::sync::Arc<super::PostgresStore> {
    std::sync::Arc::new(
        super::PostgresStore::connect(url, std::time::Duration::from_secs(5))
            .await
            .expect("connects"),
    )
}
