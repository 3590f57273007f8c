//! Remote hosted servers reached with OAuth: airlock fetches tokens with the client
//! credentials grant through the server's egress gate, refreshes them before they expire
//! and once on a 401, and never lets one reach a call's events. The authorization server and
//! the protected MCP server are `tests/mcp/servers/oauth_remote_server.py` (tokens live 3 s).

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use airlock_proto::v1 as pb;
use airlock_tests::{DaemonOptions, ProfilesDir, TestDaemon, ToolsDir, mcp};
use pb::ToolStatus;
use serde_json::json;

/// The client secret the test authorization server accepts.
const CLIENT_SECRET: &str = "airlock-client-secret-5e1f";

/// How long its tokens live.
const LIFETIME: Duration = Duration::from_secs(3);

/// The authorization server and protected MCP server on a loopback port, stopped when
/// dropped.
struct OAuthServer {
    child: tokio::process::Child,
    port: u16,
    state: tempfile::TempDir,
}

/// What the server saw, as it writes it after each request.
#[derive(Debug)]
struct Seen {
    issued: Vec<String>,
    token_requests: u64,
    unauthorized: u64,
}

impl OAuthServer {
    async fn start() -> OAuthServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let state = tempfile::tempdir().unwrap();
        let child = tokio::process::Command::new(mcp::python())
            .arg(mcp::dir().join("servers/oauth_remote_server.py"))
            .arg(port.to_string())
            .arg(state.path().join("state.json"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the OAuth server never listened"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        OAuthServer { child, port, state }
    }

    fn seen(&self) -> Seen {
        let text = std::fs::read_to_string(self.state.path().join("state.json")).unwrap();
        let state: serde_json::Value = serde_json::from_str(&text).unwrap();
        Seen {
            issued: state["issued"]
                .as_array()
                .unwrap()
                .iter()
                .map(|token| token.as_str().unwrap().to_owned())
                .collect(),
            token_requests: state["token_requests"].as_u64().unwrap(),
            unauthorized: state["unauthorized"].as_u64().unwrap(),
        }
    }

    /// Sends `POST path` to the server's control endpoints.
    fn post(&self, path: &str) {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A remote server's manifest: `oauth` is the `[mcp.oauth]` section's body.
fn manifest(name: &str, port: u16, oauth: &str) -> String {
    format!(
        "name = \"{name}\"\nversion = \"1\"\ndescription = \"a remote MCP server behind OAuth\"\nrisk = \"read_only\"\nengine = \"mcp\"\nprofile = \"remote\"\n[[secrets]]\nenv = \"CLIENT_SECRET\"\nfrom_file = \"secret.txt\"\n[mcp]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n[mcp.oauth]\nclient_id = \"airlock\"\nclient_secret_secret = \"CLIENT_SECRET\"\nscopes = [\"tools\"]\n{oauth}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_behind_oauth_gets_fresh_tokens_that_never_reach_a_call() {
    let server = OAuthServer::start().await;
    let port = server.port;
    let tools = ToolsDir::new();
    let token_url = format!("token_url = \"http://127.0.0.1:{port}/token\"");
    let tool = |name: &str, oauth: &str, secret: &str| {
        tools.write_manifest(name, &manifest(name, port, oauth));
        // `from_file` is relative to the daemon's working directory: named absolutely.
        let dir = tools.path().join(name);
        let secret_path = dir.join("secret.txt");
        std::fs::write(&secret_path, secret).unwrap();
        let path = dir.join("tool.toml");
        let text = std::fs::read_to_string(&path).unwrap().replace(
            "\"secret.txt\"",
            &format!("{:?}", secret_path.display().to_string()),
        );
        std::fs::write(path, text).unwrap();
    };
    tool("oauth", &token_url, CLIENT_SECRET);
    tool(
        "discovered",
        &format!("issuer = \"http://127.0.0.1:{port}\""),
        CLIENT_SECRET,
    );
    // Neither `token_url` nor `issuer`: the server's RFC 9728 metadata names the issuer.
    tool("found", "", CLIENT_SECRET);
    // …and a server at another path, whose metadata claims another resource.
    tool("mismatch", "", CLIENT_SECRET);
    let mismatch = tools.path().join("mismatch/tool.toml");
    let text = std::fs::read_to_string(&mismatch).unwrap();
    std::fs::write(&mismatch, text.replace("/mcp\"", "/mismatch\"")).unwrap();
    tool("wrongsecret", &token_url, "not-the-client-secret");
    tool(
        "elsewhere",
        "token_url = \"https://auth.example.com/token\"",
        CLIENT_SECRET,
    );
    let profiles = ProfilesDir::new();
    profiles.add(
        "remote",
        &format!(
            "description = \"remote\"\nnetwork = {{ allow = [\"127.0.0.1:{port}\"] }}\n[limits]\nmemory = \"64 MiB\"\nwall_time_ms = 10000\noutput = \"1 MiB\"\n"
        ),
    );
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![tools.path().to_owned()],
        profiles_dir: profiles.path().to_owned(),
        ..DaemonOptions::default()
    })
    .await;

    // Refused at load, each naming its problem: the client authentication the token
    // endpoint refused, and the token endpoint's host the profile does not list.
    let refused = daemon.refused().join("\n");
    assert!(
        refused.contains("wrongsecret")
            && refused.contains(&format!(
                "the token endpoint http://127.0.0.1:{port}/token refused the client credentials grant: HTTP 401"
            ))
            && refused.contains("`invalid_client`")
            && refused.contains("CLIENT_SECRET"),
        "{refused}"
    );
    assert!(
        refused.contains("elsewhere")
            && refused.contains(
                "the OAuth token endpoint at https://auth.example.com/token cannot be reached"
            )
            && refused.contains(
                "auth.example.com:443 is not in the network allow-list of profile `remote`"
            ),
        "{refused}"
    );
    // Metadata that is not the server's own names no authorization server it will trust.
    assert!(
        refused.contains("mismatch")
            && refused.contains(&format!(
                "the protected-resource metadata at http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mismatch is for `http://127.0.0.1:{port}/elsewhere`, not this server"
            )),
        "{refused}"
    );
    assert_eq!(daemon.refused().len(), 3, "{refused}");
    assert!(
        !refused.contains("not-the-client-secret"),
        "the client secret is not in a refusal: {refused}"
    );

    let mut calls = Vec::new();
    let echo = daemon
        .exec("oauth__echo", json!({"text": "with a token"}), None)
        .await;
    echo.assert_status(ToolStatus::Ok);
    assert!(echo.result().content.contains("with a token"), "{echo:?}");
    calls.push(echo);

    // Past the first token's lifetime: a new one was fetched before the old one expired, so
    // the server never had to refuse a request.
    let before = server.seen();
    tokio::time::sleep(LIFETIME + Duration::from_millis(500)).await;
    let later = daemon
        .exec("oauth__echo", json!({"text": "after expiry"}), None)
        .await;
    later.assert_status(ToolStatus::Ok);
    let after = server.seen();
    assert!(
        after.token_requests > before.token_requests,
        "a new token was fetched: {before:?} then {after:?}"
    );
    assert_eq!(
        after.unauthorized, before.unauthorized,
        "the token was refreshed before it expired, not after a 401"
    );
    calls.push(later);

    // A server that revokes its tokens answers 401 once; one new token, one retry.
    server.post("/revoke");
    let before = server.seen();
    let revoked = daemon
        .exec("oauth__echo", json!({"text": "after revocation"}), None)
        .await;
    revoked.assert_status(ToolStatus::Ok);
    let after = server.seen();
    assert!(after.unauthorized > before.unauthorized, "{after:?}");
    assert!(after.token_requests > before.token_requests, "{after:?}");
    calls.push(revoked);

    // The token endpoint named by the issuer's RFC 8414 metadata.
    let discovered = daemon
        .exec("discovered__echo", json!({"text": "discovered"}), None)
        .await;
    discovered.assert_status(ToolStatus::Ok);
    calls.push(discovered);

    // The issuer named by the server's own RFC 9728 metadata.
    let found = daemon
        .exec("found__echo", json!({"text": "found"}), None)
        .await;
    found.assert_status(ToolStatus::Ok);
    calls.push(found);

    // A server that hands its token back has it redacted before anyone sees it.
    let leak = daemon.exec("oauth__leak", json!({}), None).await;
    leak.assert_status(ToolStatus::Ok);
    assert!(
        leak.result().content.contains("[redacted:oauth-token]"),
        "{leak:?}"
    );
    calls.push(leak);

    // A token endpoint that answers with garbage: the call fails saying so.
    server.post("/break");
    tokio::time::sleep(LIFETIME + Duration::from_millis(500)).await;
    let broken = daemon
        .exec("oauth__echo", json!({"text": "no token"}), None)
        .await;
    assert_ne!(broken.status(), ToolStatus::Ok, "{broken:?}");
    let message = broken.result().error_message.clone();
    assert!(
        message.contains(&format!(
            "the token endpoint http://127.0.0.1:{port}/token answered with something other than a token response"
        )),
        "{broken:?}"
    );
    calls.push(broken);

    let seen = server.seen();
    assert!(seen.issued.len() >= 3, "{seen:?}");
    for call in &calls {
        let everything = format!("{call:?}");
        for token in &seen.issued {
            assert!(
                !everything.contains(token.as_str()),
                "a token reached a call's events: {everything}"
            );
        }
        assert!(!everything.contains(CLIENT_SECRET), "{everything}");
    }
}
