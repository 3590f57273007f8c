//! Where each signal goes: the file first, the environment for the rest, as the
//! OpenTelemetry SDKs read `OTEL_EXPORTER_OTLP_*`.

use std::collections::HashMap;

use super::*;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn header(settings: &TransportSettings, name: &str) -> Option<String> {
    settings
        .headers
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.0.clone())
}

#[test]
fn nothing_configured_exports_nothing() {
    let config = resolve(&OtlpFile::default(), &env(&[])).unwrap();
    assert_eq!(
        (config.traces, config.metrics, config.logs),
        (None, None, None)
    );
    assert_eq!(config.metrics_interval, DEFAULT_METRICS_INTERVAL);
    assert_eq!(
        config.resource[0],
        ("service.name".into(), "airlockd".into())
    );
}

#[test]
fn the_shared_http_endpoint_gets_each_signals_path_and_a_signals_own_is_whole() {
    let config = resolve(
        &OtlpFile::default(),
        &env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            (
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
                "https://logs.example/ingest",
            ),
        ]),
    )
    .unwrap();
    let traces = config.traces.unwrap();
    assert_eq!(traces.endpoint, "https://collector:4318/v1/traces");
    assert_eq!(traces.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(
        config.metrics.unwrap().endpoint,
        "https://collector:4318/v1/metrics"
    );
    assert_eq!(config.logs.unwrap().endpoint, "https://logs.example/ingest");
}

#[test]
fn headers_are_percent_decoded_and_the_files_win() {
    let mut file = OtlpFile {
        endpoint: Some("http://collector:4317".into()),
        ..OtlpFile::default()
    };
    file.headers
        .insert("X-Tenant".into(), HeaderValue("from-file".into()));
    let config = resolve(
        &file,
        &env(&[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "api-key=a%20b%3Dc, x-tenant=from-env",
        )]),
    )
    .unwrap();
    let traces = config.traces.unwrap();
    assert_eq!(header(&traces, "api-key").as_deref(), Some("a b=c"));
    assert_eq!(header(&traces, "x-tenant").as_deref(), Some("from-file"));
    // Secrets stay out of Debug.
    let shown = format!("{traces:?}");
    assert!(!shown.contains("a b=c"), "{shown}");
}

#[test]
fn malformed_variables_are_refused_without_echoing_secrets() {
    for (name, value, says) in [
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "just-a-secret-token",
            "key=value",
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "http/json"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon", "milliseconds"),
    ] {
        let err = resolve(
            &OtlpFile::default(),
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                (name, value),
            ]),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains(name) && text.contains(says), "{text}");
        assert!(!text.contains("just-a-secret-token"), "{text}");
    }
}

#[test]
fn signals_can_be_turned_off_by_the_file_and_the_environment() {
    let file = OtlpFile {
        endpoint: Some("http://collector:4317".into()),
        signals: Some(vec!["traces".into(), "metrics".into()]),
        ..OtlpFile::default()
    };
    let config = resolve(&file, &env(&[("OTEL_METRICS_EXPORTER", "none")])).unwrap();
    assert!(config.traces.is_some());
    assert!(config.metrics.is_none());
    assert!(config.logs.is_none());
    let off = resolve(&file, &env(&[("OTEL_SDK_DISABLED", "true")])).unwrap();
    assert!(off.traces.is_none());
    let wrong = OtlpFile {
        signals: Some(vec!["profiles".into()]),
        ..file
    };
    assert!(resolve(&wrong, &env(&[])).is_err());
}

#[test]
fn tls_files_and_timeouts_come_from_either() {
    let config = resolve(
        &OtlpFile {
            endpoint: Some("https://collector:4317".into()),
            timeout_ms: Some(1500),
            ..OtlpFile::default()
        },
        &env(&[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
                "/etc/client.pem",
            ),
            ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/etc/client.key"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "9000"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "5000"),
        ]),
    )
    .unwrap();
    let traces = config.traces.unwrap();
    assert_eq!(
        traces.ca_file.as_deref(),
        Some(std::path::Path::new("/etc/ca.pem"))
    );
    assert!(traces.client_cert_file.is_some() && traces.client_key_file.is_some());
    assert_eq!(traces.timeout, Duration::from_millis(1500), "the file wins");
    assert_eq!(config.metrics_interval, Duration::from_secs(5));
    // Metrics got the CA but not the traces' client certificate.
    let metrics = config.metrics.unwrap();
    assert!(metrics.ca_file.is_some() && metrics.client_cert_file.is_none());
    // A certificate without its key is refused.
    let half = resolve(
        &OtlpFile {
            endpoint: Some("https://collector:4317".into()),
            client_cert_file: Some("/etc/client.pem".into()),
            ..OtlpFile::default()
        },
        &env(&[]),
    );
    assert!(half.is_err());
}

#[test]
fn the_resource_names_the_service_and_keeps_the_daemons_own_attributes() {
    let config = resolve(
        &OtlpFile::default(),
        &env(&[(
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=from-attrs,deployment.environment=prod,service.version=9",
        )]),
    )
    .unwrap();
    let get = |key: &str| {
        config
            .resource
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("service.name").as_deref(), Some("from-attrs"));
    assert_eq!(get("deployment.environment").as_deref(), Some("prod"));
    assert_eq!(
        get("service.version").as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert!(get("service.instance.id").is_some());
    let named = resolve(
        &OtlpFile::default(),
        &env(&[
            ("OTEL_SERVICE_NAME", "airlock-eu"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored"),
        ]),
    )
    .unwrap();
    assert_eq!(named.resource[0].1, "airlock-eu");
}
