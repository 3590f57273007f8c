//! The approval bridge of airlock's two MCP edges, written once: the daemon's endpoint
//! (`airlockd --mcp-listen`, `daemon/src/api/mcp`) and the stdio gateway an IDE starts
//! (`airlock mcp`, `cli/src/mcp.rs`) describe a tool and put an approval to the person at the
//! MCP client in the same words and with the same rules.
//!
//! - [`annotations`]: what MCP's tool annotations say about a tool, derived from what airlock
//!   decided about it (its manifest's risk, its profile's network), never from what its author
//!   claimed.
//! - [`can_ask`] and [`ask`]: whether the client offers elicitation, and the question put to
//!   its user — the exact call and its preview, with no fields to fill, so the answer is the
//!   action alone: *accept* approves this call once, anything else denies it. The decision is
//!   bound to the request's digest, so it can approve nothing but the call it was asked about.

use airlock_proto::v1::{ApprovalDecision, ApprovalRequest, Decision, Risk};
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, ToolAnnotations};
use rmcp::service::{Peer, RequestContext, RoleServer};

/// The reason a decision gives when the person at the client declined.
pub const DECLINED: &str = "declined at the MCP client";

/// A tool's MCP annotations: read-only for `read_only` tools, destructive for those that
/// may change or install anything (`destructive`, `exec`, `install`), open-world for those
/// that reach the network (by risk, or because their profile lets them).
pub fn annotations(risk: Risk, idempotent: bool, open_world: bool) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(risk == Risk::ReadOnly)
        .destructive(matches!(
            risk,
            Risk::Destructive | Risk::Exec | Risk::Install
        ))
        .idempotent(idempotent)
        .open_world(open_world || risk == Risk::Network)
}

/// Whether the MCP client of `context` offers elicitation to a request from the server.
pub fn can_ask(context: &RequestContext<RoleServer>) -> bool {
    context
        .peer
        .peer_info()
        .is_some_and(|info| info.capabilities.elicitation.is_some())
}

/// The schema of a question with no fields: the answer is the action alone.
pub fn no_fields() -> ElicitationSchema {
    ElicitationSchema::new(std::collections::BTreeMap::new())
}

/// The elicitation that puts `question` to the person at the client.
pub fn question(question: &ApprovalRequest) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.as_question(),
        requested_schema: no_fields(),
    }
}

/// Puts `question` to the person at the client of `peer`; their answer as a decision bound to
/// the request (its id and digest). A client that cannot be asked, or fails to answer, denies.
pub async fn ask(peer: &Peer<RoleServer>, question: &ApprovalRequest) -> ApprovalDecision {
    let answer = peer.create_elicitation(self::question(question)).await;
    decision(
        question,
        answer
            .map(|answer| answer.action)
            .map_err(|err| err.to_string()),
    )
}

/// The decision an answer to `question` makes: accept approves once; a decline, a cancel or
/// a failure to ask denies, saying which.
pub fn decision(
    question: &ApprovalRequest,
    answer: Result<ElicitationAction, String>,
) -> ApprovalDecision {
    let (decision, reason) = match answer {
        Ok(ElicitationAction::Accept) => (Decision::ApproveOnce, String::new()),
        Ok(_) => (Decision::Deny, DECLINED.to_owned()),
        Err(err) => (
            Decision::Deny,
            format!("the MCP client could not be asked: {err}"),
        ),
    };
    ApprovalDecision {
        approval_id: question.approval_id.clone(),
        decision: decision as i32,
        reason,
        digest: question.digest.clone(),
        // An MCP client's accept answers the call; it grants nothing wider.
        grant_prefix: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            approval_id: "apr_1".to_owned(),
            digest: "d1".to_owned(),
            tool: "write_file".to_owned(),
            ..ApprovalRequest::default()
        }
    }

    #[test]
    fn only_an_accept_approves_and_every_decision_is_bound_to_the_request() {
        let question = request();
        let approved = decision(&question, Ok(ElicitationAction::Accept));
        assert_eq!(approved.decision, Decision::ApproveOnce as i32);
        assert_eq!(
            (approved.approval_id.as_str(), approved.digest.as_str()),
            ("apr_1", "d1")
        );
        for answer in [
            Ok(ElicitationAction::Decline),
            Ok(ElicitationAction::Cancel),
            Err("gone".to_owned()),
        ] {
            let denied = decision(&question, answer);
            assert_eq!(denied.decision, Decision::Deny as i32);
            assert_eq!(denied.digest, "d1");
            assert!(!denied.reason.is_empty());
        }
    }

    #[test]
    fn annotations_follow_the_risk_not_the_author() -> Result<(), serde_json::Error> {
        let read = serde_json::to_value(annotations(Risk::ReadOnly, true, false))?;
        assert_eq!(read["readOnlyHint"], true);
        assert_eq!(read["destructiveHint"], false);
        assert_eq!(read["openWorldHint"], false);
        for risk in [Risk::Destructive, Risk::Exec, Risk::Install] {
            let hints = serde_json::to_value(annotations(risk, false, false))?;
            assert_eq!(hints["destructiveHint"], true, "{risk:?}");
            assert_eq!(hints["readOnlyHint"], false, "{risk:?}");
        }
        let network = serde_json::to_value(annotations(Risk::Network, false, false))?;
        assert_eq!(network["openWorldHint"], true);
        let allowed = serde_json::to_value(annotations(Risk::Write, false, true))?;
        assert_eq!(allowed["openWorldHint"], true);
        Ok(())
    }

    #[test]
    fn the_question_has_no_fields_and_is_the_exact_call() {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = question(&request())
        else {
            panic!("a form question");
        };
        assert_eq!(message, request().as_question());
        assert!(requested_schema.properties.is_empty());
    }
}
