//! What every outgoing HTTP client of the daemon shares (model providers, hosted MCP servers
//! reached over HTTP, OTLP exports, approval webhooks): reqwest's TLS crypto provider, and
//! the TLS settings of a client of configured URLs.

use std::sync::Once;

/// reqwest is built without a TLS crypto provider of its own (the default one builds
/// aws-lc, a large C library); it uses the process default, which this installs once. If
/// another part of the process installed one first, that one is kept.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error only says that a default already exists, which is all we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The TLS settings of a client that posts to configured URLs (OTLP exports, approval
/// webhooks): `ca` or the Mozilla roots, and the client identity if any.
pub fn tls_config(
    ca: Option<&[u8]>,
    identity: Option<&(Vec<u8>, Vec<u8>)>,
) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|err| format!("the CA file: {err}"))?;
                roots
                    .add(cert)
                    .map_err(|err| format!("the CA file: {err}"))?;
            }
            if roots.is_empty() {
                return Err("the CA file holds no certificate".to_owned());
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| err.to_string())?
        .with_root_certificates(roots);
    match identity {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| format!("the client certificate: {err}"))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|err| format!("the client key: {err}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|err| format!("the client certificate: {err}"))
        }
    }
}
