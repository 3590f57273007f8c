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
//!
//! Streamed pieces (deltas) are shown as they come, through [`Transcript::delta`]: the model's
//! text is written as it arrives, leaving its line open, so that a person reads the answer
//! while it is written. The committed text that follows is then not printed again when the
//! pieces shown since the last committed event make up exactly that text; when they do not
//! (the client attached in the middle of the stream and missed its start), the committed text
//! is printed whole, as it is without streaming.

use std::borrow::Cow;

use super::approval::{approval_lines, resolution_line};
use super::names::{disposition_name, policy_name, status_name, stop_reason_name};
use super::result::{cut_summary, result_content};
use super::styled::{StyledLine, plain_text};
use super::text::{cut, fold_whitespace, head_lines, short_arguments};
use super::units::format_millis;
use crate::proto::run_event::Event;
use crate::proto::{
    ContextBuilt, ContextCompacted, ContextDisposition, ModelRetry, RunEvent, RunFinished,
    RunResumed, RunStarted, StopReason, ToolFinished, ToolStatus, Usage,
};

/// Lines of a result's content, or of its error, shown under the call: enough to see what
/// came back; the model saw all of it, and `--json` prints all of it.
pub const RESULT_LINES: usize = 5;

/// Characters of one shown line of a result: long lines (minified JSON, a file's one long
/// line) would otherwise fill the screen.
pub const RESULT_LINE_CHARS: usize = 160;

/// Indentation of a result's lines under its call.
const RESULT_INDENT: &str = "    ";

/// What the model's text starts with; its further lines are indented under the text.
const MODEL_LABEL: &str = "model: ";

/// Characters of a context item's reason: the context line names why things were cut, and
/// the `context_built` event in `--json` has the reasons whole.
const REASON_CHARS: usize = 60;

/// The rendering state of one run's stream; feed it every event in order: committed events to
/// [`Transcript::event`], deltas to [`Transcript::delta`].
#[derive(Debug, Default)]
pub struct Transcript {
    /// The model's text of the latest step, not printed yet; see the module docs.
    held_text: Option<String>,
    /// What has streamed since the last committed event.
    stream: Stream,
}

#[derive(Debug, Default)]
struct Stream {
    /// The text pieces, joined.
    text: String,
    /// How much of `text` has been shown: what follows is whitespace, held back until more
    /// text comes, since the committed form of the text ends without it.
    shown: usize,
    /// The calls (by index) whose tool has been named.
    named_calls: Vec<u32>,
}

/// What a streamed piece adds to a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Streamed {
    /// Text to write as it is, leaving the line open: the model's words as they arrive. The
    /// lines of the next committed event belong on a fresh line.
    Text(String),
    /// A passing note for a status line that the next output replaces (`calling grep…`): the
    /// model has started to write a call of that tool, which is printed once it is whole.
    Calling(String),
}

impl Transcript {
    pub fn new() -> Self {
        Self::default()
    }

    /// What a streamed piece (`event.delta`) adds: the model's text as it arrives, or the
    /// name of a tool it started to call, the first time that call streams; `None` for
    /// anything else (a committed event included).
    pub fn delta(&mut self, event: &RunEvent) -> Option<Streamed> {
        if !event.delta {
            return None;
        }
        match event.event.as_ref()? {
            Event::TextDelta(delta) => {
                let mut out = String::new();
                // More text streams: what was held back was not the final answer.
                if let Some(held) = self.held_text.take() {
                    out.push_str(&plain_text(&prefixed(MODEL_LABEL, &held)));
                }
                out.push_str(&self.stream.text_piece(&delta.text));
                (!out.is_empty()).then_some(Streamed::Text(out))
            }
            Event::ToolCallDelta(call) => {
                if call.tool.is_empty() || self.stream.named_calls.contains(&call.index) {
                    return None;
                }
                self.stream.named_calls.push(call.index);
                Some(Streamed::Calling(format!("calling {}…", call.tool)))
            }
            _ => None,
        }
    }

    /// The lines that a committed `event` adds to the transcript; often none. A delta adds
    /// none here: see [`Transcript::delta`].
    pub fn event(&mut self, event: &RunEvent) -> Vec<StyledLine> {
        let mut lines = Vec::new();
        if event.delta {
            return lines;
        }
        let streamed = std::mem::take(&mut self.stream);
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
                lines.extend(prefixed(MODEL_LABEL, &held));
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
                let shown_as_streamed = !streamed.text.is_empty() && streamed.text == text.text;
                if !shown_as_streamed && !text.text.trim().is_empty() {
                    self.held_text = Some(text.text.clone());
                }
            }
            Event::ContextCompacted(compacted) => {
                lines.push(StyledLine::plain(compacted_line(compacted)));
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
            // Only ever deltas, which returned above.
            Event::TextDelta(_) | Event::ToolCallDelta(_) => {}
        }
        lines
    }

    /// What is still held back when the stream ends without the run's end.
    pub fn flush(&mut self) -> Vec<StyledLine> {
        self.held_text
            .take()
            .map(|held| prefixed(MODEL_LABEL, &held))
            .unwrap_or_default()
    }
}

impl Stream {
    /// What to write for one more piece of the model's text: the label before the first
    /// visible character, later lines indented under the first, trailing whitespace held.
    fn text_piece(&mut self, piece: &str) -> String {
        self.text.push_str(piece);
        let visible = self.text.trim_end().len();
        let Some(new) = self
            .text
            .get(self.shown..visible)
            .filter(|new| !new.is_empty())
        else {
            return String::new();
        };
        let mut out = String::new();
        let new = if self.shown == 0 {
            out.push_str(MODEL_LABEL);
            new.trim_start()
        } else {
            new
        };
        let indent = format!("\n{}", " ".repeat(MODEL_LABEL.len()));
        out.push_str(&new.replace('\n', &indent));
        self.shown = visible;
        out
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
    if !started.continues_run_id.is_empty() {
        lines.push(StyledLine::plain(format!(
            "continues: {} ({} of history)",
            started.continues_run_id,
            counted(u64::from(started.history_messages), "message")
        )));
    }
    if !started.workspace.is_empty() {
        lines.push(StyledLine::plain(format!(
            "workspace: {}",
            started.workspace
        )));
    }
    if started.project_instructions {
        // Said so that nobody mistakes the workspace's instructions for airlock's policy.
        lines.push(StyledLine::plain(
            "project instructions: AGENTS.md (workspace content, not policy)",
        ));
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
/// the whole conversation, which explains much of what a model does next. Items of one kind
/// cut for one reason are counted together: `observation ×3 (older than the last 4 steps)`.
fn context_line(built: &ContextBuilt) -> Option<StyledLine> {
    let kinds_with = |disposition: ContextDisposition| {
        let mut counts: Vec<(&str, &str, usize)> = Vec::new();
        for item in built
            .items
            .iter()
            .filter(|item| item.disposition == disposition as i32)
        {
            match counts
                .iter_mut()
                .find(|(kind, reason, _)| *kind == item.kind && *reason == item.reason)
            {
                Some((_, _, count)) => *count += 1,
                None => counts.push((&item.kind, &item.reason, 1)),
            }
        }
        counts
            .into_iter()
            .map(|(kind, reason, count)| {
                let mut part = match count {
                    1 => kind.to_owned(),
                    count => format!("{kind} ×{count}"),
                };
                let reason = fold_whitespace(reason);
                if !reason.is_empty() {
                    part.push_str(&format!(" ({})", cut(&reason, REASON_CHARS)));
                }
                part
            })
            .collect::<Vec<_>>()
    };
    let summarised = kinds_with(ContextDisposition::Summarised);
    let dropped = kinds_with(ContextDisposition::Dropped);
    if summarised.is_empty() && dropped.is_empty() {
        return None;
    }
    let mut line = format!("context: {} of {} tokens", built.tokens, built.budget);
    match built.tokenizer.as_str() {
        "" => {}
        // How far an estimate has been off, as the provider's own counts showed.
        "estimate" if built.calibration > 0.0 && built.calibration != 1.0 => {
            line.push_str(&format!(" (estimate ×{:.2})", built.calibration));
        }
        tokenizer => line.push_str(&format!(" ({tokenizer})")),
    }
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

/// Older steps were replaced by a summary (or, when summarising failed, cut without one).
fn compacted_line(compacted: &ContextCompacted) -> String {
    if compacted.fallback {
        let error = fold_whitespace(&compacted.error);
        return if error.is_empty() {
            "context cut mechanically: summarising failed".to_owned()
        } else {
            format!("context cut mechanically: summarising failed: {error}")
        };
    }
    let entries = match compacted.entries {
        1 => "1 entry".to_owned(),
        entries => format!("{entries} entries"),
    };
    format!(
        "context compacted: {entries} ({} tokens) → summary of {} tokens",
        compacted.tokens_before, compacted.summary_tokens
    )
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
#[path = "transcript_tests.rs"]
mod tests;
