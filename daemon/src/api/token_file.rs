//! Secret files: the access token the daemon creates in its state dir on first start, and the
//! token files a configuration names. A secret that other users could read is no secret, so
//! both are refused when their mode lets the group or others in.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The default tenant's token, in the state dir. The `airlock` CLI reads it from the same
/// place (the client library, `client/src/client/auth.rs`, keeps the name in step).
pub const TOKEN_FILE: &str = "token";

/// 256 bits from the OS RNG: far beyond guessing, and what RFC 6750 bearer tokens are
/// usually sized at.
const TOKEN_BYTES: usize = 32;

/// Secret files are a line of text; anything bigger is not a token file, and reading it
/// whole would let a mistyped path (a log, a disk image) exhaust memory at start.
const MAX_SECRET_FILE_BYTES: u64 = 4096;

/// Mode bits that must be clear on a secret file: every group and other permission.
const FOREIGN_ACCESS: u32 = 0o077;

#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error(
        "{path} is readable by other users (mode {mode:o}); make it private with `chmod 600 {path}`"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no token (an empty file, or more than {MAX_SECRET_FILE_BYTES} bytes)")]
    Empty { path: PathBuf },
    #[error("cannot read random bytes from the OS: {0}")]
    Random(String),
}

/// The token in `<state_dir>/token`, created on first use.
///
/// The file is created with mode 0600 by `open(2)` itself (`O_CREAT | O_EXCL`), so there is
/// no moment at which it exists with looser permissions; losing a race with another daemon
/// starting on the same state dir means reading the token it wrote.
pub fn ensure_default_token(state_dir: &Path) -> Result<String, SecretFileError> {
    let path = state_dir.join(TOKEN_FILE);
    match read_secret_file(&path) {
        Err(SecretFileError::Read { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound => {}
        other => return other,
    }
    let token = new_token()?;
    // Written whole under a name of its own, then linked in place: the link fails if the
    // token exists, so daemons of a fleet starting at once on a shared dir agree on one
    // token, and none ever reads a half-written file.
    // Named at random: daemons on several machines may share the directory (and a pid).
    let draft = state_dir.join(format!(".{TOKEN_FILE}.{}", uuid::Uuid::new_v4().simple()));
    let create_error = |source| SecretFileError::Create {
        path: path.clone(),
        source,
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&draft)
        .and_then(|mut file| {
            file.write_all(format!("{token}\n").as_bytes())?;
            file.sync_all()
        });
    if let Err(source) = written {
        let _ = std::fs::remove_file(&draft);
        return Err(create_error(source));
    }
    let linked = std::fs::hard_link(&draft, &path);
    let _ = std::fs::remove_file(&draft);
    match linked {
        Ok(()) => {
            tracing::info!(path = %path.display(), "created the access token of the default tenant");
            Ok(token)
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => read_secret_file(&path),
        Err(source) => Err(create_error(source)),
    }
}

/// Reads a token from a file that only its owner may read.
pub fn read_secret_file(path: &Path) -> Result<String, SecretFileError> {
    let read_error = |source| SecretFileError::Read {
        path: path.to_owned(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & FOREIGN_ACCESS != 0 {
        return Err(SecretFileError::Exposed {
            path: path.to_owned(),
            mode,
        });
    }
    if metadata.len() > MAX_SECRET_FILE_BYTES {
        return Err(SecretFileError::Empty {
            path: path.to_owned(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    let token = text.trim();
    if token.is_empty() {
        return Err(SecretFileError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(token.to_owned())
}

/// A fresh token: [`TOKEN_BYTES`] from the OS RNG, hex-encoded.
fn new_token() -> Result<String, SecretFileError> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|err| SecretFileError::Random(err.to_string()))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_start_creates_a_private_token_and_later_starts_reuse_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = ensure_default_token(dir.path()).expect("created");
        assert_eq!(token.len(), TOKEN_BYTES * 2);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
        let mode = std::fs::metadata(dir.path().join(TOKEN_FILE))
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(ensure_default_token(dir.path()).expect("reused"), token);
        let other = tempfile::tempdir().expect("tempdir");
        assert_ne!(ensure_default_token(other.path()).expect("created"), token);
    }

    #[test]
    fn a_token_file_others_can_read_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(TOKEN_FILE);
        std::fs::write(&path, "secret\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = ensure_default_token(dir.path()).expect_err("exposed");
        assert!(
            matches!(err, SecretFileError::Exposed { mode: 0o644, .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        assert!(read_secret_file(&path).is_err());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).expect("chmod");
        assert_eq!(read_secret_file(&path).expect("private"), "secret");
    }

    #[test]
    fn an_empty_token_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t");
        std::fs::write(&path, "  \n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(matches!(
            read_secret_file(&path),
            Err(SecretFileError::Empty { .. })
        ));
    }
}
