//! The sockets the daemon serves on: a TCP address, or a Unix socket private to the daemon's
//! user.

use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};

use crate::config::ListenAddr;

/// A bound listening socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix {
        listener: UnixListener,
        path: PathBuf,
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
}

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
            Listener::Unix { path, .. } => format!("unix:{}", path.display()),
        }
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
        path: path.to_owned(),
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
