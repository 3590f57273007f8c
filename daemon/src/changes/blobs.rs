//! The blob store: file contents before and after changes, addressed by their sha256.
//!
//! A blob is written once, to a temporary name and renamed into place, so a reader never
//! sees half of one. The store has a cap; past it, the blobs used least recently (read or
//! written) are evicted down to nine tenths of it. An evicted blob makes the changes that
//! need it impossible to undo byte for byte, which a revert then says — the cap is the
//! operator's trade between disk and how far back undo reaches.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::bounds::Deadline;
use super::sparse;
use super::types::ChangeError;

/// Read size when hashing and copying.
const CHUNK: usize = 64 * 1024;

#[derive(Debug)]
pub struct Blobs {
    dir: PathBuf,
    cap: u64,
    /// Bytes stored, kept in step with the files by every put and eviction.
    used: Mutex<u64>,
}

impl Blobs {
    /// Opens (creating) the store in `dir`, counting what it holds.
    pub fn open(dir: PathBuf, cap: u64) -> std::io::Result<Blobs> {
        std::fs::create_dir_all(&dir)?;
        let used = list(&dir)?.iter().map(|blob| blob.size).sum();
        Ok(Blobs {
            dir,
            cap,
            used: Mutex::new(used),
        })
    }

    fn path(&self, digest: &str) -> Option<PathBuf> {
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(self.dir.join(&digest[..2]).join(&digest[2..]))
    }

    /// Stores what `reader` yields (a symlink's target: small); returns its digest and size.
    pub fn put(&self, mut reader: impl Read) -> std::io::Result<(String, u64)> {
        let mut content = Vec::new();
        reader.read_to_end(&mut content)?;
        let (digest, size) = digest(&content[..])?;
        self.store(&digest, size, |mut file| {
            file.write_all(&content).map_err(ChangeError::Io)
        })
        .map_err(into_io)?;
        Ok((digest, size))
    }

    /// Stores the content of `file`, hashed first so that content the store already has is
    /// never copied again, holes kept as holes; returns its digest and size. Stops at
    /// `deadline`.
    pub fn put_file(
        &self,
        file: &std::fs::File,
        deadline: Deadline,
    ) -> Result<(String, u64), ChangeError> {
        let (digest, size) = sparse::digest(file, deadline)?;
        self.store(&digest, size, |temp| {
            let (copied, _) = sparse::copy(file, temp, deadline)?;
            if copied != digest {
                return Err(ChangeError::Io(std::io::Error::other(
                    "the file changed while it was recorded",
                )));
            }
            Ok(())
        })?;
        Ok((digest, size))
    }

    /// Makes the blob `digest` of `size` bytes, written by `write` into a temporary file,
    /// unless the store has it already.
    fn store(
        &self,
        digest: &str,
        size: u64,
        write: impl FnOnce(&std::fs::File) -> Result<(), ChangeError>,
    ) -> Result<(), ChangeError> {
        let Some(path) = self.path(digest) else {
            return Err(ChangeError::Io(std::io::Error::other(
                "a digest is not 64 hex digits",
            )));
        };
        if path.exists() {
            touch(&path);
            return Ok(());
        }
        let temp = self.dir.join(format!("tmp-{:016x}", fastrand::u64(..)));
        let file = std::fs::File::create_new(&temp)?;
        if let Err(err) = write(&file) {
            drop(file);
            let _ = std::fs::remove_file(&temp);
            return Err(err);
        }
        drop(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(&temp, &path)?;
        let over = {
            let mut used = self
                .used
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            *used += size;
            *used > self.cap
        };
        if over {
            self.evict(digest);
        }
        Ok(())
    }

    /// The bytes the store holds, as last counted.
    pub fn used(&self) -> u64 {
        *self
            .used
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The content of a blob, if the store still has it.
    pub fn read(&self, digest: &str) -> std::io::Result<Option<Vec<u8>>> {
        let Some(path) = self.path(digest) else {
            return Ok(None);
        };
        match std::fs::read(&path) {
            Ok(bytes) => {
                touch(&path);
                Ok(Some(bytes))
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    #[cfg(test)]
    fn contains(&self, digest: &str) -> bool {
        self.path(digest).is_some_and(|path| path.exists())
    }

    /// Removes the least recently used blobs until the store is at nine tenths of its cap,
    /// never `keep` (the blob just written).
    fn evict(&self, keep: &str) {
        let mut blobs = match list(&self.dir) {
            Ok(blobs) => blobs,
            Err(err) => {
                tracing::warn!(error = %err, "cannot list the blob store to evict from it");
                return;
            }
        };
        blobs.sort_by_key(|blob| blob.used);
        let mut used: u64 = blobs.iter().map(|blob| blob.size).sum();
        let target = self.cap / 10 * 9;
        for blob in blobs {
            if used <= target {
                break;
            }
            if blob.path.ends_with(&keep[2..]) {
                continue;
            }
            if std::fs::remove_file(&blob.path).is_ok() {
                used -= blob.size;
            }
        }
        *self
            .used
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = used;
    }
}

/// The sha256 of what `reader` yields, hex, and its size.
pub fn digest(mut reader: impl Read) -> std::io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), size))
}

fn into_io(err: ChangeError) -> std::io::Error {
    match err {
        ChangeError::Io(err) => err,
        other => std::io::Error::other(other.to_string()),
    }
}

/// Marks a blob used now, for eviction order.
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().write(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

struct Listed {
    path: PathBuf,
    size: u64,
    used: SystemTime,
}

fn list(dir: &Path) -> std::io::Result<Vec<Listed>> {
    let mut blobs = Vec::new();
    for shard in std::fs::read_dir(dir)? {
        let shard = shard?;
        if !shard.file_type()?.is_dir() {
            // A temporary file a crash left behind.
            let _ = std::fs::remove_file(shard.path());
            continue;
        }
        for blob in std::fs::read_dir(shard.path())? {
            let blob = blob?;
            let meta = blob.metadata()?;
            blobs.push(Listed {
                path: blob.path(),
                size: meta.len(),
                used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
    }
    Ok(blobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_addressed_by_its_digest_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blobs = Blobs::open(dir.path().join("blobs"), 1 << 20).expect("open");
        let (digest, size) = blobs.put(&b"hello\n"[..]).expect("put");
        assert_eq!(
            digest,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(size, 6);
        assert_eq!(
            blobs.read(&digest).expect("read").as_deref(),
            Some(&b"hello\n"[..])
        );
        assert_eq!(blobs.put(&b"hello\n"[..]).expect("again").0, digest);
        assert_eq!(blobs.read(&"0".repeat(64)).expect("absent"), None);
        assert_eq!(blobs.read("../../etc/passwd").expect("not a digest"), None);
    }

    #[test]
    fn past_the_cap_the_least_recently_used_blobs_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blobs = Blobs::open(dir.path().join("blobs"), 3000).expect("open");
        let old = blobs.put(&[1u8; 1000][..]).expect("put").0;
        let path = blobs.path(&old).expect("path");
        std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open")
            .set_modified(SystemTime::UNIX_EPOCH)
            .expect("age it");
        let kept = blobs.put(&[2u8; 1000][..]).expect("put").0;
        let newest = blobs.put(&[3u8; 1500][..]).expect("put").0;
        assert!(!blobs.contains(&old), "the oldest blob was evicted");
        assert!(blobs.contains(&kept) && blobs.contains(&newest));
        let reopened = Blobs::open(dir.path().join("blobs"), 3000).expect("reopen");
        assert_eq!(*reopened.used.lock().expect("lock"), 2500);
    }
}
