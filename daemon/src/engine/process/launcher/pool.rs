//! The launcher's pool: namespaces and cgroups made ahead on a thread of their own while no
//! call waits, so that a call's sandbox takes them instead of making them (a network
//! namespace costs more than the rest of a sandbox together), and the launcher thread's own
//! namespaces, to return to after each clone.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use super::super::cgroup::{Cgroups, SandboxCgroup};
use super::super::network::{Network, Quiet};

/// Namespaces and cgroups made ahead: enough for a burst of calls, each a few hundred KiB of
/// kernel memory while it waits.
pub(super) const POOL_SIZE: usize = 4;

/// One sandbox's worth of resources made ahead of time, but its network namespace (kept
/// apart: a sandbox without a network may get one handed on instead).
pub(super) struct Slot {
    /// Owned by the host's user namespace.
    pub(super) ipc: Option<OwnedFd>,
    pub(super) cgroup: Option<SandboxCgroup>,
}

#[derive(Default)]
pub(super) struct Stock {
    pub(super) slots: VecDeque<Slot>,
    /// New network namespaces, owned by the host's user namespace.
    pub(super) networks: VecDeque<OwnedFd>,
}

#[derive(Default)]
pub(super) struct Pool {
    pub(super) stock: Mutex<Stock>,
    pub(super) changed: Condvar,
    pub(super) stop: AtomicBool,
    pub(super) quiet: Arc<Quiet>,
}

impl Pool {
    pub(super) fn take_slot(&self) -> Option<Slot> {
        let slot = self.lock().slots.pop_front();
        self.changed.notify_all();
        slot
    }

    /// A network namespace: one a finished no-network sandbox left, when `handed_on` allows
    /// it and there is one, else a new one.
    pub(super) fn take_network(&self, handed_on: bool) -> Option<Network> {
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

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Stock> {
        self.stock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn fill(&self, cgroups: &Cgroups) {
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
pub(super) fn made_ahead<T>(
    works: &mut bool,
    what: &str,
    make: impl FnOnce() -> io::Result<T>,
) -> Option<T> {
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
pub(super) fn make_namespace(kind: UnshareFlags, name: &str) -> io::Result<OwnedFd> {
    // SAFETY: without `FILES` (the hazard `unshare_unsafe` documents), unsharing a network or
    // IPC namespace changes only the calling thread's, which is made for this alone.
    unsafe { rustix::thread::unshare_unsafe(kind) }?;
    Ok(std::fs::File::open(format!("/proc/thread-self/ns/{name}"))?.into())
}

pub(super) fn setns(fd: &OwnedFd, kind: LinkNameSpaceType) -> io::Result<()> {
    Ok(rustix::thread::move_into_link_name_space(
        fd.as_fd(),
        Some(kind),
    )?)
}

/// The launcher thread's own network and IPC namespaces, to return to after each clone
/// from a pooled pair (so it never keeps a finished sandbox's namespaces alive).
pub(super) struct HomeNamespaces {
    pub(super) net: OwnedFd,
    pub(super) ipc: OwnedFd,
}

impl HomeNamespaces {
    pub(super) fn open() -> Option<HomeNamespaces> {
        let net = std::fs::File::open("/proc/thread-self/ns/net").ok()?;
        let ipc = std::fs::File::open("/proc/thread-self/ns/ipc").ok()?;
        Some(HomeNamespaces {
            net: net.into(),
            ipc: ipc.into(),
        })
    }
}

/// Namespaces made ahead for one sandbox; the clone makes those missing.
pub(super) struct Namespaces {
    pub(super) network: Option<Network>,
    pub(super) ipc: Option<OwnedFd>,
}
