//! The Unix socket's authority rewrite, on the HTTP/2 frames and HPACK blocks a client sends.

use super::*;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    put_frame(&mut out, kind, flags, stream_id, payload);
    out.to_vec()
}

/// Splits `bytes` into frames: (kind, flags, stream, payload).
fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let length =
            usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        let id = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        out.push((bytes[3], bytes[4], id, bytes[9..9 + length].to_vec()));
        bytes = &bytes[9 + length..];
    }
    out
}

fn decode(decoder: &mut loona_hpack::Decoder<'_>, block: &[u8]) -> Vec<(String, String)> {
    decoder
        .decode(block)
        .expect("decodes")
        .into_iter()
        .map(|(n, v)| {
            (
                String::from_utf8(n).expect("utf8"),
                String::from_utf8(v).expect("utf8"),
            )
        })
        .collect()
}

fn run(rewriter: &mut Rewriter, input: &[u8], step: usize) -> Vec<u8> {
    let mut raw = BytesMut::new();
    let mut out = BytesMut::new();
    for piece in input.chunks(step) {
        raw.extend_from_slice(piece);
        rewriter.feed(&mut raw, &mut out).expect("valid input");
    }
    assert!(raw.is_empty(), "everything was consumed");
    out.to_vec()
}

#[test]
fn a_percent_encoded_authority_becomes_localhost_and_the_rest_is_kept() {
    // Two requests from one client encoder: the second refers to the first's entries in
    // the dynamic table, so the decoder must follow the client's table.
    let mut client = loona_hpack::Encoder::new();
    let headers: Vec<(&[u8], &[u8])> = vec![
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/airlock.v1.Tools/ListTools"),
        (b":authority", b"tmp%2Fairlock.sock"),
        (b"te", b"trailers"),
        (b"authorization", b"Bearer secret"),
    ];
    let first = client.encode(headers.clone());
    let second = client.encode(headers.clone());
    let settings = frame(0x4, 0, 0, &[]);
    let mut input = PREFACE.to_vec();
    input.extend(&settings);
    input.extend(frame(FRAME_HEADERS, FLAG_END_HEADERS, 1, &first));
    input.extend(frame(0x0, FLAG_END_STREAM, 1, b"\0\0\0\0\0"));
    // The second block arrives split over HEADERS + CONTINUATION, padded.
    let (a, b) = second.split_at(second.len() / 2);
    let mut padded = vec![3u8];
    padded.extend(a);
    padded.extend([0, 0, 0]);
    input.extend(frame(
        FRAME_HEADERS,
        FLAG_PADDED | FLAG_END_STREAM,
        3,
        &padded,
    ));
    input.extend(frame(FRAME_CONTINUATION, FLAG_END_HEADERS, 3, b));

    for step in [1, 7, input.len()] {
        let out = run(&mut Rewriter::new(), &input, step);
        assert_eq!(&out[..PREFACE.len()], PREFACE);
        let got = frames(&out[PREFACE.len()..]);
        assert_eq!(got.len(), 4, "settings, headers, data, headers");
        assert_eq!(got[0], (0x4, 0, 0, vec![]));
        assert_eq!(got[2], (0x0, FLAG_END_STREAM, 1, b"\0\0\0\0\0".to_vec()));
        let mut server = loona_hpack::Decoder::new();
        for (index, stream, flags) in [
            (1, 1, FLAG_END_HEADERS),
            (3, 3, FLAG_END_HEADERS | FLAG_END_STREAM),
        ] {
            let (kind, got_flags, id, block) = &got[index];
            assert_eq!((*kind, *got_flags, *id), (FRAME_HEADERS, flags, stream));
            let decoded = decode(&mut server, block);
            let expected: Vec<(String, String)> = headers
                .iter()
                .map(|(n, v)| {
                    let v = if *n == b":authority" {
                        b"localhost".as_slice()
                    } else {
                        v
                    };
                    (
                        String::from_utf8(n.to_vec()).expect("utf8"),
                        String::from_utf8(v.to_vec()).expect("utf8"),
                    )
                })
                .collect();
            assert_eq!(decoded, expected);
        }
    }
}

#[test]
fn a_valid_authority_is_kept() {
    let mut client = loona_hpack::Encoder::new();
    let block = client.encode([(b":authority".as_slice(), b"localhost:7411".as_slice())]);
    let mut input = PREFACE.to_vec();
    input.extend(frame(FRAME_HEADERS, FLAG_END_HEADERS, 1, &block));
    let out = run(&mut Rewriter::new(), &input, 5);
    let got = frames(&out[PREFACE.len()..]);
    let decoded = decode(&mut loona_hpack::Decoder::new(), &got[0].3);
    assert_eq!(
        decoded,
        vec![(":authority".into(), "localhost:7411".into())]
    );
}

#[test]
fn a_big_block_is_split_into_continuations() {
    let mut client = loona_hpack::Encoder::new();
    let big = "v".repeat(40_000);
    let block = client.encode([(b"x-big".as_slice(), big.as_bytes())]);
    let mut input = PREFACE.to_vec();
    for (index, chunk) in block.chunks(MAX_FRAME_BYTES).enumerate() {
        let last = (index + 1) * MAX_FRAME_BYTES >= block.len();
        let kind = if index == 0 {
            FRAME_HEADERS
        } else {
            FRAME_CONTINUATION
        };
        input.extend(frame(
            kind,
            if last { FLAG_END_HEADERS } else { 0 },
            1,
            chunk,
        ));
    }
    let out = run(&mut Rewriter::new(), &input, 4096);
    let got = frames(&out[PREFACE.len()..]);
    assert!(got.len() >= 3);
    assert!(got.iter().all(|f| f.3.len() <= MAX_EMITTED_FRAME_BYTES));
    let block: Vec<u8> = got.iter().flat_map(|f| f.3.clone()).collect();
    assert_eq!(got.last().map(|f| f.1), Some(FLAG_END_HEADERS));
    let decoded = decode(&mut loona_hpack::Decoder::new(), &block);
    assert_eq!(decoded, vec![("x-big".into(), big)]);
}

#[test]
fn hostile_framing_is_refused() {
    let mut raw = BytesMut::from(PREFACE);
    let mut out = BytesMut::new();
    // A frame interleaved into a header block.
    raw.extend(frame(FRAME_HEADERS, 0, 1, &[0x82]));
    raw.extend(frame(0x0, 0, 1, b"x"));
    assert!(Rewriter::new().feed(&mut raw, &mut out).is_err());
    // A frame larger than the server's limit.
    let mut raw = BytesMut::from(PREFACE);
    raw.extend(frame(0x0, 0, 1, &vec![0; MAX_FRAME_BYTES + 1]));
    assert!(
        Rewriter::new()
            .feed(&mut raw, &mut BytesMut::new())
            .is_err()
    );
    // Padding longer than the payload.
    let mut raw = BytesMut::from(PREFACE);
    raw.extend(frame(
        FRAME_HEADERS,
        FLAG_PADDED | FLAG_END_HEADERS,
        1,
        &[9, 0x82],
    ));
    assert!(
        Rewriter::new()
            .feed(&mut raw, &mut BytesMut::new())
            .is_err()
    );
    // A block that does not decode (an index past both tables).
    let mut raw = BytesMut::from(PREFACE);
    raw.extend(frame(FRAME_HEADERS, FLAG_END_HEADERS, 1, &[0xff, 0x7f]));
    assert!(
        Rewriter::new()
            .feed(&mut raw, &mut BytesMut::new())
            .is_err()
    );
}
