//! Network egress of process tools, end to end: the real `airlockd` runs in a network
//! namespace the test creates, next to HTTP servers on that namespace's addresses, and
//! sandboxed `curl` / `getent` try to reach them. Nothing leaves the machine.
//!
//! The daemon's `[egress] hosts` maps the test names: the allowed names to 198.51.100.1 (a
//! public-looking address), `loopback.test` to 127.0.0.1, `metadata.test` to
//! 169.254.169.254 and `private.test` to 10.9.9.1, where servers listen too, so every
//! refusal is the gate's and never a missing route.

use airlock_proto::v1 as pb;
use airlock_tests::ToolsDir;
use airlock_tests::egress::{
    EngineFixture, NOT_LISTED, assert_contact_refused, contact, toml_list,
};
use airlock_tests::netns::{PRIVATE, PUBLIC};
use serde_json::json;

/// What every tool's profile grants besides the network: the system's programs, and what
/// the resolver library reads, so a lookup inside the sandbox really is attempted.
const SYSTEM: &str = "\"/usr\", \"/bin\", \"/lib\", \"/lib64\", \"/etc/ld.so.cache\", \"/etc/resolv.conf\", \"/etc/nsswitch.conf\", \"/etc/hosts\"";

/// The engine tests' world, with the process tools `fetch` (curl through the proxy),
/// `direct` (curl ignoring it) and `lookup` (getent).
async fn start() -> EngineFixture {
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
    // Profile `net` past its network: the system's programs, and what a curl needs.
    let rest = format!(
        "[files]\nread_only = [{SYSTEM}]\n[env]\nset = {{ LANG = \"C.UTF-8\", PATH = \"/usr/bin:/bin\", NO_PROXY = \"*\" }}\n[limits]\nmemory = \"256 MiB\"\nwall_time_ms = 30000\noutput = \"1 MiB\"\nprocesses = 32\nopen_files = 128\n"
    );
    EngineFixture::start(tools, &rest).await
}

/// Fetches `url` through the proxy: (what curl printed and why it failed, the result).
async fn fetch(fixture: &EngineFixture, url: &str) -> (String, pb::ToolResult) {
    let result = fixture.execute("fetch", json!({ "url": url })).await;
    let text = format!("{}{}", result.content, result.error_message);
    (text, result)
}

fn manifest(name: &str, command: &[&str], field: &str) -> String {
    let command = toml_list(command);
    format!(
        "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"egress test tool\"\nrisk = \"network\"\nengine = \"process\"\ncommand = [{command}]\nabi = \"argv\"\nprofile = \"net\"\ntimeout_ms = 30000\ninput_schema = {{ type = \"object\", properties = {{ {field} = {{ type = \"string\" }} }}, required = [\"{field}\"] }}\n"
    )
}

/// curl got the proxy's 403 naming the refusal of `host` and `why`, and the ledger holds
/// the refusal.
#[track_caller]
fn assert_refused(text: &str, result: &pb::ToolResult, host: &str, why: &str) {
    assert!(text.contains("status=403"), "{text}\n{result:#?}");
    assert!(
        text.contains(&format!("egress to {host}")) && text.contains(why),
        "expected a refusal of {host} ({why}): {text}"
    );
    assert_contact_refused(result, host, why);
}

#[tokio::test]
async fn allowed_hosts_are_reached_with_their_bytes_counted_and_nothing_else() {
    let fixture = start().await;
    let port = fixture.servers.public.addr.port();

    let (text, result) = fetch(&fixture, &format!("http://allowed.test:{port}/hello")).await;
    assert_eq!(result.status, pb::ToolStatus::Ok as i32, "{result:#?}");
    assert_eq!(text, "public server: /hello\nstatus=200");
    let reached = fixture.assert_reached_once(&result, "/hello");
    assert!(
        reached.bytes_sent > "GET /hello HTTP/1.1\r\n\r\n".len() as u64,
        "{reached:#?}"
    );

    // Wildcards cover subdomains; the deny-list wins over them.
    let (text, _) = fetch(&fixture, &format!("http://api.github.test:{port}/w")).await;
    assert_eq!(text, "public server: /w\nstatus=200");
    let (text, result) = fetch(&fixture, &format!("http://gist.github.test:{port}/d")).await;
    assert_refused(&text, &result, "gist.github.test", "deny-list");

    // Names that merely look like listed ones, an unlisted name, a listed name on another
    // port, and the allowed host's address itself (listed by name only).
    for host in NOT_LISTED {
        let (text, result) = fetch(&fixture, &format!("http://{host}:{port}/x")).await;
        assert_refused(
            &text,
            &result,
            host,
            "not in the allow-list of profile `net`",
        );
    }
    let other_port = fixture.servers.unlisted.addr.port();
    let (text, result) = fetch(&fixture, &format!("http://allowed.test:{other_port}/x")).await;
    assert_refused(&text, &result, "allowed.test", "not in the allow-list");

    // HTTPS clients tunnel with CONNECT, checked the same way before any byte moves.
    let (text, result) = fetch(&fixture, &format!("https://unlisted.test:{port}/x")).await;
    assert_eq!(result.status, pb::ToolStatus::ToolError as i32, "{text}");
    assert!(text.contains("403"), "{text}");
    assert!(contact(&result, "unlisted.test").refused >= 1);

    fixture.assert_only_two_allowed_requests_arrived();
}

#[tokio::test]
async fn internal_addresses_are_refused_behind_names_and_redirects() {
    let fixture = start().await;
    for (host, server, addr) in fixture.servers.internal() {
        let (text, result) =
            fetch(&fixture, &format!("http://{host}:{}/", server.addr.port())).await;
        assert_refused(&text, &result, host, &format!("resolves to {addr}"));
    }
    fixture.assert_internal_servers_untouched();

    // A private address listed as such is reachable.
    let (text, _) = fetch(
        &fixture,
        &format!("http://{PRIVATE}:{}/", fixture.servers.private.addr.port()),
    )
    .await;
    assert_eq!(text, "private server reached\nstatus=200");

    // The allowed host redirects to an unlisted one: curl follows, the proxy refuses.
    let (text, result) = fetch(
        &fixture,
        &format!(
            "http://allowed.test:{}/redirect",
            fixture.servers.public.addr.port()
        ),
    )
    .await;
    fixture.assert_redirect_went_no_further(&result);
    assert_refused(&text, &result, "unlisted.test", "not in the allow-list");
}

#[tokio::test]
async fn the_sandbox_cannot_connect_directly_nor_leak_names_through_dns() {
    let fixture = start().await;
    let port = fixture.servers.public.addr.port();

    // Straight to the address, ignoring the proxy: nothing routes out of the sandbox.
    let result = fixture
        .execute(
            "direct",
            json!({"url": format!("http://{PUBLIC}:{port}/direct")}),
        )
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
    let result = fixture.execute("lookup", json!({ "name": secret })).await;
    assert_ne!(result.status, pb::ToolStatus::Ok as i32, "{result:#?}");
    // The same name through the proxy: refused before any resolution.
    let (text, result) = fetch(&fixture, &format!("http://{secret}:{port}/")).await;
    assert_refused(&text, &result, secret, "not in the allow-list");

    // Control: a listed name the daemon has no override for is looked up in the namespace's
    // DNS, which proves the recorder hears what the daemon resolves.
    let (text, result) = fetch(&fixture, &format!("http://probe.via-dns.test:{port}/")).await;
    assert!(
        contact(&result, "probe.via-dns.test")
            .refusal
            .contains("cannot resolve"),
        "{text}"
    );
    fixture.assert_dns_heard_the_probe_and_no_secret();
}
