//! The resource server's checks, with keys the tests make (ES256 through rcgen) and a key
//! set they rotate. Each attack a token can carry gets its refusal; a property test searches
//! tokens with one part changed for one that is taken.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

use super::*;
use crate::config::{AuthSettings, McpOAuthSettings, OAuthTenantRule, TenantFile};
use crate::workspace::WorkspaceRoots;

const ISSUER: &str = "https://issuer.example";
const RESOURCE: &str = "https://airlock.example/mcp";

/// A signing key of the tests' issuer.
struct TestKey {
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
}

impl TestKey {
    fn new(kid: &str) -> TestKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let public = pair.public_key_raw();
        // An uncompressed P-256 point: 0x04, then x and y.
        assert_eq!(public.len(), 65);
        let (x, y) = public[1..].split_at(32);
        TestKey {
            kid: kid.to_owned(),
            encoding: EncodingKey::from_ec_der(&pair.serialize_der()),
            jwk: json!({
                "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y),
            }),
        }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("signs")
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn claims(scope: &str) -> Value {
    json!({
        "iss": ISSUER, "aud": RESOURCE, "sub": "client-1",
        "exp": now() + 300, "iat": now(), "scope": scope,
    })
}

struct Setup {
    server: ResourceServer,
    published: Arc<Mutex<JwkSet>>,
    _state: tempfile::TempDir,
}

fn publish(keys: &[&TestKey]) -> JwkSet {
    serde_json::from_value(json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}))
        .expect("key set")
}

fn setup(keys: &[&TestKey]) -> Setup {
    setup_refetching_after(keys, jwks::MIN_REFETCH)
}

fn setup_refetching_after(keys: &[&TestKey], min_refetch: std::time::Duration) -> Setup {
    let state = tempfile::tempdir().expect("tempdir");
    let roots = WorkspaceRoots::new(&[state.path().to_owned()]).expect("roots");
    let token_file = state.path().join("acme.token");
    std::fs::write(&token_file, "acme-static-token-0123456789").expect("token");
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("mode");
    let auth = AuthSettings {
        unix_socket_trust: false,
        tenants: vec![TenantFile {
            name: "acme".into(),
            token_file: Some(token_file),
            token_env: None,
            tools: vec!["*".into()],
            workspace_roots: Vec::new(),
            approvals: crate::config::ApprovalRights::Own,
            max_concurrent_runs: None,
            max_concurrent_executions: None,
            policy_files: Vec::new(),
        }],
    };
    let tenants = Tenants::load(state.path(), &auth, &roots).expect("tenants");
    let settings = McpOAuthSettings {
        issuer: ISSUER.into(),
        jwks_uri: None,
        resource: RESOURCE.into(),
        algorithms: vec!["ES256".into(), "RS256".into()],
        scopes_supported: vec!["airlock:acme".into()],
        tenants: vec![
            OAuthTenantRule {
                tenant: "acme".into(),
                scope: Some("airlock:acme".into()),
                claim: None,
                value: None,
            },
            OAuthTenantRule {
                tenant: "default".into(),
                scope: None,
                claim: Some("groups".into()),
                value: Some("airlock-admins".into()),
            },
        ],
    };
    let published = Arc::new(Mutex::new(publish(keys)));
    let server = ResourceServer::with_keys(
        settings,
        &tenants,
        KeySet::refetching_after(KeySource::Fixed(published.clone()), min_refetch),
    )
    .expect("resource server");
    Setup {
        server,
        published,
        _state: state,
    }
}

async fn refusal(setup: &Setup, token: &str) -> Refusal {
    setup.server.tenant_for(token).await.expect_err("refused")
}

#[tokio::test]
async fn a_valid_token_is_its_scope_s_tenant_and_claims_map_too() {
    let key = TestKey::new("k1");
    let setup = setup(&[&key]);
    let tenant = setup
        .server
        .tenant_for(&key.sign(&claims("openid airlock:acme")))
        .await
        .expect("taken");
    assert_eq!(tenant.name, "acme");
    let mut admin = claims("");
    admin["groups"] = json!(["staff", "airlock-admins"]);
    assert_eq!(
        setup
            .server
            .tenant_for(&key.sign(&admin))
            .await
            .expect("taken")
            .name,
        "default"
    );
}

#[tokio::test]
async fn each_broken_token_is_refused_with_its_reason() {
    let key = TestKey::new("k1");
    let setup = setup(&[&key]);
    let invalid = |refusal: Refusal, words: &str| match refusal {
        Refusal::Invalid(reason) => assert!(reason.contains(words), "{reason}"),
        other => panic!("expected invalid_token ({words}), got {other:?}"),
    };

    let mut expired = claims("airlock:acme");
    expired["exp"] = json!(now() - 120);
    invalid(refusal(&setup, &key.sign(&expired)).await, "expired");

    let mut early = claims("airlock:acme");
    early["nbf"] = json!(now() + 600);
    invalid(refusal(&setup, &key.sign(&early)).await, "not valid yet");

    let mut other_audience = claims("airlock:acme");
    other_audience["aud"] = json!("https://elsewhere.example/mcp");
    invalid(
        refusal(&setup, &key.sign(&other_audience)).await,
        "audience",
    );

    let mut no_audience = claims("airlock:acme");
    no_audience.as_object_mut().expect("object").remove("aud");
    invalid(refusal(&setup, &key.sign(&no_audience)).await, "aud");

    let mut other_issuer = claims("airlock:acme");
    other_issuer["iss"] = json!("https://evil.example");
    invalid(refusal(&setup, &key.sign(&other_issuer)).await, "issuer");

    // Signed by a key the issuer never published, under a kid it did.
    let impostor = TestKey::new("k1");
    invalid(
        refusal(&setup, &impostor.sign(&claims("airlock:acme"))).await,
        "signature",
    );

    // `alg: none`, and a token signed with the published key's bytes as an HMAC secret.
    let payload = URL_SAFE_NO_PAD.encode(claims("airlock:acme").to_string());
    let none = format!(
        "{}.{payload}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT","kid":"k1"}"#)
    );
    invalid(refusal(&setup, &none).await, "not a signed JWT");
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some("k1".into());
    let confused = jsonwebtoken::encode(
        &hs,
        &claims("airlock:acme"),
        &EncodingKey::from_secret(key.jwk["x"].as_str().expect("x").as_bytes()),
    )
    .expect("signs");
    invalid(refusal(&setup, &confused).await, "HS256");

    invalid(refusal(&setup, "not.a.jwt").await, "not a signed JWT");
    invalid(
        refusal(&setup, &"x".repeat(MAX_TOKEN_BYTES + 1)).await,
        "longer",
    );
}

#[tokio::test]
async fn a_token_naming_no_tenant_or_two_is_insufficient() {
    let key = TestKey::new("k1");
    let setup = setup(&[&key]);
    assert!(matches!(
        refusal(&setup, &key.sign(&claims("openid profile"))).await,
        Refusal::Insufficient(_)
    ));
    let mut both = claims("airlock:acme");
    both["groups"] = json!("airlock-admins");
    match refusal(&setup, &key.sign(&both)).await {
        Refusal::Insufficient(reason) => assert!(reason.contains("several"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let challenge = setup
        .server
        .challenge(&Refusal::Insufficient("x\"y".into()));
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"airlock:acme\""), "{challenge}");
    assert!(!challenge.contains("x\"y"), "{challenge}");
}

#[tokio::test]
async fn a_rotated_out_key_stops_being_accepted() {
    let old = TestKey::new("old");
    let new = TestKey::new("new");
    let setup = setup_refetching_after(&[&old], std::time::Duration::ZERO);
    let by_old = old.sign(&claims("airlock:acme"));
    setup
        .server
        .tenant_for(&by_old)
        .await
        .expect("old key, before the rotation");
    // The issuer rotates: only the new key is published.
    *setup.published.lock().expect("lock") = publish(&[&new]);
    // A token under the new kid makes the endpoint refetch the set…
    setup
        .server
        .tenant_for(&new.sign(&claims("airlock:acme")))
        .await
        .expect("new key, after the rotation");
    // …which no longer holds the old key.
    match refusal(&setup, &by_old).await {
        Refusal::Invalid(reason) => assert!(reason.contains("no key `old`"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn unknown_key_ids_refetch_at_most_once_per_interval() {
    let key = TestKey::new("k1");
    let setup = setup(&[&key]);
    setup
        .server
        .tenant_for(&key.sign(&claims("airlock:acme")))
        .await
        .expect("taken");
    // A key published after the last fetch is not seen until MIN_REFETCH has passed: made-up
    // kids cannot make the endpoint fetch the set on every request.
    let later = TestKey::new("later");
    *setup.published.lock().expect("lock") = publish(&[&key, &later]);
    for n in 0..3 {
        let mut forged = Header::new(Algorithm::ES256);
        forged.kid = Some(format!("made-up-{n}"));
        let token =
            jsonwebtoken::encode(&forged, &claims("airlock:acme"), &key.encoding).expect("signs");
        assert!(matches!(refusal(&setup, &token).await, Refusal::Invalid(_)));
    }
    assert!(matches!(
        refusal(&setup, &later.sign(&claims("airlock:acme"))).await,
        Refusal::Invalid(_)
    ));
}

#[test]
fn metadata_and_challenge_say_where_to_get_a_token() {
    let key = TestKey::new("k1");
    let setup = setup(&[&key]);
    let metadata = setup.server.metadata();
    assert_eq!(metadata["resource"], RESOURCE);
    assert_eq!(metadata["authorization_servers"], json!([ISSUER]));
    assert_eq!(metadata["scopes_supported"], json!(["airlock:acme"]));
    assert_eq!(
        setup.server.metadata_url(),
        "https://airlock.example/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(
        setup.server.challenge(&Refusal::Missing),
        "Bearer resource_metadata=\"https://airlock.example/.well-known/oauth-protected-resource/mcp\""
    );
    assert!(is_metadata_path(
        "/.well-known/oauth-protected-resource/mcp"
    ));
    assert!(is_metadata_path("/.well-known/oauth-protected-resource"));
    assert!(!is_metadata_path("/.well-known/oauth-protected-resourcex"));
}

#[test]
fn settings_that_would_open_the_endpoint_are_refused() {
    let key = TestKey::new("k1");
    let setup = setup(&[&key]);
    let tenants = {
        let roots = WorkspaceRoots::new(&[setup._state.path().to_owned()]).expect("roots");
        Tenants::load(setup._state.path(), &AuthSettings::default(), &roots).expect("tenants")
    };
    let base = McpOAuthSettings {
        issuer: ISSUER.into(),
        jwks_uri: None,
        resource: RESOURCE.into(),
        algorithms: vec!["ES256".into()],
        scopes_supported: Vec::new(),
        tenants: vec![OAuthTenantRule {
            tenant: "default".into(),
            scope: Some("airlock".into()),
            claim: None,
            value: None,
        }],
    };
    let refused = |change: &dyn Fn(&mut McpOAuthSettings), words: &str| {
        let mut settings = base.clone();
        change(&mut settings);
        let err = ResourceServer::new(settings, &tenants).expect_err(words);
        assert!(err.contains(words), "{err}");
    };
    ResourceServer::new(base.clone(), &tenants).expect("the base settings");
    refused(&|s| s.algorithms = vec!["HS256".into()], "shared-secret");
    refused(&|s| s.algorithms = vec!["none".into()], "unknown algorithm");
    refused(&|s| s.algorithms.clear(), "at least one");
    refused(&|s| s.issuer = "http://issuer.example".into(), "https");
    refused(&|s| s.tenants.clear(), "at least one");
    refused(
        &|s| s.tenants[0].tenant = "nobody".into(),
        "no tenant `nobody`",
    );
    refused(
        &|s| s.tenants[0].claim = Some("groups".into()),
        "either `scope`",
    );
}

/// Every token with one character of its header, claims or signature changed — each
/// position, to a few characters of the base64url alphabet and to ones outside it — is
/// refused: the search covers the whole token rather than sampling it.
#[tokio::test]
async fn a_token_changed_anywhere_is_refused() {
    let key = TestKey::new("k1");
    let setup = setup(&[&key]);
    let token = key.sign(&claims("airlock:acme"));
    setup
        .server
        .tenant_for(&token)
        .await
        .expect("the unchanged token");
    // base64url leaves some bits of a part's last character unused: a change there decodes
    // to the same bytes, which is no forgery.
    let same_bytes = |a: &str, b: &str| {
        a.split('.').zip(b.split('.')).all(|(a, b)| {
            URL_SAFE_NO_PAD
                .decode(a)
                .ok()
                .zip(URL_SAFE_NO_PAD.decode(b).ok())
                .is_some_and(|(a, b)| a == b)
        })
    };
    let mut tried = 0;
    for at in 0..token.len() {
        for to in ['A', 'f', '0', '_', '-', '.', '=', ' '] {
            let mut changed = token.clone().into_bytes();
            if changed[at] == to as u8 {
                continue;
            }
            changed[at] = to as u8;
            let changed = String::from_utf8(changed).expect("ascii");
            if same_bytes(&token, &changed) {
                continue;
            }
            tried += 1;
            assert!(
                setup.server.tenant_for(&changed).await.is_err(),
                "a token changed at {at} to {to:?} was taken: {changed}"
            );
        }
    }
    assert!(tried > token.len() * 6, "{tried} changes tried");
}
