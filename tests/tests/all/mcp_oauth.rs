//! The MCP endpoint as an OAuth 2.1 resource server, end to end on loopback: an authorization
//! server with keys the test makes (tests/mcp/servers/oauth_issuer.py), the official Python
//! SDK's OAuth client finding it from the endpoint's 401 alone, the MCP Inspector's CLI with
//! an issued token, and each token an attacker or a broken issuer could present refused with
//! the right 401 or 403.

use std::process::Stdio;
use std::time::Duration;

use airlock_daemon::config::{ApprovalRights, AuthSettings, McpOAuthSettings, OAuthTenantRule};
use airlock_tests::{DaemonOptions, TestDaemon, mcp, private_file, repo_root, tenant};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

const ACME_STATIC: &str = "acme-static-token-0123456789";

/// The authorization server, killed when dropped.
struct Issuer {
    url: String,
    _child: tokio::process::Child,
}

impl Issuer {
    async fn start(resource: &str) -> Issuer {
        let mut child = tokio::process::Command::new(mcp::python())
            .arg(mcp::dir().join("servers/oauth_issuer.py"))
            .arg(resource)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the issuer starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut first = String::new();
        tokio::time::timeout(
            Duration::from_secs(30),
            tokio::io::BufReader::new(stdout).read_line(&mut first),
        )
        .await
        .expect("the issuer says its URL")
        .expect("reads");
        Issuer {
            url: first.trim().to_owned(),
            _child: child,
        }
    }

    /// A token of the test's choosing: `claims` over the issuer's defaults.
    async fn mint(&self, http: &Http, claims: Value) -> String {
        let (status, body) = http
            .send(
                Method::POST,
                &format!("{}/mint", self.url),
                None,
                claims.to_string(),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["token"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    fn new() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// Sends a request; the answer's status and body (with the challenge, for a 401 or 403,
    /// before it, on a line of its own).
    async fn send(
        &self,
        method: Method,
        url: &str,
        token: Option<&str>,
        body: String,
    ) -> (StatusCode, String) {
        let mut request = Request::builder()
            .method(method)
            .uri(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = self
            .client
            .request(request.body(Full::new(Bytes::from(body))).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|value| value.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let mut text = String::from_utf8_lossy(&body).into_owned();
        if let Some(challenge) = challenge {
            text = format!("{challenge}\n{text}");
        }
        (status, text)
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"oauth-test","version":"1"}}}"#;

/// A free loopback port: the endpoint's URL is its tokens' audience, so it is chosen first.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Setup {
    daemon: TestDaemon,
    issuer: Issuer,
    url: String,
    secrets: tempfile::TempDir,
}

/// A daemon whose tenants `acme` (read_file, list_dir) and `beta` (write_file) are the
/// scopes `airlock:acme` and `airlock:beta` of the test's issuer.
async fn setup() -> Setup {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let issuer = Issuer::start(&url).await;
    let secrets = tempfile::tempdir().unwrap();
    let acme = tenant(
        "acme",
        private_file(secrets.path(), "acme", ACME_STATIC),
        &["read_file", "list_dir"],
        ApprovalRights::Own,
    );
    let beta = tenant(
        "beta",
        private_file(secrets.path(), "beta", "beta-static-token-9876543210"),
        &["write_file"],
        ApprovalRights::Own,
    );
    let rule = |tenant: &str, scope: &str| OAuthTenantRule {
        tenant: tenant.into(),
        scope: Some(scope.into()),
        claim: None,
        value: None,
    };
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        auth: AuthSettings {
            unix_socket_trust: false,
            tenants: vec![acme, beta],
        },
        mcp_listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        mcp_oauth: Some(McpOAuthSettings {
            issuer: issuer.url.clone(),
            jwks_uri: None,
            resource: url.clone(),
            algorithms: vec!["RS256".into()],
            scopes_supported: vec!["airlock:acme".into(), "airlock:beta".into()],
            tenants: vec![rule("acme", "airlock:acme"), rule("beta", "airlock:beta")],
        }),
        ..DaemonOptions::default()
    })
    .await;
    Setup {
        daemon,
        issuer,
        url,
        secrets,
    }
}

/// The Python SDK's client, given only the endpoint's URL and its client credentials.
async fn sdk_lists(setup: &Setup, client: &str, secret: &str) -> Vec<String> {
    let output = tokio::process::Command::new(mcp::python())
        .arg(mcp::dir().join("oauth_client.py"))
        .args([&setup.url, &setup.issuer.url, client, secret])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: Value = serde_json::from_str(stdout.trim()).unwrap();
    listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_s_oauth_client_finds_the_issuer_and_sees_its_tenant_s_tools_only() {
    let setup = setup().await;
    assert_eq!(
        sdk_lists(&setup, "acme-agent", "acme-secret").await,
        ["list_dir", "read_file"]
    );
    assert_eq!(
        sdk_lists(&setup, "beta-agent", "beta-secret").await,
        ["write_file"]
    );
    drop(setup.daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_token_gets_the_right_refusal() {
    let setup = setup().await;
    let http = Http::new();
    let post = |token: Option<String>| {
        let http = &http;
        let url = setup.url.clone();
        async move {
            http.send(Method::POST, &url, token.as_deref(), INITIALIZE.into())
                .await
        }
    };
    let metadata_url = setup
        .url
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");

    // No token: a 401 naming the metadata, which names the issuer.
    let (status, text) = post(None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
    assert!(
        text.starts_with(&format!("Bearer resource_metadata=\"{metadata_url}\"")),
        "{text}"
    );
    assert!(!text.contains("error="), "{text}");
    let (status, metadata) = http
        .send(Method::GET, &metadata_url, None, String::new())
        .await;
    assert_eq!(status, StatusCode::OK, "{metadata}");
    let metadata: Value = serde_json::from_str(&metadata).unwrap();
    assert_eq!(metadata["resource"], setup.url);
    assert_eq!(metadata["authorization_servers"], json!([setup.issuer.url]));

    // A good token, and the daemon's own token beside OAuth.
    let good = setup.issuer.mint(&http, json!({})).await;
    assert_eq!(post(Some(good)).await.0, StatusCode::OK);
    assert_eq!(post(Some(ACME_STATIC.into())).await.0, StatusCode::OK);

    let refused = |(status, text): (StatusCode, String), want: StatusCode, words: &str| {
        assert_eq!(status, want, "{words}: {text}");
        let error = if want == StatusCode::FORBIDDEN {
            "error=\"insufficient_scope\""
        } else {
            "error=\"invalid_token\""
        };
        assert!(text.contains(error), "{words}: {text}");
        assert!(text.contains(words), "{words}: {text}");
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expired = setup.issuer.mint(&http, json!({"exp": now - 600})).await;
    refused(
        post(Some(expired)).await,
        StatusCode::UNAUTHORIZED,
        "expired",
    );
    let elsewhere = setup
        .issuer
        .mint(&http, json!({"aud": "http://127.0.0.1:1/mcp"}))
        .await;
    refused(
        post(Some(elsewhere)).await,
        StatusCode::UNAUTHORIZED,
        "audience",
    );
    let no_audience = setup.issuer.mint(&http, json!({"aud": null})).await;
    refused(
        post(Some(no_audience)).await,
        StatusCode::UNAUTHORIZED,
        "aud",
    );
    let unsigned = setup.issuer.mint(&http, json!({"_alg": "none"})).await;
    refused(
        post(Some(unsigned)).await,
        StatusCode::UNAUTHORIZED,
        "not a signed JWT",
    );
    let other_issuer = setup
        .issuer
        .mint(&http, json!({"iss": "http://127.0.0.1:1"}))
        .await;
    refused(
        post(Some(other_issuer)).await,
        StatusCode::UNAUTHORIZED,
        "issuer",
    );
    let no_tenant = setup.issuer.mint(&http, json!({"scope": "openid"})).await;
    refused(
        post(Some(no_tenant)).await,
        StatusCode::FORBIDDEN,
        "no scope",
    );

    // The issuer rotates its key. Once the endpoint has seen a token under the new key (and
    // refetched the set, at most once per MIN_REFETCH), the old key's tokens are refused.
    let (status, _) = http
        .send(
            Method::POST,
            &format!("{}/rotate", setup.issuer.url),
            None,
            String::new(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let by_old_key = setup.issuer.mint(&http, json!({"_key": "old"})).await;
    let by_new_key = setup.issuer.mint(&http, json!({})).await;
    tokio::time::sleep(airlock_daemon::testing::OAUTH_MIN_REFETCH + Duration::from_millis(200))
        .await;
    assert_eq!(post(Some(by_new_key)).await.0, StatusCode::OK);
    refused(
        post(Some(by_old_key)).await,
        StatusCode::UNAUTHORIZED,
        "no key",
    );
    drop(setup.daemon);
}

/// The MCP Inspector's CLI (npm, run on the Node of tests/mcp), given a token the issuer
/// granted: it lists that tenant's tools; without one it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_cli_with_an_issued_token_lists_its_tenant_s_tools() {
    let setup = setup().await;
    let http = Http::new();
    let form = format!(
        "grant_type=client_credentials&client_id=beta-agent&client_secret=beta-secret&resource={}",
        setup.url
    );
    let granted = {
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/token", setup.issuer.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Full::new(Bytes::from(form)))
            .unwrap();
        let response = http.client.request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice::<Value>(&body).unwrap()["access_token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let inspector = mcp::npm_server(
        "@modelcontextprotocol/inspector",
        "clients/launcher/build/index.js",
    );
    let list = |token: Option<String>| {
        let mut command = tokio::process::Command::new(mcp::node());
        command
            .arg(&inspector)
            .args([
                "--cli",
                &setup.url,
                "--transport",
                "http",
                "--method",
                "tools/list",
            ])
            .env(
                "MCP_CATALOG_PATH",
                setup.secrets.path().join("catalog.json"),
            );
        if let Some(token) = token {
            command.args(["--header", &format!("Authorization: Bearer {token}")]);
        }
        async move { command.output().await.unwrap() }
    };
    let listed = list(Some(granted)).await;
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["write_file"]);
    let refused = list(None).await;
    assert!(!refused.status.success());
    drop(setup.daemon);
}
