//! The MCP edge searched for a panic or a hang: the fuzz target's committed corpus replayed
//! (what fuzzing found stays found), then random inputs made by cutting, splicing and
//! flipping the corpus's bytes — methods, targets with broken escapes and multi-byte
//! characters, header lines, bodies.

#![allow(clippy::indexing_slicing)] // test code: an index out of range is a failed test

use std::path::Path;

use super::probe::Probe;

fn corpus() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/mcp_edge");
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .expect("the mcp_edge corpus")
        .map(|entry| std::fs::read(entry.expect("an entry").path()).expect("an input"))
        .collect();
    inputs.sort();
    inputs
}

#[test]
fn the_fuzz_corpus_gets_answers() {
    let probe = Probe::new().expect("a probe");
    let inputs = corpus();
    assert!(inputs.len() >= 8, "the corpus has {} inputs", inputs.len());
    let mut answered = 0;
    for input in &inputs {
        if let Some(status) = probe.send(input) {
            assert!((200..600).contains(&status), "{status}");
            answered += 1;
        }
    }
    assert!(
        answered >= 8,
        "{answered} of {} were requests",
        inputs.len()
    );
}

#[test]
fn the_reviewers_input_is_answered_not_a_panic() {
    let probe = Probe::new().expect("a probe");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let input = format!(
        "POST\0/mcp?workspace=%a\u{20ac}\0content-type: application/json\naccept: application/json, text/event-stream\0{init}"
    );
    assert_eq!(probe.send(input.as_bytes()), Some(200));
    let without_token = format!("-{input}");
    assert_eq!(probe.send(without_token.as_bytes()), Some(401));
    // Where the query is read — a listing and a call, each of which once sliced it inside
    // the multi-byte character — the workspace is refused in words.
    for (method, params) in [
        ("tools/list", "{}"),
        ("tools/call", r#"{"name":"x","arguments":{}}"#),
    ] {
        let request = format!(
            "POST\0/mcp?workspace=%a\u{20ac}\0content-type: application/json\n\
             accept: application/json, text/event-stream\nmcp-protocol-version: 2026-07-28\n\
             mcp-method: {method}\0\
             {{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"{method}\",\"params\":{params}}}"
        );
        let answer = probe.send(request.as_bytes());
        assert!(matches!(answer, Some(200 | 400)), "{method}: {answer:?}");
    }
}

/// Pieces a hostile client splices in.
const PIECES: &[&[u8]] = &[
    b"%",
    b"%a",
    b"%E2%82",
    "\u{20ac}".as_bytes(),
    b"\xff",
    b"&workspace=",
    b"?",
    b"\n",
    b"mcp-session-id: ",
    b"\0",
    b"{",
    b"}",
    b"[",
    b"\"",
    b"tools/call",
    b"initialize",
    b"mcp-protocol-version: 2026-07-28",
    b"last-event-id: 0",
    b"-",
];

#[test]
fn random_inputs_get_answers() {
    let probe = Probe::new().expect("a probe");
    let inputs = corpus();
    let seed = fastrand::u64(..);
    let mut rng = fastrand::Rng::with_seed(seed);
    for _ in 0..400 {
        let mut input = inputs[rng.usize(..inputs.len())].clone();
        for _ in 0..rng.usize(1..6) {
            let at = rng.usize(..=input.len());
            match rng.u8(..4) {
                0 => {
                    let piece = PIECES[rng.usize(..PIECES.len())];
                    input.splice(at..at, piece.iter().copied());
                }
                1 if at < input.len() => {
                    input[at] = rng.u8(..);
                }
                2 => input.truncate(at),
                _ => {
                    let other = &inputs[rng.usize(..inputs.len())];
                    let from = rng.usize(..=other.len());
                    input.splice(at..at, other[from..].iter().copied());
                }
            }
        }
        // A panic names the input through the probe; the seed makes it again.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| probe.send(&input)))
            .unwrap_or_else(|_| {
                panic!(
                    "seed {seed}: the edge panicked on {:?}",
                    String::from_utf8_lossy(&input)
                )
            });
    }
}
