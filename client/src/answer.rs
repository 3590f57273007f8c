//! What a person (or a script feeding standard input) answers to an approval request, and the
//! decision it becomes.
//!
//! One line answers one request: `y` / `yes`, `n` / `no` (optionally followed by the reason,
//! `n the tests must not be touched`), or `a` / `always` for the rest of the session — followed
//! by words (`a git push`) to grant every command starting with them, not only this call, where
//! the policy lets the question be granted. Anything else is asked again; the end of the input is an answer too, the one a caller decides
//! (a run denies, a console stops answering).

use crate::proto::{ApprovalDecision, ApprovalRequest, Decision};

/// The longest deny reason sent; the rest of a longer one is cut. The reason reaches the model
/// as an observation, where a few sentences are useful and a pasted file is not.
pub const MAX_REASON_CHARS: usize = 2_000;

/// One line of input read as an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run this call, this once.
    ApproveOnce,
    /// Run this call, and the same call again for the rest of the session.
    ApproveSession,
    /// Run this call, and every command starting with these words for the rest of the
    /// session.
    ApproveSessionPrefix(Vec<String>),
    /// Do not run it; `None` when no reason came with the answer, so a caller may ask for one.
    Deny { reason: Option<String> },
    /// The input ended: nobody is there to answer.
    EndOfInput,
    /// Not an answer; the caller asks again.
    Unrecognised,
}

/// Reads one line (without its line ending; `None` at the end of the input) as an answer.
/// Words are matched without regard to case; surrounding whitespace is ignored.
pub fn parse_answer(line: Option<&str>) -> Answer {
    let Some(line) = line else {
        return Answer::EndOfInput;
    };
    let line = line.trim();
    let (word, rest) = match line.split_once(|c: char| c.is_whitespace() || c == ':') {
        Some((word, rest)) => (word, rest.trim()),
        None => (line, ""),
    };
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" if rest.is_empty() => Answer::ApproveOnce,
        "a" | "always" if rest.is_empty() => Answer::ApproveSession,
        "a" | "always" => {
            Answer::ApproveSessionPrefix(rest.split_whitespace().map(str::to_owned).collect())
        }
        "n" | "no" => Answer::Deny {
            reason: (!rest.is_empty()).then(|| reason_text(rest)),
        },
        _ => Answer::Unrecognised,
    }
}

/// A reason typed on a line of its own, after a bare `n`; `None` when the line is empty or the
/// input ended.
pub fn parse_reason(line: Option<&str>) -> Option<String> {
    let reason = line?.trim();
    (!reason.is_empty()).then(|| reason_text(reason))
}

fn reason_text(reason: &str) -> String {
    reason.chars().take(MAX_REASON_CHARS).collect()
}

/// The decision answering `request`, bound to it by its digest so that the daemon refuses it
/// for any other call.
pub fn decision_for(
    request: &ApprovalRequest,
    decision: Decision,
    reason: &str,
) -> ApprovalDecision {
    ApprovalDecision {
        approval_id: request.approval_id.clone(),
        decision: decision as i32,
        reason: reason.to_owned(),
        digest: request.digest.clone(),
        grant_prefix: Vec::new(),
    }
}

/// Approval of `request` for the session that grants every command starting with `prefix`
/// (the daemon checks it starts a command the request asks about).
pub fn grant_for(request: &ApprovalRequest, prefix: Vec<String>) -> ApprovalDecision {
    ApprovalDecision {
        grant_prefix: prefix,
        ..decision_for(request, Decision::ApproveSession, "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_words_in_any_case() {
        for line in ["y", "yes", "Y", " YES \r"] {
            assert_eq!(parse_answer(Some(line)), Answer::ApproveOnce, "{line:?}");
        }
        for line in ["a", "always", "Always"] {
            assert_eq!(parse_answer(Some(line)), Answer::ApproveSession, "{line:?}");
        }
        assert_eq!(
            parse_answer(Some("a git  push")),
            Answer::ApproveSessionPrefix(vec!["git".into(), "push".into()])
        );
        for line in ["n", "no", "NO", "  n  "] {
            assert_eq!(
                parse_answer(Some(line)),
                Answer::Deny { reason: None },
                "{line:?}"
            );
        }
    }

    #[test]
    fn a_denial_may_carry_its_reason_on_the_same_line() {
        assert_eq!(
            parse_answer(Some("n do not touch the tests")),
            Answer::Deny {
                reason: Some("do not touch the tests".to_owned())
            }
        );
        assert_eq!(
            parse_answer(Some("no: wrong file ")),
            Answer::Deny {
                reason: Some("wrong file".to_owned())
            }
        );
    }

    #[test]
    fn anything_else_is_asked_again() {
        for line in ["", "  ", "maybe", "yy", "y please", "ok", "nope"] {
            assert_eq!(parse_answer(Some(line)), Answer::Unrecognised, "{line:?}");
        }
    }

    #[test]
    fn the_end_of_input_is_its_own_answer() {
        assert_eq!(parse_answer(None), Answer::EndOfInput);
    }

    #[test]
    fn a_reason_line_may_be_empty_or_missing() {
        assert_eq!(
            parse_reason(Some("  too risky \n")),
            Some("too risky".to_owned())
        );
        assert_eq!(parse_reason(Some("   ")), None);
        assert_eq!(parse_reason(None), None);
    }

    #[test]
    fn long_reasons_are_cut() {
        let long = "x".repeat(MAX_REASON_CHARS + 10);
        let Some(reason) = parse_reason(Some(&long)) else {
            panic!("a long reason was dropped");
        };
        assert_eq!(reason.chars().count(), MAX_REASON_CHARS);
        let Answer::Deny {
            reason: Some(inline),
        } = parse_answer(Some(&format!("n {long}")))
        else {
            panic!("a long inline reason was not a denial with a reason");
        };
        assert_eq!(inline.chars().count(), MAX_REASON_CHARS);
    }

    #[test]
    fn a_decision_carries_the_request_digest() {
        let request = ApprovalRequest {
            approval_id: "apr_1".to_owned(),
            digest: "ab".repeat(32),
            ..ApprovalRequest::default()
        };
        let decision = decision_for(&request, Decision::Deny, "no");
        assert_eq!(
            decision,
            ApprovalDecision {
                approval_id: "apr_1".to_owned(),
                decision: Decision::Deny as i32,
                reason: "no".to_owned(),
                digest: "ab".repeat(32),
                grant_prefix: Vec::new(),
            }
        );
    }
}
