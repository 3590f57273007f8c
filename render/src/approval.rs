//! Approval requests for the person who answers them: what the call is, why it is asked, what
//! it would do (the preview), and the questions asked on the terminal; and the updates an
//! approver console receives.

use super::names::{approval_state_name, decision_name, risk_name};
use super::pretty::pretty_json;
use super::styled::{StyledLine, Tone};
use super::table::SHORT_DIGEST_LEN;
use super::text::short_arguments;
use super::units::format_remaining;
use crate::proto::{
    ApprovalRequest, ApprovalResolved, ApprovalState, Decision, PolicyDecision, Preview,
};

/// The question asked for a request of the run being followed.
pub const RUN_PROMPT: &str = "approve? [y]es / [n]o / [a]lways for this session: ";

/// Asked after a bare `n` on a terminal.
pub const REASON_PROMPT: &str = "reason for the model (optional, Enter for none): ";

/// Shown when a line is not an answer, before the question is asked again.
pub const ANSWER_HINT: &str = "answer y (yes), n (no; a reason may follow: n REASON) or a (always for this session; \
     a WORDS grants every command starting with them, where the policy lets it)";

/// Indentation of a request's details under its first line, and of the preview under those.
const DETAIL_INDENT: &str = "  ";
const PREVIEW_INDENT: &str = "    ";

/// The question asked by an approver console, which answers for every run: it names the
/// request, as several may wait.
pub fn console_prompt(request: &ApprovalRequest) -> String {
    format!(
        "approve {} ({} in run {})? [y]es / [n]o / [a]lways for this session: ",
        request.approval_id, request.tool, request.run_id
    )
}

/// A request as shown before its question:
///
/// ```text
/// ? approval needed: write_file (risk write, profile workspace)
///   run run_…, step step_…, call call_…        (with `show_run`: a console serves every run)
///   why: write calls are asked under the risky policy
///   arguments: {"path":"src/lib.rs","content":"…"}
///   preview (diff):
///     --- a/src/lib.rs
///     +++ b/src/lib.rs
///     …
///   approval apr_…, digest 0123456789ab, answer within 5m
/// ```
///
/// The time left is counted from `now_ms`: the event's own time when following a run, so that
/// the transcript is the same however late it is read.
pub fn approval_lines(request: &ApprovalRequest, now_ms: i64, show_run: bool) -> Vec<StyledLine> {
    let mut lines = vec![StyledLine::plain(format!(
        "? approval needed: {} (risk {}, profile {})",
        request.tool,
        risk_name(request.risk),
        or_none(&request.profile)
    ))];
    let mut detail = |text: String| lines.push(StyledLine::plain(format!("{DETAIL_INDENT}{text}")));
    if show_run {
        detail(format!(
            "run {}, step {}, call {}",
            or_none(&request.run_id),
            or_none(&request.step_id),
            or_none(&request.call_id)
        ));
    }
    if !request.reason.is_empty() {
        detail(format!("why: {}", one_line(&request.reason)));
    }
    if let Some(policy) = &request.policy {
        for part in policy
            .parts
            .iter()
            .filter(|part| part.decision == PolicyDecision::Ask as i32)
        {
            detail(format!(
                "asks: {} ({})",
                one_line(&part.subject),
                one_line(&part.why)
            ));
        }
        detail(if policy.grantable {
            "grantable: `a` grants this call for the session, `a WORDS` every command starting with WORDS"
                .to_owned()
        } else {
            "not grantable: a rule of the operator's always asks; approve once or deny".to_owned()
        });
    }
    match &request.preview {
        Some(preview) if preview.error.is_empty() => {
            // An arguments preview already is the arguments, in full.
            if preview.kind != "arguments" {
                detail(format!(
                    "arguments: {}",
                    short_arguments(&request.arguments_json)
                ));
            }
            lines.extend(preview_lines(preview));
        }
        Some(Preview { error, .. }) => {
            detail(format!("preview unavailable: {}", one_line(error)));
            lines.extend(full_arguments(&request.arguments_json));
        }
        None => lines.extend(full_arguments(&request.arguments_json)),
    }
    let digest = request
        .digest
        .get(..SHORT_DIGEST_LEN)
        .unwrap_or(&request.digest);
    lines.push(StyledLine::plain(format!(
        "{DETAIL_INDENT}approval {}, digest {}, {}",
        or_none(&request.approval_id),
        or_none(digest),
        deadline_text(request.deadline_ms, now_ms)
    )));
    lines
}

/// What a call would do: a diff coloured as `git diff` colours it, hosts, or the arguments
/// pretty-printed, each line indented under the request. Shown in full, as the approver
/// decides on all of it; the daemon bounds its size and says when it cut it.
pub fn preview_lines(preview: &Preview) -> Vec<StyledLine> {
    let kind = if preview.kind.is_empty() {
        "preview"
    } else {
        preview.kind.as_str()
    };
    let mut lines = vec![StyledLine::plain(format!(
        "{DETAIL_INDENT}preview ({kind}):"
    ))];
    let is_diff = preview.kind == "diff";
    let text = preview.text.trim_end();
    if text.is_empty() {
        lines.push(StyledLine::plain(format!("{PREVIEW_INDENT}(empty)")));
    }
    for line in text.lines() {
        let tone = if is_diff {
            diff_tone(line)
        } else {
            Tone::Plain
        };
        lines.push(StyledLine::new(tone, format!("{PREVIEW_INDENT}{line}")));
    }
    if preview.truncated {
        lines.push(StyledLine::plain(format!(
            "{PREVIEW_INDENT}… (the preview is cut here)"
        )));
    }
    lines
}

/// The tone of one line of a unified diff.
pub fn diff_tone(line: &str) -> Tone {
    if line.starts_with("+++") || line.starts_with("---") {
        Tone::FileHeader
    } else if line.starts_with("@@") {
        Tone::Hunk
    } else if line.starts_with('+') {
        Tone::Added
    } else if line.starts_with('-') {
        Tone::Removed
    } else {
        Tone::Plain
    }
}

/// How an approval ended, as a run's transcript shows it:
/// `✓ approved once (run client)`, `✗ denied (deadline): no answer by the deadline`,
/// `✓ approved once connecting to api.example.com:443 (approver)`.
pub fn resolution_line(resolved: &ApprovalResolved) -> String {
    let what = match Decision::try_from(resolved.decision) {
        Ok(Decision::ApproveOnce) => "✓ approved once".to_owned(),
        Ok(Decision::ApproveSession) => "✓ approved for the session".to_owned(),
        Ok(Decision::Deny) => "✗ denied".to_owned(),
        Ok(Decision::Unspecified) | Err(_) => {
            format!("? decided {}", decision_name(resolved.decision))
        }
    };
    let mut line = what;
    if let Some(network) = &resolved.network {
        line.push_str(&format!(" connecting to {}:{}", network.host, network.port));
    }
    if !resolved.decided_by.is_empty() {
        line.push_str(&format!(" ({})", resolved.decided_by));
    }
    if !resolved.reason.is_empty() {
        line.push_str(&format!(": {}", one_line(&resolved.reason)));
    }
    line
}

/// An approver console's line for an update on a request; `None` for a pending request, which
/// is shown with [`approval_lines`] when its turn to be asked comes.
pub fn console_update_line(update: &ApprovalRequest) -> Option<String> {
    let subject = if update.tool.is_empty() {
        update.approval_id.clone()
    } else {
        format!(
            "{} ({} in run {})",
            update.approval_id, update.tool, update.run_id
        )
    };
    let detail = one_line(&update.detail);
    let line = match ApprovalState::try_from(update.state) {
        Ok(ApprovalState::Pending) => return None,
        Ok(ApprovalState::Resolved) => format!("resolved {subject}: {detail}"),
        Ok(ApprovalState::Expired) => format!("expired {subject}: {detail}"),
        Ok(ApprovalState::DecisionRejected) => {
            format!("your decision for {subject} was refused: {detail}")
        }
        Ok(ApprovalState::Unspecified) | Err(_) => {
            format!("{} {subject}: {detail}", approval_state_name(update.state))
        }
    };
    Some(line.trim_end_matches([' ', ':']).to_owned())
}

fn deadline_text(deadline_ms: i64, now_ms: i64) -> String {
    if deadline_ms <= 0 {
        return "no deadline".to_owned();
    }
    let left = deadline_ms.saturating_sub(now_ms);
    if left <= 0 {
        "past its deadline".to_owned()
    } else {
        format!("answer within {}", format_remaining(left))
    }
}

/// The arguments in full, for an approver with no preview to judge by.
fn full_arguments(arguments_json: &str) -> Vec<StyledLine> {
    let text = pretty_json(arguments_json).unwrap_or_else(|| arguments_json.to_owned());
    std::iter::once(StyledLine::plain(format!("{DETAIL_INDENT}arguments:")))
        .chain(
            text.lines()
                .map(|line| StyledLine::plain(format!("{PREVIEW_INDENT}{line}"))),
        )
        .collect()
}

/// Text from the daemon, the model or a person, on the one line it is shown on.
fn one_line(text: &str) -> String {
    super::text::fold_whitespace(text)
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "-" } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Risk;
    use crate::styled::plain_text;

    const DIFF: &str =
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n fn f() {\n-    1\n+    2\n";

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            approval_id: "apr_1".to_owned(),
            run_id: "run_1".to_owned(),
            session_id: "ses_1".to_owned(),
            step_id: "step_1".to_owned(),
            call_id: "call_1".to_owned(),
            tool: "write_file".to_owned(),
            arguments_json: r#"{"path": "src/lib.rs", "content": "fn f() {\n    2\n}"}"#.to_owned(),
            risk: Risk::Write as i32,
            profile: "workspace".to_owned(),
            preview: Some(Preview {
                kind: "diff".to_owned(),
                text: DIFF.to_owned(),
                truncated: false,
                error: String::new(),
            }),
            deadline_ms: 1_000_300_000,
            digest: "0123456789abcdef".repeat(4),
            reason: "write calls are asked under the risky policy".to_owned(),
            state: ApprovalState::Pending as i32,
            tenant: String::new(),
            detail: String::new(),
            network: None,
            policy: None,
        }
    }

    #[test]
    fn a_request_names_what_asks_and_whether_it_may_be_granted() {
        use crate::proto::{PolicyPart, PolicyVerdict};
        let part = |subject: &str, decision: PolicyDecision, why: &str| PolicyPart {
            subject: subject.to_owned(),
            decision: decision as i32,
            why: why.to_owned(),
            ..Default::default()
        };
        let asked = |grantable| ApprovalRequest {
            policy: Some(PolicyVerdict {
                decision: PolicyDecision::Ask as i32,
                grantable,
                parts: vec![
                    part("`cargo test`", PolicyDecision::Allow, "rule `tests`"),
                    part(
                        "`git push origin main`",
                        PolicyDecision::Ask,
                        "rule `git writes ask` (operator layer, team.toml:31)",
                    ),
                ],
                ..Default::default()
            }),
            ..request()
        };
        let text = plain_text(&approval_lines(&asked(true), 1_000_000_000, false));
        assert!(
            text.contains(
                "  asks: `git push origin main` (rule `git writes ask` (operator layer, team.toml:31))\n"
            ),
            "{text}"
        );
        assert!(
            !text.contains("`cargo test`"),
            "only what asks is shown: {text}"
        );
        assert!(text.contains("grantable: `a` grants this call"), "{text}");
        let text = plain_text(&approval_lines(&asked(false), 1_000_000_000, false));
        assert!(
            text.contains("not grantable: a rule of the operator's always asks"),
            "{text}"
        );
    }

    #[test]
    fn a_request_shows_tool_risk_reason_arguments_diff_and_deadline() {
        let lines = approval_lines(&request(), 1_000_000_000, false);
        assert_eq!(
            plain_text(&lines),
            "? approval needed: write_file (risk write, profile workspace)\n\
             \x20 why: write calls are asked under the risky policy\n\
             \x20 arguments: {\"path\":\"src/lib.rs\",\"content\":\"fn f() {\\n    2\\n}\"}\n\
             \x20 preview (diff):\n\
             \x20   --- a/src/lib.rs\n\
             \x20   +++ b/src/lib.rs\n\
             \x20   @@ -1,2 +1,2 @@\n\
             \x20    fn f() {\n\
             \x20   -    1\n\
             \x20   +    2\n\
             \x20 approval apr_1, digest 0123456789ab, answer within 5m\n"
        );
        let tones: Vec<Tone> = lines.iter().map(|line| line.tone).collect();
        assert_eq!(
            tones,
            [
                Tone::Plain,
                Tone::Plain,
                Tone::Plain,
                Tone::Plain,
                Tone::FileHeader,
                Tone::FileHeader,
                Tone::Hunk,
                Tone::Plain,
                Tone::Removed,
                Tone::Added,
                Tone::Plain,
            ]
        );
    }

    #[test]
    fn a_console_names_the_run_and_a_late_request_says_so() {
        let text = plain_text(&approval_lines(&request(), 1_000_400_000, true));
        assert!(
            text.contains("\n  run run_1, step step_1, call call_1\n"),
            "{text}"
        );
        assert!(text.ends_with(", past its deadline\n"), "{text}");
    }

    #[test]
    fn without_a_preview_the_arguments_are_shown_in_full() {
        let mut request = request();
        request.preview = Some(Preview {
            error: "the tool has no preview mode".to_owned(),
            ..Preview::default()
        });
        let text = plain_text(&approval_lines(&request, 1_000_000_000, false));
        assert!(
            text.contains(
                "  preview unavailable: the tool has no preview mode\n  arguments:\n    {\n      \
                 \"path\": \"src/lib.rs\",\n"
            ),
            "{text}"
        );
        assert!(!text.contains("preview (diff)"), "{text}");
    }

    #[test]
    fn a_cut_preview_says_so() {
        let preview = Preview {
            kind: "domains".to_owned(),
            text: "api.example.com\n".to_owned(),
            truncated: true,
            error: String::new(),
        };
        assert_eq!(
            plain_text(&preview_lines(&preview)),
            "  preview (domains):\n    api.example.com\n    … (the preview is cut here)\n"
        );
    }

    #[test]
    fn resolutions_name_decision_approver_and_reason() {
        let resolved = |decision: Decision, by: &str, reason: &str| ApprovalResolved {
            approval_id: "apr_1".to_owned(),
            call_id: "call_1".to_owned(),
            decision: decision as i32,
            reason: reason.to_owned(),
            decided_by: by.to_owned(),
            network: None,
        };
        assert_eq!(
            resolution_line(&resolved(Decision::ApproveOnce, "run client", "")),
            "✓ approved once (run client)"
        );
        assert_eq!(
            resolution_line(&resolved(
                Decision::ApproveSession,
                "session grant",
                "approved earlier for this session"
            )),
            "✓ approved for the session (session grant): approved earlier for this session"
        );
        assert_eq!(
            resolution_line(&resolved(
                Decision::Deny,
                "deadline",
                "no answer by the deadline"
            )),
            "✗ denied (deadline): no answer by the deadline"
        );
        let mut connection = resolved(Decision::ApproveOnce, "approver", "");
        connection.network = Some(crate::proto::NetworkAccess {
            host: "api.example.com".to_owned(),
            port: 443,
        });
        assert_eq!(
            resolution_line(&connection),
            "✓ approved once connecting to api.example.com:443 (approver)"
        );
    }

    #[test]
    fn console_updates_say_what_happened_to_which_request() {
        let mut update = request();
        update.state = ApprovalState::Resolved as i32;
        update.detail = "approved once by the run client".to_owned();
        assert_eq!(
            console_update_line(&update).as_deref(),
            Some("resolved apr_1 (write_file in run run_1): approved once by the run client")
        );
        let rejected = ApprovalRequest {
            approval_id: "apr_9".to_owned(),
            state: ApprovalState::DecisionRejected as i32,
            detail: "approval `apr_9` is past its deadline".to_owned(),
            ..ApprovalRequest::default()
        };
        assert_eq!(
            console_update_line(&rejected).as_deref(),
            Some("your decision for apr_9 was refused: approval `apr_9` is past its deadline")
        );
        update.state = ApprovalState::Pending as i32;
        assert_eq!(console_update_line(&update), None);
    }

    #[test]
    fn the_questions_are_stable() {
        assert_eq!(
            RUN_PROMPT,
            "approve? [y]es / [n]o / [a]lways for this session: "
        );
        assert_eq!(
            console_prompt(&request()),
            "approve apr_1 (write_file in run run_1)? [y]es / [n]o / [a]lways for this session: "
        );
    }
}
