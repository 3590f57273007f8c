//! Capture of a running tool's stdout and stderr under the hard output limit of its profile.
//!
//! Engines write into an [`OutputCapture`] as the tool produces output. The capture streams
//! every accepted chunk to whoever listens, keeps stdout (the tool's result) and the end of
//! stderr (for error messages), and trips its overflow signal the moment the total crosses the
//! limit, so the executor can stop the tool then rather than after it has written gigabytes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// How much of the end of stderr is kept to explain a failure; the whole stream reaches
/// clients as it is written.
pub const STDERR_TAIL_BYTES: usize = 4 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    Stdout,
    Stderr,
}

/// A piece of output, as the tool wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    pub stream: StreamKind,
    pub data: Bytes,
}

/// What a finished call wrote.
#[derive(Debug, Clone, Default)]
pub struct CaptureSummary {
    /// Everything accepted on stdout (at most the limit).
    pub stdout: Vec<u8>,
    /// The last [`STDERR_TAIL_BYTES`] of stderr.
    pub stderr_tail: Vec<u8>,
    /// Bytes the tool tried to write, including any refused past the limit.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub overflowed: bool,
}

/// Receives each accepted chunk as it is written.
pub type ChunkSink = Box<dyn Fn(OutputChunk) + Send + Sync>;

pub struct OutputCapture {
    limit: u64,
    state: Mutex<State>,
    overflow: CancellationToken,
    sink: Option<ChunkSink>,
}

impl std::fmt::Debug for OutputCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputCapture")
            .field("limit", &self.limit)
            .field("overflowed", &self.overflow.is_cancelled())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    accepted: u64,
    stdout: Vec<u8>,
    stderr_tail: VecDeque<u8>,
    stdout_bytes: u64,
    stderr_bytes: u64,
}

/// The write that crossed the limit; the bytes under the limit were kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the tool wrote more than {limit} bytes of output")]
pub struct OutputLimitExceeded {
    pub limit: u64,
}

impl OutputCapture {
    /// A capture that accepts `limit` bytes across stdout and stderr and hands each accepted
    /// chunk to `sink`. Whatever the sink queues stays bounded by `limit`.
    pub fn new(limit: u64, sink: Option<ChunkSink>) -> Arc<Self> {
        Arc::new(Self {
            limit,
            state: Mutex::new(State::default()),
            overflow: CancellationToken::new(),
            sink,
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Accepts `data` up to the limit. Past it, the rest is refused and the overflow signal
    /// fires; every later write is refused whole.
    pub fn write(&self, stream: StreamKind, data: &[u8]) -> Result<(), OutputLimitExceeded> {
        if data.is_empty() {
            return Ok(());
        }
        let accepted = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let len = data.len() as u64;
            match stream {
                StreamKind::Stdout => state.stdout_bytes += len,
                StreamKind::Stderr => state.stderr_bytes += len,
            }
            let room = self.limit.saturating_sub(state.accepted);
            let take = usize::try_from(room.min(len)).unwrap_or(data.len());
            let accepted = &data[..take];
            state.accepted += take as u64;
            match stream {
                StreamKind::Stdout => state.stdout.extend_from_slice(accepted),
                StreamKind::Stderr => {
                    state.stderr_tail.extend(accepted);
                    let excess = state.stderr_tail.len().saturating_sub(STDERR_TAIL_BYTES);
                    state.stderr_tail.drain(..excess);
                }
            }
            accepted
        };
        if !accepted.is_empty()
            && let Some(sink) = &self.sink
        {
            sink(OutputChunk {
                stream,
                data: Bytes::copy_from_slice(accepted),
            });
        }
        if accepted.len() < data.len() {
            self.overflow.cancel();
            return Err(OutputLimitExceeded { limit: self.limit });
        }
        Ok(())
    }

    pub fn has_overflowed(&self) -> bool {
        self.overflow.is_cancelled()
    }

    /// Resolves when the limit is crossed.
    pub fn overflowed(&self) -> WaitForCancellationFutureOwned {
        self.overflow.clone().cancelled_owned()
    }

    /// Takes what was captured. Later writes still count but are not returned.
    pub fn finish(&self) -> CaptureSummary {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        CaptureSummary {
            stdout: std::mem::take(&mut state.stdout),
            stderr_tail: state.stderr_tail.iter().copied().collect(),
            stdout_bytes: state.stdout_bytes,
            stderr_bytes: state.stderr_bytes,
            overflowed: self.overflow.is_cancelled(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_exactly_the_limit() {
        let capture = OutputCapture::new(10, None);
        capture.write(StreamKind::Stdout, b"12345").expect("under");
        capture
            .write(StreamKind::Stderr, b"67890")
            .expect("at the limit");
        assert!(!capture.has_overflowed());
        let summary = capture.finish();
        assert_eq!(summary.stdout, b"12345");
        assert_eq!(summary.stderr_tail, b"67890");
        assert!(!summary.overflowed);
    }

    #[test]
    fn one_byte_past_the_limit_overflows_and_keeps_what_fit() {
        let capture = OutputCapture::new(10, None);
        capture
            .write(StreamKind::Stdout, b"1234567890")
            .expect("at the limit");
        let err = capture.write(StreamKind::Stdout, b"x").expect_err("past");
        assert_eq!(err.limit, 10);
        assert!(capture.has_overflowed());
        let summary = capture.finish();
        assert_eq!(summary.stdout, b"1234567890");
        assert_eq!(summary.stdout_bytes, 11);
        assert!(summary.overflowed);
    }

    #[test]
    fn stderr_keeps_only_its_tail() {
        let capture = OutputCapture::new(u64::MAX, None);
        capture
            .write(StreamKind::Stderr, &vec![b'a'; STDERR_TAIL_BYTES])
            .expect("under");
        capture
            .write(StreamKind::Stderr, b"the end")
            .expect("under");
        let summary = capture.finish();
        assert_eq!(summary.stderr_tail.len(), STDERR_TAIL_BYTES);
        assert!(summary.stderr_tail.ends_with(b"the end"));
        assert_eq!(summary.stderr_bytes, STDERR_TAIL_BYTES as u64 + 7);
    }

    #[tokio::test]
    async fn streams_accepted_chunks_and_signals_overflow() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let capture = OutputCapture::new(
            4,
            Some(Box::new(move |chunk| {
                let _ = tx.send(chunk);
            })),
        );
        let overflowed = capture.overflowed();
        capture.write(StreamKind::Stderr, b"ab").expect("under");
        assert!(capture.write(StreamKind::Stdout, b"cdef").is_err());
        overflowed.await;
        assert_eq!(
            rx.recv().await,
            Some(OutputChunk {
                stream: StreamKind::Stderr,
                data: Bytes::from_static(b"ab")
            })
        );
        assert_eq!(
            rx.recv().await,
            Some(OutputChunk {
                stream: StreamKind::Stdout,
                data: Bytes::from_static(b"cd")
            })
        );
    }
}
