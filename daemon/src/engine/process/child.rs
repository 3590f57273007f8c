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
//! The order matters: the launcher writes the id maps and moves the process into its cgroup
//! while it waits on `go`; mounts need the capabilities the new user namespace grants;
//! Landlock and seccomp need `no_new_privs`; capabilities are dropped last, after the
//! operations that need them; nothing may be mounted after the root is pivoted and sealed.

use std::ffi::{CString, c_char, c_int, c_long, c_void};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use super::limits::Rlimit;
use super::sys::{self, CapData, CapHeader, KernelSigaction, LandlockPathBeneathAttr, MountAttr};

/// Where the first process was when something failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stage {
    Started = 0,
    WaitForParent,
    CgroupNamespace,
    Session,
    OomScore,
    PrivateMounts,
    RootMount,
    Identity,
    Mount,
    PivotRoot,
    RootReadOnly,
    Hostname,
    LandlockRule,
    Stdio,
    WorkingDirectory,
    Rlimit,
    Capabilities,
    NoNewPrivs,
    Landlock,
    ParentDeathSignal,
    Seccomp,
    Signals,
    Exec,
    /// A dry run reached the point where it would execute the program.
    Ready,
}

impl Stage {
    const ALL: [Stage; 24] = [
        Stage::Started,
        Stage::WaitForParent,
        Stage::CgroupNamespace,
        Stage::Session,
        Stage::OomScore,
        Stage::PrivateMounts,
        Stage::RootMount,
        Stage::Identity,
        Stage::Mount,
        Stage::PivotRoot,
        Stage::RootReadOnly,
        Stage::Hostname,
        Stage::LandlockRule,
        Stage::Stdio,
        Stage::WorkingDirectory,
        Stage::Rlimit,
        Stage::Capabilities,
        Stage::NoNewPrivs,
        Stage::Landlock,
        Stage::ParentDeathSignal,
        Stage::Seccomp,
        Stage::Signals,
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
            Stage::WaitForParent => "waiting for the daemon to map the sandbox's user ids",
            Stage::CgroupNamespace => "entering a new cgroup namespace",
            Stage::Session => "starting a new session (setsid)",
            Stage::OomScore => "setting the OOM score",
            Stage::PrivateMounts => "making the mount namespace private",
            Stage::RootMount => "mounting the sandbox's root tmpfs",
            Stage::Identity => "switching to the sandbox's unprivileged uid and gid",
            Stage::Mount => "building the mount view",
            Stage::PivotRoot => "pivoting into the new root and detaching the old one",
            Stage::RootReadOnly => "making the new root read-only",
            Stage::Hostname => "setting the hostname (uts namespace)",
            Stage::LandlockRule => "adding a Landlock rule",
            Stage::Stdio => "connecting stdin, stdout and stderr",
            Stage::WorkingDirectory => "changing to the working directory",
            Stage::Rlimit => "setting a resource limit (setrlimit)",
            Stage::Capabilities => "dropping all capabilities",
            Stage::NoNewPrivs => "setting no_new_privs",
            Stage::Landlock => "enforcing the Landlock ruleset",
            Stage::ParentDeathSignal => "setting the parent-death signal",
            Stage::Seccomp => "installing the seccomp filter",
            Stage::Signals => "unblocking signals",
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

/// Everything the first process needs, prepared by the launcher.
#[derive(Debug)]
pub struct Plan {
    pub report: Report,
    /// Read end of the pipe the launcher writes one byte to once the ids are mapped.
    pub go: RawFd,
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
    pub seccomp: Vec<libc::sock_filter>,
    pub program: CString,
    /// Null-terminated arrays of pointers into the two storages below.
    pub argv: Vec<*const c_char>,
    pub envp: Vec<*const c_char>,
    /// The strings `argv` and `envp` point into, owned here so they live as long.
    pub _argv_storage: Vec<CString>,
    pub _env_storage: Vec<CString>,
    /// False for a dry run that builds the sandbox and exits without executing anything.
    pub exec: bool,
}

const EMPTY: &[u8] = b"\0";
const PROC_OOM_SCORE: &[u8] = b"/proc/self/oom_score_adj\0";
/// The sandbox is the first thing the kernel should kill when the host runs out of memory.
const OOM_SCORE_MAX: &[u8] = b"1000";
const TMPFS: &[u8] = b"tmpfs\0";
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
    reset_signal_handlers();

    plan.report.reach(Stage::WaitForParent);
    let mut byte = 0u8;
    // SAFETY: reads one byte into a local.
    let got = unsafe {
        raw(
            libc::SYS_read,
            [plan.go as usize, &mut byte as *mut u8 as usize, 1, 0, 0, 0],
        )
    };
    match sys::result(got) {
        Ok(1) => {}
        // The launcher closed the pipe without the go-ahead: it gave up on this sandbox.
        Ok(_) => return Err((Stage::WaitForParent, 0, libc::EPIPE)),
        Err(errno) => return Err((Stage::WaitForParent, 0, errno)),
    }

    // SAFETY: each call below passes pointers into the plan or into constants, which outlive
    // the call; the kernel validates everything else.
    unsafe {
        // The cgroup namespace is rooted at the group the launcher just moved us into.
        check(
            Stage::CgroupNamespace,
            raw(
                libc::SYS_unshare,
                [libc::CLONE_NEWCGROUP as usize, 0, 0, 0, 0, 0],
            ),
        )?;
        check(Stage::Session, raw(libc::SYS_setsid, [0; 6]))?;
        set_oom_score()?;

        check(
            Stage::PrivateMounts,
            raw(
                libc::SYS_mount,
                [
                    0,
                    ptr(ROOT),
                    0,
                    (libc::MS_REC | libc::MS_PRIVATE) as usize,
                    0,
                    0,
                ],
            ),
        )?;
        check(
            Stage::RootMount,
            raw(
                libc::SYS_mount,
                [
                    ptr(TMPFS),
                    plan.root.as_ptr() as usize,
                    ptr(TMPFS),
                    (libc::MS_NOSUID | libc::MS_NODEV) as usize,
                    plan.root_options.as_ptr() as usize,
                    0,
                ],
            ),
        )?;
        check(
            Stage::RootMount,
            raw(
                libc::SYS_chdir,
                [plan.root.as_ptr() as usize, 0, 0, 0, 0, 0],
            ),
        )?;

        // From here on, files are created as the sandbox's ids (which the new user namespace
        // maps) and paths are relative to the new root, so no host directory above it is
        // looked up again.
        check(
            Stage::Identity,
            raw(libc::SYS_setgroups, [0, 0, 0, 0, 0, 0]),
        )?;
        let (uid, gid) = (plan.uid as usize, plan.gid as usize);
        check(
            Stage::Identity,
            raw(libc::SYS_setresgid, [gid, gid, gid, 0, 0, 0]),
        )?;
        check(
            Stage::Identity,
            raw(libc::SYS_setresuid, [uid, uid, uid, 0, 0, 0]),
        )?;

        for (index, step) in plan.steps.iter().enumerate() {
            run_step(step).map_err(|errno| (Stage::Mount, index as u32, errno))?;
        }

        check(
            Stage::PivotRoot,
            raw(libc::SYS_pivot_root, [ptr(DOT), ptr(DOT), 0, 0, 0, 0]),
        )?;
        check(
            Stage::PivotRoot,
            raw(
                libc::SYS_umount2,
                [ptr(DOT), libc::MNT_DETACH as usize, 0, 0, 0, 0],
            ),
        )?;
        check(
            Stage::PivotRoot,
            raw(libc::SYS_chdir, [ptr(ROOT), 0, 0, 0, 0, 0]),
        )?;
        let read_only = MountAttr {
            attr_set: sys::MOUNT_ATTR_RDONLY,
            ..MountAttr::default()
        };
        check(
            Stage::RootReadOnly,
            raw(
                libc::SYS_mount_setattr,
                [
                    libc::AT_FDCWD as usize,
                    ptr(ROOT),
                    0,
                    &read_only as *const MountAttr as usize,
                    std::mem::size_of::<MountAttr>(),
                    0,
                ],
            ),
        )?;
        check(
            Stage::Hostname,
            raw(
                libc::SYS_sethostname,
                [
                    plan.hostname.as_ptr() as usize,
                    plan.hostname.as_bytes().len(),
                    0,
                    0,
                    0,
                    0,
                ],
            ),
        )?;

        for (index, rule) in plan.inside_rules.iter().enumerate() {
            add_inside_rule(plan.landlock, rule)
                .map_err(|errno| (Stage::LandlockRule, index as u32, errno))?;
        }

        for (target, fd) in plan.stdio.iter().enumerate() {
            check(
                Stage::Stdio,
                raw(libc::SYS_dup3, [*fd as usize, target, 0, 0, 0, 0]),
            )?;
        }
        // Nothing of the daemon's survives the exec: every other descriptor closes then.
        check(
            Stage::Stdio,
            raw(
                libc::SYS_close_range,
                [
                    3,
                    u32::MAX as usize,
                    libc::CLOSE_RANGE_CLOEXEC as usize,
                    0,
                    0,
                    0,
                ],
            ),
        )?;
        check(
            Stage::WorkingDirectory,
            raw(libc::SYS_chdir, [plan.cwd.as_ptr() as usize, 0, 0, 0, 0, 0]),
        )?;

        for (index, limit) in plan.rlimits.iter().enumerate() {
            let value = libc::rlimit64 {
                rlim_cur: limit.soft,
                rlim_max: limit.hard,
            };
            check_at(
                Stage::Rlimit,
                index as u32,
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
                ),
            )?;
        }

        for cap in 0..=plan.cap_last as usize {
            check(
                Stage::Capabilities,
                raw(
                    libc::SYS_prctl,
                    [libc::PR_CAPBSET_DROP as usize, cap, 0, 0, 0, 0],
                ),
            )?;
        }
        check(
            Stage::Capabilities,
            raw(
                libc::SYS_prctl,
                [
                    sys::PR_CAP_AMBIENT as usize,
                    sys::PR_CAP_AMBIENT_CLEAR_ALL,
                    0,
                    0,
                    0,
                    0,
                ],
            ),
        )?;
        // Even a uid 0 inside could never gain capabilities by exec or setuid.
        let securebits = libc::SECBIT_NOROOT
            | libc::SECBIT_NOROOT_LOCKED
            | libc::SECBIT_NO_SETUID_FIXUP
            | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
            | libc::SECBIT_KEEP_CAPS_LOCKED
            | libc::SECBIT_NO_CAP_AMBIENT_RAISE
            | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        check(
            Stage::Capabilities,
            raw(
                libc::SYS_prctl,
                [
                    libc::PR_SET_SECUREBITS as usize,
                    securebits as usize,
                    0,
                    0,
                    0,
                    0,
                ],
            ),
        )?;
        check(
            Stage::NoNewPrivs,
            raw(
                libc::SYS_prctl,
                [libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0, 0, 0, 0],
            ),
        )?;
        check(
            Stage::Landlock,
            raw(
                libc::SYS_landlock_restrict_self,
                [plan.landlock as usize, 0, 0, 0, 0, 0],
            ),
        )?;
        let header = CapHeader {
            version: sys::LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        check(
            Stage::Capabilities,
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
            ),
        )?;
        // The launcher thread lives as long as the engine; if the daemon dies, so does this.
        check(
            Stage::ParentDeathSignal,
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
            ),
        )?;
        let program = libc::sock_fprog {
            len: plan.seccomp.len() as u16,
            filter: plan.seccomp.as_ptr() as *mut libc::sock_filter,
        };
        check(
            Stage::Seccomp,
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
            ),
        )?;
        let empty: u64 = 0;
        check(
            Stage::Signals,
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
            ),
        )?;
        if !plan.exec {
            return Ok(());
        }
        plan.report.reach(Stage::Exec);
        let ret = raw(
            libc::SYS_execve,
            [
                plan.program.as_ptr() as usize,
                plan.argv.as_ptr() as usize,
                plan.envp.as_ptr() as usize,
                0,
                0,
                0,
            ],
        );
        check(Stage::Exec, ret)
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
            Step::ReadOnly(target) => {
                let attr = MountAttr {
                    attr_set: sys::MOUNT_ATTR_RDONLY,
                    ..MountAttr::default()
                };
                raw(
                    libc::SYS_mount_setattr,
                    [
                        libc::AT_FDCWD as usize,
                        target.as_ptr() as usize,
                        0,
                        &attr as *const MountAttr as usize,
                        std::mem::size_of::<MountAttr>(),
                        0,
                    ],
                )
            }
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
mod tests {
    use super::*;

    #[test]
    fn stages_round_trip_through_the_report() {
        for stage in Stage::ALL {
            assert_eq!(Stage::from_u32(stage as u32), stage);
            assert!(!stage.describe().is_empty());
        }
        let report = Report::default();
        report.reach(Stage::Mount);
        assert_eq!(report.read(), (Stage::Mount, None));
        report.fail(Stage::Seccomp, 2, libc::EINVAL);
        assert_eq!(
            report.read(),
            (
                Stage::Seccomp,
                Some(Failure {
                    stage: Stage::Seccomp,
                    index: 2,
                    errno: libc::EINVAL
                })
            )
        );
    }
}
