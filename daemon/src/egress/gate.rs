//! The gate: one per call, the only way a tool's traffic leaves the daemon. It checks a
//! `host:port` against the profile's rules before anything is resolved, asks the run's
//! approver about unlisted hosts when the profile allows that, resolves the name in the
//! daemon, drops forbidden addresses, and connects to exactly the addresses it checked.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::net::TcpStream;

use super::ledger::Ledger;
use super::metered::MeteredStream;
use super::resolver::Resolver;
use super::rules::{Rules, Verdict, forbidden_address};
use crate::audit::{Act, Auditor};
use crate::domain::DEFAULT_TENANT;
use crate::profile::{HostMatch, HostPattern};

/// Longest one connection attempt may take. Generous for a slow host, short enough that a
/// blackholed address does not eat the call's whole deadline before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Decides whether a host outside the allow-list may be reached, for the rest of a run.
pub trait EgressApprover: Send + Sync {
    /// Asks about `host:port`: `true` allows it for the rest of the run (the approver
    /// remembers the answer); `false` (denied, or no answer by the deadline) refuses it.
    fn ask(&self, host: &str, port: u16) -> BoxFuture<'_, bool>;
}

/// Why the gate refused a connection. The message is what the tool sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("egress to `{host}` refused: not a host name or an IP address")]
    InvalidHost { host: String },
    #[error("egress to {host}:{port} refused: not in the allow-list of profile `{profile}`")]
    NotListed {
        host: String,
        port: u16,
        profile: String,
    },
    #[error(
        "egress to {host}:{port} refused: the deny-list of profile `{profile}` has `{pattern}`"
    )]
    Denied {
        host: String,
        port: u16,
        profile: String,
        pattern: String,
    },
    #[error(
        "egress to {host}:{port} refused: not in the allow-list of profile `{profile}`, and not approved for this run"
    )]
    NotApproved {
        host: String,
        port: u16,
        profile: String,
    },
    #[error("egress to {host}:{port} refused: {reason}")]
    Unresolved {
        host: String,
        port: u16,
        reason: String,
    },
    #[error(
        "egress to {host}:{port} refused: it resolves to {addr} ({why}), which is reachable only when listed by address"
    )]
    ForbiddenAddress {
        host: String,
        port: u16,
        addr: IpAddr,
        why: &'static str,
    },
    #[error(
        "egress to {host}:{port} refused: it resolves to {addr}, and the deny-list of profile `{profile}` has `{pattern}`"
    )]
    DeniedAddress {
        host: String,
        port: u16,
        addr: IpAddr,
        profile: String,
        pattern: String,
    },
    #[error(
        "egress to {host}:{port} refused: this call already tried {} different hosts",
        super::ledger::MAX_CONTACTS
    )]
    TooManyHosts { host: String, port: u16 },
    #[error("egress to {host}:{port} failed: cannot connect: {reason}")]
    Unreachable {
        host: String,
        port: u16,
        reason: String,
    },
}

/// The egress gate of one call.
pub struct Gate {
    rules: Rules,
    resolver: Arc<Resolver>,
    approver: Option<Arc<dyn EgressApprover>>,
    /// Answers already given in this call, so a tool retrying an unlisted host in a loop
    /// raises one approval request, not one per attempt. Held while asking, so concurrent
    /// connections to one host wait for the same answer.
    answers: tokio::sync::Mutex<HashMap<(String, u16), bool>>,
    ledger: Ledger,
    /// The tenant whose tool connects: its audit chain and its metrics' label.
    tenant: Option<String>,
    auditor: Auditor,
    /// The decisions already in the audit log for this gate: a tool that reconnects in a loop
    /// leaves one record per host and outcome, not one per attempt.
    audited: std::sync::Mutex<std::collections::HashSet<(String, u16, bool)>>,
}

/// The host-and-outcome pairs one gate records in the audit log: a tool's real connections
/// are a handful of hosts; past this many it is probing, and each further attempt would be a
/// durable write the tool could repeat without end.
const MAX_AUDITED_HOSTS: usize = 32;

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("rules", &self.rules)
            .field("approver", &self.approver.is_some())
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate with this one's rules and resolver, no approver and a ledger of its own: for
    /// the connections of a long-lived hosted server, which no single call's approvers can
    /// answer for. Each of the server's calls takes into its own ledger what this one gained
    /// while the call was in flight (see `engine::mcp`'s `tool`).
    pub fn detached(&self) -> Gate {
        Gate::new(self.rules.clone(), self.resolver.clone(), None)
            .with_audit(self.auditor.clone(), self.tenant.clone())
    }

    /// Records this gate's decisions in `tenant`'s audit chain (the operator's when none).
    pub fn with_audit(mut self, auditor: Auditor, tenant: Option<String>) -> Gate {
        self.auditor = auditor;
        self.tenant = tenant;
        self
    }

    /// Counts a decision, and records it in the tenant's audit chain the first time for its
    /// host and outcome — for at most [`MAX_AUDITED_HOSTS`] of them per gate, then once more
    /// to say that the gate's further decisions are counted, not recorded.
    fn report(&self, host: &str, port: u16, refusal: Option<&Refusal>) {
        let allowed = refusal.is_none();
        crate::metrics::global().egress(self.tenant.as_deref(), allowed);
        let first = {
            let mut audited = self
                .audited
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = (host.to_owned(), port, allowed);
            if audited.contains(&key) {
                false
            } else if audited.len() < MAX_AUDITED_HOSTS {
                audited.insert(key)
            } else {
                // The set is full: the marker goes in once, and nothing after it.
                if audited.insert((String::new(), 0, false)) {
                    self.auditor.record(
                        Act::new(
                            self.tenant.as_deref().unwrap_or(DEFAULT_TENANT),
                            "egress.unrecorded",
                        )
                        .actor("egress gate")
                        .reason(
                            "a tool tried more hosts than the audit log records per call; its \
                             further decisions are counted in the metrics only",
                        )
                        .detail("recorded", MAX_AUDITED_HOSTS),
                    );
                }
                false
            }
        };
        if first {
            let act = Act::new(
                self.tenant.as_deref().unwrap_or(DEFAULT_TENANT),
                if allowed {
                    "egress.allowed"
                } else {
                    "egress.refused"
                },
            )
            .actor("egress gate")
            .subject(format!("{host}:{port}"))
            .reason(refusal.map_or_else(
                || "the profile's network rules allow it".to_owned(),
                ToString::to_string,
            ));
            self.auditor.record(act);
        }
    }

    pub fn new(
        rules: Rules,
        resolver: Arc<Resolver>,
        approver: Option<Arc<dyn EgressApprover>>,
    ) -> Gate {
        Gate {
            rules,
            resolver,
            approver,
            answers: tokio::sync::Mutex::default(),
            ledger: Ledger::default(),
            tenant: None,
            auditor: Auditor::default(),
            audited: std::sync::Mutex::default(),
        }
    }

    /// This call's account of contacts and refusals.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The addresses `host:port` may be reached at, or why it may not. The rules are
    /// checked before the name is resolved: an unlisted name is never looked up.
    pub async fn authorize(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
        let Some(host) = canonical_host(host, port) else {
            let refusal = Refusal::InvalidHost {
                host: host.to_owned(),
            };
            tracing::debug!(%refusal, "egress refused");
            // Not the tool's string itself: any bytes, of any length, would be recorded.
            self.report(
                &format!("<an invalid host name of {} bytes>", host.len()),
                port,
                Some(&Refusal::InvalidHost {
                    host: String::new(),
                }),
            );
            return Err(refusal);
        };
        let checked = self.check(&host, port).await;
        if let Err(refusal) = &checked {
            tracing::debug!(%refusal, "egress refused");
            self.ledger.refused(&host, port, &refusal.to_string());
        }
        self.report(&host, port, checked.as_ref().err());
        checked
    }

    /// Authorizes `host:port` and connects to the first of its checked addresses that
    /// answers. The addresses are never resolved again, so what was checked is what is
    /// reached.
    pub async fn connect(&self, host: &str, port: u16) -> Result<MeteredStream, Refusal> {
        let addrs = self.authorize(host, port).await?;
        let host = canonical_host(host, port).unwrap_or_else(|| host.to_owned());
        let mut last_error = String::from("no address to try");
        for addr in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    tracing::debug!(%host, port, %addr, "egress connected");
                    let counters = self.ledger.connected(&host, port);
                    return Ok(MeteredStream::new(stream, counters));
                }
                Ok(Err(err)) => last_error = format!("{addr}: {err}"),
                Err(_) => {
                    last_error =
                        format!("{addr}: no answer within {} s", CONNECT_TIMEOUT.as_secs());
                }
            }
        }
        let refusal = Refusal::Unreachable {
            host: host.clone(),
            port,
            reason: last_error,
        };
        self.ledger.refused(&host, port, &refusal.to_string());
        Err(refusal)
    }

    async fn check(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
        if !self.ledger.has_room_for(host, port) {
            return Err(Refusal::TooManyHosts {
                host: host.to_owned(),
                port,
            });
        }
        let profile = || self.rules.profile().to_owned();
        let by_address = match self.rules.verdict(host, port) {
            Verdict::Listed { by_address } => by_address,
            Verdict::Denied { pattern } => {
                return Err(Refusal::Denied {
                    host: host.to_owned(),
                    port,
                    profile: profile(),
                    pattern,
                });
            }
            Verdict::Unlisted => {
                let approver = self
                    .approver
                    .as_ref()
                    .filter(|_| self.rules.ask_for_unlisted());
                let Some(approver) = approver else {
                    return Err(Refusal::NotListed {
                        host: host.to_owned(),
                        port,
                        profile: profile(),
                    });
                };
                if !self.ask(approver.as_ref(), host, port).await {
                    return Err(Refusal::NotApproved {
                        host: host.to_owned(),
                        port,
                        profile: profile(),
                    });
                }
                false
            }
        };
        let resolved =
            self.resolver
                .resolve(host, port)
                .await
                .map_err(|err| Refusal::Unresolved {
                    host: host.to_owned(),
                    port,
                    reason: err.to_string(),
                })?;
        let mut first_refusal = None;
        let mut allowed = Vec::with_capacity(resolved.len());
        for addr in resolved {
            let refusal = if let Some(pattern) = self.rules.denied_address(addr.ip(), port) {
                Some(Refusal::DeniedAddress {
                    host: host.to_owned(),
                    port,
                    addr: addr.ip(),
                    profile: profile(),
                    pattern,
                })
            } else if by_address {
                None
            } else {
                forbidden_address(addr.ip()).map(|why| Refusal::ForbiddenAddress {
                    host: host.to_owned(),
                    port,
                    addr: addr.ip(),
                    why,
                })
            };
            match refusal {
                Some(refusal) => {
                    first_refusal.get_or_insert(refusal);
                }
                None => allowed.push(addr),
            }
        }
        match first_refusal {
            Some(refusal) if allowed.is_empty() => Err(refusal),
            _ => Ok(allowed),
        }
    }

    async fn ask(&self, approver: &dyn EgressApprover, host: &str, port: u16) -> bool {
        let mut answers = self.answers.lock().await;
        let key = (host.to_owned(), port);
        if let Some(answer) = answers.get(&key) {
            return *answer;
        }
        let answer = approver.ask(host, port).await;
        answers.insert(key, answer);
        answer
    }
}

/// `host` as the rules and the ledger see it: a lowercase DNS name without a trailing dot,
/// or an address in its standard form; `None` when it is neither.
fn canonical_host(host: &str, port: u16) -> Option<String> {
    let host = host.trim_end_matches('.');
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    if port == 0 {
        return None;
    }
    // The profile's own pattern syntax is the definition of a valid host name.
    match format!("{host}:{port}").parse::<HostPattern>() {
        Ok(HostPattern {
            host: HostMatch::Name(name),
            ..
        }) => Some(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::profile::NetworkPolicy;

    fn gate(allow: &[&str], deny: &[&str], ask: bool, hosts: &[(&str, &str)]) -> Gate {
        gate_with(allow, deny, ask, hosts, None)
    }

    fn gate_with(
        allow: &[&str],
        deny: &[&str],
        ask: bool,
        hosts: &[(&str, &str)],
        approver: Option<Arc<dyn EgressApprover>>,
    ) -> Gate {
        let parse = |list: &[&str]| -> Vec<HostPattern> {
            list.iter().map(|p| p.parse().expect("pattern")).collect()
        };
        let mut overrides: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for (name, addr) in hosts {
            overrides
                .entry((*name).to_owned())
                .or_default()
                .push(addr.parse().expect("ip"));
        }
        Gate::new(
            Rules::new(&NetworkPolicy::AllowList {
                allow: parse(allow),
                deny: parse(deny),
                ask_for_unlisted: ask,
            }),
            Arc::new(Resolver::new(overrides)),
            approver,
        )
    }

    /// Answers a fixed way and counts the questions.
    struct Fixed {
        answer: bool,
        asked: AtomicUsize,
    }

    impl EgressApprover for Fixed {
        fn ask(&self, _host: &str, _port: u16) -> BoxFuture<'_, bool> {
            self.asked.fetch_add(1, Ordering::Relaxed);
            Box::pin(std::future::ready(self.answer))
        }
    }

    #[tokio::test]
    async fn unlisted_names_are_refused_before_any_lookup() {
        // `.invalid` never resolves: had the gate looked it up, the refusal would be a
        // resolution failure rather than the allow-list's.
        let gate = gate(&["ok.test:80"], &[], false, &[("ok.test", "198.51.100.1")]);
        let err = gate
            .authorize("secret-abc123.exfil.invalid", 80)
            .await
            .expect_err("unlisted");
        assert!(matches!(err, Refusal::NotListed { .. }), "{err}");
        assert!(err.to_string().contains("not in the allow-list"), "{err}");
        let ledger = gate.ledger().snapshot();
        assert_eq!(ledger.len(), 1);
        assert_eq!(ledger[0].host, "secret-abc123.exfil.invalid");
        assert_eq!(ledger[0].refused, 1);
        assert_eq!(
            gate.authorize("OK.test.", 80).await.expect("listed"),
            vec!["198.51.100.1:80".parse().expect("addr")]
        );
    }

    #[tokio::test]
    async fn deny_wins_and_wildcard_edges_hold() {
        let gate = gate(
            &["*.github.test:443", "github.test:443"],
            &["gist.github.test:443"],
            false,
            &[
                ("api.github.test", "198.51.100.1"),
                ("gist.github.test", "198.51.100.1"),
            ],
        );
        assert!(gate.authorize("api.github.test", 443).await.is_ok());
        let denied = gate
            .authorize("gist.github.test", 443)
            .await
            .expect_err("deny wins");
        assert!(matches!(denied, Refusal::Denied { .. }), "{denied}");
        for edge in ["evil-github.test", "github.test.evil.test"] {
            let err = gate.authorize(edge, 443).await.expect_err(edge);
            assert!(matches!(err, Refusal::NotListed { .. }), "{edge}: {err}");
        }
    }

    #[tokio::test]
    async fn names_of_internal_addresses_are_refused_unless_listed_by_address() {
        let gate = gate(
            &[
                "loopback.test:80",
                "metadata.test:80",
                "mapped.test:80",
                "mixed.test:80",
                "10.9.9.1:80",
            ],
            &[],
            false,
            &[
                ("loopback.test", "127.0.0.1"),
                ("metadata.test", "169.254.169.254"),
                ("mapped.test", "::ffff:127.0.0.1"),
                ("mixed.test", "127.0.0.1"),
                ("mixed.test", "198.51.100.9"),
            ],
        );
        for (name, addr) in [
            ("loopback.test", "127.0.0.1"),
            ("metadata.test", "169.254.169.254"),
            ("mapped.test", "::ffff:127.0.0.1"),
        ] {
            let err = gate.authorize(name, 80).await.expect_err(name);
            match &err {
                Refusal::ForbiddenAddress { addr: got, .. } => {
                    assert_eq!(got.to_string(), addr);
                }
                other => panic!("{name}: {other}"),
            }
            assert!(err.to_string().contains(addr), "{err}");
        }
        assert_eq!(
            gate.authorize("mixed.test", 80).await.expect("public part"),
            vec!["198.51.100.9:80".parse().expect("addr")]
        );
        assert_eq!(
            gate.authorize("10.9.9.1", 80)
                .await
                .expect("listed by address"),
            vec!["10.9.9.1:80".parse().expect("addr")]
        );
        let err = gate.authorize("127.0.0.1", 80).await.expect_err("literal");
        assert!(matches!(err, Refusal::NotListed { .. }), "{err}");
    }

    #[tokio::test]
    async fn unlisted_hosts_go_to_the_approver_once_per_call() {
        let yes = Arc::new(Fixed {
            answer: true,
            asked: AtomicUsize::new(0),
        });
        let gate = gate_with(
            &[],
            &["blocked.test:80"],
            true,
            &[("new.test", "198.51.100.2"), ("lo.test", "127.0.0.1")],
            Some(yes.clone()),
        );
        assert!(gate.authorize("new.test", 80).await.is_ok());
        assert!(gate.authorize("new.test", 80).await.is_ok());
        assert_eq!(yes.asked.load(Ordering::Relaxed), 1);
        // Approval never lifts the deny-list or the address rules.
        assert!(matches!(
            gate.authorize("blocked.test", 80).await,
            Err(Refusal::Denied { .. })
        ));
        assert!(matches!(
            gate.authorize("lo.test", 80).await,
            Err(Refusal::ForbiddenAddress { .. })
        ));

        let no = Arc::new(Fixed {
            answer: false,
            asked: AtomicUsize::new(0),
        });
        let gate = gate_with(&[], &[], true, &[], Some(no.clone()));
        for _ in 0..3 {
            let err = gate.authorize("new.test", 80).await.expect_err("denied");
            assert!(matches!(err, Refusal::NotApproved { .. }), "{err}");
        }
        assert_eq!(no.asked.load(Ordering::Relaxed), 1);

        // Without `ask_for_unlisted` the approver is never asked.
        let asked = yes.asked.load(Ordering::Relaxed);
        let gate = gate_with(&[], &[], false, &[], Some(yes.clone()));
        assert!(matches!(
            gate.authorize("new.test", 80).await,
            Err(Refusal::NotListed { .. })
        ));
        assert_eq!(yes.asked.load(Ordering::Relaxed), asked);
    }

    #[tokio::test]
    async fn odd_hosts_are_not_hosts() {
        let gate = gate(&["ok.test:80"], &[], false, &[]);
        for odd in [
            "",
            "ok.test/x",
            "ok test",
            "*.ok.test",
            "a\0b",
            "ok.test:80",
        ] {
            let err = gate.authorize(odd, 80).await.expect_err(odd);
            assert!(matches!(err, Refusal::InvalidHost { .. }), "{odd:?}: {err}");
        }
    }

    #[tokio::test]
    async fn connect_counts_bytes_both_ways() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut buf = [0u8; 5];
            stream.read_exact(&mut buf).await.expect("read");
            stream.write_all(b"0123456789").await.expect("write");
        });
        let gate = gate(&[&format!("127.0.0.1:{port}")], &[], false, &[]);
        let mut stream = gate.connect("127.0.0.1", port).await.expect("connect");
        stream.write_all(b"hello").await.expect("write");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.expect("read");
        server.await.expect("server");
        assert_eq!(got, b"0123456789");
        let contacts = gate.ledger().snapshot();
        assert_eq!(contacts.len(), 1);
        assert_eq!(
            (
                contacts[0].connections,
                contacts[0].bytes_sent,
                contacts[0].bytes_received
            ),
            (1, 5, 10)
        );
    }
}
