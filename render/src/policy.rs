//! The policy's answers for a person: a decision with each part of the call and the rule (or
//! level) behind it, as `airlock policy check` prints it; and the rules in force, layer by
//! layer, with the grants people made (`airlock policy rules`, `airlock approvals rules`).

use std::borrow::Cow;

use super::table::aligned_table;
use super::text::fold_whitespace;
use super::units::format_utc;
use crate::proto::{PolicyDecision, PolicyLayer, PolicyRule, PolicyVerdict};

pub fn policy_decision_name(decision: i32) -> &'static str {
    match PolicyDecision::try_from(decision) {
        Ok(PolicyDecision::Allow) => "allow",
        Ok(PolicyDecision::Ask) => "ask",
        Ok(PolicyDecision::Deny) => "deny",
        Ok(PolicyDecision::Unspecified) | Err(_) => "unknown",
    }
}

pub fn policy_layer_name(layer: i32) -> &'static str {
    match PolicyLayer::try_from(layer) {
        Ok(PolicyLayer::Operator) => "operator",
        Ok(PolicyLayer::Session) => "session",
        Ok(PolicyLayer::Run) => "run",
        Ok(PolicyLayer::Grant) => "grant",
        Ok(PolicyLayer::Unspecified) | Err(_) => "unknown",
    }
}

/// Where a rule was written: `team.toml:12 (operator)`, `session ses_… (grant)`.
pub fn rule_origin(rule: &PolicyRule) -> String {
    let layer = policy_layer_name(rule.layer);
    if rule.line == 0 {
        format!("{} ({layer})", rule.source)
    } else {
        format!("{}:{} ({layer})", rule.source, rule.line)
    }
}

/// A decision, as `airlock policy check` prints it:
///
/// ```text
/// deny
///   allow  `cargo test`  rule `tests run freely` (operator layer, team.toml:2)
///   deny   `curl x`      rule `no downloads` (operator layer, team.toml:40)
/// decided by rule `no downloads`: team.toml:40 (operator)
/// ```
pub fn verdict_lines(verdict: &PolicyVerdict) -> Vec<String> {
    let mut lines = vec![policy_decision_name(verdict.decision).to_owned()];
    let width = verdict
        .parts
        .iter()
        .map(|part| fold_whitespace(&part.subject).chars().count())
        .max()
        .unwrap_or(0);
    for part in &verdict.parts {
        let subject = fold_whitespace(&part.subject);
        let pad = width.saturating_sub(subject.chars().count());
        lines.push(format!(
            "  {:<5}  {subject}{}  {}",
            policy_decision_name(part.decision),
            " ".repeat(pad),
            fold_whitespace(&part.why)
        ));
    }
    match &verdict.rule {
        Some(rule) => lines.push(format!(
            "decided by rule `{}`: {}",
            rule.name,
            rule_origin(rule)
        )),
        None => lines.push("decided by the session's level: no rule spoke".to_owned()),
    }
    if verdict.decision == PolicyDecision::Ask as i32 {
        lines.push(if verdict.grantable {
            "a person may grant it for the session".to_owned()
        } else {
            "a person may only approve it once: a rule always asks".to_owned()
        });
    }
    lines
}

fn rule_json(rule: &PolicyRule) -> serde_json::Value {
    serde_json::json!({
        "name": rule.name,
        "decision": policy_decision_name(rule.decision),
        "grantable": rule.grantable,
        "layer": policy_layer_name(rule.layer),
        "source": rule.source,
        "line": rule.line,
        "grant_id": rule.grant_id,
        "session_id": rule.session_id,
        "covers": rule.covers,
        "created_at_ms": rule.created_at_ms,
    })
}

/// A decision as one JSON object (one line), for scripts.
pub fn verdict_json(verdict: &PolicyVerdict) -> String {
    let parts: Vec<serde_json::Value> = verdict
        .parts
        .iter()
        .map(|part| {
            serde_json::json!({
                "subject": part.subject,
                "decision": policy_decision_name(part.decision),
                "rule": part.rule.as_ref().map(rule_json),
                "why": part.why,
                "words": part.words,
            })
        })
        .collect();
    serde_json::json!({
        "decision": policy_decision_name(verdict.decision),
        "reason": verdict.reason,
        "grantable": verdict.grantable,
        "rule": verdict.rule.as_ref().map(rule_json),
        "parts": parts,
    })
    .to_string()
        + "\n"
}

/// Rules as a JSON array (one line).
pub fn rules_json(rules: &[&PolicyRule]) -> String {
    serde_json::Value::Array(rules.iter().map(|rule| rule_json(rule)).collect()).to_string() + "\n"
}

const RULES_HEADER: [&str; 4] = ["LAYER", "DECISION", "RULE", "WHERE"];

/// The rules in force, one per line in the order given (operator, session, grants), the
/// last column cut to `width`.
pub fn rules_table(rules: &[PolicyRule], width: usize) -> String {
    let rows = rules
        .iter()
        .map(|rule| {
            let decision = match (PolicyDecision::try_from(rule.decision), rule.grantable) {
                (Ok(PolicyDecision::Ask), true) => "ask (grantable)",
                _ => policy_decision_name(rule.decision),
            };
            let place = if rule.layer == PolicyLayer::Grant as i32 {
                format!("{} — {}", rule.session_id, fold_whitespace(&rule.covers))
            } else {
                rule_origin(rule)
            };
            [
                Cow::Borrowed(policy_layer_name(rule.layer)),
                Cow::Borrowed(decision),
                Cow::Owned(rule.name.clone()),
                Cow::Owned(place),
            ]
        })
        .collect();
    aligned_table(RULES_HEADER, rows, width)
}

const GRANTS_HEADER: [&str; 3] = ["GRANT", "MADE", "COVERS"];

/// A session's grants: the id to revoke each by (its first 16 characters), when it was made,
/// and what it covers.
pub fn grants_table(grants: &[&PolicyRule], width: usize) -> String {
    let rows = grants
        .iter()
        .map(|grant| {
            [
                Cow::Owned(
                    grant
                        .grant_id
                        .get(..16)
                        .unwrap_or(&grant.grant_id)
                        .to_owned(),
                ),
                Cow::Owned(if grant.created_at_ms > 0 {
                    format_utc(grant.created_at_ms)
                } else {
                    "-".to_owned()
                }),
                Cow::Owned(fold_whitespace(&grant.covers)),
            ]
        })
        .collect();
    aligned_table(GRANTS_HEADER, rows, width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::PolicyPart;

    #[test]
    fn a_verdict_names_each_part_and_the_rule_that_decided() {
        let rule = PolicyRule {
            name: "no downloads".into(),
            decision: PolicyDecision::Deny as i32,
            layer: PolicyLayer::Operator as i32,
            source: "team.toml".into(),
            line: 40,
            ..Default::default()
        };
        let verdict = PolicyVerdict {
            decision: PolicyDecision::Deny as i32,
            parts: vec![
                PolicyPart {
                    subject: "`cargo test`".into(),
                    decision: PolicyDecision::Allow as i32,
                    why: "rule `tests` (operator layer, team.toml:2)".into(),
                    ..Default::default()
                },
                PolicyPart {
                    subject: "`curl x`".into(),
                    decision: PolicyDecision::Deny as i32,
                    why: "rule `no downloads` (operator layer, team.toml:40)".into(),
                    rule: Some(rule.clone()),
                    ..Default::default()
                },
            ],
            rule: Some(rule),
            ..Default::default()
        };
        assert_eq!(
            verdict_lines(&verdict),
            [
                "deny",
                "  allow  `cargo test`  rule `tests` (operator layer, team.toml:2)",
                "  deny   `curl x`      rule `no downloads` (operator layer, team.toml:40)",
                "decided by rule `no downloads`: team.toml:40 (operator)",
            ]
        );
    }
}
