//! What the launcher and the sandbox's first process share: the [`Plan`] the launcher
//! prepares before the clone, the [`Report`] the process writes back through shared memory
//! (the [`Stage`] it reached or failed at), and the bytes of the status and go pipes.

use std::ffi::{CString, c_char};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

use super::super::limits::Rlimit;
use super::super::seccomp::Filter;

/// Where the first process was when something failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stage {
    Started = 0,
    ParentDeathSignal,
    Descriptors,
    WaitForParent,
    Cgroup,
    CgroupNamespace,
    Session,
    PrivateMounts,
    RootMount,
    Identity,
    Handshake,
    Mount,
    PivotRoot,
    RootReadOnly,
    Hostname,
    LandlockRule,
    WorkingDirectory,
    Rlimit,
    Capabilities,
    NoNewPrivs,
    Landlock,
    Seccomp,
    Signals,
    /// A sandbox built ahead of its call waits for it, fully confined.
    Parked,
    Exec,
    /// A dry run reached the point where it would execute the program.
    Ready,
}

impl Stage {
    pub(super) const ALL: [Stage; 26] = [
        Stage::Started,
        Stage::ParentDeathSignal,
        Stage::Descriptors,
        Stage::WaitForParent,
        Stage::Cgroup,
        Stage::CgroupNamespace,
        Stage::Session,
        Stage::PrivateMounts,
        Stage::RootMount,
        Stage::Identity,
        Stage::Handshake,
        Stage::Mount,
        Stage::PivotRoot,
        Stage::RootReadOnly,
        Stage::Hostname,
        Stage::LandlockRule,
        Stage::WorkingDirectory,
        Stage::Rlimit,
        Stage::Capabilities,
        Stage::NoNewPrivs,
        Stage::Landlock,
        Stage::Seccomp,
        Stage::Signals,
        Stage::Parked,
        Stage::Exec,
        Stage::Ready,
    ];

    pub(super) fn from_u32(value: u32) -> Stage {
        Stage::ALL
            .get(value as usize)
            .copied()
            .unwrap_or(Stage::Started)
    }

    /// What the process was doing, for an error message that names the layer.
    pub fn describe(self) -> &'static str {
        match self {
            Stage::Started => "starting the sandbox's first process",
            Stage::ParentDeathSignal => "setting the parent-death signal",
            Stage::Descriptors => "closing the daemon's descriptors",
            Stage::WaitForParent => "waiting for the daemon to map the sandbox's user ids",
            Stage::Cgroup => "joining the sandbox's cgroup",
            Stage::CgroupNamespace => "entering a new cgroup namespace",
            Stage::Session => "starting a new session (setsid)",
            Stage::PrivateMounts => "making the mount namespace private",
            Stage::RootMount => "mounting the sandbox's root tmpfs",
            Stage::Identity => "switching to the sandbox's unprivileged uid and gid",
            Stage::Handshake => {
                "confirming the daemon is alive after arming the parent-death signal"
            }
            Stage::Mount => "building the mount view",
            Stage::PivotRoot => "pivoting into the new root and detaching the old one",
            Stage::RootReadOnly => "making the new root read-only",
            Stage::Hostname => "setting the hostname (uts namespace)",
            Stage::LandlockRule => "adding a Landlock rule",
            Stage::WorkingDirectory => "changing to the working directory",
            Stage::Rlimit => "setting a resource limit (setrlimit)",
            Stage::Capabilities => "dropping all capabilities",
            Stage::NoNewPrivs => "setting no_new_privs",
            Stage::Landlock => "enforcing the Landlock ruleset",
            Stage::Seccomp => "installing the seccomp filter",
            Stage::Signals => "unblocking signals",
            Stage::Parked => "waiting, built ahead, for its call",
            Stage::Exec => "executing the program",
            Stage::Ready => "ready to execute the program",
        }
    }
}

/// What the first process reports back through shared memory.
#[derive(Debug, Default)]
pub struct Report {
    stage: AtomicU32,
    index: AtomicU32,
    errno: AtomicI32,
}

/// A failure the first process reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub stage: Stage,
    /// The mount step, rule or rlimit at fault, for stages with several.
    pub index: u32,
    pub errno: i32,
}

impl Report {
    pub(super) fn reach(&self, stage: Stage) {
        self.stage.store(stage as u32, Ordering::SeqCst);
    }

    pub(super) fn fail(&self, stage: Stage, index: u32, errno: i32) {
        self.index.store(index, Ordering::SeqCst);
        self.errno.store(errno, Ordering::SeqCst);
        self.stage.store(stage as u32, Ordering::SeqCst);
    }

    /// The last stage reached, and the failure if there was one.
    pub fn read(&self) -> (Stage, Option<Failure>) {
        let stage = Stage::from_u32(self.stage.load(Ordering::SeqCst));
        let errno = self.errno.load(Ordering::SeqCst);
        let failure = (errno != 0).then(|| Failure {
            stage,
            index: self.index.load(Ordering::SeqCst),
            errno,
        });
        (stage, failure)
    }
}

/// One step of building the mount view, relative to the new root (the working directory).
#[derive(Debug)]
pub enum Step {
    Mkdir(CString),
    /// An empty file to bind a file onto.
    Touch(CString),
    Symlink {
        target: CString,
        link: CString,
    },
    /// Attaches a detached mount tree (`open_tree`) the launcher prepared.
    Attach {
        tree: RawFd,
        target: CString,
    },
    Mount {
        fstype: CString,
        target: CString,
        flags: libc::c_ulong,
        data: CString,
    },
    ReadOnly(CString),
}

/// A Landlock rule on a path that exists only inside the sandbox (its root, `/proc`, `/dev`,
/// `/tmp`), added once the view is built.
#[derive(Debug)]
pub struct InsideRule {
    pub path: CString,
    pub rights: u64,
}

/// Where a test stops the first process (see `crate::pause`): debug builds only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseAt {
    Clone,
    Identity,
    Mounts,
    Pivot,
    Landlock,
    Seccomp,
    Exec,
}

/// A test's pause: where, the line to report it with, and what to wait on.
#[derive(Debug)]
pub struct Pause {
    pub at: PauseAt,
    /// The line written to `report` on arrival.
    pub line: Vec<u8>,
    /// A copy of the daemon's standard error, where tests read the line.
    pub report: RawFd,
    /// A pidfd of the daemon: readable once it has died, which ends the pause.
    pub daemon: RawFd,
}

/// Everything the first process needs, prepared by the launcher.
#[derive(Debug)]
pub struct Plan {
    pub report: Report,
    /// Read end of the pipe the launcher writes to: once the ids are mapped, and once to
    /// answer the handshake.
    pub go: RawFd,
    /// Write end of the pipe the launcher waits on: the handshake byte goes here, and its
    /// closing (at `execve`, or at exit) tells the launcher the process is done.
    pub status: RawFd,
    /// Every descriptor above 2 the process uses, ascending; all others are closed first.
    pub keep: Vec<RawFd>,
    /// The file of each of the sandbox's groups that moves a process in (`tasks` in a v1
    /// hierarchy, `cgroup.procs` in v2), opened by the launcher. The process writes `0`
    /// (itself) to each: a v1 hierarchy then moves the one thread without the global
    /// lock that moving a whole thread group by pid takes, whose write side waits for an
    /// RCU grace period (3 to 14 ms measured on a 2-core VM, against 15 µs this way).
    pub cgroup_joins: Vec<RawFd>,
    /// The host directory the root tmpfs is mounted on.
    pub root: CString,
    pub root_options: CString,
    pub uid: u32,
    pub gid: u32,
    pub steps: Vec<Step>,
    pub landlock: RawFd,
    pub inside_rules: Vec<InsideRule>,
    pub hostname: CString,
    /// The child's ends of stdin, stdout and stderr (all above 2).
    pub stdio: [RawFd; 3],
    pub cwd: CString,
    pub rlimits: Vec<Rlimit>,
    pub cap_last: u32,
    pub seccomp: Arc<Filter>,
    pub program: CString,
    /// What the program is executed with: set before the clone, or, for a sandbox built
    /// ahead of its call, just before the go-ahead that releases it. Its owner (the
    /// launcher's `Prepared`) keeps it alive until the process has executed the program.
    pub args: AtomicPtr<Args>,
    /// Built ahead of its call: wait at [`Stage::Parked`] for a second go-ahead.
    pub park: bool,
    /// False for a dry run that builds the sandbox and exits without executing anything.
    pub exec: bool,
    /// Set only by a test, in a debug build.
    pub pause: Option<Pause>,
}

/// A program's argument and environment vectors, ready for `execve`.
#[derive(Debug)]
pub struct Args {
    /// Null-terminated arrays of pointers into the two storages below.
    pub(super) argv: Vec<*const c_char>,
    pub(super) envp: Vec<*const c_char>,
    _argv_storage: Vec<CString>,
    _env_storage: Vec<CString>,
}

impl Args {
    pub fn new(argv: Vec<CString>, env: Vec<CString>) -> Args {
        fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
            strings
                .iter()
                .map(|string| string.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        }
        Args {
            argv: null_terminated(&argv),
            envp: null_terminated(&env),
            _argv_storage: argv,
            _env_storage: env,
        }
    }
}

/// The byte the process writes to `status` once its parent-death signal is armed for good.
pub const HANDSHAKE: u8 = b'a';

/// The byte a sandbox built ahead writes to `status` once it waits for its call.
pub const PARKED: u8 = b'p';

/// The byte the launcher writes to `go`, to start and to answer the handshake.
pub const GO: u8 = b'g';
