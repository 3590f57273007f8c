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
//! The connection is TCP or a Unix socket, with TLS as the URL's `sslmode` asks ([`tls`]).

mod appends;
mod batch;
mod client;
mod leases;
mod relay;
mod schema;
mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod tls;
#[cfg(test)]
#[path = "tls_tests.rs"]
mod tls_tests;
mod writer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_proto::v1 as pb;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::FutureExt as _;
use tokio::sync::broadcast;
use tokio_postgres::config::Host;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::relay::{
    CommandId, CommandOutcome, CommandState, Notice, Relay, RunCommand, StoredApproval,
};
use super::{Leases, Pending, RunRecord, StoreError, StoreResult};
use crate::ids::{NodeId, RunId};
use batch::Fence;
use client::Conn;
use writer::Writer;

/// The epoch of a run this daemon gave up: runs are created at epoch 1 and claims only raise
/// it, so a fence at this epoch never holds.
const NO_EPOCH: i64 = 0;

/// Connections a daemon keeps to the database: one is the writer's, the others serve reads
/// side by side (attached clients' catch-up, listings). A fleet of a few daemons stays far
/// below PostgreSQL's default of 100 connections.
const POOL_SIZE: usize = 16;

/// How long opening the store may take when the URL sets no `connect_timeout`: connecting,
/// logging in, migrating (waiting, perhaps, for another daemon's migration) and starting to
/// listen. Long enough for a server that is starting up or a migration of a large table;
/// short enough that a daemon whose database never answers says so while someone watches.
const DEFAULT_OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// The least time a connection waits for the server to acknowledge what it sent before it
/// counts as broken (`TCP_USER_TIMEOUT`), however short the lease: below it, a busy server's
/// pause would break healthy connections.
const MIN_TCP_USER_TIMEOUT: Duration = Duration::from_secs(2);

/// The least time a request waits for the server's answer, however short the lease: below
/// it, a busy server's slow commit (a checkpoint's flush) would fail healthy writes.
const MIN_REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// How long a request — a batch of writes, a read, a lease's renewal — waits for the
/// server's answer before it fails and its connection is closed: two leases, by when every
/// other daemon counts this one's lease lapsed, and at least [`MIN_REQUEST_DEADLINE`]. A
/// server that takes requests and never answers (frozen, or behind a link that lost its way
/// without a reset, which `TCP_USER_TIMEOUT` does not see while the kernel acknowledges
/// what was sent) then fails them as a stopped one does, and the daemon gives its runs back
/// and keeps answering — and stopping — rather than waiting on it for ever.
fn request_deadline(lease: Duration) -> Duration {
    lease.saturating_mul(2).max(MIN_REQUEST_DEADLINE)
}

pub struct PostgresStore {
    writer: Writer,
    pool: Pool,
    /// See [`request_deadline`].
    deadline: Duration,
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
    ///
    /// Opening is bounded as a whole by the URL's `connect_timeout`, or
    /// [`DEFAULT_OPEN_TIMEOUT`]: a server that takes connections and never answers is an
    /// error naming the database, not a daemon that hangs at start.
    pub async fn connect(url: &str, lease: Duration) -> StoreResult<PostgresStore> {
        let url_error = |message: String| StoreError::Open {
            path: "the PostgreSQL URL".into(),
            message,
        };
        let tls = tls::from_url(url).map_err(url_error)?;
        let mut config: tokio_postgres::Config = tls
            .url
            .parse()
            .map_err(|err| url_error(format!("not a PostgreSQL connection string: {err}")))?;
        let shown = shown(&config);
        let bound = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(DEFAULT_OPEN_TIMEOUT);
        if config.get_tcp_user_timeout().is_none() {
            // A link that drops without a reset (a cut cable, a dead host) breaks the
            // connection within a lease, not after TCP's quarter of an hour of retries.
            config.tcp_user_timeout(lease.max(MIN_TCP_USER_TIMEOUT));
        }
        tracing::info!(store = %shown, tls = %tls.said, timeout_ms = bound.as_millis(), "opening the store");
        let opening = Self::open(config, tls.connector, lease, bound, &shown);
        match tokio::time::timeout(bound, opening).await {
            Ok(opened) => opened,
            Err(_) => Err(StoreError::Open {
                path: shown,
                message: no_answer(bound),
            }),
        }
    }

    async fn open(
        mut config: tokio_postgres::Config,
        tls: MakeRustlsConnect,
        lease: Duration,
        bound: Duration,
        shown: &str,
    ) -> StoreResult<PostgresStore> {
        let idle_ms = lease.as_millis().max(1);
        let options = format!(
            "{} -c idle_in_transaction_session_timeout={idle_ms}",
            config.get_options().unwrap_or_default()
        );
        config.options(options.trim_start());
        let open_error = |message: String| StoreError::Open {
            path: shown.to_owned(),
            message,
        };
        let listener_config = config.clone();
        let manager = Manager::from_config(
            config,
            tls.clone(),
            ManagerConfig {
                // A pooled connection is checked with a round trip before it is handed out,
                // so a server restart costs one failed check, not a failed request.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            // A new connection or a pooled one's check that gets no answer fails the request
            // that waited for it, rather than holding it (and the lease's renewal) for ever.
            .create_timeout(Some(bound))
            .recycle_timeout(Some(bound))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|err| open_error(err.to_string()))?;
        let mut client = pool.get().await.map_err(|err| match err {
            deadpool_postgres::PoolError::Timeout(_) => open_error(no_answer(bound)),
            err => open_error(format!("cannot connect: {}", client::pool_error(&err))),
        })?;
        schema::migrate(&mut client)
            .await
            .map_err(|message| StoreError::Damaged {
                path: shown.to_owned(),
                message,
            })?;
        super::queries::runs::copy_out_inputs(&client::Pg::alone(&client)).await?;
        drop(client);
        let listening = tokio_util::sync::CancellationToken::new();
        let notices = relay::listen(listener_config, tls, listening.clone()).await?;
        let deadline = request_deadline(lease);
        Ok(PostgresStore {
            writer: Writer::start(pool.clone(), deadline),
            pool,
            deadline,
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

    /// Runs a lease statement on a connection of the pool, bounded by the request deadline.
    fn on_pool<T: Send + 'static>(
        &self,
        work: impl FnOnce(Conn) -> futures::future::BoxFuture<'static, StoreResult<T>> + Send + 'static,
    ) -> Pending<T> {
        let (answer, pending) = Pending::channel();
        let (pool, deadline) = (self.pool.clone(), self.deadline);
        tokio::spawn(async move {
            let _ = answer.send(client::bounded(&pool, deadline, work).await);
        });
        pending
    }

    /// Runs a statement whose answer must not be given up on: one that, given up on, may
    /// still commit when a frozen server wakes, and leave the store holding what this daemon
    /// never learned (a claim: runs this node would own and never resume, which no other
    /// node claims while it renews). It waits for the server as long as it takes; the fleet's
    /// round that asked it is what a stop does not wait for.
    fn on_pool_answered<T: Send + 'static>(
        &self,
        work: impl FnOnce(Conn) -> futures::future::BoxFuture<'static, StoreResult<T>> + Send + 'static,
    ) -> Pending<T> {
        let (answer, pending) = Pending::channel();
        let pool = self.pool.clone();
        tokio::spawn(async move {
            let outcome = match pool.get().await {
                Ok(connection) => work(Arc::new(connection)).await,
                Err(err) => Err(client::no_connection(&err)),
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
        let lease_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX / 2);
        let claimed =
            self.on_pool_answered(move |c| leases::claim(c, node, limit, skip, lease_ms).boxed());
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

    fn lost(&self, runs: &[RunId]) -> Pending<Vec<RunId>> {
        let (ids, epochs): (Vec<String>, Vec<i64>) = {
            let owned = self.owned.lock().unwrap_or_else(PoisonError::into_inner);
            runs.iter()
                .filter_map(|run_id| Some((run_id.to_string(), *owned.get(run_id)?)))
                // Given up already (lost or given back): reported once.
                .filter(|(_, epoch)| *epoch != NO_EPOCH)
                .unzip()
        };
        if ids.is_empty() {
            return Pending::ready(Ok(Vec::new()));
        }
        let node = self.node.clone();
        let owned = self.owned.clone();
        // After the writes handed over so far: a claim this daemon's own writes settled is
        // not mistaken for a loss.
        self.writer.read(move |c| {
            async move {
                let lost = leases::lost(c, node, ids, epochs).await?;
                // Fenced at an epoch no claim gives from now on: whatever this daemon still
                // hands over for a lost run is refused, not checked against a stale epoch.
                let mut owned = owned.lock().unwrap_or_else(PoisonError::into_inner);
                for run_id in &lost {
                    owned.insert(run_id.clone(), NO_EPOCH);
                }
                Ok(lost)
            }
            .boxed()
        })
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

/// Why opening the store failed when the database kept silent for `bound`.
fn no_answer(bound: Duration) -> String {
    format!(
        "the database did not answer within {} s (the URL's connect_timeout sets how long \
         to wait)",
        bound.as_secs_f32()
    )
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
            let nobody = crate::ids::SessionId::new();
            assert!(
                store
                    .session_grants(&nobody)
                    .await
                    .expect("reads")
                    .is_empty()
            );
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
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
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
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
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
            "postgres://u:secret@127.0.0.1:1/db?sslmode=verify-full",
            TEST_LEASE,
        )
        .await
        else {
            panic!("verify-full without its CA was taken");
        };
        assert!(error.to_string().contains("sslrootcert"), "{error}");
        assert!(!error.to_string().contains("secret"), "{error}");
    }

    #[tokio::test]
    async fn a_refused_connection_says_why_in_the_servers_words_and_never_the_password() {
        let url = testing::fresh_database().await;
        let (base, _) = url.rsplit_once('/').expect("a database in the URL");
        let (scheme, rest) = base.split_once("://").expect("a scheme");
        let (user, server) = rest.split_once('@').expect("a user");
        let missing = format!("{scheme}://{user}:hunter2-secret@{server}/no_such_database");
        let Err(error) = PostgresStore::connect(&missing, TEST_LEASE).await else {
            panic!("connected to a database that does not exist");
        };
        let said = error.to_string();
        assert!(
            said.contains("database \"no_such_database\" does not exist"),
            "{said}"
        );
        assert!(!said.contains("hunter2"), "{said}");
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
        let grant = crate::store::GrantRecord {
            session_id: session.session_id.clone(),
            grant_key: "k".into(),
            tool: "t".into(),
            prefix: None,
            covers: String::new(),
            created_at_ms: 1,
        };
        let granted = store.add_session_grant(&grant);
        assert!(first.await.is_ok());
        assert!(duplicate.await.is_err());
        assert!(granted.await.is_ok());
        assert_eq!(
            store
                .session_grants(&session.session_id)
                .await
                .expect("read"),
            vec![grant]
        );
    }
}
