//! A kept model request stored as its differences from the run's previous one.
//!
//! Every step sends the model the whole prompt, and a run keeps each exchange for its
//! cassette: stored whole, a run of a thousand steps under a 100,000-token budget kept
//! 290 MB of requests, and each step wrote its whole prompt again. Consecutive requests
//! share almost everything — the same system text and tools, and messages that are the
//! previous request's with a few added (or, after a compaction, a summary in front of the
//! previous request's most recent ones) — so a request is stored as the members it shares
//! with the previous one named, and each array member as runs copied from the previous
//! request's array of that name, with the elements it does not share given whole.
//!
//! Written here rather than with a JSON-patch crate: RFC 6902 patches name single
//! operations on paths, and finding a short one is the hard part those crates leave out;
//! what a prompt needs is the one shape above (copies of runs, found by a fingerprint index).
//!
//! Decoding is strict: a delta that does not follow from the request before it (a copy out
//! of range, a member the previous request lacks) is an error, never a guess.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use rustc_hash::FxHasher;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How many bytes of each end of a string a fingerprint reads: enough to tell messages apart
/// in practice, with equality checked in full before anything is copied.
const FINGERPRINT_BYTES: usize = 64;

/// How many earlier elements with an element's fingerprint are compared with it in full. A
/// tool's output is in the prompt, so a hostile tool can make many elements share one
/// (same length, same ends); comparing with at most this many keeps the work linear in the
/// prompt, at worst storing such an element whole.
const MAX_CANDIDATES: usize = 4;

/// A request as its differences from the previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delta {
    /// The digest of the request it was made from ([`Prints`]): applied to another, it is
    /// refused rather than read into a request that was never sent.
    base: u64,
    /// Members equal to the previous request's, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    same: Vec<String>,
    /// Array members built from the previous request's array of the same name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    arrays: BTreeMap<String, Vec<Piece>>,
    /// Members given whole.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    whole: Map<String, Value>,
}

/// A stretch of an array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Piece {
    /// `len` elements of the previous request's array, from index `from`.
    Copy { from: usize, len: usize },
    /// Elements given whole.
    New(Vec<Value>),
}

/// The fingerprints of the elements of a request's array members, by member: kept with the
/// request, so the next one's delta need not read it again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prints {
    arrays: HashMap<String, Vec<u64>>,
    /// A digest of the whole request: its members' names and fingerprints.
    digest: u64,
}

impl Prints {
    /// The fingerprints of `request`'s arrays, and its digest.
    pub fn of(request: &Value) -> Prints {
        let Value::Object(members) = request else {
            return Prints {
                arrays: HashMap::new(),
                digest: fingerprint(request),
            };
        };
        let arrays = members
            .iter()
            .filter_map(|(name, value)| match value {
                Value::Array(elements) => {
                    Some((name.clone(), elements.iter().map(fingerprint).collect()))
                }
                _ => None,
            })
            .collect();
        Prints::digested(members, arrays)
    }

    /// `arrays` (the fingerprints of `members`' arrays) with the digest of `members`.
    fn digested(members: &Map<String, Value>, arrays: HashMap<String, Vec<u64>>) -> Prints {
        let mut hasher = FxHasher::default();
        for (name, value) in members {
            name.hash(&mut hasher);
            match arrays.get(name) {
                Some(prints) => prints.hash(&mut hasher),
                None => fingerprint(value).hash(&mut hasher),
            }
        }
        Prints {
            arrays,
            digest: hasher.finish(),
        }
    }
}

/// `request` as a delta from `previous`, when both are objects and it saves anything.
#[cfg(test)]
pub fn diff(previous: &Value, request: &Value) -> Option<Delta> {
    diff_printed(previous, &Prints::of(previous), request).0
}

/// `request` as a delta from `previous` (whose fingerprints are `before`), when both are
/// objects and it saves anything; and `request`'s fingerprints, for the next.
pub fn diff_printed(previous: &Value, before: &Prints, request: &Value) -> (Option<Delta>, Prints) {
    let (Value::Object(previous), Value::Object(request)) = (previous, request) else {
        return (None, Prints::of(request));
    };
    let mut prints = HashMap::new();
    let mut delta = Delta {
        base: before.digest,
        same: Vec::new(),
        arrays: BTreeMap::new(),
        whole: Map::new(),
    };
    let mut shared = false;
    for (name, value) in request {
        let printed = before.arrays.get(name);
        match (previous.get(name), value) {
            (Some(earlier), _) if earlier == value => {
                delta.same.push(name.clone());
                shared = true;
                if let Value::Array(elements) = value {
                    let printed = match printed {
                        Some(printed) if printed.len() == elements.len() => printed.clone(),
                        _ => elements.iter().map(fingerprint).collect(),
                    };
                    prints.insert(name.clone(), printed);
                }
            }
            (Some(Value::Array(earlier)), Value::Array(elements)) => {
                let element_prints: Vec<u64> = elements.iter().map(fingerprint).collect();
                let fresh: Vec<u64>;
                let earlier_prints = match printed {
                    Some(printed) if printed.len() == earlier.len() => printed,
                    _ => {
                        fresh = earlier.iter().map(fingerprint).collect();
                        &fresh
                    }
                };
                let pieces = pieces(earlier, earlier_prints, elements, &element_prints);
                prints.insert(name.clone(), element_prints);
                if pieces
                    .iter()
                    .any(|piece| matches!(piece, Piece::Copy { .. }))
                {
                    delta.arrays.insert(name.clone(), pieces);
                    shared = true;
                } else {
                    delta.whole.insert(name.clone(), value.clone());
                }
            }
            (_, Value::Array(elements)) => {
                let element_prints = elements.iter().map(fingerprint).collect();
                prints.insert(name.clone(), element_prints);
                delta.whole.insert(name.clone(), value.clone());
            }
            _ => {
                delta.whole.insert(name.clone(), value.clone());
            }
        }
    }
    (shared.then_some(delta), Prints::digested(request, prints))
}

/// The request `delta` stands for, after `previous`.
pub fn apply(previous: &Value, delta: Delta) -> Result<Value, String> {
    if Prints::of(previous).digest != delta.base {
        return Err("it was kept against another request than the one before it".into());
    }
    let Value::Object(previous) = previous else {
        return Err("the request before it is not an object".into());
    };
    let mut request = Map::new();
    for name in delta.same {
        let value = previous
            .get(&name)
            .ok_or_else(|| format!("it keeps `{name}`, which the request before it lacks"))?;
        request.insert(name, value.clone());
    }
    for (name, pieces) in delta.arrays {
        let Some(Value::Array(before)) = previous.get(&name) else {
            return Err(format!(
                "it copies from the array `{name}`, which the request before it lacks"
            ));
        };
        let mut elements = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Copy { from, len } => {
                    let run = from
                        .checked_add(len)
                        .and_then(|end| before.get(from..end))
                        .ok_or_else(|| {
                            format!(
                                "it copies `{name}`[{from}..+{len}] of an array of {}",
                                before.len()
                            )
                        })?;
                    elements.extend_from_slice(run);
                }
                Piece::New(new) => elements.extend(new),
            }
        }
        request.insert(name, Value::Array(elements));
    }
    for (name, value) in delta.whole {
        request.insert(name, value);
    }
    Ok(Value::Object(request))
}

/// `elements` as runs of `before` and new elements: each element is looked up by its
/// fingerprint (`before_prints`, `element_prints`), a run goes on while the next elements
/// match in full.
fn pieces(
    before: &[Value],
    before_prints: &[u64],
    elements: &[Value],
    element_prints: &[u64],
) -> Vec<Piece> {
    let mut index: HashMap<u64, Vec<usize>> = HashMap::with_capacity(before.len());
    for (at, print) in before_prints.iter().enumerate() {
        index.entry(*print).or_default().push(at);
    }
    let mut pieces = Vec::new();
    let mut new = Vec::new();
    let mut at = 0;
    while at < elements.len() {
        let start = index.get(&element_prints[at]).and_then(|candidates| {
            candidates
                .iter()
                .take(MAX_CANDIDATES)
                .copied()
                .find(|&from| before[from] == elements[at])
        });
        let Some(from) = start else {
            new.push(elements[at].clone());
            at += 1;
            continue;
        };
        let len = before[from..]
            .iter()
            .zip(&elements[at..])
            .take_while(|(a, b)| a == b)
            .count();
        if !new.is_empty() {
            pieces.push(Piece::New(std::mem::take(&mut new)));
        }
        pieces.push(Piece::Copy { from, len });
        at += len;
    }
    if !new.is_empty() {
        pieces.push(Piece::New(new));
    }
    pieces
}

/// A hash of an element's shape and the ends of its strings: cheap whatever its size.
fn fingerprint(value: &Value) -> u64 {
    let mut hasher = FxHasher::default();
    feed(value, &mut hasher);
    hasher.finish()
}

fn feed(value: &Value, hasher: &mut impl Hasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => (2u8, n.to_string()).hash(hasher),
        Value::String(text) => {
            let bytes = text.as_bytes();
            let head = &bytes[..bytes.len().min(FINGERPRINT_BYTES)];
            let tail = &bytes[bytes.len().saturating_sub(FINGERPRINT_BYTES)..];
            (3u8, bytes.len(), head, tail).hash(hasher);
        }
        Value::Array(elements) => {
            (4u8, elements.len()).hash(hasher);
            for element in elements {
                feed(element, hasher);
            }
        }
        Value::Object(members) => {
            (5u8, members.len()).hash(hasher);
            for (name, member) in members {
                name.hash(hasher);
                feed(member, hasher);
            }
        }
    }
}

#[cfg(test)]
#[path = "request_delta_tests.rs"]
mod tests;
