//! A running sandbox: its first process (by pidfd), its standard streams and its cgroup.
//!
//! The first process is pid 1 of the sandbox's pid namespace, so the kernel kills every
//! other process of the sandbox when it exits, and reaping it means the whole tree is gone.
//! Dropping a sandbox that has not been reaped (a deadline, a cancel, an output limit: the
//! executor dropped the call) sends it SIGKILL at once and hands the reaping, which can take
//! a moment for a large tree, to the reaper thread, so no runtime thread ever blocks on it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::cgroup::{CgroupStats, SandboxCgroup};
use super::keeper::Armed;
use super::network::Quiet;
use super::pidfd::{Waited, kill, wait};
use super::plan::ParentEnds;
use crate::engine::contract::RunStats;

/// What the reaper thread is handed: a process to wait for (already killed), then what the
/// sandbox held.
pub struct Reap {
    pub pidfd: Option<OwnedFd>,
    pub held: Held,
}

/// What a sandbox holds until it is gone, for the reaper to let go of after it.
#[derive(Default)]
pub struct Held {
    pub cgroup: Option<SandboxCgroup>,
    /// Its network namespace, to hand on (only for a sandbox without a network: see
    /// `network.rs`).
    pub network: Option<OwnedFd>,
    /// A reference to its mount namespace, so that the last one is not its first process's:
    /// a process that drops the last reference to a mount namespace unmounts every mount of
    /// it before its exit is reported, waiting out an expedited RCU grace period on the way
    /// (BENCHMARKS.md, finding 12) — on every call's path.
    pub mount: Option<OwnedFd>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.cgroup.is_none() && self.network.is_none() && self.mount.is_none()
    }
}

/// A reference to the mount namespace of process `pid` (none if it cannot be had: then the
/// process unmounts its view itself as it exits).
pub fn hold_mount(pid: i32) -> Option<OwnedFd> {
    std::fs::File::open(format!("/proc/{pid}/ns/mnt"))
        .ok()
        .map(OwnedFd::from)
}

/// Waits for each handed-over sandbox and lets go of what it held — its network namespace
/// handed on, its group removed, its mounts unmounted — until the engine is dropped.
pub fn reaper_loop(jobs: std::sync::mpsc::Receiver<Reap>, quiet: &Quiet) {
    for reap in jobs {
        if let Some(pidfd) = &reap.pidfd {
            // The process was killed: this returns as soon as its namespace is torn down.
            let _ = wait(pidfd.as_raw_fd(), false);
        }
        let Held {
            cgroup,
            network,
            mount,
        } = reap.held;
        // Every process of the sandbox is gone now (see the module doc).
        if let Some(network) = network {
            quiet.hand_on(network);
        }
        drop(cgroup);
        // The last reference: the kernel unmounts the sandbox's whole view here, last, as it
        // waits for a grace period.
        drop(mount);
    }
}

pub struct Sandbox {
    pub pid: i32,
    pidfd: Option<OwnedFd>,
    ends: Option<ParentEnds>,
    held: Held,
    reaper: Sender<Reap>,
    stats: Arc<RunStats>,
    reaped: AtomicBool,
    /// The egress proxy's listener inside the sandbox's network namespace, until taken.
    egress_listener: Option<std::net::TcpListener>,
    /// The deadline keeper's watch over a call's sandbox; dropped with it (after the kill
    /// in `drop`), which tells the keeper the call ended.
    deadline: Option<Armed>,
}

impl Sandbox {
    pub fn new(
        pid: i32,
        pidfd: OwnedFd,
        ends: ParentEnds,
        held: Held,
        reaper: Sender<Reap>,
        stats: Arc<RunStats>,
    ) -> Sandbox {
        Sandbox {
            pid,
            pidfd: Some(pidfd),
            ends: Some(ends),
            held,
            reaper,
            stats,
            reaped: AtomicBool::new(false),
            egress_listener: None,
            deadline: None,
        }
    }

    /// Keeps the keeper's watch over this sandbox for as long as the sandbox.
    pub fn set_deadline(&mut self, armed: Armed) {
        self.deadline = Some(armed);
    }

    pub fn set_egress_listener(&mut self, listener: std::net::TcpListener) {
        self.egress_listener = Some(listener);
    }

    /// The listener the egress proxy serves inside the sandbox; `None` after the first call
    /// or when the profile has no network.
    pub fn take_egress_listener(&mut self) -> Option<std::net::TcpListener> {
        self.egress_listener.take()
    }

    /// The daemon's ends of stdin, stdout and stderr; `None` after the first call.
    pub fn take_ends(&mut self) -> Option<ParentEnds> {
        self.ends.take()
    }

    /// The first process's pidfd, until it is reaped.
    pub fn pidfd(&self) -> Option<BorrowedFd<'_>> {
        self.pidfd
            .as_ref()
            .filter(|_| !self.reaped.load(Ordering::SeqCst))
            .map(AsFd::as_fd)
    }

    /// Sends SIGKILL to the first process, and so to the whole sandbox.
    pub fn kill(&self) {
        if let Some(pidfd) = self.pidfd() {
            kill(pidfd.as_raw_fd());
        }
    }

    /// What the sandbox's group has used so far.
    pub fn cgroup_stats(&self) -> CgroupStats {
        self.held
            .cgroup
            .as_ref()
            .map(SandboxCgroup::stats)
            .unwrap_or_default()
    }

    /// The sandbox's group, when the host has cgroups.
    pub fn cgroup(&self) -> Option<&SandboxCgroup> {
        self.held.cgroup.as_ref()
    }

    /// Whether [`Sandbox::cpu_time`] can say anything on this host.
    pub fn accounts_cpu(&self) -> bool {
        self.held
            .cgroup
            .as_ref()
            .is_some_and(SandboxCgroup::accounts_cpu)
    }

    /// CPU time of the whole group so far, when the host accounts it.
    pub fn cpu_time(&self) -> Option<Duration> {
        self.held.cgroup.as_ref().and_then(SandboxCgroup::cpu_time)
    }

    /// Waits for the first process to exit and reaps it.
    pub async fn wait(&self) -> io::Result<Waited> {
        let Some(pidfd) = &self.pidfd else {
            return Err(io::Error::other("the sandbox was already reaped"));
        };
        let raw = pidfd.as_raw_fd();
        // SAFETY: the pidfd is owned by this sandbox and stays open while `readiness`, local
        // to this call that borrows the sandbox, exists.
        let readiness =
            unsafe { AsyncFd::register_with_interest(Borrowed(raw), Interest::READABLE) }
                .map_err(|err| err.into_parts().1)?;
        loop {
            if let Some(waited) = wait(raw, true)? {
                self.reaped.store(true, Ordering::SeqCst);
                return Ok(waited);
            }
            let mut guard = readiness.readable().await?;
            guard.clear_ready();
        }
    }

    /// Waits without a runtime (the engine's start-up check).
    pub fn wait_blocking(&mut self) -> io::Result<Waited> {
        let Some(pidfd) = &self.pidfd else {
            return Err(io::Error::other("the sandbox was already reaped"));
        };
        let waited = wait(pidfd.as_raw_fd(), false)?
            .ok_or_else(|| io::Error::other("waitid returned without a child"))?;
        self.reaped.store(true, Ordering::SeqCst);
        Ok(waited)
    }

    /// Records what the sandbox used into the call's stats: the group's figures when the
    /// host has them, else the first process's rusage (which includes what it reaped).
    /// Returns the group's figures, read once (four files) for the caller to judge too.
    pub fn record_stats(&self, waited: Option<&Waited>) -> CgroupStats {
        let group = self.cgroup_stats();
        let memory = group
            .peak_memory_bytes
            .or_else(|| waited.map(|waited| waited.max_rss_bytes));
        if let Some(memory) = memory {
            self.stats.record_memory(memory);
        }
        let cpu = group
            .cpu_time
            .or_else(|| waited.map(|waited| waited.cpu_time));
        if let Some(cpu) = cpu {
            self.stats.add_cpu_time(cpu);
        }
        group
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let pidfd = if self.reaped.load(Ordering::SeqCst) {
            None
        } else {
            // Stopped before it ended: measure what it used, then stop it.
            self.record_stats(None);
            self.kill();
            self.pidfd.take()
        };
        self.ends = None;
        let reap = Reap {
            pidfd,
            held: std::mem::take(&mut self.held),
        };
        if reap.pidfd.is_some() || !reap.held.is_empty() {
            // If the reaper is gone (the engine is shutting down), reaping here is the only
            // way left not to leak a zombie; the process is already killed.
            if let Err(unsent) = self.reaper.send(reap) {
                let reap = unsent.0;
                if let Some(pidfd) = &reap.pidfd {
                    let _ = wait(pidfd.as_raw_fd(), false);
                }
            }
        }
    }
}

/// A descriptor the sandbox owns, registered with the runtime only while waiting.
struct Borrowed(RawFd);

impl AsRawFd for Borrowed {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}
