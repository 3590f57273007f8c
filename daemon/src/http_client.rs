//! What every outgoing HTTP client of the daemon shares (model providers, hosted MCP servers
//! reached over HTTP): reqwest's TLS crypto provider.

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
