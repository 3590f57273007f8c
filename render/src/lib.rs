//! How airlock's API values read as text and JSON: tables and detail views of tools, runs and
//! sessions, a tool call's result, a run's transcript and its trace, approval requests and the
//! questions asked about them, and the JSON forms of all of these. Every function here is pure
//! (text in, text out), so that the output is stable and tested; writing it, and knowing the
//! terminal, is the command line's business (`airlock-cli`).
//!
//! A crate of its own rather than a module of the command line: the eval harness
//! (`airlock-eval`) writes its reports with the same names and cuts, and the command line runs
//! the harness, so the two share this crate below both.

mod approval;
mod changes;
mod daemon;
mod names;
mod policy;
mod pretty;
mod progress;
mod result;
mod run_json;
mod runs;
mod sanitize;
mod sessions;
mod styled;
mod table;
mod text;
mod tool;
mod trace;
mod transcript;
mod units;
mod views;

use airlock_proto::v1 as proto;

pub use approval::{
    ANSWER_HINT, REASON_PROMPT, RUN_PROMPT, approval_lines, console_prompt, console_update_line,
    diff_tone, preview_lines, resolution_line,
};
pub use changes::{change_kind_name, change_line, change_set_lines, changes_lines, revert_lines};
pub use daemon::{daemon_info_json, daemon_info_text, garbage_json, garbage_text};
pub use names::{
    approval_state_name, decision_name, disposition_name, output_stream_name, policy_name,
    risk_name, run_state_name, span_status_name, status_name, stop_reason_name, truncate_mode_name,
};
pub use policy::{
    grants_table, policy_decision_name, policy_layer_name, rule_origin, rules_json, rules_table,
    verdict_json, verdict_lines,
};
pub use pretty::{compact_json, pretty_json};
pub use progress::progress_line;
pub use result::{cut_summary, result_content, result_status_line};
pub use run_json::{approval_json, run_event_json, run_info_json, runs_json, trace_json};
pub use runs::{run_details, run_state_label, runs_table};
pub use sanitize::escape_control_bytes;
pub use sessions::{session_details, session_json, sessions_json, sessions_table};
pub use styled::{StyledLine, Tone, paint, plain_text};
pub use table::{MIN_DESCRIPTION_WIDTH, SHORT_DIGEST_LEN, tools_table};
pub use text::{ARGUMENTS_CHARS, cut, fold_whitespace, short_arguments};
pub use tool::tool_details;
pub use trace::trace_lines;
pub use transcript::{RESULT_LINE_CHARS, RESULT_LINES, Streamed, Transcript, usage_line};
pub use units::{
    format_ago, format_bytes, format_micros, format_millis, format_remaining, format_utc,
};
pub use views::{result_json, tool_json, tools_json};
