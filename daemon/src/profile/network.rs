//! The network part of a profile: `"none"`, or an allow-list of `host:port` patterns with an
//! optional deny-list that always wins.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, de};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NetworkPolicy {
    /// No network at all: the default.
    #[default]
    None,
    AllowList {
        allow: Vec<HostPattern>,
        deny: Vec<HostPattern>,
        /// Whether a connection to an unlisted host may be put to an approver.
        ask_for_unlisted: bool,
    },
}

impl<'de> Deserialize<'de> for NetworkPolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct AllowListFile {
            allow: Vec<HostPattern>,
            #[serde(default)]
            deny: Vec<HostPattern>,
            #[serde(default)]
            ask_for_unlisted: bool,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            AllowList(AllowListFile),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Word(word) if word == "none" => Ok(NetworkPolicy::None),
            Raw::Word(word) => Err(de::Error::custom(format!(
                "network must be \"none\" or a table with `allow`, not \"{word}\""
            ))),
            Raw::AllowList(list) => Ok(NetworkPolicy::AllowList {
                allow: list.allow,
                deny: list.deny,
                ask_for_unlisted: list.ask_for_unlisted,
            }),
        }
    }
}

/// One `host:port` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    pub host: HostMatch,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMatch {
    /// Exactly this DNS name (lowercase).
    Name(String),
    /// `*.example.com`: any name strictly below `example.com` (stored without the `*.`).
    Subdomains(String),
    /// Exactly this address.
    Ip(IpAddr),
}

impl HostPattern {
    /// Whether a connection to `host:port` (a DNS name or an address literal) matches.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match &self.host {
            HostMatch::Name(name) => host == *name,
            HostMatch::Subdomains(parent) => host
                .strip_suffix(parent.as_str())
                .is_some_and(|label| label.len() > 1 && label.ends_with('.')),
            HostMatch::Ip(ip) => host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|addr| addr == *ip),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::Name(name) => write!(f, "{name}:{}", self.port),
            HostMatch::Subdomains(parent) => write!(f, "*.{parent}:{}", self.port),
            HostMatch::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            HostMatch::Ip(IpAddr::V4(ip)) => write!(f, "{ip}:{}", self.port),
        }
    }
}

impl FromStr for HostPattern {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("invalid network pattern `{text}`: {why}");
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| bad("expected host:port"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|port| *port != 0)
            .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?;
        if let Some(inner) = host.strip_prefix('[') {
            let ip = inner
                .strip_suffix(']')
                .and_then(|ip| ip.parse::<std::net::Ipv6Addr>().ok())
                .ok_or_else(|| bad("bracketed hosts must be IPv6 addresses"))?;
            return Ok(HostPattern {
                host: HostMatch::Ip(IpAddr::V6(ip)),
                port,
            });
        }
        if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
            return Ok(HostPattern {
                host: HostMatch::Ip(IpAddr::V4(ip)),
                port,
            });
        }
        let host = host.to_ascii_lowercase();
        let (name, wildcard) = match host.strip_prefix("*.") {
            Some(parent) => (parent.to_owned(), true),
            None => (host, false),
        };
        if !is_dns_name(&name) {
            return Err(bad(
                "hosts are DNS names (letters, digits, `-`, dots), `*.` followed by one, or IP addresses",
            ));
        }
        if wildcard && !name.contains('.') {
            return Err(bad(
                "a wildcard must cover a domain with at least two labels",
            ));
        }
        Ok(HostPattern {
            host: if wildcard {
                HostMatch::Subdomains(name)
            } else {
                HostMatch::Name(name)
            },
            port,
        })
    }
}

impl<'de> Deserialize<'de> for HostPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(de::Error::custom)
    }
}

fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> HostPattern {
        text.parse().expect("valid pattern")
    }

    #[test]
    fn exact_names_match_only_themselves() {
        let github = pattern("api.github.com:443");
        assert!(github.matches("api.github.com", 443));
        assert!(github.matches("API.GitHub.com.", 443));
        assert!(!github.matches("api.github.com", 80));
        assert!(!github.matches("evil-api.github.com", 443));
        assert!(!github.matches("api.github.com.evil.test", 443));
    }

    #[test]
    fn wildcards_cover_subdomains_at_label_boundaries() {
        let pypi = pattern("*.pypi.org:443");
        assert!(pypi.matches("files.pypi.org", 443));
        assert!(pypi.matches("a.b.pypi.org", 443));
        assert!(!pypi.matches("pypi.org", 443));
        assert!(!pypi.matches("evilpypi.org", 443));
        assert!(!pypi.matches("pypi.org.evil.test", 443));
    }

    #[test]
    fn addresses_match_literally() {
        assert!(pattern("10.0.0.1:8080").matches("10.0.0.1", 8080));
        assert!(pattern("[::1]:80").matches("[::1]", 80));
        assert!(!pattern("10.0.0.1:8080").matches("10.0.0.2", 8080));
    }

    #[test]
    fn invalid_patterns_are_refused() {
        for bad in [
            "github.com",
            "github.com:0",
            "github.com:99999",
            "*:443",
            "*.com:443",
            "git hub.com:443",
            "-x.com:443",
            "[10.0.0.1]:80",
            "a.*.com:443",
        ] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn policy_reads_none_and_allow_lists() {
        #[derive(Deserialize)]
        struct Doc {
            network: NetworkPolicy,
        }
        let none: Doc = toml::from_str("network = \"none\"").expect("none");
        assert_eq!(none.network, NetworkPolicy::None);
        let list: Doc = toml::from_str(
            "network = { allow = [\"api.github.com:443\"], deny = [\"x.github.com:443\"] }",
        )
        .expect("list");
        assert!(
            matches!(list.network, NetworkPolicy::AllowList { ref allow, ref deny, ask_for_unlisted: false } if allow.len() == 1 && deny.len() == 1)
        );
        assert!(toml::from_str::<Doc>("network = \"all\"").is_err());
        assert!(toml::from_str::<Doc>("network = { allow = [\"nope\"] }").is_err());
    }
}
