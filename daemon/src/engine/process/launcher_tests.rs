//! The launcher's choices: when a network namespace handed on is entered, and the id maps.

use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use super::clone::{enter_network, id_map};
use super::pool::setns;
use super::*;

#[test]
fn a_namespace_handed_on_is_entered_only_while_it_holds_no_socket() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::{SocketAddr, UnixListener};

    // On threads of their own: entering namespaces changes the calling thread's.
    std::thread::spawn(|| {
        let home = HomeNamespaces::open().expect("this thread's namespaces");
        let current = || {
            std::fs::metadata("/proc/thread-self/ns/net")
                .expect("this thread's network namespace")
                .ino()
        };
        let at_home = current();
        let (namespace, socket) = std::thread::spawn(|| {
            let namespace = make_namespace(UnshareFlags::NEWNET, "net")
                .unwrap_or_else(|err| panic!("cannot make a network namespace: {err}"));
            let name = SocketAddr::from_abstract_name(b"airlock-handed-on-test")
                .expect("an abstract address");
            let socket = UnixListener::bind_addr(&name).expect("bind in the namespace");
            (namespace, socket)
        })
        .join()
        .expect("the namespace's thread");
        let network = |handed_on| Network {
            fd: namespace.try_clone().expect("dup"),
            handed_on,
        };

        assert!(enter_network(Some(network(true)), &home).is_none());
        assert_eq!(
            current(),
            at_home,
            "the launcher stays in its own namespace"
        );

        // A new namespace is entered as it is (nothing ran in it); one handed on, once
        // the socket is gone.
        assert!(enter_network(Some(network(false)), &home).is_some());
        assert_ne!(current(), at_home);
        setns(&home.net, LinkNameSpaceType::Network).expect("back home");
        drop(socket);
        // A process another test forks meanwhile holds a copy of the socket until it execs
        // (the descriptor is close-on-exec): the namespace is quiet once that is over.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while enter_network(Some(network(true)), &home).is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the namespace still holds a socket 5 s after it was closed"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_ne!(current(), at_home);
    })
    .join()
    .expect("the test's thread");
}

#[test]
fn only_a_sandbox_without_a_network_takes_a_namespace_handed_on() {
    let pool = Pool::default();
    let namespace = std::fs::File::open("/proc/self/ns/net").expect("a namespace");
    pool.quiet.hand_on(namespace.into());
    assert!(
        pool.take_network(false).is_none(),
        "nothing new was made, and the one handed on is not for this sandbox"
    );
    let network = pool.take_network(true).expect("the namespace handed on");
    assert!(network.handed_on);
}

#[test]
fn ids_map_to_themselves_one_at_a_time() {
    assert_eq!(id_map(1000), "1000 1000 1\n");
    assert_eq!(id_map(65534), "65534 65534 1\n");
}
