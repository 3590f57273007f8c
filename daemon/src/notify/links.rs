//! Approval links: a token that decides exactly one approval request one way, signed with a
//! key only the daemons of a fleet hold.
//!
//! A token is `<payload>.<mac>`, both base64url without padding: the payload is the JSON of
//! [`Claims`] (the approval, the digest of the call it asks about, the tenant whose rights
//! decide it, the decision, when the link expires, a nonce and the webhook it was sent to);
//! the MAC is HMAC-SHA256 over the payload's text with the link key, checked in constant
//! time before anything of the payload is read. The key is 32 random bytes in a file of the
//! shared dir (mode 0600), made by the first daemon that needs it: every daemon of a fleet
//! accepts the links any of them sent, whichever one a balancer hands the click to.
//!
//! What the token proves is only that a daemon minted it. What it may do is checked when it
//! is used (see `api::approval_links`): the approval must still be pending, its digest the
//! one signed (so a link never decides another call that took the same id), the tenant may
//! answer for its run, the link not expired and not used before.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde::{Deserialize, Serialize};

/// The key's file, in the shared dir.
pub const KEY_FILE: &str = "approval-links.key";

/// A token longer than this was not minted here (a real one is a few hundred bytes: the
/// ids are short and the tenant and webhook names are bounded by the config); refused
/// before any work is spent on it.
pub const MAX_TOKEN_BYTES: usize = 2048;

/// What the MAC is taken over besides the payload: a token of another purpose (or version)
/// signed with the same key can never pass for a link.
const CONTEXT: &[u8] = b"airlock approval link v1\n";

/// The decision a link makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkDecision {
    Approve,
    Deny,
}

impl LinkDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkDecision::Approve => "approve",
            LinkDecision::Deny => "deny",
        }
    }
}

/// What a link says, signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claims {
    /// The approval request.
    #[serde(rename = "a")]
    pub approval_id: String,
    /// The digest binding the answer to exactly the call asked about.
    #[serde(rename = "d")]
    pub digest: String,
    /// The tenant whose rights decide it.
    #[serde(rename = "t")]
    pub tenant: String,
    #[serde(rename = "x")]
    pub decision: LinkDecision,
    /// Unix milliseconds after which the link decides nothing.
    #[serde(rename = "e")]
    pub expires_ms: i64,
    /// Tells two links to the same decision apart, so each can be used once.
    #[serde(rename = "n")]
    pub nonce: String,
    /// The webhook the link was sent to.
    #[serde(rename = "w")]
    pub webhook: String,
}

/// Why a token is refused, before its approval is looked at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error(
        "this is not an approval link airlock made (it is malformed or its signature is wrong)"
    )]
    Forged,
    #[error("this approval link expired")]
    Expired,
}

/// The key links are signed with.
pub struct LinkKey {
    key: hmac::Key,
}

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKey(…)")
    }
}

impl LinkKey {
    /// The key in `shared_dir`, made (32 random bytes, mode 0600) when there is none: written
    /// whole to a file of its own, then linked into place, which fails if a key is there —
    /// two daemons making it at once agree on the one linked first, and a crash leaves no
    /// short key behind.
    pub fn load_or_create(shared_dir: &Path) -> Result<LinkKey, String> {
        let path = shared_dir.join(KEY_FILE);
        let shown = |err: std::io::Error| format!("{}: {err}", path.display());
        match Self::read(&path) {
            Ok(Some(key)) => return Ok(key),
            Ok(None) => {}
            Err(err) => return Err(err),
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|err| format!("no randomness: {err}"))?;
        let draft = shared_dir.join(format!(".{KEY_FILE}.{}", nonce()?));
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&draft)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::hard_link(&draft, &path)
        })();
        let _ = std::fs::remove_file(&draft);
        match written {
            Ok(()) => Ok(LinkKey::from_bytes(&bytes)),
            // Another daemon linked its key first: that one is the fleet's.
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Self::read(&path)?
                .ok_or_else(|| format!("{}: the approval link key vanished", path.display())),
            Err(err) => Err(shown(err)),
        }
    }

    /// The key at `path`, none when there is no file. It is opened without following a
    /// symlink and without waiting (a FIFO planted there cannot hold up the start), and
    /// checked on the open file — a regular file, mode 0600, 32 bytes — so what is checked
    /// is what is read. Its owner is not checked, as the access token's beside it is not: the
    /// shared dir is the daemon's own (0700), and on a fleet's network file system the owner
    /// may be mapped to another uid.
    fn read(path: &Path) -> Result<Option<LinkKey>, String> {
        use std::io::Read as _;
        use std::os::unix::fs::MetadataExt as _;
        let shown = |err: std::io::Error| format!("{}: {err}", path.display());
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(shown(err)),
        };
        let metadata = file.metadata().map_err(shown)?;
        if !metadata.is_file() || metadata.mode() & 0o077 != 0 {
            return Err(format!(
                "{}: the approval link key must be a regular file only its owner may read \
                 (mode 0600)",
                path.display()
            ));
        }
        let mut bytes = Vec::with_capacity(33);
        std::io::Read::take(&file, 33)
            .read_to_end(&mut bytes)
            .map_err(shown)?;
        if bytes.len() != 32 {
            return Err(format!(
                "{}: the approval link key is not 32 bytes: remove it to make a new one (links \
                 already sent stop working)",
                path.display()
            ));
        }
        Ok(Some(LinkKey::from_bytes(&bytes)))
    }

    pub fn from_bytes(bytes: &[u8]) -> LinkKey {
        LinkKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes),
        }
    }

    fn mac(&self, payload: &str) -> hmac::Tag {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(CONTEXT);
        context.update(payload.as_bytes());
        context.sign()
    }

    /// The token for `claims`.
    pub fn mint(&self, claims: &Claims) -> String {
        // Serialising these plain fields cannot fail.
        let json = serde_json::to_vec(claims).unwrap_or_default();
        let payload = URL_SAFE_NO_PAD.encode(json);
        let mac = URL_SAFE_NO_PAD.encode(self.mac(&payload).as_ref());
        format!("{payload}.{mac}")
    }

    /// The claims of `token` if this key signed it and it has not expired at `now_ms`.
    pub fn verify(&self, token: &str, now_ms: i64) -> Result<Claims, LinkError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(LinkError::Forged);
        }
        let (payload, mac) = token.split_once('.').ok_or(LinkError::Forged)?;
        let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| LinkError::Forged)?;
        let mut context = Vec::with_capacity(CONTEXT.len() + payload.len());
        context.extend_from_slice(CONTEXT);
        context.extend_from_slice(payload.as_bytes());
        hmac::verify(&self.key, &context, &mac).map_err(|_| LinkError::Forged)?;
        // Signed here: the payload is ours, but parsed strictly all the same.
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| LinkError::Forged)?;
        let claims: Claims = serde_json::from_slice(&json).map_err(|_| LinkError::Forged)?;
        if now_ms >= claims.expires_ms {
            return Err(LinkError::Expired);
        }
        Ok(claims)
    }
}

/// 16 random bytes, hex: a link's nonce (and a draft key file's name).
pub fn nonce() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|err| format!("no randomness: {err}"))?;
    Ok(hex::encode(bytes))
}

/// HMAC-SHA256 of `t.body` with a webhook's secret, for `X-Airlock-Signature:
/// t=<unix seconds>,v1=<hex>`: the receiver recomputes it and refuses old timestamps.
pub fn sign_body(secret: &[u8], unix_s: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut context = hmac::Context::with_key(&key);
    context.update(unix_s.to_string().as_bytes());
    context.update(b".");
    context.update(body);
    format!("t={unix_s},v1={}", hex::encode(context.sign().as_ref()))
}

#[cfg(test)]
#[path = "links_tests.rs"]
mod tests;
