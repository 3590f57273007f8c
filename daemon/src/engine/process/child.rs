//! The sandbox's first process, from `clone` to `execve`.
//!
//! It is cloned with `CLONE_VM` from a launcher thread of the daemon, into new user, pid,
//! mount, uts (and net and ipc) namespaces, and runs on a stack the launcher owns, reading a
//! [`Plan`] the launcher prepared. Sharing the daemon's memory is what makes the spawn cheap
//! (no page tables are copied), and it is why this code obeys strict rules:
//!
//! - only raw system calls ([`sys::syscall`]): no libc, so no `errno` of another thread is
//!   written and no lock of the daemon is taken;
//! - no allocation and nothing that could panic: every path, buffer and structure it needs
//!   is in the plan, built by the launcher before the clone;
//! - all signals stay blocked until just before `execve`, and every handler is reset first,
//!   so no handler of the daemon ever runs on this stack;
//! - a failure is written to the plan's [`Report`] (stage, step, errno) before the process
//!   exits, for the launcher to turn into a message naming the layer that failed.
//!
//! Nothing may outlive the daemon, whenever it dies. The clone gets a copy of the daemon's
//! descriptor table (the listening socket, the store, every pipe), so the first two things
//! the process does are to arm its parent-death signal and to keep only the descriptors the
//! plan lists ([`Plan::keep`]), with the sandbox's own pipes as stdin, stdout and stderr.
//! From then on the daemon's end of each pipe is held by the daemon alone: if it dies, the
//! process reads end-of-file where it waits for a go-ahead. Switching to the sandbox's ids
//! clears the parent-death signal (the kernel does so on any change of effective ids), so it
//! is armed again right after, and the process then confirms the daemon is alive through a
//! handshake: it writes one byte to the status pipe and waits for the launcher's answer.
//! An answer proves the launcher thread — the parent whose death sends the signal — lived
//! after the signal was armed; no answer (end-of-file) means it is gone, and the process
//! exits. A check of the daemon's liveness by polling alone could not prove that: a dying
//! daemon's threads exit one by one, and the parent can be gone while the process lingers.
//!
//! The order matters: the launcher writes the id maps while the process waits on `go`; the
//! process then joins its cgroups itself, before its cgroup namespace is rooted there (see
//! [`Plan::cgroup_joins`]); mounts need the capabilities the new user namespace grants;
//! Landlock and seccomp need `no_new_privs`; capabilities are dropped last, after the
//! operations that need them; nothing may be mounted after the root is pivoted and sealed.

use std::ffi::{CStr, CString, c_char, c_int, c_long, c_void};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

use super::limits::Rlimit;
use super::seccomp::Filter;
use super::sys::{self, CapData, CapHeader, KernelSigaction, LandlockPathBeneathAttr, MountAttr};

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
    OomScore,
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
    const ALL: [Stage; 27] = [
        Stage::Started,
        Stage::ParentDeathSignal,
        Stage::Descriptors,
        Stage::WaitForParent,
        Stage::Cgroup,
        Stage::CgroupNamespace,
        Stage::Session,
        Stage::OomScore,
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

    fn from_u32(value: u32) -> Stage {
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
            Stage::OomScore => "setting the OOM score",
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
    fn reach(&self, stage: Stage) {
        self.stage.store(stage as u32, Ordering::SeqCst);
    }

    fn fail(&self, stage: Stage, index: u32, errno: i32) {
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
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
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

const EMPTY: &[u8] = b"\0";
/// Written to a cgroup's `tasks` or `cgroup.procs`: the writing process.
const SELF: &[u8] = b"0";
const PROC_OOM_SCORE: &[u8] = b"/proc/self/oom_score_adj\0";
/// The sandbox is the first thing the kernel should kill when the host runs out of memory.
const OOM_SCORE_MAX: &[u8] = b"1000";
const TMPFS: &[u8] = b"tmpfs\0";
const SPARE_NAME: &[u8] = b"airlock-spare\0";
const ROOT: &[u8] = b"/\0";
const DOT: &[u8] = b".\0";

type Outcome = Result<(), (Stage, u32, i32)>;

fn ptr(bytes: &[u8]) -> usize {
    bytes.as_ptr() as usize
}

fn check(stage: Stage, ret: isize) -> Outcome {
    check_at(stage, 0, ret)
}

fn check_at(stage: Stage, index: u32, ret: isize) -> Outcome {
    match sys::result(ret) {
        Ok(_) => Ok(()),
        Err(errno) => Err((stage, index, errno)),
    }
}

/// Raw system call; see [`sys::syscall`].
///
/// # Safety
///
/// As for [`sys::syscall`].
unsafe fn raw(nr: c_long, args: [usize; 6]) -> isize {
    // SAFETY: forwarded to the caller.
    unsafe { sys::syscall(nr, args) }
}

fn exit_group(code: i32) -> ! {
    loop {
        // SAFETY: exit_group takes an int and does not return.
        unsafe {
            raw(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]);
        }
    }
}

/// The entry point `clone` starts the first process at. `plan` points to a [`Plan`] that
/// stays alive and unchanged until this process has executed the program or exited: the
/// launcher, its only caller, waits for either.
pub(super) extern "C" fn entry(plan: *mut c_void) -> c_int {
    // SAFETY: the launcher passes a live Plan (see above).
    let plan = unsafe { &*(plan as *const Plan) };
    match build(plan) {
        Ok(()) => {
            plan.report.reach(Stage::Ready);
            exit_group(0)
        }
        Err((stage, index, errno)) => {
            plan.report.fail(stage, index, errno);
            exit_group(127)
        }
    }
}

fn build(plan: &Plan) -> Outcome {
    plan.report.reach(Stage::Started);
    pause(plan, PauseAt::Clone);

    // If the launcher thread dies from here on, so does this process; and nothing of the
    // daemon's but the plan's descriptors stays open in it.
    plan.report.reach(Stage::ParentDeathSignal);
    arm_parent_death_signal()?;
    plan.report.reach(Stage::Descriptors);
    keep_only_planned_descriptors(plan)?;
    reset_signal_handlers();

    plan.report.reach(Stage::WaitForParent);
    wait_for_go(plan, Stage::WaitForParent)?;

    join_cgroups(plan)?;
    // The cgroup namespace is rooted at the group just joined.
    check(
        Stage::CgroupNamespace,
        integer_call(libc::SYS_unshare, [libc::CLONE_NEWCGROUP as usize, 0, 0]),
    )?;
    check(Stage::Session, integer_call(libc::SYS_setsid, [0; 3]))?;
    set_oom_score()?;
    make_mounts_private()?;
    mount_root(plan)?;
    check(Stage::RootMount, chdir(&plan.root))?;

    // From here on, files are created as the sandbox's ids (which the new user namespace
    // maps) and paths are relative to the new root, so no host directory above it is
    // looked up again.
    become_sandbox_ids(plan.uid as usize, plan.gid as usize)?;
    pause(plan, PauseAt::Identity);
    // The id change cleared the parent-death signal: arm it again, then prove the parent
    // was still there afterwards (see the module docs).
    arm_parent_death_signal()?;
    plan.report.reach(Stage::Handshake);
    handshake(plan)?;

    pause(plan, PauseAt::Mounts);
    for (index, step) in plan.steps.iter().enumerate() {
        run_step(step).map_err(|errno| (Stage::Mount, index as u32, errno))?;
    }
    pause(plan, PauseAt::Pivot);
    pivot_into_working_directory()?;
    check(Stage::RootReadOnly, make_read_only(ROOT))?;
    check(Stage::Hostname, set_hostname(&plan.hostname))?;
    for (index, rule) in plan.inside_rules.iter().enumerate() {
        add_inside_rule(plan.landlock, rule)
            .map_err(|errno| (Stage::LandlockRule, index as u32, errno))?;
    }

    // Whatever the kept descriptors are, none survives the exec.
    check(
        Stage::Descriptors,
        integer_call(
            libc::SYS_close_range,
            [3, u32::MAX as usize, libc::CLOSE_RANGE_CLOEXEC as usize],
        ),
    )?;
    check(Stage::WorkingDirectory, chdir(&plan.cwd))?;
    for (index, limit) in plan.rlimits.iter().enumerate() {
        check_at(Stage::Rlimit, index as u32, set_rlimit(limit))?;
    }

    drop_capability_bounds(plan.cap_last)?;
    check(
        Stage::NoNewPrivs,
        integer_call(libc::SYS_prctl, [libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0]),
    )?;
    pause(plan, PauseAt::Landlock);
    check(
        Stage::Landlock,
        integer_call(
            libc::SYS_landlock_restrict_self,
            [plan.landlock as usize, 0, 0],
        ),
    )?;
    check(Stage::Capabilities, clear_capabilities())?;
    pause(plan, PauseAt::Seccomp);
    for (index, program) in plan.seccomp.programs().iter().enumerate() {
        check_at(Stage::Seccomp, index as u32, install_filter(program))?;
    }
    if plan.park {
        // Everything but the program is in place, and the filter already holds: what the
        // process does from here until its call is what any tool may do.
        plan.report.reach(Stage::Parked);
        name_spare();
        write_status(plan, PARKED, Stage::Parked)?;
        wait_for_go(plan, Stage::Parked)?;
    }
    check(Stage::Signals, unblock_signals())?;
    if !plan.exec {
        return Ok(());
    }
    pause(plan, PauseAt::Exec);
    plan.report.reach(Stage::Exec);
    // Set before the clone, or before the go-ahead just read.
    let args = plan.args.load(Ordering::SeqCst);
    if args.is_null() {
        return Err((Stage::Exec, 0, libc::EINVAL));
    }
    // SAFETY: a pointer the launcher stored to an `Args` it keeps alive until this process
    // has executed the program or exited (see `Plan::args`).
    let args = unsafe { &*args };
    check(Stage::Exec, execute(&plan.program, args))
}

/// A system call whose arguments are all integers (descriptor numbers, flags, ids).
fn integer_call(nr: c_long, args: [usize; 3]) -> isize {
    // SAFETY: no argument is a pointer, so the kernel reads and writes no memory of ours;
    // every caller passes a call whose effects on this process are the point.
    unsafe { raw(nr, [args[0], args[1], args[2], 0, 0, 0]) }
}

fn chdir(path: &CStr) -> isize {
    // SAFETY: a NUL-terminated string of the plan or a constant, alive for the call.
    unsafe { raw(libc::SYS_chdir, [path.as_ptr() as usize, 0, 0, 0, 0, 0]) }
}

/// Nothing mounted in this namespace propagates back to the daemon's, or the other way.
fn make_mounts_private() -> Outcome {
    let flags = (libc::MS_REC | libc::MS_PRIVATE) as usize;
    // SAFETY: the target is a constant NUL-terminated string; the other pointers are null,
    // which a propagation change allows.
    let ret = unsafe { raw(libc::SYS_mount, [0, ptr(ROOT), 0, flags, 0, 0]) };
    check(Stage::PrivateMounts, ret)
}

/// The tmpfs the sandbox's root is built in, on the plan's host directory.
fn mount_root(plan: &Plan) -> Outcome {
    let flags = (libc::MS_NOSUID | libc::MS_NODEV) as usize;
    // SAFETY: every pointer is a NUL-terminated string of the plan or a constant.
    let ret = unsafe {
        raw(
            libc::SYS_mount,
            [
                ptr(TMPFS),
                plan.root.as_ptr() as usize,
                ptr(TMPFS),
                flags,
                plan.root_options.as_ptr() as usize,
                0,
            ],
        )
    };
    check(Stage::RootMount, ret)
}

/// Moves this process into its groups, then closes the files that did it: the program
/// never gets a way to move itself elsewhere.
fn join_cgroups(plan: &Plan) -> Outcome {
    for (index, &fd) in plan.cgroup_joins.iter().enumerate() {
        // SAFETY: writes one byte of a constant to a descriptor of the plan.
        let wrote = unsafe { raw(libc::SYS_write, [fd as usize, ptr(SELF), 1, 0, 0, 0]) };
        check_at(Stage::Cgroup, index as u32, wrote)?;
        check_at(
            Stage::Cgroup,
            index as u32,
            integer_call(libc::SYS_close, [fd as usize, 0, 0]),
        )?;
    }
    Ok(())
}

/// Switches to the sandbox's unprivileged uid and gid, with no supplementary groups.
fn become_sandbox_ids(uid: usize, gid: usize) -> Outcome {
    check(
        Stage::Identity,
        integer_call(libc::SYS_setgroups, [0, 0, 0]),
    )?;
    check(
        Stage::Identity,
        integer_call(libc::SYS_setresgid, [gid, gid, gid]),
    )?;
    check(
        Stage::Identity,
        integer_call(libc::SYS_setresuid, [uid, uid, uid]),
    )
}

/// Writes the handshake byte and waits for the launcher's answer (see the module docs).
fn handshake(plan: &Plan) -> Outcome {
    write_status(plan, HANDSHAKE, Stage::Handshake)?;
    wait_for_go(plan, Stage::Handshake)
}

/// Names the waiting process `airlock-spare` (its name was the launcher thread's), so that
/// `ps` and tests tell a spare from a sandbox that runs or is being built.
fn name_spare() {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes, a constant.
    unsafe {
        raw(
            libc::SYS_prctl,
            [libc::PR_SET_NAME as usize, ptr(SPARE_NAME), 0, 0, 0, 0],
        );
    }
}

/// Writes one byte to the launcher on the status pipe.
fn write_status(plan: &Plan, byte: u8, stage: Stage) -> Outcome {
    let byte = [byte];
    // SAFETY: writes one byte from a local array.
    let wrote = unsafe {
        raw(
            libc::SYS_write,
            [plan.status as usize, byte.as_ptr() as usize, 1, 0, 0, 0],
        )
    };
    if sys::result(wrote) != Ok(1) {
        return Err((stage, 0, libc::EPIPE));
    }
    Ok(())
}

/// Makes the working directory (the built root) the root, detaches the old one, and moves
/// to the new `/`.
fn pivot_into_working_directory() -> Outcome {
    // SAFETY: constant NUL-terminated paths.
    let pivoted = unsafe { raw(libc::SYS_pivot_root, [ptr(DOT), ptr(DOT), 0, 0, 0, 0]) };
    check(Stage::PivotRoot, pivoted)?;
    let detach = libc::MNT_DETACH as usize;
    // SAFETY: a constant NUL-terminated path.
    let unmounted = unsafe { raw(libc::SYS_umount2, [ptr(DOT), detach, 0, 0, 0, 0]) };
    check(Stage::PivotRoot, unmounted)?;
    check(Stage::PivotRoot, chdir(c"/"))
}

/// Makes the mount at `target` (a NUL-terminated path) read-only.
fn make_read_only(target: &[u8]) -> isize {
    let attr = MountAttr {
        attr_set: sys::MOUNT_ATTR_RDONLY,
        ..MountAttr::default()
    };
    // SAFETY: the path is NUL-terminated (a constant or the plan's) and `attr` is a local
    // of the size passed, which the kernel only reads.
    unsafe {
        raw(
            libc::SYS_mount_setattr,
            [
                libc::AT_FDCWD as usize,
                ptr(target),
                0,
                &attr as *const MountAttr as usize,
                std::mem::size_of::<MountAttr>(),
                0,
            ],
        )
    }
}

fn set_hostname(name: &CStr) -> isize {
    let length = name.to_bytes().len();
    // SAFETY: the plan's string, of the length passed.
    unsafe {
        raw(
            libc::SYS_sethostname,
            [name.as_ptr() as usize, length, 0, 0, 0, 0],
        )
    }
}

fn set_rlimit(limit: &Rlimit) -> isize {
    let value = libc::rlimit64 {
        rlim_cur: limit.soft,
        rlim_max: limit.hard,
    };
    // SAFETY: `value` is a local the kernel only reads; the old value is not asked for.
    unsafe {
        raw(
            libc::SYS_prlimit64,
            [
                0,
                limit.resource as usize,
                &value as *const libc::rlimit64 as usize,
                0,
                0,
                0,
            ],
        )
    }
}

/// Empties the capability bounding and ambient sets and locks the securebits, so that even
/// a uid 0 inside could never gain a capability by exec or setuid.
fn drop_capability_bounds(cap_last: u32) -> Outcome {
    for cap in 0..=cap_last as usize {
        check(
            Stage::Capabilities,
            integer_call(libc::SYS_prctl, [libc::PR_CAPBSET_DROP as usize, cap, 0]),
        )?;
    }
    check(
        Stage::Capabilities,
        integer_call(
            libc::SYS_prctl,
            [
                sys::PR_CAP_AMBIENT as usize,
                sys::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
            ],
        ),
    )?;
    let securebits = libc::SECBIT_NOROOT
        | libc::SECBIT_NOROOT_LOCKED
        | libc::SECBIT_NO_SETUID_FIXUP
        | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
        | libc::SECBIT_KEEP_CAPS_LOCKED
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    check(
        Stage::Capabilities,
        integer_call(
            libc::SYS_prctl,
            [libc::PR_SET_SECUREBITS as usize, securebits as usize, 0],
        ),
    )
}

/// Empties the permitted, effective and inheritable sets.
fn clear_capabilities() -> isize {
    let header = CapHeader {
        version: sys::LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: a version-3 header and the two data structures it calls for, locals the kernel
    // only reads.
    unsafe {
        raw(
            libc::SYS_capset,
            [
                &header as *const CapHeader as usize,
                data.as_ptr() as usize,
                0,
                0,
                0,
                0,
            ],
        )
    }
}

/// Installs one seccomp program on top of those already installed.
fn install_filter(program: &[libc::sock_filter]) -> isize {
    let program = libc::sock_fprog {
        // The launcher compiled it under the kernel's limit of 4096 instructions.
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `program` points at the plan's instructions, which outlive the call; the
    // kernel copies them.
    unsafe {
        raw(
            libc::SYS_seccomp,
            [
                libc::SECCOMP_SET_MODE_FILTER as usize,
                0,
                &program as *const libc::sock_fprog as usize,
                0,
                0,
                0,
            ],
        )
    }
}

fn unblock_signals() -> isize {
    let empty: u64 = 0;
    // SAFETY: an empty kernel signal set of the size passed, a local the kernel only reads.
    unsafe {
        raw(
            libc::SYS_rt_sigprocmask,
            [
                libc::SIG_SETMASK as usize,
                &empty as *const u64 as usize,
                0,
                sys::KERNEL_SIGSET_SIZE,
                0,
                0,
            ],
        )
    }
}

/// Executes the program; returns only on failure.
fn execute(program: &CStr, args: &Args) -> isize {
    // SAFETY: the program path is NUL-terminated, and `argv` and `envp` are null-terminated
    // arrays of pointers into strings `args` owns.
    unsafe {
        raw(
            libc::SYS_execve,
            [
                program.as_ptr() as usize,
                args.argv.as_ptr() as usize,
                args.envp.as_ptr() as usize,
                0,
                0,
                0,
            ],
        )
    }
}

/// Sends this process SIGKILL when its parent (the launcher thread) dies.
fn arm_parent_death_signal() -> Outcome {
    // SAFETY: prctl with integer arguments only.
    let ret = unsafe {
        raw(
            libc::SYS_prctl,
            [
                libc::PR_SET_PDEATHSIG as usize,
                libc::SIGKILL as usize,
                0,
                0,
                0,
                0,
            ],
        )
    };
    check(Stage::ParentDeathSignal, ret)
}

/// Puts the sandbox's pipes on 0, 1 and 2 and closes every other descriptor the clone
/// copied from the daemon, but the plan's.
fn keep_only_planned_descriptors(plan: &Plan) -> Outcome {
    // SAFETY: dup3 and close_range on descriptor numbers only.
    unsafe {
        for (target, fd) in plan.stdio.iter().enumerate() {
            check(
                Stage::Descriptors,
                raw(libc::SYS_dup3, [*fd as usize, target, 0, 0, 0, 0]),
            )?;
        }
        let mut first = 3usize;
        for &fd in &plan.keep {
            let fd = fd as usize;
            if fd > first {
                check(
                    Stage::Descriptors,
                    raw(libc::SYS_close_range, [first, fd - 1, 0, 0, 0, 0]),
                )?;
            }
            first = first.max(fd + 1);
        }
        check(
            Stage::Descriptors,
            raw(
                libc::SYS_close_range,
                [first, u32::MAX as usize, 0, 0, 0, 0],
            ),
        )
    }
}

/// Waits for the launcher's go-ahead byte. End-of-file means the launcher gave up on this
/// sandbox, or the daemon died: only it holds the pipe's other end.
fn wait_for_go(plan: &Plan, stage: Stage) -> Outcome {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads one byte into a local.
        let got = unsafe {
            raw(
                libc::SYS_read,
                [plan.go as usize, &mut byte as *mut u8 as usize, 1, 0, 0, 0],
            )
        };
        return match sys::result(got) {
            Ok(1) if byte == GO => Ok(()),
            Ok(_) => Err((stage, 0, libc::EPIPE)),
            Err(libc::EINTR) => continue,
            Err(errno) => Err((stage, 0, errno)),
        };
    }
}

/// A test's pause point (debug builds; see `crate::pause`): reports the arrival, then waits
/// until the daemon has died and carries on — to show that what follows notices.
fn pause(plan: &Plan, at: PauseAt) {
    let Some(pause) = plan.pause.as_ref().filter(|pause| pause.at == at) else {
        return;
    };
    // SAFETY: the line is the plan's; the pollfd is a local; a null timeout waits for ever.
    unsafe {
        raw(
            libc::SYS_write,
            [
                pause.report as usize,
                pause.line.as_ptr() as usize,
                pause.line.len(),
                0,
                0,
                0,
            ],
        );
        let mut daemon = libc::pollfd {
            fd: pause.daemon,
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            let ready = raw(
                libc::SYS_ppoll,
                [&mut daemon as *mut libc::pollfd as usize, 1, 0, 0, 0, 0],
            );
            if sys::result(ready) != Err(libc::EINTR) {
                break;
            }
        }
    }
}

/// Every handler back to the default, so a signal can never run daemon code on this stack
/// (the mask keeps them blocked until just before `execve` anyway).
fn reset_signal_handlers() {
    let default = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for signal in 1..=sys::MAX_SIGNAL {
        if signal == libc::SIGKILL as usize || signal == libc::SIGSTOP as usize {
            continue;
        }
        // SAFETY: `default` is a valid kernel sigaction; failures (for numbers the kernel
        // reserves) leave that handler as it was, which the mask keeps from running.
        unsafe {
            raw(
                libc::SYS_rt_sigaction,
                [
                    signal,
                    &default as *const KernelSigaction as usize,
                    0,
                    sys::KERNEL_SIGSET_SIZE,
                    0,
                    0,
                ],
            );
        }
    }
}

fn set_oom_score() -> Outcome {
    // SAFETY: constant path and buffer; the descriptor is closed before returning.
    unsafe {
        let fd = raw(
            libc::SYS_openat,
            [
                libc::AT_FDCWD as usize,
                ptr(PROC_OOM_SCORE),
                (libc::O_WRONLY | libc::O_CLOEXEC) as usize,
                0,
                0,
                0,
            ],
        );
        let fd = sys::result(fd).map_err(|errno| (Stage::OomScore, 0, errno))?;
        let written = raw(
            libc::SYS_write,
            [fd, ptr(OOM_SCORE_MAX), OOM_SCORE_MAX.len(), 0, 0, 0],
        );
        raw(libc::SYS_close, [fd, 0, 0, 0, 0, 0]);
        check(Stage::OomScore, written)
    }
}

fn run_step(step: &Step) -> Result<(), i32> {
    // SAFETY: every pointer is a NUL-terminated string of the plan or a constant.
    let ret = unsafe {
        match step {
            Step::Mkdir(path) => {
                let ret = raw(
                    libc::SYS_mkdirat,
                    [
                        libc::AT_FDCWD as usize,
                        path.as_ptr() as usize,
                        0o755,
                        0,
                        0,
                        0,
                    ],
                );
                if sys::result(ret) == Err(libc::EEXIST) {
                    0
                } else {
                    ret
                }
            }
            Step::Touch(path) => {
                // mknod rather than open(O_CREAT): a file that already exists (inside a
                // directory granted too) is fine as it is, and opening it for writing would
                // be refused.
                let ret = raw(
                    libc::SYS_mknodat,
                    [
                        libc::AT_FDCWD as usize,
                        path.as_ptr() as usize,
                        (libc::S_IFREG | 0o644) as usize,
                        0,
                        0,
                        0,
                    ],
                );
                if sys::result(ret) == Err(libc::EEXIST) {
                    0
                } else {
                    ret
                }
            }
            Step::Symlink { target, link } => raw(
                libc::SYS_symlinkat,
                [
                    target.as_ptr() as usize,
                    libc::AT_FDCWD as usize,
                    link.as_ptr() as usize,
                    0,
                    0,
                    0,
                ],
            ),
            Step::Attach { tree, target } => raw(
                libc::SYS_move_mount,
                [
                    *tree as usize,
                    ptr(EMPTY),
                    libc::AT_FDCWD as usize,
                    target.as_ptr() as usize,
                    sys::MOVE_MOUNT_F_EMPTY_PATH as usize,
                    0,
                ],
            ),
            Step::Mount {
                fstype,
                target,
                flags,
                data,
            } => raw(
                libc::SYS_mount,
                [
                    fstype.as_ptr() as usize,
                    target.as_ptr() as usize,
                    fstype.as_ptr() as usize,
                    *flags as usize,
                    data.as_ptr() as usize,
                    0,
                ],
            ),
            Step::ReadOnly(target) => make_read_only(target.as_bytes_with_nul()),
        }
    };
    sys::result(ret).map(|_| ())
}

fn add_inside_rule(ruleset: RawFd, rule: &InsideRule) -> Result<(), i32> {
    // SAFETY: the path is NUL-terminated; the descriptor is closed before returning.
    unsafe {
        let fd = raw(
            libc::SYS_openat,
            [
                libc::AT_FDCWD as usize,
                rule.path.as_ptr() as usize,
                (libc::O_PATH | libc::O_CLOEXEC) as usize,
                0,
                0,
                0,
            ],
        );
        let fd = sys::result(fd)?;
        let attr = LandlockPathBeneathAttr {
            allowed_access: rule.rights,
            parent_fd: fd as i32,
        };
        let ret = raw(
            libc::SYS_landlock_add_rule,
            [
                ruleset as usize,
                sys::LANDLOCK_RULE_PATH_BENEATH as usize,
                &attr as *const LandlockPathBeneathAttr as usize,
                0,
                0,
                0,
            ],
        );
        raw(libc::SYS_close, [fd, 0, 0, 0, 0, 0]);
        sys::result(ret).map(|_| ())
    }
}

#[cfg(test)]
#[path = "child_tests.rs"]
mod tests;
