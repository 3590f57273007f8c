//! The allow-list of a profile as a decision: which `host:port` may be reached, and which
//! resolved addresses are never reachable unless listed by address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::profile::{HostMatch, HostPattern, NetworkPolicy, Profile};

/// What the rules say about a `host:port` before anything is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An allow pattern matches. `by_address`: the host is an address literal listed as
    /// such, which is the only way a forbidden address becomes reachable.
    Listed { by_address: bool },
    /// A deny pattern matches: refused whatever the allow-list says.
    Denied { pattern: String },
    /// No pattern matches.
    Unlisted,
}

/// The network rules of one profile.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    profile: String,
    allow: Vec<HostPattern>,
    deny: Vec<HostPattern>,
    ask_for_unlisted: bool,
}

impl Rules {
    /// The rules of `policy`; `NetworkPolicy::None` lists nothing and asks for nothing.
    pub fn new(policy: &NetworkPolicy) -> Rules {
        match policy {
            NetworkPolicy::None => Rules::default(),
            NetworkPolicy::AllowList {
                allow,
                deny,
                ask_for_unlisted,
            } => Rules {
                profile: String::new(),
                allow: allow.clone(),
                deny: deny.clone(),
                ask_for_unlisted: *ask_for_unlisted,
            },
        }
    }

    /// The rules of `profile`'s network policy, named after it in refusals.
    pub fn for_profile(profile: &Profile) -> Rules {
        Rules {
            profile: profile.name.clone(),
            ..Rules::new(&profile.network)
        }
    }

    /// The profile these rules come from (empty when built from a bare policy).
    pub fn profile(&self) -> &str {
        &self.profile
    }

    pub fn ask_for_unlisted(&self) -> bool {
        self.ask_for_unlisted
    }

    /// The verdict on `host:port`; the deny-list always wins.
    pub fn verdict(&self, host: &str, port: u16) -> Verdict {
        if let Some(pattern) = self.deny.iter().find(|p| p.matches(host, port)) {
            return Verdict::Denied {
                pattern: pattern.to_string(),
            };
        }
        match self.allow.iter().find(|p| p.matches(host, port)) {
            Some(pattern) => Verdict::Listed {
                by_address: matches!(pattern.host, HostMatch::Ip(_)),
            },
            None => Verdict::Unlisted,
        }
    }

    /// The deny pattern that names `addr:port` by address, if any: a resolved address on
    /// the deny-list is refused whichever name led to it.
    pub fn denied_address(&self, addr: IpAddr, port: u16) -> Option<String> {
        self.deny
            .iter()
            .find(|pattern| {
                pattern.port == port
                    && matches!(pattern.host, HostMatch::Ip(ip) if canonical(ip) == canonical(addr))
            })
            .map(ToString::to_string)
    }
}

/// Why `addr` may not be reached through a name, or `None` for an ordinary public address.
///
/// IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4) are judged as
/// that IPv4 address, so `::ffff:127.0.0.1` is loopback like `127.0.0.1`.
pub fn forbidden_address(addr: IpAddr) -> Option<&'static str> {
    match addr {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(addr: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = addr.octets();
    if addr == Ipv4Addr::new(169, 254, 169, 254) {
        Some("the cloud metadata address")
    } else if a == 127 {
        Some("loopback")
    } else if a == 0 {
        Some("the unspecified \"this network\" range 0.0.0.0/8")
    } else if a == 169 && b == 254 {
        Some("link-local")
    } else if a == 10 || (a == 172 && (16..32).contains(&b)) || (a == 192 && b == 168) {
        Some("a private range")
    } else if a == 100 && (64..128).contains(&b) {
        Some("the carrier-grade NAT range 100.64.0.0/10")
    } else if a == 198 && (b == 18 || b == 19) {
        Some("the benchmarking range 198.18.0.0/15")
    } else if a == 192 && b == 0 && c == 0 {
        Some("the IETF protocol range 192.0.0.0/24")
    } else if (224..240).contains(&a) {
        Some("multicast")
    } else if addr.is_broadcast() {
        Some("broadcast")
    } else if a >= 240 {
        Some("the reserved range 240.0.0.0/4")
    } else {
        None
    }
}

fn forbidden_v6(addr: Ipv6Addr) -> Option<&'static str> {
    let segments = addr.segments();
    if addr.is_loopback() {
        Some("loopback")
    } else if addr.is_unspecified() {
        Some("the unspecified address")
    } else if segments[0] & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if segments[0] & 0xffc0 == 0xfec0 {
        Some("site-local")
    } else if segments[0] & 0xfe00 == 0xfc00 {
        Some("a private (unique local) range")
    } else if segments[0] & 0xff00 == 0xff00 {
        Some("multicast")
    } else if segments[0] == 0x64 && segments[1] == 0xff9b && segments[2] == 1 {
        Some("the local-use NAT64 range 64:ff9b:1::/48")
    } else if segments[0] == 0x2001 && segments[1] == 0 {
        // Teredo hides an IPv4 address behind a relay the daemon does not control.
        Some("the Teredo range 2001::/32")
    } else if segments[0] == 0x100 && segments[1..4] == [0, 0, 0] {
        Some("the discard range 100::/64")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped `::ffff:a.b.c.d`,
/// IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d` and 6to4 `2002:aabb:ccdd::/48`.
fn embedded_v4(addr: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = addr.segments();
    let low = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
        // `::` and `::1` are IPv6's own, not IPv4-compatible forms.
        if s[5] == 0 && s[6] == 0 {
            return None;
        }
        return Some(low(s[6], s[7]));
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return Some(low(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(low(s[1], s[2]));
    }
    None
}

/// An address compared as the IPv4 address it stands for, when it stands for one.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(addr, IpAddr::V4),
        IpAddr::V4(_) => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        let parse = |list: &[&str]| -> Vec<HostPattern> {
            list.iter()
                .map(|text| text.parse().expect("valid pattern"))
                .collect()
        };
        Rules::new(&NetworkPolicy::AllowList {
            allow: parse(allow),
            deny: parse(deny),
            ask_for_unlisted: false,
        })
    }

    #[test]
    fn the_deny_list_wins_over_the_allow_list() {
        let rules = rules(&["*.github.com:443"], &["gist.github.com:443"]);
        assert_eq!(
            rules.verdict("api.github.com", 443),
            Verdict::Listed { by_address: false }
        );
        assert_eq!(
            rules.verdict("GIST.github.com.", 443),
            Verdict::Denied {
                pattern: "gist.github.com:443".into()
            }
        );
        let both = self::rules(&["x.test:80"], &["x.test:80"]);
        assert!(matches!(both.verdict("x.test", 80), Verdict::Denied { .. }));
    }

    #[test]
    fn wildcards_stop_at_label_boundaries() {
        let rules = rules(&["*.github.com:443", "github.com:443"], &[]);
        assert_eq!(
            rules.verdict("github.com", 443),
            Verdict::Listed { by_address: false }
        );
        for unlisted in [
            "evil-github.com",
            "github.com.evil.test",
            "evilgithub.com",
            "api.github.com.evil.test",
        ] {
            assert_eq!(
                rules.verdict(unlisted, 443),
                Verdict::Unlisted,
                "{unlisted}"
            );
        }
        assert_eq!(rules.verdict("api.github.com", 80), Verdict::Unlisted);
    }

    #[test]
    fn only_address_patterns_list_by_address() {
        let rules = rules(&["10.9.9.1:8080", "internal.test:8080"], &[]);
        assert_eq!(
            rules.verdict("10.9.9.1", 8080),
            Verdict::Listed { by_address: true }
        );
        assert_eq!(
            rules.verdict("internal.test", 8080),
            Verdict::Listed { by_address: false }
        );
        assert_eq!(rules.verdict("10.9.9.2", 8080), Verdict::Unlisted);
    }

    #[test]
    fn no_network_lists_nothing() {
        let rules = Rules::new(&NetworkPolicy::None);
        assert_eq!(rules.verdict("example.com", 443), Verdict::Unlisted);
        assert!(!rules.ask_for_unlisted());
    }

    #[test]
    fn denied_addresses_match_in_any_form() {
        let rules = rules(&["*.example.test:443"], &["203.0.113.9:443"]);
        let v4: IpAddr = "203.0.113.9".parse().expect("ip");
        let mapped: IpAddr = "::ffff:203.0.113.9".parse().expect("ip");
        assert!(rules.denied_address(v4, 443).is_some());
        assert!(rules.denied_address(mapped, 443).is_some());
        assert!(rules.denied_address(v4, 80).is_none());
        assert!(
            rules
                .denied_address("203.0.113.10".parse().expect("ip"), 443)
                .is_none()
        );
    }

    #[test]
    fn internal_addresses_are_forbidden_in_every_form() {
        for forbidden in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.0.1",
            "100.64.0.1",
            "100.127.255.255",
            "198.18.0.1",
            "198.19.255.255",
            "192.0.0.8",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "100::1",
        ] {
            let addr: IpAddr = forbidden.parse().expect("ip");
            assert!(
                forbidden_address(addr).is_some(),
                "{forbidden} was not forbidden"
            );
        }
        assert_eq!(
            forbidden_address("::ffff:169.254.169.254".parse().expect("ip")),
            Some("the cloud metadata address")
        );
    }

    #[test]
    fn public_addresses_are_not_forbidden() {
        for public in [
            "198.51.100.1",
            "203.0.113.7",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.0.1",
            "198.17.0.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700::1111",
            "2001:db8::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            let addr: IpAddr = public.parse().expect("ip");
            assert_eq!(forbidden_address(addr), None, "{public} was forbidden");
        }
    }
}
