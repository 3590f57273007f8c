//! Network namespaces: made ahead of the sandboxes that get them, and handed from a finished
//! sandbox without a network to the next one.
//!
//! Making a network namespace is the dearest part of a sandbox (loopback, a few hundred
//! sysctl entries), and tearing one down costs as much again in a kernel worker: together
//! about a fifth of the CPU a `/bin/true` call costs on a two-core host (BENCHMARKS.md,
//! finding 12). A profile without a network (`network = "none"`, seccomp's `Local` family)
//! never needs a new one. Its sandboxes cannot create an IP socket (seccomp lets `socket`
//! make Unix and routing-netlink sockets only), and cannot configure the namespace (it
//! belongs to the host's user namespace, so the sandbox's own capabilities do not reach it:
//! no address, route, sysctl or firewall rule, and no netlink message to another socket);
//! the one thing they can leave in it that a later sandbox could reach is a Unix socket
//! bound to an abstract name. Those close with the sandbox's processes — all of them gone
//! once its pid 1 is reaped — except a socket caught in a cycle of descriptors in flight,
//! which lives until the kernel's garbage collector runs. So a finished sandbox's namespace
//! goes to [`Quiet`], and the launcher gives it to a later no-network sandbox only after
//! checking, from inside it, that it holds no Unix socket at all ([`holds_no_socket`]); one
//! that does is dropped and the sandbox gets a new one.
//!
//! A namespace a networked sandbox used (it may hold TCP state, and its loopback carried the
//! egress proxy) is never handed on.

use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::sync::{Mutex, PoisonError};

/// Finished sandboxes' namespaces kept for the next: in steady use, one serves the running
/// call and one its spare, so a few cover bursts; more would only hold kernel memory.
const QUIET_LIMIT: usize = 4;

/// A network namespace for one sandbox.
pub struct Network {
    pub fd: OwnedFd,
    /// An earlier sandbox used it: it is entered only if it holds no socket now.
    pub handed_on: bool,
}

/// Network namespaces of finished no-network sandboxes, waiting for the next.
#[derive(Default)]
pub struct Quiet {
    namespaces: Mutex<Vec<OwnedFd>>,
}

impl Quiet {
    /// Keeps the namespace of a sandbox whose processes are all gone.
    pub fn hand_on(&self, namespace: OwnedFd) {
        let mut namespaces = self
            .namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if namespaces.len() < QUIET_LIMIT {
            namespaces.push(namespace);
        }
    }

    pub fn take(&self) -> Option<Network> {
        self.namespaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .map(|fd| Network {
                fd,
                handed_on: true,
            })
    }
}

/// Whether the network namespace the calling thread is in holds no Unix socket (the list
/// the kernel shows in `/proc/thread-self/net/unix` is its header alone).
pub fn holds_no_socket() -> io::Result<bool> {
    let mut list = std::fs::File::open("/proc/thread-self/net/unix")?;
    // The header is one line of about 60 bytes; a socket adds a line of its own.
    let mut start = [0u8; 256];
    let mut read = 0;
    while read < start.len() {
        match list.read(&mut start[read..])? {
            0 => break,
            n => read += n,
        }
    }
    Ok(start[..read].iter().filter(|byte| **byte == b'\n').count() <= 1)
}

#[cfg(test)]
mod tests {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};

    use super::*;

    #[test]
    fn a_namespace_with_a_unix_socket_is_not_quiet() {
        // This test's thread shares the test process's namespace, where the harness may hold
        // sockets of its own; a new namespace shows exactly what this test makes.
        std::thread::spawn(|| {
            // SAFETY: without `FILES`, this changes only this thread's network namespace.
            let entered =
                unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) };
            if let Err(err) = entered {
                panic!("cannot make a network namespace for this test: {err}");
            }
            assert!(holds_no_socket().expect("read the socket list"));
            let name =
                SocketAddr::from_abstract_name(b"airlock-quiet-test").expect("an abstract address");
            let bound = UnixListener::bind_addr(&name).expect("bind an abstract socket");
            assert!(!holds_no_socket().expect("read the socket list"));
            drop(bound);
            assert!(holds_no_socket().expect("read the socket list"));
        })
        .join()
        .expect("the test thread");
    }

    #[test]
    fn at_most_a_few_namespaces_wait() {
        let quiet = Quiet::default();
        for _ in 0..QUIET_LIMIT + 2 {
            quiet.hand_on(
                std::fs::File::open("/proc/self/ns/net")
                    .expect("open")
                    .into(),
            );
        }
        let mut taken = 0;
        while let Some(network) = quiet.take() {
            assert!(network.handed_on);
            taken += 1;
        }
        assert_eq!(taken, QUIET_LIMIT);
    }
}
