//! Name resolution for egress, done by the daemon and never by a guest, with operator
//! overrides (like `curl --resolve`) from the daemon config's `[egress] hosts`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Longest a lookup may take. The system resolver retries for much longer on a dead server;
/// a tool waiting on a proxy answer is better served by a prompt failure.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a name did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("cannot resolve {host}: {message}")]
    Failed { host: String, message: String },
    #[error("cannot resolve {host}: no answer within {} s", RESOLVE_TIMEOUT.as_secs())]
    TimedOut { host: String },
    #[error("{host} resolves to no address")]
    Empty { host: String },
}

/// Resolves host names for the gate. Built once per daemon and shared by every call.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    /// Lowercase names without a trailing dot, to the addresses they stand for.
    overrides: HashMap<String, Vec<IpAddr>>,
}

impl Resolver {
    /// A resolver that answers the names in `overrides` itself and asks the system for the
    /// rest.
    pub fn new(overrides: HashMap<String, Vec<IpAddr>>) -> Resolver {
        Resolver {
            overrides: overrides
                .into_iter()
                .map(|(name, addrs)| (normalise(&name), addrs))
                .collect(),
        }
    }

    /// The addresses of `host` (a name or an address literal, IPv6 optionally bracketed),
    /// each with `port`, without duplicates, in the resolver's order.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
        let name = normalise(host);
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        if let Some(addrs) = self.overrides.get(&name) {
            return Ok(addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        }
        let found = tokio::time::timeout(
            RESOLVE_TIMEOUT,
            tokio::net::lookup_host((name.as_str(), port)),
        )
        .await
        .map_err(|_| ResolveError::TimedOut { host: name.clone() })?
        .map_err(|err| ResolveError::Failed {
            host: name.clone(),
            message: err.to_string(),
        })?;
        let mut addrs: Vec<SocketAddr> = Vec::new();
        for addr in found {
            if !addrs.contains(&addr) {
                addrs.push(addr);
            }
        }
        if addrs.is_empty() {
            return Err(ResolveError::Empty { host: name });
        }
        Ok(addrs)
    }
}

/// `host` as compared: lowercase, without a trailing dot or IPv6 brackets.
fn normalise(host: &str) -> String {
    host.trim_end_matches('.')
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn overrides_and_literals_resolve_without_a_lookup() {
        let resolver = Resolver::new(HashMap::from([(
            "API.Example.test".to_owned(),
            vec![
                "198.51.100.7".parse().expect("ip"),
                "::1".parse().expect("ip"),
            ],
        )]));
        let addrs = resolver
            .resolve("api.example.TEST.", 443)
            .await
            .expect("override");
        assert_eq!(
            addrs,
            vec![
                "198.51.100.7:443".parse().expect("addr"),
                "[::1]:443".parse().expect("addr")
            ]
        );
        assert_eq!(
            resolver.resolve("[2001:db8::1]", 80).await.expect("v6"),
            vec!["[2001:db8::1]:80".parse().expect("addr")]
        );
        assert_eq!(
            resolver.resolve("203.0.113.4", 80).await.expect("v4"),
            vec!["203.0.113.4:80".parse().expect("addr")]
        );
    }

    #[tokio::test]
    async fn an_unknown_name_fails_with_its_name() {
        let err = Resolver::default()
            .resolve("no-such-host.invalid", 80)
            .await
            .expect_err("`.invalid` never resolves");
        assert!(err.to_string().contains("no-such-host.invalid"), "{err}");
    }
}
