//! `[store]` and `[changes]`: which store the daemon keeps its state in (SQLite, or
//! PostgreSQL with the lease of an active daemon), and the cap of the blob store that keeps
//! change sets' contents.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;

/// Where the daemon keeps sessions, runs and their logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreBackend {
    /// `airlock.db` in the state dir: the embedded default, for one machine.
    Sqlite {
        /// fsync on every commit (see `store::StoreOptions`).
        fsync_every_commit: bool,
    },
    /// A PostgreSQL database, which several daemons may share.
    Postgres {
        /// A libpq-style URL, `postgres://user@host:port/db`; it may hold a password, so it
        /// is never logged whole.
        url: String,
        /// How long the fleet waits for a daemon that stopped renewing its lease before
        /// another takes its runs over.
        lease: Duration,
        /// Storage every daemon of the fleet sees at this path (`[store] shared_dir`): the
        /// default tenant's token, kept outputs, change sets' contents and MCP servers' trust
        /// records live there, so any daemon authenticates, serves `ReadOutput`, reverts a
        /// run and trusts alike. None keeps them in the state dir, for a single daemon on
        /// PostgreSQL.
        shared_dir: Option<PathBuf>,
    },
}

impl Default for StoreBackend {
    fn default() -> StoreBackend {
        StoreBackend::Sqlite {
            fsync_every_commit: false,
        }
    }
}

/// The lease of a fleet's daemons unless `[store] lease_ms` says otherwise: a run waits this
/// long for another daemon when its own died, and each daemon renews three times in it, so
/// a pause of a few seconds (a slow disk, a garbage-collecting database) costs no run.
pub(super) const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The shortest lease `[store] lease_ms` may set: tests take runs over in well under a
/// second, but below this a renewal's round trip is a fair part of the lease.
pub(super) const MIN_LEASE: Duration = Duration::from_millis(100);

impl StoreBackend {
    /// The backend `--store` / `[store] url` names: `sqlite`, or a PostgreSQL URL.
    pub(super) fn parse(value: &str, file: &StoreFile) -> Result<StoreBackend, ConfigError> {
        let fsync_every_commit = file.fsync_every_commit;
        if value == "sqlite" {
            if file.lease_ms.is_some() || file.shared_dir.is_some() {
                return Err(ConfigError::Store(
                    "[store] lease_ms and shared_dir are a fleet's, on a PostgreSQL store".into(),
                ));
            }
            return Ok(StoreBackend::Sqlite { fsync_every_commit });
        }
        if !(value.starts_with("postgres://") || value.starts_with("postgresql://")) {
            return Err(ConfigError::Store(
                "the store is `sqlite` or a postgres:// URL".into(),
            ));
        }
        if fsync_every_commit {
            return Err(ConfigError::Store(
                "[store] fsync_every_commit is the SQLite store's; PostgreSQL's durability is \
                 the server's own (synchronous_commit)"
                    .into(),
            ));
        }
        let lease = file.lease_ms.map_or(DEFAULT_LEASE, Duration::from_millis);
        if lease < MIN_LEASE {
            return Err(ConfigError::Store(format!(
                "[store] lease_ms must be at least {} ms",
                MIN_LEASE.as_millis()
            )));
        }
        Ok(StoreBackend::Postgres {
            url: value.to_owned(),
            lease,
            shared_dir: file.shared_dir.clone(),
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreFile {
    /// `sqlite` (the default) or a PostgreSQL URL (`postgres://…`).
    pub url: Option<String>,
    #[serde(default)]
    pub fsync_every_commit: bool,
    /// A fleet's lease in milliseconds (PostgreSQL only; see `DEFAULT_LEASE`).
    pub lease_ms: Option<u64>,
    /// Storage the fleet's daemons share (PostgreSQL only; see `StoreBackend::Postgres`).
    pub shared_dir: Option<PathBuf>,
    /// Delete finished runs, kept outputs and their blobs once this many days old; unset
    /// keeps everything. Zero is refused: it would delete every run as it finishes.
    pub retention_days: Option<std::num::NonZeroU32>,
}

/// `[changes]`: the contents kept for undo.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangesFile {
    /// The blob store's cap, e.g. `"2 GiB"`.
    pub blob_cap: Option<crate::profile::ByteSize>,
}

/// The blob store's cap when `[changes] blob_cap` is unset: 2 GiB holds the edits of
/// thousands of coding runs (source files are small; build trees are recorded by digest only).
pub const DEFAULT_BLOB_CAP_BYTES: u64 = 2 << 30;
