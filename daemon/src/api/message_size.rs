//! Refuses a request message over [`MAX_DECODING_MESSAGE_BYTES`] with RESOURCE_EXHAUSTED.
//!
//! tonic checks the same bound while decoding, but answers OUT_OF_RANGE, which tells a client
//! that a value lies outside a valid range; gRPC's convention for "more than this server
//! accepts" (grpc-go's and grpc-java's answer to the same case) is RESOURCE_EXHAUSTED. This
//! wrapper reads the length prefix of every gRPC message in a request body as it streams by
//! and fails the body before tonic sees an oversize message, so the service (or tonic, for a
//! unary call) receives the status from [`ApiError::MessageTooLarge`] instead.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::server::NamedService;

use super::error::ApiError;
use super::limits::MAX_DECODING_MESSAGE_BYTES;

/// The gRPC length prefix: a compression flag byte and a big-endian u32 length.
const PREFIX_BYTES: usize = 5;

/// A service whose request messages are checked against the limit.
#[derive(Debug, Clone)]
pub struct LimitMessages<S> {
    inner: S,
    limit: usize,
}

impl<S> LimitMessages<S> {
    /// Checks `inner`'s request messages against [`MAX_DECODING_MESSAGE_BYTES`].
    pub fn new(inner: S) -> LimitMessages<S> {
        LimitMessages {
            inner,
            limit: MAX_DECODING_MESSAGE_BYTES,
        }
    }
}

impl<S: NamedService> NamedService for LimitMessages<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for LimitMessages<S>
where
    S: Service<http::Request<Body>, Error = Infallible>,
{
    type Response = S::Response;
    type Error = Infallible;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let limit = self.limit;
        self.inner
            .call(request.map(|body| Body::new(CheckedBody::new(body, limit))))
    }
}

/// A request body that fails with RESOURCE_EXHAUSTED where a message over the limit begins.
/// Frames pass through unchanged; only the length prefixes are read.
struct CheckedBody {
    inner: Body,
    prefixes: PrefixScanner,
}

impl CheckedBody {
    fn new(inner: Body, limit: usize) -> CheckedBody {
        CheckedBody {
            inner,
            prefixes: PrefixScanner::new(limit),
        }
    }
}

impl HttpBody for CheckedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
            && let Err(too_large) = self.prefixes.scan(data)
        {
            return Poll::Ready(Some(Err(Status::from(too_large))));
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Follows the message boundaries of a gRPC body across however its bytes are split into
/// frames, and reports the first message whose declared length is over the limit.
#[derive(Debug)]
struct PrefixScanner {
    limit: usize,
    /// The bytes of the current prefix read so far.
    prefix: [u8; PREFIX_BYTES],
    filled: usize,
    /// Bytes of the current message still to pass before the next prefix.
    remaining: usize,
}

impl PrefixScanner {
    fn new(limit: usize) -> PrefixScanner {
        PrefixScanner {
            limit,
            prefix: [0; PREFIX_BYTES],
            filled: 0,
            remaining: 0,
        }
    }

    fn scan(&mut self, mut data: &[u8]) -> Result<(), ApiError> {
        while !data.is_empty() {
            if self.remaining > 0 {
                let skipped = self.remaining.min(data.len());
                self.remaining -= skipped;
                data = &data[skipped..];
                continue;
            }
            let taken = (PREFIX_BYTES - self.filled).min(data.len());
            self.prefix[self.filled..self.filled + taken].copy_from_slice(&data[..taken]);
            self.filled += taken;
            data = &data[taken..];
            if self.filled == PREFIX_BYTES {
                self.filled = 0;
                let [_compressed, length @ ..] = self.prefix;
                // A u32 always fits the usize of the 64-bit hosts the daemon runs on; were it
                // not to, the message would be over any limit.
                let size = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
                if size > self.limit {
                    return Err(ApiError::MessageTooLarge {
                        size,
                        limit: self.limit,
                    });
                }
                self.remaining = size;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    fn message(length: u32) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&length.to_be_bytes());
        bytes.resize(bytes.len() + length as usize, b'x');
        bytes
    }

    #[test]
    fn messages_up_to_the_limit_pass_however_the_frames_split_them() {
        let mut body = message(10);
        body.extend(message(0));
        body.extend(message(7));
        for split in 1..body.len() {
            let mut scanner = PrefixScanner::new(10);
            for chunk in body.chunks(split) {
                scanner.scan(chunk).expect("within the limit");
            }
            assert_eq!((scanner.filled, scanner.remaining), (0, 0), "split {split}");
        }
    }

    #[test]
    fn a_message_one_byte_over_is_refused_as_resource_exhausted() {
        let mut body = message(3);
        body.extend(message(11));
        for split in 1..body.len() {
            let mut scanner = PrefixScanner::new(10);
            let refused = body
                .chunks(split)
                .map(|chunk| scanner.scan(chunk))
                .find_map(Result::err)
                .expect("refused");
            let status = Status::from(refused);
            assert_eq!(status.code(), Code::ResourceExhausted, "split {split}");
            assert_eq!(
                status.message(),
                "the request message is 11 bytes; the limit is 10 bytes"
            );
        }
    }

    #[test]
    fn the_largest_declared_length_is_refused_before_any_of_it_arrives() {
        let mut scanner = PrefixScanner::new(MAX_DECODING_MESSAGE_BYTES);
        let refused = scanner
            .scan(&[1, 0xff, 0xff, 0xff, 0xff])
            .expect_err("refused");
        assert!(matches!(
            refused,
            ApiError::MessageTooLarge {
                size: 0xffff_ffff,
                ..
            }
        ));
    }
}
