//! Network egress of WebAssembly tools, end to end: the real `airlockd` runs in a network
//! namespace the test creates, next to HTTP servers on that namespace's addresses, and the
//! `http_fetch` component (tests/hostile) asks wasi-http for whatever URL the test names.
//! Nothing leaves the machine.
//!
//! The daemon's `[egress] hosts` maps the test names: the allowed names to 198.51.100.1 (a
//! public-looking address), `loopback.test` to 127.0.0.1, `metadata.test` to
//! 169.254.169.254 and `private.test` to 10.9.9.1, where servers listen too, so every
//! refusal is the gate's and never a missing route.

use airlock_proto::v1 as pb;
use airlock_tests::egress::{
    EngineFixture, NOT_LISTED, assert_contact_refused, contact, net_profile,
};
use airlock_tests::netns::{PRIVATE, PUBLIC};
use airlock_tests::{DaemonOptions, ProfilesDir, TestDaemon, ToolsDir, test_module};
use serde_json::{Value, json};

/// A component's profile past its network: limits only.
const LIMITS: &str = "[limits]\nmemory = \"128 MiB\"\nwall_time_ms = 30000\noutput = \"1 MiB\"\n";

/// The engine tests' world, with the components `http_fetch` and `socket` (tests/hostile).
async fn start() -> EngineFixture {
    let tools = ToolsDir::new();
    for tool in ["http_fetch", "socket"] {
        tools.add_file(
            tool,
            &test_module(tool),
            "profile = \"net\"\nrisk = \"network\"\ntimeout_ms = 30000",
        );
    }
    EngineFixture::start(tools, LIMITS).await
}

/// Runs `tool` with `args` and returns its result, which must be OK.
async fn call(fixture: &EngineFixture, tool: &str, args: Value) -> pb::ToolResult {
    let result = fixture.execute(tool, args).await;
    assert_eq!(
        result.status,
        pb::ToolStatus::Ok as i32,
        "{result:#?}\n{}",
        fixture.egress.daemon.log()
    );
    result
}

/// Fetches `url` with `http_fetch`: (its report, the result).
async fn fetch(
    fixture: &EngineFixture,
    url: &str,
    follow_redirects: bool,
) -> (Value, pb::ToolResult) {
    let result = call(
        fixture,
        "http_fetch",
        json!({"url": url, "follow_redirects": follow_redirects}),
    )
    .await;
    let report = serde_json::from_str(&result.content)
        .unwrap_or_else(|err| panic!("not JSON ({err}): {result:#?}"));
    (report, result)
}

/// The only hop of `report` failed with wasi-http's `error`, and the ledger holds the
/// refusal of `host`, saying `why`.
#[track_caller]
fn assert_refused(report: &Value, result: &pb::ToolResult, host: &str, why: &str) {
    let hops = report["hops"].as_array().expect("hops");
    let last = hops.last().expect("a hop");
    assert_eq!(last["error"], "ErrorCode::HttpRequestDenied", "{report:#}");
    assert!(report.get("body").is_none(), "{report:#}");
    let contact = assert_contact_refused(result, host, why);
    assert!(
        contact.refusal.contains(&format!("egress to {host}")),
        "expected a refusal of {host} ({why}): {contact:#?}"
    );
}

#[tokio::test]
async fn allowed_hosts_are_reached_with_their_bytes_counted_and_nothing_else() {
    let fixture = start().await;
    let port = fixture.servers.public.addr.port();

    let url = format!("http://allowed.test:{port}/hello?q=1");
    let (report, result) = fetch(&fixture, &url, false).await;
    assert_eq!(
        report,
        json!({"hops": [{"url": url, "status": 200}], "body": "public server: /hello?q=1"})
    );
    let reached = fixture.assert_reached_once(&result, "/hello?q=1");
    let request_line = "GET /hello?q=1 HTTP/1.1\r\n";
    let host_header = format!("host: allowed.test:{port}\r\n");
    assert!(
        reached.bytes_sent >= (request_line.len() + host_header.len() + 2) as u64,
        "{reached:#?}"
    );

    // Wildcards cover subdomains; the deny-list wins over them.
    let (report, _) = fetch(&fixture, &format!("http://api.github.test:{port}/w"), false).await;
    assert_eq!(report["body"], "public server: /w", "{report:#}");
    let (report, result) = fetch(
        &fixture,
        &format!("http://gist.github.test:{port}/d"),
        false,
    )
    .await;
    assert_refused(&report, &result, "gist.github.test", "deny-list");

    // Names that merely look like listed ones, an unlisted name, and the allowed host's
    // address itself (listed by name only).
    for host in NOT_LISTED {
        let (report, result) = fetch(&fixture, &format!("http://{host}:{port}/x"), false).await;
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
    let (report, result) = fetch(
        &fixture,
        &format!("http://allowed.test:{other_port}/x"),
        false,
    )
    .await;
    assert_refused(&report, &result, "allowed.test", "not in the allow-list");
    let (report, result) = fetch(&fixture, &format!("https://unlisted.test:{port}/x"), false).await;
    assert_refused(&report, &result, "unlisted.test", "not in the allow-list");

    // A user name in the authority cannot make an unlisted host read as a listed one.
    let (report, _) = fetch(
        &fixture,
        &format!("http://allowed.test:{port}@unlisted.test:{other_port}/x"),
        false,
    )
    .await;
    assert!(report["hops"][0]["error"].is_string(), "{report:#}");

    fixture.assert_only_two_allowed_requests_arrived();
}

#[tokio::test]
async fn internal_addresses_are_refused_behind_names_and_redirects() {
    let fixture = start().await;
    for (host, server, addr) in fixture.servers.internal() {
        let (report, result) = fetch(
            &fixture,
            &format!("http://{host}:{}/", server.addr.port()),
            false,
        )
        .await;
        assert_refused(&report, &result, host, &format!("resolves to {addr}"));
    }
    // The metadata address as an IPv6 literal of its IPv4 form is no way around it.
    let (report, result) = fetch(
        &fixture,
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
    fixture.assert_internal_servers_untouched();

    // A private address listed as such is reachable.
    let (report, _) = fetch(
        &fixture,
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
    let (report, _) = fetch(&fixture, &url, false).await;
    assert_eq!(
        report,
        json!({"hops": [{"url": url, "status": 302, "location": stolen}], "body": ""})
    );
    let (report, result) = fetch(&fixture, &url, true).await;
    assert_eq!(report["hops"][0]["status"], 302, "{report:#}");
    assert_eq!(report["hops"][1]["url"], stolen.as_str(), "{report:#}");
    assert_refused(&report, &result, "unlisted.test", "not in the allow-list");
    fixture.assert_redirect_went_no_further(&result);
}

#[tokio::test]
async fn the_guest_cannot_connect_directly_nor_leak_names_through_dns() {
    let fixture = start().await;
    let port = fixture.servers.public.addr.port();

    // WASI sockets stay closed under an allow-list: only wasi-http goes out, through the
    // gate. Straight to the allowed server's address, and a lookup of a secret name.
    let secret = "secret-4f1c2a.exfil.test";
    let result = call(
        &fixture,
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
    let (report, result) = fetch(&fixture, &format!("http://{secret}:{port}/"), false).await;
    assert_refused(&report, &result, secret, "not in the allow-list");

    // Control: a listed name the daemon has no override for is looked up in the namespace's
    // DNS (which answers NXDOMAIN), which proves the recorder hears what the daemon
    // resolves; the guest sees a DNS error.
    let (report, result) = fetch(
        &fixture,
        &format!("http://probe.via-dns.test:{port}/"),
        false,
    )
    .await;
    let error = report["hops"][0]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("ErrorCode::DnsError"), "{report:#}");
    assert!(
        contact(&result, "probe.via-dns.test")
            .refusal
            .contains("cannot resolve"),
        "{result:#?}"
    );
    fixture.assert_dns_heard_the_probe_and_no_secret();
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
    profiles.add(
        "net",
        &net_profile(&["allowed.test:80".to_owned()], &[], LIMITS),
    );
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
