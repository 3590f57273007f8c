//! Reloading the tools and profiles while the daemon serves (SIGHUP, or systemd's
//! `ExecReload=`): the profiles directory and the tools directories are read again into a
//! new registry, which the executor serves from then on. A profile or manifest that cannot
//! be served is refused alone, as at start; the daemon never stops serving for a reload, and
//! calls already running finish with the tools they started with. Everything else the
//! configuration names (addresses, tenants, the store, policy) takes a restart.

use std::path::PathBuf;
use std::sync::Arc;

use crate::audit::{Act, Auditor};
use crate::engine::Engines;
use crate::profile::Profiles;
use crate::tools::{Executor, ToolLoadError};

/// Reloads one daemon's tools; clones of the `Arc` share one turn.
pub struct Reloader {
    tools_dirs: Vec<PathBuf>,
    profiles_dir: PathBuf,
    engines: Engines,
    executor: Arc<Executor>,
    auditor: Auditor,
    /// One reload at a time: a second one loads over what the first made (and carries
    /// its hosted servers over) rather than over the same registry beside it.
    turn: tokio::sync::Mutex<()>,
}

/// What a reload did.
#[derive(Debug)]
pub struct Reloaded {
    /// How many tools are served now.
    pub served: usize,
    /// The tools refused, each with why (as at start).
    pub refused: Vec<ToolLoadError>,
    /// How many profiles were refused.
    pub profiles_refused: usize,
}

#[derive(Debug, thiserror::Error)]
#[error("the reload failed before it replaced anything: {0}")]
pub struct ReloadError(String);

impl Reloader {
    pub fn new(
        tools_dirs: Vec<PathBuf>,
        profiles_dir: PathBuf,
        engines: Engines,
        executor: Arc<Executor>,
        auditor: Auditor,
    ) -> Reloader {
        Reloader {
            tools_dirs,
            profiles_dir,
            engines,
            executor,
            auditor,
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Loads the profiles and tools again and serves them. Loading reads files, compiles
    /// modules and lists hosted servers: it runs on a blocking thread, while the daemon
    /// goes on serving the tools it had.
    pub async fn reload(self: &Arc<Self>) -> Result<Reloaded, ReloadError> {
        let _turn = self.turn.lock().await;
        crate::systemd::reloading();
        let this = self.clone();
        let loading = tokio::task::spawn_blocking(move || {
            let (profiles, profile_errors) = Profiles::load_dir(&this.profiles_dir);
            let (registry, refused) =
                this.executor
                    .registry()
                    .reload(&this.tools_dirs, &profiles, &this.engines);
            (registry, refused, profile_errors)
        })
        .await;
        let (registry, refused, profile_errors) = match loading {
            Ok(loaded) => loaded,
            Err(error) => {
                crate::systemd::ready("serving; the last reload failed");
                return Err(ReloadError(error.to_string()));
            }
        };
        for error in &profile_errors {
            tracing::error!(%error, "profile refused");
        }
        for error in &refused {
            tracing::error!(tool = %error.path.display(), reason = %error.message, "tool refused");
        }
        let served = registry.tools().count();
        let names: Vec<String> = registry
            .tools()
            .map(|tool| tool.name().to_owned())
            .collect();
        let before = self.executor.replace_registry(Arc::new(registry));
        let dropped: Vec<&str> = before
            .tools()
            .map(|tool| tool.name())
            .filter(|name| !names.iter().any(|served| served == name))
            .collect();
        tracing::info!(
            served,
            refused = refused.len(),
            profiles_refused = profile_errors.len(),
            no_longer_served = ?dropped,
            "tools reloaded"
        );
        self.auditor.record(
            Act::new(crate::domain::DEFAULT_TENANT, "tools.reloaded")
                .actor("daemon")
                .subject(format!("{served} tools"))
                .reason("the daemon was asked to reload its tools and profiles (SIGHUP)")
                .detail("served", names)
                .detail(
                    "refused",
                    refused.iter().map(ToString::to_string).collect::<Vec<_>>(),
                ),
        );
        crate::systemd::ready(&format!("serving {served} tools"));
        Ok(Reloaded {
            served,
            refused,
            profiles_refused: profile_errors.len(),
        })
    }
}
