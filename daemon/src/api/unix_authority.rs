//! Any `:authority` on the Unix socket: a connection wrapper that rewrites the HTTP/2
//! `:authority` of every request a client sends over the Unix socket listener to one the
//! server's HTTP stack accepts.
//!
//! A socket path is no host name, and gRPC clients disagree about what to send for one:
//! tonic sends what the caller sets, grpc-core (Python, Ruby, PHP, C++ clients) sends the
//! percent-encoded path, `tmp%2Fairlock.sock`. The `http` crate, and so h2 under tonic, refuses
//! `%` in a host and resets the stream with PROTOCOL_ERROR, before any service sees it. On a
//! Unix socket the authority names nothing (the socket itself is the address), so this layer
//! replaces one that does not parse with `localhost`, and leaves a valid one as it is.
//!
//! HPACK compresses headers against a table both sides keep in step, so the authority cannot
//! be patched in the byte stream: every header block the client sends is decoded with a
//! decoder that mirrors the client's encoder and encoded again with an encoder of our own,
//! which the server's decoder mirrors. Both come from `loona-hpack`; the framing around them
//! (the connection preface, frame headers, HEADERS and CONTINUATION) is the few lines of
//! RFC 9113 written out below. Frames from the server pass through untouched, and so do all
//! other frames from the client.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tonic::transport::server::{Connected, UdsConnectInfo};

/// The client connection preface (RFC 9113 §3.4), passed through before any frame.
const PREFACE_BYTES: usize = 24;

/// Bytes of a frame header.
const FRAME_HEADER_BYTES: usize = 9;

/// The largest frame this layer emits: the smallest SETTINGS_MAX_FRAME_SIZE a peer may set,
/// so valid whatever the server advertised.
const MAX_EMITTED_FRAME_BYTES: usize = 16_384;

/// The largest compressed header block accepted from a client. The server refuses decoded
/// header lists over `limits::MAX_HEADER_LIST_BYTES` (16 KiB) anyway; a compressed block is
/// never larger than four times that without being hostile.
const MAX_HEADER_BLOCK_BYTES: usize = 64 * 1024;

/// The largest frame a client may send before the server has raised the limit: h2's default
/// SETTINGS_MAX_FRAME_SIZE, which tonic leaves as it is.
const MAX_FRAME_BYTES: usize = 16_384;

/// The HPACK dynamic table size the server allows the client's encoder (h2's default
/// SETTINGS_HEADER_TABLE_SIZE, which tonic leaves as it is), and so the most our encoder
/// may use of the server's decoder.
const HEADER_TABLE_BYTES: usize = 4096;

/// What a request gets instead of an authority that does not parse.
const REPLACEMENT_AUTHORITY: &[u8] = b"localhost";

const FRAME_HEADERS: u8 = 0x1;
const FRAME_CONTINUATION: u8 = 0x9;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_END_HEADERS: u8 = 0x4;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;

/// A Unix socket connection whose client header blocks are re-encoded with a usable
/// `:authority` (see the module docs).
pub struct AnyAuthority {
    stream: UnixStream,
    rewriter: Rewriter,
    /// Bytes read from the client, not yet parsed.
    raw: BytesMut,
    /// Bytes parsed and ready for the server.
    ready: BytesMut,
}

impl AnyAuthority {
    pub fn new(stream: UnixStream) -> AnyAuthority {
        AnyAuthority {
            stream,
            rewriter: Rewriter::new(),
            raw: BytesMut::with_capacity(8 * 1024),
            ready: BytesMut::with_capacity(8 * 1024),
        }
    }
}

impl Connected for AnyAuthority {
    type ConnectInfo = UdsConnectInfo;

    fn connect_info(&self) -> UdsConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for AnyAuthority {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.ready.is_empty() {
                let n = this.ready.len().min(buf.remaining());
                buf.put_slice(&this.ready[..n]);
                this.ready.advance(n);
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.stream).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Ready(Ok(())) => {
                    if read.filled().is_empty() {
                        // The client closed its side; a frame cut short is simply dropped,
                        // as the server would drop it.
                        return Poll::Ready(Ok(()));
                    }
                    this.raw.extend_from_slice(read.filled());
                    this.rewriter.feed(&mut this.raw, &mut this.ready)?;
                }
            }
        }
    }
}

impl AsyncWrite for AnyAuthority {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A header block being collected across HEADERS and CONTINUATION frames.
struct Pending {
    stream_id: u32,
    end_stream: bool,
    block: Vec<u8>,
}

/// The client-to-server half of the connection, parsed frame by frame.
struct Rewriter {
    preface_left: usize,
    decoder: loona_hpack::Decoder<'static>,
    encoder: loona_hpack::Encoder<'static>,
    pending: Option<Pending>,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl Rewriter {
    fn new() -> Rewriter {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(HEADER_TABLE_BYTES);
        let mut encoder = loona_hpack::Encoder::new();
        encoder.set_max_table_size(HEADER_TABLE_BYTES);
        Rewriter {
            preface_left: PREFACE_BYTES,
            decoder,
            encoder,
            pending: None,
        }
    }

    /// Moves every complete unit of `raw` (the preface, whole frames) to `out`, rewriting
    /// header blocks; an incomplete frame stays in `raw` for the next read.
    fn feed(&mut self, raw: &mut BytesMut, out: &mut BytesMut) -> io::Result<()> {
        if self.preface_left > 0 {
            let n = self.preface_left.min(raw.len());
            out.extend_from_slice(&raw.split_to(n));
            self.preface_left -= n;
            if self.preface_left > 0 {
                return Ok(());
            }
        }
        while raw.len() >= FRAME_HEADER_BYTES {
            let length = usize::from(raw[0]) << 16 | usize::from(raw[1]) << 8 | usize::from(raw[2]);
            if length > MAX_FRAME_BYTES {
                // The server would refuse it (FRAME_SIZE_ERROR); refusing here as well keeps
                // a hostile client from making this layer buffer it.
                return Err(invalid(format!(
                    "a {length}-byte HTTP/2 frame; the limit is {MAX_FRAME_BYTES}"
                )));
            }
            if raw.len() < FRAME_HEADER_BYTES + length {
                raw.reserve(FRAME_HEADER_BYTES + length - raw.len());
                return Ok(());
            }
            let frame = raw.split_to(FRAME_HEADER_BYTES + length);
            let kind = frame[3];
            let flags = frame[4];
            let stream_id =
                u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
            let payload = &frame[FRAME_HEADER_BYTES..];
            match (kind, self.pending.as_mut()) {
                (FRAME_HEADERS, None) => {
                    let fragment = headers_fragment(flags, payload)?;
                    self.pending = Some(Pending {
                        stream_id,
                        end_stream: flags & FLAG_END_STREAM != 0,
                        block: fragment.to_vec(),
                    });
                }
                (FRAME_CONTINUATION, Some(pending)) if pending.stream_id == stream_id => {
                    if pending.block.len() + payload.len() > MAX_HEADER_BLOCK_BYTES {
                        return Err(invalid(format!(
                            "a header block over {MAX_HEADER_BLOCK_BYTES} bytes"
                        )));
                    }
                    pending.block.extend_from_slice(payload);
                }
                (_, Some(_)) => {
                    // RFC 9113 §6.10: nothing may come between a block's frames.
                    return Err(invalid(
                        "a frame in the middle of a header block (PROTOCOL_ERROR)".into(),
                    ));
                }
                (_, None) => {
                    out.extend_from_slice(&frame);
                    continue;
                }
            }
            if flags & FLAG_END_HEADERS != 0
                && let Some(pending) = self.pending.take()
            {
                self.emit(pending, out)?;
            }
        }
        Ok(())
    }

    /// Decodes one whole header block, fixes its authority, and writes it to `out` as a
    /// HEADERS frame and as many CONTINUATION frames as its size needs.
    fn emit(&mut self, pending: Pending, out: &mut BytesMut) -> io::Result<()> {
        let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.decoder
            .decode_with_cb(&pending.block, |name, value| {
                headers.push((name.into_owned(), value.into_owned()));
            })
            .map_err(|err| invalid(format!("a header block that does not decode: {err:?}")))?;
        for (name, value) in &mut headers {
            if name.as_slice() == b":authority"
                && http::uri::Authority::try_from(&value[..]).is_err()
            {
                *value = REPLACEMENT_AUTHORITY.to_vec();
            }
        }
        let block = self
            .encoder
            .encode(headers.iter().map(|(name, value)| (&name[..], &value[..])));
        let mut chunks = block.chunks(MAX_EMITTED_FRAME_BYTES).peekable();
        let mut kind = FRAME_HEADERS;
        let mut first_flags = if pending.end_stream {
            FLAG_END_STREAM
        } else {
            0
        };
        // An empty block is still one HEADERS frame.
        let empty: &[u8] = &[];
        if chunks.peek().is_none() {
            put_frame(
                out,
                kind,
                first_flags | FLAG_END_HEADERS,
                pending.stream_id,
                empty,
            );
            return Ok(());
        }
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            let flags = first_flags | if last { FLAG_END_HEADERS } else { 0 };
            put_frame(out, kind, flags, pending.stream_id, chunk);
            kind = FRAME_CONTINUATION;
            first_flags = 0;
        }
        Ok(())
    }
}

/// The header block fragment of a HEADERS frame's payload, without padding and priority.
fn headers_fragment(flags: u8, payload: &[u8]) -> io::Result<&[u8]> {
    let malformed = || invalid("a malformed HEADERS frame".into());
    let mut start = 0;
    let mut end = payload.len();
    if flags & FLAG_PADDED != 0 {
        let pad = usize::from(*payload.first().ok_or_else(malformed)?);
        start = 1;
        end = end.checked_sub(pad).ok_or_else(malformed)?;
    }
    if flags & FLAG_PRIORITY != 0 {
        // Stream dependency and weight: deprecated (RFC 9113 §5.3.2) and dropped here.
        start += 5;
    }
    payload.get(start..end).ok_or_else(malformed)
}

fn put_frame(out: &mut BytesMut, kind: u8, flags: u8, stream_id: u32, payload: &[u8]) {
    let length = payload.len();
    out.reserve(FRAME_HEADER_BYTES + length);
    out.put_u8((length >> 16) as u8);
    out.put_u8((length >> 8) as u8);
    out.put_u8(length as u8);
    out.put_u8(kind);
    out.put_u8(flags);
    out.put_u32(stream_id);
    out.extend_from_slice(payload);
}

#[cfg(test)]
#[path = "unix_authority_tests.rs"]
mod tests;
