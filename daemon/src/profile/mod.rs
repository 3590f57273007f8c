//! Sandbox profiles: named policies of files, network, environment and limits, loaded from
//! `sandbox-profiles/*.toml`. Strict by default: what a profile does not grant is denied.
//!
//! A profile only says what is allowed; each engine checks when it loads a tool that it can
//! enforce everything the tool's profile asks for on this host, and refuses the tool otherwise.

mod load;
mod network;
mod size;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use load::Profiles;
pub use network::{HostMatch, HostPattern, NetworkPolicy};
pub use size::ByteSize;

/// Where the workspace appears inside every sandbox, for both engines.
pub const GUEST_WORKSPACE: &str = "/workspace";

/// The placeholder for the call's workspace in file grants.
pub const WORKSPACE_VAR: &str = "$WORKSPACE";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub files: Vec<FileGrant>,
    pub network: NetworkPolicy,
    pub env: EnvPolicy,
    pub limits: Limits,
    /// What the tool writes in its writable grants and `/tmp` may be executed (a build's
    /// test binaries, a script it generates). Off by default: a writable grant is `noexec`.
    pub executable_writes: bool,
    /// Paths (gitignore syntax) whose changes are applied but recorded by digest only:
    /// generated trees nobody wants back byte for byte (see `changes::exclude`).
    pub change_exclusions: Vec<String>,
    /// What a call's change set may hold and how it lands (`[changes]`: bounds, umask,
    /// sticky directories; see `changes::bounds`).
    pub change_rules: crate::changes::ChangeRules,
    /// The file the profile was read from.
    pub source: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantPath {
    /// `$WORKSPACE` or `$WORKSPACE/sub/dir`: relative to the call's workspace.
    Workspace(PathBuf),
    /// An absolute path on the host, seen at the same path inside the sandbox.
    Host(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileGrant {
    pub path: GrantPath,
    pub access: Access,
}

/// A file grant made concrete for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedGrant {
    pub host: PathBuf,
    pub guest: PathBuf,
    pub access: Access,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// Variables copied from the daemon's environment, by name, when set there.
    pub pass: Vec<String>,
    /// Variables set to fixed values; these win over passed ones.
    pub set: BTreeMap<String, String>,
}

/// Resource limits of one call. `None` means the profile sets no such limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: u64,
    pub wall_time: Duration,
    pub cpu_time: Option<Duration>,
    pub output_bytes: u64,
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    pub file_size_bytes: Option<u64>,
    pub tmp_bytes: Option<u64>,
}

/// The limits a profile may set, for engines to say which ones they cannot enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    Memory,
    WallTime,
    CpuTime,
    Output,
    Processes,
    OpenFiles,
    FileSize,
    Tmp,
}

impl LimitKind {
    /// The key that sets this limit in a profile's `[limits]` table.
    pub fn key(self) -> &'static str {
        match self {
            LimitKind::Memory => "memory",
            LimitKind::WallTime => "wall_time_ms",
            LimitKind::CpuTime => "cpu_time_ms",
            LimitKind::Output => "output",
            LimitKind::Processes => "processes",
            LimitKind::OpenFiles => "open_files",
            LimitKind::FileSize => "file_size",
            LimitKind::Tmp => "tmp",
        }
    }
}

impl Limits {
    /// The optional limits this profile sets (memory, wall time and output are always set).
    pub fn optional_set(&self) -> Vec<LimitKind> {
        [
            (self.cpu_time.is_some(), LimitKind::CpuTime),
            (self.processes.is_some(), LimitKind::Processes),
            (self.open_files.is_some(), LimitKind::OpenFiles),
            (self.file_size_bytes.is_some(), LimitKind::FileSize),
            (self.tmp_bytes.is_some(), LimitKind::Tmp),
        ]
        .into_iter()
        .filter_map(|(set, kind)| set.then_some(kind))
        .collect()
    }
}

/// Why a profile cannot be applied to a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("profile `{profile}` grants the workspace, and the request names none")]
    WorkspaceRequired { profile: String },
}

impl Profile {
    /// Whether any file grant refers to the call's workspace.
    pub fn grants_workspace(&self) -> bool {
        self.files
            .iter()
            .any(|grant| matches!(grant.path, GrantPath::Workspace(_)))
    }

    /// The file grants for a call in `workspace`: host paths and where the sandbox sees them.
    pub fn resolve_files(
        &self,
        workspace: Option<&Path>,
    ) -> Result<Vec<ResolvedGrant>, GrantError> {
        self.files
            .iter()
            .map(|grant| {
                let (host, guest) = match &grant.path {
                    GrantPath::Workspace(sub) => {
                        let root = workspace.ok_or_else(|| GrantError::WorkspaceRequired {
                            profile: self.name.clone(),
                        })?;
                        // `join("")` would append a slash; the bare workspace is itself.
                        if sub.as_os_str().is_empty() {
                            (root.to_owned(), PathBuf::from(GUEST_WORKSPACE))
                        } else {
                            (root.join(sub), Path::new(GUEST_WORKSPACE).join(sub))
                        }
                    }
                    GrantPath::Host(path) => (path.clone(), path.clone()),
                };
                Ok(ResolvedGrant {
                    host,
                    guest,
                    access: grant.access,
                })
            })
            .collect()
    }

    /// The same profile with every file grant read-only.
    pub fn read_only(&self) -> Profile {
        let mut profile = self.clone();
        for grant in &mut profile.files {
            grant.access = Access::ReadOnly;
        }
        profile
    }

    /// The environment of a call: the passed variables the daemon has, then the fixed ones.
    pub fn resolve_env(&self, lookup: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
        let mut env: BTreeMap<String, String> = self
            .env
            .pass
            .iter()
            .filter_map(|name| lookup(name).map(|value| (name.clone(), value)))
            .collect();
        env.extend(self.env.set.clone());
        env.into_iter().collect()
    }
}
