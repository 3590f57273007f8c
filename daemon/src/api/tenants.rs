//! Tenants: who a token belongs to, and what its bearer may do — which tools, which
//! workspaces, which approvals, how many runs and calls at once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::token_file::{self, SecretFileError};
use crate::config::{ApprovalRights, AuthSettings, TenantFile};
use crate::workspace::{WorkspaceError, WorkspaceRoots};

pub use crate::domain::DEFAULT_TENANT;

/// Runs one tenant may have going at once unless its entry says otherwise: enough for a busy
/// interactive user or a CI fleet's share, low enough that one tenant cannot take the whole
/// daemon (each run holds a model connection and a loop task).
pub const DEFAULT_MAX_CONCURRENT_RUNS: u32 = 64;

/// Direct tool calls (`ExecuteTool`) one tenant may have running at once unless its entry
/// says otherwise: each holds a sandbox (memory, a process tree or a wasm instance).
pub const DEFAULT_MAX_CONCURRENT_EXECUTIONS: u32 = 64;

/// A tenant, as the requests of its token see the daemon.
#[derive(Debug)]
pub struct Tenant {
    pub name: String,
    tools: Option<BTreeSet<String>>,
    /// Its own roots when narrower than the daemon's.
    roots: Option<WorkspaceRoots>,
    pub approvals: ApprovalRights,
    pub max_concurrent_runs: u32,
    pub max_concurrent_executions: u32,
}

impl Tenant {
    /// The `default` tenant: all tools, the daemon's roots, every approval.
    pub fn default_tenant() -> Tenant {
        Tenant {
            name: DEFAULT_TENANT.to_owned(),
            tools: None,
            roots: None,
            approvals: ApprovalRights::All,
            max_concurrent_runs: DEFAULT_MAX_CONCURRENT_RUNS,
            max_concurrent_executions: DEFAULT_MAX_CONCURRENT_EXECUTIONS,
        }
    }

    pub fn may_use_tool(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|tools| tools.contains(tool))
    }

    /// Its own workspace roots, when narrower than the daemon's.
    pub fn roots(&self) -> Option<&WorkspaceRoots> {
        self.roots.as_ref()
    }

    /// The tools it may use, when it may not use all.
    pub fn allowed_tools(&self) -> Option<&BTreeSet<String>> {
        self.tools.as_ref()
    }

    /// Whether `workspace` (as a request names it) lies in this tenant's roots. No
    /// workspace always does; the daemon's own roots are checked after this.
    pub fn may_use_workspace(&self, workspace: Option<&str>) -> Result<(), WorkspaceError> {
        match &self.roots {
            Some(roots) => roots.resolve(workspace).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Whether it owns things recorded for `owner`.
    pub fn owns(&self, owner: &str) -> bool {
        self.name == owner
    }

    /// Whether it sees and may answer an approval request of a run owned by `owner`.
    pub fn may_answer_for(&self, owner: &str) -> bool {
        match self.approvals {
            ApprovalRights::None => false,
            ApprovalRights::Own => self.owns(owner),
            ApprovalRights::All => true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error("tenant `{0}` is declared twice")]
    Duplicate(String),
    #[error("tenant `{0}` needs exactly one of token_file and token_env")]
    TokenSource(String),
    #[error("tenant `{tenant}`: environment variable {var} is not set or empty")]
    MissingEnv { tenant: String, var: String },
    #[error("tenant `{tenant}`: {source}")]
    TokenFile {
        tenant: String,
        source: SecretFileError,
    },
    #[error("tenants `{0}` and `{1}` have the same token")]
    SharedToken(String, String),
    #[error("tenant `{tenant}`: workspace root {root} {reason}")]
    Root {
        tenant: String,
        root: PathBuf,
        reason: String,
    },
    #[error("the default tenant's token: {0}")]
    Default(SecretFileError),
}

/// Every token the daemon accepts and the tenant it stands for. Tokens are kept as SHA-256
/// digests: the comparison then always covers 32 bytes, whatever the length presented.
pub struct Tenants {
    tokens: Vec<([u8; 32], Arc<Tenant>)>,
    default: Arc<Tenant>,
}

impl std::fmt::Debug for Tenants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tokens.iter().map(|(_, t)| t.name.as_str()).collect();
        f.debug_struct("Tenants").field("tenants", &names).finish()
    }
}

impl Tenants {
    /// The default tenant's token from `state_dir` (created on first start) and the tenants
    /// of `auth`, each checked against the daemon's workspace roots.
    pub fn load(
        state_dir: &Path,
        auth: &AuthSettings,
        daemon_roots: &WorkspaceRoots,
    ) -> Result<Tenants, TenantError> {
        let default = Arc::new(Tenant::default_tenant());
        let token = token_file::ensure_default_token(state_dir).map_err(TenantError::Default)?;
        let mut tenants = Tenants {
            tokens: vec![(digest(&token), default.clone())],
            default,
        };
        for entry in &auth.tenants {
            let (token, tenant) = load_tenant(entry, daemon_roots)?;
            if tenants.tokens.iter().any(|(_, t)| t.name == tenant.name) {
                return Err(TenantError::Duplicate(tenant.name));
            }
            let digest = digest(&token);
            if let Some((_, other)) = tenants.tokens.iter().find(|(d, _)| *d == digest) {
                return Err(TenantError::SharedToken(other.name.clone(), tenant.name));
            }
            tenants.tokens.push((digest, Arc::new(tenant)));
        }
        Ok(tenants)
    }

    /// The tenant whose token is `presented`. Every known token is compared, in constant
    /// time, so neither the answer's timing nor its path says how close a guess came.
    pub fn identify(&self, presented: &str) -> Option<Arc<Tenant>> {
        use subtle::ConstantTimeEq;
        let presented = digest(presented);
        let mut found = None;
        for (known, tenant) in &self.tokens {
            if bool::from(known.ct_eq(&presented)) {
                found = Some(tenant.clone());
            }
        }
        found
    }

    pub fn default_tenant(&self) -> &Arc<Tenant> {
        &self.default
    }

    /// The tenant called `name`.
    pub fn named(&self, name: &str) -> Option<Arc<Tenant>> {
        self.tokens
            .iter()
            .find(|(_, tenant)| tenant.name == name)
            .map(|(_, tenant)| tenant.clone())
    }

    pub fn names(&self) -> Vec<&str> {
        self.tokens.iter().map(|(_, t)| t.name.as_str()).collect()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn load_tenant(
    entry: &TenantFile,
    daemon_roots: &WorkspaceRoots,
) -> Result<(String, Tenant), TenantError> {
    let name = entry.name.clone();
    let token = match (&entry.token_file, &entry.token_env) {
        (Some(path), None) => {
            token_file::read_secret_file(path).map_err(|source| TenantError::TokenFile {
                tenant: name.clone(),
                source,
            })?
        }
        (None, Some(var)) => std::env::var(var)
            .ok()
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .ok_or_else(|| TenantError::MissingEnv {
                tenant: name.clone(),
                var: var.clone(),
            })?,
        (Some(_), Some(_)) | (None, None) => return Err(TenantError::TokenSource(name)),
    };
    let tools = if entry.tools.iter().any(|tool| tool == "*") {
        None
    } else {
        Some(entry.tools.iter().cloned().collect())
    };
    let roots = if entry.workspace_roots.is_empty() {
        None
    } else {
        for root in &entry.workspace_roots {
            let inside = root
                .to_str()
                .ok_or_else(|| "is not UTF-8".to_owned())
                .and_then(|text| {
                    daemon_roots
                        .resolve(Some(text))
                        .map_err(|err| err.to_string())
                });
            if let Err(reason) = inside {
                return Err(TenantError::Root {
                    tenant: name,
                    root: root.clone(),
                    reason: format!("is not usable inside the daemon's roots: {reason}"),
                });
            }
        }
        Some(
            WorkspaceRoots::new(&entry.workspace_roots).map_err(|err| TenantError::Root {
                tenant: name.clone(),
                root: entry.workspace_roots[0].clone(),
                reason: err.to_string(),
            })?,
        )
    };
    let tenant = Tenant {
        name,
        tools,
        roots,
        approvals: entry.approvals,
        max_concurrent_runs: entry
            .max_concurrent_runs
            .unwrap_or(DEFAULT_MAX_CONCURRENT_RUNS),
        max_concurrent_executions: entry
            .max_concurrent_executions
            .unwrap_or(DEFAULT_MAX_CONCURRENT_EXECUTIONS),
    };
    Ok((token, tenant))
}

#[cfg(test)]
#[path = "tenants_tests.rs"]
mod tests;
