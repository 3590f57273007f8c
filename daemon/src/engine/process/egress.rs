//! The sandbox's side of egress: its network namespace keeps no route out, and the only
//! thing it can reach is the daemon's egress proxy, listening on the namespace's own
//! loopback at [`PROXY_PORT`].
//!
//! The listener is made by a short-lived thread that enters the sandbox's (pre-made)
//! network namespace, brings `lo` up and binds; a socket belongs to the namespace it was
//! made in for life, so the daemon then serves it from its runtime while the tool can only
//! connect to it from inside. Landlock lets the tool connect to this one port and nothing
//! else, and there is no other interface to route through.

use std::ffi::CString;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Where the proxy listens inside every sandbox. Each sandbox has a namespace of its own,
/// so one fixed port never collides, and the tool's environment and the Landlock rule can
/// be fixed when the tool loads. 3128 is the port proxies conventionally use.
pub const PROXY_PORT: u16 = 3128;

/// Variables that route a tool's HTTP clients through the proxy. Both spellings, because
/// clients disagree on which they read (curl ignores upper-case `HTTP_PROXY`, Python reads
/// either); `NO_PROXY` is never passed, so no host is exempt.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];
const NO_PROXY_VARIABLES: [&str; 2] = ["NO_PROXY", "no_proxy"];

/// The tool's environment with the proxy variables set and any proxy exemption removed.
pub fn proxy_env(env: Vec<(String, String)>) -> Vec<(String, String)> {
    let url = format!("http://{}:{PROXY_PORT}", Ipv4Addr::LOCALHOST);
    let mut env: Vec<(String, String)> = env
        .into_iter()
        .filter(|(name, _)| {
            !PROXY_VARIABLES.contains(&name.as_str())
                && !NO_PROXY_VARIABLES.contains(&name.as_str())
        })
        .collect();
    env.extend(
        PROXY_VARIABLES
            .iter()
            .map(|name| ((*name).to_owned(), url.clone())),
    );
    env
}

/// Binds the proxy's listener on 127.0.0.1:[`PROXY_PORT`] inside the network namespace
/// `net`, bringing its loopback up first.
pub fn listen_inside(net: BorrowedFd<'_>) -> io::Result<TcpListener> {
    let raw = net.as_raw_fd();
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // SAFETY: entering a network namespace moves only this thread, which ends
                // when the closure returns.
                if unsafe { libc::setns(raw, libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                loopback_up()?;
                let listener =
                    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT)))?;
                listener.set_nonblocking(true)?;
                Ok(listener)
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
    })
}

/// Sets `IFF_UP` on `lo` of the calling thread's network namespace (a new namespace's
/// loopback is down, without even 127.0.0.1).
fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain socket call; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero ifreq is a valid (empty) request.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    let name = CString::from(c"lo");
    for (slot, byte) in request.ifr_name.iter_mut().zip(name.as_bytes_with_nul()) {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name and writes the flags of `request`, which outlives
    // the call.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    unsafe { request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads the name and flags of `request`.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_replaces_any_proxy_settings_of_the_profile() {
        let env = proxy_env(vec![
            ("PATH".into(), "/usr/bin".into()),
            ("https_proxy".into(), "http://elsewhere:1".into()),
            ("NO_PROXY".into(), "*".into()),
            ("no_proxy".into(), "evil.test".into()),
        ]);
        let url = format!("http://127.0.0.1:{PROXY_PORT}");
        assert!(env.contains(&("PATH".into(), "/usr/bin".into())));
        for name in PROXY_VARIABLES {
            let values: Vec<_> = env.iter().filter(|(n, _)| n == name).collect();
            assert_eq!(values, vec![&(name.to_owned(), url.clone())], "{name}");
        }
        assert!(
            env.iter()
                .all(|(name, _)| !name.eq_ignore_ascii_case("no_proxy"))
        );
    }

    #[test]
    fn the_listener_lives_in_the_namespace_it_was_bound_in() {
        // A fresh namespace, made on a thread of its own so this one keeps the host's.
        let net: OwnedFd = std::thread::spawn(|| {
            // SAFETY: unsharing the network namespace moves only this thread.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            std::fs::File::open("/proc/thread-self/ns/net")
                .expect("open the namespace")
                .into()
        })
        .join()
        .expect("thread");
        use std::os::fd::AsFd;
        let listener = listen_inside(net.as_fd()).expect("bind inside");
        assert_eq!(
            listener.local_addr().expect("addr"),
            SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT))
        );
        // A second bind in the same namespace collides: the port really is taken there...
        assert!(listen_inside(net.as_fd()).is_err());
        // ...and nothing of it is visible from the host's namespace.
        let from_host = std::net::TcpStream::connect_timeout(
            &SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT)),
            std::time::Duration::from_millis(200),
        );
        if let Ok(stream) = from_host {
            // Something of the host's own listens on 3128; it must not be ours.
            assert_ne!(stream.peer_addr().ok(), None);
            let mut accepted = listener.accept();
            assert!(
                accepted.as_mut().is_err(),
                "the host reached the sandbox's listener"
            );
        }
    }
}
