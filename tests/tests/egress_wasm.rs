//! Network egress of WebAssembly tools, end to end: the real `airlockd` runs in a network
//! namespace the test creates, next to HTTP servers on that namespace's addresses, and the
//! `http_fetch` component (tests/hostile) asks wasi-http for whatever URL the test names.
//! Nothing leaves the machine.
//!
//! The daemon's `[egress] hosts` maps the test names: the allowed names to 198.51.100.1 (a
//! public-looking address), `loopback.test` to 127.0.0.1, `metadata.test` to
//! 169.254.169.254 and `private.test` to 10.9.9.1, where servers listen too, so every
//! refusal is the gate's and never a missing route.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use airlock_proto::v1 as pb;
use airlock_tests::netns::{
    DnsRecorder, HttpResponse, HttpServer, METADATA, NetNs, NetnsDaemon, PRIVATE, PUBLIC,
    spawn_http_server,
};
use airlock_tests::{DaemonOptions, ProfilesDir, TestDaemon, ToolsDir, test_module};
use pb::execute_tool_event::Event;
use serde_json::{Value, json};

/// The servers of one test, all in its namespace.
struct Servers {
    /// 198.51.100.1: the allowed names point here.
    public: HttpServer,
    /// 198.51.100.1, another port: the target of the redirect, never listed.
    unlisted: HttpServer,
    loopback: HttpServer,
    metadata: HttpServer,
    private: HttpServer,
}

struct Fixture {
    // Dropped in this order: the daemon before its namespace.
    daemon: NetnsDaemon,
    servers: Servers,
    dns: DnsRecorder,
    _tools: ToolsDir,
    _profiles: ProfilesDir,
    _dir: tempfile::TempDir,
    _netns: NetNs,
}

fn body(text: &'static str) -> airlock_tests::netns::Handler {
    Arc::new(move |_| HttpResponse::ok(text))
}

/// A profile `net` allowing `allow` (with `deny`), and nothing else.
fn net_profile(allow: &[String], deny: &[String]) -> String {
    let list = |patterns: &[String]| {
        patterns
            .iter()
            .map(|pattern| format!("{pattern:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "description = \"egress test\"\nnetwork = {{ allow = [{}], deny = [{}] }}\n[limits]\nmemory = \"128 MiB\"\nwall_time_ms = 30000\noutput = \"1 MiB\"\n",
        list(allow),
        list(deny)
    )
}

impl Fixture {
    async fn start() -> Fixture {
        let netns = NetNs::new();
        let at = |ip: Ipv4Addr| SocketAddr::new(IpAddr::V4(ip), 0);
        let unlisted = spawn_http_server(&netns, at(PUBLIC), body("unlisted server reached"));
        let redirect_to = format!("http://unlisted.test:{}/stolen", unlisted.addr.port());
        let public = spawn_http_server(
            &netns,
            at(PUBLIC),
            Arc::new(move |request| {
                if request.target == "/redirect" {
                    HttpResponse::redirect(&redirect_to)
                } else {
                    HttpResponse::ok(format!("public server: {}", request.target))
                }
            }),
        );
        let servers = Servers {
            public,
            unlisted,
            loopback: spawn_http_server(&netns, at(Ipv4Addr::LOCALHOST), body("loopback reached")),
            metadata: spawn_http_server(&netns, at(METADATA), body("metadata reached")),
            private: spawn_http_server(&netns, at(PRIVATE), body("private server reached")),
        };
        let dns = DnsRecorder::spawn(&netns);

        let port = servers.public.addr.port();
        let allow = [
            format!("allowed.test:{port}"),
            format!("github.test:{port}"),
            format!("*.github.test:{port}"),
            format!("loopback.test:{}", servers.loopback.addr.port()),
            format!("metadata.test:{}", servers.metadata.addr.port()),
            format!("private.test:{}", servers.private.addr.port()),
            format!("{PRIVATE}:{}", servers.private.addr.port()),
            // Listed but not overridden: the daemon asks the namespace's DNS for it.
            format!("*.via-dns.test:{port}"),
        ];
        let profiles = ProfilesDir::new();
        profiles.add(
            "net",
            &net_profile(&allow, &[format!("gist.github.test:{port}")]),
        );
        let tools = ToolsDir::new();
        tools.add_file(
            "http_fetch",
            &test_module("http_fetch"),
            "profile = \"net\"\nrisk = \"network\"\ntimeout_ms = 30000",
        );
        tools.add_file(
            "socket",
            &test_module("socket"),
            "profile = \"net\"\nrisk = \"network\"\ntimeout_ms = 30000",
        );

        let dir = tempfile::tempdir().unwrap();
        let hosts: Vec<String> = [
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
        ]
        .iter()
        .map(|(name, ip)| format!("\"{name}\" = [\"{ip}\"]"))
        .collect();
        let config = dir.path().join("airlockd.toml");
        std::fs::write(
            &config,
            format!(
                "tools_dirs = [\"{}\"]\nprofiles_dir = \"{}\"\nstate_dir = \"state\"\n[egress]\nhosts = {{ {} }}\n",
                tools.path().display(),
                profiles.path().display(),
                hosts.join(", ")
            ),
        )
        .unwrap();
        let daemon =
            NetnsDaemon::start(&netns, &["--config", config.to_str().unwrap()], dir.path()).await;
        Fixture {
            daemon,
            servers,
            dns,
            _tools: tools,
            _profiles: profiles,
            _dir: dir,
            _netns: netns,
        }
    }

    /// Runs `tool` with `args` and returns its result, which must be OK.
    async fn call(&self, tool: &str, args: Value) -> pb::ToolResult {
        let mut client = pb::tools_client::ToolsClient::new(self.daemon.channel().await);
        let mut stream = client
            .execute_tool(pb::ExecuteToolRequest {
                tool: tool.to_owned(),
                arguments_json: args.to_string(),
                workspace: String::new(),
                timeout_ms: 0,
            })
            .await
            .unwrap_or_else(|status| panic!("{status}\n{}", self.daemon.log()))
            .into_inner();
        while let Some(event) = stream.message().await.unwrap() {
            if let Some(Event::Finished(result)) = event.event {
                assert_eq!(
                    result.status,
                    pb::ToolStatus::Ok as i32,
                    "{result:#?}\n{}",
                    self.daemon.log()
                );
                return result;
            }
        }
        panic!("no result for {tool}:\n{}", self.daemon.log());
    }

    /// Fetches `url` with `http_fetch`: (its report, the result).
    async fn fetch(&self, url: &str, follow_redirects: bool) -> (Value, pb::ToolResult) {
        let result = self
            .call(
                "http_fetch",
                json!({"url": url, "follow_redirects": follow_redirects}),
            )
            .await;
        let report = serde_json::from_str(&result.content)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {result:#?}"));
        (report, result)
    }
}

fn contact<'a>(result: &'a pb::ToolResult, host: &str) -> &'a pb::NetworkContact {
    let network = &result.metadata.as_ref().expect("metadata").network;
    network
        .iter()
        .find(|contact| contact.host == host)
        .unwrap_or_else(|| panic!("no contact with {host}: {network:#?}"))
}

/// The only hop of `report` failed with wasi-http's `error`, and the ledger holds the
/// refusal of `host`, saying `why`.
#[track_caller]
fn assert_refused(report: &Value, result: &pb::ToolResult, host: &str, why: &str) {
    let hops = report["hops"].as_array().expect("hops");
    let last = hops.last().expect("a hop");
    assert_eq!(last["error"], "ErrorCode::HttpRequestDenied", "{report:#}");
    assert!(report.get("body").is_none(), "{report:#}");
    let contact = contact(result, host);
    assert!(contact.refused >= 1, "{contact:#?}");
    assert_eq!(contact.connections, 0, "{contact:#?}");
    assert!(
        contact.refusal.contains(&format!("egress to {host}")) && contact.refusal.contains(why),
        "expected a refusal of {host} ({why}): {contact:#?}"
    );
}

#[tokio::test]
async fn allowed_hosts_are_reached_with_their_bytes_counted_and_nothing_else() {
    let fixture = Fixture::start().await;
    let port = fixture.servers.public.addr.port();

    let url = format!("http://allowed.test:{port}/hello?q=1");
    let (report, result) = fixture.fetch(&url, false).await;
    assert_eq!(
        report,
        json!({"hops": [{"url": url, "status": 200}], "body": "public server: /hello?q=1"})
    );
    let requests = fixture.servers.public.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].target, "/hello?q=1", "sent in origin form");
    assert_eq!(
        requests[0].header("host"),
        Some(format!("allowed.test:{port}").as_str())
    );
    let reached = contact(&result, "allowed.test");
    assert_eq!(reached.port, u32::from(port));
    assert_eq!(reached.connections, 1);
    assert_eq!((reached.refused, reached.refusal.as_str()), (0, ""));
    let response_body = "public server: /hello?q=1";
    let response_head = format!(
        "HTTP/1.1 200 X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response_body.len()
    );
    assert_eq!(
        reached.bytes_received,
        (response_head.len() + response_body.len()) as u64
    );
    let request_line = "GET /hello?q=1 HTTP/1.1\r\n";
    let host_header = format!("host: allowed.test:{port}\r\n");
    assert!(
        reached.bytes_sent >= (request_line.len() + host_header.len() + 2) as u64,
        "{reached:#?}"
    );

    // Wildcards cover subdomains; the deny-list wins over them.
    let (report, _) = fixture
        .fetch(&format!("http://api.github.test:{port}/w"), false)
        .await;
    assert_eq!(report["body"], "public server: /w", "{report:#}");
    let (report, result) = fixture
        .fetch(&format!("http://gist.github.test:{port}/d"), false)
        .await;
    assert_refused(&report, &result, "gist.github.test", "deny-list");

    // Names that merely look like listed ones, an unlisted name, and the allowed host's
    // address itself (listed by name only).
    for host in [
        "evil-github.test",
        "github.test.evil.test",
        "unlisted.test",
        "198.51.100.1",
    ] {
        let (report, result) = fixture
            .fetch(&format!("http://{host}:{port}/x"), false)
            .await;
        assert_refused(
            &report,
            &result,
            host,
            "not in the allow-list of profile `net`",
        );
    }
    // A listed name on another port, and HTTPS to an unlisted host: refused before any byte
    // moves (the TLS handshake would come after the gate).
    let other_port = fixture.servers.unlisted.addr.port();
    let (report, result) = fixture
        .fetch(&format!("http://allowed.test:{other_port}/x"), false)
        .await;
    assert_refused(&report, &result, "allowed.test", "not in the allow-list");
    let (report, result) = fixture
        .fetch(&format!("https://unlisted.test:{port}/x"), false)
        .await;
    assert_refused(&report, &result, "unlisted.test", "not in the allow-list");

    // A user name in the authority cannot make an unlisted host read as a listed one.
    let (report, _) = fixture
        .fetch(
            &format!("http://allowed.test:{port}@unlisted.test:{other_port}/x"),
            false,
        )
        .await;
    assert!(report["hops"][0]["error"].is_string(), "{report:#}");

    assert_eq!(
        fixture.servers.public.requests().len(),
        2,
        "only the two allowed requests arrived: {:#?}",
        fixture.servers.public.requests()
    );
    assert!(fixture.servers.unlisted.requests().is_empty());
}

#[tokio::test]
async fn internal_addresses_are_refused_behind_names_and_redirects() {
    let fixture = Fixture::start().await;
    for (host, server, addr) in [
        (
            "loopback.test",
            &fixture.servers.loopback,
            "127.0.0.1 (loopback)",
        ),
        (
            "metadata.test",
            &fixture.servers.metadata,
            "169.254.169.254 (the cloud metadata address)",
        ),
        (
            "private.test",
            &fixture.servers.private,
            "10.9.9.1 (a private range)",
        ),
    ] {
        let (report, result) = fixture
            .fetch(&format!("http://{host}:{}/", server.addr.port()), false)
            .await;
        assert_refused(&report, &result, host, &format!("resolves to {addr}"));
    }
    // The metadata address as an IPv6 literal of its IPv4 form is no way around it.
    let (report, result) = fixture
        .fetch(
            &format!(
                "http://[::ffff:169.254.169.254]:{}/",
                fixture.servers.metadata.addr.port()
            ),
            false,
        )
        .await;
    assert_refused(
        &report,
        &result,
        "::ffff:169.254.169.254",
        "not in the allow-list",
    );
    assert!(fixture.servers.loopback.requests().is_empty());
    assert!(fixture.servers.metadata.requests().is_empty());
    assert!(fixture.servers.private.requests().is_empty());

    // A private address listed as such is reachable.
    let (report, _) = fixture
        .fetch(
            &format!("http://{PRIVATE}:{}/", fixture.servers.private.addr.port()),
            false,
        )
        .await;
    assert_eq!(report["body"], "private server reached", "{report:#}");

    // The allowed host redirects to an unlisted one. Not followed, the guest sees the 302;
    // followed, the second hop is a request of its own, and refused.
    let url = format!(
        "http://allowed.test:{}/redirect",
        fixture.servers.public.addr.port()
    );
    let stolen = format!(
        "http://unlisted.test:{}/stolen",
        fixture.servers.unlisted.addr.port()
    );
    let (report, _) = fixture.fetch(&url, false).await;
    assert_eq!(
        report,
        json!({"hops": [{"url": url, "status": 302, "location": stolen}], "body": ""})
    );
    let (report, result) = fixture.fetch(&url, true).await;
    assert_eq!(report["hops"][0]["status"], 302, "{report:#}");
    assert_eq!(report["hops"][1]["url"], stolen.as_str(), "{report:#}");
    assert_refused(&report, &result, "unlisted.test", "not in the allow-list");
    assert_eq!(contact(&result, "allowed.test").connections, 1);
    assert!(fixture.servers.unlisted.requests().is_empty());
}

#[tokio::test]
async fn the_guest_cannot_connect_directly_nor_leak_names_through_dns() {
    let fixture = Fixture::start().await;
    let port = fixture.servers.public.addr.port();

    // WASI sockets stay closed under an allow-list: only wasi-http goes out, through the
    // gate. Straight to the allowed server's address, and a lookup of a secret name.
    let secret = "secret-4f1c2a.exfil.test";
    let result = fixture
        .call(
            "socket",
            json!({"tcp": format!("{PUBLIC}:{port}"), "dns": secret}),
        )
        .await;
    let attempts: Value = serde_json::from_str(&result.content).unwrap();
    let attempts = attempts.as_array().expect("attempts");
    assert!(attempts.len() >= 4, "{attempts:#?}");
    for attempt in attempts {
        assert_eq!(attempt["succeeded"], false, "{attempt}");
    }
    assert!(fixture.servers.public.requests().is_empty());

    // The same name through wasi-http: refused before any resolution.
    let (report, result) = fixture
        .fetch(&format!("http://{secret}:{port}/"), false)
        .await;
    assert_refused(&report, &result, secret, "not in the allow-list");

    // Control: a listed name the daemon has no override for is looked up in the namespace's
    // DNS (which answers NXDOMAIN), which proves the recorder hears what the daemon
    // resolves; the guest sees a DNS error.
    let (report, result) = fixture
        .fetch(&format!("http://probe.via-dns.test:{port}/"), false)
        .await;
    let error = report["hops"][0]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("ErrorCode::DnsError"), "{report:#}");
    assert!(
        contact(&result, "probe.via-dns.test")
            .refusal
            .contains("cannot resolve"),
        "{result:#?}"
    );
    let queries = fixture.dns.queries();
    assert!(
        queries.iter().any(|name| name == "probe.via-dns.test"),
        "{queries:?}"
    );
    assert!(
        queries.iter().all(|name| !name.contains("secret")),
        "the secret reached DNS: {queries:?}"
    );
}

/// Needs no namespace: the refusals happen when the daemon loads its tools.
#[tokio::test]
async fn only_components_get_the_network_and_only_when_granted() {
    let tools = ToolsDir::new();
    // A preview 1 module under an allow-list: WASI preview 1 has no network at all.
    tools.add_file("echo_net", &test_module("echo"), "profile = \"net\"");
    // A component importing wasi:http under a profile without network.
    tools.add_file(
        "fetch_strict",
        &test_module("http_fetch"),
        "profile = \"strict\"",
    );
    // The same component under the allow-list loads.
    tools.add_file("fetch_net", &test_module("http_fetch"), "profile = \"net\"");
    let profiles = ProfilesDir::new();
    profiles.add("net", &net_profile(&["allowed.test:80".to_owned()], &[]));
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;
    let refused = daemon.refused();
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(
        refused.iter().any(|why| why.contains("echo_net")
            && why.contains("WASI preview 1 has no network: build a component (wasm32-wasip2)")),
        "{refused:#?}"
    );
    assert!(
        refused
            .iter()
            .any(|why| why.contains("fetch_strict") && why.contains("imports wasi:http")),
        "{refused:#?}"
    );
}
