//! Batched writes: a small response reaches the transport in one write.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::io::DuplexStream;

use super::*;

/// A `Finished` event's size: over h2's 256-byte threshold, under its 1 KiB one.
const EVENTS_BYTES: usize = 300;

/// The daemon's end of a connection, counting the writes that reach it; like a TCP
/// stream, it does vectored writes.
struct CountedWrites {
    inner: DuplexStream,
    writes: Arc<AtomicUsize>,
}

impl CountedWrites {
    fn counted(&self, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(_)) = written {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        written
    }
}

impl AsyncRead for CountedWrites {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedWrites {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.counted(written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.counted(written)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The writes an h2 server makes for the second of two responses shaped like a warm
/// call's (headers, a DATA frame of [`EVENTS_BYTES`], trailers), on a connection made
/// by `wrap`. The first response settles the connection's own frames (settings and
/// their acknowledgements).
async fn writes_of_a_response<T>(wrap: fn(CountedWrites) -> T) -> usize
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (daemon_end, client_end) = tokio::io::duplex(1 << 20);
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = CountedWrites {
        inner: daemon_end,
        writes: writes.clone(),
    };
    let server = tokio::spawn(async move {
        let mut connection = h2::server::handshake(wrap(counted))
            .await
            .expect("server handshake");
        while let Some(request) = connection.accept().await {
            let (_, mut respond) = request.expect("a request");
            // Queued without polling the connection in between, as a warm call's
            // events are ready at once.
            let mut body = respond
                .send_response(http::Response::new(()), false)
                .expect("headers");
            body.send_data(Bytes::from(vec![b'x'; EVENTS_BYTES]), false)
                .expect("data");
            body.send_trailers(http::HeaderMap::new())
                .expect("trailers");
        }
    });
    let (client, connection) = h2::client::handshake(client_end)
        .await
        .expect("client handshake");
    let client_connection = tokio::spawn(connection);
    let mut response_writes = 0;
    for _ in 0..2 {
        let mut client = client.clone().ready().await.expect("ready");
        let before = writes.load(Ordering::SeqCst);
        let request = http::Request::get("http://daemon/")
            .body(())
            .expect("request");
        let (response, _) = client.send_request(request, true).expect("sent");
        let mut body = response.await.expect("response").into_body();
        let mut received = 0;
        while let Some(data) = body.data().await {
            let data = data.expect("data");
            received += data.len();
            let _ = body.flow_control().release_capacity(data.len());
        }
        body.trailers().await.expect("trailers");
        assert_eq!(received, EVENTS_BYTES);
        response_writes = writes.load(Ordering::SeqCst) - before;
    }
    drop(client);
    client_connection.abort();
    let _ = server.await;
    response_writes
}

#[tokio::test]
async fn a_small_response_leaves_in_one_write() {
    assert_eq!(writes_of_a_response(BatchedWrites::new).await, 1);
    // The same connection unwrapped: h2 writes the DATA frame in place, then the trailers
    // apart. Were this ever one write, h2 would have changed and the wrapper could go.
    assert_eq!(writes_of_a_response(|counted| counted).await, 2);
}
