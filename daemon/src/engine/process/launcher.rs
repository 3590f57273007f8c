//! Starting sandboxes: the launcher threads that clone each sandbox's first process, the
//! pool that prepares namespaces and cgroups ahead of time, the spare each launcher builds
//! for the next call, and the reaper.
//!
//! Sandboxes are cloned from long-lived threads of the daemon — one per core, up to
//! [`MAX_LAUNCHERS`], taking calls from one queue — for three reasons. The first process
//! shares its thread's memory (`CLONE_VM`) and runs on a stack the thread owns until it
//! executes the tool; a thread cloning one sandbox at a time makes that stack's ownership
//! simple. The first process's parent is its thread, and its parent-death signal fires when
//! *the thread* exits, so the threads must live as long as the engine (a pooled runtime thread
//! would not). And a thread enters a pre-made network and IPC namespace before each clone,
//! which is per-thread state no runtime thread should carry. More than one launcher lets a
//! burst of calls build sandboxes side by side: most of a sandbox's making is waiting for
//! its first process and for the kernel (an unmount waits for an RCU grace period, which the
//! kernel runs one at a time for every thread), so one launcher left the cores idle.
//!
//! Creating a network namespace costs more than the rest of a sandbox together (about 1.5 ms
//! against 0.3 ms here), and an IPC namespace most of the rest; the pool makes both, and
//! each sandbox's cgroups, on its own thread while no call waits, and every sandbox gets
//! fresh ones — but for the network namespace of a sandbox without a network, which may be
//! one a finished such sandbox left quiet (see `network.rs`). When the pool is empty the
//! sandbox creates its own, at the old cost.
//!
//! Between calls each launcher builds the next call's whole sandbox ahead and parks it (see
//! `spare.rs`); a call that finds one fitting only hands it its arguments. Calls already
//! waiting are served before a spare is built.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::Instant;

use rustix::thread::UnshareFlags;

use super::cgroup::{Cgroups, SandboxCgroup};
use super::child::{self, Stage};
use super::egress;
use super::keeper::{Armed, Keeper};
use super::network::Network;
use super::pidfd;
use super::plan::{self, Blueprint, CallSpec};
use super::sandbox::{self, Held, Reap, Sandbox};
use super::spare::{self, Spare};
use super::stack::Stack;
use crate::engine::contract::RunStats;
use crate::pause;

mod clone;
mod pool;

use clone::{
    Started, Until, arm_test_pause, await_status, check_report, clone_first_process,
    mark_first_to_kill, start,
};
use pool::{HomeNamespaces, Namespaces, Pool, make_namespace};

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
        let queue = Arc::new(Mutex::new(queue));
        let mut threads = Vec::new();
        for _ in 0..launchers() {
            let launcher_shared = shared.clone();
            let queue = queue.clone();
            let stack = Stack::new()?;
            threads.push(
                std::thread::Builder::new()
                    .name("airlock-launcher".into())
                    .spawn(move || launcher_loop(&launcher_shared, stack, &queue))?,
            );
        }
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

/// Launcher threads: one per core, up to [`MAX_LAUNCHERS`]. Each builds one sandbox at a
/// time, most of it in the kernel (namespaces, mounts, the clone): more threads than cores
/// would only take turns on them.
fn launchers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_LAUNCHERS)
}

/// Each launcher keeps a spare sandbox built ahead (a process, its namespaces and cgroup):
/// four is what a burst of calls on a small machine uses.
const MAX_LAUNCHERS: usize = 4;

/// The next job: waits for one, or (`wait` false) only takes one already queued. Launchers
/// share the queue; one that finds it held by another waiting for a job knows it is empty.
fn next_job(jobs: &Mutex<Receiver<Job>>, wait: bool) -> Result<Option<Job>, TryRecvError> {
    if wait {
        let queue = jobs.lock().unwrap_or_else(PoisonError::into_inner);
        return queue
            .recv()
            .map(Some)
            .map_err(|_| TryRecvError::Disconnected);
    }
    let queue = match jobs.try_lock() {
        Ok(queue) => queue,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return Ok(None),
    };
    match queue.try_recv() {
        Ok(job) => Ok(Some(job)),
        Err(TryRecvError::Empty) => Ok(None),
        Err(TryRecvError::Disconnected) => Err(TryRecvError::Disconnected),
    }
}

fn launcher_loop(shared: &Shared, stack: Stack, jobs: &Mutex<Receiver<Job>>) {
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
            None => match next_job(jobs, true) {
                Ok(Some(job)) => job,
                Ok(None) | Err(_) => break,
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
        match next_job(jobs, false) {
            Ok(Some(next)) => {
                waiting = Some(next);
                continue;
            }
            Err(_) => break,
            Ok(None) => {}
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
    let started = armed.and_then(|armed| {
        let started = start(pid, &prepared, go, Until::Exec)?;
        if prepared.plan.exec {
            mark_first_to_kill(&started.oom_score);
        }
        Ok(armed)
    });
    match started {
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
        Ok(Started { go, oom_score }) => Ok({
            crate::metrics::global().sandboxes_ready(1);
            Spare {
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
                oom_score,
                stack,
            }
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
    crate::metrics::global().sandboxes_ready(-1);
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
            mark_first_to_kill(&spare.oom_score);
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
    crate::metrics::global().sandboxes_ready(-1);
    // Killed before its plan and stack are let go: a killed process never runs user code again.
    pidfd::kill(spare.pidfd.as_raw_fd());
    let (sandbox, stack) = spare.into_sandbox(shared.reaper.clone(), Arc::new(RunStats::default()));
    drop(sandbox);
    drop(stack);
}

#[cfg(test)]
#[path = "launcher_tests.rs"]
mod tests;
