//! The lifecycle of one hosted server: an instance per (tenant, workspace), started on first
//! use, stopped after an idle period, restarted with backoff after a crash.
//!
//! Instances of one server share nothing but their program: each has its own sandbox, so a
//! tenant's server never sees another tenant's workspace or calls. Starting is serialised
//! per key (two first calls start one instance); calls to a running instance are concurrent,
//! unless the server may write its workspace — then they take turns, so that what one call
//! changed is that call's alone.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::client::AskerSlot;
use super::instance::{Instance, Listing, Recording};
use super::oauth::Credential;
use super::trust::{Distrust, TrustStore};
use crate::changes::{CallRules, Changes, Deadline, Exclusions, Modes};
use crate::egress::{Gate, Resolver, Rules};
use crate::engine::image::McpServer;
use crate::engine::process::{ServerProgram, ServerStart};
use crate::profile::Profile;
use crate::secrets::Secrets;

/// The first restart after a crash waits this long; each further one twice as long.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// A server that keeps crashing is retried at most this rarely.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long a server being listed at load gets to answer the ping that lets a `list_changed`
/// sent with its first listing land: a round trip on a pipe, well under this.
const LOAD_PING: Duration = Duration::from_secs(2);

/// The idle reaper never looks more often than this, whatever the idle timeout.
const MIN_REAP_INTERVAL: Duration = Duration::from_millis(20);

/// Who an instance serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    tenant: Option<String>,
    workspace: Option<PathBuf>,
}

#[derive(Default)]
struct Entry {
    instance: Option<Arc<Instance>>,
    /// Crashes in a row, and when the last one was seen.
    failures: u32,
    failed_at: Option<Instant>,
}

/// How a server's instances come to be.
pub enum Origin {
    /// Started as a program in the process sandbox.
    Program(ServerProgram),
    /// Connected to over Streamable HTTP, through a gate with the profile's rules.
    Remote {
        url: String,
        /// What its requests carry in `Authorization`: a secret's value, or OAuth tokens
        /// (shared by all instances: the grant is the daemon's, not a tenant's).
        credential: Option<Credential>,
        rules: Rules,
        resolver: Arc<Resolver>,
    },
}

pub struct Host {
    pub name: String,
    origin: Origin,
    spec: Arc<McpServer>,
    profile: Arc<Profile>,
    secrets: Secrets,
    pub trust: TrustStore,
    asker: AskerSlot,
    /// Where a writing server's changes are recorded; none where this daemon cannot, and
    /// then such a server's instances are refused.
    changes: Option<Changes>,
    entries: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<Entry>>>>,
    /// Whether the idle reaper has been started.
    reaping: AtomicBool,
}

/// A call's hold on an instance: counted as in flight until dropped.
pub struct Lease {
    pub instance: Arc<Instance>,
    /// Whether this lease started the instance: then the call waited for all the instance
    /// did so far, and is accounted it (see `tool`).
    pub started: bool,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Ok(mut last) = self.instance.last_used.lock() {
            *last = Instant::now();
        }
        self.instance.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Host {
    pub fn new(
        name: String,
        origin: Origin,
        spec: Arc<McpServer>,
        profile: Arc<Profile>,
        secrets: Secrets,
        trust: TrustStore,
        asker: AskerSlot,
    ) -> Host {
        Host {
            name,
            origin,
            spec,
            profile,
            secrets,
            trust,
            asker,
            changes: None,
            entries: Mutex::default(),
            reaping: AtomicBool::new(false),
        }
    }

    fn start_spec(
        &self,
        workspace: Option<PathBuf>,
        root: Option<std::os::fd::OwnedFd>,
        egress: Option<&Arc<Gate>>,
    ) -> ServerStart {
        ServerStart {
            workspace,
            root,
            env: self.secrets.environment(&self.profile),
            read_only: !self.spec.writes_workspace,
            // The call's gate asks the call's approvers and keeps the call's ledger; the
            // instance outlives the call, so it gets a gate of its own, whose ledger each of
            // its calls takes what it gained in flight from (see `tool`).
            egress: egress.map(|gate| Arc::new(gate.detached())),
        }
    }

    /// Records writing instances' changes through `changes` (without it, they are refused).
    pub fn with_changes(mut self, changes: Option<Changes>) -> Host {
        self.changes = changes;
        self
    }

    /// Starts an instance with `workspace`, lists its tools and stops it: what the registry
    /// serves is known before the first call. Blocks; runs on a thread and runtime of its own
    /// so that it can be called while the daemon is assembled.
    /// Returns the first listing the instance gave and the one current when the daemon
    /// asked last (they differ when the server changed its listing meanwhile).
    pub fn list_once(
        &self,
        workspace: Option<PathBuf>,
    ) -> Result<(Arc<Listing>, Arc<Listing>), String> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|err| format!("cannot start a runtime to list tools: {err}"))?;
                    runtime.block_on(async {
                        // No egress gate for a program: listing needs no network, and a
                        // server that wants it to start finds none.
                        let instance = self.open(None, workspace, None, false).await?;
                        let first = instance.kept_listing();
                        // A `list_changed` the server sent with its first listing is handled
                        // on a task of rmcp's own, a moment after the listing: a round trip
                        // lets it land before the listing is read again. A server that does
                        // not answer a ping is listed as it is.
                        let _ =
                            tokio::time::timeout(
                                LOAD_PING,
                                instance.peer().send_request(
                                    rmcp::model::ClientRequest::PingRequest(Default::default()),
                                ),
                            )
                            .await;
                        let current = instance.current_listing(&self.name).await?;
                        Ok((first, current))
                    })
                })
                .join()
                .unwrap_or_else(|_| Err("listing the server's tools panicked".into()))
        })
    }

    /// A fresh overlay over `workspace` for a writing instance.
    async fn recording(&self, workspace: &std::path::Path) -> Result<Recording, String> {
        let changes = self.changes.clone().ok_or_else(|| {
            format!(
                "MCP server `{}` may write its workspace, and this daemon cannot record what it changes",
                self.name
            )
        })?;
        let workspace = workspace.to_owned();
        let patterns = self.profile.change_exclusions.clone();
        let rules = self.profile.change_rules;
        let call = format!("mcp-{}-{:016x}", self.name, fastrand::u64(..));
        tokio::task::spawn_blocking(move || {
            let exclusions = Exclusions::for_workspace(&workspace, &patterns);
            let overlay = changes
                .overlay(&workspace, &call)
                .map_err(|err| err.to_string())?;
            // What the daemon lands in the workspace is shown to the server at its next call.
            let writes = std::sync::Arc::default();
            changes.views().watch(
                std::os::fd::AsFd::as_fd(&overlay.upper().workspace),
                &writes,
            );
            Ok(Recording {
                changes,
                overlay,
                call: CallRules {
                    exclusions,
                    modes: Modes::Tool,
                    rules,
                    // Each sync and refresh runs by its call's deadline, given then.
                    deadline: Deadline::none(),
                },
                writes,
                busy: Default::default(),
                surveyed: Default::default(),
            })
        })
        .await
        .map_err(|err| format!("the overlay's set-up panicked: {err}"))?
    }

    /// A new instance: a program started in its sandbox, or a connection to a remote server.
    async fn open(
        &self,
        tenant: Option<String>,
        workspace: Option<PathBuf>,
        egress: Option<&Arc<Gate>>,
        serial: bool,
    ) -> Result<Instance, String> {
        match &self.origin {
            Origin::Program(program) => {
                // A writing server writes an overlay, recorded after each call; the instance
                // that lists the tools at load writes nothing that matters.
                let recording = match (&workspace, serial) {
                    (Some(workspace), true) => Some(self.recording(workspace).await?),
                    _ => None,
                };
                let root = match &recording {
                    Some(recording) => Some(
                        recording
                            .overlay
                            .root()
                            .try_clone_to_owned()
                            .map_err(|err| format!("cannot use the workspace overlay: {err}"))?,
                    ),
                    None => None,
                };
                Instance::start(
                    &self.name,
                    program,
                    self.start_spec(workspace, root, egress),
                    serial,
                    (tenant, self.asker.clone()),
                    recording,
                )
                .await
            }
            Origin::Remote {
                url,
                credential,
                rules,
                resolver,
            } => {
                let gate = Arc::new(Gate::new(rules.clone(), resolver.clone(), None));
                Instance::connect(
                    &self.name,
                    url,
                    credential.clone(),
                    gate,
                    (tenant, self.asker.clone()),
                )
                .await
            }
        }
    }

    /// An instance for a call of `tenant` in `workspace`, started if there is none.
    pub async fn lease(
        self: &Arc<Self>,
        tenant: Option<String>,
        workspace: Option<PathBuf>,
        egress: Option<&Arc<Gate>>,
    ) -> Result<Lease, String> {
        let key = Key {
            tenant: tenant.clone(),
            // A remote server sees no workspace: one connection per tenant.
            workspace: match self.origin {
                Origin::Program(_) => workspace.clone(),
                Origin::Remote { .. } => None,
            },
        };
        let entry = {
            let mut entries = self
                .entries
                .lock()
                .map_err(|_| "the MCP host's table is poisoned")?;
            entries.entry(key).or_default().clone()
        };
        let mut entry = entry.lock().await;
        if let Some(instance) = &entry.instance {
            if instance.is_alive() {
                instance.in_flight.fetch_add(1, Ordering::SeqCst);
                return Ok(Lease {
                    instance: instance.clone(),
                    started: false,
                });
            }
            tracing::warn!(
                server = %self.name,
                // The daemon's log is read by people the secrets are kept from.
                stderr = %crate::secrets::Redactor::new([&self.secrets]).redact(&instance.stderr_tail()),
                "MCP server instance ended; starting a new one"
            );
            // A crash after a long healthy life starts the backoff over.
            if instance.started_at.elapsed() > MAX_BACKOFF {
                entry.failures = 0;
            }
            entry.instance = None;
            crate::metrics::global().mcp_instances(-1);
            entry.failures = entry.failures.saturating_add(1);
            entry.failed_at = Some(Instant::now());
        }
        if let Some(failed_at) = entry.failed_at {
            let wait = backoff(entry.failures).saturating_sub(failed_at.elapsed());
            tokio::time::sleep(wait).await;
        }
        let started = self
            .open(tenant, workspace, egress, self.spec.writes_workspace)
            .await;
        let instance = match started {
            Ok(instance) => Arc::new(instance),
            Err(message) => {
                entry.failures = entry.failures.saturating_add(1);
                entry.failed_at = Some(Instant::now());
                return Err(message);
            }
        };
        instance.in_flight.fetch_add(1, Ordering::SeqCst);
        entry.instance = Some(instance.clone());
        crate::metrics::global().mcp_instances(1);
        drop(entry);
        self.start_reaper();
        Ok(Lease {
            instance,
            started: true,
        })
    }

    /// Why `tool` may not be called on `instance` now, if it may not: its listing there
    /// must be the trusted one.
    pub async fn distrust(&self, instance: &Instance, tool: &str) -> Result<(), String> {
        let listing = instance.current_listing(&self.name).await?;
        let refused = self.trust.check(&listing.digests, &|| {
            super::trust::definitions(&listing.tools)
        })?;
        match refused.get(tool) {
            Some(verdict) => {
                tracing::warn!(server = %self.name, tool, reason = %verdict.explain(&self.name, tool), "refusing a changed MCP tool");
                Err(verdict.explain(&self.name, tool))
            }
            None if !listing.digests.contains_key(tool) => {
                Err(Distrust::New.explain(&self.name, tool).replace(
                    "was not in the listing airlock trusted",
                    "is no longer listed",
                ))
            }
            None => Ok(()),
        }
    }

    /// Starts the task that stops idle instances, once.
    fn start_reaper(self: &Arc<Self>) {
        if self.reaping.swap(true, Ordering::SeqCst) {
            return;
        }
        let host = Arc::downgrade(self);
        let idle = self.spec.idle_timeout;
        let interval = (idle / 2).clamp(MIN_REAP_INTERVAL, Duration::from_secs(1));
        tokio::spawn(reap_idle(host, idle, interval));
    }
}

/// Stops instances with no call in flight for `idle`, until the host is gone.
async fn reap_idle(host: Weak<Host>, idle: Duration, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(host) = host.upgrade() else { return };
        let entries: Vec<_> = match host.entries.lock() {
            Ok(entries) => entries.values().cloned().collect(),
            Err(_) => return,
        };
        for entry in entries {
            // An entry that is starting an instance is in use.
            let Ok(mut entry) = entry.try_lock() else {
                continue;
            };
            let idle_now = entry.instance.as_ref().is_some_and(|instance| {
                instance.in_flight.load(Ordering::SeqCst) == 0
                    && instance
                        .last_used
                        .lock()
                        .is_ok_and(|last| last.elapsed() >= idle)
            });
            if idle_now {
                tracing::info!(server = %host.name, "stopping an idle MCP server instance");
                entry.instance = None;
                crate::metrics::global().mcp_instances(-1);
                continue;
            }
            // A writing server between calls: still within its bounds? (No call can start
            // while the entry is held.)
            let between_calls = entry.instance.as_ref().and_then(|instance| {
                (instance.in_flight.load(Ordering::SeqCst) == 0)
                    .then(|| instance.recording.clone())
                    .flatten()
            });
            if let Some(recording) = between_calls {
                let verdict = tokio::task::spawn_blocking(move || recording.within_bounds())
                    .await
                    .unwrap_or(Ok(()));
                if let Err(reason) = verdict {
                    tracing::warn!(
                        server = %host.name,
                        %reason,
                        "stopping an MCP server instance that wrote past its bounds between calls; nothing of it is applied"
                    );
                    if let Some(instance) = entry.instance.take() {
                        crate::metrics::global().mcp_instances(-1);
                        instance.kill();
                    }
                }
            }
        }
    }
}

fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(1), FIRST_BACKOFF);
        assert_eq!(backoff(2), FIRST_BACKOFF * 2);
        assert_eq!(backoff(100), MAX_BACKOFF);
    }
}
