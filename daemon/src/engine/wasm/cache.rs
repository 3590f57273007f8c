//! The on-disk cache of compiled modules, keyed by the module's digest and the engine's
//! compatibility hash, so a restarted daemon loads its tools without compiling them again.
//!
//! Loading compiled code is `unsafe` in wasmtime: the bytes are trusted to be what wasmtime
//! wrote. The cache directory is therefore private to the daemon (mode 0700), entries are
//! written to a temporary name and renamed into place, and each entry starts with the sha256
//! of its payload, checked before use, so a truncated or damaged file is recompiled rather
//! than loaded.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};

const DIGEST_LEN: usize = 32;

pub struct ModuleCache {
    dir: Dir,
    /// Distinguishes artifacts of differently configured engines and wasmtime versions.
    engine_key: String,
}

/// Where an artifact came from, for logs and measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Cache,
    Compiled,
}

impl ModuleCache {
    /// Opens (creating if needed) the cache at `path` for `engine`.
    pub fn open(path: &Path, engine: &wasmtime::Engine) -> io::Result<ModuleCache> {
        std::fs::create_dir_all(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(ModuleCache {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        })
    }

    /// Returns the artifact for the module with `digest`: from the cache when a valid entry
    /// exists and `load` accepts it, otherwise from `compile`, which is then stored.
    pub fn get_or_compile<T>(
        &self,
        digest: &str,
        load: impl FnOnce(&[u8]) -> wasmtime::Result<T>,
        compile: impl FnOnce() -> wasmtime::Result<(T, Vec<u8>)>,
    ) -> wasmtime::Result<(T, Source)> {
        let name = format!("{digest}-{}.cwasm", self.engine_key);
        if let Some(payload) = self.read_entry(&name) {
            match load(&payload) {
                Ok(artifact) => return Ok((artifact, Source::Cache)),
                Err(err) => {
                    tracing::warn!(entry = %name, error = %err, "discarding unusable cache entry");
                }
            }
        }
        let (artifact, serialized) = compile()?;
        if let Err(err) = self.write_entry(&name, &serialized) {
            // The tool is still served; it is only compiled again next time.
            tracing::warn!(entry = %name, error = %err, "cannot write the module cache");
        }
        Ok((artifact, Source::Compiled))
    }

    fn read_entry(&self, name: &str) -> Option<Vec<u8>> {
        let bytes = match self.dir.read(name) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return None,
            Err(err) => {
                tracing::warn!(entry = %name, error = %err, "cannot read cache entry");
                return None;
            }
        };
        if bytes.len() < DIGEST_LEN {
            tracing::warn!(entry = %name, "cache entry is truncated");
            return None;
        }
        let (digest, payload) = bytes.split_at(DIGEST_LEN);
        if Sha256::digest(payload).as_slice() != digest {
            tracing::warn!(entry = %name, "cache entry does not match its checksum");
            return None;
        }
        Some(payload.to_vec())
    }

    fn write_entry(&self, name: &str, payload: &[u8]) -> io::Result<()> {
        let temporary = format!("{name}.tmp-{}", uuid::Uuid::new_v4().simple());
        let mut contents = Vec::with_capacity(DIGEST_LEN + payload.len());
        contents.extend_from_slice(&Sha256::digest(payload));
        contents.extend_from_slice(payload);
        self.dir.write(&temporary, &contents)?;
        self.dir
            .rename(&temporary, &self.dir, name)
            .inspect_err(|_| {
                let _ = self.dir.remove_file(&temporary);
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path) -> ModuleCache {
        ModuleCache::open(dir, &wasmtime::Engine::default()).expect("open cache")
    }

    #[test]
    fn compiles_once_then_serves_from_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        let (value, source) = cache
            .get_or_compile(
                "abc",
                |_| wasmtime::bail!("nothing cached yet"),
                || Ok((1, b"artifact".to_vec())),
            )
            .expect("compiles");
        assert_eq!((value, source), (1, Source::Compiled));
        let (value, source) = cache
            .get_or_compile(
                "abc",
                |bytes| Ok(bytes.len()),
                || wasmtime::bail!("must not compile again"),
            )
            .expect("cached");
        assert_eq!((value, source), (8, Source::Cache));
        let mode = std::fs::metadata(dir.path())
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_damaged_entry_is_recompiled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = cache(dir.path());
        cache
            .get_or_compile("abc", |_| Ok(()), || Ok(((), b"artifact".to_vec())))
            .expect("compiles");
        let entry = std::fs::read_dir(dir.path())
            .expect("list")
            .next()
            .expect("one entry")
            .expect("entry")
            .path();
        let mut bytes = std::fs::read(&entry).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&entry, bytes).expect("write");
        let (_, source) = cache
            .get_or_compile(
                "abc",
                |_| panic!("a damaged entry must not be loaded"),
                || Ok(((), b"artifact".to_vec())),
            )
            .expect("recompiles");
        assert_eq!(source, Source::Compiled);
    }
}
