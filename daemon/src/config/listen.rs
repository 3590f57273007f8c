//! Where the daemon listens: a TCP address or an absolute Unix socket path, and the TLS
//! files of a TCP listener.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;

/// Where the daemon listens: a TCP address, or a Unix socket (`unix:/path`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
    /// The one socket systemd's socket unit bound and handed over (`LISTEN_FDS`): written
    /// `systemd`.
    Systemd,
}

impl FromStr for ListenAddr {
    type Err = String;

    fn from_str(text: &str) -> Result<ListenAddr, String> {
        if text == "systemd" {
            return Ok(ListenAddr::Systemd);
        }
        if let Some(path) = text.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(format!("`{text}`: a Unix socket needs an absolute path"));
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        text.parse()
            .map(ListenAddr::Tcp)
            .map_err(|_| format!("`{text}` is neither host:port, unix:/path nor systemd"))
    }
}

impl TryFrom<String> for ListenAddr {
    type Error = String;

    fn try_from(text: String) -> Result<ListenAddr, String> {
        text.parse()
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "{addr}"),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
            ListenAddr::Systemd => f.write_str("systemd"),
        }
    }
}

/// The server's certificate chain and key (PEM), and for mutual TLS the CA client
/// certificates must chain to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// When set, every client must present a certificate signed by this CA.
    pub client_ca: Option<PathBuf>,
}
