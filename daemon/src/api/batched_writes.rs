//! The transport under the HTTP/2 server, told to batch: a connection wrapper that makes h2
//! copy small frames into its write buffer instead of chaining them, so that a response's
//! headers, messages and trailers (and the responses of other calls ready at the same time)
//! leave in one write.
//!
//! h2 writes a DATA frame's payload in place (a vectored write of its buffer and the
//! payload) once the payload reaches 256 bytes on a transport that does vectored writes, or
//! 1 KiB on one that does not, and a chained frame must be written out before h2 encodes
//! the next. A `Finished` event is about 300 bytes, so on a vectored transport every call's
//! response went out as two writes (headers and events, then the trailers), each waking the
//! client, and concurrent calls' responses could not share a write. Reporting the transport
//! as not vectored moves the threshold to 1 KiB: the small responses of warm calls are
//! copied and batched, and a large payload costs two writes (the buffer, then the payload)
//! instead of one, which is small beside the size of what it writes.
//!
//! h2 offers no setting for the threshold; this is the one knob it reads. Under TLS, h2
//! writes to tonic's TLS stream, which sits above this wrapper and says it does vectored
//! writes, so a TLS connection keeps the 256-byte threshold: batching there needs the TLS
//! handshake done before tonic sees the connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// A connection whose writes h2 batches (see the module docs).
pub struct BatchedWrites<T> {
    inner: T,
}

impl<T> BatchedWrites<T> {
    pub fn new(inner: T) -> BatchedWrites<T> {
        BatchedWrites { inner }
    }
}

impl<T: Connected> Connected for BatchedWrites<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> T::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for BatchedWrites<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for BatchedWrites<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
#[path = "batched_writes_tests.rs"]
mod tests;
