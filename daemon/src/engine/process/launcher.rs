//! Starting sandboxes: the launcher thread that clones each sandbox's first process, the
//! pool that prepares namespaces and cgroups ahead of time, the spare it builds for the next
//! call, and the reaper.
//!
//! Sandboxes are cloned from one long-lived thread of the daemon, for three reasons. The
//! first process shares the thread's memory (`CLONE_VM`) and runs on a stack the thread
//! owns until it executes the tool; one thread cloning one sandbox at a time makes that
//! stack's ownership simple. The first process's parent is this thread, and its parent-death
//! signal fires when *the thread* exits, so the thread must live as long as the engine (a
//! pooled runtime thread would not). And the thread enters a pre-made network and IPC
//! namespace before each clone, which is per-thread state no runtime thread should carry.
//!
//! Creating a network namespace costs more than the rest of a sandbox together (about 1.5 ms
//! against 0.3 ms here), and an IPC namespace most of the rest; the pool makes both, and
//! each sandbox's cgroups, on its own thread while no call waits, and every sandbox gets
//! fresh ones. When the pool is empty the sandbox creates its own, at the old cost.
//!
//! Between calls the thread builds the next call's whole sandbox ahead and parks it (see
//! `spare.rs`); a call that finds one fitting only hands it its arguments. Calls already
//! waiting are served before a spare is built.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::process::PidfdFlags;
use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use super::cgroup::{Cgroups, SandboxCgroup};
use super::child::{self, Failure, PauseAt, Stage};
use super::egress;
use super::plan::{self, Blueprint, CallSpec, Prepared};
use super::sandbox::{self, Reap, Sandbox, reaper_loop};
use super::spare::{self, Spare};
use super::stack::Stack;
use crate::engine::RunStats;
use crate::pause::{self, Point};

/// Longest a sandbox may take to be built before the launcher gives up on it. Building takes
/// about a millisecond; only a hung mount source could take longer.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Namespaces and cgroups made ahead: enough for a burst of calls, each a few hundred KiB of
/// kernel memory while it waits.
const POOL_SIZE: usize = 4;

/// One sandbox's worth of resources made ahead of time.
struct Slot {
    /// Network and IPC namespaces, owned by the host's user namespace.
    namespaces: Option<(OwnedFd, OwnedFd)>,
    cgroup: Option<SandboxCgroup>,
}

struct Pool {
    slots: Mutex<VecDeque<Slot>>,
    changed: Condvar,
    stop: AtomicBool,
}

impl Pool {
    fn take(&self) -> Option<Slot> {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        self.changed.notify_all();
        slot
    }

    fn fill(&self, cgroups: &Cgroups) {
        let mut namespaces_work = true;
        loop {
            {
                let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
                while slots.len() >= POOL_SIZE && !self.stop.load(Ordering::Relaxed) {
                    slots = self
                        .changed
                        .wait(slots)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            let namespaces = if namespaces_work {
                match make_namespaces() {
                    Ok(namespaces) => Some(namespaces),
                    Err(err) => {
                        tracing::warn!(%err, "cannot pre-make network namespaces; each sandbox will make its own");
                        namespaces_work = false;
                        None
                    }
                }
            } else {
                None
            };
            let cgroup = if cgroups.is_empty() {
                None
            } else {
                match cgroups.create_sandbox() {
                    Ok(group) => Some(group),
                    Err(err) => {
                        tracing::warn!(%err, "cannot pre-make a sandbox cgroup");
                        None
                    }
                }
            };
            if namespaces.is_none() && cgroup.is_none() {
                // Nothing to pool on this host.
                return;
            }
            self.slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(Slot { namespaces, cgroup });
        }
    }
}

/// A network and an IPC namespace, made by moving this thread into new ones.
fn make_namespaces() -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: without `FILES` (the hazard `unshare_unsafe` documents), unsharing these two
    // namespaces changes only the calling thread's, which is made for this alone.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET | UnshareFlags::NEWIPC) }?;
    let net = std::fs::File::open("/proc/thread-self/ns/net")?;
    let ipc = std::fs::File::open("/proc/thread-self/ns/ipc")?;
    Ok((net.into(), ipc.into()))
}

fn setns(fd: &OwnedFd, kind: LinkNameSpaceType) -> io::Result<()> {
    Ok(rustix::thread::move_into_link_name_space(
        fd.as_fd(),
        Some(kind),
    )?)
}

/// Where a launch's result goes.
type Reply = Box<dyn FnOnce(Result<Sandbox, String>) + Send>;

struct Job {
    blueprint: Arc<Blueprint>,
    call: CallSpec,
    stats: Arc<RunStats>,
    reply: Reply,
}

/// Shared by the launcher, the pool filler and the engine.
struct Shared {
    cgroups: Arc<Cgroups>,
    pool: Pool,
    reaper: Sender<Reap>,
}

pub struct Launcher {
    jobs: Option<Sender<Job>>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Launcher {
    pub fn start(cgroups: Arc<Cgroups>) -> io::Result<Launcher> {
        let (reaper, reaps) = mpsc::channel();
        std::thread::Builder::new()
            .name("airlock-reaper".into())
            .spawn(move || reaper_loop(reaps))?;
        let shared = Arc::new(Shared {
            cgroups,
            pool: Pool {
                slots: Mutex::new(VecDeque::new()),
                changed: Condvar::new(),
                stop: AtomicBool::new(false),
            },
            reaper,
        });
        let (jobs, queue) = mpsc::channel();
        let mut threads = Vec::new();
        let launcher_shared = shared.clone();
        let stack = Stack::new()?;
        threads.push(
            std::thread::Builder::new()
                .name("airlock-launcher".into())
                .spawn(move || launcher_loop(&launcher_shared, stack, queue))?,
        );
        let filler = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("airlock-sandbox-pool".into())
                .spawn(move || filler.pool.fill(&filler.cgroups))?,
        );
        Ok(Launcher {
            jobs: Some(jobs),
            shared,
            threads,
        })
    }

    fn submit(&self, job: Job) -> Result<(), String> {
        self.jobs
            .as_ref()
            .ok_or("the process engine is shutting down")?
            .send(job)
            .map_err(|_| "the process engine's launcher has stopped".to_owned())
    }

    /// Builds a sandbox for one call and starts its program.
    pub async fn launch(
        &self,
        blueprint: Arc<Blueprint>,
        call: CallSpec,
        stats: Arc<RunStats>,
    ) -> Result<Sandbox, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(Job {
            blueprint,
            call,
            stats,
            // If the call was dropped meanwhile, the sandbox is dropped here: killed and reaped.
            reply: Box::new(move |result| {
                let _ = tx.send(result);
            }),
        })?;
        rx.await
            .map_err(|_| "the process engine's launcher has stopped".to_owned())?
    }

    /// As [`Launcher::launch`], blocking the calling thread (for the start-up check).
    pub fn launch_blocking(
        &self,
        blueprint: Arc<Blueprint>,
        call: CallSpec,
    ) -> Result<Sandbox, String> {
        let (tx, rx) = mpsc::channel();
        self.submit(Job {
            blueprint,
            call,
            stats: Arc::new(RunStats::default()),
            reply: Box::new(move |result| {
                let _ = tx.send(result);
            }),
        })?;
        rx.recv()
            .map_err(|_| "the process engine's launcher has stopped".to_owned())?
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        self.jobs = None;
        self.shared.pool.stop.store(true, Ordering::Relaxed);
        self.shared.pool.changed.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn launcher_loop(shared: &Shared, stack: Stack, jobs: Receiver<Job>) {
    // No signal handler of the daemon may ever run on this thread's clones (they inherit the
    // mask and block everything until they execute the tool).
    // SAFETY: a full set is a valid mask; changing this thread's mask affects no other.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    }
    let home = HomeNamespaces::open();
    let mut spare: Option<Spare> = None;
    let mut waiting: Option<Job> = None;
    loop {
        let job = match waiting.take() {
            Some(job) => job,
            None => match jobs.recv() {
                Ok(job) => job,
                Err(_) => break,
            },
        };
        // A test's pause must land in the sandbox of the call it names, not a spare.
        let key = spare::Key::of(&job.blueprint, &job.call).filter(|_| !pause::armed());
        // A call that cannot use a spare leaves it be; another tool's or workspace's call
        // replaces it.
        let fitting = match (spare.take(), &key) {
            (Some(candidate), Some(key)) if candidate.fits(key) => Some(candidate),
            (Some(unfit), Some(_)) => {
                discard(shared, unfit);
                None
            }
            (kept, None) => {
                spare = kept;
                None
            }
            (None, Some(_)) => None,
        };
        let released = fitting.map(|spare| release(shared, spare, &job.call, job.stats.clone()));
        let result = match released {
            Some(Released::Running(sandbox)) => Ok(*sandbox),
            Some(Released::Failed(message)) => Err(message),
            // No spare, or it died while it waited (the OOM killer, an operator): build one now.
            Some(Released::Gone) | None => launch(
                shared,
                &stack,
                home.as_ref(),
                &job.blueprint,
                job.call,
                job.stats,
            ),
        };
        (job.reply)(result);
        // Calls already waiting come before the next one's spare.
        match jobs.try_recv() {
            Ok(next) => {
                waiting = Some(next);
                continue;
            }
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {}
        }
        if let Some(key) = key {
            spare = build_spare(shared, home.as_ref(), key)
                .inspect_err(|message| {
                    tracing::debug!(%message, "cannot build a sandbox ahead; the next call builds its own");
                })
                .ok();
        }
    }
    if let Some(spare) = spare {
        discard(shared, spare);
    }
}

/// The launcher thread's own network and IPC namespaces, to return to after each clone
/// from a pooled pair (so it never keeps a finished sandbox's namespaces alive).
struct HomeNamespaces {
    net: OwnedFd,
    ipc: OwnedFd,
}

impl HomeNamespaces {
    fn open() -> Option<HomeNamespaces> {
        let net = std::fs::File::open("/proc/thread-self/ns/net").ok()?;
        let ipc = std::fs::File::open("/proc/thread-self/ns/ipc").ok()?;
        Some(HomeNamespaces {
            net: net.into(),
            ipc: ipc.into(),
        })
    }
}

/// A sandbox's network and IPC namespaces (none when the pool is empty: the clone makes
/// them) and its cgroup with the blueprint's limits.
fn resources(shared: &Shared, blueprint: &Blueprint) -> Result<Resources, String> {
    let slot = shared.pool.take();
    let (namespaces, pooled_cgroup) = match slot {
        Some(slot) => (slot.namespaces, slot.cgroup),
        None => (None, None),
    };
    let cgroup = match pooled_cgroup {
        Some(group) => Some(group),
        None if !shared.cgroups.is_empty() => Some(
            shared
                .cgroups
                .create_sandbox()
                .map_err(|err| format!("cannot create the sandbox's cgroup: {err}"))?,
        ),
        None => None,
    };
    if let Some(group) = &cgroup {
        group
            .set_limits(blueprint.limits.memory_bytes, blueprint.limits.processes)
            .map_err(|err| format!("cannot set the sandbox's cgroup limits: {err}"))?;
    }
    Ok((namespaces, cgroup))
}

type Resources = (Option<(OwnedFd, OwnedFd)>, Option<SandboxCgroup>);

/// Builds a sandbox for one call now and starts its program.
fn launch(
    shared: &Shared,
    stack: &Stack,
    home: Option<&HomeNamespaces>,
    blueprint: &Blueprint,
    call: CallSpec,
    stats: Arc<RunStats>,
) -> Result<Sandbox, String> {
    let (namespaces, cgroup) = resources(shared, blueprint)?;
    // The egress proxy's listener must exist in the very namespace the tool gets, before the
    // tool runs: so a sandbox with egress always uses a made-ahead namespace (one made now
    // if the pool is empty), never one the clone creates.
    let (namespaces, egress_listener) = match blueprint.egress_port {
        None => (namespaces, None),
        Some(_) => {
            if home.is_none() {
                return Err("the launcher cannot return to its own network namespace, so it cannot give a sandbox its egress proxy".into());
            }
            let (net, ipc) = match namespaces {
                Some(pair) => pair,
                None => std::thread::scope(|scope| {
                    scope
                        .spawn(make_namespaces)
                        .join()
                        .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
                })
                .map_err(|err| format!("cannot create the sandbox's network namespace: {err}"))?,
            };
            let listener =
                egress::listen_inside(std::os::fd::AsFd::as_fd(&net)).map_err(|err| {
                    format!("cannot open the egress proxy's port inside the sandbox: {err}")
                })?;
            (Some((net, ipc)), Some(listener))
        }
    };
    let mut prepared = plan::prepare(blueprint, call)?;
    if let Some(group) = &cgroup {
        prepared.join(group);
    }
    if prepared.plan.exec {
        arm_test_pause(&mut prepared);
    }
    let (pid, pidfd) = clone_first_process(
        stack,
        home,
        namespaces,
        egress_listener.is_some(),
        &prepared,
    )?;
    // Only the first process holds the status pipe's write end now: it closes when the
    // process executes the program (close-on-exec) or dies.
    drop(prepared.status_child.take());
    let go = prepared.go.take();
    match start(pid, &prepared, go, Until::Exec) {
        Ok(_) => {
            let mut sandbox = Sandbox::new(
                pid,
                pidfd,
                prepared.ends,
                cgroup,
                shared.reaper.clone(),
                stats,
            );
            if let Some(listener) = egress_listener {
                sandbox.set_egress_listener(listener);
            }
            Ok(sandbox)
        }
        Err(message) => {
            // The process is dead or about to be: make sure of it, and reap it here (it
            // exits within microseconds) so the failure is final when it is reported.
            sandbox::kill(pidfd.as_raw_fd());
            let _ = sandbox::wait(pidfd.as_raw_fd(), false);
            Err(message)
        }
    }
}

/// Builds a sandbox for the next call with `key` and parks it (see `spare`).
fn build_spare(
    shared: &Shared,
    home: Option<&HomeNamespaces>,
    key: spare::Key,
) -> Result<Spare, String> {
    let workspace_identity = key.workspace_identity();
    let blueprint = key.blueprint();
    let (namespaces, cgroup) = resources(shared, blueprint)?;
    let mut prepared = plan::prepare(blueprint, key.spec())?;
    prepared.plan.park = true;
    if let Some(group) = &cgroup {
        prepared.join(group);
    }
    let stack = Stack::new().map_err(|err| format!("cannot map a stack: {err}"))?;
    let (pid, pidfd) = clone_first_process(&stack, home, namespaces, false, &prepared)?;
    drop(prepared.status_child.take());
    let go = prepared.go.take();
    match start(pid, &prepared, go, Until::Parked) {
        Ok(go) => Ok(Spare {
            parked: spare::Parked {
                pidfd: pidfd.as_raw_fd(),
            },
            key,
            workspace_identity,
            prepared,
            pid,
            pidfd,
            cgroup,
            go,
            stack,
        }),
        Err(message) => {
            sandbox::kill(pidfd.as_raw_fd());
            let _ = sandbox::wait(pidfd.as_raw_fd(), false);
            Err(message)
        }
    }
}

/// What became of a spare a call took.
enum Released {
    Running(Box<Sandbox>),
    /// It executed the call's program and failed (the program is missing, say).
    Failed(String),
    /// It had died while it waited.
    Gone,
}

/// Hands `spare` the call's program and lets it execute.
fn release(shared: &Shared, mut spare: Spare, call: &CallSpec, stats: Arc<RunStats>) -> Released {
    spare.prepared.set_args(call.argv.clone(), call.env.clone());
    let released = spare
        .go
        .write_all(&[child::GO])
        .map_err(|err| format!("cannot let the sandbox's first process go: {err}"))
        .and_then(|()| await_status(&spare.prepared.status, &mut spare.go, Until::Exec))
        .and_then(|()| check_report(&spare.prepared, Stage::Exec));
    match released {
        Ok(()) => {
            let (sandbox, stack) = spare.into_sandbox(shared.reaper.clone(), stats);
            // It runs the program now, off this stack.
            drop(stack);
            Released::Running(Box::new(sandbox))
        }
        Err(message) => {
            let (stage, _) = spare.prepared.plan.report.read();
            discard(shared, spare);
            if stage == Stage::Exec {
                Released::Failed(message)
            } else {
                Released::Gone
            }
        }
    }
}

/// Kills a spare no call will take, and hands it to the reaper.
fn discard(shared: &Shared, spare: Spare) {
    // Killed before its plan and stack are let go: a killed process never runs user code again.
    sandbox::kill(spare.pidfd.as_raw_fd());
    let (sandbox, stack) = spare.into_sandbox(shared.reaper.clone(), Arc::new(RunStats::default()));
    drop(sandbox);
    drop(stack);
}

/// Clones the first process into its namespaces, returning its pid and pidfd.
fn clone_first_process(
    stack: &Stack,
    home: Option<&HomeNamespaces>,
    namespaces: Option<(OwnedFd, OwnedFd)>,
    must_enter: bool,
    prepared: &Prepared,
) -> Result<(i32, OwnedFd), String> {
    let mut flags = libc::CLONE_VM
        | libc::CLONE_PIDFD
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWUTS
        | libc::SIGCHLD;
    // Pooled namespaces are only used when the thread can return to its own afterwards.
    let pooled = namespaces.as_ref().filter(|_| home.is_some());
    let entered = pooled.is_some_and(|(net, ipc)| {
        setns(net, LinkNameSpaceType::Network)
            .and_then(|()| setns(ipc, LinkNameSpaceType::InterProcessCommunication))
            .is_ok()
    });
    if !entered {
        if must_enter {
            // A namespace of the clone's own would not hold the egress proxy's listener.
            if let Some(home) = home {
                let _ = setns(&home.net, LinkNameSpaceType::Network);
                let _ = setns(&home.ipc, LinkNameSpaceType::InterProcessCommunication);
            }
            return Err("cannot enter the sandbox's network namespace".into());
        }
        flags |= libc::CLONE_NEWNET | libc::CLONE_NEWIPC;
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
    if pooled.is_some()
        && let Some(home) = home
        && (setns(&home.net, LinkNameSpaceType::Network).is_err()
            || setns(&home.ipc, LinkNameSpaceType::InterProcessCommunication).is_err())
    {
        tracing::warn!("the launcher could not return to its own namespaces");
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
    Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// Maps the ids, lets the process go, answers its handshake, and waits until it has
/// executed the program (or failed to), or, for a spare, until it waits for its call.
/// Returns the go-ahead pipe, which a spare's release writes to again.
fn start(
    pid: i32,
    prepared: &Prepared,
    go: Option<OwnedFd>,
    until: Until,
) -> Result<std::fs::File, String> {
    write_proc(pid, "uid_map", &id_map(prepared.uid))
        .map_err(|err| format!("cannot map the sandbox's uid (user namespace): {err}"))?;
    write_proc(pid, "gid_map", &id_map(prepared.gid))
        .map_err(|err| format!("cannot map the sandbox's gid (user namespace): {err}"))?;
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
    Ok(go)
}

/// The first process's report: a failure it wrote, or death before `expected`.
fn check_report(prepared: &Prepared, expected: Stage) -> Result<(), String> {
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
enum Until {
    /// Every write end closed: the process executed the program, or died.
    Exec,
    /// A spare's byte saying it waits for its call (or every end closed: it died).
    Parked,
}

/// Waits on the `status` pipe for what `until` names, answering the first process's
/// handshake on `go` when it comes (see `child`).
fn await_status(status: &OwnedFd, go: &mut std::fs::File, until: Until) -> Result<(), String> {
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
fn arm_test_pause(prepared: &mut Prepared) {
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
pub fn id_map(id: u32) -> String {
    format!("{id} {id} 1\n")
}

fn write_proc(pid: i32, file: &str, text: &str) -> io::Result<()> {
    std::fs::write(format!("/proc/{pid}/{file}"), text)
}

/// Turns a failure the first process reported into a message naming the layer.
pub fn describe_failure(failure: Failure, prepared: &Prepared) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_to_themselves_one_at_a_time() {
        assert_eq!(id_map(1000), "1000 1000 1\n");
        assert_eq!(id_map(65534), "65534 65534 1\n");
    }
}
