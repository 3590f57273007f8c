//! Where each signal goes and how: the `[otlp]` section first, then the standard
//! `OTEL_EXPORTER_OTLP_*` variables for what it leaves unset, as the OpenTelemetry SDKs read
//! them (a signal's own variable, `…_TRACES_ENDPOINT`, before the shared one).
//!
//! Honoured: `OTEL_SDK_DISABLED`, `OTEL_{TRACES,METRICS,LOGS}_EXPORTER=none`,
//! `OTEL_EXPORTER_OTLP[_SIGNAL]_{ENDPOINT,PROTOCOL,HEADERS,CERTIFICATE,CLIENT_CERTIFICATE,
//! CLIENT_KEY,TIMEOUT}`, `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES`. A signal is exported only when some endpoint is given for it:
//! the daemon never sends to a default address nobody configured.
//!
//! Where airlock departs from the SDKs' defaults, on purpose: the protocol is gRPC unless
//! told otherwise (the SDKs recommend http/protobuf; airlock's `otlp_endpoint` was gRPC
//! first); a bare `host:port` is plaintext (the SDKs read it as TLS unless
//! `OTEL_EXPORTER_OTLP_INSECURE`), and is refused when headers would travel over it; and
//! `OTEL_SDK_DISABLED=true` turns off every signal, the file's too — it is the switch an
//! operator reaches for to silence export at once.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// OTLP's two transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum OtlpProtocol {
    #[serde(rename = "grpc")]
    Grpc,
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

impl OtlpProtocol {
    /// As `OTEL_EXPORTER_OTLP_PROTOCOL` spells it.
    pub fn parse(text: &str) -> Option<OtlpProtocol> {
        match text.trim() {
            "grpc" => Some(OtlpProtocol::Grpc),
            "http/protobuf" => Some(OtlpProtocol::HttpProtobuf),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }
}

/// A header value that may be a secret (an API key): never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct HeaderValue(pub String);

impl std::fmt::Debug for HeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// `[otlp]`: the collector traces, metrics and the audit log's records go to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpFile {
    /// The collector: `http://host:4317` or `https://…` for gRPC, the base URL (`/v1/traces`
    /// etc. appended) for HTTP.
    pub endpoint: Option<String>,
    pub protocol: Option<OtlpProtocol>,
    /// Sent with every export (an API key, a tenant header); values are never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderValue>,
    /// The CA that signed the collector's certificate (PEM); the Mozilla roots otherwise.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and key (PEM) for collectors that ask for one.
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    /// How long one export may take, in milliseconds (default 10 s).
    pub timeout_ms: Option<u64>,
    /// How often metrics are exported, in milliseconds (default 60 s).
    pub metrics_interval_ms: Option<u64>,
    /// Which of `traces`, `metrics` and `logs` go to the collector (default all three).
    pub signals: Option<Vec<String>>,
}

/// The three things OTLP carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    Traces,
    Metrics,
    Logs,
}

impl Signal {
    pub const ALL: [Signal; 3] = [Signal::Traces, Signal::Metrics, Signal::Logs];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
            Signal::Logs => "logs",
        }
    }

    /// The gRPC method of the signal's collector service.
    pub fn grpc_path(self) -> &'static str {
        match self {
            Signal::Traces => "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            Signal::Metrics => "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
            Signal::Logs => "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
        }
    }

    fn env(self) -> &'static str {
        match self {
            Signal::Traces => "TRACES",
            Signal::Metrics => "METRICS",
            Signal::Logs => "LOGS",
        }
    }
}

/// One export's timeout when neither the file nor the environment says: the SDKs' default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often metrics go when neither says: the SDKs' default periodic reader interval.
pub const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);

/// How one signal reaches its collector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportSettings {
    pub signal: Signal,
    /// The full URL to send to: gRPC's authority, or HTTP's `…/v1/traces`.
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    /// Sent with every export; `Debug` never shows the values.
    pub headers: Vec<(String, HeaderValue)>,
    pub ca_file: Option<PathBuf>,
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    pub timeout: Duration,
}

impl TransportSettings {
    /// Plain gRPC to `endpoint`, nothing else set.
    #[cfg(test)]
    pub fn grpc(signal: Signal, endpoint: impl Into<String>) -> TransportSettings {
        TransportSettings {
            signal,
            endpoint: endpoint.into(),
            protocol: OtlpProtocol::Grpc,
            headers: Vec::new(),
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Everything OTLP export was configured with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtlpConfig {
    pub traces: Option<TransportSettings>,
    pub metrics: Option<TransportSettings>,
    pub logs: Option<TransportSettings>,
    pub metrics_interval: Duration,
    /// `service.name` and the other resource attributes, in order.
    pub resource: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("{name}: {reason}")]
    Invalid { name: String, reason: String },
}

fn invalid(name: &str, reason: impl Into<String>) -> SettingsError {
    SettingsError::Invalid {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// Reads the process's environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// The configuration from the file's `[otlp]` and the environment `env` reads.
pub fn resolve(
    file: &OtlpFile,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<OtlpConfig, SettingsError> {
    let flag =
        |name: &str| env(name).is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
    let wanted: Vec<Signal> = match &file.signals {
        Some(names) => names
            .iter()
            .map(|name| {
                Signal::ALL
                    .into_iter()
                    .find(|signal| signal.as_str() == name)
                    .ok_or_else(|| {
                        invalid(
                            "[otlp] signals",
                            format!("{name:?} is not one of traces, metrics, logs"),
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
        None => Signal::ALL.to_vec(),
    };
    let mut config = OtlpConfig {
        metrics_interval: match file.metrics_interval_ms {
            Some(ms) => Duration::from_millis(ms),
            None => match env("OTEL_METRIC_EXPORT_INTERVAL") {
                Some(ms) => Duration::from_millis(parse_ms("OTEL_METRIC_EXPORT_INTERVAL", &ms)?),
                None => DEFAULT_METRICS_INTERVAL,
            },
        }
        .max(Duration::from_millis(100)),
        resource: resource(env),
        ..OtlpConfig::default()
    };
    if flag("OTEL_SDK_DISABLED") {
        return Ok(config);
    }
    for signal in wanted {
        let exporter = env(&format!("OTEL_{}_EXPORTER", signal.env()));
        if exporter.as_deref().map(str::trim) == Some("none") {
            continue;
        }
        let settings = signal_settings(file, signal, env)?;
        match signal {
            Signal::Traces => config.traces = settings,
            Signal::Metrics => config.metrics = settings,
            Signal::Logs => config.logs = settings,
        }
    }
    Ok(config)
}

/// `OTEL_EXPORTER_OTLP_<SIGNAL>_<key>`, else `OTEL_EXPORTER_OTLP_<key>`, with the name read.
fn lookup(
    env: &dyn Fn(&str) -> Option<String>,
    signal: Signal,
    key: &str,
) -> Option<(String, String, bool)> {
    let own = format!("OTEL_EXPORTER_OTLP_{}_{key}", signal.env());
    if let Some(value) = env(&own) {
        return Some((own, value, true));
    }
    let shared = format!("OTEL_EXPORTER_OTLP_{key}");
    env(&shared).map(|value| (shared, value, false))
}

fn signal_settings(
    file: &OtlpFile,
    signal: Signal,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TransportSettings>, SettingsError> {
    let protocol = match file.protocol {
        Some(protocol) => protocol,
        None => match lookup(env, signal, "PROTOCOL") {
            Some((name, value, _)) => OtlpProtocol::parse(&value).ok_or_else(|| {
                invalid(
                    &name,
                    format!("{value:?} is not grpc or http/protobuf (http/json is not supported)"),
                )
            })?,
            None => OtlpProtocol::Grpc,
        },
    };
    // The file's endpoint is the base for every signal; the environment's signal variable is
    // the whole URL, its shared one a base.
    let (base, whole) = match (&file.endpoint, lookup(env, signal, "ENDPOINT")) {
        (Some(endpoint), _) => (endpoint.clone(), false),
        (None, Some((_, value, own))) => (value, own),
        (None, None) => return Ok(None),
    };
    let endpoint = match protocol {
        OtlpProtocol::Grpc => base.trim().to_owned(),
        OtlpProtocol::HttpProtobuf if whole => base.trim().to_owned(),
        OtlpProtocol::HttpProtobuf => {
            format!(
                "{}/v1/{}",
                base.trim().trim_end_matches('/'),
                signal.as_str()
            )
        }
    };
    let mut headers: BTreeMap<String, HeaderValue> = BTreeMap::new();
    if let Some((name, value, _)) = lookup(env, signal, "HEADERS") {
        for (key, value) in parse_headers(&name, &value)? {
            headers.insert(key, HeaderValue(value));
        }
    }
    // The file's headers win over the environment's of the same name.
    for (key, value) in &file.headers {
        headers.insert(key.to_ascii_lowercase(), value.clone());
    }
    let path = |configured: &Option<PathBuf>, key: &str| {
        configured
            .clone()
            .or_else(|| lookup(env, signal, key).map(|(_, value, _)| PathBuf::from(value)))
    };
    let timeout = match file.timeout_ms {
        Some(ms) => Duration::from_millis(ms),
        None => match lookup(env, signal, "TIMEOUT") {
            Some((name, value, _)) => Duration::from_millis(parse_ms(&name, &value)?),
            None => DEFAULT_TIMEOUT,
        },
    };
    let settings = TransportSettings {
        signal,
        endpoint,
        protocol,
        headers: headers.into_iter().collect(),
        ca_file: path(&file.ca_file, "CERTIFICATE"),
        client_cert_file: path(&file.client_cert_file, "CLIENT_CERTIFICATE"),
        client_key_file: path(&file.client_key_file, "CLIENT_KEY"),
        timeout: timeout.max(Duration::from_millis(1)),
    };
    if settings.client_cert_file.is_some() != settings.client_key_file.is_some() {
        return Err(invalid(
            "[otlp] client_cert_file / client_key_file",
            "a client certificate needs its key, and a key its certificate",
        ));
    }
    Ok(Some(settings))
}

fn parse_ms(name: &str, value: &str) -> Result<u64, SettingsError> {
    value.trim().parse().map_err(|_| {
        invalid(
            name,
            format!("{value:?} is not a whole number of milliseconds"),
        )
    })
}

/// `key=value,key2=value2` with percent-encoded values (the W3C baggage form the SDKs read).
/// Keys are lowercased, as gRPC metadata and HTTP/2 need them.
fn parse_headers(name: &str, text: &str) -> Result<Vec<(String, String)>, SettingsError> {
    let mut headers = Vec::new();
    // Errors name an entry by its place, never its text: a malformed entry may be a secret
    // (`Authorization: Bearer …` written with a colon).
    for (index, pair) in text
        .split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .enumerate()
    {
        let entry = index + 1;
        let Some((key, value)) = pair.split_once('=') else {
            return Err(invalid(
                name,
                format!("entry {entry} is not of the form key=value"),
            ));
        };
        let value = percent_encoding::percent_decode_str(value.trim())
            .decode_utf8()
            .map_err(|_| invalid(name, format!("the value of entry {entry} is not UTF-8")))?;
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(invalid(
                name,
                format!("entry {entry}'s name is not a header name"),
            ));
        }
        headers.push((key, value.into_owned()));
    }
    Ok(headers)
}

/// `service.name`, `service.version`, `service.instance.id`, then `OTEL_RESOURCE_ATTRIBUTES`.
/// `OTEL_SERVICE_NAME` names the service before the attributes' `service.name` does; the
/// version is the daemon's own; the instance is the attributes' (a pod's name) or a fresh
/// UUID.
fn resource(env: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut extra: Vec<(String, String)> = Vec::new();
    if let Some(text) = env("OTEL_RESOURCE_ATTRIBUTES") {
        for pair in text.split(',') {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            let key = key.trim();
            let Ok(value) = percent_encoding::percent_decode_str(value.trim()).decode_utf8() else {
                continue;
            };
            if !key.is_empty() && !extra.iter().any(|(k, _)| k == key) {
                extra.push((key.to_owned(), value.into_owned()));
            }
        }
    }
    let named = extra
        .iter()
        .find(|(key, _)| key == "service.name")
        .map(|(_, value)| value.clone());
    let service_name = env("OTEL_SERVICE_NAME")
        .or(named)
        .unwrap_or_else(|| "airlockd".to_owned());
    let mut attributes = vec![
        ("service.name".to_owned(), service_name),
        (
            "service.version".to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
        (
            "service.instance.id".to_owned(),
            extra
                .iter()
                .find(|(key, _)| key == "service.instance.id")
                .map_or_else(|| uuid::Uuid::new_v4().to_string(), |(_, id)| id.clone()),
        ),
    ];
    extra.retain(|(key, _)| !attributes.iter().any(|(k, _)| k == key));
    attributes.extend(extra);
    attributes
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
