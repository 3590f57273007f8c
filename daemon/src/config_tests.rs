//! The config file and flags: precedence, defaults, unknown keys refused, paths anchored.

use super::store::DEFAULT_LEASE;
use super::*;

#[test]
fn the_default_listen_address_is_loopback() {
    assert_eq!(default_listen().to_string(), DEFAULT_LISTEN);
}

#[test]
fn flags_win_over_the_file_and_tools_dirs_accumulate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("airlockd.toml");
    std::fs::write(
        &path,
        r#"
        listen = "127.0.0.1:9000"
        tools_dirs = ["extra-tools"]
        profiles_dir = "/etc/airlock/profiles"
        workspace_roots = ["/srv"]
        [wasm]
        max_concurrent_calls = 8
        "#,
    )
    .expect("write");
    let file = ConfigFile::load(&path).expect("parses");
    assert_eq!(file.tools_dirs, vec![dir.path().join("extra-tools")]);
    let config = DaemonConfig::resolve(
        file,
        Overrides {
            listen: Some("127.0.0.1:9001".parse().expect("addr")),
            tools_dirs: vec![PathBuf::from("/opt/tools")],
            ..Overrides::default()
        },
    )
    .expect("resolves");
    assert_eq!(
        config.listen,
        ListenAddr::Tcp("127.0.0.1:9001".parse().expect("addr"))
    );
    assert!(
        config
            .tools_dirs
            .ends_with(&[dir.path().join("extra-tools"), PathBuf::from("/opt/tools")])
    );
    assert_eq!(config.profiles_dir, PathBuf::from("/etc/airlock/profiles"));
    assert_eq!(config.workspace_roots, vec![PathBuf::from("/srv")]);
    assert_eq!(config.wasm_max_concurrent_calls, 8);
}

#[test]
fn the_console_is_on_unless_the_file_or_the_flag_turns_it_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("airlockd.toml");
    let resolve = |text: &str, overrides: Overrides| {
        std::fs::write(&path, text).expect("write");
        let file = ConfigFile::load(&path).expect("parses");
        DaemonConfig::resolve(file, overrides)
            .expect("resolves")
            .console
    };
    assert_eq!(
        resolve("", Overrides::default()),
        ConsoleSettings::default()
    );
    assert!(resolve("", Overrides::default()).enabled);
    let off = resolve("[console]\nenabled = false\n", Overrides::default());
    assert!(!off.enabled);
    let flagged = resolve(
        "",
        Overrides {
            no_console: true,
            ..Overrides::default()
        },
    );
    assert!(!flagged.enabled);
    // A directory named in the file is relative to the file.
    let from_file = resolve("[console]\ndir = \"dist\"\n", Overrides::default());
    assert_eq!(from_file.dir, Some(dir.path().join("dist")));
    std::fs::write(&path, "[console]\nenable = true\n").expect("write");
    let err = ConfigFile::load(&path).expect_err("an unknown key is refused");
    assert!(err.to_string().contains("enable"), "{err}");
}

#[test]
fn the_otlp_endpoint_comes_from_the_flag_else_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("airlockd.toml");
    std::fs::write(&path, "otlp_endpoint = \"http://collector:4317\"").expect("write");
    let resolve = |flag: Option<&str>| {
        DaemonConfig::resolve(
            ConfigFile::load(&path).expect("parses"),
            Overrides {
                otlp_endpoint: flag.map(str::to_owned),
                ..Overrides::default()
            },
        )
        .expect("resolves")
        .otlp
        .endpoint
    };
    assert_eq!(resolve(None).as_deref(), Some("http://collector:4317"));
    assert_eq!(
        resolve(Some("http://127.0.0.1:4317")).as_deref(),
        Some("http://127.0.0.1:4317")
    );
    let none =
        DaemonConfig::resolve(ConfigFile::default(), Overrides::default()).expect("resolves");
    assert_eq!(none.otlp.endpoint, None);
}

#[test]
fn the_otlp_table_metrics_and_audit_are_read_and_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("airlockd.toml");
    std::fs::write(
        &path,
        r#"
[otlp]
endpoint = "https://collector:4318"
protocol = "http/protobuf"
headers = { "x-api-key" = "secret-key" }
ca_file = "ca.pem"
timeout_ms = 2500
signals = ["traces", "logs"]

[metrics]
listen = "0.0.0.0:9464"
token_file = "metrics-token"

[audit]
enabled = false
"#,
    )
    .expect("write");
    let config = DaemonConfig::resolve(
        ConfigFile::load(&path).expect("parses"),
        Overrides::default(),
    )
    .expect("resolves");
    assert_eq!(
        config.otlp.endpoint.as_deref(),
        Some("https://collector:4318")
    );
    assert_eq!(config.otlp.protocol, Some(OtlpProtocol::HttpProtobuf));
    assert_eq!(config.otlp.ca_file, Some(dir.path().join("ca.pem")));
    assert_eq!(
        config.metrics.token_file,
        Some(dir.path().join("metrics-token"))
    );
    assert!(!config.audit);
    // The header's value is a secret: Debug never shows it.
    let shown = format!("{config:?}");
    assert!(!shown.contains("secret-key"), "{shown}");
    assert!(shown.contains("x-api-key"), "{shown}");

    std::fs::write(
        &path,
        "otlp_endpoint = \"http://a:4317\"\n[otlp]\nendpoint = \"http://b:4317\"\n",
    )
    .expect("write");
    let twice = DaemonConfig::resolve(
        ConfigFile::load(&path).expect("parses"),
        Overrides::default(),
    )
    .expect_err("two endpoints are refused");
    assert!(twice.to_string().contains("set twice"), "{twice}");
    std::fs::write(&path, "[otlp]\nprotocol = \"http/json\"\n").expect("write");
    assert!(ConfigFile::load(&path).is_err(), "http/json is not offered");
    std::fs::write(&path, "[metrics]\nlisten = \"127.0.0.1:1\"\nport = 2\n").expect("write");
    assert!(ConfigFile::load(&path).is_err(), "unknown keys are refused");
}

#[test]
fn providers_and_run_defaults_come_from_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("airlockd.toml");
    std::fs::write(
        &path,
        r#"
        [providers]
        openai_base_url = "http://127.0.0.1:8080/v1"
        openai_api_key_env = "LOCAL_KEY"
        request_timeout_ms = 5000
        stream = false
        [runs]
        max_steps = 7
        approval_timeout_ms = 1000
        keep_exchanges = false
        "#,
    )
    .expect("write");
    let config = DaemonConfig::resolve(
        ConfigFile::load(&path).expect("parses"),
        Overrides::default(),
    )
    .expect("resolves");
    let providers = &config.agent.providers;
    assert_eq!(providers.openai_base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(providers.openai_api_key_env, "LOCAL_KEY");
    assert_eq!(providers.request_timeout, Duration::from_secs(5));
    assert!(!providers.stream);
    assert_eq!(providers.anthropic_api_key_env, "ANTHROPIC_API_KEY");
    assert_eq!(config.agent.defaults.max_steps, 7);
    assert_eq!(
        config.agent.defaults.approval_timeout,
        Duration::from_secs(1)
    );
    assert!(!config.agent.keep_exchanges);
    let defaults =
        DaemonConfig::resolve(ConfigFile::default(), Overrides::default()).expect("resolves");
    assert!(defaults.agent.providers.stream);
    assert!(
        defaults.agent.keep_exchanges,
        "any run can become an eval case"
    );
}

#[test]
fn retention_is_days_and_never_zero() {
    let file: ConfigFile = toml::from_str("[store]\nretention_days = 30").expect("parses");
    let config = DaemonConfig::resolve(file, Overrides::default()).expect("resolves");
    assert_eq!(config.retention, Some(Duration::from_secs(30 * 86_400)));
    let defaults =
        DaemonConfig::resolve(ConfigFile::default(), Overrides::default()).expect("resolves");
    assert_eq!(
        defaults.retention, None,
        "everything is kept unless configured"
    );
    let zero = toml::from_str::<ConfigFile>("[store]\nretention_days = 0").expect_err("zero");
    assert!(zero.to_string().contains("nonzero"), "{zero}");
}

#[test]
fn the_blob_cap_is_a_size_and_has_a_default() {
    let file: ConfigFile = toml::from_str("[changes]\nblob_cap = \"512 MiB\"").expect("parses");
    assert_eq!(file.changes.blob_cap.map(|cap| cap.0), Some(512 << 20));
    let file: ConfigFile = toml::from_str("").expect("parses");
    assert!(file.changes.blob_cap.is_none());
    toml::from_str::<ConfigFile>("[changes]\nblob_cap = \"lots\"").expect_err("not a size");
    toml::from_str::<ConfigFile>("[changes]\nkeep = 1").expect_err("unknown key");
}

#[test]
fn unknown_keys_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("airlockd.toml");
    std::fs::write(&path, "listne = \"127.0.0.1:1\"").expect("write");
    let err = ConfigFile::load(&path).expect_err("typo");
    assert!(err.to_string().contains("listne"), "{err}");
}

#[test]
fn listen_addresses_are_tcp_an_absolute_unix_socket_or_systemds() {
    assert_eq!(
        "unix:/run/airlock.sock".parse::<ListenAddr>(),
        Ok(ListenAddr::Unix(PathBuf::from("/run/airlock.sock")))
    );
    assert_eq!(
        "unix:///run/a.sock".parse::<ListenAddr>(),
        Ok(ListenAddr::Unix(PathBuf::from("/run/a.sock")))
    );
    assert!("unix:relative.sock".parse::<ListenAddr>().is_err());
    assert!("localhost".parse::<ListenAddr>().is_err());
    let tcp: ListenAddr = "127.0.0.1:1".parse().expect("tcp");
    assert_eq!(tcp.to_string(), "127.0.0.1:1");
    assert_eq!("systemd".parse::<ListenAddr>(), Ok(ListenAddr::Systemd));
    assert_eq!(ListenAddr::Systemd.to_string(), "systemd");
    assert!("systemd:".parse::<ListenAddr>().is_err());
}

#[test]
fn tenants_tls_and_trust_come_from_the_file_with_paths_anchored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("airlockd.toml");
    std::fs::write(
        &path,
        r#"
        listen = "unix:/tmp/airlockd.sock"
        [tls]
        cert = "server.pem"
        key = "server.key"
        [auth]
        unix_socket_trust = true
        [[auth.tenants]]
        name = "ci"
        token_file = "ci.token"
        tools = ["read_file"]
        approvals = "none"
        max_concurrent_runs = 2
        "#,
    )
    .expect("write");
    let config = DaemonConfig::resolve(
        ConfigFile::load(&path).expect("parses"),
        Overrides::default(),
    )
    .expect("resolves");
    assert_eq!(
        config.listen,
        ListenAddr::Unix(PathBuf::from("/tmp/airlockd.sock"))
    );
    let tls = config.tls.expect("tls");
    assert_eq!(tls.cert, dir.path().join("server.pem"));
    assert_eq!(tls.client_ca, None);
    assert!(config.auth.unix_socket_trust);
    let ci = &config.auth.tenants[0];
    assert_eq!(
        ci.token_file.as_deref(),
        Some(dir.path().join("ci.token").as_path())
    );
    assert_eq!(ci.tools, vec!["read_file".to_owned()]);
    assert_eq!(ci.approvals, ApprovalRights::None);
    assert_eq!(ci.max_concurrent_runs, Some(2));
}

/// The README's `[mcp_oauth]` example parses as written; an unknown key is refused.
#[test]
fn mcp_oauth_reads_as_the_readme_writes_it() {
    let readme = include_str!("../../README.md");
    let start = readme.find("[mcp_oauth]").expect("the README's example");
    let end = readme[start..].find("```").expect("its end");
    let file: ConfigFile = toml::from_str(&readme[start..start + end]).expect("parses");
    let oauth = file.mcp_oauth.expect("mcp_oauth");
    assert_eq!(oauth.algorithms, ["RS256", "ES256"]);
    assert_eq!(oauth.tenants.len(), 2);
    assert_eq!(oauth.tenants[1].claim.as_deref(), Some("groups"));
    let typo = toml::from_str::<ConfigFile>(
        "[mcp_oauth]\nissuer = \"https://a\"\nresource = \"https://b/mcp\"\naudience = \"x\"\ntenants = []\n",
    );
    assert!(typo.is_err());
}

#[test]
fn egress_host_overrides_are_read_and_checked() {
    let file: ConfigFile =
        toml::from_str("[egress]\nhosts = { \"api.example.test\" = [\"198.51.100.7\", \"::1\"] }")
            .expect("parses");
    let config = DaemonConfig::resolve(file, Overrides::default()).expect("resolves");
    assert_eq!(
        config.egress.hosts["api.example.test"],
        vec![
            "198.51.100.7".parse::<IpAddr>().expect("ip"),
            "::1".parse::<IpAddr>().expect("ip")
        ]
    );
    for bad in [
        "[egress]\nhosts = { \"*.example.test\" = [\"198.51.100.7\"] }",
        "[egress]\nhosts = { \"a.test\" = [] }",
        "[egress]\nhosts = { \"10.0.0.1\" = [\"198.51.100.7\"] }",
    ] {
        let file: ConfigFile = toml::from_str(bad).expect("parses");
        let err = DaemonConfig::resolve(file, Overrides::default()).expect_err(bad);
        assert!(matches!(err, ConfigError::EgressHost { .. }), "{err}");
    }
    assert!(toml::from_str::<ConfigFile>("[egress]\nhosts = { \"a.test\" = [\"nope\"] }").is_err());
    assert!(toml::from_str::<ConfigFile>("[egress]\nproxy = 1").is_err());
}

#[test]
fn the_store_is_sqlite_unless_the_flag_or_the_file_names_a_postgres_url() {
    let resolve = |file: &str, flag: Option<&str>| {
        DaemonConfig::resolve(
            toml::from_str::<ConfigFile>(file).expect("parses"),
            Overrides {
                store: flag.map(str::to_owned),
                ..Overrides::default()
            },
        )
        .map(|config| config.store)
    };
    assert_eq!(resolve("", None).expect("default"), StoreBackend::default());
    let url = "postgres://airlock@db:5432/airlock";
    let fleet = StoreBackend::Postgres {
        url: url.into(),
        lease: DEFAULT_LEASE,
        shared_dir: None,
    };
    assert_eq!(
        resolve(&format!("[store]\nurl = \"{url}\""), None).expect("file"),
        fleet
    );
    assert_eq!(resolve("", Some(url)).expect("flag"), fleet);
    // The flag wins over the file.
    assert_eq!(
        resolve(&format!("[store]\nurl = \"{url}\""), Some("sqlite")).expect("flag"),
        StoreBackend::default()
    );
    let err = resolve("", Some("mysql://db")).expect_err("not a store");
    assert!(err.to_string().contains("postgres://"), "{err}");
    let err = resolve("[store]\nfsync_every_commit = true", Some(url)).expect_err("SQLite's");
    assert!(err.to_string().contains("synchronous_commit"), "{err}");
    let short = resolve("[store]\nlease_ms = 250", Some(url)).expect("a short lease");
    assert_eq!(
        short,
        StoreBackend::Postgres {
            url: url.into(),
            lease: Duration::from_millis(250),
            shared_dir: None,
        }
    );
    let shared = resolve("[store]\nshared_dir = \"/srv/airlock\"", Some(url)).expect("shared");
    assert_eq!(
        shared,
        StoreBackend::Postgres {
            url: url.into(),
            lease: DEFAULT_LEASE,
            shared_dir: Some(PathBuf::from("/srv/airlock")),
        }
    );
    let err = resolve("[store]\nshared_dir = \"/srv/airlock\"", None).expect_err("a fleet's");
    assert!(err.to_string().contains("shared_dir"), "{err}");
    // The shortest lease is taken; a millisecond less is not.
    assert!(resolve("[store]\nlease_ms = 100", Some(url)).is_ok());
    let err = resolve("[store]\nlease_ms = 99", Some(url)).expect_err("too short");
    assert!(err.to_string().contains("at least 100 ms"), "{err}");
    let err = resolve("[store]\nlease_ms = 500", None).expect_err("a fleet's");
    assert!(err.to_string().contains("fleet"), "{err}");
}

#[test]
fn a_tls_key_without_a_certificate_is_refused() {
    let err = DaemonConfig::resolve(
        ConfigFile::default(),
        Overrides {
            tls_key: Some(PathBuf::from("k.pem")),
            ..Overrides::default()
        },
    )
    .expect_err("incomplete");
    assert!(matches!(err, ConfigError::TlsIncomplete), "{err}");
}

#[test]
fn the_models_offered_and_the_approval_webhooks_are_read_and_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("airlockd.toml");
    let resolve = |text: &str| {
        std::fs::write(&path, text).expect("write");
        let file = ConfigFile::load(&path).map_err(|err| err.to_string())?;
        DaemonConfig::resolve(file, Overrides::default()).map_err(|err| err.to_string())
    };
    let config = resolve(
        r#"
        [console]
        models = ["openai:gpt-4.1", "anthropic:claude-sonnet-4"]
        [approvals]
        public_url = "https://airlock.example.com/"
        link_ttl_s = 600
        [[approvals.webhooks]]
        name = "team-chat"
        url_file = "hook.url"
        format = "slack"
        tenant = "default"
        secret_file = "hook.secret"
        "#,
    )
    .expect("resolves");
    assert_eq!(config.console.models.len(), 2);
    let hook = &config.approvals.webhooks[0];
    assert_eq!(hook.format, WebhookFormat::Slack);
    // Files named in the file are relative to it.
    assert_eq!(hook.url_file, Some(dir.path().join("hook.url")));
    assert_eq!(hook.secret_file, Some(dir.path().join("hook.secret")));

    for (text, says) in [
        ("[console]\nmodels = [\"gpt-4\"]", "provider:model"),
        ("[console]\nmodels = [\"openai:\"]", "provider:model"),
        (
            "[[approvals.webhooks]]\nname = \"a\"\nurl = \"https://h/x\"",
            "public_url is required",
        ),
        (
            "[approvals]\npublic_url = \"ftp://h\"",
            "an http or https URL",
        ),
        (
            "[approvals]\npublic_url = \"https://h/?token=1\"",
            "no query",
        ),
        (
            "[approvals]\npublic_url = \"https://h\"\nlink_ttl_s = 0",
            "link_ttl_s",
        ),
        (
            "[approvals]\npublic_url = \"https://h\"\nlink_ttl_s = 86401",
            "to a day",
        ),
        (
            "[approvals]\npublic_url = \"https://h\"\n[[approvals.webhooks]]\nname = \"a b\"\nurl = \"https://h/x\"",
            "letters, digits",
        ),
        (
            "[approvals]\npublic_url = \"https://h\"\n[[approvals.webhooks]]\nname = \"a\"",
            "exactly one of url and url_file",
        ),
        (
            "[approvals]\npublic_url = \"https://h\"\n[[approvals.webhooks]]\nname = \"a\"\nurl = \"https://h/x\"\n[[approvals.webhooks]]\nname = \"a\"\nurl = \"https://h/y\"",
            "named twice",
        ),
        (
            "[approvals]\npublic_url = \"https://h\"\n[[approvals.webhooks]]\nname = \"a\"\nurl = \"file:///etc/passwd\"",
            "http or https",
        ),
        (
            "[approvals]\npublic_url = \"https://h\"\n[[approvals.webhooks]]\nname = \"a\"\nurl = \"https://h/x\"\nformat = \"teams\"",
            "unknown variant",
        ),
    ] {
        let err = resolve(text).expect_err(text);
        assert!(err.contains(says), "{text}: {err}");
    }
}
