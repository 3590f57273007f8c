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
//! fresh ones — but for the network namespace of a sandbox without a network, which may be
//! one a finished such sandbox left quiet (see `network.rs`). When the pool is empty the
//! sandbox creates its own, at the old cost.
//!
//! Between calls the thread builds the next call's whole sandbox ahead and parks it (see
//! `spare.rs`); a call that finds one fitting only hands it its arguments. Calls already
//! waiting are served before a spare is built.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::process::PidfdFlags;
use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use super::cgroup::{Cgroups, SandboxCgroup};
use super::child::{self, Failure, PauseAt, Stage};
use super::egress;
use super::keeper::{Armed, Keeper};
use super::network::{self, Network, Quiet};
use super::pidfd;
use super::plan::{self, Blueprint, CallSpec, Prepared};
use super::sandbox::{self, Held, Reap, Sandbox};
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

/// One sandbox's worth of resources made ahead of time, but its network namespace (kept
/// apart: a sandbox without a network may get one handed on instead).
struct Slot {
    /// Owned by the host's user namespace.
    ipc: Option<OwnedFd>,
    cgroup: Option<SandboxCgroup>,
}

#[derive(Default)]
struct Stock {
    slots: VecDeque<Slot>,
    /// New network namespaces, owned by the host's user namespace.
    networks: VecDeque<OwnedFd>,
}

#[derive(Default)]
struct Pool {
    stock: Mutex<Stock>,
    changed: Condvar,
    stop: AtomicBool,
    quiet: Arc<Quiet>,
}

impl Pool {
    fn take_slot(&self) -> Option<Slot> {
        let slot = self.lock().slots.pop_front();
        self.changed.notify_all();
        slot
    }

    /// A network namespace: one a finished no-network sandbox left, when `handed_on` allows
    /// it and there is one, else a new one.
    fn take_network(&self, handed_on: bool) -> Option<Network> {
        if handed_on && let Some(network) = self.quiet.take() {
            return Some(network);
        }
        let fd = self.lock().networks.pop_front();
        self.changed.notify_all();
        fd.map(|fd| Network {
            fd,
            handed_on: false,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stock> {
        self.stock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fill(&self, cgroups: &Cgroups) {
        let mut networks_work = true;
        let mut ipc_works = true;
        let mut cgroups_work = !cgroups.is_empty();
        loop {
            let (network_wanted, slot_wanted) = {
                let mut stock = self.lock();
                loop {
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let network_wanted = networks_work && stock.networks.len() < POOL_SIZE;
                    let slot_wanted = (ipc_works || cgroups_work) && stock.slots.len() < POOL_SIZE;
                    if network_wanted || slot_wanted {
                        break (network_wanted, slot_wanted);
                    }
                    if !networks_work && !ipc_works && !cgroups_work {
                        // Nothing to pool on this host.
                        return;
                    }
                    stock = self
                        .changed
                        .wait(stock)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            if network_wanted
                && let Some(network) = made_ahead(&mut networks_work, "network namespaces", || {
                    make_namespace(UnshareFlags::NEWNET, "net")
                })
            {
                self.lock().networks.push_back(network);
            }
            if slot_wanted {
                let ipc = made_ahead(&mut ipc_works, "IPC namespaces", || {
                    make_namespace(UnshareFlags::NEWIPC, "ipc")
                });
                let cgroup = made_ahead(&mut cgroups_work, "cgroups", || cgroups.create_sandbox());
                if ipc.is_some() || cgroup.is_some() {
                    self.lock().slots.push_back(Slot { ipc, cgroup });
                }
            }
        }
    }
}

/// What `make` made, while it `works`: its first failure is logged and ends the tries (each
/// sandbox then makes its own `what`).
fn made_ahead<T>(works: &mut bool, what: &str, make: impl FnOnce() -> io::Result<T>) -> Option<T> {
    if !*works {
        return None;
    }
    make()
        .inspect_err(|err| {
            tracing::warn!(%err, what, "cannot make sandbox resources ahead; each sandbox will make its own");
            *works = false;
        })
        .ok()
}

/// A new namespace of `kind` (`name` under /proc/thread-self/ns), made by moving this thread
/// into it.
fn make_namespace(kind: UnshareFlags, name: &str) -> io::Result<OwnedFd> {
    // SAFETY: without `FILES` (the hazard `unshare_unsafe` documents), unsharing a network or
    // IPC namespace changes only the calling thread's, which is made for this alone.
    unsafe { rustix::thread::unshare_unsafe(kind) }?;
    Ok(std::fs::File::open(format!("/proc/thread-self/ns/{name}"))?.into())
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
    keeper: Arc<Keeper>,
}

pub struct Launcher {
    jobs: Option<Sender<Job>>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Launcher {
    pub fn start(cgroups: Arc<Cgroups>, keeper: Arc<Keeper>) -> io::Result<Launcher> {
        let (reaper, reaps) = mpsc::channel();
        let pool = Pool::default();
        let quiet = pool.quiet.clone();
        std::thread::Builder::new()
            .name("airlock-reaper".into())
            .spawn(move || sandbox::reaper_loop(reaps, &quiet))?;
        let shared = Arc::new(Shared {
            cgroups,
            pool,
            reaper,
            keeper,
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
    let network = shared.pool.take_network(blueprint.hands_on_network());
    let (ipc, pooled_cgroup) = match shared.pool.take_slot() {
        Some(slot) => (slot.ipc, slot.cgroup),
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
    Ok(Resources {
        namespaces: Namespaces { network, ipc },
        cgroup,
    })
}

struct Resources {
    namespaces: Namespaces,
    cgroup: Option<SandboxCgroup>,
}

/// Namespaces made ahead for one sandbox; the clone makes those missing.
struct Namespaces {
    network: Option<Network>,
    ipc: Option<OwnedFd>,
}

/// Builds a sandbox for one call now and starts its program.
fn launch(
    shared: &Shared,
    stack: &Stack,
    home: Option<&HomeNamespaces>,
    blueprint: &Blueprint,
    call: CallSpec,
    stats: Arc<RunStats>,
) -> Result<Sandbox, String> {
    let deadline = call.deadline;
    let Resources {
        mut namespaces,
        cgroup,
    } = resources(shared, blueprint)?;
    // The egress proxy's listener must exist in the very namespace the tool gets, before the
    // tool runs: so a sandbox with egress always uses a made-ahead namespace (one made now
    // if the pool is empty), never one the clone creates.
    let egress_listener = match blueprint.egress_port {
        None => None,
        Some(_) => {
            if home.is_none() {
                return Err("the launcher cannot return to its own network namespace, so it cannot give a sandbox its egress proxy".into());
            }
            let network = match namespaces.network.take() {
                Some(network) => network.fd,
                None => std::thread::scope(|scope| {
                    scope
                        .spawn(|| make_namespace(UnshareFlags::NEWNET, "net"))
                        .join()
                        .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
                })
                .map_err(|err| format!("cannot create the sandbox's network namespace: {err}"))?,
            };
            let listener = egress::listen_inside(network.as_fd()).map_err(|err| {
                format!("cannot open the egress proxy's port inside the sandbox: {err}")
            })?;
            namespaces.network = Some(Network {
                fd: network,
                handed_on: false,
            });
            Some(listener)
        }
    };
    let mut prepared = plan::prepare(blueprint, call)?;
    if let Some(group) = &cgroup {
        prepared.join(group);
    }
    if prepared.plan.exec {
        arm_test_pause(&mut prepared);
    }
    let (pid, pidfd, network) = clone_first_process(
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
    let mount = sandbox::hold_mount(pid);
    // Before the program can start: a call's sandbox never runs unwatched.
    let armed = match deadline.filter(|_| prepared.plan.exec) {
        None => Ok(None),
        Some(deadline) => arm(&shared.keeper, pidfd.as_fd(), deadline).map(Some),
    };
    match armed.and_then(|armed| start(pid, &prepared, go, Until::Exec).map(|_| armed)) {
        Ok(armed) => {
            let held = Held {
                cgroup,
                network: network.filter(|_| blueprint.hands_on_network()),
                mount,
            };
            let mut sandbox = Sandbox::new(
                pid,
                pidfd,
                prepared.ends,
                held,
                shared.reaper.clone(),
                stats,
            );
            if let Some(listener) = egress_listener {
                sandbox.set_egress_listener(listener);
            }
            if let Some(armed) = armed {
                sandbox.set_deadline(armed);
            }
            Ok(sandbox)
        }
        Err(message) => {
            // The process is dead or about to be: make sure of it, and reap it here (it
            // exits within microseconds) so the failure is final when it is reported.
            pidfd::kill(pidfd.as_raw_fd());
            let _ = pidfd::wait(pidfd.as_raw_fd(), false);
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
    let Resources { namespaces, cgroup } = resources(shared, blueprint)?;
    let mut prepared = plan::prepare(blueprint, key.spec())?;
    prepared.plan.park = true;
    if let Some(group) = &cgroup {
        prepared.join(group);
    }
    let stack = Stack::new().map_err(|err| format!("cannot map a stack: {err}"))?;
    let (pid, pidfd, network) = clone_first_process(&stack, home, namespaces, false, &prepared)?;
    drop(prepared.status_child.take());
    let go = prepared.go.take();
    let held = Held {
        cgroup,
        network: network.filter(|_| blueprint.hands_on_network()),
        mount: sandbox::hold_mount(pid),
    };
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
            held,
            go,
            stack,
        }),
        Err(message) => {
            pidfd::kill(pidfd.as_raw_fd());
            let _ = pidfd::wait(pidfd.as_raw_fd(), false);
            Err(message)
        }
    }
}

/// What became of a spare a call took.
enum Released {
    Running(Box<Sandbox>),
    /// It executed the call's program and failed (the program is missing, say), or the
    /// deadline keeper refused the call.
    Failed(String),
    /// It had died while it waited.
    Gone,
}

/// Hands `spare` the call's program and lets it execute.
fn release(shared: &Shared, mut spare: Spare, call: &CallSpec, stats: Arc<RunStats>) -> Released {
    spare.prepared.set_args(call.argv.clone(), call.env.clone());
    // A call the keeper refuses fails here: a sandbox built anew would be refused alike.
    let armed = match call
        .deadline
        .map(|deadline| arm(&shared.keeper, spare.pidfd.as_fd(), deadline))
    {
        None => None,
        Some(Ok(armed)) => Some(armed),
        Some(Err(message)) => {
            discard(shared, spare);
            return Released::Failed(message);
        }
    };
    let released = spare
        .go
        .write_all(&[child::GO])
        .map_err(|err| format!("cannot let the sandbox's first process go: {err}"))
        .and_then(|()| await_status(&spare.prepared.status, &mut spare.go, Until::Exec))
        .and_then(|()| check_report(&spare.prepared, Stage::Exec));
    match released {
        Ok(()) => {
            let (mut sandbox, stack) = spare.into_sandbox(shared.reaper.clone(), stats);
            if let Some(armed) = armed {
                sandbox.set_deadline(armed);
            }
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

/// Hands a sandbox whose program is about to start to the deadline keeper, to be killed at
/// `deadline`; the call fails, its program never started, if it cannot be.
fn arm(keeper: &Keeper, process: BorrowedFd<'_>, deadline: Instant) -> Result<Armed, String> {
    keeper
        .arm(process, deadline)
        .map_err(|err| format!("{err}; the tool did not run"))
}

/// Kills a spare no call will take, and hands it to the reaper.
fn discard(shared: &Shared, spare: Spare) {
    // Killed before its plan and stack are let go: a killed process never runs user code again.
    pidfd::kill(spare.pidfd.as_raw_fd());
    let (sandbox, stack) = spare.into_sandbox(shared.reaper.clone(), Arc::new(RunStats::default()));
    drop(sandbox);
    drop(stack);
}

/// Clones the first process into its namespaces, returning its pid, its pidfd, and the
/// network namespace it entered when that was made ahead.
fn clone_first_process(
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
fn enter_network(network: Option<Network>, home: &HomeNamespaces) -> Option<OwnedFd> {
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
#[path = "launcher_tests.rs"]
mod tests;
