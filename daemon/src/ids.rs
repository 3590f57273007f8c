//! Identifiers, one type per kind. Each kind has a prefix so an id in a log says what it
//! names; the rest is the time it was made, then 80 random bits, so ids cannot be guessed or
//! enumerated, and a store takes a new one's rows at the end of its indexes (see
//! [`new_id`]). Nothing may read a time or an order out of an id: ids made before this are
//! random throughout, and a clock may step back or differ between a fleet's daemons.
//!
//! An id a client sends is checked for its shape when it is parsed ([`RunId::parse`]), so a
//! typo is told apart from an id that names nothing; an id the daemon made, or read back from
//! its own store, is taken as it is ([`RunId::from_stored`]).

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `prefix`, `_` and 32 hex digits: the milliseconds since the epoch (12 digits, which last
/// until the year 10889), then 80 random bits (20 digits: a UUID's bits that are random in
/// every version 4 one).
///
/// Time first, so that an id made later sorts after, as a rule: a run's rows are keyed by its
/// id in every table of its log (its events, spans, checkpoint entries, effects, exchanges,
/// its own row), and a B-tree takes a key past its last one by appending to its right edge,
/// where a key at a random place lands on a page that splits into two half-empty ones as the
/// run writes. With random ids, 10,000 runs took 9–11 s to start and wait on approvals, and
/// another run's step meanwhile was 1.15× its step on an idle daemon; in time order, 6 s and
/// 1.02× (BENCHMARKS.md, finding 20). Ids made before this are kept as they are: both shapes
/// are the same to [`check`].
fn new_id(prefix: &str) -> String {
    const TIME_BITS: u32 = 48;
    let random = Uuid::new_v4();
    let bytes = random.as_bytes();
    let ms = u64::try_from(now_ms()).unwrap_or(0) & ((1 << TIME_BITS) - 1);
    format!(
        "{prefix}_{ms:012x}{}{}",
        hex::encode(&bytes[..4]),
        hex::encode(&bytes[10..])
    )
}

/// Checks that `text` is `prefix`, `_`, 32 lowercase hex digits; `noun` names the kind in
/// the message.
fn check(prefix: &str, noun: &str, text: &str) -> Result<(), String> {
    let shape = format!("`{prefix}_` and 32 hex digits");
    if text.is_empty() {
        return Err(format!(
            "required: the id of {} {noun} ({shape})",
            article(noun)
        ));
    }
    let valid = text
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|hex| {
            hex.len() == 32
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
    if valid {
        Ok(())
    } else {
        let shown: String = text.chars().take(80).collect();
        Err(format!(
            "`{shown}` is not {} {noun} id ({shape})",
            article(noun)
        ))
    }
}

/// "a" or "an" before `noun` (every noun an id is named by starts with its sound's letter).
fn article(noun: &str) -> &'static str {
    if noun.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $noun:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A new, unguessable id.
            #[allow(clippy::new_without_default, reason = "a default id would be a new random one; say so at the call")]
            pub fn new() -> $name {
                $name(new_id($prefix))
            }

            /// An id a client sent, checked for its shape.
            pub fn parse(text: &str) -> Result<$name, String> {
                check($prefix, $noun, text)?;
                Ok($name(text.to_owned()))
            }

            /// An id the daemon made earlier and kept (in its store, a checkpoint, a log).
            pub fn from_stored(text: impl Into<String>) -> $name {
                $name(text.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }

            /// What an id of this kind names, for messages.
            pub const NOUN: &'static str = $noun;
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

id_type!(
    /// One run: from a request to its final answer, failure or cancel.
    RunId, "run", "run"
);
id_type!(
    /// A session: the runs that share a workspace, history and approvals.
    SessionId, "ses", "session"
);
id_type!(
    /// One user-to-system exchange inside a session.
    TurnId, "trn", "turn"
);
id_type!(
    /// One advance of a run's loop.
    StepId, "stp", "step"
);
id_type!(
    /// One tool call a model proposed, as airlock names it.
    CallId, "cal", "call"
);
id_type!(
    /// A run's recoverable snapshot.
    CheckpointId, "ckp", "checkpoint"
);
id_type!(
    /// A question to an approver.
    ApprovalId, "apr", "approval"
);
id_type!(
    /// One execution of a tool (a direct call, or a run's).
    ExecutionId, "exe", "execution"
);
id_type!(
    /// One daemon of a fleet, for the life of its process: the owner of the runs it
    /// executes, by a lease in the shared store.
    NodeId, "nod", "node"
);

/// A run's trace: 32 hex digits without a prefix, the form OpenTelemetry gives trace ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceId(String);

impl TraceId {
    #[allow(
        clippy::new_without_default,
        reason = "a default id would be a new random one; say so at the call"
    )]
    pub fn new() -> TraceId {
        TraceId(Uuid::new_v4().simple().to_string())
    }

    pub fn from_stored(text: impl Into<String>) -> TraceId {
        TraceId(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_distinct() {
        let a = ExecutionId::new();
        assert!(a.as_str().starts_with("exe_"));
        assert_eq!(a.as_str().len(), 4 + 32);
        assert_ne!(a, ExecutionId::new());
        assert_eq!(TraceId::new().as_str().len(), 32);
    }

    #[test]
    fn an_id_made_later_sorts_after_and_keeps_its_random_part() {
        let first = RunId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later: Vec<RunId> = (0..64).map(|_| RunId::new()).collect();
        for id in &later {
            assert!(first < *id, "{first} then {id}");
            RunId::parse(id.as_str()).expect("the shape a client's id is checked for");
        }
        // Made within a millisecond or two, the ids share their time and differ in the rest.
        let random: std::collections::HashSet<&str> =
            later.iter().map(|id| &id.as_str()[4 + 12..]).collect();
        assert_eq!(random.len(), later.len());
        let time = |id: &RunId| u64::from_str_radix(&id.as_str()[4..4 + 12], 16).expect("hex");
        let now = u64::try_from(now_ms()).expect("after 1970");
        assert!(
            now.abs_diff(time(&later[0])) < 60_000,
            "{} is the time it was made",
            later[0]
        );
    }

    #[test]
    fn ids_the_daemon_makes_parse_and_others_do_not() {
        assert!(RunId::parse(RunId::new().as_str()).is_ok());
        assert!(SessionId::parse(SessionId::new().as_str()).is_ok());
        assert!(ExecutionId::parse(ExecutionId::new().as_str()).is_ok());
        assert!(ApprovalId::parse(ApprovalId::new().as_str()).is_ok());
        assert!(RunId::parse("").is_err_and(|e| e.starts_with("required")));
        for bad in [
            "run_nope",
            SessionId::new().as_str(),
            "run_0000000000000000000000000000000G",
            "RUN_00000000000000000000000000000000",
            "run_000000000000000000000000000000000",
        ] {
            assert!(RunId::parse(bad).is_err(), "{bad}");
        }
    }
}
