//! Why the configuration was refused: a file that cannot be read or parsed, or a setting
//! that is out of range.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("cannot determine the current directory: {0}")]
    CurrentDir(std::io::Error),
    #[error("TLS needs both a certificate and a key (--tls-cert and --tls-key)")]
    TlsIncomplete,
    #[error("--store / [store] url: {0}")]
    Store(String),
    #[error(
        "[egress] hosts: `{name}` must be a DNS name (no wildcard, no address) mapped to at least one address"
    )]
    EgressHost { name: String },
    #[error("the OTLP endpoint is set twice: keep either `otlp_endpoint` or `[otlp] endpoint`")]
    OtlpEndpointTwice,
    #[error("[console] models: {0}")]
    ConsoleModel(String),
    #[error("[approvals]: {0}")]
    Approvals(String),
}
