//! Preparing one sandbox: everything its first process needs, made before the clone (see
//! `child.rs` for why nothing may be made after it).
//!
//! Mount sources are detached copies of the host trees (`open_tree`), made by the daemon,
//! which can open anything, with their flags already set (read-only, nosuid, nodev, noexec
//! for writable grants) and their propagation private, so that nothing mounted inside a
//! sandbox can reach the host. The sandbox's process only attaches them in its own mount
//! namespace. Sub-grants of the workspace are opened beneath the workspace and never through
//! a symlink that leads out of it: a link planted by an earlier call cannot widen a grant.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

use ::landlock::{AccessFs, BitFlags};

use super::cgroup::SandboxCgroup;
use super::child::{Args, InsideRule, Pause, PauseAt, Plan, Report, Step};
use super::identity::{self, Identities};
use super::landlock::{self, Ruleset};
use super::limits::{Rlimit, SandboxLimits};
use super::seccomp;
use super::sys::{self};
use super::view::{self, GUEST_DEV, GUEST_PROC, GUEST_TMP, Kind, View, depth_order};
use crate::changes::{IdMap, NOBODY};
use crate::profile::{Access, GUEST_WORKSPACE};

mod fds;

pub use fds::openat2;
use fds::{
    ancestors, clone_tree, cstring, dup, fstat, open_beneath, open_workspace, pipe, relative,
};

/// The sandbox's hostname (its own uts namespace).
pub const HOSTNAME: &str = "airlock";

/// The root tmpfs holds only mount points and symlinks.
const ROOT_TMPFS_BYTES: u64 = 1 << 20;
const ROOT_TMPFS_INODES: u64 = 4096;

/// `/dev` holds five device nodes and four symlinks.
const DEV_TMPFS_BYTES: u64 = 64 * 1024;
const DEV_TMPFS_INODES: u64 = 64;

/// The devices every sandbox gets, bound from the host.
pub const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// Symlinks of `/dev` that programs expect.
const DEV_LINKS: [(&str, &str); 4] = [
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Host devices, opened once when the engine starts.
#[derive(Debug)]
pub struct Devices {
    fds: Vec<(&'static str, OwnedFd)>,
}

impl Devices {
    pub fn open() -> std::io::Result<Devices> {
        let fds = DEVICES
            .iter()
            .map(|name| Ok((*name, view::open_path(&Path::new("/dev").join(name))?)))
            .collect::<std::io::Result<_>>()?;
        Ok(Devices { fds })
    }
}

/// What every call of one tool shares.
#[derive(Debug)]
pub struct Blueprint {
    pub view: View,
    pub program: CString,
    pub limits: SandboxLimits,
    pub rlimits: Vec<Rlimit>,
    pub landlock_abi: u32,
    pub cap_last: u32,
    /// The seccomp allow-list's family, and its compiled filter.
    pub family: seccomp::Family,
    pub seccomp: Arc<seccomp::Filter>,
    /// The host directory the root tmpfs is mounted on (in the sandbox's mount namespace).
    pub root: CString,
    pub devices: Arc<Devices>,
    /// The synthesized `/etc/passwd` and `/etc/group` (see `identity`).
    pub identities: Arc<Identities>,
    /// The egress proxy's port inside the sandbox, when the profile has a network
    /// allow-list: the launcher binds it and Landlock lets the tool connect to it alone.
    pub egress_port: Option<u16>,
    /// The profile lets what the tool writes be executed (see `Profile::executable_writes`).
    pub executable_writes: bool,
    /// The mapping that shows a root-owned workspace as the sandbox's own (see
    /// `changes::IdMap`); none when this host could not make it, and then a call that may
    /// write a root-owned workspace is refused.
    pub idmap: Option<Arc<IdMap>>,
}

impl Blueprint {
    /// Whether its sandboxes' network namespace may go to a later sandbox once they are gone:
    /// only without a network, where seccomp lets them make no IP socket (see `network.rs`).
    pub fn hands_on_network(&self) -> bool {
        match self.family {
            seccomp::Family::Local => self.egress_port.is_none(),
            seccomp::Family::Network => false,
        }
    }
}

/// What differs per call.
#[derive(Debug)]
pub struct CallSpec {
    pub workspace: Option<PathBuf>,
    /// The workspace as the call sees it, when that is not the workspace itself: the root of
    /// the call's overlay (see `changes`), whose writes reach the workspace only after the
    /// call. Its grants are mounted from here.
    pub root: Option<OwnedFd>,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    /// Build the sandbox but exit instead of executing the program (the host probe).
    pub dry_run: bool,
    /// Mount every grant read-only for this call, whatever the tool's profile grants: a
    /// preview run's calls may look but not touch.
    pub read_only: bool,
    /// Build the tool's next sandbox ahead once this one has started (see `spare`).
    pub build_ahead: bool,
    /// When the call must be over: the deadline keeper kills the sandbox then if the daemon
    /// has not (see `keeper`). `None` for what no call's deadline bounds: the start-up probe
    /// and hosted servers.
    pub deadline: Option<std::time::Instant>,
}

impl CallSpec {
    /// The access this call gets to a grant of `granted`.
    fn access(&self, granted: Access) -> Access {
        if self.read_only {
            Access::ReadOnly
        } else {
            granted
        }
    }
}

/// The daemon's ends of the sandbox's standard streams.
#[derive(Debug)]
pub struct ParentEnds {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// A plan and the descriptors it refers to, which must stay open until the first process
/// has executed the program.
pub struct Prepared {
    pub plan: Box<Plan>,
    /// The write end of the go-ahead pipe, taken by the launcher.
    pub go: Option<OwnedFd>,
    /// The read end of the status pipe, which the launcher waits on.
    pub status: OwnedFd,
    /// The status pipe's write end, for the first process alone: the launcher drops this
    /// copy right after the clone, so the pipe's end-of-file means the process is done.
    pub status_child: Option<OwnedFd>,
    pub ends: ParentEnds,
    pub uid: u32,
    pub gid: u32,
    /// Human descriptions of the plan's mount steps, for error messages.
    pub step_names: Vec<String>,
    pub rule_names: Vec<String>,
    /// What `plan.args` points to.
    _args: Box<Args>,
    _keep: Vec<OwnedFd>,
    _ruleset: OwnedFd,
}

impl Prepared {
    /// Sets the program's arguments and environment of a sandbox built ahead of its call,
    /// while it waits at `Stage::Parked` (it reads them only after the go-ahead).
    pub fn set_args(&mut self, argv: Vec<CString>, env: Vec<CString>) {
        let mut args = Box::new(Args::new(argv, env));
        self.plan.args.store(&mut *args, Ordering::SeqCst);
        self._args = args;
    }

    /// Has the first process join `group`, which must outlive the process's build.
    pub fn join(&mut self, group: &SandboxCgroup) {
        let plan = &mut self.plan;
        plan.cgroup_joins = group.join_fds().collect();
        plan.keep.extend(&plan.cgroup_joins);
        plan.keep.sort_unstable();
    }

    /// Makes the first process stop at `at` for a test (see `crate::pause`), reporting on
    /// `report` and waiting on `daemon`, a pidfd of the daemon; both are kept open here as
    /// long as the plan.
    pub fn pause_at(&mut self, at: PauseAt, line: String, report: OwnedFd, daemon: OwnedFd) {
        let plan = &mut self.plan;
        plan.keep.extend([report.as_raw_fd(), daemon.as_raw_fd()]);
        plan.keep.sort_unstable();
        plan.pause = Some(Pause {
            at,
            line: format!("{line}\n").into_bytes(),
            report: report.as_raw_fd(),
            daemon: daemon.as_raw_fd(),
        });
        self._keep.extend([report, daemon]);
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .finish_non_exhaustive()
    }
}

enum Source {
    Tree {
        fd: OwnedFd,
        is_dir: bool,
    },
    Symlink(PathBuf),
    Fs {
        fstype: &'static str,
        flags: libc::c_ulong,
        data: String,
    },
}

struct Entry {
    guest: PathBuf,
    source: Source,
    what: String,
}

/// Builds the plan of one sandbox.
pub fn prepare(blueprint: &Blueprint, call: CallSpec) -> Result<Prepared, String> {
    let mut keep: Vec<OwnedFd> = Vec::new();
    let mut ruleset = Ruleset::create(blueprint.landlock_abi)
        .map_err(|err| format!("cannot create a Landlock ruleset: {err}"))?;
    if let Some(port) = blueprint.egress_port {
        ruleset = ruleset.allow_tcp_connect(port).map_err(|err| {
            format!("cannot allow the egress proxy's port in the Landlock ruleset: {err}")
        })?;
    }
    let mut entries: Vec<Entry> = Vec::new();

    for mount in &blueprint.view.host {
        let source = match &mount.kind {
            Kind::Symlink(target) => Source::Symlink(target.clone()),
            Kind::Dir(fd) | Kind::File(fd) => {
                let is_dir = matches!(mount.kind, Kind::Dir(_));
                let access = call.access(mount.access);
                ruleset = ruleset
                    .allow(
                        fd.as_fd(),
                        rights(access, is_dir, blueprint.executable_writes),
                    )
                    .map_err(|err| {
                        format!(
                            "cannot add a Landlock rule for {}: {err}",
                            mount.host.display()
                        )
                    })?;
                let tree = clone_tree(
                    fd.as_fd(),
                    is_dir,
                    grant_flags(access, blueprint.executable_writes),
                    None,
                )
                .map_err(|err| {
                    format!(
                        "cannot prepare the mount of {}: {err}",
                        mount.host.display()
                    )
                })?;
                Source::Tree { fd: tree, is_dir }
            }
        };
        entries.push(Entry {
            guest: mount.guest.clone(),
            source,
            what: format!("{} (from {})", mount.guest.display(), mount.host.display()),
        });
    }

    let mut identity = (NOBODY, NOBODY);
    if let Some(workspace) = &call.workspace {
        let real = open_workspace(workspace)?;
        let meta = fstat(real.as_fd()).map_err(|err| {
            format!(
                "cannot inspect the workspace {}: {err}",
                workspace.display()
            )
        })?;
        identity = sandbox_identity(meta.st_uid, meta.st_gid);
        // Writing root's workspace as `nobody` takes an idmapped mount (see `changes::idmap`);
        // an overlay's root already shows the workspace that way.
        let owned_by_root = meta.st_uid == 0 || meta.st_gid == 0;
        let root = match &call.root {
            Some(overlay) => dup(overlay.as_fd())?,
            None => real,
        };
        for grant in &blueprint.view.workspace {
            let fd = if grant.sub.as_os_str().is_empty() {
                Some(dup(root.as_fd())?)
            } else {
                open_beneath(root.as_fd(), &grant.sub).map_err(|err| {
                    format!(
                        "the grant of $WORKSPACE/{} cannot be used in {}: {err}",
                        grant.sub.display(),
                        workspace.display()
                    )
                })?
            };
            // A sub-grant the workspace does not have grants nothing.
            let Some(fd) = fd else { continue };
            let is_dir = fstat(fd.as_fd())
                .map_err(|err| format!("cannot inspect $WORKSPACE/{}: {err}", grant.sub.display()))?
                .st_mode
                & libc::S_IFMT
                == libc::S_IFDIR;
            let access = call.access(grant.access);
            ruleset = ruleset
                .allow(
                    fd.as_fd(),
                    rights(access, is_dir, blueprint.executable_writes),
                )
                .map_err(|err| format!("cannot add a Landlock rule for the workspace: {err}"))?;
            let idmap = match (access, owned_by_root && call.root.is_none()) {
                (Access::ReadWrite, true) => Some(blueprint.idmap.as_deref().ok_or_else(|| {
                    "root owns the workspace, and this host could not make the id mapping that lets the sandbox write it".to_owned()
                })?),
                _ => None,
            };
            let tree = clone_tree(
                fd.as_fd(),
                is_dir,
                grant_flags(access, blueprint.executable_writes),
                idmap.map(IdMap::userns),
            )
            .map_err(|err| match idmap {
                Some(_) => format!(
                    "cannot idmap the workspace {} (root owns it, and the sandbox may only write it through an idmapped mount; does its filesystem support them?): {err}",
                    workspace.display()
                ),
                None => format!("cannot prepare the mount of the workspace: {err}"),
            })?;
            entries.push(Entry {
                guest: grant.guest(),
                source: Source::Tree { fd: tree, is_dir },
                what: format!("{} (the workspace)", grant.guest().display()),
            });
        }
    } else if blueprint.view.grants_workspace() {
        return Err("the profile grants the workspace, but the call names none".into());
    }
    let (uid, gid) = identity;

    // The engine's own mounts.
    let names = blueprint
        .identities
        .files(uid, gid)
        .map_err(|err| format!("cannot write the sandbox's /etc/passwd and /etc/group: {err}"))?;
    for (guest, fd) in [
        (identity::PASSWD, &names.passwd),
        (identity::GROUP, &names.group),
    ] {
        // Mounted by path before the pivot: a symlink there in a granted tree would take the
        // mount elsewhere and leave the grant's file in view.
        for mount in &blueprint.view.host {
            if let Ok(rest) = Path::new(guest).strip_prefix(&mount.guest) {
                let there = if rest.as_os_str().is_empty() {
                    mount.host.clone()
                } else {
                    mount.host.join(rest)
                };
                if there.symlink_metadata().is_ok_and(|meta| meta.is_symlink()) {
                    return Err(format!(
                        "{} is a symlink in the profile's grant of {}: the sandbox's own {guest} cannot be mounted over it",
                        there.display(),
                        mount.host.display()
                    ));
                }
            }
        }
        ruleset = ruleset
            .allow(fd.as_fd(), landlock::READ_FILE)
            .map_err(|err| format!("cannot add a Landlock rule for {guest}: {err}"))?;
        let tree = clone_tree(
            fd.as_fd(),
            false,
            sys::MOUNT_ATTR_RDONLY
                | sys::MOUNT_ATTR_NOSUID
                | sys::MOUNT_ATTR_NODEV
                | sys::MOUNT_ATTR_NOEXEC,
            None,
        )
        .map_err(|err| format!("cannot prepare {guest}: {err}"))?;
        entries.push(Entry {
            guest: PathBuf::from(guest),
            source: Source::Tree {
                fd: tree,
                is_dir: false,
            },
            what: format!("{guest} (the sandbox's user, named)"),
        });
    }
    entries.push(Entry {
        guest: PathBuf::from(GUEST_PROC),
        source: Source::Fs {
            fstype: "proc",
            flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            data: String::new(),
        },
        what: "/proc (the sandbox's processes)".into(),
    });
    entries.push(Entry {
        guest: PathBuf::from(GUEST_DEV),
        source: Source::Fs {
            fstype: "tmpfs",
            flags: libc::MS_NOSUID | libc::MS_NOEXEC,
            data: format!(
                "size={DEV_TMPFS_BYTES},nr_inodes={DEV_TMPFS_INODES},mode=0755,uid={uid},gid={gid}"
            ),
        },
        what: "/dev".into(),
    });
    for (name, fd) in &blueprint.devices.fds {
        ruleset = ruleset
            .allow(fd.as_fd(), landlock::READ_WRITE_FILE)
            .map_err(|err| format!("cannot add a Landlock rule for /dev/{name}: {err}"))?;
        let tree = clone_tree(
            fd.as_fd(),
            false,
            sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
            None,
        )
        .map_err(|err| format!("cannot prepare /dev/{name}: {err}"))?;
        entries.push(Entry {
            guest: Path::new(GUEST_DEV).join(name),
            source: Source::Tree {
                fd: tree,
                is_dir: false,
            },
            what: format!("/dev/{name}"),
        });
    }
    for (name, target) in DEV_LINKS {
        entries.push(Entry {
            guest: Path::new(GUEST_DEV).join(name),
            source: Source::Symlink(PathBuf::from(target)),
            what: format!("/dev/{name}"),
        });
    }
    entries.push(Entry {
        guest: PathBuf::from(GUEST_TMP),
        source: Source::Fs {
            fstype: "tmpfs",
            flags: if blueprint.executable_writes {
                libc::MS_NOSUID | libc::MS_NODEV
            } else {
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC
            },
            data: blueprint.limits.tmp_options(uid, gid),
        },
        what: format!("/tmp ({} bytes)", blueprint.limits.tmp_bytes),
    });
    // Parents before children; a stable sort keeps each path's own order.
    entries.sort_by(|a, b| depth_order(&a.guest, &b.guest));

    let mut steps = Vec::new();
    let mut step_names = Vec::new();
    let mut made: BTreeSet<PathBuf> = BTreeSet::new();
    for entry in entries {
        let relative = relative(&entry.guest);
        let mut push = |step: Step, name: String| {
            steps.push(step);
            step_names.push(name);
        };
        for ancestor in ancestors(&relative) {
            if made.insert(ancestor.clone()) {
                push(
                    Step::Mkdir(cstring(&ancestor)?),
                    format!("creating /{}", ancestor.display()),
                );
            }
        }
        let target = cstring(&relative)?;
        match entry.source {
            Source::Tree { fd, is_dir } => {
                if is_dir {
                    if made.insert(relative.clone()) {
                        push(
                            Step::Mkdir(target.clone()),
                            format!("creating {}", entry.guest.display()),
                        );
                    }
                } else {
                    push(
                        Step::Touch(target.clone()),
                        format!("creating {}", entry.guest.display()),
                    );
                }
                push(
                    Step::Attach {
                        tree: fd.as_raw_fd(),
                        target,
                    },
                    format!("mounting {}", entry.what),
                );
                keep.push(fd);
            }
            Source::Symlink(link_target) => push(
                Step::Symlink {
                    target: cstring(&link_target)?,
                    link: target,
                },
                format!("creating the symlink {}", entry.what),
            ),
            Source::Fs {
                fstype,
                flags,
                data,
            } => {
                if made.insert(relative.clone()) {
                    push(
                        Step::Mkdir(target.clone()),
                        format!("creating {}", entry.guest.display()),
                    );
                }
                push(
                    Step::Mount {
                        fstype: cstring(Path::new(fstype))?,
                        target,
                        flags,
                        data: CString::new(data)
                            .map_err(|_| "mount options contain a NUL byte".to_owned())?,
                    },
                    format!("mounting {}", entry.what),
                );
            }
        }
    }
    steps.push(Step::ReadOnly(cstring(&relative(Path::new(GUEST_DEV)))?));
    step_names.push("making /dev read-only".into());

    let inside = [
        ("/", landlock::LIST_ONLY),
        (GUEST_PROC, landlock::PROC),
        (GUEST_DEV, landlock::LIST_ONLY),
        (
            GUEST_TMP,
            rights(Access::ReadWrite, true, blueprint.executable_writes),
        ),
    ];
    let inside_rules = inside
        .iter()
        .map(|(path, rights)| {
            Ok(InsideRule {
                path: cstring(Path::new(path))?,
                rights: ruleset.mask(*rights),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let rule_names = inside.iter().map(|(path, _)| (*path).to_owned()).collect();
    let ruleset = ruleset
        .into_fd()
        .ok_or("Landlock made no ruleset on this host")?;

    let (stdin_child, stdin_parent) = pipe()?;
    let (stdout_parent, stdout_child) = pipe()?;
    let (stderr_parent, stderr_child) = pipe()?;
    let (go_child, go_parent) = pipe()?;
    let (status_parent, status_child) = pipe()?;
    let stdio = [
        stdin_child.as_raw_fd(),
        stdout_child.as_raw_fd(),
        stderr_child.as_raw_fd(),
    ];
    let go_raw = go_child.as_raw_fd();
    let status_raw = status_child.as_raw_fd();
    // What the first process keeps of the descriptors it is cloned with: the ends it reads
    // and writes, its Landlock ruleset and its mount trees. The stdio ends are not among
    // them: they are moved onto 0, 1 and 2 first.
    let mut kept_fds: Vec<RawFd> = steps
        .iter()
        .filter_map(|step| match step {
            Step::Attach { tree, .. } => Some(*tree),
            _ => None,
        })
        .chain([go_raw, status_raw, ruleset.as_raw_fd()])
        .collect();
    kept_fds.sort_unstable();
    kept_fds.dedup();
    keep.extend([stdin_child, stdout_child, stderr_child, go_child]);

    let cwd = if blueprint.view.grants_workspace() && call.workspace.is_some() {
        GUEST_WORKSPACE
    } else {
        "/"
    };
    let mut args = Box::new(Args::new(call.argv, call.env));
    let plan = Box::new(Plan {
        report: Report::default(),
        go: go_raw,
        status: status_raw,
        keep: kept_fds,
        cgroup_joins: Vec::new(),
        root: blueprint.root.clone(),
        root_options: CString::new(format!(
            "size={ROOT_TMPFS_BYTES},nr_inodes={ROOT_TMPFS_INODES},mode=0755,uid={uid},gid={gid}"
        ))
        .map_err(|_| "root options contain a NUL byte".to_owned())?,
        uid,
        gid,
        steps,
        landlock: ruleset.as_raw_fd(),
        inside_rules,
        hostname: CString::new(HOSTNAME).map_err(|_| "hostname".to_owned())?,
        stdio,
        cwd: CString::new(cwd).map_err(|_| "cwd".to_owned())?,
        rlimits: blueprint.rlimits.clone(),
        cap_last: blueprint.cap_last,
        seccomp: blueprint.seccomp.clone(),
        program: blueprint.program.clone(),
        args: AtomicPtr::new(&mut *args),
        park: false,
        exec: !call.dry_run,
        pause: None,
    });
    Ok(Prepared {
        plan,
        go: Some(go_parent),
        status: status_parent,
        status_child: Some(status_child),
        ends: ParentEnds {
            stdin: stdin_parent,
            stdout: stdout_parent,
            stderr: stderr_parent,
        },
        uid,
        gid,
        step_names,
        rule_names,
        _args: args,
        _keep: keep,
        _ruleset: ruleset,
    })
}

/// The host ids of a sandbox in a workspace owned by `owner`:`group`. The tool acts as the
/// workspace's owner (files it creates belong to them), never as root.
pub fn sandbox_identity(owner: u32, group: u32) -> (u32, u32) {
    (
        if owner == 0 { NOBODY } else { owner },
        if group == 0 { NOBODY } else { group },
    )
}

fn grant_flags(access: Access, executable_writes: bool) -> u64 {
    match access {
        Access::ReadOnly => sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        Access::ReadWrite if executable_writes => sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        Access::ReadWrite => {
            sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC
        }
    }
}

/// The Landlock rights of a grant: a writable one may execute only when the profile says so.
pub fn rights(access: Access, is_dir: bool, executable_writes: bool) -> BitFlags<AccessFs> {
    let granted = landlock::grant_rights(access, is_dir);
    match access {
        Access::ReadWrite if executable_writes => granted | landlock::EXECUTE,
        _ => granted,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
