//! Tool manifests: what is read, the strict defaults, each kind's required fields and each
//! mistake's refusal.

use super::*;

#[test]
fn only_regular_files_are_read_and_never_past_the_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let link = dir.path().join("schema.json");
    std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
    let err = read_capped(&link, 1024).expect_err("a device is refused");
    assert!(err.contains("not a regular file"), "{err}");
    let small = dir.path().join("small.json");
    std::fs::write(&small, "{}").expect("write");
    assert_eq!(read_capped(&small, 2).expect("at the cap"), "{}");
    assert!(
        read_capped(&small, 1)
            .expect_err("past the cap")
            .contains("limit is 1")
    );
}
use crate::output::TruncateMode;

const VALID: &str = r#"
    name = "read_file"
    version = "0.1.0"
    description = "Reads a file."
    risk = "read_only"
    engine = "wasm"
    module = "read_file.wasm"
    profile = "readonly"
    timeout_ms = 5000
    idempotent = true
    input_schema = { type = "object", properties = { path = { type = "string" } }, required = ["path"] }
    [output]
    max_bytes = 100
    truncate = "head"
"#;

fn load(text: &str) -> Result<Manifest, ManifestError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tool.toml");
    std::fs::write(&path, text).expect("write");
    std::fs::write(
        dir.path().join("schema.json"),
        r#"{"type": "object", "properties": {}}"#,
    )
    .expect("write");
    Manifest::load(&path)
}

#[test]
fn reads_a_complete_manifest() {
    let manifest = load(VALID).expect("valid");
    assert_eq!(manifest.name(), "read_file");
    assert_eq!(manifest.risk, Risk::ReadOnly);
    assert_eq!(manifest.engine(), EngineKind::Wasm);
    assert_eq!(manifest.abi(), Abi::JsonStdio);
    assert!(
        matches!(manifest.image.code, Code::Module(ref p) if p.ends_with("read_file.wasm") && p.is_absolute())
    );
    assert_eq!(manifest.timeout, Duration::from_millis(5000));
    assert!(manifest.idempotent);
    assert_eq!(manifest.output.max_bytes, 100);
    assert_eq!(manifest.output.truncate, TruncateMode::Head);
    assert_eq!(manifest.input_schema()["required"][0], "path");
}

#[test]
fn defaults_are_strict() {
    let manifest = load(
        r#"
        name = "t"
        version = "1"
        description = "d"
        risk = "write"
        engine = "wasm"
        module = "t.wasm"
        input_schema = "schema.json"
        "#,
    )
    .expect("valid");
    assert_eq!(manifest.profile, "strict");
    assert!(!manifest.idempotent);
    assert!(!manifest.preview);
    assert_eq!(manifest.timeout, Duration::from_millis(DEFAULT_TIMEOUT_MS));
    assert_eq!(manifest.output, OutputPolicy::default());
}

#[test]
fn process_tools_need_a_command_and_an_abi() {
    let manifest = load(
        r#"
        name = "rg"
        version = "1"
        description = "d"
        risk = "read_only"
        engine = "process"
        command = ["/usr/bin/rg", "--", "${pattern}"]
        abi = "argv"
        input_schema = { type = "object" }
        "#,
    )
    .expect("valid");
    assert_eq!(manifest.abi(), Abi::Argv);
    assert!(matches!(manifest.image.code, Code::Command { ref argv, .. } if argv.len() == 3));
}

#[test]
fn a_server_manifest_names_its_transport_and_brings_no_schema() {
    const SERVER: &str = r#"
        name = "gh"
        version = "1"
        description = "a remote server"
        risk = "read_only"
        engine = "mcp"
        profile = "net"
        [mcp]
        transport = "http"
        url = "https://api.example.com/mcp"
        [mcp.tools.create_issue]
        risk = "write"
    "#;
    let manifest = load(SERVER).expect("valid");
    assert_eq!(manifest.engine(), EngineKind::Mcp);
    assert!(matches!(
        manifest.image.code,
        Code::Mcp(ref server) if matches!(server.transport, McpTransport::Http { .. })
    ));
    let policy = manifest.mcp.as_ref().expect("a server's policy");
    assert_eq!(policy.tools["create_issue"].risk, Some(Risk::Write));
    let with = |from: &str, to: &str| SERVER.replace(from, to);
    let cases = [
        (
            with(
                "url = \"https://api.example.com/mcp\"",
                "command = [\"/bin/x\"]",
            ),
            "needs `url`",
        ),
        (
            with("https://api.example.com/mcp", "ftp://example.com"),
            "http:// or https://",
        ),
        (
            with("[mcp.tools", "bearer_secret = \"TOKEN\"\n[mcp.tools"),
            "names no secret",
        ),
        (
            with(
                "profile = \"net\"",
                "profile = \"net\"\ninput_schema = { type = \"object\" }",
            ),
            "bring their own schemas",
        ),
        (
            with("transport = \"http\"", "transport = \"smoke\""),
            "unknown variant",
        ),
        (
            with("[mcp.tools", "listing_workspace = \"git\"\n[mcp.tools"),
            "for stdio servers",
        ),
    ];
    for (text, expected) in cases {
        let err = load(&text).expect_err("invalid").to_string();
        assert!(err.contains(expected), "expected {expected:?} in {err}");
    }
}

#[test]
fn a_remote_server_may_get_its_tokens_with_oauth() {
    use crate::engine::mcp::oauth::{ClientAuth, TokenEndpoint};
    const SERVER: &str = r#"
        name = "gh"
        version = "1"
        description = "a remote server"
        risk = "read_only"
        engine = "mcp"
        profile = "net"
        [[secrets]]
        env = "CLIENT_SECRET"
        from_env = "PATH"
        [mcp]
        transport = "http"
        url = "https://api.example.com/mcp"
        [mcp.oauth]
        token_url = "https://auth.example.com/token"
        client_id = "airlock"
        client_secret_secret = "CLIENT_SECRET"
        scopes = ["repo:read"]
    "#;
    let oauth = |text: &str| match load(text).expect("valid").image.code {
        Code::Mcp(server) => match &server.transport {
            McpTransport::Http { oauth, .. } => oauth.clone().expect("oauth"),
            McpTransport::Stdio { .. } => panic!("a remote server"),
        },
        _ => panic!("a server"),
    };
    let config = oauth(SERVER);
    assert_eq!(
        config.endpoint,
        TokenEndpoint::Url("https://auth.example.com/token".into())
    );
    assert_eq!(config.resource, "https://api.example.com/mcp");
    assert_eq!(config.client_auth, ClientAuth::Basic);
    assert_eq!(config.scopes, ["repo:read"]);
    let post = format!("{SERVER}\nclient_auth = \"post\"\nresource = \"https://api.example.com\"");
    let config = oauth(&post);
    assert_eq!(config.client_auth, ClientAuth::Post);
    assert_eq!(config.resource, "https://api.example.com");
    // Neither: the server's own metadata names its authorization server.
    let discovered = oauth(&SERVER.replace("token_url = \"https://auth.example.com/token\"", ""));
    assert_eq!(
        discovered.endpoint,
        TokenEndpoint::Discovered("https://api.example.com/mcp".into())
    );
    let with = |from: &str, to: &str| SERVER.replace(from, to);
    let cases = [
        (
            with(
                "[mcp.oauth]",
                "bearer_secret = \"CLIENT_SECRET\"\n[mcp.oauth]",
            ),
            "not both",
        ),
        (
            with(
                "token_url = \"https://auth.example.com/token\"",
                "issuer = \"https://auth.example.com\"\ntoken_url = \"https://auth.example.com/token\"",
            ),
            "not both; with neither",
        ),
        (
            with(
                "https://auth.example.com/token",
                "http://auth.example.com/token",
            ),
            "never sent in clear text",
        ),
        (
            with(
                "client_secret_secret = \"CLIENT_SECRET\"",
                "client_secret_secret = \"OTHER\"",
            ),
            "names no secret",
        ),
        (with("\"repo:read\"", "\"repo read\""), "is not a scope"),
        (
            with("client_id = \"airlock\"", "client_id = \" \""),
            "client_id",
        ),
        (
            with("scopes = ", "grant = \"password\"\nscopes = "),
            "unknown field",
        ),
        (
            with(
                "client_id = \"airlock\"",
                "client_id = \"airlock\"\nclient_auth = \"jwt\"",
            ),
            "unknown variant",
        ),
    ];
    for (text, expected) in cases {
        let err = load(&text).expect_err("invalid").to_string();
        assert!(err.contains(expected), "expected {expected:?} in {err}");
    }
    let stdio = r#"
        name = "s"
        version = "1"
        description = "d"
        risk = "read_only"
        engine = "mcp"
        [mcp]
        transport = "stdio"
        command = ["/bin/x"]
        [mcp.oauth]
        token_url = "https://auth.example.com/token"
        client_id = "airlock"
        client_secret_secret = "S"
    "#;
    let err = load(stdio).expect_err("invalid").to_string();
    assert!(err.contains("are for `transport = \"http\"`"), "{err}");
}

#[test]
fn a_stdio_server_may_be_listed_in_an_empty_git_repository() {
    const SERVER: &str = r#"
        name = "repo"
        version = "1"
        description = "a git server"
        risk = "read_only"
        engine = "mcp"
        [mcp]
        transport = "stdio"
        command = ["/usr/bin/python3", "-m", "mcp_server_git", "--repository", "/workspace"]
    "#;
    let listed_in = |text: &str| match load(text).expect("valid").image.code {
        Code::Mcp(server) => server.listing_workspace,
        _ => panic!("a server"),
    };
    assert_eq!(listed_in(SERVER), ListingWorkspace::Empty);
    let git = format!("{SERVER}\nlisting_workspace = \"git\"");
    assert_eq!(listed_in(&git), ListingWorkspace::Git);
    let other = format!("{SERVER}\nlisting_workspace = \"fixtures\"");
    let err = load(&other).expect_err("invalid").to_string();
    assert!(err.contains("unknown variant `fixtures`"), "{err}");
}

#[test]
fn annotations_raise_a_risk_and_never_lower_it() {
    use crate::engine::mcp::Hints;
    let hints = |read_only, destructive, open_world| Hints {
        read_only,
        destructive,
        idempotent: None,
        open_world,
    };
    assert_eq!(
        raised_risk(Risk::ReadOnly, Hints::default()),
        Risk::ReadOnly
    );
    assert_eq!(
        raised_risk(Risk::Write, hints(Some(true), None, None)),
        Risk::Write
    );
    assert_eq!(
        raised_risk(Risk::ReadOnly, hints(Some(false), None, None)),
        Risk::Write
    );
    assert_eq!(
        raised_risk(Risk::ReadOnly, hints(None, None, Some(true))),
        Risk::Network
    );
    assert_eq!(
        raised_risk(Risk::ReadOnly, hints(Some(false), Some(true), None)),
        Risk::Destructive
    );
    assert!(Risk::Install < Risk::Exec && Risk::Exec < Risk::Destructive);
}

#[test]
fn refuses_each_kind_of_mistake_with_a_reason() {
    let with = |from: &str, to: &str| VALID.replace(from, to);
    let cases = [
        (
            with("idempotent = true", "idempotent = true\ncolour = 1"),
            "unknown field",
        ),
        (
            with("name = \"read_file\"", "name = \"Read File\""),
            "`name`",
        ),
        (
            with("risk = \"read_only\"", "risk = \"spicy\""),
            "unknown variant",
        ),
        (with("module = \"read_file.wasm\"", ""), "need `module`"),
        (
            with(
                "module = \"read_file.wasm\"",
                "module = \"a.wasm\"\ncommand = [\"x\"]",
            ),
            "`command` is for process tools",
        ),
        (with("timeout_ms = 5000", "timeout_ms = 0"), "timeout_ms"),
        (with("profile = \"readonly\"", "sha256 = \"abc\""), "64 hex"),
        (
            with(
                "input_schema = { type = \"object\", properties = { path = { type = \"string\" } }, required = [\"path\"] }",
                "",
            ),
            "`input_schema` is missing",
        ),
        (
            with(
                "input_schema = { type = \"object\", properties = { path = { type = \"string\" } }, required = [\"path\"] }",
                "input_schema = \"missing.json\"",
            ),
            "cannot read",
        ),
        (
            with(
                "input_schema = { type = \"object\", properties = { path = { type = \"string\" } }, required = [\"path\"] }",
                "input_schema = { type = \"string\" }",
            ),
            "must describe an object",
        ),
        (with("max_bytes = 100", "max_bytes = 0"), "max_bytes"),
    ];
    for (text, expected) in cases {
        let err = load(&text).expect_err("invalid").to_string();
        assert!(err.contains(expected), "expected {expected:?} in {err}");
        assert!(err.contains("tool.toml"), "the error names the file: {err}");
    }
}
