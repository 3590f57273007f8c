//! Secrets a tool receives, and their redaction from everything a client can read.
//!
//! A manifest names each secret a tool gets as an environment variable and where its value
//! comes from — a variable of the daemon's environment or a file the daemon can read, never
//! the manifest itself, so a manifest can be shared and reviewed without leaking anything.
//! Values are read once, when the tool loads.
//!
//! Whatever a tool does with a secret, its value must not reach a model, a client, a trace or
//! a log: the executor passes every piece of tool output (streamed chunks, the result, the
//! kept full output, error messages) through the daemon's [`Redactor`], which replaces each
//! known value, by exact match, with `[redacted:NAME]`. Streamed output is redacted as it
//! streams ([`StreamRedactor`]): the end of a chunk that could be the start of a value is
//! held back until the next chunk shows whether it is, so a value split across two reads
//! is caught too.

use std::io::Read as _;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

/// A secret file holds a token or a key, not a document.
const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// Values shorter than this are not redacted: replacing every `a` or `1` in an output would
/// destroy it while hiding nothing (such a value is guessable anyway). Loading refuses them.
pub const MIN_SECRET_BYTES: usize = 8;

/// Where a secret's value comes from, as written in `tool.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    /// The variable the tool sees.
    pub env: String,
    /// A variable of the daemon's environment.
    pub from_env: Option<String>,
    /// A file on the daemon's host.
    pub from_file: Option<PathBuf>,
}

/// One secret, resolved.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    pub env: String,
    pub value: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({}=…)", self.env)
    }
}

/// The secrets of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets(Arc<[Secret]>);

impl Secrets {
    /// Reads each source's value.
    pub fn resolve(sources: &[SecretSource]) -> Result<Secrets, String> {
        let mut secrets = Vec::with_capacity(sources.len());
        for source in sources {
            let valid_name = source
                .env
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && source
                    .env
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid_name {
                return Err(format!(
                    "secret `{}`: `env` must be an environment variable name",
                    source.env
                ));
            }
            let value = match (&source.from_env, &source.from_file) {
                (Some(var), None) => std::env::var(var).map_err(|_| {
                    format!(
                        "secret `{}`: the daemon's environment has no `{var}`",
                        source.env
                    )
                })?,
                (None, Some(path)) => read_secret_file(path)
                    .map_err(|message| format!("secret `{}`: {message}", source.env))?,
                _ => {
                    return Err(format!(
                        "secret `{}` needs exactly one of `from_env` or `from_file` (values are never written inline)",
                        source.env
                    ));
                }
            };
            if value.len() < MIN_SECRET_BYTES {
                return Err(format!(
                    "secret `{}` is shorter than {MIN_SECRET_BYTES} bytes: too short to redact reliably",
                    source.env
                ));
            }
            secrets.push(Secret {
                env: source.env.clone(),
                value,
            });
        }
        Ok(Secrets(secrets.into()))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.0.iter()
    }

    /// A tool's whole environment: what `profile` passes and sets, then these secrets (a
    /// secret wins over a profile variable of the same name).
    pub fn environment(&self, profile: &crate::profile::Profile) -> Vec<(String, String)> {
        let mut env = profile.resolve_env(|var| std::env::var(var).ok());
        env.retain(|(name, _)| !self.0.iter().any(|secret| secret.env == *name));
        env.extend(
            self.0
                .iter()
                .map(|secret| (secret.env.clone(), secret.value.clone())),
        );
        env
    }
}

fn read_secret_file(path: &std::path::Path) -> Result<String, String> {
    let metadata =
        std::fs::metadata(path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    if !metadata.is_file() || metadata.len() > MAX_SECRET_BYTES {
        return Err(format!(
            "{} is not a regular file of at most {MAX_SECRET_BYTES} bytes",
            path.display()
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_SECRET_BYTES).read_to_string(&mut text))
        .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
    // A file written by `echo` ends in a newline that is not part of the token.
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

/// Replaces every known secret value in text a client may read.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so that a secret containing another is replaced whole.
    secrets: Arc<[Secret]>,
}

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a Secrets>) -> Redactor {
        let mut all: Vec<Secret> = secrets
            .into_iter()
            .flat_map(|secrets| secrets.iter().cloned())
            .collect();
        all.sort_by_key(|secret| std::cmp::Reverse(secret.value.len()));
        all.dedup_by(|a, b| a.value == b.value);
        Redactor {
            secrets: all.into(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with each secret value replaced by `[redacted:NAME]`.
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in self.secrets.iter() {
            if text.contains(&secret.value) {
                text = text.replace(&secret.value, &format!("[redacted:{}]", secret.env));
            }
        }
        text
    }

    /// As [`Redactor::redact`], for bytes that may not be UTF-8: a value is matched as bytes.
    pub fn redact_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for secret in self.secrets.iter() {
            let needle = secret.value.as_bytes();
            if out.windows(needle.len()).any(|window| window == needle) {
                let replacement = format!("[redacted:{}]", secret.env).into_bytes();
                let mut replaced = Vec::with_capacity(out.len());
                let mut at = 0;
                while at < out.len() {
                    if out[at..].starts_with(needle) {
                        replaced.extend_from_slice(&replacement);
                        at += needle.len();
                    } else {
                        replaced.push(out[at]);
                        at += 1;
                    }
                }
                out = replaced;
            }
        }
        out
    }
}

/// Redacts a stream that arrives in chunks (a call's stdout and stderr).
#[derive(Debug, Default)]
pub struct StreamRedactor {
    redactor: Redactor,
    /// Per stream, the bytes held back: a proper prefix of some secret value.
    held: std::sync::Mutex<[Vec<u8>; 2]>,
}

impl StreamRedactor {
    pub fn new(redactor: Redactor) -> StreamRedactor {
        StreamRedactor {
            redactor,
            held: std::sync::Mutex::default(),
        }
    }

    /// What of `data` (after what was held back of `stream`) can be shown now, redacted.
    pub fn feed(&self, stream: crate::output::StreamKind, data: &[u8]) -> Vec<u8> {
        let Ok(mut held) = self.held.lock() else {
            return self.redactor.redact_bytes(data);
        };
        let held = &mut held[stream_index(stream)];
        held.extend_from_slice(data);
        let mut out = self.redactor.redact_bytes(held);
        let keep = self.partial_suffix(&out);
        *held = out.split_off(out.len() - keep);
        out
    }

    /// What is still held back of each stream, at the end of the output.
    pub fn flush(&self) -> Vec<(crate::output::StreamKind, Vec<u8>)> {
        let Ok(mut held) = self.held.lock() else {
            return Vec::new();
        };
        [
            crate::output::StreamKind::Stdout,
            crate::output::StreamKind::Stderr,
        ]
        .into_iter()
        .filter_map(|stream| {
            let rest = std::mem::take(&mut held[stream_index(stream)]);
            (!rest.is_empty()).then(|| (stream, self.redactor.redact_bytes(&rest)))
        })
        .collect()
    }

    /// The length of the longest end of `out` that begins some secret value.
    fn partial_suffix(&self, out: &[u8]) -> usize {
        let longest = self
            .redactor
            .secrets
            .iter()
            .map(|secret| secret.value.len())
            .max()
            .unwrap_or(0);
        (1..longest.min(out.len() + 1))
            .rev()
            .find(|&len| {
                let tail = &out[out.len() - len..];
                self.redactor
                    .secrets
                    .iter()
                    .any(|secret| secret.value.as_bytes().starts_with(tail))
            })
            .unwrap_or(0)
    }
}

fn stream_index(stream: crate::output::StreamKind) -> usize {
    match stream {
        crate::output::StreamKind::Stdout => 0,
        crate::output::StreamKind::Stderr => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(pairs: &[(&str, &str)]) -> Secrets {
        Secrets(
            pairs
                .iter()
                .map(|(env, value)| Secret {
                    env: (*env).into(),
                    value: (*value).into(),
                })
                .collect::<Vec<_>>()
                .into(),
        )
    }

    #[test]
    fn every_value_is_replaced_by_its_name_longest_first() {
        let a = secrets(&[("TOKEN", "tok-12345678")]);
        let b = secrets(&[("LONG", "tok-12345678-and-more")]);
        let redactor = Redactor::new([&a, &b]);
        assert_eq!(
            redactor.redact("x tok-12345678-and-more y tok-12345678 z"),
            "x [redacted:LONG] y [redacted:TOKEN] z"
        );
        assert_eq!(
            redactor.redact_bytes(b"\xfftok-12345678\xfe"),
            b"\xff[redacted:TOKEN]\xfe".to_vec()
        );
        assert!(Redactor::default().is_empty());
    }

    #[test]
    fn sources_are_the_environment_or_a_file_never_inline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "file-secret-value\n").expect("write");
        let resolved = Secrets::resolve(&[SecretSource {
            env: "API_TOKEN".into(),
            from_env: None,
            from_file: Some(file),
        }])
        .expect("resolves");
        assert!(
            resolved
                .iter()
                .any(|secret| secret.env == "API_TOKEN" && secret.value == "file-secret-value")
        );
        assert!(!format!("{resolved:?}").contains("file-secret-value"));

        let neither = SecretSource {
            env: "X_TOKEN".into(),
            from_env: None,
            from_file: None,
        };
        let err = Secrets::resolve(&[neither]).expect_err("no source");
        assert!(err.contains("exactly one"), "{err}");
        let missing = SecretSource {
            env: "X_TOKEN".into(),
            from_env: Some("AIRLOCK_TEST_SURELY_UNSET_VARIABLE".into()),
            from_file: None,
        };
        let err = Secrets::resolve(&[missing]).expect_err("unset");
        assert!(err.contains("AIRLOCK_TEST_SURELY_UNSET_VARIABLE"), "{err}");
        let at_the_edge = dir.path().join("eight");
        std::fs::write(&at_the_edge, "12345678").expect("write");
        Secrets::resolve(&[SecretSource {
            env: "EIGHT".into(),
            from_env: None,
            from_file: Some(at_the_edge),
        }])
        .expect("MIN_SECRET_BYTES is enough");
        let short = dir.path().join("short");
        std::fs::write(&short, "1234567").expect("write");
        let err = Secrets::resolve(&[SecretSource {
            env: "SHORT".into(),
            from_env: None,
            from_file: Some(short),
        }])
        .expect_err("too short");
        assert!(err.contains("too short"), "{err}");
    }

    #[test]
    fn a_value_split_across_chunks_is_still_redacted() {
        use crate::output::StreamKind::{Stderr, Stdout};
        let streamed = StreamRedactor::new(Redactor::new([&secrets(&[("TOKEN", "tok-12345678")])]));
        let mut shown = streamed.feed(Stdout, b"before tok-123");
        assert_eq!(shown, b"before ");
        shown.extend(streamed.feed(Stdout, b"45678 after tok"));
        shown.extend(streamed.feed(Stderr, b"elsewhere"));
        for (stream, rest) in streamed.flush() {
            assert_eq!(stream, Stdout);
            shown.extend(rest);
        }
        // "tok" might have begun the token: held back until the end, after the other stream.
        assert_eq!(
            String::from_utf8(shown).expect("utf-8"),
            "before [redacted:TOKEN] after elsewheretok"
        );
    }
}
