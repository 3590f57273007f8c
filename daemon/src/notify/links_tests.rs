//! Approval links' tokens and key: a search for any edit of a token that still verifies,
//! and the key file's checks.

use super::*;
use crate::test_random::Xorshift;

fn claims() -> Claims {
    Claims {
        approval_id: "apr_0123456789abcdef".into(),
        digest: "d".repeat(64),
        tenant: "default".into(),
        decision: LinkDecision::Approve,
        expires_ms: 2_000,
        nonce: nonce().expect("randomness"),
        webhook: "team".into(),
    }
}

#[test]
fn a_minted_link_verifies_until_it_expires() {
    let key = LinkKey::from_bytes(&[7; 32]);
    let token = key.mint(&claims());
    let read = key.verify(&token, 1_999).expect("verifies");
    assert_eq!(read.approval_id, "apr_0123456789abcdef");
    assert_eq!(read.decision, LinkDecision::Approve);
    assert_eq!(key.verify(&token, 2_000), Err(LinkError::Expired));
    // Another key (another fleet, a key made again) refuses it.
    assert_eq!(
        LinkKey::from_bytes(&[8; 32]).verify(&token, 0),
        Err(LinkError::Forged)
    );
}

/// Searches for a changed token that still verifies: every single-character substitution
/// (over the base64url alphabet and the separator), every deletion and truncation, and
/// thousands of random multi-character edits and splices of two tokens' halves. None may
/// verify, except the token itself.
#[test]
fn no_edit_of_a_token_verifies() {
    let key = LinkKey::from_bytes(&[7; 32]);
    let token = key.mint(&claims());
    let other = key.mint(&Claims {
        decision: LinkDecision::Deny,
        approval_id: "apr_fedcba9876543210".into(),
        ..claims()
    });
    let alphabet: Vec<char> =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ "
            .chars()
            .collect();
    let chars: Vec<char> = token.chars().collect();
    let accepted = |candidate: &str| candidate != token && key.verify(candidate, 0).is_ok();
    for at in 0..chars.len() {
        for &c in &alphabet {
            let mut edited = chars.clone();
            edited[at] = c;
            let edited: String = edited.into_iter().collect();
            assert!(!accepted(&edited), "substitution at {at}: {edited}");
        }
        let mut deleted = chars.clone();
        deleted.remove(at);
        assert!(
            !accepted(&deleted.iter().collect::<String>()),
            "deletion at {at}"
        );
        assert!(!accepted(&token[..at]), "truncation at {at}");
    }
    // Splices: one token's payload with the other's MAC, and the reverse.
    let (payload, mac) = token.split_once('.').expect("two parts");
    let (other_payload, other_mac) = other.split_once('.').expect("two parts");
    assert!(!accepted(&format!("{payload}.{other_mac}")));
    assert!(!accepted(&format!("{other_payload}.{mac}")));
    let mut random = Xorshift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let mut edited = chars.clone();
        for _ in 0..=random.below(4) {
            let at = random.below(edited.len());
            match random.below(3) {
                0 => edited[at] = alphabet[random.below(alphabet.len())],
                1 => {
                    edited.remove(at);
                }
                _ => edited.insert(at, alphabet[random.below(alphabet.len())]),
            }
            if edited.is_empty() {
                break;
            }
        }
        let edited: String = edited.into_iter().collect();
        assert!(!accepted(&edited), "{edited}");
    }
}

#[test]
fn a_payload_signed_with_the_key_but_not_a_link_is_refused() {
    let key = LinkKey::from_bytes(&[7; 32]);
    // A MAC over the payload alone (no link context) is what another use of the same key
    // might produce: it must not pass.
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims()).expect("json"));
    let bare = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, &[7; 32]),
        payload.as_bytes(),
    );
    let token = format!("{payload}.{}", URL_SAFE_NO_PAD.encode(bare.as_ref()));
    assert_eq!(key.verify(&token, 0), Err(LinkError::Forged));
    // Oversized input is refused before any work.
    assert_eq!(
        key.verify(&"A".repeat(MAX_TOKEN_BYTES + 1), 0),
        Err(LinkError::Forged)
    );
}

#[test]
fn the_key_is_made_once_private_and_shared_by_every_daemon_of_the_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = LinkKey::load_or_create(dir.path()).expect("made");
    let second = LinkKey::load_or_create(dir.path()).expect("read");
    let token = first.mint(&claims());
    assert!(second.verify(&token, 0).is_ok());
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.path().join(KEY_FILE);
    let mode = std::fs::metadata(&path).expect("key").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // A key others may read is refused, naming the file.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let refused = LinkKey::load_or_create(dir.path()).expect_err("readable by others");
    assert!(refused.contains("0600"), "{refused}");
    // A symlink planted at the key's path (to a file of known bytes) is never followed.
    let planted = dir.path().join("known");
    std::fs::write(&planted, [1u8; 32]).expect("known bytes");
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::remove_file(&path).expect("remove");
    std::os::unix::fs::symlink(&planted, &path).expect("symlink");
    assert!(
        LinkKey::load_or_create(dir.path()).is_err(),
        "a symlinked key was read"
    );
    // A FIFO planted there is refused at once, not waited on.
    std::fs::remove_file(&path).expect("remove");
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    assert!(
        LinkKey::load_or_create(dir.path()).is_err(),
        "a FIFO was read"
    );
    // A short key (its maker cut off) is refused, naming the remedy; no draft is left.
    std::fs::remove_file(&path).expect("remove");
    std::fs::write(&path, [1u8; 16]).expect("short");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let short = LinkKey::load_or_create(dir.path()).expect_err("short");
    assert!(short.contains("remove it"), "{short}");
    let drafts = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(drafts, 0);
}

#[test]
fn a_webhook_signature_covers_the_time_and_the_body() {
    let a = sign_body(b"secret", 1_700_000_000, b"{}");
    assert!(a.starts_with("t=1700000000,v1="));
    assert_ne!(a, sign_body(b"secret", 1_700_000_001, b"{}"));
    assert_ne!(a, sign_body(b"secret", 1_700_000_000, b"{ }"));
    assert_ne!(a, sign_body(b"other", 1_700_000_000, b"{}"));
}
