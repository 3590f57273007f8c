use serde_json::json;

use super::*;
use crate::test_random::Xorshift;

fn message(role: &str, text: &str) -> Value {
    json!({ "role": role, "content": text })
}

/// `request` through its stored form (the delta as JSON and back) after `previous`.
fn round_trip(previous: &Value, request: &Value) -> Value {
    match diff(previous, request) {
        Some(delta) => {
            let text = serde_json::to_string(&delta).expect("encodes");
            let delta: Delta = serde_json::from_str(&text).expect("decodes");
            apply(previous, delta).expect("applies")
        }
        None => request.clone(),
    }
}

#[test]
fn a_request_that_adds_messages_copies_the_ones_before() {
    let tools = json!([{ "name": "read_file", "description": "x".repeat(500) }]);
    let previous = json!({
        "system": "be brief",
        "tools": tools,
        "messages": [message("user", "go"), message("assistant", "reading")],
    });
    let request = json!({
        "system": "be brief",
        "tools": tools,
        "messages": [
            message("user", "go"),
            message("assistant", "reading"),
            message("tool", "file contents"),
        ],
    });
    let delta = diff(&previous, &request).expect("a delta");
    assert_eq!(delta.same, vec!["system".to_owned(), "tools".to_owned()]);
    assert_eq!(
        delta.arrays["messages"],
        vec![
            Piece::Copy { from: 0, len: 2 },
            Piece::New(vec![message("tool", "file contents")]),
        ]
    );
    assert!(delta.whole.is_empty());
    assert_eq!(round_trip(&previous, &request), request);
}

#[test]
fn a_compacted_request_copies_the_recent_messages_it_kept() {
    let old: Vec<Value> = (0..20)
        .map(|i| message("tool", &format!("observation {i}")))
        .collect();
    let previous = json!({ "messages": old });
    let mut kept = vec![message("user", "goal"), message("user", "summary of 0..15")];
    kept.extend_from_slice(&old[15..]);
    kept.push(message("assistant", "next"));
    let request = json!({ "messages": kept });
    let delta = diff(&previous, &request).expect("a delta");
    assert_eq!(
        delta.arrays["messages"],
        vec![
            Piece::New(vec![
                message("user", "goal"),
                message("user", "summary of 0..15")
            ]),
            Piece::Copy { from: 15, len: 5 },
            Piece::New(vec![message("assistant", "next")]),
        ]
    );
    assert_eq!(round_trip(&previous, &request), request);
}

#[test]
fn nothing_shared_is_stored_whole() {
    assert_eq!(diff(&json!({ "a": 1 }), &json!({ "a": 2 })), None);
    assert_eq!(diff(&json!([1]), &json!([1])), None);
    assert_eq!(diff(&json!({ "m": [1, 2] }), &json!({ "m": [3, 4] })), None);
}

#[test]
fn a_delta_that_does_not_follow_from_the_request_before_is_refused() {
    let previous = json!({ "messages": [1, 2, 3] });
    let copy = |from: usize, len: usize| Delta {
        base: Prints::of(&previous).digest,
        same: Vec::new(),
        arrays: BTreeMap::from([("messages".to_owned(), vec![Piece::Copy { from, len }])]),
        whole: Map::new(),
    };
    assert!(apply(&previous, copy(0, 3)).is_ok());
    for (from, len) in [(2, 2), (4, 0), (usize::MAX, 2)] {
        let err = apply(&previous, copy(from, len)).expect_err("out of range");
        assert!(err.contains("copies `messages`"), "{err}");
    }
    let keeps = Delta {
        base: Prints::of(&previous).digest,
        same: vec!["tools".into()],
        arrays: BTreeMap::new(),
        whole: Map::new(),
    };
    let err = apply(&previous, keeps).expect_err("no tools before");
    assert!(err.contains("keeps `tools`"), "{err}");
    let err = apply(&json!("text"), copy(0, 1)).expect_err("not an object");
    assert!(err.contains("another request"), "{err}");
    let stored = r#"{"base":1,"arrays":{"messages":[{"copy":{"from":0,"len":1,"extra":1}}]}}"#;
    assert!(serde_json::from_str::<Delta>(stored).is_err());
}

/// Elements from a small alphabet, among them strings that share a fingerprint (the same
/// length and the same ends, a different middle) and repeated elements.
fn element(rng: &mut Xorshift) -> Value {
    let end = "e".repeat(FINGERPRINT_BYTES);
    match rng.below(6) {
        0 => json!(rng.below(3)),
        1 => message("tool", &format!("{end}{}{end}", rng.below(4))),
        2 => message("assistant", &"a".repeat(rng.below(3))),
        3 => json!([rng.below(2), { "k": rng.below(2) }]),
        4 => Value::Null,
        _ => message(
            "user",
            &format!("{end}{}{end}", ["x", "y", "z"][rng.below(3)]),
        ),
    }
}

fn request(rng: &mut Xorshift, from: Option<&Value>) -> Value {
    let mut members = Map::new();
    for name in ["system", "tools", "messages", "input", "model"] {
        if rng.below(5) == 0 {
            continue;
        }
        let earlier = from.and_then(|from| from.get(name));
        let value = match (earlier, rng.below(3)) {
            (Some(earlier), 0) => earlier.clone(),
            (Some(Value::Array(before)), 1) => {
                // The earlier array edited: runs of it kept, elements dropped and added.
                let mut elements = Vec::new();
                let mut at = rng.below(before.len().max(1));
                while elements.len() < 40 && rng.below(8) != 0 {
                    if rng.below(3) == 0 || at >= before.len() {
                        elements.push(element(rng));
                    } else {
                        elements.push(before[at].clone());
                        at += 1 + usize::from(rng.below(6) == 0);
                    }
                }
                Value::Array(elements)
            }
            _ if rng.below(2) == 0 => {
                Value::Array((0..rng.below(12)).map(|_| element(rng)).collect())
            }
            _ => element(rng),
        };
        members.insert(name.to_owned(), value);
    }
    Value::Object(members)
}

/// Random pairs of consecutive requests, each through its stored form, must come back as
/// they were: any break of `diff` and `apply` shows as a request that does not.
#[test]
fn every_request_comes_back_from_its_delta() {
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut deltas = 0;
    for _ in 0..20_000 {
        let previous = request(&mut rng, None);
        let next = request(&mut rng, Some(&previous));
        deltas += usize::from(diff(&previous, &next).is_some());
        assert_eq!(
            round_trip(&previous, &next),
            next,
            "previous: {previous}\nnext: {next}"
        );
    }
    assert!(deltas > 10_000, "only {deltas} of the pairs made a delta");
}

/// A run's requests one after another, each stored against the one before with the
/// fingerprints kept from its own delta (as `Recording` does): the kept fingerprints must
/// always be the request's.
#[test]
fn a_chain_of_requests_comes_back_with_the_fingerprints_kept_between_them() {
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
    for _ in 0..200 {
        let mut previous = request(&mut rng, None);
        let mut prints = Prints::of(&previous);
        for _ in 0..50 {
            let next = request(&mut rng, Some(&previous));
            let (delta, next_prints) = diff_printed(&previous, &prints, &next);
            let back = match delta {
                Some(delta) => apply(&previous, delta).expect("applies"),
                None => next.clone(),
            };
            assert_eq!(back, next, "previous: {previous}\nnext: {next}");
            assert_eq!(
                next_prints,
                Prints::of(&next),
                "the fingerprints kept are the request's"
            );
            (previous, prints) = (next, next_prints);
        }
    }
}

/// Elements that all share a fingerprint (each compared with at most `MAX_CANDIDATES` of the
/// earlier ones) still come back as they were.
#[test]
fn many_elements_sharing_a_fingerprint_still_come_back() {
    let end = "e".repeat(FINGERPRINT_BYTES);
    let same_ends =
        |i: usize| Value::String(format!("{end}{}{end}", char::from(b'a' + (i % 26) as u8)));
    let before: Vec<Value> = (0..2_000).map(same_ends).collect();
    let mut after: Vec<Value> = (0..2_000).map(|i| same_ends(i + 7)).collect();
    after.push(Value::Null);
    let previous = json!({ "messages": before });
    let request = json!({ "messages": after });
    assert_eq!(round_trip(&previous, &request), request);
}

/// A delta applied to a request other than the one it was made from — an older, longer one,
/// where every copy would fit — is refused, not read into a request never sent.
#[test]
fn a_delta_applied_to_another_request_than_its_own_is_refused() {
    let older: Vec<Value> = (0..30)
        .map(|i| message("tool", &format!("old {i}")))
        .collect();
    let before: Vec<Value> = (0..5)
        .map(|i| message("tool", &format!("new {i}")))
        .collect();
    let mut after = before.clone();
    after.push(message("assistant", "next"));
    let previous = json!({ "messages": before });
    let delta = diff(&previous, &json!({ "messages": after })).expect("a delta");
    let err = apply(&json!({ "messages": older }), delta.clone()).expect_err("another request");
    assert!(err.contains("another request"), "{err}");
    assert!(apply(&previous, delta).is_ok());
}
