//! Kept outputs: when an output policy cuts what a caller sees, the whole output is kept in
//! the state directory, named by its sha256 (identical outputs share one blob), so it can be
//! read back in pages. Each call's output is capped, and so is the total: the oldest outputs
//! are evicted first.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use crate::domain::{ExecutionOwner, OutputRecord};
use crate::ids::{self, ExecutionId};
use crate::store::{Store, StoreError};

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
    /// Bytes of all blobs on disk; held across a keep or a sweep so that keeping and
    /// evicting do not interleave (a blob is never removed while another call is adding a
    /// reference to it).
    total: Mutex<u64>,
    /// `total` as last published, for readers that cannot wait for its lock (the metrics).
    published: std::sync::atomic::AtomicU64,
}

impl KeptOutputs {
    /// Opens the directory of kept outputs, removing writes a crash cut short. Blocking: call
    /// it before serving.
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
            published: std::sync::atomic::AtomicU64::new(total),
        })
    }

    /// Keeps `output` (up to the per-call cap) for `execution_id`, then evicts the oldest
    /// outputs while the total is over its cap. `owner`, when the call has one, is recorded
    /// first: an output without its owner would read as the default tenant's.
    pub async fn keep(
        &self,
        execution_id: &ExecutionId,
        owner: Option<&ExecutionOwner>,
        output: Vec<u8>,
    ) -> Result<(), KeptError> {
        if let Some(owner) = owner {
            self.store
                .record_execution_owner(execution_id, owner)
                .await?;
        }
        let mut output = output;
        output.truncate(usize::try_from(self.limits.per_call).unwrap_or(usize::MAX));
        let size = output.len() as u64;
        let mut total = self.total.lock().await;
        let dir = self.dir.clone();
        let (digest, written) = blocking(move || write_blob(&dir, &output)).await?;
        *total += written;
        self.store
            .record_output(&OutputRecord {
                execution_id: execution_id.clone(),
                digest,
                size,
                created_at_ms: ids::now_ms(),
            })
            .await?;
        while *total > self.limits.total {
            let Some(oldest) = self.store.oldest_outputs(1).await?.pop() else {
                break;
            };
            *total = total.saturating_sub(self.forget(&oldest).await?);
        }
        self.publish(*total);
        Ok(())
    }

    /// The bytes of every kept output's blob, as last counted.
    pub fn bytes(&self) -> u64 {
        self.published.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn publish(&self, total: u64) {
        self.published
            .store(total, std::sync::atomic::Ordering::Relaxed);
    }

    /// Deletes the outputs kept before `before_ms` (retention); how many went.
    pub async fn sweep(&self, before_ms: i64) -> Result<u64, KeptError> {
        /// Outputs forgotten per store round trip: a sweep of a large backlog proceeds in
        /// bounded steps rather than one huge read.
        const BATCH: usize = 256;
        let mut total = self.total.lock().await;
        let mut swept = 0;
        loop {
            let old = self.store.outputs_before(before_ms, BATCH).await?;
            if old.is_empty() {
                self.publish(*total);
                return Ok(swept);
            }
            for output in &old {
                *total = total.saturating_sub(self.forget(output).await?);
                swept += 1;
            }
        }
    }

    /// Removes one kept output, and its blob when nothing else names it; the bytes freed.
    async fn forget(&self, output: &OutputRecord) -> Result<u64, KeptError> {
        self.store.remove_output(&output.execution_id).await?;
        if self.store.output_references(&output.digest).await? > 0 {
            return Ok(0);
        }
        let blob = self.dir.join(&output.digest);
        let removed = blocking(move || Ok(std::fs::remove_file(&blob).is_ok())).await?;
        Ok(if removed { output.size } else { 0 })
    }

    /// Reads `length` bytes (0 = a default page) from `offset` of a kept output.
    pub async fn read(
        &self,
        execution_id: &ExecutionId,
        offset: u64,
        length: u64,
    ) -> Result<Page, KeptError> {
        let record = self
            .store
            .output(execution_id)
            .await?
            .ok_or_else(|| KeptError::NotFound(execution_id.to_string()))?;
        if offset > record.size {
            return Err(KeptError::OutOfRange {
                execution_id: execution_id.to_string(),
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
        let id = execution_id.to_string();
        let data = blocking(move || {
            let mut file = std::fs::File::open(&path).map_err(|err| match err.kind() {
                std::io::ErrorKind::NotFound => KeptError::NotFound(id),
                _ => KeptError::Io(format!("cannot read {}: {err}", path.display())),
            })?;
            let mut data = vec![0; usize::try_from(length).unwrap_or(0)];
            file.seek(SeekFrom::Start(offset))
                .and_then(|_| file.read_exact(&mut data))
                .map_err(|err| KeptError::Io(format!("cannot read {}: {err}", path.display())))?;
            Ok(data)
        })
        .await?;
        Ok(Page {
            eof: offset + length == record.size,
            data,
            offset,
            total_bytes: record.size,
            digest: record.digest,
        })
    }
}

/// Writes `output` as the blob named by its digest, unless that blob is there already; the
/// digest and the bytes added to the directory.
fn write_blob(dir: &Path, output: &[u8]) -> Result<(String, u64), KeptError> {
    let digest = hex::encode(Sha256::digest(output));
    let path = dir.join(&digest);
    if path.exists() {
        return Ok((digest, 0));
    }
    let temporary = dir.join(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&temporary, output)
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|err| {
            let _ = std::fs::remove_file(&temporary);
            KeptError::Io(format!("cannot write {}: {err}", path.display()))
        })?;
    Ok((digest, output.len() as u64))
}

/// Runs file work off the async runtime's workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, KeptError> + Send + 'static,
) -> Result<T, KeptError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| KeptError::Io(format!("a file task failed: {err}")))?
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

    fn blobs(dir: &Path) -> usize {
        std::fs::read_dir(dir.join("outputs"))
            .expect("list")
            .count()
    }

    #[tokio::test]
    async fn an_output_is_kept_with_its_owner() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(&dir.path().join("db"), &StoreOptions::default()).expect("store"),
        );
        let kept = KeptOutputs::open(
            &dir.path().join("outputs"),
            store.clone(),
            KeptLimits::default(),
        )
        .expect("open");
        let owned = ExecutionId::new();
        let owner = ExecutionOwner {
            tenant: "bob".into(),
            run_id: None,
            started_at_ms: 1,
        };
        kept.keep(&owned, Some(&owner), b"bob's".to_vec())
            .await
            .expect("keep");
        assert_eq!(
            store
                .execution_owner(&owned)
                .await
                .expect("read")
                .as_deref(),
            Some("bob")
        );
        let unowned = ExecutionId::new();
        kept.keep(&unowned, None, b"nobody's".to_vec())
            .await
            .expect("keep");
        assert_eq!(store.execution_owner(&unowned).await.expect("read"), None);
    }

    #[tokio::test]
    async fn pages_through_a_kept_output() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kept = kept(dir.path(), KeptLimits::default());
        let output: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let one = ExecutionId::new();
        kept.keep(&one, None, output.clone()).await.expect("keep");
        let first = kept.read(&one, 0, 600).await.expect("read");
        assert_eq!(first.data, output[..600]);
        assert!(!first.eof);
        assert_eq!(first.total_bytes, 1000);
        let rest = kept.read(&one, 600, 600).await.expect("read");
        assert_eq!(rest.data, output[600..]);
        assert!(rest.eof);
        let end = kept.read(&one, 1000, 10).await.expect("read at the end");
        assert!(end.data.is_empty() && end.eof);
        assert!(matches!(
            kept.read(&one, 1001, 1).await,
            Err(KeptError::OutOfRange { .. })
        ));
        assert!(matches!(
            kept.read(&ExecutionId::new(), 0, 1).await,
            Err(KeptError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn caps_each_output_and_evicts_the_oldest_past_the_total() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kept = kept(
            dir.path(),
            KeptLimits {
                per_call: 100,
                total: 250,
            },
        );
        let ids: Vec<ExecutionId> = (0..4).map(|_| ExecutionId::new()).collect();
        kept.keep(&ids[0], None, vec![b'a'; 500])
            .await
            .expect("keep");
        assert_eq!(
            kept.read(&ids[0], 0, 0).await.expect("read").total_bytes,
            100
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        kept.keep(&ids[1], None, vec![b'b'; 100])
            .await
            .expect("keep");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        kept.keep(&ids[2], None, vec![b'c'; 100])
            .await
            .expect("keep");
        assert!(
            matches!(kept.read(&ids[0], 0, 0).await, Err(KeptError::NotFound(_))),
            "the oldest went"
        );
        assert!(kept.read(&ids[1], 0, 0).await.is_ok());
        assert!(kept.read(&ids[2], 0, 0).await.is_ok());
        // Identical outputs share a blob.
        kept.keep(&ids[3], None, vec![b'c'; 100])
            .await
            .expect("keep");
        assert_eq!(blobs(dir.path()), 2);
    }

    #[tokio::test]
    async fn a_sweep_forgets_old_outputs_and_keeps_shared_blobs_while_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kept = kept(dir.path(), KeptLimits::default());
        let (old, shared_old, shared_new) =
            (ExecutionId::new(), ExecutionId::new(), ExecutionId::new());
        kept.keep(&old, None, b"old".to_vec()).await.expect("keep");
        kept.keep(&shared_old, None, b"shared".to_vec())
            .await
            .expect("keep");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let cutoff = ids::now_ms();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        kept.keep(&shared_new, None, b"shared".to_vec())
            .await
            .expect("keep");
        assert_eq!(kept.sweep(cutoff).await.expect("sweep"), 2);
        assert!(matches!(
            kept.read(&old, 0, 0).await,
            Err(KeptError::NotFound(_))
        ));
        assert!(matches!(
            kept.read(&shared_old, 0, 0).await,
            Err(KeptError::NotFound(_))
        ));
        assert_eq!(
            kept.read(&shared_new, 0, 0).await.expect("kept").data,
            b"shared"
        );
        assert_eq!(blobs(dir.path()), 1, "the unshared old blob is gone");
        assert_eq!(kept.sweep(cutoff).await.expect("sweep again"), 0);
    }
}
