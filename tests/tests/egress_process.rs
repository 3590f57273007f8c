//! Network egress of process tools, end to end: the real `airlockd` runs in a network
//! namespace the test creates, next to HTTP servers on that namespace's addresses, and
//! sandboxed `curl` / `getent` try to reach them. Nothing leaves the machine.
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
use airlock_tests::{ProfilesDir, ToolsDir};
use pb::execute_tool_event::Event;

/// What every tool's profile grants besides the network: the system's programs, and what
/// the resolver library reads, so a lookup inside the sandbox really is attempted.
const SYSTEM: &str = "\"/usr\", \"/bin\", \"/lib\", \"/lib64\", \"/etc/ld.so.cache\", \"/etc/resolv.conf\", \"/etc/nsswitch.conf\", \"/etc/hosts\"";

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
            &format!(
                "description = \"egress test\"\nnetwork = {{ allow = [{}], deny = [\"gist.github.test:{port}\"] }}\n[files]\nread_only = [{SYSTEM}]\n[env]\nset = {{ LANG = \"C.UTF-8\", PATH = \"/usr/bin:/bin\", NO_PROXY = \"*\" }}\n[limits]\nmemory = \"256 MiB\"\nwall_time_ms = 30000\noutput = \"1 MiB\"\nprocesses = 32\nopen_files = 128\n",
                allow
                    .iter()
                    .map(|pattern| format!("{pattern:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        let tools = ToolsDir::new();
        // Through the proxy the environment names, as any HTTP client would.
        tools.write_manifest(
            "fetch",
            &manifest(
                "fetch",
                &[
                    "/usr/bin/curl",
                    "-sS",
                    "-L",
                    "--max-time",
                    "20",
                    "-w",
                    "\\nstatus=%{http_code}",
                    "--",
                    "${url}",
                ],
                "url",
            ),
        );
        // Ignoring the proxy: straight to the address.
        tools.write_manifest(
            "direct",
            &manifest(
                "direct",
                &[
                    "/usr/bin/curl",
                    "-sS",
                    "--noproxy",
                    "*",
                    "--max-time",
                    "5",
                    "--",
                    "${url}",
                ],
                "url",
            ),
        );
        tools.write_manifest(
            "lookup",
            &manifest(
                "lookup",
                &["/usr/bin/getent", "hosts", "--", "${name}"],
                "name",
            ),
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
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
                "tools_dirs = [\"{}\"]\nprofiles_dir = \"{}\"\nstate_dir = \"state\"\nworkspace_roots = [\"root\"]\n[egress]\nhosts = {{ {} }}\n",
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

    /// Runs `tool` with `{field: value}` and returns its result.
    async fn call(&self, tool: &str, field: &str, value: &str) -> pb::ToolResult {
        let mut client = pb::tools_client::ToolsClient::new(self.daemon.channel().await);
        let mut stream = client
            .execute_tool(pb::ExecuteToolRequest {
                tool: tool.to_owned(),
                arguments_json: serde_json::json!({ field: value }).to_string(),
                workspace: String::new(),
                timeout_ms: 0,
            })
            .await
            .unwrap_or_else(|status| panic!("{status}\n{}", self.daemon.log()))
            .into_inner();
        while let Some(event) = stream.message().await.unwrap() {
            if let Some(Event::Finished(result)) = event.event {
                return result;
            }
        }
        panic!("no result for {tool}:\n{}", self.daemon.log());
    }

    /// Fetches `url` through the proxy: (what curl printed and why it failed, the result).
    async fn fetch(&self, url: &str) -> (String, pb::ToolResult) {
        let result = self.call("fetch", "url", url).await;
        let text = format!("{}{}", result.content, result.error_message);
        (text, result)
    }
}

fn manifest(name: &str, command: &[&str], field: &str) -> String {
    let command = command
        .iter()
        .map(|item| format!("{item:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"egress test tool\"\nrisk = \"network\"\nengine = \"process\"\ncommand = [{command}]\nabi = \"argv\"\nprofile = \"net\"\ntimeout_ms = 30000\ninput_schema = {{ type = \"object\", properties = {{ {field} = {{ type = \"string\" }} }}, required = [\"{field}\"] }}\n"
    )
}

fn contact<'a>(result: &'a pb::ToolResult, host: &str) -> &'a pb::NetworkContact {
    let network = &result.metadata.as_ref().expect("metadata").network;
    network
        .iter()
        .find(|contact| contact.host == host)
        .unwrap_or_else(|| panic!("no contact with {host}: {network:#?}"))
}

fn assert_refused(text: &str, result: &pb::ToolResult, host: &str, why: &str) {
    assert!(text.contains("status=403"), "{text}\n{result:#?}");
    assert!(
        text.contains(&format!("egress to {host}")) && text.contains(why),
        "expected a refusal of {host} ({why}): {text}"
    );
    let contact = contact(result, host);
    assert!(contact.refused >= 1, "{contact:#?}");
    assert_eq!(contact.connections, 0, "{contact:#?}");
    assert!(contact.refusal.contains(why), "{contact:#?}");
}

#[tokio::test]
async fn allowed_hosts_are_reached_with_their_bytes_counted_and_nothing_else() {
    let fixture = Fixture::start().await;
    let port = fixture.servers.public.addr.port();

    let (text, result) = fixture
        .fetch(&format!("http://allowed.test:{port}/hello"))
        .await;
    assert_eq!(result.status, pb::ToolStatus::Ok as i32, "{result:#?}");
    assert_eq!(text, "public server: /hello\nstatus=200");
    let requests = fixture.servers.public.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].target, "/hello", "sent in origin form");
    assert_eq!(
        requests[0].header("host"),
        Some(format!("allowed.test:{port}").as_str())
    );
    let reached = contact(&result, "allowed.test");
    assert_eq!(reached.port, u32::from(port));
    assert_eq!(reached.connections, 1);
    assert_eq!((reached.refused, reached.refusal.as_str()), (0, ""));
    let response_body = "public server: /hello";
    let response_head = format!(
        "HTTP/1.1 200 X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response_body.len()
    );
    assert_eq!(
        reached.bytes_received,
        (response_head.len() + response_body.len()) as u64
    );
    assert!(
        reached.bytes_sent > "GET /hello HTTP/1.1\r\n\r\n".len() as u64,
        "{reached:#?}"
    );

    // Wildcards cover subdomains; the deny-list wins over them.
    let (text, _) = fixture
        .fetch(&format!("http://api.github.test:{port}/w"))
        .await;
    assert_eq!(text, "public server: /w\nstatus=200");
    let (text, result) = fixture
        .fetch(&format!("http://gist.github.test:{port}/d"))
        .await;
    assert_refused(&text, &result, "gist.github.test", "deny-list");

    // Names that merely look like listed ones, an unlisted name, a listed name on another
    // port, and the allowed host's address itself (listed by name only).
    for host in [
        "evil-github.test",
        "github.test.evil.test",
        "unlisted.test",
        "198.51.100.1",
    ] {
        let (text, result) = fixture.fetch(&format!("http://{host}:{port}/x")).await;
        assert_refused(
            &text,
            &result,
            host,
            "not in the allow-list of profile `net`",
        );
    }
    let other_port = fixture.servers.unlisted.addr.port();
    let (text, result) = fixture
        .fetch(&format!("http://allowed.test:{other_port}/x"))
        .await;
    assert_refused(&text, &result, "allowed.test", "not in the allow-list");

    // HTTPS clients tunnel with CONNECT, checked the same way before any byte moves.
    let (text, result) = fixture
        .fetch(&format!("https://unlisted.test:{port}/x"))
        .await;
    assert_eq!(result.status, pb::ToolStatus::ToolError as i32, "{text}");
    assert!(text.contains("403"), "{text}");
    assert!(contact(&result, "unlisted.test").refused >= 1);

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
        let (text, result) = fixture
            .fetch(&format!("http://{host}:{}/", server.addr.port()))
            .await;
        assert_refused(&text, &result, host, &format!("resolves to {addr}"));
    }
    assert!(fixture.servers.loopback.requests().is_empty());
    assert!(fixture.servers.metadata.requests().is_empty());
    assert!(fixture.servers.private.requests().is_empty());

    // A private address listed as such is reachable.
    let (text, _) = fixture
        .fetch(&format!(
            "http://{PRIVATE}:{}/",
            fixture.servers.private.addr.port()
        ))
        .await;
    assert_eq!(text, "private server reached\nstatus=200");

    // The allowed host redirects to an unlisted one: curl follows, the proxy refuses.
    let (text, result) = fixture
        .fetch(&format!(
            "http://allowed.test:{}/redirect",
            fixture.servers.public.addr.port()
        ))
        .await;
    assert_refused(&text, &result, "unlisted.test", "not in the allow-list");
    assert_eq!(contact(&result, "allowed.test").connections, 1);
    assert!(fixture.servers.unlisted.requests().is_empty());
}

#[tokio::test]
async fn the_sandbox_cannot_connect_directly_nor_leak_names_through_dns() {
    let fixture = Fixture::start().await;
    let port = fixture.servers.public.addr.port();

    // Straight to the address, ignoring the proxy: nothing routes out of the sandbox.
    let result = fixture
        .call("direct", "url", &format!("http://{PUBLIC}:{port}/direct"))
        .await;
    assert_eq!(
        result.status,
        pb::ToolStatus::ToolError as i32,
        "{result:#?}"
    );
    assert!(
        result.error_message.contains("Failed to connect")
            || result.error_message.contains("Couldn't connect"),
        "{result:#?}"
    );
    assert!(fixture.servers.public.requests().is_empty());

    // A lookup of a secret-bearing name, by the sandbox's own resolver: it fails, and the
    // namespace's DNS server never hears of it.
    let secret = "secret-4f1c2a.exfil.test";
    let result = fixture.call("lookup", "name", secret).await;
    assert_ne!(result.status, pb::ToolStatus::Ok as i32, "{result:#?}");
    // The same name through the proxy: refused before any resolution.
    let (text, result) = fixture.fetch(&format!("http://{secret}:{port}/")).await;
    assert_refused(&text, &result, secret, "not in the allow-list");

    // Control: a listed name the daemon has no override for is looked up in the namespace's
    // DNS, which proves the recorder hears what the daemon resolves.
    let (text, result) = fixture
        .fetch(&format!("http://probe.via-dns.test:{port}/"))
        .await;
    assert!(
        contact(&result, "probe.via-dns.test")
            .refusal
            .contains("cannot resolve"),
        "{text}"
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
