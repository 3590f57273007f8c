//! The world of the network egress tests: `airlockd` in a network namespace the test
//! creates (see [`crate::netns`]), serving the test's tools under its profiles, with an
//! `[egress] hosts` table that maps the test names to the namespace's addresses.
//!
//! The engine tests (`egress_process`, `egress_wasm`) meet the same [`Servers`] under the
//! same allow-list, so that each engine is held to the same refusals; [`EngineFixture`] is
//! that setup, and the checks both make of it. The approval tests bring servers of their
//! own and use [`EgressDaemon`] alone.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use airlock_proto::v1 as pb;
use tempfile::TempDir;

use crate::netns::{
    DnsRecorder, Handler, HttpResponse, HttpServer, METADATA, NetNs, NetnsDaemon, PRIVATE, PUBLIC,
    spawn_http_server,
};
use crate::{ProfilesDir, ToolsDir};

/// `airlockd` running in a namespace, and everything it needs kept alive: dropped daemon
/// first, namespace last.
pub struct EgressDaemon {
    pub daemon: NetnsDaemon,
    _tools: ToolsDir,
    _profiles: ProfilesDir,
    dir: TempDir,
    _netns: NetNs,
}

impl EgressDaemon {
    /// Starts the daemon in `netns`, serving `tools` under `profiles`, with `hosts` as its
    /// `[egress] hosts` (each name resolved to one address, without DNS) and
    /// [`EgressDaemon::workspace_root`] as its only workspace root.
    pub async fn start(
        netns: NetNs,
        tools: ToolsDir,
        profiles: ProfilesDir,
        hosts: &[(&str, Ipv4Addr)],
    ) -> EgressDaemon {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        let hosts: Vec<String> = hosts
            .iter()
            .map(|(name, ip)| format!("\"{name}\" = [\"{ip}\"]"))
            .collect();
        let config = dir.path().join("airlockd.toml");
        std::fs::write(
            &config,
            format!(
                "tools_dirs = [\"{}\"]\nprofiles_dir = \"{}\"\nstate_dir = \"state\"\nworkspace_roots = [\"root\"]\n[egress]\nhosts = {{ {} }}\n",
                tools.path().display(),
                profiles.path().display(),
                hosts.join(", ")
            ),
        )
        .unwrap();
        let daemon =
            NetnsDaemon::start(&netns, &["--config", config.to_str().unwrap()], dir.path()).await;
        EgressDaemon {
            daemon,
            _tools: tools,
            _profiles: profiles,
            dir,
            _netns: netns,
        }
    }

    /// The daemon's workspace root.
    pub fn workspace_root(&self) -> PathBuf {
        self.dir.path().join("root")
    }
}

/// `items` quoted as the elements of a TOML array.
pub fn toml_list(items: &[impl AsRef<str>]) -> String {
    items
        .iter()
        .map(|item| format!("{:?}", item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A profile that allows the host patterns `allow` but those in `deny`; `rest` adds the
/// sections the engine needs (files, environment, limits).
pub fn net_profile(allow: &[String], deny: &[String], rest: &str) -> String {
    format!(
        "description = \"egress test\"\nnetwork = {{ allow = [{}], deny = [{}] }}\n{rest}",
        toml_list(allow),
        toml_list(deny)
    )
}

/// The ledger entry of `host` in `result`'s metadata.
#[track_caller]
pub fn contact<'a>(result: &'a pb::ToolResult, host: &str) -> &'a pb::NetworkContact {
    let network = &result.metadata.as_ref().expect("metadata").network;
    network
        .iter()
        .find(|contact| contact.host == host)
        .unwrap_or_else(|| panic!("no contact with {host}: {network:#?}"))
}

/// Asserts the ledger's side of a refusal of `host`: refused at least once, `why` given,
/// and no connection made.
#[track_caller]
pub fn assert_contact_refused<'a>(
    result: &'a pb::ToolResult,
    host: &str,
    why: &str,
) -> &'a pb::NetworkContact {
    let contact = contact(result, host);
    assert!(contact.refused >= 1, "{contact:#?}");
    assert_eq!(contact.connections, 0, "{contact:#?}");
    assert!(contact.refusal.contains(why), "{contact:#?}");
    contact
}

/// What the engine tests' `[egress] hosts` maps: the listed names, the names that only look
/// like them and an unlisted one to the public address, so that the allow-list alone tells
/// them apart; three more names to the internal addresses, where servers listen too, so that
/// every refusal of them is the gate's and never a missing route.
pub const HOSTS: [(&str, Ipv4Addr); 10] = [
    ("allowed.test", PUBLIC),
    ("github.test", PUBLIC),
    ("api.github.test", PUBLIC),
    ("gist.github.test", PUBLIC),
    ("evil-github.test", PUBLIC),
    ("github.test.evil.test", PUBLIC),
    ("unlisted.test", PUBLIC),
    ("loopback.test", Ipv4Addr::LOCALHOST),
    ("metadata.test", METADATA),
    ("private.test", PRIVATE),
];

/// Hosts the allow-list must not let through on the public server's port: names that
/// merely look like listed ones, an unlisted name, and the allowed names' address itself
/// (listed by name only).
pub const NOT_LISTED: [&str; 4] = [
    "evil-github.test",
    "github.test.evil.test",
    "unlisted.test",
    "198.51.100.1",
];

/// The servers of an engine test, all in its namespace.
pub struct Servers {
    /// 198.51.100.1: the allowed names point here. Answers `public server: <target>`, but
    /// `/redirect` redirects to `unlisted`'s `/stolen`, by the name `unlisted.test`.
    pub public: HttpServer,
    /// 198.51.100.1, another port: the target of the redirect, never listed.
    pub unlisted: HttpServer,
    pub loopback: HttpServer,
    pub metadata: HttpServer,
    pub private: HttpServer,
}

fn body(text: &'static str) -> Handler {
    Arc::new(move |_| HttpResponse::ok(text))
}

impl Servers {
    fn spawn(netns: &NetNs) -> Servers {
        let at = |ip: Ipv4Addr| SocketAddr::new(IpAddr::V4(ip), 0);
        let unlisted = spawn_http_server(netns, at(PUBLIC), body("unlisted server reached"));
        let redirect_to = format!("http://unlisted.test:{}/stolen", unlisted.addr.port());
        let public = spawn_http_server(
            netns,
            at(PUBLIC),
            Arc::new(move |request| {
                if request.target == "/redirect" {
                    HttpResponse::redirect(&redirect_to)
                } else {
                    HttpResponse::ok(format!("public server: {}", request.target))
                }
            }),
        );
        Servers {
            public,
            unlisted,
            loopback: spawn_http_server(netns, at(Ipv4Addr::LOCALHOST), body("loopback reached")),
            metadata: spawn_http_server(netns, at(METADATA), body("metadata reached")),
            private: spawn_http_server(netns, at(PRIVATE), body("private server reached")),
        }
    }

    /// The allow-list of profile `net`: on the public server's port the listed names, and
    /// each internal server by its name (listed, yet refused for where it resolves to);
    /// the private server by its address too, which lists that address.
    fn allow(&self) -> Vec<String> {
        let port = self.public.addr.port();
        vec![
            format!("allowed.test:{port}"),
            format!("github.test:{port}"),
            format!("*.github.test:{port}"),
            format!("loopback.test:{}", self.loopback.addr.port()),
            format!("metadata.test:{}", self.metadata.addr.port()),
            format!("private.test:{}", self.private.addr.port()),
            format!("{PRIVATE}:{}", self.private.addr.port()),
            // Listed but not overridden: the daemon asks the namespace's DNS for it.
            format!("*.via-dns.test:{port}"),
        ]
    }

    /// The deny-list of profile `net`: a name the allow-list's wildcard covers.
    fn deny(&self) -> Vec<String> {
        vec![format!("gist.github.test:{}", self.public.addr.port())]
    }

    /// The listed names that resolve to internal addresses: each with its server, and the
    /// address as a refusal names it.
    pub fn internal(&self) -> [(&'static str, &HttpServer, &'static str); 3] {
        [
            ("loopback.test", &self.loopback, "127.0.0.1 (loopback)"),
            (
                "metadata.test",
                &self.metadata,
                "169.254.169.254 (the cloud metadata address)",
            ),
            ("private.test", &self.private, "10.9.9.1 (a private range)"),
        ]
    }
}

/// An engine test's world: the daemon, its namespace's servers and DNS recorder.
pub struct EngineFixture {
    // Dropped first: the daemon, then its namespace.
    pub egress: EgressDaemon,
    pub servers: Servers,
    pub dns: DnsRecorder,
}

impl EngineFixture {
    /// Starts the servers, then the daemon with [`HOSTS`], serving `tools` under the
    /// repository's profiles and profile `net`: the engine tests' allow- and deny-list, and
    /// `rest` (see [`net_profile`]).
    pub async fn start(tools: ToolsDir, rest: &str) -> EngineFixture {
        let netns = NetNs::new();
        let servers = Servers::spawn(&netns);
        let dns = DnsRecorder::spawn(&netns);
        let profiles = ProfilesDir::new();
        profiles.add("net", &net_profile(&servers.allow(), &servers.deny(), rest));
        let egress = EgressDaemon::start(netns, tools, profiles, &HOSTS).await;
        EngineFixture {
            egress,
            servers,
            dns,
        }
    }

    /// Runs `tool` with `arguments` in the daemon and returns its result.
    pub async fn execute(&self, tool: &str, arguments: serde_json::Value) -> pb::ToolResult {
        self.egress.daemon.execute(tool, arguments).await
    }

    /// Asserts that `result` fetched `target` from the public server as `allowed.test`, the
    /// server's only request so far, and that its ledger entry counts one connection and
    /// every byte of the response; returns the entry, for the engine's own count of what it
    /// sent.
    #[track_caller]
    pub fn assert_reached_once<'a>(
        &self,
        result: &'a pb::ToolResult,
        target: &str,
    ) -> &'a pb::NetworkContact {
        let port = self.servers.public.addr.port();
        let requests = self.servers.public.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].target, target, "sent in origin form");
        assert_eq!(
            requests[0].header("host"),
            Some(format!("allowed.test:{port}").as_str())
        );
        let reached = contact(result, "allowed.test");
        assert_eq!(reached.port, u32::from(port));
        assert_eq!(reached.connections, 1);
        assert_eq!((reached.refused, reached.refusal.as_str()), (0, ""));
        assert_eq!(
            reached.bytes_received,
            HttpResponse::ok(format!("public server: {target}")).wire_len()
        );
        reached
    }

    /// Asserts that the public server received two requests in all (the test's two allowed
    /// ones), and the unlisted server none.
    #[track_caller]
    pub fn assert_only_two_allowed_requests_arrived(&self) {
        assert_eq!(
            self.servers.public.requests().len(),
            2,
            "only the two allowed requests arrived: {:#?}",
            self.servers.public.requests()
        );
        assert!(self.servers.unlisted.requests().is_empty());
    }

    /// Asserts that a fetch of `/redirect` connected to `allowed.test` once and that the
    /// unlisted server, where the redirect points, heard nothing.
    #[track_caller]
    pub fn assert_redirect_went_no_further(&self, result: &pb::ToolResult) {
        assert_eq!(contact(result, "allowed.test").connections, 1);
        assert!(self.servers.unlisted.requests().is_empty());
    }

    /// Asserts that no internal server received a request.
    #[track_caller]
    pub fn assert_internal_servers_untouched(&self) {
        for (host, server, _) in self.servers.internal() {
            assert!(server.requests().is_empty(), "{host} was reached");
        }
    }

    /// Asserts that the namespace's DNS heard `probe.via-dns.test` (which proves it hears
    /// what the daemon resolves) and no name containing `secret`.
    #[track_caller]
    pub fn assert_dns_heard_the_probe_and_no_secret(&self) {
        let queries = self.dns.queries();
        assert!(
            queries.iter().any(|name| name == "probe.via-dns.test"),
            "{queries:?}"
        );
        assert!(
            queries.iter().all(|name| !name.contains("secret")),
            "the secret reached DNS: {queries:?}"
        );
    }
}
