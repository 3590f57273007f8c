//! Kept outputs: when an output policy cuts what a caller sees, the whole output is kept in
//! the state directory, named by its sha256 (identical outputs share one blob), so it can be
//! read back in pages. Each call's output is capped, and so is the total: the oldest outputs
//! are evicted first.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

use crate::ids;
use crate::store::{OutputRecord, Store, StoreError};

/// What one page of `ReadOutput` returns at most: large enough to page through a flood
/// quickly, small enough for one gRPC message.
pub const MAX_PAGE_BYTES: u64 = 1 << 20;

/// Page size when the caller names none.
pub const DEFAULT_PAGE_BYTES: u64 = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptLimits {
    /// Bytes kept of one call's output.
    pub per_call: u64,
    /// Bytes kept in all; past this the oldest outputs go.
    pub total: u64,
}

impl Default for KeptLimits {
    fn default() -> Self {
        KeptLimits {
            per_call: 16 << 20,
            total: 1 << 30,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    #[error(
        "no kept output for execution `{0}`: its result was not cut, or the output was evicted"
    )]
    NotFound(String),
    #[error("the kept output of `{execution_id}` is {size} bytes; offset {offset} is past its end")]
    OutOfRange {
        execution_id: String,
        size: u64,
        offset: u64,
    },
    #[error("kept outputs: {0}")]
    Io(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One page of a kept output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub data: Vec<u8>,
    pub offset: u64,
    pub total_bytes: u64,
    pub eof: bool,
    pub digest: String,
}

pub struct KeptOutputs {
    dir: PathBuf,
    store: Arc<dyn Store>,
    limits: KeptLimits,
    /// Bytes of all blobs on disk; guarded so keeping and evicting do not interleave.
    total: Mutex<u64>,
}

impl KeptOutputs {
    pub fn open(
        dir: &Path,
        store: Arc<dyn Store>,
        limits: KeptLimits,
    ) -> std::io::Result<KeptOutputs> {
        std::fs::create_dir_all(dir)?;
        let mut total = 0;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with("tmp-") {
                // A write cut short by a crash.
                let _ = std::fs::remove_file(entry.path());
                continue;
            }
            total += entry.metadata()?.len();
        }
        Ok(KeptOutputs {
            dir: dir.to_owned(),
            store,
            limits,
            total: Mutex::new(total),
        })
    }

    /// Keeps `output` (up to the per-call cap) for `execution_id`, then evicts the oldest
    /// outputs while the total is over its cap.
    pub fn keep(&self, execution_id: &str, output: &[u8]) -> Result<(), KeptError> {
        let cap = usize::try_from(self.limits.per_call).unwrap_or(usize::MAX);
        let output = &output[..output.len().min(cap)];
        let digest = hex::encode(Sha256::digest(output));
        let mut total = self.total.lock().unwrap_or_else(PoisonError::into_inner);
        let path = self.dir.join(&digest);
        if !path.exists() {
            let temporary = self
                .dir
                .join(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
            std::fs::write(&temporary, output)
                .and_then(|()| std::fs::rename(&temporary, &path))
                .map_err(|err| {
                    let _ = std::fs::remove_file(&temporary);
                    KeptError::Io(format!("cannot write {}: {err}", path.display()))
                })?;
            *total += output.len() as u64;
        }
        self.store.record_output(&OutputRecord {
            execution_id: execution_id.to_owned(),
            digest,
            size: output.len() as u64,
            created_at_ms: ids::now_ms(),
        })?;
        while *total > self.limits.total {
            let Some(oldest) = self.store.oldest_outputs(1)?.pop() else {
                break;
            };
            self.store.remove_output(&oldest.execution_id)?;
            if self.store.output_references(&oldest.digest)? == 0 {
                let blob = self.dir.join(&oldest.digest);
                if std::fs::remove_file(&blob).is_ok() {
                    *total = total.saturating_sub(oldest.size);
                }
            }
        }
        Ok(())
    }

    /// Reads `length` bytes (0 = a default page) from `offset` of a kept output.
    pub fn read(&self, execution_id: &str, offset: u64, length: u64) -> Result<Page, KeptError> {
        let record = self
            .store
            .output(execution_id)?
            .ok_or_else(|| KeptError::NotFound(execution_id.to_owned()))?;
        if offset > record.size {
            return Err(KeptError::OutOfRange {
                execution_id: execution_id.to_owned(),
                size: record.size,
                offset,
            });
        }
        let length = match length {
            0 => DEFAULT_PAGE_BYTES,
            length => length.min(MAX_PAGE_BYTES),
        }
        .min(record.size - offset);
        let path = self.dir.join(&record.digest);
        let mut file = std::fs::File::open(&path).map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => KeptError::NotFound(execution_id.to_owned()),
            _ => KeptError::Io(format!("cannot read {}: {err}", path.display())),
        })?;
        let mut data = vec![0; usize::try_from(length).unwrap_or(0)];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut data))
            .map_err(|err| KeptError::Io(format!("cannot read {}: {err}", path.display())))?;
        Ok(Page {
            eof: offset + length == record.size,
            data,
            offset,
            total_bytes: record.size,
            digest: record.digest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SqliteStore, StoreOptions};

    fn kept(dir: &Path, limits: KeptLimits) -> KeptOutputs {
        let store =
            Arc::new(SqliteStore::open(&dir.join("db"), &StoreOptions::default()).expect("store"));
        KeptOutputs::open(&dir.join("outputs"), store, limits).expect("open")
    }

    #[test]
    fn pages_through_a_kept_output() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kept = kept(dir.path(), KeptLimits::default());
        let output: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        kept.keep("exe_1", &output).expect("keep");
        let first = kept.read("exe_1", 0, 600).expect("read");
        assert_eq!(first.data, output[..600]);
        assert!(!first.eof);
        assert_eq!(first.total_bytes, 1000);
        let rest = kept.read("exe_1", 600, 600).expect("read");
        assert_eq!(rest.data, output[600..]);
        assert!(rest.eof);
        let end = kept.read("exe_1", 1000, 10).expect("read at the end");
        assert!(end.data.is_empty() && end.eof);
        assert!(matches!(
            kept.read("exe_1", 1001, 1),
            Err(KeptError::OutOfRange { .. })
        ));
        assert!(matches!(
            kept.read("exe_2", 0, 1),
            Err(KeptError::NotFound(_))
        ));
    }

    #[test]
    fn caps_each_output_and_evicts_the_oldest_past_the_total() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kept = kept(
            dir.path(),
            KeptLimits {
                per_call: 100,
                total: 250,
            },
        );
        kept.keep("exe_1", &[b'a'; 500]).expect("keep");
        assert_eq!(kept.read("exe_1", 0, 0).expect("read").total_bytes, 100);
        std::thread::sleep(std::time::Duration::from_millis(2));
        kept.keep("exe_2", &[b'b'; 100]).expect("keep");
        std::thread::sleep(std::time::Duration::from_millis(2));
        kept.keep("exe_3", &[b'c'; 100]).expect("keep");
        assert!(
            matches!(kept.read("exe_1", 0, 0), Err(KeptError::NotFound(_))),
            "the oldest went"
        );
        assert!(kept.read("exe_2", 0, 0).is_ok());
        assert!(kept.read("exe_3", 0, 0).is_ok());
        // Identical outputs share a blob.
        kept.keep("exe_4", &[b'c'; 100]).expect("keep");
        let blobs = std::fs::read_dir(dir.path().join("outputs"))
            .expect("list")
            .count();
        assert_eq!(blobs, 2);
    }
}
