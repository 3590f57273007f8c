//! TLS for remote clients (rustls): the server's certificate and key, and for mutual TLS the
//! CA that client certificates must chain to.

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use crate::config::TlsFiles;

/// PEM files are a few kilobytes; a bound keeps a mistyped path from being read whole.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_PEM_BYTES} bytes; it is not a PEM certificate or key")]
    TooLarge { path: PathBuf },
    #[error("{path} holds no PEM {what}")]
    NotPem { path: PathBuf, what: &'static str },
}

/// Reads the files of `tls`. With a client CA, a client without a certificate signed by it
/// cannot complete the handshake.
pub fn server_config(tls: &TlsFiles) -> Result<ServerTlsConfig, TlsError> {
    let cert = read_pem(&tls.cert, "CERTIFICATE")?;
    let key = read_pem(&tls.key, "PRIVATE KEY")?;
    let mut config = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
    if let Some(ca) = &tls.client_ca {
        config = config
            .client_ca_root(Certificate::from_pem(read_pem(ca, "CERTIFICATE")?))
            .client_auth_optional(false);
    }
    Ok(config)
}

fn read_pem(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    let read_error = |source| TlsError::Read {
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read_error)?.len();
    if size > MAX_PEM_BYTES {
        return Err(TlsError::TooLarge {
            path: path.to_owned(),
        });
    }
    let bytes = std::fs::read(path).map_err(read_error)?;
    // "PRIVATE KEY" also matches "RSA PRIVATE KEY" and "EC PRIVATE KEY".
    let marker = format!("{what}-----");
    if !String::from_utf8_lossy(&bytes).contains(&marker) {
        return Err(TlsError::NotPem {
            path: path.to_owned(),
            what,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_non_pem_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, "not a certificate").expect("write");
        let files = TlsFiles {
            cert: cert.clone(),
            key: dir.path().join("missing.key"),
            client_ca: None,
        };
        let err = server_config(&files).expect_err("not pem");
        assert!(
            matches!(&err, TlsError::NotPem { path, .. } if *path == cert),
            "{err}"
        );
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let err = server_config(&files).expect_err("no key");
        assert!(err.to_string().contains("missing.key"), "{err}");
    }
}
