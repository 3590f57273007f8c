//! The file-system view of a process tool: what its sandbox's root holds, and where each
//! guest path comes from on the host.
//!
//! The root is an empty tmpfs holding only mount points. The profile's host grants appear at
//! their own paths (a grant that is a symlink on the host, like `/bin -> usr/bin` on merged-usr
//! systems, is recreated as the same symlink, so it resolves inside the view); the tool's own
//! folder appears read-only at [`GUEST_TOOL`]; the call's workspace at `/workspace`; and the
//! engine mounts its own `/proc`, `/dev` and `/tmp`. A profile cannot grant those paths nor
//! anything below them, except below `/tmp`: a host path there (a test fixture, a cache)
//! is mounted inside the sandbox's own `/tmp` at its path.
//!
//! [`View::resolve`] walks a guest path the way the kernel will inside the sandbox, following
//! symlinks through the view rather than through the host, so that what the engine checks
//! when a tool loads (its program, the program's interpreter) is what the sandbox will run.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use crate::profile::{Access, GUEST_WORKSPACE, GrantPath, Profile};

/// Where the folder of the tool's `tool.toml` appears, read-only: scripts and data that come
/// with a tool live there.
pub const GUEST_TOOL: &str = "/tool";

/// Paths the engine mounts itself.
pub const GUEST_PROC: &str = "/proc";
pub const GUEST_DEV: &str = "/dev";
pub const GUEST_TMP: &str = "/tmp";

/// Paths whose whole subtree belongs to the engine.
const RESERVED: &[&str] = &[GUEST_PROC, GUEST_DEV, GUEST_TOOL, GUEST_WORKSPACE];

/// Symlinks followed while resolving one path before giving up, as the kernel does (40).
const MAX_SYMLINK_HOPS: u32 = 40;

/// What a host grant is on the host.
#[derive(Debug)]
pub enum Kind {
    /// A directory, bound with everything below it.
    Dir(OwnedFd),
    /// Any other file, bound alone.
    File(OwnedFd),
    /// A symlink, recreated with the same target.
    Symlink(PathBuf),
}

/// A host path that appears in every sandbox of a tool.
#[derive(Debug)]
pub struct HostMount {
    /// Where the sandbox sees it (the host path, or [`GUEST_TOOL`]).
    pub guest: PathBuf,
    pub host: PathBuf,
    pub access: Access,
    pub kind: Kind,
}

/// A workspace grant, resolved against each call's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceMount {
    /// Relative to the workspace; empty for the workspace itself.
    pub sub: PathBuf,
    pub access: Access,
}

impl WorkspaceMount {
    pub fn guest(&self) -> PathBuf {
        Path::new(GUEST_WORKSPACE).join(&self.sub)
    }
}

#[derive(Debug)]
pub struct View {
    /// Host grants and the tool folder, parents before children.
    pub host: Vec<HostMount>,
    /// Workspace grants, parents before children.
    pub workspace: Vec<WorkspaceMount>,
    /// Host grants that did not exist when the tool loaded; they grant nothing.
    pub absent: Vec<PathBuf>,
}

/// Where a guest path leads, for [`View::resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub guest: PathBuf,
    pub host: PathBuf,
    pub access: Access,
}

enum Located<'a> {
    /// Inside a mounted directory or file: this host path.
    Host(PathBuf, Access),
    /// A grant recreated as a symlink.
    Link(&'a Path),
    /// A directory of the root tmpfs that leads to mount points.
    Synthetic,
}

impl View {
    /// The view of a tool whose folder is `tool_dir`, under `profile`. Opens every host grant
    /// (`O_PATH`), so later changes on the host cannot swap what a sandbox binds.
    pub fn new(profile: &Profile, tool_dir: &Path) -> Result<View, String> {
        let mut host = Vec::new();
        let mut workspace = Vec::new();
        let mut absent = Vec::new();
        for grant in &profile.files {
            match &grant.path {
                GrantPath::Workspace(sub) => workspace.push(WorkspaceMount {
                    sub: sub.clone(),
                    access: grant.access,
                }),
                GrantPath::Host(path) => {
                    let reserved = RESERVED
                        .iter()
                        .find(|reserved| path.starts_with(reserved))
                        .or((path == Path::new(GUEST_TMP)).then_some(&GUEST_TMP));
                    if let Some(reserved) = reserved {
                        return Err(format!(
                            "the grant of {} (the process engine mounts its own {reserved} in every sandbox)",
                            path.display()
                        ));
                    }
                    match open_grant(path) {
                        Ok(Some(kind)) => host.push(HostMount {
                            guest: path.clone(),
                            host: path.clone(),
                            access: grant.access,
                            kind,
                        }),
                        Ok(None) => absent.push(path.clone()),
                        Err(err) => {
                            return Err(format!("the grant of {}: {err}", path.display()));
                        }
                    }
                }
            }
        }
        let tool = open_grant(tool_dir)
            .map_err(|err| format!("the tool's folder {}: {err}", tool_dir.display()))?;
        if let Some(kind @ Kind::Dir(_)) = tool {
            host.push(HostMount {
                guest: PathBuf::from(GUEST_TOOL),
                host: tool_dir.to_owned(),
                access: Access::ReadOnly,
                kind,
            });
        }
        host.sort_by(|a, b| depth_order(&a.guest, &b.guest));
        workspace.sort_by(|a, b| depth_order(&a.guest(), &b.guest()));
        Ok(View {
            host,
            workspace,
            absent,
        })
    }

    pub fn grants_workspace(&self) -> bool {
        !self.workspace.is_empty()
    }

    /// Resolves absolute guest path `path` inside the view, following symlinks as the
    /// sandbox's kernel will. Paths in the workspace are refused: it differs per call.
    pub fn resolve(&self, path: &Path) -> Result<Resolved, String> {
        if !path.is_absolute() {
            return Err(format!("{} is not an absolute path", path.display()));
        }
        let mut pending: Vec<PathBuf> = components_reversed(path);
        let mut current = PathBuf::from("/");
        let mut hops = 0;
        while let Some(component) = pending.pop() {
            let candidate = match component.as_os_str().to_str() {
                Some("..") => {
                    current.pop();
                    continue;
                }
                Some(".") => continue,
                _ => current.join(&component),
            };
            if candidate.starts_with(GUEST_WORKSPACE) {
                return Err(format!(
                    "{} is in the workspace, which differs from call to call",
                    path.display()
                ));
            }
            let target = match self.locate(&candidate) {
                None => {
                    return Err(format!(
                        "{} is not in the sandbox (no grant of the profile covers {})",
                        path.display(),
                        candidate.display()
                    ));
                }
                Some(Located::Synthetic) => None,
                Some(Located::Link(target)) => Some(target.to_owned()),
                Some(Located::Host(host, _)) => match std::fs::symlink_metadata(&host) {
                    Ok(meta) if meta.file_type().is_symlink() => Some(
                        std::fs::read_link(&host)
                            .map_err(|err| format!("cannot read {}: {err}", host.display()))?,
                    ),
                    Ok(_) => None,
                    Err(err) => return Err(format!("{}: {err}", path.display())),
                },
            };
            match target {
                None => current = candidate,
                Some(target) => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(format!("{}: too many levels of symlinks", path.display()));
                    }
                    if target.is_absolute() {
                        current = PathBuf::from("/");
                    }
                    pending.extend(components_reversed(&target));
                }
            }
        }
        match self.locate(&current) {
            Some(Located::Host(host, access)) => Ok(Resolved {
                guest: current,
                host,
                access,
            }),
            _ => Err(format!("{} is not a file in the sandbox", path.display())),
        }
    }

    fn locate(&self, guest: &Path) -> Option<Located<'_>> {
        let mount = self
            .host
            .iter()
            .filter(|mount| guest.starts_with(&mount.guest))
            .max_by_key(|mount| mount.guest.components().count());
        if let Some(mount) = mount {
            let rest = guest.strip_prefix(&mount.guest).ok()?;
            let empty = rest.as_os_str().is_empty();
            return match &mount.kind {
                Kind::Dir(_) => Some(Located::Host(mount.host.join(rest), mount.access)),
                Kind::File(_) if empty => Some(Located::Host(mount.host.clone(), mount.access)),
                Kind::Symlink(target) if empty => Some(Located::Link(target)),
                Kind::File(_) | Kind::Symlink(_) => None,
            };
        }
        let leads_to_mount = self.host.iter().any(|mount| mount.guest.starts_with(guest))
            || Path::new(GUEST_WORKSPACE).starts_with(guest);
        leads_to_mount.then_some(Located::Synthetic)
    }
}

/// Parents before children (fewer components first), then by path for a stable order.
pub fn depth_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    a.components()
        .count()
        .cmp(&b.components().count())
        .then_with(|| a.cmp(b))
}

fn components_reversed(path: &Path) -> Vec<PathBuf> {
    let mut components: Vec<PathBuf> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(PathBuf::from(name)),
            Component::ParentDir => Some(PathBuf::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    components.reverse();
    components
}

/// Opens a host grant without following a final symlink; `None` when it does not exist.
fn open_grant(path: &Path) -> std::io::Result<Option<Kind>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    if meta.file_type().is_symlink() {
        return Ok(Some(Kind::Symlink(std::fs::read_link(path)?)));
    }
    let fd = open_path(path)?;
    Ok(Some(if meta.is_dir() {
        Kind::Dir(fd)
    } else {
        Kind::File(fd)
    }))
}

/// An `O_PATH` descriptor of `path` (not following a final symlink).
pub fn open_path(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    Ok(file.into())
}

/// Whether `name` could be a single path component.
pub fn is_bare_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && OsStr::new(name) != "." && name != ".."
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{EnvPolicy, FileGrant, Limits, NetworkPolicy};
    use std::time::Duration;

    fn profile(grants: Vec<FileGrant>) -> Profile {
        Profile {
            name: "test".into(),
            description: String::new(),
            files: grants,
            network: NetworkPolicy::None,
            env: EnvPolicy::default(),
            limits: Limits {
                memory_bytes: 1 << 20,
                wall_time: Duration::from_secs(1),
                cpu_time: None,
                output_bytes: 1 << 20,
                processes: None,
                open_files: None,
                file_size_bytes: None,
                tmp_bytes: None,
            },
            executable_writes: false,
            change_exclusions: Vec::new(),
            change_rules: crate::changes::ChangeRules::default(),
            source: PathBuf::from("test.toml"),
        }
    }

    fn host(path: &Path, access: Access) -> FileGrant {
        FileGrant {
            path: GrantPath::Host(path.to_owned()),
            access,
        }
    }

    /// A fake host: `sys/usr/bin/tool`, `sys/bin -> usr/bin`, an absolute link into the
    /// view, a link out of it, and a tool folder.
    fn fixture() -> (tempfile::TempDir, View) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("sys/usr/bin")).expect("mkdir");
        std::fs::write(root.join("sys/usr/bin/tool"), "#!/bin/sh\n").expect("write");
        std::os::unix::fs::symlink("usr/bin", root.join("sys/bin")).expect("symlink");
        std::os::unix::fs::symlink(root.join("sys/usr/bin/tool"), root.join("sys/usr/bin/abs"))
            .expect("symlink");
        std::os::unix::fs::symlink("/etc/passwd", root.join("sys/usr/bin/out")).expect("symlink");
        std::fs::create_dir_all(root.join("tooldir")).expect("mkdir");
        std::fs::write(root.join("tooldir/run.py"), "print()").expect("write");
        let grants = vec![
            host(&root.join("sys/usr"), Access::ReadOnly),
            host(&root.join("sys/bin"), Access::ReadOnly),
            host(&root.join("missing"), Access::ReadOnly),
            FileGrant {
                path: GrantPath::Workspace(PathBuf::new()),
                access: Access::ReadWrite,
            },
        ];
        let view = View::new(&profile(grants), &root.join("tooldir")).expect("view");
        (dir, view)
    }

    #[test]
    fn symlinks_resolve_through_the_view() {
        let (dir, view) = fixture();
        let root = dir.path();
        assert_eq!(view.absent, vec![root.join("missing")]);
        assert!(
            matches!(view.host.iter().find(|m| m.guest == root.join("sys/bin")).map(|m| &m.kind), Some(Kind::Symlink(t)) if t == Path::new("usr/bin"))
        );
        let via_link = view.resolve(&root.join("sys/bin/tool")).expect("resolves");
        assert_eq!(via_link.guest, root.join("sys/usr/bin/tool"));
        assert_eq!(via_link.host, root.join("sys/usr/bin/tool"));
        assert_eq!(via_link.access, Access::ReadOnly);
        let absolute = view
            .resolve(&root.join("sys/usr/bin/abs"))
            .expect("resolves");
        assert_eq!(absolute.guest, root.join("sys/usr/bin/tool"));
        let tool = view.resolve(Path::new("/tool/run.py")).expect("resolves");
        assert_eq!(tool.host, root.join("tooldir/run.py"));
    }

    #[test]
    fn paths_outside_the_view_or_in_the_workspace_do_not_resolve() {
        let (dir, view) = fixture();
        let root = dir.path();
        let out = view
            .resolve(&root.join("sys/usr/bin/out"))
            .expect_err("leaves the view");
        assert!(out.contains("not in the sandbox"), "{out}");
        assert!(view.resolve(Path::new("/etc/passwd")).is_err());
        let ws = view
            .resolve(Path::new("/workspace/run.sh"))
            .expect_err("workspace");
        assert!(ws.contains("workspace"), "{ws}");
        assert!(view.resolve(Path::new("relative")).is_err());
        let dotdot = view
            .resolve(&root.join("sys/usr/bin/../../../../etc/passwd"))
            .expect_err("climbs out");
        assert!(dotdot.contains("not in the sandbox"), "{dotdot}");
    }

    #[test]
    fn the_engine_paths_cannot_be_granted() {
        for reserved in [
            "/proc",
            "/proc/1",
            "/dev/shm",
            "/tmp",
            "/tool",
            "/workspace/x",
            "/workspace",
        ] {
            let err = View::new(
                &profile(vec![host(Path::new(reserved), Access::ReadOnly)]),
                Path::new("/nonexistent"),
            )
            .expect_err("reserved");
            assert!(err.contains("mounts its own"), "{reserved}: {err}");
        }
    }

    #[test]
    fn parents_come_before_children() {
        let mut paths = vec![
            PathBuf::from("/workspace/a/b"),
            PathBuf::from("/usr"),
            PathBuf::from("/workspace"),
            PathBuf::from("/etc/ld.so.cache"),
        ];
        paths.sort_by(|a, b| depth_order(a, b));
        assert_eq!(
            paths,
            ["/usr", "/workspace", "/etc/ld.so.cache", "/workspace/a/b"].map(PathBuf::from)
        );
    }
}
