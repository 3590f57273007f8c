//! Approvals where people are: a request posted to a generic JSON webhook and a
//! Slack-compatible one on loopback, signed; its links decide exactly that call, once, by a
//! POST (never a GET), until they expire — and a forged, replayed, stale or another tenant's
//! link decides nothing.

use airlock_daemon::config::{
    ApprovalRights, ApprovalsFile, AuthSettings, WebhookFile, WebhookFormat,
};
use airlock_proto::v1 as pb;
use airlock_tests::browser::{Browser, Viewport};
use airlock_tests::model_api::{ModelApi, Received};
use airlock_tests::{DaemonOptions, TestDaemon, private_file, repo_root, tenant};
use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent_approvals::{FIXED, resolutions, waiting_write, workspace};
use crate::console_serving::http1;

/// HMAC-SHA256, written out (RFC 2104) so that the test checks the daemon's signatures with
/// code of its own.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A port free now, for a daemon whose links must name its address before it binds.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Hooked {
    daemon: TestDaemon,
    receiver: ModelApi,
    secret: &'static str,
    _secrets: tempfile::TempDir,
}

/// A daemon (with the first-party tools) posting to a JSON and a Slack webhook on one
/// loopback receiver that answers `replies` posts with 200.
async fn hooked(replies: usize, link_ttl_s: Option<u64>, owner: Option<&str>) -> Hooked {
    let mut receiver = ModelApi::default();
    for _ in 0..replies {
        receiver = receiver.reply(200, &[], "{}".into());
    }
    let url = receiver.serve().await;
    let secrets = tempfile::tempdir().unwrap();
    let secret = "shared-secret-of-the-receiver";
    let port = free_port();
    let public_url = format!("http://127.0.0.1:{port}");
    let bob = tenant(
        "bob",
        private_file(secrets.path(), "bob", "bob-token-0123456789"),
        &["*"],
        ApprovalRights::Own,
    );
    let daemon = TestDaemon::start(DaemonOptions {
        tools_dirs: vec![repo_root().join("plugins")],
        auth: AuthSettings {
            tenants: vec![bob],
            ..AuthSettings::default()
        },
        listen: Some(format!("127.0.0.1:{port}").parse().unwrap()),
        approvals: ApprovalsFile {
            public_url: Some(public_url),
            link_ttl_s,
            webhooks: vec![
                WebhookFile {
                    name: "ops".into(),
                    url: None,
                    url_file: Some(private_file(
                        secrets.path(),
                        "url",
                        &format!("{url}/hooks/json\n"),
                    )),
                    format: WebhookFormat::Json,
                    tenant: owner.map(str::to_owned),
                    secret_file: Some(private_file(secrets.path(), "secret", secret)),
                },
                WebhookFile {
                    name: "team-chat".into(),
                    url: Some(format!("{url}/hooks/slack")),
                    url_file: None,
                    format: WebhookFormat::Slack,
                    tenant: owner.map(str::to_owned),
                    secret_file: None,
                },
            ],
        },
        ..DaemonOptions::default()
    })
    .await;
    Hooked {
        daemon,
        receiver,
        secret,
        _secrets: secrets,
    }
}

/// The posts the receiver got, once `count` are there.
async fn posts(receiver: &ModelApi, count: usize) -> Vec<Received> {
    for _ in 0..200 {
        let received = receiver.received();
        if received.len() >= count {
            return received;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{count} posts did not arrive: {:?}", receiver.received());
}

fn post_of<'a>(posts: &'a [Received], path: &str) -> &'a Received {
    posts
        .iter()
        .find(|post| post.path == path)
        .unwrap_or_else(|| panic!("nothing posted to {path}"))
}

async fn click(method: Method, url: &str) -> (StatusCode, String) {
    let answer = http1(method, url, &[], Bytes::new()).await;
    (
        answer.status,
        String::from_utf8_lossy(&answer.body).into_owned(),
    )
}

#[tokio::test]
async fn a_request_reaches_both_webhooks_and_its_link_decides_exactly_that_call_once() {
    let hooked = hooked(2, None, None).await;
    let daemon = &hooked.daemon;
    let workspace = workspace(daemon, "w");
    let (mut run, request) = waiting_write(daemon, &workspace).await;
    let posts = posts(&hooked.receiver, 2).await;

    // The JSON webhook: signed over the time and the body, naming the exact call.
    let json = post_of(&posts, "/hooks/json");
    let header = |name: &str| {
        json.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .unwrap_or_default()
    };
    let signature = header("x-airlock-signature");
    let (t, v1) = signature
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
        .unwrap_or_else(|| panic!("{signature}"));
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(&json.raw);
    assert_eq!(
        v1,
        hex::encode(hmac_sha256(hooked.secret.as_bytes(), &signed))
    );
    assert_eq!(header("x-airlock-approval"), request.approval_id);
    let approval = &json.body["approval"];
    assert_eq!(approval["approval_id"], request.approval_id);
    assert_eq!(approval["digest"], request.digest);
    assert_eq!(approval["tool"], "write_file");
    assert_eq!(approval["arguments"], request.arguments_json);
    let approve = json.body["links"]["approve"].as_str().unwrap().to_owned();
    let deny = json.body["links"]["deny"].as_str().unwrap().to_owned();
    assert!(
        approve.starts_with(&format!("{}/approve/", daemon.endpoint)),
        "{approve}"
    );
    assert!(
        json.body["links"]["expires_ms"].as_i64().unwrap() <= request.deadline_ms,
        "a link never outlives the approval"
    );

    // The Slack-compatible one: buttons that are the daemon's links, no signature asked for.
    let slack = post_of(&posts, "/hooks/slack");
    let buttons: Vec<&Value> = slack.body["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|block| block["type"] == "actions")
        .flat_map(|block| block["elements"].as_array().unwrap())
        .collect();
    let urls: Vec<&str> = buttons.iter().map(|b| b["url"].as_str().unwrap()).collect();
    assert_eq!(urls.len(), 3, "{urls:?}");
    assert!(urls[0].contains("/approve/") && urls[1].contains("/approve/"));
    assert_eq!(
        urls[2],
        format!("{}/#/runs/{}", daemon.endpoint, run.run_id())
    );
    assert!(slack.body["text"].as_str().unwrap().contains("write_file"));

    // Opening a link (a chat app unfurling it, a scanner, a prefetch) decides nothing.
    let (status, page) = click(Method::GET, &approve).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("Approve this call?") && page.contains("<form method=\"post\">"),
        "{page}"
    );
    assert!(
        daemon
            .agent()
            .await
            .get_run(pb::GetRunRequest {
                run_id: run.run_id().into()
            })
            .await
            .unwrap()
            .into_inner()
            .state
            == pb::RunState::WaitingForApproval as i32
    );

    // The page shows the whole call, whatever a message cut.
    assert!(
        page.contains("Arguments") && page.contains("calc.py") && page.contains("write_file"),
        "{page}"
    );

    // Another site's page posting the link through a person's browser: refused before the
    // link is looked at (and so not used up).
    for (name, value) in [
        ("origin", "https://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let answer = http1(Method::POST, &approve, &[(name, value)], Bytes::new()).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{name}");
    }

    // A forged link: any change to the token is refused and decides nothing.
    let forged = format!(
        "{}{}",
        &deny[..deny.len() - 2],
        if deny.ends_with("AA") { "AB" } else { "AA" }
    );
    let (status, page) = click(Method::POST, &forged).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    assert!(page.contains("not an approval link airlock made"), "{page}");

    // The approve link, by POST: that call, once.
    let (status, page) = click(Method::POST, &approve).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("Approved"), "{page}");
    assert_eq!(run.finished().await.final_text, "written");
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        FIXED
    );
    let resolved = resolutions(&run);
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].decision, pb::Decision::ApproveOnce as i32);
    assert!(
        resolved[0].reason.contains("webhook `ops`"),
        "{:?}",
        resolved[0]
    );

    // Replayed: refused as used. The deny link of the same request: nothing left to decide.
    let (status, page) = click(Method::POST, &approve).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert!(page.contains("already used"), "{page}");
    let (status, page) = click(Method::POST, &deny).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert!(page.contains("Nothing to decide"), "{page}");

    // The pages keep to themselves: no script, the URL (the token) a referrer only to their
    // own origin.
    let answer = http1(Method::GET, &approve, &[], Bytes::new()).await;
    assert_eq!(answer.headers["referrer-policy"], "same-origin");
    assert_eq!(answer.headers["cache-control"], "no-store");
    assert!(
        answer.headers["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'")
    );
}

#[tokio::test]
async fn a_deny_link_denies_and_an_expired_link_decides_nothing() {
    let hooked = hooked(4, Some(1), None).await;
    let daemon = &hooked.daemon;
    let (mut run, request) = waiting_write(daemon, &workspace(daemon, "w")).await;
    let first = posts(&hooked.receiver, 2).await;
    let deny = post_of(&first, "/hooks/json").body["links"]["deny"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, page) = click(Method::POST, &deny).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert!(page.contains("expired"), "{page}");
    assert!(resolutions(&run).is_empty(), "an expired link decided");

    // A second run's links, used at once: the deny link denies.
    let (mut second, _) = waiting_write(daemon, &workspace(daemon, "v")).await;
    let all = posts(&hooked.receiver, 4).await;
    let deny = all
        .iter()
        .filter(|post| post.path == "/hooks/json")
        .map(|post| post.body["links"]["deny"].as_str().unwrap().to_owned())
        .find(|link| link != &deny)
        .expect("the second run's post");
    let (status, page) = click(Method::POST, &deny).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(second.finished().await.final_text, "denied");
    run.decide(&request.approval_id, pb::Decision::Deny, "");
    run.finished().await;
}

/// A link carrying a valid signature — made here with the daemon's key, as only someone
/// holding it could — for a call of another tenant is refused by the tenant check the console
/// applies: the signature proves where a link came from, never what it may decide.
#[tokio::test]
async fn a_signed_link_for_another_tenants_call_decides_nothing() {
    let hooked = hooked(2, None, None).await;
    let daemon = &hooked.daemon;
    let (mut run, request) = waiting_write(daemon, &workspace(daemon, "w")).await;
    posts(&hooked.receiver, 2).await;
    let key = std::fs::read(daemon.state_dir.join("approval-links.key")).unwrap();
    assert_eq!(key.len(), 32);
    let claims = serde_json::json!({
        "a": request.approval_id, "d": request.digest, "t": "bob", "x": "approve",
        "e": request.deadline_ms, "n": "00112233445566778899aabbccddeeff", "w": "ops",
    });
    let payload = base64url(claims.to_string().as_bytes());
    let mut signed = b"airlock approval link v1\n".to_vec();
    signed.extend_from_slice(payload.as_bytes());
    let token = format!("{payload}.{}", base64url(&hmac_sha256(&key, &signed)));
    let url = format!("{}/approve/{token}", daemon.endpoint);
    // The daemon's own check first: this link is well made (its page offers the decision).
    let (status, page) = click(Method::GET, &url).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    // But bob may answer only bob's runs: to him this call is not pending at all.
    let (status, page) = click(Method::POST, &url).await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert!(
        resolutions(&run).is_empty(),
        "another tenant's link decided"
    );
    let info = daemon
        .agent()
        .await
        .get_run(pb::GetRunRequest {
            run_id: run.run_id().into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.state, pb::RunState::WaitingForApproval as i32);
    run.decide(&request.approval_id, pb::Decision::Deny, "");
    run.finished().await;
}

/// The link as a person uses it: opened in a real browser (Chromium), its page's button
/// clicked — the form's POST carries the page's own origin and fetch metadata, and decides.
#[tokio::test]
async fn a_person_approves_from_the_links_page_in_a_browser() {
    let hooked = hooked(2, None, None).await;
    let daemon = &hooked.daemon;
    let workspace = workspace(daemon, "w");
    let (mut run, _) = waiting_write(daemon, &workspace).await;
    let posts = posts(&hooked.receiver, 2).await;
    let approve = post_of(&posts, "/hooks/json").body["links"]["approve"]
        .as_str()
        .unwrap()
        .to_owned();
    let browser = Browser::open(Viewport::DESKTOP).await;
    browser.goto(&approve).await.unwrap();
    browser
        .wait_for("form[method=post] button[type=submit]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "the page to say the call was approved",
            "return document.querySelector('h1')?.textContent === 'Approved';",
        )
        .await;
    browser.close().await;
    assert_eq!(run.finished().await.final_text, "written");
    assert_eq!(
        std::fs::read_to_string(workspace.join("calc.py")).unwrap(),
        FIXED
    );
}
