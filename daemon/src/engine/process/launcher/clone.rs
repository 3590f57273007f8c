//! Cloning a sandbox's first process into its namespaces, and seeing it through to its
//! program: the id maps, the go-ahead, the handshake (see `child`), a test's pause, and the
//! report of a failure turned into a message naming the layer.

use std::ffi::c_void;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::process::PidfdFlags;
use rustix::thread::LinkNameSpaceType;

use super::super::child::{self, Failure, PauseAt, Stage};
use super::super::network::{self, Network};
use super::super::plan::Prepared;
use super::super::stack::Stack;
use super::pool::{HomeNamespaces, Namespaces, setns};
use crate::pause::{self, Point};

/// Longest a sandbox may take to be built before the launcher gives up on it. Building takes
/// about a millisecond; only a hung mount source could take longer.
pub(super) const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Clones the first process into its namespaces, returning its pid, its pidfd, and the
/// network namespace it entered when that was made ahead.
pub(super) fn clone_first_process(
    stack: &Stack,
    home: Option<&HomeNamespaces>,
    namespaces: Namespaces,
    must_enter: bool,
    prepared: &Prepared,
) -> Result<(i32, OwnedFd, Option<OwnedFd>), String> {
    let mut flags = libc::CLONE_VM
        | libc::CLONE_PIDFD
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWUTS
        | libc::SIGCHLD;
    // Namespaces made ahead are only used when the thread can return to its own afterwards.
    let (network, ipc) = match home {
        Some(home) => (
            enter_network(namespaces.network, home),
            namespaces
                .ipc
                .filter(|ipc| setns(ipc, LinkNameSpaceType::InterProcessCommunication).is_ok()),
        ),
        None => (None, None),
    };
    if network.is_none() {
        if must_enter {
            // A namespace of the clone's own would not hold the egress proxy's listener.
            if let (Some(home), Some(_)) = (home, &ipc) {
                let _ = setns(&home.ipc, LinkNameSpaceType::InterProcessCommunication);
            }
            return Err("cannot enter the sandbox's network namespace".into());
        }
        flags |= libc::CLONE_NEWNET;
    }
    if ipc.is_none() {
        flags |= libc::CLONE_NEWIPC;
    }
    let mut pidfd: libc::c_int = -1;
    let plan = &*prepared.plan as *const child::Plan as *mut c_void;
    // SAFETY: `child::entry` only reads the plan, which outlives the child's use of it (the
    // launcher waits until the child has executed the program or exited), and runs on
    // `stack`, which nothing else uses meanwhile. CLONE_PIDFD stores the pidfd in `pidfd`.
    let pid = unsafe {
        libc::clone(
            child::entry,
            stack.top(),
            flags,
            plan,
            &mut pidfd as *mut libc::c_int,
        )
    };
    let clone_error = io::Error::last_os_error();
    if let Some(home) = home {
        let back = (network.is_none() || setns(&home.net, LinkNameSpaceType::Network).is_ok())
            && (ipc.is_none()
                || setns(&home.ipc, LinkNameSpaceType::InterProcessCommunication).is_ok());
        if !back {
            tracing::warn!("the launcher could not return to its own namespaces");
        }
    }
    if pid < 0 {
        return Err(match clone_error.raw_os_error() {
            Some(libc::EPERM | libc::ENOSPC | libc::EINVAL | libc::EUSERS) => format!(
                "cannot create the sandbox's namespaces (user, pid, mount, uts, net, ipc): {clone_error}; user namespaces may be disabled or exhausted on this host"
            ),
            _ => format!("cannot start the sandbox's first process: {clone_error}"),
        });
    }
    // SAFETY: CLONE_PIDFD wrote a new descriptor nothing else owns.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }, network))
}

/// Moves this thread into `network`, unless it is a namespace handed on that still holds a
/// socket of the sandbox before (one its garbage collector has not freed yet): that one is
/// let go, and the clone makes a new namespace instead.
pub(super) fn enter_network(network: Option<Network>, home: &HomeNamespaces) -> Option<OwnedFd> {
    let network = network?;
    setns(&network.fd, LinkNameSpaceType::Network).ok()?;
    if network.handed_on && !network::holds_no_socket().unwrap_or(false) {
        if setns(&home.net, LinkNameSpaceType::Network).is_err() {
            // Harmless for the sandboxes: each clone enters a namespace or makes one.
            tracing::warn!("the launcher could not return to its own network namespace");
        }
        return None;
    }
    Some(network.fd)
}

/// What [`start`] hands back once the first process has gone as far as it was to go.
pub(super) struct Started {
    /// The go-ahead pipe, which a spare's release writes to again.
    pub go: std::fs::File,
    /// The process's `oom_score_adj`, opened before it took the sandbox's ids; written once
    /// its program runs ([`mark_first_to_kill`]).
    pub oom_score: std::fs::File,
}

/// Maps the ids, lets the process go, answers its handshake, and waits until it has
/// executed the program (or failed to), or, for a spare, until it waits for its call.
pub(super) fn start(
    pid: i32,
    prepared: &Prepared,
    go: Option<OwnedFd>,
    until: Until,
) -> Result<Started, String> {
    write_proc(pid, "uid_map", &id_map(prepared.uid))
        .map_err(|err| format!("cannot map the sandbox's uid (user namespace): {err}"))?;
    write_proc(pid, "gid_map", &id_map(prepared.gid))
        .map_err(|err| format!("cannot map the sandbox's gid (user namespace): {err}"))?;
    let oom_score =
        open_oom_score(pid).map_err(|err| format!("cannot open the sandbox's OOM score: {err}"))?;
    if prepared.plan.exec && until == Until::Exec {
        pause::reached(Point::ProcessUidMap);
    }
    let mut go = std::fs::File::from(go.ok_or("the sandbox's go-ahead pipe is missing")?);
    go.write_all(&[child::GO])
        .map_err(|err| format!("cannot let the sandbox's first process go: {err}"))?;
    await_status(&prepared.status, &mut go, until)?;
    let expected = match until {
        Until::Parked => Stage::Parked,
        Until::Exec if prepared.plan.exec => Stage::Exec,
        Until::Exec => Stage::Ready,
    };
    check_report(prepared, expected)?;
    Ok(Started { go, oom_score })
}

/// The first process's report: a failure it wrote, or death before `expected`.
pub(super) fn check_report(prepared: &Prepared, expected: Stage) -> Result<(), String> {
    let (stage, failure) = prepared.plan.report.read();
    if let Some(failure) = failure {
        return Err(describe_failure(failure, prepared));
    }
    if stage != expected {
        return Err(format!(
            "the sandbox's first process died while {}",
            stage.describe()
        ));
    }
    Ok(())
}

/// What the launcher waits for on the status pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// Every write end closed: the process executed the program, or died.
    Exec,
    /// A spare's byte saying it waits for its call (or every end closed: it died).
    Parked,
}

/// Waits on the `status` pipe for what `until` names, answering the first process's
/// handshake on `go` when it comes (see `child`).
pub(super) fn await_status(
    status: &OwnedFd,
    go: &mut std::fs::File,
    until: Until,
) -> Result<(), String> {
    let timeout = SETUP_TIMEOUT;
    let deadline = std::time::Instant::now() + timeout;
    let mut answered = false;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the sandbox took longer than {} s to build and was stopped",
                timeout.as_secs()
            ));
        }
        let timeout = Timespec::try_from(left).unwrap_or(Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        });
        let mut poll = [PollFd::new(status, PollFlags::IN)];
        match rustix::event::poll(&mut poll, Some(&timeout)) {
            Ok(0) | Err(Errno::INTR) => continue,
            Ok(_) => {}
            Err(err) => return Err(format!("cannot wait for the sandbox: {err}")),
        }
        let mut bytes = [0u8; 16];
        let read = match rustix::io::read(status, &mut bytes) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(Errno::INTR) => continue,
            Err(err) => return Err(format!("cannot wait for the sandbox: {err}")),
        };
        let got = &bytes[..read];
        if until == Until::Parked && got.contains(&child::PARKED) {
            return Ok(());
        }
        if !answered && got.contains(&child::HANDSHAKE) {
            // A failed answer leaves the process waiting on a pipe that reads end-of-file
            // once `go` is dropped: it exits, and the caller reports its stage.
            answered = go.write_all(&[child::GO]).is_ok();
        }
    }
}

/// Sets up a test's pause inside the first process, when a test asked for one (debug
/// builds only: `pause::sandbox_stage` is always false in release).
pub(super) fn arm_test_pause(prepared: &mut Prepared) {
    const POINTS: [(Point, PauseAt); 7] = [
        (Point::ProcessClone, PauseAt::Clone),
        (Point::ProcessIdentity, PauseAt::Identity),
        (Point::ProcessMounts, PauseAt::Mounts),
        (Point::ProcessPivot, PauseAt::Pivot),
        (Point::ProcessLandlock, PauseAt::Landlock),
        (Point::ProcessSeccomp, PauseAt::Seccomp),
        (Point::ProcessExec, PauseAt::Exec),
    ];
    let Some((point, at)) = POINTS
        .into_iter()
        .find(|(point, _)| pause::sandbox_stage(*point))
    else {
        return;
    };
    let report = rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), 3);
    let daemon = rustix::process::pidfd_open(rustix::process::getpid(), PidfdFlags::empty());
    let (Ok(report), Ok(daemon)) = (report, daemon) else {
        tracing::error!("cannot set up the test pause at {point}");
        return;
    };
    prepared.pause_at(at, pause::reached_line(point), report, daemon);
}

/// `inside outside 1`: the sandbox's id is the same number as on the host.
pub(super) fn id_map(id: u32) -> String {
    format!("{id} {id} 1\n")
}

/// How many times a map is written (or a file of the process opened) again when another
/// sandbox's first process made the daemon undumpable just before: a second try almost
/// always does.
const UNDUMPABLE_RETRIES: u32 = 100;

pub(super) fn write_proc(pid: i32, file: &str, text: &str) -> io::Result<()> {
    let path = format!("/proc/{pid}/{file}");
    past_undumpable(|| std::fs::write(&path, text))
}

/// Runs `open`, again while it is refused because another sandbox's first process made the
/// daemon undumpable just before (see `sys::note_dumpable`): that lasts the few system calls
/// between its id change and its restoring the flag.
fn past_undumpable<T>(mut open: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut tries = 0;
    loop {
        match open() {
            Err(err)
                if err.kind() == io::ErrorKind::PermissionDenied && tries < UNDUMPABLE_RETRIES =>
            {
                tries += 1;
                super::super::sys::restore_dumpable();
                std::thread::yield_now();
            }
            other => return other,
        }
    }
}

/// A sandbox's program's OOM score adjustment: the most there is, so that when the host runs
/// out of memory the kernel kills a tool before the daemon or anything else of the host.
const OOM_SCORE_ADJ: &str = "1000";

/// Opens the `oom_score_adj` of the first process `pid` for [`mark_first_to_kill`], while
/// the process still has the daemon's ids (the maps are written, the go-ahead not given).
///
/// The kernel checks who may write the file when it is opened, and its owner follows the
/// process: the process's own ids while it is dumpable, root's otherwise, and root's once it
/// has exited. After `execve` the program may be neither the daemon's nor alive; now it is
/// both, so a daemon that is not root may open it whatever its program turns out to be.
fn open_oom_score(pid: i32) -> io::Result<std::fs::File> {
    let path = format!("/proc/{pid}/oom_score_adj");
    past_undumpable(|| std::fs::OpenOptions::new().write(true).open(&path))
}

/// Makes a sandbox's program, once it runs, the first thing the kernel kills when the host
/// runs out of memory, through the file [`start`] opened.
///
/// Not before: until its `execve` the first process shares the daemon's memory, and the
/// kernel holds every process sharing a memory at one score (killing one of them would free
/// nothing), so a score set for one of them is given to all. Set by the first process for
/// itself, it made the daemon the host's first victim. The program runs at the daemon's score
/// for the microseconds before this, and what it forks in that time keeps that score; but the
/// program is pid 1 of its namespace, so when the kernel kills it, at 1000 its first choice,
/// everything of the sandbox dies with it.
///
/// The write asks for no permission (the open did); it fails only if the process is gone,
/// which cannot be while the launcher has not reaped it. Should it fail anyway, the program
/// has already run: the call goes on, with a warning, rather than be reported as not run.
pub(super) fn mark_first_to_kill(oom_score: &std::fs::File) {
    if let Err(err) = (&*oom_score).write_all(OOM_SCORE_ADJ.as_bytes()) {
        tracing::warn!(%err, "cannot set a sandbox's OOM score; its program keeps the daemon's");
    }
}

/// Turns a failure the first process reported into a message naming the layer.
pub(super) fn describe_failure(failure: Failure, prepared: &Prepared) -> String {
    let detail = match failure.stage {
        Stage::Mount => prepared
            .step_names
            .get(failure.index as usize)
            .map(|name| format!(" ({name})"))
            .unwrap_or_default(),
        Stage::LandlockRule => prepared
            .rule_names
            .get(failure.index as usize)
            .map(|name| format!(" (for {name})"))
            .unwrap_or_default(),
        Stage::Rlimit => prepared
            .plan
            .rlimits
            .get(failure.index as usize)
            .map(|limit| format!(" (resource {})", limit.resource))
            .unwrap_or_default(),
        _ => String::new(),
    };
    format!(
        "the sandbox could not be built: {}{detail} failed: {}",
        failure.stage.describe(),
        io::Error::from_raw_os_error(failure.errno)
    )
}
