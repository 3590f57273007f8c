//! Asking an `https://` daemon, when connecting, whether it accepts this client's TLS
//! credentials, so that a refusal is reported as what it is.
//!
//! With TLS 1.3 a server checks the client's certificate after the client has finished its
//! side of the handshake, so a refusal reaches the client only as an alert on its next read.
//! Under gRPC that read belongs to the HTTP/2 connection task, which passes the failure on to
//! a call only as text, or not at all when the call had not been sent yet ("operation was
//! canceled"). The probe makes the same handshake on a connection of its own, sends the
//! HTTP/2 preface, and reads the daemon's first record: its SETTINGS when it accepted the
//! client, an alert (a typed rustls error) when it did not.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use tonic::codegen::http::Uri;

use crate::error::ClientError;

/// The client connection preface of HTTP/2 (RFC 9113 §3.4) and an empty SETTINGS frame: what
/// makes a gRPC server answer with its own SETTINGS.
const HTTP2_PREFACE: &[u8] =
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// The PEM files a probe uses, already read.
pub(super) struct TlsFiles {
    pub ca: Vec<u8>,
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// Makes one TLS connection to `endpoint` with `files` and reports a certificate the daemon
/// refused, or one of the daemon's that this client does not trust, as [`ClientError::Tls`].
/// Every other failure is left to the real connection to report in its own words.
pub(super) async fn check(
    endpoint: &str,
    files: TlsFiles,
    timeout: Duration,
) -> Result<(), ClientError> {
    let owned = endpoint.to_owned();
    let outcome = tokio::task::spawn_blocking(move || probe(&owned, &files, timeout)).await;
    match outcome {
        Ok(Some(error)) => match ClientError::tls_refusal(endpoint, &error) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        },
        // The probe thread panicking or the runtime shutting down says nothing about TLS.
        Ok(None) | Err(_) => Ok(()),
    }
}

/// The I/O error the handshake or the first read ended with, if any.
fn probe(endpoint: &str, files: &TlsFiles, timeout: Duration) -> Option<std::io::Error> {
    let config = Arc::new(client_config(files)?);
    let uri: Uri = endpoint.parse().ok()?;
    let host = uri.host()?;
    // A bracketed IPv6 literal names the address inside the brackets.
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let name = ServerName::try_from(host.to_owned()).ok()?;
    let address = (host, uri.port_u16().unwrap_or(443))
        .to_socket_addrs()
        .ok()?
        .next()?;
    let socket = TcpStream::connect_timeout(&address, timeout).ok()?;
    socket.set_read_timeout(Some(timeout)).ok()?;
    socket.set_write_timeout(Some(timeout)).ok()?;
    let connection = ClientConnection::new(config, name).ok()?;
    let mut stream = StreamOwned::new(connection, socket);
    if let Err(error) = stream.write_all(HTTP2_PREFACE) {
        return Some(error);
    }
    let mut first = [0u8; 64];
    stream.read(&mut first).err()
}

/// Whether the server at an `http://` endpoint answers a TLS ClientHello with TLS (a
/// handshake or an alert record): a daemon serving TLS that was addressed as plaintext, which
/// otherwise fails as an unexplained HTTP/2 protocol error. Blocks for at most `timeout` per
/// step; false when it cannot tell.
pub fn speaks_tls(endpoint: &str, timeout: Duration) -> bool {
    let Ok(uri) = endpoint.parse::<Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else {
        return false;
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let Some(address) = (host, uri.port_u16().unwrap_or(80))
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
    else {
        return false;
    };
    // Any ClientHello does: nothing past the server's first record is read.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let Ok(builder) =
        ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions()
    else {
        return false;
    };
    let config = Arc::new(
        builder
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth(),
    );
    let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
    let Ok(mut connection) = ClientConnection::new(config, name) else {
        return false;
    };
    let mut hello = Vec::new();
    if connection.write_tls(&mut hello).is_err() {
        return false;
    }
    let Ok(mut socket) = TcpStream::connect_timeout(&address, timeout) else {
        return false;
    };
    if socket.set_read_timeout(Some(timeout)).is_err() || socket.write_all(&hello).is_err() {
        return false;
    }
    let mut first = [0u8; 2];
    // 0x16: a handshake record (ServerHello), 0x15: an alert; both TLS 1.x (0x03).
    socket.read_exact(&mut first).is_ok() && matches!(first, [0x16 | 0x15, 0x03])
}

/// The same trust and identity as the tonic connection's, from the same files; None when they
/// do not parse (the real connection then says why).
fn client_config(files: &TlsFiles) -> Option<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&files.ca) {
        roots.add(certificate.ok()?).ok()?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots);
    let mut config = match &files.identity {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            let key = PrivateKeyDer::from_pem_slice(key).ok()?;
            builder.with_client_auth_cert(chain, key).ok()?
        }
        None => builder.with_no_client_auth(),
    };
    // What tonic offers, so the daemon sees the handshake the real connection makes.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Some(config)
}
