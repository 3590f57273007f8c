//! The fleet's store: a PostgreSQL database several daemons share, migrated at start
//! ([`schema`]), written through one connection per daemon with group commit ([`writer`])
//! and read through a pool of connections. Each daemon is a node of the fleet with a lease
//! ([`leases`]); the runs it created or claimed are its own, and its writes for them are
//! fenced by the epoch it holds each at. Its requests are the shared queries
//! (`store::queries`), run on its connections ([`client`]) by its [`Store`](super::Store)
//! implementation ([`store`]).
//!
//! Durability is the server's: a write is answered after its transaction's `COMMIT`
//! returned, which with PostgreSQL's defaults (`synchronous_commit = on`) means it reached
//! the server's WAL on disk.
//!
//! The connection is plain TCP or a Unix socket: TLS to the database is not offered yet, and
//! a URL that asks for it (`sslmode=require`) is refused rather than silently sent in clear.

mod client;
mod leases;
mod relay;
mod schema;
mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod writer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::FutureExt as _;
use tokio::sync::broadcast;
use tokio_postgres::NoTls;
use tokio_postgres::config::{Host, SslMode};

use super::relay::{
    CommandId, CommandOutcome, CommandState, Notice, Relay, RunCommand, StoredApproval,
};
use super::{Leases, Pending, RunRecord, StoreError, StoreResult};
use crate::ids::{NodeId, RunId};
use client::Conn;
use writer::{Fence, Writer};

/// The epoch of a run this daemon gave up: runs are created at epoch 1 and claims only raise
/// it, so a fence at this epoch never holds.
const NO_EPOCH: i64 = 0;

/// Connections a daemon keeps to the database: one is the writer's, the others serve reads
/// side by side (attached clients' catch-up, listings). A fleet of a few daemons stays far
/// below PostgreSQL's default of 100 connections.
const POOL_SIZE: usize = 16;

pub struct PostgresStore {
    writer: Writer,
    pool: Pool,
    node: NodeId,
    /// The runs this node owns and the epoch it holds each at: its writes for them are
    /// fenced by it. A run leaves when it finishes (no claim takes a finished run).
    owned: Arc<Mutex<HashMap<RunId, i64>>>,
    /// The fleet's notices, heard on a connection of their own ([`relay`]).
    notices: broadcast::Sender<Notice>,
    lease: Duration,
    /// Stops listening when the store goes.
    _listening: tokio_util::sync::DropGuard,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user@host:port/db`, as libpq takes
    /// it) as a new node of the fleet, and migrates it. Needs a Tokio runtime: the writer
    /// and the pool's connections run on it. `lease` is how long the fleet waits for a node
    /// that stopped renewing: the server ends a transaction left open that long (a daemon
    /// stopped in the middle of one), so its row locks do not hold a takeover up.
    pub async fn connect(url: &str, lease: Duration) -> StoreResult<PostgresStore> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|err| StoreError::Open {
            path: "the PostgreSQL URL".into(),
            message: format!("not a PostgreSQL connection string: {err}"),
        })?;
        let idle_ms = lease.as_millis().max(1);
        let options = format!(
            "{} -c idle_in_transaction_session_timeout={idle_ms}",
            config.get_options().unwrap_or_default()
        );
        config.options(options.trim_start());
        let shown = shown(&config);
        let open_error = |message: String| StoreError::Open {
            path: shown.clone(),
            message,
        };
        if config.get_ssl_mode() == SslMode::Require {
            return Err(open_error(
                "sslmode=require asks for TLS, which this daemon does not speak to the database yet"
                    .into(),
            ));
        }
        let listener_config = config.clone();
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                // A pooled connection is checked with a round trip before it is handed out,
                // so a server restart costs one failed check, not a failed request.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|err| open_error(err.to_string()))?;
        let mut client = pool
            .get()
            .await
            .map_err(|err| open_error(format!("cannot connect: {err}")))?;
        schema::migrate(&mut client)
            .await
            .map_err(|message| StoreError::Damaged {
                path: shown.clone(),
                message,
            })?;
        drop(client);
        let listening = tokio_util::sync::CancellationToken::new();
        let notices = relay::listen(listener_config, listening.clone()).await?;
        Ok(PostgresStore {
            writer: Writer::start(pool.clone()),
            pool,
            node: NodeId::new(),
            owned: Arc::default(),
            notices,
            lease,
            _listening: listening.drop_guard(),
        })
    }

    /// The fence of a write for `run_id`: none for a run this node does not own (a finished
    /// one, or one it never had).
    fn fence(&self, run_id: &RunId) -> Option<Fence> {
        let owned = self.owned.lock().unwrap_or_else(PoisonError::into_inner);
        owned.get(run_id).map(|&epoch| Fence {
            run_id: run_id.to_string(),
            node: self.node.to_string(),
            epoch,
        })
    }

    fn fence_of(&self, run_id: &str) -> Option<Fence> {
        self.fence(&RunId::from_stored(run_id))
    }

    fn own(&self, run_id: &RunId, epoch: i64) {
        self.owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run_id.clone(), epoch);
    }

    /// Runs a lease statement on a connection of the pool.
    fn on_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce(Conn) -> futures::future::BoxFuture<'static, StoreResult<T>> + Send + 'static,
    ) -> Pending<T> {
        let (answer, pending) = Pending::channel();
        let pool = self.pool.clone();
        tokio::spawn(async move {
            let outcome = match pool.get().await {
                Ok(connection) => work(Arc::new(connection)).await,
                Err(err) => Err(StoreError::Io(format!(
                    "no connection to the database: {err}"
                ))),
            };
            let _ = answer.send(outcome);
        });
        pending
    }
}

impl Leases for PostgresStore {
    fn node(&self) -> &NodeId {
        &self.node
    }

    fn renew(&self, lease: Duration) -> Pending<()> {
        let node = self.node.clone();
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 2);
        self.on_pool(move |c| leases::renew(c, node, lease_ms).boxed())
    }

    fn release(&self) -> Pending<()> {
        let node = self.node.clone();
        self.on_pool(move |c| leases::release(c, node).boxed())
    }

    fn claim(&self, limit: usize, skip: &[RunId]) -> Pending<Vec<RunRecord>> {
        let node = self.node.clone();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let skip: Vec<String> = skip.iter().map(RunId::to_string).collect();
        let (answer, pending) = Pending::channel();
        let claimed = self.on_pool(move |c| leases::claim(c, node, limit, skip).boxed());
        let owned = self.owned.clone();
        tokio::spawn(async move {
            let outcome = claimed.await.map(|runs| {
                let mut owned = owned.lock().unwrap_or_else(PoisonError::into_inner);
                runs.into_iter()
                    .map(|(run, epoch)| {
                        owned.insert(run.run_id.clone(), epoch);
                        run
                    })
                    .collect()
            });
            let _ = answer.send(outcome);
        });
        pending
    }

    fn disown(&self, run_id: &RunId) -> Pending<bool> {
        let epoch = self
            .owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .copied();
        let Some(epoch) = epoch.filter(|&epoch| epoch != NO_EPOCH) else {
            return Pending::ready(Ok(false));
        };
        let (node, run_id, owned) = (self.node.clone(), run_id.clone(), self.owned.clone());
        self.on_pool(move |c| {
            async move {
                let given = leases::disown(c, node, run_id.clone(), epoch).await?;
                // Kept, at an epoch no claim gives: a late write of this daemon for the run
                // is refused rather than let through unfenced.
                owned
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(run_id, NO_EPOCH);
                Ok(given)
            }
            .boxed()
        })
    }
}

impl Relay for PostgresStore {
    fn notices(&self) -> broadcast::Receiver<Notice> {
        self.notices.subscribe()
    }

    fn lease(&self) -> Duration {
        self.lease
    }

    fn remote_approvals(&self) -> Pending<Vec<pb::ApprovalRequest>> {
        let node = self.node.clone();
        self.on_pool(move |c| relay::remote_approvals(c, node).boxed())
    }

    fn approval(&self, approval_id: &str) -> Pending<Option<StoredApproval>> {
        let (node, approval_id) = (self.node.clone(), approval_id.to_owned());
        self.on_pool(move |c| relay::approval(c, node, approval_id).boxed())
    }

    fn send_command(&self, run_id: &RunId, command: &RunCommand) -> Pending<CommandId> {
        let run_id = run_id.clone();
        let command = match serde_json::to_string(command) {
            Ok(command) => command,
            Err(err) => return Pending::ready(Err(StoreError::Io(err.to_string()))),
        };
        self.on_pool(move |c| relay::send_command(c, run_id, command).boxed())
    }

    fn take_command(&self, command: CommandId) -> Pending<Option<(RunId, RunCommand)>> {
        let node = self.node.clone();
        self.on_pool(move |c| relay::take_command(c, node, command).boxed())
    }

    fn untaken_commands(&self) -> Pending<Vec<(CommandId, RunId)>> {
        let node = self.node.clone();
        self.on_pool(move |c| relay::untaken_commands(c, node).boxed())
    }

    fn answer_command(&self, command: CommandId, outcome: &CommandOutcome) -> Pending<()> {
        let outcome = match serde_json::to_string(outcome) {
            Ok(outcome) => outcome,
            Err(err) => return Pending::ready(Err(StoreError::Io(err.to_string()))),
        };
        self.on_pool(move |c| relay::answer_command(c, command, outcome).boxed())
    }

    fn command_state(&self, command: CommandId) -> Pending<Option<CommandState>> {
        self.on_pool(move |c| relay::command_state(c, command).boxed())
    }

    fn withdraw_command(&self, command: CommandId) -> Pending<CommandState> {
        let withdrawn = match serde_json::to_string(&CommandOutcome::Withdrawn) {
            Ok(withdrawn) => withdrawn,
            Err(err) => return Pending::ready(Err(StoreError::Io(err.to_string()))),
        };
        self.on_pool(move |c| relay::withdraw_command(c, command, withdrawn).boxed())
    }
}

/// The database a config names, without its password, for messages and logs.
fn shown(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().unwrap_or("");
    format!("postgres://{host}:{port}/{database}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::{CatalogColumn, expected};
    use crate::store::sql::Dialect;
    use crate::store::{Store, conformance};

    const TEST_LEASE: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn the_postgres_store_passes_the_conformance_suite() {
        let url = testing::fresh_database().await;
        let store = PostgresStore::connect(&url, TEST_LEASE)
            .await
            .expect("connects");
        conformance(&store).await;
    }

    #[tokio::test]
    async fn daemons_starting_together_migrate_once() {
        let url = testing::fresh_database().await;
        let (a, b, c) = tokio::join!(
            PostgresStore::connect(&url, TEST_LEASE),
            PostgresStore::connect(&url, TEST_LEASE),
            PostgresStore::connect(&url, TEST_LEASE),
        );
        for store in [a, b, c] {
            let store = store.expect("each daemon opens the store");
            assert!(store.session_grants().await.expect("reads").is_empty());
        }
    }

    #[tokio::test]
    async fn the_migrations_reach_the_shared_table_list() {
        let url = testing::fresh_database().await;
        drop(
            PostgresStore::connect(&url, TEST_LEASE)
                .await
                .expect("connects"),
        );
        let (client, connection) = tokio_postgres::connect(&url, NoTls)
            .await
            .expect("connects");
        tokio::spawn(connection);
        let mut columns: Vec<CatalogColumn> = client
            .query(
                "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'YES'
                 FROM information_schema.columns
                 WHERE table_schema = 'public' AND table_name <> 'airlock_schema'",
                &[],
            )
            .await
            .expect("catalog")
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
            .collect();
        columns.sort();
        assert_eq!(columns, expected(Dialect::Postgres));
    }

    #[tokio::test]
    async fn a_database_newer_than_the_daemon_is_refused() {
        let url = testing::fresh_database().await;
        drop(
            PostgresStore::connect(&url, TEST_LEASE)
                .await
                .expect("connects"),
        );
        let (client, connection) = tokio_postgres::connect(&url, NoTls)
            .await
            .expect("connects");
        tokio::spawn(connection);
        client
            .batch_execute("UPDATE airlock_schema SET version = 99")
            .await
            .expect("version");
        let Err(error) = PostgresStore::connect(&url, TEST_LEASE).await else {
            panic!("a newer schema was opened");
        };
        assert!(
            error.to_string().contains("newer than this daemon"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_or_a_bad_url_is_a_clear_error() {
        let Err(error) =
            PostgresStore::connect("postgres://nobody@127.0.0.1:1/none", TEST_LEASE).await
        else {
            panic!("connected to nothing");
        };
        assert!(error.to_string().contains("cannot connect"), "{error}");
        let Err(error) = PostgresStore::connect("not a url at all =", TEST_LEASE).await else {
            panic!("a bad URL was taken");
        };
        assert!(
            error
                .to_string()
                .contains("not a PostgreSQL connection string"),
            "{error}"
        );
        let Err(error) = PostgresStore::connect(
            "postgres://u:secret@127.0.0.1:1/db?sslmode=require",
            TEST_LEASE,
        )
        .await
        else {
            panic!("TLS was asked for and not refused");
        };
        assert!(error.to_string().contains("sslmode=require"), "{error}");
        assert!(!error.to_string().contains("secret"), "{error}");
    }

    #[tokio::test]
    async fn a_write_that_fails_is_undone_alone_and_the_batch_commits() {
        let url = testing::fresh_database().await;
        let store = PostgresStore::connect(&url, TEST_LEASE)
            .await
            .expect("connects");
        let session = crate::store::conformance::session("batch", 1);
        // Three writes handed over together: the middle one is a duplicate.
        let first = store.create_session(&session);
        let duplicate = store.create_session(&session);
        let grant = store.add_session_grant(&session.session_id, "k");
        assert!(first.await.is_ok());
        assert!(duplicate.await.is_err());
        assert!(grant.await.is_ok());
        assert_eq!(store.session_grants().await.expect("read"), vec!["k"]);
    }
}
