//! The sockets the daemon serves on: a TCP address, a Unix socket private to the daemon's
//! user, or the one socket a systemd socket unit bound for it (socket activation).
//!
//! The inherited socket is taken by hand from `LISTEN_FDS` (through `sd-notify`, which
//! reads the variables) rather than with a crate that wraps it as a listener: the daemon
//! must check the descriptor is a listening stream socket before owning it, and own it at
//! most once.

use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStringExt as _;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt as _, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, UnixListener};

use crate::config::ListenAddr;

/// A bound listening socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix {
        listener: UnixListener,
        /// Its file; none for an abstract socket (only an inherited one can be).
        path: Option<PathBuf>,
        /// Whether the daemon made the file and removes it when serving ends (an inherited
        /// socket's file is its socket unit's).
        owned: bool,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: ListenAddr,
        source: std::io::Error,
    },
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("--listen systemd: {0}")]
    Inherited(String),
    #[error(
        "--unix-socket-trust on {0}, which users other than the daemon's may connect to \
         (others may write its file, or it is abstract): they would act as the default tenant \
         without a token; give the socket unit SocketMode=0600 (or 0660 with a SocketGroup)"
    )]
    TrustedSocketOpen(String),
}

/// Whether the socket systemd handed over was taken: a descriptor is owned once.
static INHERITED_TAKEN: AtomicBool = AtomicBool::new(false);

impl Listener {
    pub async fn bind(addr: &ListenAddr) -> Result<Listener, ListenError> {
        let error = |source| ListenError::Bind {
            addr: addr.clone(),
            source,
        };
        match addr {
            ListenAddr::Tcp(socket) => TcpListener::bind(socket)
                .await
                .map(Listener::Tcp)
                .map_err(error),
            ListenAddr::Unix(path) => bind_private_unix(path).map_err(|err| match err {
                UnixBindError::Io(source) => error(source),
                UnixBindError::NotASocket => ListenError::NotASocket(path.clone()),
            }),
            ListenAddr::Systemd => inherited(),
        }
    }

    /// Whether a user other than the daemon's (and its socket's group) may connect to this
    /// Unix socket: its file lets others write, or it is abstract, with no file to ask.
    /// False for TCP, which has no such thing.
    pub fn unix_open_to_others(&self) -> bool {
        match self {
            Listener::Tcp(_) => false,
            Listener::Unix { path: None, .. } => true,
            Listener::Unix {
                path: Some(path), ..
            } => std::fs::metadata(path).map_or(true, |meta| meta.mode() & 0o002 != 0),
        }
    }

    /// The TCP address served; none for a Unix socket.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(listener) => listener.local_addr().ok(),
            Listener::Unix { .. } => None,
        }
    }

    /// What a client connects to: `host:port` or `unix:/path`.
    pub fn describe(&self) -> String {
        match self {
            Listener::Tcp(listener) => listener
                .local_addr()
                .map_or_else(|_| "?".to_owned(), |addr| addr.to_string()),
            Listener::Unix {
                path: Some(path), ..
            } => format!("unix:{}", path.display()),
            Listener::Unix { path: None, .. } => "an abstract Unix socket".to_owned(),
        }
    }
}

/// The one listening socket systemd bound for this process: a stream socket, TCP or Unix.
fn inherited() -> Result<Listener, ListenError> {
    let failed = |why: String| ListenError::Inherited(why);
    if INHERITED_TAKEN.swap(true, Ordering::SeqCst) {
        return Err(failed("the socket handed over is already served".into()));
    }
    // Not unset: the variables name this process alone (LISTEN_PID), and changing the
    // environment of a process whose threads are running is not sound.
    let fds: Vec<(i32, String)> = sd_notify::listen_fds_with_names(false)
        .map_err(|err| failed(format!("cannot read LISTEN_FDS: {err}")))?
        .collect();
    let fd = match fds.as_slice() {
        [] => {
            return Err(failed(
                "no socket was handed over (LISTEN_FDS and LISTEN_PID unset or another \
                 process's): start airlockd from its socket unit"
                    .into(),
            ));
        }
        [(fd, _)] => *fd,
        more => {
            return Err(failed(format!(
                "{} sockets were handed over; the socket unit must bind exactly one",
                more.len()
            )));
        }
    };
    // Checked before it is owned: a descriptor that is not what systemd hands over is left
    // open, whatever it is.
    // SAFETY: LISTEN_FDS names the descriptor open in this process; it is only borrowed
    // here, for the checks below, while nothing closes it.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    use rustix::net::{AddressFamily, SocketType, sockopt};
    let io = |what: &str, err: rustix::io::Errno| failed(format!("{what}: {err}"));
    if sockopt::socket_type(borrowed).map_err(|err| io("its type", err))? != SocketType::STREAM
        || !sockopt::socket_acceptconn(borrowed).map_err(|err| io("whether it listens", err))?
    {
        return Err(failed(
            "the socket handed over is not a listening stream socket (ListenStream=)".into(),
        ));
    }
    let domain = sockopt::socket_domain(borrowed).map_err(|err| io("its family", err))?;
    let unix = domain == AddressFamily::UNIX;
    if !unix && domain != AddressFamily::INET && domain != AddressFamily::INET6 {
        return Err(failed(
            "the socket handed over is neither TCP nor Unix".into(),
        ));
    }
    let path = if unix {
        let address = rustix::net::getsockname(borrowed).map_err(|err| io("its address", err))?;
        rustix::net::SocketAddrUnix::try_from(address)
            .ok()
            .and_then(|unix| unix.path_bytes().map(|bytes| bytes.to_vec()))
            .filter(|bytes| !bytes.is_empty())
            .map(|bytes| PathBuf::from(std::ffi::OsString::from_vec(bytes)))
    } else {
        None
    };
    // SAFETY: systemd passed this descriptor to this process (LISTEN_PID names it) for it to
    // own, and it is a listening socket; nothing else in the daemon takes descriptors from
    // LISTEN_FDS, and the flag above lets this line run once, so no other owner of it exists
    // or will.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    if unix {
        let listener = std::os::unix::net::UnixListener::from(owned);
        listener
            .set_nonblocking(true)
            .and_then(|()| UnixListener::from_std(listener))
            .map(|listener| Listener::Unix {
                listener,
                path,
                owned: false,
            })
            .map_err(|err| failed(err.to_string()))
    } else {
        let listener = std::net::TcpListener::from(owned);
        listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
            .map(Listener::Tcp)
            .map_err(|err| failed(err.to_string()))
    }
}

enum UnixBindError {
    Io(std::io::Error),
    NotASocket,
}

/// Binds `path` with mode 0600 from its first moment: the socket is bound inside a fresh
/// directory only the daemon's user can enter, made private, and only then renamed into
/// place, so no other user can ever connect through a window of default permissions.
fn bind_private_unix(path: &Path) -> Result<Listener, UnixBindError> {
    match std::fs::symlink_metadata(path) {
        // A socket left by a daemon that did not stop cleanly.
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(UnixBindError::Io)?;
        }
        Ok(_) => return Err(UnixBindError::NotASocket),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(UnixBindError::Io(err)),
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("/"));
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix)
        .map_err(|err| UnixBindError::Io(std::io::Error::other(err.to_string())))?;
    let staging = parent.join(format!(".airlockd-{}", hex::encode(suffix)));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .map_err(UnixBindError::Io)?;
    let staged = staging.join("sock");
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&staging);
    let listener = bound.map_err(UnixBindError::Io)?;
    Ok(Listener::Unix {
        listener,
        path: Some(path.to_owned()),
        owned: true,
    })
}

/// Removes a Unix socket's file when serving ends.
pub(super) struct RemoveOnDrop(pub(super) PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        // Best effort: a socket file left behind is replaced by the next daemon's bind.
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_unix_socket_is_private_and_replaces_a_stale_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("airlockd.sock");
        let addr = ListenAddr::Unix(path.clone());
        let first = Listener::bind(&addr).await.expect("binds");
        let mode = std::fs::metadata(&path)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(first.describe(), format!("unix:{}", path.display()));
        drop(first);
        let _second = Listener::bind(&addr)
            .await
            .expect("replaces the stale socket");
        assert!(path.exists());
        // Nothing but the socket: the staging directory is gone.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("airlockd.sock")]);
    }

    #[tokio::test]
    async fn a_regular_file_is_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("important");
        std::fs::write(&path, "data").expect("write");
        let err = Listener::bind(&ListenAddr::Unix(path.clone()))
            .await
            .expect_err("refused");
        assert!(matches!(err, ListenError::NotASocket(_)), "{err}");
        assert_eq!(std::fs::read_to_string(&path).expect("kept"), "data");
    }
}
