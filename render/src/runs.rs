//! Runs for people: the table of `airlock runs list` and the detail view of `airlock runs show`.

use std::borrow::Cow;

use super::names::{run_state_name, stop_reason_name};
use super::table::{aligned_table, or_dash};
use super::text::fold_whitespace;
use super::tool::field;
use super::transcript::usage_line;
use super::units::format_utc;
use crate::proto::{RunInfo, RunState, StopReason};

const HEADER: [&str; 7] = ["RUN", "STATE", "STOP", "STEPS", "CREATED", "MODEL", "INPUT"];

/// `running`, `waiting` (for an approval) or `finished`: the words `--state` takes.
pub fn run_state_label(raw: i32) -> Cow<'static, str> {
    match RunState::try_from(raw) {
        Ok(RunState::Running) => Cow::Borrowed("running"),
        Ok(RunState::WaitingForApproval) => Cow::Borrowed("waiting"),
        Ok(RunState::Finished) => Cow::Borrowed("finished"),
        Ok(RunState::Unspecified) | Err(_) => Cow::Owned(run_state_name(raw).to_lowercase()),
    }
}

/// The runs as an aligned table with a header line, in the order given (the daemon lists the
/// newest first), the task cut so that each line is at most `width` characters. Ends with a
/// newline.
pub fn runs_table(runs: &[RunInfo], width: usize) -> String {
    let rows = runs
        .iter()
        .map(|run| {
            [
                or_dash(&run.run_id),
                run_state_label(run.state),
                stop_label(run.stop_reason),
                Cow::Owned(run.steps.to_string()),
                time_label(run.created_at_ms),
                or_dash(&run.model),
                Cow::Owned(fold_whitespace(&run.input)),
            ]
        })
        .collect();
    aligned_table(HEADER, rows, width)
}

/// Every field of one run as `label: value` lines, the final text last. Ends with a newline.
pub fn run_details(run: &RunInfo) -> String {
    let mut out = String::new();
    field(&mut out, "run", &run.run_id);
    field(&mut out, "session", &run.session_id);
    field(&mut out, "state", &run_state_label(run.state));
    field(&mut out, "stop", &stop_label(run.stop_reason));
    if !run.stop_detail.is_empty() {
        field(&mut out, "detail", &run.stop_detail);
    }
    field(&mut out, "model", &run.model);
    field(&mut out, "workspace", &run.workspace);
    field(&mut out, "created", &time_label(run.created_at_ms));
    field(&mut out, "finished", &time_label(run.finished_at_ms));
    let usage = usage_line(run.steps, run.usage.as_ref());
    field(
        &mut out,
        "usage",
        usage.strip_prefix("usage: ").unwrap_or(&usage),
    );
    field(&mut out, "last event", &run.last_seq.to_string());
    field(&mut out, "trace", &run.trace_id);
    field(&mut out, "input", run.input.trim_end());
    if !run.final_text.trim().is_empty() {
        out.push_str("final text:\n");
        out.push_str(run.final_text.trim_end());
        out.push('\n');
    }
    out
}

/// A stop reason, or `-` while the run has none.
fn stop_label(raw: i32) -> Cow<'static, str> {
    if raw == StopReason::Unspecified as i32 {
        Cow::Borrowed("-")
    } else {
        stop_reason_name(raw)
    }
}

fn time_label(unix_millis: i64) -> Cow<'static, str> {
    if unix_millis == 0 {
        Cow::Borrowed("-")
    } else {
        Cow::Owned(format_utc(unix_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Usage;

    fn finished_run() -> RunInfo {
        RunInfo {
            run_id: "run_01".to_owned(),
            session_id: "ses_01".to_owned(),
            state: RunState::Finished as i32,
            stop_reason: StopReason::Final as i32,
            input: "fix the\nfailing test".to_owned(),
            final_text: "Done.\n".to_owned(),
            usage: Some(Usage {
                input_tokens: 100,
                output_tokens: 20,
                model_calls: 2,
                tool_calls: 1,
            }),
            model: "scripted".to_owned(),
            workspace: "/srv/demo".to_owned(),
            trace_id: "trace_01".to_owned(),
            created_at_ms: 1_738_367_999_000,
            finished_at_ms: 1_738_368_001_000,
            last_seq: 17,
            steps: 2,
            stop_detail: String::new(),
        }
    }

    #[test]
    fn the_table_shows_state_stop_and_the_task_on_one_line() {
        let waiting = RunInfo {
            run_id: "run_02".to_owned(),
            state: RunState::WaitingForApproval as i32,
            input: "x".repeat(100),
            model: "openai:gpt-4o".to_owned(),
            ..RunInfo::default()
        };
        let table = runs_table(&[finished_run(), waiting], 100);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "RUN     STATE     STOP   STEPS  CREATED               MODEL          INPUT"
        );
        assert_eq!(
            lines[1],
            "run_01  finished  FINAL  2      2025-01-31T23:59:59Z  scripted       fix the failing test"
        );
        assert!(
            lines[2].starts_with(
                "run_02  waiting   -      0      -                     openai:gpt-4o  xxx"
            ),
            "{}",
            lines[2]
        );
        assert_eq!(lines[2].chars().count(), 100, "{}", lines[2]);
        assert!(lines[2].ends_with('…'));
    }

    #[test]
    fn details_list_every_field_and_end_with_the_final_text() {
        assert_eq!(
            run_details(&finished_run()),
            "run:          run_01\n\
             session:      ses_01\n\
             state:        finished\n\
             stop:         FINAL\n\
             model:        scripted\n\
             workspace:    /srv/demo\n\
             created:      2025-01-31T23:59:59Z\n\
             finished:     2025-02-01T00:00:01Z\n\
             usage:        2 steps, 2 model calls, 100 input + 20 output tokens, 1 tool call\n\
             last event:   17\n\
             trace:        trace_01\n\
             input:        fix the\n\
             \x20             failing test\n\
             final text:\n\
             Done.\n"
        );
    }

    #[test]
    fn a_running_run_has_no_stop_yet() {
        let running = RunInfo {
            state: RunState::Running as i32,
            ..RunInfo::default()
        };
        let details = run_details(&running);
        assert!(details.contains("\nstate:        running\n"), "{details}");
        assert!(details.contains("\nstop:         -\n"), "{details}");
        assert!(!details.contains("final text"), "{details}");
    }
}
