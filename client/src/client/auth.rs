//! How the client proves who it is: the bearer token sent with every call, found on the same
//! host as the daemon when none is given.

use std::path::{Path, PathBuf};

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::error::ClientError;
pub use crate::token::{TOKEN_ENV, TokenSource};

/// The default tenant's token file in the daemon's state dir (`airlockd` creates it there;
/// the name follows `airlock_daemon::api::token_file::TOKEN_FILE`).
pub const TOKEN_FILE: &str = "token";

/// The daemon's default state dir, by the daemon's own rule (`config::default_state_dir`):
/// `$XDG_STATE_HOME/airlock`, else `~/.local/state/airlock`, else `.airlock`.
pub fn default_state_dir() -> PathBuf {
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(state).join("airlock");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/state/airlock");
    }
    PathBuf::from(".airlock")
}

/// The token to send to `endpoint` and where it came from: `given` (a flag), else
/// `$AIRLOCK_TOKEN`, else the token file of a daemon on this host with the default state dir —
/// that one only when `endpoint` is on this host too ([`is_local`]): the local daemon's token
/// is never sent to an address elsewhere, where a mistyped or hostile server would receive
/// it. No token when there is none to send: the daemon will answer UNAUTHENTICATED, and the
/// error says what to do.
pub fn discover_token(
    given: Option<&str>,
    endpoint: &str,
) -> Result<(Option<String>, TokenSource), ClientError> {
    if let Some(token) = given.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok((Some(token.to_owned()), TokenSource::Given));
    }
    if let Some(token) = std::env::var(TOKEN_ENV)
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
    {
        return Ok((Some(token), TokenSource::Environment));
    }
    let path = default_state_dir().join(TOKEN_FILE);
    if !is_local(endpoint) {
        return Ok((None, TokenSource::Withheld { path }));
    }
    Ok(match read_token_file(&path)? {
        Some(token) => (Some(token), TokenSource::File(path)),
        None => (None, TokenSource::Missing { looked_in: path }),
    })
}

/// Whether the daemon at `endpoint` (a URL as [`crate::connect`] normalises it, or
/// `unix:/path`) is on this host: a Unix socket, `localhost`, or a loopback address.
pub fn is_local(endpoint: &str) -> bool {
    if endpoint.starts_with("unix:") {
        return true;
    }
    let rest = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn read_token_file(path: &Path) -> Result<Option<String>, ClientError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|t| !t.is_empty())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(ClientError::Unreadable(format!(
            "cannot read the token file {}: {err}; pass --token or set AIRLOCK_TOKEN instead",
            path.display()
        ))),
    }
}

/// Sends `authorization: Bearer <token>` with every call, when there is a token.
#[derive(Debug, Clone, Default)]
pub struct BearerToken(Option<MetadataValue<Ascii>>);

impl BearerToken {
    pub fn new(token: Option<&str>) -> Result<BearerToken, ClientError> {
        token
            .map(|token| {
                format!("Bearer {token}").parse().map_err(|_| {
                    ClientError::Credentials("the token is not printable ASCII".to_owned())
                })
            })
            .transpose()
            .map(BearerToken)
    }
}

impl Interceptor for BearerToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_token_wins_and_a_missing_file_is_no_token() -> anyhow::Result<()> {
        let (token, source) = discover_token(Some(" t1 "), "https://remote.example:7411")?;
        assert_eq!(token.as_deref(), Some("t1"));
        assert_eq!(source, TokenSource::Given);
        let dir = tempfile::tempdir()?;
        assert_eq!(read_token_file(&dir.path().join("token"))?, None);
        std::fs::write(dir.path().join("token"), "abc\n")?;
        assert_eq!(
            read_token_file(&dir.path().join("token"))?.as_deref(),
            Some("abc")
        );
        Ok(())
    }

    #[test]
    fn only_a_daemon_on_this_host_is_local() {
        for local in [
            "unix:/run/airlock.sock",
            "http://127.0.0.1:7411",
            "http://127.8.0.1:1",
            "https://[::1]:7411",
            "http://LOCALHOST:7411",
            "http://localhost",
        ] {
            assert!(is_local(local), "{local}");
        }
        for remote in [
            "https://airlock.example.com:7411",
            "http://10.0.0.8:7411",
            "http://127.0.0.1.example.com:1",
            "http://[::2]:7411",
            "http://localhost.example:7411",
        ] {
            assert!(!is_local(remote), "{remote}");
        }
    }

    #[test]
    fn the_interceptor_sends_the_token_as_a_bearer() -> anyhow::Result<()> {
        let mut bearer = BearerToken::new(Some("abc"))?;
        let request = bearer.call(Request::new(()))?;
        assert_eq!(
            request
                .metadata()
                .get("authorization")
                .map(|v| v.to_str().ok()),
            Some(Some("Bearer abc"))
        );
        let mut none = BearerToken::new(None)?;
        assert!(
            none.call(Request::new(()))?
                .metadata()
                .get("authorization")
                .is_none()
        );
        assert!(BearerToken::new(Some("bad\ntoken")).is_err());
        Ok(())
    }
}
