//! Tests of `transcript.rs`.

use super::*;
use crate::proto::{
    ApprovalPolicy, ApprovalRequest, ApprovalRequested, ContextItem, ModelText, ModelTextDelta,
    StepStarted, ToolCallDelta, ToolCallProposed, ToolCallRejected, ToolResult,
};

fn event(seq: u64, kind: Event) -> RunEvent {
    RunEvent {
        run_id: "run_1".to_owned(),
        seq,
        step_id: String::new(),
        time_ms: 1_000_000,
        turn_id: "turn_1".to_owned(),
        delta: false,
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
        reason: String::new(),
    };
    let whole = render(&[Event::ContextBuilt(ContextBuilt {
        tokens: 100,
        budget: 8_000,
        items: vec![item("goal", ContextDisposition::Included)],
        ..ContextBuilt::default()
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
        ..ContextBuilt::default()
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

fn delta(seq: u64, kind: Event) -> RunEvent {
    RunEvent {
        delta: true,
        ..event(seq, kind)
    }
}

fn text_delta(seq: u64, text: &str) -> RunEvent {
    delta(
        seq,
        Event::TextDelta(ModelTextDelta {
            text: text.to_owned(),
        }),
    )
}

fn model_text(seq: u64, text: &str) -> RunEvent {
    event(
        seq,
        Event::ModelText(ModelText {
            text: text.to_owned(),
        }),
    )
}

fn proposed(seq: u64) -> RunEvent {
    event(
        seq,
        Event::ToolCallProposed(ToolCallProposed {
            provider_call_id: String::new(),
            call_id: "call_1".to_owned(),
            tool: "read_file".to_owned(),
            arguments_json: "{\"path\":\"a.txt\"}".to_owned(),
        }),
    )
}

/// What a pipe receives, written as the command line writes it: streamed text leaves its
/// line open, and a committed event's lines start on a fresh one.
fn render_streamed(events: &[RunEvent]) -> String {
    let mut transcript = Transcript::new();
    let mut out = String::new();
    let mut open = false;
    for event in events {
        if event.delta {
            if let Some(Streamed::Text(text)) = transcript.delta(event) {
                open = !text.ends_with('\n');
                out.push_str(&text);
            }
            continue;
        }
        if std::mem::take(&mut open) {
            out.push('\n');
        }
        out.push_str(&plain_text(&transcript.event(event)));
    }
    if open {
        out.push('\n');
    }
    out
}

#[test]
fn streamed_text_is_shown_as_it_comes_and_not_again_when_committed() {
    let text = render_streamed(&[
        event(1, Event::StepStarted(StepStarted { index: 1 })),
        text_delta(2, "  Let me"),
        text_delta(2, " look.\n"),
        text_delta(2, "Then fix it. "),
        model_text(2, "  Let me look.\nThen fix it. "),
        proposed(3),
    ]);
    assert_eq!(
        text,
        "\n── step 1 ──\n\
         model: Let me look.\n\
         \x20      Then fix it.\n\
         → read_file {\"path\":\"a.txt\"}\n"
    );
}

#[test]
fn text_streamed_from_the_middle_is_printed_whole_when_committed() {
    // Attached after the first pieces had gone by.
    let text = render_streamed(&[
        text_delta(2, "look."),
        model_text(2, "Let me look."),
        proposed(3),
    ]);
    assert_eq!(
        text,
        "model: look.\n\
         model: Let me look.\n\
         → read_file {\"path\":\"a.txt\"}\n"
    );
}

#[test]
fn a_streamed_final_answer_still_ends_the_transcript() {
    let text = render_streamed(&[
        text_delta(5, "All "),
        text_delta(5, "done."),
        model_text(5, "All done."),
        event(6, finished(StopReason::Final, "All done.", "")),
    ]);
    assert_eq!(
        text,
        "model: All done.\n\
         \n\
         stop: FINAL\n\
         usage: 2 steps, 2 model calls, 812 input + 96 output tokens, 1 tool call\n\
         \n\
         All done.\n"
    );
}

#[test]
fn text_held_back_is_printed_before_the_next_answer_streams() {
    let text = render_streamed(&[
        model_text(2, "Thinking."),
        text_delta(3, "Next."),
        model_text(3, "Next."),
    ]);
    assert_eq!(text, "model: Thinking.\nmodel: Next.\n");
}

#[test]
fn a_streamed_call_names_its_tool_once() {
    let call = |index: u32, tool: &str, arguments: &str| {
        delta(
            2,
            Event::ToolCallDelta(ToolCallDelta {
                index,
                provider_call_id: String::new(),
                tool: tool.to_owned(),
                arguments_delta: arguments.to_owned(),
            }),
        )
    };
    let mut transcript = Transcript::new();
    assert_eq!(
        transcript.delta(&call(0, "grep", "")),
        Some(Streamed::Calling("calling grep…".to_owned()))
    );
    assert_eq!(transcript.delta(&call(0, "grep", "{\"pattern\"")), None);
    assert_eq!(transcript.delta(&call(1, "", "{")), None);
    assert_eq!(
        transcript.delta(&call(1, "read_file", "")),
        Some(Streamed::Calling("calling read_file…".to_owned()))
    );
    // Deltas print nothing as committed events, and a committed event nothing as a delta.
    assert!(transcript.event(&call(0, "grep", "")).is_empty());
    assert_eq!(transcript.delta(&model_text(2, "x")), None);
}

#[test]
fn compaction_is_one_line_and_a_failed_summary_says_why() {
    let compacted = |fallback: bool, error: &str| {
        render(&[Event::ContextCompacted(ContextCompacted {
            entries: 42,
            tokens_before: 31_200,
            summary_tokens: 640,
            fallback,
            error: error.to_owned(),
            ..ContextCompacted::default()
        })])
    };
    assert_eq!(
        compacted(false, ""),
        "context compacted: 42 entries (31200 tokens) → summary of 640 tokens\n"
    );
    assert_eq!(
        compacted(true, "HTTP 500:\n  overloaded"),
        "context cut mechanically: summarising failed: HTTP 500: overloaded\n"
    );
}

#[test]
fn cut_context_items_say_why_and_how_they_were_counted() {
    let item = |kind: &str, disposition: ContextDisposition, reason: &str| ContextItem {
        kind: kind.to_owned(),
        source: String::new(),
        tokens: 10,
        disposition: disposition as i32,
        reason: reason.to_owned(),
    };
    let text = render(&[Event::ContextBuilt(ContextBuilt {
        tokens: 7_900,
        budget: 8_000,
        items: vec![
            item("observation", ContextDisposition::Summarised, "older step"),
            item("observation", ContextDisposition::Summarised, "older step"),
            item("observation", ContextDisposition::Summarised, ""),
            item(
                "user",
                ContextDisposition::Dropped,
                &"over budget ".repeat(10),
            ),
        ],
        tokenizer: "estimate".to_owned(),
        calibration: 1.125,
    })]);
    assert_eq!(
        text,
        "context: 7900 of 8000 tokens (estimate ×1.12); summarised: observation ×2 (older \
         step), observation; dropped: user (over budget over budget over budget over budget \
         over budget…)\n"
    );
    let counted = render(&[Event::ContextBuilt(ContextBuilt {
        tokens: 7_900,
        budget: 8_000,
        items: vec![item("user", ContextDisposition::Dropped, "")],
        tokenizer: "o200k_base".to_owned(),
        calibration: 0.0,
    })]);
    assert_eq!(
        counted,
        "context: 7900 of 8000 tokens (o200k_base); dropped: user\n"
    );
}

#[test]
fn a_run_that_continues_a_session_says_so() {
    let text = render(&[Event::RunStarted(RunStarted {
        session_id: "ses_1".to_owned(),
        input: "and now the docs".to_owned(),
        model: "scripted".to_owned(),
        approval_policy: ApprovalPolicy::Risky as i32,
        workspace: "/srv/demo".to_owned(),
        continues_run_id: "run_0".to_owned(),
        history_messages: 6,
        project_instructions: true,
        ..RunStarted::default()
    })]);
    assert_eq!(
        text,
        "run run_1 in session ses_1: model scripted, policy risky\n\
         continues: run_0 (6 messages of history)\n\
         workspace: /srv/demo\n\
         project instructions: AGENTS.md (workspace content, not policy)\n\
         task: and now the docs\n"
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
