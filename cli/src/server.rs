//! Which daemon a command talks to, and the credentials it shows: the global flags every
//! subcommand shares.

use std::path::PathBuf;

use airlock_client::{AirlockClient, ClientError, ConnectOptions, DEFAULT_ENDPOINT, connect_with};

/// Which daemon to talk to, and the credentials to show it.
#[derive(Debug, clap::Args)]
pub struct Server {
    /// The airlockd gRPC endpoint: http://host:port, https://host:port or unix:/path.
    #[arg(
        long = "server",
        global = true,
        env = "AIRLOCK_SERVER",
        value_name = "URL",
        default_value = DEFAULT_ENDPOINT
    )]
    pub(crate) endpoint: String,
    /// The access token [default: $AIRLOCK_TOKEN, else the token file in the daemon's
    /// default state dir].
    #[arg(long, global = true, value_name = "TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// The CA that an https:// daemon's certificate is signed by (PEM).
    #[arg(
        long = "tls-ca",
        alias = "ca-cert",
        global = true,
        env = "AIRLOCK_TLS_CA",
        value_name = "FILE"
    )]
    pub(crate) tls_ca: Option<PathBuf>,
    /// This client's certificate (PEM), for a daemon that requires client certificates
    /// (mutual TLS); needs --tls-key.
    #[arg(
        long,
        global = true,
        env = "AIRLOCK_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(
        long,
        global = true,
        env = "AIRLOCK_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub(crate) tls_key: Option<PathBuf>,
}

impl Server {
    pub async fn connect(&self) -> Result<AirlockClient, ClientError> {
        connect_with(
            &self.endpoint,
            &ConnectOptions {
                token: self.token.clone(),
                ca_cert: self.tls_ca.clone(),
                client_cert: self.tls_cert.clone(),
                client_key: self.tls_key.clone(),
            },
        )
        .await
    }
}
