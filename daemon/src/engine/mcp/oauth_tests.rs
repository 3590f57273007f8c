//! The OAuth client's pure parts: the refresh margin, metadata paths, where secrets may go,
//! and what is redacted.

use super::*;

#[test]
fn the_margin_is_a_tenth_of_the_lifetime_up_to_a_minute() {
    assert_eq!(
        refresh_margin(Duration::from_secs(3)),
        Duration::from_millis(300)
    );
    assert_eq!(
        refresh_margin(Duration::from_secs(3600)),
        MAX_REFRESH_MARGIN
    );
    assert_eq!(refresh_margin(Duration::ZERO), Duration::ZERO);
}

#[test]
fn metadata_is_found_under_the_well_known_path() {
    let url = |issuer: &str| metadata_url(issuer).map(|url| url.to_string());
    assert_eq!(
        url("https://as.example.com").as_deref(),
        Some("https://as.example.com/.well-known/oauth-authorization-server")
    );
    assert_eq!(
        url("https://as.example.com/tenant1/").as_deref(),
        Some("https://as.example.com/.well-known/oauth-authorization-server/tenant1")
    );
    assert_eq!(url("ftp://as.example.com"), None);
    let resource = |url: &str| resource_metadata_url(url).map(|url| url.to_string());
    assert_eq!(
        resource("https://api.example.com/mcp?x=1#f").as_deref(),
        Some("https://api.example.com/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!(resource("file:///mcp"), None);
}

#[test]
fn secrets_go_over_tls_or_to_loopback_only() {
    let may = |url: &str| may_carry_secrets(&reqwest::Url::parse(url).expect("a URL"));
    assert!(may("https://as.example.com/token"));
    assert!(may("http://127.0.0.1:9/token"));
    assert!(may("http://[::1]:9/token"));
    assert!(!may("http://as.example.com/token"));
    assert!(!may("http://localhost:9/token"));
}

#[test]
fn issued_tokens_are_redacted_and_text_from_the_server_is_cleaned() {
    let source = TokenSource::new(
        "s",
        OAuthConfig {
            endpoint: TokenEndpoint::Url("https://as.example.com/token".into()),
            client_id: "c".into(),
            client_secret_secret: "S".into(),
            scopes: Vec::new(),
            resource: "https://mcp.example.com/mcp".into(),
            client_auth: ClientAuth::Basic,
        },
        "secret-value".into(),
        Rules::default(),
    );
    source
        .issued
        .lock()
        .expect("not poisoned")
        .push_back("tok-123456789".into());
    assert_eq!(
        source.redact("a tok-123456789 b"),
        format!("a {REDACTED} b")
    );
    assert!(matches!(source.redact("nothing"), Cow::Borrowed(_)));
    assert_eq!(clean("bad\nclient"), "badclient");
    assert!(clean(&"x".repeat(500)).ends_with('…'));
}
