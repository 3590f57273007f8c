//! A run's events as a person reads them: step headers, what the model said, each call it
//! proposed and what became of it, approvals, and how the run ended.
//!
//! ```text
//! run run_… in session ses_…: model scripted, policy risky
//! workspace: /srv/work/demo
//! task: fix the failing test
//!
//! ── step 1 ──
//! model: Let me look at the test first.
//! → read_file {"path":"tests/basic.rs"}
//! ← read_file: OK in 3 ms
//!     {
//!       "content": "…"
//!     }
//! ? approval needed: write_file (risk write, profile workspace)
//!   …
//! ✓ approved once (run client)
//! ← write_file: OK in 5 ms
//!
//! stop: FINAL
//! usage: 2 steps, 2 model calls, 812 input + 96 output tokens, 2 tool calls
//!
//! The test passes now: the fix was an off-by-one in `sum`.
//! ```
//!
//! The final answer is the last thing printed. The model's text of the last step is that same
//! answer, so it is held back until the next event shows whether it was the final one, and
//! then printed once, at the end.

use std::borrow::Cow;

use super::approval::{approval_lines, resolution_line};
use super::names::{disposition_name, policy_name, status_name, stop_reason_name};
use super::result::{cut_summary, result_content};
use super::styled::StyledLine;
use super::text::{fold_whitespace, head_lines, short_arguments};
use super::units::format_millis;
use crate::proto::run_event::Event;
use crate::proto::{
    ContextBuilt, ContextDisposition, ModelRetry, RunEvent, RunFinished, RunResumed, RunStarted,
    StopReason, ToolFinished, ToolStatus, Usage,
};

/// Lines of a result's content, or of its error, shown under the call: enough to see what
/// came back; the model saw all of it, and `--json` prints all of it.
pub const RESULT_LINES: usize = 5;

/// Characters of one shown line of a result: long lines (minified JSON, a file's one long
/// line) would otherwise fill the screen.
pub const RESULT_LINE_CHARS: usize = 160;

/// Indentation of a result's lines under its call.
const RESULT_INDENT: &str = "    ";

/// The rendering state of one run's stream; feed it every event in order.
#[derive(Debug, Default)]
pub struct Transcript {
    /// The model's text of the latest step, not printed yet; see the module docs.
    held_text: Option<String>,
}

impl Transcript {
    pub fn new() -> Self {
        Self::default()
    }

    /// The lines that `event` adds to the transcript; often none.
    pub fn event(&mut self, event: &RunEvent) -> Vec<StyledLine> {
        let mut lines = Vec::new();
        let Some(kind) = &event.event else {
            // An event kind newer than this client: nothing to say about it.
            return lines;
        };
        if let Some(held) = self.held_text.take() {
            let is_final_answer = matches!(
                kind,
                Event::RunFinished(finished)
                    if finished.reason == StopReason::Final as i32 && finished.final_text == held
            );
            if !is_final_answer {
                lines.extend(prefixed("model: ", &held));
            }
        }
        match kind {
            Event::RunStarted(started) => lines.extend(run_started(&event.run_id, started)),
            Event::StepStarted(step) => {
                lines.push(StyledLine::plain(""));
                lines.push(StyledLine::plain(format!("── step {} ──", step.index)));
            }
            Event::ContextBuilt(built) => lines.extend(context_line(built)),
            Event::ModelText(text) => {
                if !text.text.trim().is_empty() {
                    self.held_text = Some(text.text.clone());
                }
            }
            Event::ModelRetry(retry) => lines.push(StyledLine::plain(retry_line(retry))),
            Event::ToolCallProposed(call) => lines.push(StyledLine::plain(format!(
                "→ {} {}",
                call.tool,
                short_arguments(&call.arguments_json)
            ))),
            Event::ToolCallRejected(rejected) => {
                lines.extend(prefixed(
                    &format!("✗ {} rejected: ", rejected.tool),
                    &rejected.reason,
                ));
            }
            Event::ApprovalRequested(requested) => {
                if let Some(request) = &requested.request {
                    lines.extend(approval_lines(request, event.time_ms, false));
                }
            }
            Event::ApprovalResolved(resolved) => {
                lines.push(StyledLine::plain(resolution_line(resolved)));
            }
            Event::ToolFinished(finished) => lines.extend(tool_finished(finished)),
            Event::UserInput(input) => lines.extend(prefixed("user: ", &input.text)),
            Event::DecisionRejected(rejected) => lines.push(StyledLine::plain(format!(
                "! decision for approval {} refused: {}",
                rejected.approval_id,
                fold_whitespace(&rejected.reason)
            ))),
            Event::RunResumed(resumed) => lines.push(StyledLine::plain(resumed_line(resumed))),
            Event::Changes(changes) => {
                if let Some(set) = &changes.change_set {
                    lines.push(StyledLine::plain(format!("  {} changed:", changes.tool)));
                    lines.extend(
                        super::changes::change_set_lines(set, "    ")
                            .into_iter()
                            .map(StyledLine::plain),
                    );
                }
            }
            Event::RunFinished(finished) => lines.extend(run_finished(finished)),
            // Shown by the progress indicator while the tool runs; the result says the rest.
            Event::ToolStarted(_) | Event::ToolOutput(_) => {}
        }
        lines
    }

    /// What is still held back when the stream ends without the run's end.
    pub fn flush(&mut self) -> Vec<StyledLine> {
        self.held_text
            .take()
            .map(|held| prefixed("model: ", &held))
            .unwrap_or_default()
    }
}

fn run_started(run_id: &str, started: &RunStarted) -> Vec<StyledLine> {
    let mut header = format!("run {run_id}");
    if !started.session_id.is_empty() {
        header.push_str(&format!(" in session {}", started.session_id));
    }
    header.push_str(&format!(
        ": model {}, policy {}",
        started.model,
        policy_name(started.approval_policy).to_lowercase()
    ));
    if started.stop_on_denial {
        header.push_str(", stop on denial");
    }
    let mut lines = vec![StyledLine::plain(header)];
    if !started.workspace.is_empty() {
        lines.push(StyledLine::plain(format!(
            "workspace: {}",
            started.workspace
        )));
    }
    if !started.tools.is_empty() {
        lines.push(StyledLine::plain(format!(
            "tools: {}",
            started.tools.join(", ")
        )));
    }
    lines.extend(prefixed("task: ", &started.input));
    lines
}

/// One line, only when the context builder cut something: what went to the model is then not
/// the whole conversation, which explains much of what a model does next.
fn context_line(built: &ContextBuilt) -> Option<StyledLine> {
    let kinds_with = |disposition: ContextDisposition| {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for item in built
            .items
            .iter()
            .filter(|item| item.disposition == disposition as i32)
        {
            match counts.iter_mut().find(|(kind, _)| *kind == item.kind) {
                Some((_, count)) => *count += 1,
                None => counts.push((&item.kind, 1)),
            }
        }
        counts
            .into_iter()
            .map(|(kind, count)| match count {
                1 => kind.to_owned(),
                count => format!("{kind} ×{count}"),
            })
            .collect::<Vec<_>>()
    };
    let summarised = kinds_with(ContextDisposition::Summarised);
    let dropped = kinds_with(ContextDisposition::Dropped);
    if summarised.is_empty() && dropped.is_empty() {
        return None;
    }
    let mut line = format!("context: {} of {} tokens", built.tokens, built.budget);
    if !summarised.is_empty() {
        line.push_str(&format!(
            "; {}: {}",
            disposition_name(ContextDisposition::Summarised as i32).to_lowercase(),
            summarised.join(", ")
        ));
    }
    if !dropped.is_empty() {
        line.push_str(&format!(
            "; {}: {}",
            disposition_name(ContextDisposition::Dropped as i32).to_lowercase(),
            dropped.join(", ")
        ));
    }
    Some(StyledLine::plain(line))
}

fn retry_line(retry: &ModelRetry) -> String {
    format!(
        "model call failed (attempt {}), retrying in {}: {}",
        retry.attempt,
        format_millis(retry.delay_ms),
        fold_whitespace(&retry.error)
    )
}

/// The daemon restarted and took the run up again: what went on before it is not repeated,
/// and the calls of the interrupted step are handled again.
fn resumed_line(resumed: &RunResumed) -> String {
    let mut line = format!(
        "↻ resumed after a daemon restart, from event {}",
        resumed.checkpoint_seq
    );
    if resumed.pending_calls > 0 {
        line.push_str(&format!(
            "; {} of the interrupted step still to observe",
            counted(u64::from(resumed.pending_calls), "call")
        ));
    }
    line
}

/// `← tool: STATUS in 12 ms`, then the first lines of the content (or of the error).
fn tool_finished(finished: &ToolFinished) -> Vec<StyledLine> {
    let Some(result) = &finished.result else {
        return vec![StyledLine::plain(format!("← {}: no result", finished.tool))];
    };
    let mut head = format!(
        "← {}: {} in {}",
        finished.tool,
        status_name(result.status),
        format_millis(result.duration_ms)
    );
    if result.truncated {
        // The daemon keeps the whole output of a cut call under its execution id.
        match cut_summary(result) {
            Some(summary) => head.push_str(&format!(" (output cut; {summary})")),
            None => head.push_str(&format!(
                " (output cut to {} of {} bytes)",
                result.head_bytes + result.tail_bytes,
                result.original_bytes
            )),
        }
    }
    let mut lines = vec![StyledLine::plain(head)];
    let body: Cow<'_, str> =
        if result.status == ToolStatus::Ok as i32 || result.error_message.trim().is_empty() {
            Cow::Owned(result_content(&result.content))
        } else if result.content.trim().is_empty() {
            Cow::Borrowed(&result.error_message)
        } else {
            // A command that failed: why, then what it printed (a test run's failures).
            Cow::Owned(format!(
                "{}\n{}",
                result.error_message.trim_end(),
                result_content(&result.content)
            ))
        };
    let (shown, more) = head_lines(&body, RESULT_LINES, RESULT_LINE_CHARS);
    lines.extend(
        shown
            .into_iter()
            .map(|line| StyledLine::plain(format!("{RESULT_INDENT}{line}"))),
    );
    if more > 0 {
        let noun = if more == 1 { "line" } else { "lines" };
        lines.push(StyledLine::plain(format!(
            "{RESULT_INDENT}… {more} more {noun}"
        )));
    }
    lines
}

/// `stop: REASON`, its detail, the usage, then the final text as the last lines.
fn run_finished(finished: &RunFinished) -> Vec<StyledLine> {
    let mut lines = vec![
        StyledLine::plain(""),
        StyledLine::plain(format!("stop: {}", stop_reason_name(finished.reason))),
    ];
    if !finished.detail.trim().is_empty() {
        lines.extend(prefixed("detail: ", &finished.detail));
    }
    lines.push(StyledLine::plain(usage_line(
        finished.steps,
        finished.usage.as_ref(),
    )));
    let final_text = finished.final_text.trim_end();
    if !final_text.is_empty() {
        lines.push(StyledLine::plain(""));
        lines.extend(final_text.lines().map(StyledLine::plain));
    }
    lines
}

/// `usage: 3 steps, 3 model calls, 1200 input + 85 output tokens, 2 tool calls`.
pub fn usage_line(steps: u32, usage: Option<&Usage>) -> String {
    let usage = usage.copied().unwrap_or_default();
    format!(
        "usage: {}, {}, {} input + {} output tokens, {}",
        counted(u64::from(steps), "step"),
        counted(u64::from(usage.model_calls), "model call"),
        usage.input_tokens,
        usage.output_tokens,
        counted(u64::from(usage.tool_calls), "tool call"),
    )
}

/// `1 step`, `2 steps`.
pub(super) fn counted(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// `label` then the text's first line; its other lines indented to line up under the first.
fn prefixed(label: &str, text: &str) -> Vec<StyledLine> {
    let indent = " ".repeat(label.chars().count());
    let text = text.trim_end();
    if text.is_empty() {
        return vec![StyledLine::plain(label.trim_end())];
    }
    text.lines()
        .enumerate()
        .map(|(index, line)| {
            let lead = if index == 0 { label } else { indent.as_str() };
            StyledLine::plain(format!("{lead}{line}").trim_end().to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        ApprovalPolicy, ApprovalRequest, ApprovalRequested, ContextItem, ModelText, StepStarted,
        ToolCallProposed, ToolCallRejected, ToolResult,
    };
    use crate::render::styled::plain_text;

    fn event(seq: u64, kind: Event) -> RunEvent {
        RunEvent {
            run_id: "run_1".to_owned(),
            seq,
            step_id: String::new(),
            time_ms: 1_000_000,
            event: Some(kind),
        }
    }

    fn render(events: &[Event]) -> String {
        let mut transcript = Transcript::new();
        let mut lines = Vec::new();
        for (index, kind) in events.iter().enumerate() {
            lines.extend(transcript.event(&event(index as u64 + 1, kind.clone())));
        }
        lines.extend(transcript.flush());
        plain_text(&lines)
    }

    fn finished(reason: StopReason, final_text: &str, detail: &str) -> Event {
        Event::RunFinished(RunFinished {
            reason: reason as i32,
            final_text: final_text.to_owned(),
            usage: Some(Usage {
                input_tokens: 812,
                output_tokens: 96,
                model_calls: 2,
                tool_calls: 1,
            }),
            detail: detail.to_owned(),
            steps: 2,
        })
    }

    #[test]
    fn a_whole_run_reads_top_to_bottom_and_ends_with_the_answer() {
        let text = render(&[
            Event::RunStarted(RunStarted {
                session_id: "ses_1".to_owned(),
                input: "fix the failing test".to_owned(),
                model: "scripted".to_owned(),
                approval_policy: ApprovalPolicy::Risky as i32,
                workspace: "/srv/demo".to_owned(),
                ..RunStarted::default()
            }),
            Event::StepStarted(StepStarted { index: 1 }),
            Event::ModelText(ModelText {
                text: "Let me look.".to_owned(),
            }),
            Event::ToolCallProposed(ToolCallProposed {
                provider_call_id: String::new(),
                call_id: "call_1".to_owned(),
                tool: "read_file".to_owned(),
                arguments_json: "{ \"path\": \"a.txt\" }".to_owned(),
            }),
            Event::ToolFinished(ToolFinished {
                provider_call_id: String::new(),
                call_id: "call_1".to_owned(),
                tool: "read_file".to_owned(),
                result: Some(ToolResult {
                    status: ToolStatus::Ok as i32,
                    content: "one\ntwo\n".to_owned(),
                    duration_ms: 3,
                    ..ToolResult::default()
                }),
            }),
            Event::StepStarted(StepStarted { index: 2 }),
            Event::ModelText(ModelText {
                text: "Fixed.\nThe test passes.".to_owned(),
            }),
            finished(StopReason::Final, "Fixed.\nThe test passes.", ""),
        ]);
        assert_eq!(
            text,
            "run run_1 in session ses_1: model scripted, policy risky\n\
             workspace: /srv/demo\n\
             task: fix the failing test\n\
             \n\
             ── step 1 ──\n\
             model: Let me look.\n\
             → read_file {\"path\":\"a.txt\"}\n\
             ← read_file: OK in 3 ms\n\
             \x20   one\n\
             \x20   two\n\
             \n\
             ── step 2 ──\n\
             \n\
             stop: FINAL\n\
             usage: 2 steps, 2 model calls, 812 input + 96 output tokens, 1 tool call\n\
             \n\
             Fixed.\n\
             The test passes.\n"
        );
    }

    #[test]
    fn text_that_is_not_the_final_answer_is_printed_before_what_follows() {
        let text = render(&[
            Event::ModelText(ModelText {
                text: "thinking\naloud".to_owned(),
            }),
            finished(StopReason::MaxSteps, "", "the run took its 2 steps"),
        ]);
        assert_eq!(
            text,
            "model: thinking\n\
             \x20      aloud\n\
             \n\
             stop: MAX_STEPS\n\
             detail: the run took its 2 steps\n\
             usage: 2 steps, 2 model calls, 812 input + 96 output tokens, 1 tool call\n"
        );
    }

    #[test]
    fn held_text_is_flushed_when_the_stream_ends_early() {
        let text = render(&[Event::ModelText(ModelText {
            text: "half way".to_owned(),
        })]);
        assert_eq!(text, "model: half way\n");
    }

    #[test]
    fn failures_show_the_error_and_long_content_is_cut() {
        let failed = render(&[Event::ToolFinished(ToolFinished {
            provider_call_id: String::new(),
            call_id: "c".to_owned(),
            tool: "grep".to_owned(),
            result: Some(ToolResult {
                status: ToolStatus::ToolError as i32,
                content: String::new(),
                error_message: "bad pattern: (".to_owned(),
                duration_ms: 1_500,
                ..ToolResult::default()
            }),
        })]);
        assert_eq!(failed, "← grep: TOOL_ERROR in 1.50 s\n    bad pattern: (\n");
        // A failed command: why, then what it printed (a test run's failures).
        let failed = render(&[Event::ToolFinished(ToolFinished {
            provider_call_id: String::new(),
            call_id: "c".to_owned(),
            tool: "run_command".to_owned(),
            result: Some(ToolResult {
                status: ToolStatus::ToolError as i32,
                content: "FAIL: test_mean\n".to_owned(),
                error_message: "the tool exited with code 1".to_owned(),
                duration_ms: 1_500,
                ..ToolResult::default()
            }),
        })]);
        assert_eq!(
            failed,
            "← run_command: TOOL_ERROR in 1.50 s\n    the tool exited with code 1\n    FAIL: test_mean\n"
        );

        let content: String = (1..=8).map(|n| format!("line {n}\n")).collect();
        let long = render(&[Event::ToolFinished(ToolFinished {
            provider_call_id: String::new(),
            call_id: "c".to_owned(),
            tool: "read_file".to_owned(),
            result: Some(ToolResult {
                status: ToolStatus::Ok as i32,
                content,
                truncated: true,
                original_bytes: 9_000,
                head_bytes: 56,
                duration_ms: 2,
                execution_id: "exe_1".to_owned(),
                ..ToolResult::default()
            }),
        })]);
        assert_eq!(
            long,
            "← read_file: OK in 2 ms (output cut; shown: bytes 0–56 of 9000; the rest: airlock \
             tools output exe_1 --offset 56)\n    line 1\n    line 2\n    \
             line 3\n    line 4\n    line 5\n    … 3 more lines\n"
        );
    }

    #[test]
    fn rejected_calls_and_refused_decisions_give_their_reason() {
        let text = render(&[
            Event::ToolCallRejected(ToolCallRejected {
                provider_call_id: String::new(),
                call_id: "c".to_owned(),
                tool: "nope".to_owned(),
                reason: "there is no tool `nope` in this run".to_owned(),
            }),
            Event::DecisionRejected(crate::proto::DecisionRejected {
                approval_id: "apr_1".to_owned(),
                reason: "approval `apr_1` is past its deadline".to_owned(),
            }),
        ]);
        assert_eq!(
            text,
            "✗ nope rejected: there is no tool `nope` in this run\n\
             ! decision for approval apr_1 refused: approval `apr_1` is past its deadline\n"
        );
    }

    #[test]
    fn the_context_is_mentioned_only_when_something_was_cut() {
        let item = |kind: &str, disposition: ContextDisposition| ContextItem {
            kind: kind.to_owned(),
            source: String::new(),
            tokens: 10,
            disposition: disposition as i32,
        };
        let whole = render(&[Event::ContextBuilt(ContextBuilt {
            tokens: 100,
            budget: 8_000,
            items: vec![item("goal", ContextDisposition::Included)],
        })]);
        assert_eq!(whole, "");
        let cut = render(&[Event::ContextBuilt(ContextBuilt {
            tokens: 7_900,
            budget: 8_000,
            items: vec![
                item("goal", ContextDisposition::Included),
                item("observation", ContextDisposition::Summarised),
                item("assistant", ContextDisposition::Summarised),
                item("observation", ContextDisposition::Summarised),
                item("user", ContextDisposition::Dropped),
            ],
        })]);
        assert_eq!(
            cut,
            "context: 7900 of 8000 tokens; summarised: observation ×2, assistant; dropped: user\n"
        );
    }

    #[test]
    fn retries_and_approvals_are_shown_where_they_happen() {
        let text = render(&[
            Event::ModelRetry(ModelRetry {
                attempt: 1,
                error: "HTTP 429: slow down".to_owned(),
                delay_ms: 1_500,
            }),
            Event::ApprovalRequested(ApprovalRequested {
                request: Some(ApprovalRequest {
                    approval_id: "apr_1".to_owned(),
                    tool: "write_file".to_owned(),
                    arguments_json: "{}".to_owned(),
                    deadline_ms: 1_060_000,
                    ..ApprovalRequest::default()
                }),
            }),
        ]);
        assert!(
            text.starts_with(
                "model call failed (attempt 1), retrying in 1.50 s: HTTP 429: slow down\n\
                 ? approval needed: write_file (risk unspecified, profile -)\n"
            ),
            "{text}"
        );
        // The time left is counted from the event's time, not the clock's.
        assert!(text.ends_with("answer within 1m\n"), "{text}");
    }

    #[test]
    fn a_resumed_run_says_from_where() {
        let resumed = |pending_calls| {
            render(&[Event::RunResumed(RunResumed {
                checkpoint_id: "chk_1".to_owned(),
                checkpoint_seq: 12,
                pending_calls,
            })])
        };
        assert_eq!(
            resumed(0),
            "↻ resumed after a daemon restart, from event 12\n"
        );
        assert_eq!(
            resumed(2),
            "↻ resumed after a daemon restart, from event 12; 2 calls of the interrupted step \
             still to observe\n"
        );
    }

    #[test]
    fn unknown_events_print_nothing() {
        let mut transcript = Transcript::new();
        let unknown = RunEvent {
            event: None,
            ..event(1, Event::StepStarted(StepStarted { index: 1 }))
        };
        assert!(transcript.event(&unknown).is_empty());
    }
}
