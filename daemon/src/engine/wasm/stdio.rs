//! The guest's stdout and stderr: WASI output streams that write straight into the call's
//! [`OutputCapture`], with no task or buffer in between, so the output limit applies to each
//! write as the guest makes it.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

use crate::output::{OutputCapture, StreamKind};

/// How many bytes a guest may hand over in one write. Writes are copied into the capture at
/// once, so this only bounds a single host call's work.
const WRITE_BUDGET: usize = 64 * 1024;

#[derive(Clone)]
pub struct CaptureStream {
    capture: Arc<OutputCapture>,
    kind: StreamKind,
}

impl CaptureStream {
    pub fn new(capture: Arc<OutputCapture>, kind: StreamKind) -> CaptureStream {
        CaptureStream { capture, kind }
    }
}

impl IsTerminal for CaptureStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CaptureStream {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl AsyncWrite for CaptureStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(
            self.capture
                .write(self.kind, buf)
                .map(|()| buf.len())
                .map_err(io::Error::other),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[async_trait::async_trait]
impl Pollable for CaptureStream {
    async fn ready(&mut self) {}
}

#[async_trait::async_trait]
impl OutputStream for CaptureStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.capture
            .write(self.kind, &bytes)
            .map_err(|err| StreamError::LastOperationFailed(wasmtime::Error::new(err)))
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        if self.capture.has_overflowed() {
            Err(StreamError::Closed)
        } else {
            Ok(WRITE_BUDGET)
        }
    }
}
