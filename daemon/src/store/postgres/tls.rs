//! TLS to the database, as the URL's `sslmode` asks (libpq's words), over rustls — the TLS
//! stack the daemon already builds, with ring — through tokio-postgres-rustls.
//!
//! | `sslmode`          | TLS                        | the server's certificate                     |
//! | ------------------ | -------------------------- | -------------------------------------------- |
//! | `disable`          | never                      | —                                            |
//! | `prefer` (default) | when the server offers it  | not checked (as libpq)                       |
//! | `require`          | always                     | not checked                                  |
//! | `verify-ca`        | always                     | signed by a CA of `sslrootcert`              |
//! | `verify-full`      | always                     | signed by a CA of `sslrootcert`, for the URL's host |
//!
//! `prefer` or `require` with `sslrootcert` is `verify-ca` (libpq does so for `require`; a
//! `prefer` that checks would be stripped of TLS by whoever it keeps out).
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system` for the Mozilla roots that
//! webpki-roots carries (never the host's own store, as for tools' HTTPS). tokio-postgres
//! reads neither `verify-*` nor `sslrootcert`: both are taken out of the URL here, and
//! tokio-postgres is handed `sslmode=require` for the `verify-*` modes, the checks being
//! this module's verifier's. Only the URL form (`postgres://…?sslmode=…`) carries them; a
//! `key=value` string with them is refused by tokio-postgres's parser, never read as less.

use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Not at all: the link is encrypted, the server not authenticated.
    None,
    /// Its chain, to a CA of `sslrootcert`.
    Ca,
    /// Its chain and the host it is for.
    Full,
}

/// The URL's TLS settings, parsed.
pub(super) struct Tls {
    /// The URL as tokio-postgres reads it.
    pub(super) url: String,
    pub(super) connector: MakeRustlsConnect,
    /// What the log says of the link.
    pub(super) said: String,
}

/// Takes `sslmode` and `sslrootcert` out of `url` and makes the connector they ask for.
pub(super) fn from_url(url: &str) -> Result<Tls, String> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut mode = None;
    let mut root = None;
    // The other parameters are kept as they were written, for tokio-postgres to decode.
    let mut kept = Vec::new();
    for raw in query.split('&').filter(|raw| !raw.is_empty()) {
        match form_urlencoded::parse(raw.as_bytes()).next() {
            Some((key, value)) if key == "sslmode" => mode = Some(value.into_owned()),
            Some((key, value)) if key == "sslrootcert" => root = Some(value.into_owned()),
            _ => kept.push(raw),
        }
    }
    let mode = mode.unwrap_or_else(|| "prefer".into());
    let (passed, check) = match (mode.as_str(), &root) {
        ("disable", _) => ("disable", Check::None),
        ("prefer", None) => ("prefer", Check::None),
        ("require", None) => ("require", Check::None),
        ("prefer" | "require" | "verify-ca", Some(_)) => ("require", Check::Ca),
        ("verify-full", Some(_)) => ("require", Check::Full),
        ("verify-ca" | "verify-full", None) => {
            return Err(format!(
                "sslmode={mode} checks the server's certificate against sslrootcert, which the \
                 URL does not give (sslrootcert=/path/to/ca.pem, or sslrootcert=system)"
            ));
        }
        (other, _) => {
            return Err(format!(
                "sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
            ));
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (&root, check) {
        (None, _) => Arc::new(Unchecked(provider.clone())),
        (Some(root), check) => {
            let roots = Arc::new(roots(root)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|err| format!("sslrootcert {root}: {err}"))?;
            match check {
                Check::Full => webpki,
                Check::Ca | Check::None => Arc::new(ChainOnly(webpki)),
            }
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| err.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let passed_mode = format!("sslmode={passed}");
    kept.push(&passed_mode);
    let query = kept.join("&");
    let said = match (passed, check) {
        ("disable", _) => "no TLS (sslmode=disable)".to_owned(),
        (_, Check::None) => format!(
            "TLS {}, the server's certificate not checked (sslmode={mode}; verify-full with \
             sslrootcert checks it)",
            if passed == "prefer" {
                "when the server offers it"
            } else {
                "required"
            }
        ),
        (_, Check::Ca) => "TLS required, the server's certificate checked against sslrootcert \
                           but not its host name (verify-ca)"
            .to_owned(),
        (_, Check::Full) => {
            "TLS required, the server's certificate checked against sslrootcert for its host \
             (verify-full)"
                .to_owned()
        }
    };
    Ok(Tls {
        url: format!("{base}?{query}"),
        connector: MakeRustlsConnect::new(config),
        said,
    })
}

/// The CAs of `sslrootcert`: a PEM file's certificates, or the Mozilla roots for `system`.
fn roots(root: &str) -> Result<RootCertStore, String> {
    if root == "system" {
        return Ok(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        });
    }
    let certificates = CertificateDer::pem_file_iter(Path::new(root))
        .map_err(|err| format!("cannot read sslrootcert {root}: {err}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("sslrootcert {root} is not a PEM file of certificates: {err}"))?;
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(format!("sslrootcert {root} holds no usable CA certificate"));
    }
    Ok(store)
}

/// Encryption without authentication (`prefer` and `require` without `sslrootcert`, as
/// libpq does them): any certificate is taken, but the handshake is still signed by its key.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a CA of `sslrootcert`; the host name is not checked.
/// webpki checks the chain before the name, so a name mismatch is the only error let by.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_keeps_its_other_parameters_and_tokio_postgres_gets_a_mode_it_reads() {
        let tls = from_url(
            "postgres://u@h:5/db?connect_timeout=3&sslmode=verify-full&sslrootcert=system",
        )
        .expect("parses");
        assert_eq!(
            tls.url,
            "postgres://u@h:5/db?connect_timeout=3&sslmode=require"
        );
        assert!(tls.said.contains("verify-full"), "{}", tls.said);
        let plain = from_url("postgres://u@h:5/db").expect("parses");
        assert_eq!(plain.url, "postgres://u@h:5/db?sslmode=prefer");
        assert!(plain.said.contains("not checked"), "{}", plain.said);
    }

    #[test]
    fn a_check_without_its_roots_or_an_unknown_mode_is_refused() {
        let Err(error) = from_url("postgres://u@h/db?sslmode=verify-full") else {
            panic!("verify-full without sslrootcert was taken");
        };
        assert!(error.contains("sslrootcert"), "{error}");
        let Err(error) = from_url("postgres://u@h/db?sslmode=allow-anything") else {
            panic!("an unknown mode was taken");
        };
        assert!(error.contains("allow-anything"), "{error}");
        let Err(error) = from_url("postgres://u@h/db?sslmode=verify-ca&sslrootcert=/nonexistent")
        else {
            panic!("a missing CA file was taken");
        };
        assert!(error.contains("/nonexistent"), "{error}");
    }
}
