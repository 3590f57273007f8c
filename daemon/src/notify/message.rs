//! The body posted for one approval request: airlock's own JSON, or a Slack incoming-webhook
//! message. Everything in it that came from a run — the tool's arguments, the policy's
//! reason, the tool's name — is a model's or a tool's text: bounded, and escaped for the
//! format (Slack reads `<…>` as links and mentions and backticks as code fences, so a
//! hostile argument could otherwise draw its own "Approve" button or ping a channel).

use airlock_proto::v1 as pb;
use serde_json::{Value, json};

use super::settings::WebhookFormat;

/// The arguments shown, at most: enough to judge most calls; the whole call is on the
/// link's page, where the decision is made.
pub const MAX_ARGUMENTS_CHARS: usize = 1500;

/// What a Slack text block holds, less room for the fence: escaping can make text five
/// times longer (`&` → `&amp;`), so the escaped text is cut again to fit.
const MAX_SLACK_BLOCK_CHARS: usize = 2900;

/// Any other text from a run (tool name, reason, host) shown, at most.
const MAX_TEXT_CHARS: usize = 300;

/// The links a message carries.
pub struct Links {
    pub approve: String,
    pub deny: String,
    /// The run's page on the console, when the request is a run's.
    pub run: Option<String>,
    pub expires_ms: i64,
}

/// `text` cut to `max` characters, and whether it was cut.
fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (format!("{}…", &text[..at]), true),
        None => (text.to_owned(), false),
    }
}

/// Slack's three escapes for text it formats (`&`, `<`, `>`); the rest of its markup needs
/// `<…>` to link or mention, so escaping these makes any text plain.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Text for inside a Slack code block: escaped, and with no backtick left to close the
/// fence early (each becomes a modifier grave accent, which reads the same).
fn slack_code(text: &str) -> String {
    slack_escape(text).replace('`', "\u{2cb}")
}

/// Text for Slack's inline formatting (outside code): escaped, and with no formatting
/// characters left to restyle it.
fn slack_plain(text: &str) -> String {
    slack_escape(text).replace(['`', '*', '_', '~'], " ")
}

/// `text` for inside Slack code ([`slack_code`]), as much of it as fits in `max` characters
/// once escaped and in `MAX_ARGUMENTS_CHARS` before; and how many of `text`'s characters were
/// left out.
fn slack_code_within(text: &str, max: usize) -> (String, usize) {
    let mut shown = String::new();
    let mut length = 0;
    let mut taken = 0;
    for c in text.chars() {
        let escaped = slack_code(c.encode_utf8(&mut [0; 4]));
        let width = escaped.chars().count();
        if taken == MAX_ARGUMENTS_CHARS || length + width > max {
            break;
        }
        shown.push_str(&escaped);
        length += width;
        taken += 1;
    }
    (shown, text.chars().count() - taken)
}

/// The body for `request` (of `tenant`) in `format`.
pub fn body(
    format: WebhookFormat,
    webhook: &str,
    tenant: &str,
    request: &pb::ApprovalRequest,
    links: &Links,
) -> Value {
    let (arguments, arguments_cut) = cut(&request.arguments_json, MAX_ARGUMENTS_CHARS);
    let (tool, _) = cut(&request.tool, MAX_TEXT_CHARS);
    let (reason, _) = cut(&request.reason, MAX_TEXT_CHARS);
    let risk = pb::Risk::try_from(request.risk)
        .map(|risk| {
            risk.as_str_name()
                .trim_start_matches("RISK_")
                .to_lowercase()
        })
        .unwrap_or_default();
    let network = request.network.as_ref().map(|network| {
        let (host, _) = cut(&network.host, MAX_TEXT_CHARS);
        (host, network.port)
    });
    match format {
        WebhookFormat::Json => json!({
            "type": "approval.requested",
            "webhook": webhook,
            "tenant": tenant,
            "approval": {
                "approval_id": request.approval_id,
                "run_id": request.run_id,
                "session_id": request.session_id,
                "tool": tool,
                "arguments": arguments,
                "arguments_truncated": arguments_cut,
                "risk": risk,
                "reason": reason,
                "digest": request.digest,
                "deadline_ms": request.deadline_ms,
                "network": network.as_ref().map(|(host, port)| json!({"host": host, "port": port})),
            },
            "links": {
                "approve": links.approve,
                "deny": links.deny,
                "run": links.run,
                "expires_ms": links.expires_ms,
            },
        }),
        WebhookFormat::Slack => {
            // Each piece of a run's text in the header within a sixth of the block, so the
            // header stays within Slack's limit whatever its escaping makes of them.
            let piece = |text: &str| slack_code_within(text, MAX_SLACK_BLOCK_CHARS / 6).0;
            let asked = match &network {
                Some((host, port)) => format!(
                    "`{}` asks to connect to `{}:{port}`",
                    piece(&tool),
                    piece(host)
                ),
                None => format!("`{}` asks to run", piece(&tool)),
            };
            let mut header = format!("Approval needed ({}): {asked}", slack_plain(tenant));
            if !reason.is_empty() {
                // In code: a URL there is text, never a link beside the daemon's buttons.
                header.push_str(&format!("\n`{}`", piece(&reason)));
            }
            let (shown, hidden) = slack_code_within(&request.arguments_json, MAX_SLACK_BLOCK_CHARS);
            if hidden > 0 {
                header.push_str(&format!(
                    "\n*{hidden} more characters of the arguments are not shown here: the \
                     link's page shows the whole call before anything is decided.*"
                ));
            }
            let mut buttons = vec![
                json!({"type": "button", "text": {"type": "plain_text", "text": "Approve"},
                       "style": "primary", "url": links.approve, "action_id": "approve"}),
                json!({"type": "button", "text": {"type": "plain_text", "text": "Deny"},
                       "style": "danger", "url": links.deny, "action_id": "deny"}),
            ];
            if let Some(run) = &links.run {
                buttons.push(
                    json!({"type": "button", "text": {"type": "plain_text", "text": "Open the run"},
                                    "url": run, "action_id": "open"}),
                );
            }
            json!({
                "text": format!("Approval needed: {}", slack_escape(&tool)),
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": header}},
                    {"type": "section", "text": {"type": "mrkdwn",
                        "text": format!("```{shown}```")}},
                    {"type": "context", "elements": [{"type": "mrkdwn", "text": format!(
                        "risk {} · each link works once, until <!date^{}^{{time}}|the deadline> · approval {}",
                        slack_plain(&risk),
                        links.expires_ms / 1000,
                        slack_plain(&request.approval_id),
                    )}]},
                    {"type": "actions", "elements": buttons},
                ],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(arguments: &str) -> pb::ApprovalRequest {
        pb::ApprovalRequest {
            approval_id: "apr_1".into(),
            run_id: "run_1".into(),
            tool: "write_file".into(),
            arguments_json: arguments.into(),
            reason: "writes <b>".into(),
            ..Default::default()
        }
    }

    fn links() -> Links {
        Links {
            approve: "https://a/approve/x".into(),
            deny: "https://a/approve/y".into(),
            run: Some("https://a/#/runs/run_1".into()),
            expires_ms: 1_700_000_000_000,
        }
    }

    /// Whatever a hostile argument holds, the Slack message's text has no markup of its own:
    /// no link or mention (`<`), no fence closed early (a backtick), and the only buttons
    /// are the daemon's.
    #[test]
    fn a_hostile_argument_draws_nothing_in_slack() {
        let hostile =
            r#"{"path":"```\n<https://evil.example/approve|Approve> <!channel> *bold*&amp;"}"#;
        let body = body(
            WebhookFormat::Slack,
            "team",
            "default",
            &request(hostile),
            &links(),
        );
        let code = body["blocks"][1]["text"]["text"].as_str().expect("text");
        let inner = code
            .strip_prefix("```")
            .and_then(|text| text.strip_suffix("```"))
            .expect("one fence");
        assert!(
            !inner.contains('`') && !inner.contains('<') && !inner.contains('>'),
            "{inner}"
        );
        assert!(inner.contains("&amp;amp;"), "{inner}");
        let header = body["blocks"][0]["text"]["text"].as_str().expect("header");
        assert!(!header.contains("<b>"), "{header}");
        let buttons = body["blocks"][3]["elements"].as_array().expect("buttons");
        assert_eq!(buttons.len(), 3);
        assert_eq!(buttons[0]["url"], "https://a/approve/x");
    }

    fn slack_body(arguments: &str) -> Value {
        body(
            WebhookFormat::Slack,
            "team",
            "default",
            &request(arguments),
            &links(),
        )
    }

    /// Characters that escape to five each: fewer are shown than the cut allows, within
    /// Slack's limit, and the note counts exactly those left out.
    #[test]
    fn escaping_never_takes_a_block_past_slacks_limit() {
        let body = slack_body(&"&".repeat(1400));
        let code = body["blocks"][1]["text"]["text"].as_str().expect("text");
        assert!(code.chars().count() <= 3000, "{}", code.chars().count());
        let inner = code.trim_start_matches("```").trim_end_matches("```");
        assert_eq!(inner, "&amp;".repeat(MAX_SLACK_BLOCK_CHARS / 5));
        let header = body["blocks"][0]["text"]["text"].as_str().expect("header");
        let hidden = 1400 - MAX_SLACK_BLOCK_CHARS / 5;
        assert!(
            header.contains(&format!("{hidden} more characters")),
            "{header}"
        );
        // Short enough: all of it, and no note.
        let body = slack_body(r#"{"a":1}"#);
        let header = body["blocks"][0]["text"]["text"].as_str().expect("header");
        assert!(!header.contains("more characters"), "{header}");
    }

    #[test]
    fn long_arguments_are_cut_and_say_so() {
        let long = format!("{{\"text\":\"{}\"}}", "é".repeat(5000));
        let body = body(
            WebhookFormat::Json,
            "team",
            "default",
            &request(&long),
            &links(),
        );
        let shown = body["approval"]["arguments"].as_str().expect("arguments");
        assert_eq!(shown.chars().count(), MAX_ARGUMENTS_CHARS + 1);
        assert_eq!(body["approval"]["arguments_truncated"], true);
        assert_eq!(body["links"]["approve"], "https://a/approve/x");
    }
}
