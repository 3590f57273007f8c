//! Where an outgoing wasi-http request goes: the host and port its URI names, in the form
//! the egress gate checks and connects to.
//!
//! This is the one place that reads a guest's authority, so every request — and every hop of
//! a redirect the guest follows, each being a new request — is checked on exactly the host
//! and port it will be sent to. Anything ambiguous is refused rather than interpreted.

use std::net::{IpAddr, Ipv6Addr};

use http::Uri;
use http::uri::Scheme;

/// Why a request's URI names no destination the gate can check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorityError {
    #[error("the request has no scheme")]
    NoScheme,
    #[error("the scheme `{0}` is not http or https")]
    Scheme(String),
    #[error("the request names no host")]
    NoHost,
    /// `user@host`: HTTP sends credentials in headers, and a userinfo part only serves to
    /// make one authority read as another.
    #[error("the authority `{0}` carries a user name")]
    UserInfo(String),
    #[error("the host `{0}` is neither a name nor an address")]
    Host(String),
    #[error("port 0 cannot be connected to")]
    PortZero,
}

/// The destination of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// A lowercase DNS name without a trailing dot, or an address literal (IPv6 without
    /// brackets).
    pub host: String,
    pub port: u16,
    /// Whether the request is `https`, so the connection is wrapped in TLS.
    pub tls: bool,
}

impl Target {
    /// Reads the destination of `uri`; the port defaults from the scheme.
    pub fn of(uri: &Uri) -> Result<Target, AuthorityError> {
        let scheme = uri.scheme().ok_or(AuthorityError::NoScheme)?;
        let (tls, default_port) = if *scheme == Scheme::HTTPS {
            (true, 443)
        } else if *scheme == Scheme::HTTP {
            (false, 80)
        } else {
            return Err(AuthorityError::Scheme(scheme.as_str().to_owned()));
        };
        let authority = uri.authority().ok_or(AuthorityError::NoHost)?;
        if authority.as_str().contains('@') {
            return Err(AuthorityError::UserInfo(authority.as_str().to_owned()));
        }
        let host = host_of(authority.host())?;
        let port = match authority.port_u16() {
            Some(0) => return Err(AuthorityError::PortZero),
            Some(port) => port,
            None => default_port,
        };
        Ok(Target { host, port, tls })
    }

    /// The host as an address, when it is an address literal.
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

fn host_of(raw: &str) -> Result<String, AuthorityError> {
    if let Some(inner) = raw.strip_prefix('[') {
        return inner
            .strip_suffix(']')
            .and_then(|ip| ip.parse::<Ipv6Addr>().ok())
            .map(|ip| ip.to_string())
            .ok_or_else(|| AuthorityError::Host(raw.to_owned()));
    }
    // `name.` and `name` are the same DNS name; the rules and the resolver know only the
    // second.
    let host = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    if host.is_empty() {
        return Err(AuthorityError::NoHost);
    }
    let valid = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && !host.starts_with('.')
        && !host.contains("..");
    if !valid {
        return Err(AuthorityError::Host(raw.to_owned()));
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(uri: &str) -> Result<Target, AuthorityError> {
        Target::of(&uri.parse::<Uri>().expect("a valid URI"))
    }

    fn ok(host: &str, port: u16, tls: bool) -> Result<Target, AuthorityError> {
        Ok(Target {
            host: host.to_owned(),
            port,
            tls,
        })
    }

    #[test]
    fn ports_default_from_the_scheme() {
        assert_eq!(
            target("http://allowed.test/x"),
            ok("allowed.test", 80, false)
        );
        assert_eq!(
            target("https://allowed.test"),
            ok("allowed.test", 443, true)
        );
        assert_eq!(
            target("https://allowed.test:8443/"),
            ok("allowed.test", 8443, true)
        );
        assert_eq!(
            target("http://allowed.test:443/"),
            ok("allowed.test", 443, false)
        );
    }

    #[test]
    fn names_are_lowercased_and_lose_a_trailing_dot() {
        assert_eq!(
            target("http://API.GitHub.com./"),
            ok("api.github.com", 80, false)
        );
    }

    #[test]
    fn address_literals_keep_their_address() {
        assert_eq!(
            target("http://127.0.0.1:8080/"),
            ok("127.0.0.1", 8080, false)
        );
        let v6 = target("https://[::ffff:169.254.169.254]/").expect("an IPv6 literal");
        assert_eq!(v6.host, "::ffff:169.254.169.254");
        assert_eq!(v6.port, 443);
        assert_eq!(v6.ip(), Some("::ffff:169.254.169.254".parse().expect("ip")));
        assert_eq!(target("http://allowed.test/").expect("name").ip(), None);
    }

    #[test]
    fn a_user_name_cannot_disguise_the_host() {
        assert_eq!(
            target("http://allowed.test@evil.test/"),
            Err(AuthorityError::UserInfo("allowed.test@evil.test".into()))
        );
        assert!(matches!(
            target("http://allowed.test:80@evil.test:80/"),
            Err(AuthorityError::UserInfo(_))
        ));
    }

    #[test]
    fn what_names_no_checkable_host_is_refused() {
        assert_eq!(target("/relative"), Err(AuthorityError::NoScheme));
        assert_eq!(
            target("ftp://allowed.test/"),
            Err(AuthorityError::Scheme("ftp".into()))
        );
        assert_eq!(
            target("http://allowed.test:0/"),
            Err(AuthorityError::PortZero)
        );
        assert_eq!(target("http://./"), Err(AuthorityError::NoHost));
        // The `http` crate, which wasi-http builds the request's URI with, already refuses
        // some odd hosts; whatever it lets through must still not pass here.
        for bad in [
            "http://allowed%2etest/",
            "http://a..test/",
            "http://.allowed.test/",
            "http://[not-v6]/",
            "http://a_b.test/",
            "http://allowed.test\\@evil.test/",
        ] {
            let Ok(uri) = bad.parse::<Uri>() else {
                continue;
            };
            let refused = Target::of(&uri);
            assert!(
                matches!(
                    refused,
                    Err(AuthorityError::Host(_) | AuthorityError::UserInfo(_))
                ),
                "{bad}: {refused:?}"
            );
        }
        for passes_the_http_crate in ["http://a..test/", "http://a_b.test/"] {
            assert!(matches!(
                target(passes_the_http_crate),
                Err(AuthorityError::Host(_))
            ));
        }
    }
}
