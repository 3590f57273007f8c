//! Capturing a run (`airlock eval capture RUN_ID`): turns a finished run into an eval case. The run's cassette
//! (`GetCassette`) is written to a file, and a task for a suite is printed, ready to paste:
//! the run's input, `model: {replay: FILE}`, the settings the run had (policy, tools, budgets,
//! the answers its approvals got) so that the replay asks the model what was recorded, and
//! graders that pin what the run did — its stop reason, each tool it called, and the first
//! line of its final answer.

use std::path::{Path, PathBuf};

use airlock_client::proto::run_event::Event;
use airlock_client::proto::{Budgets, RunStarted};
use airlock_render::{policy_name, pretty_json};

use airlock_client::AirlockClient;

use super::error::{Console, EvalError};
use super::outcome::{Outcome, Recorder};

/// The longest `answer_contains` text pinned from an answer: enough to recognise it, short
/// enough to survive a rewording of what follows.
const ANSWER_CHARS: usize = 80;

/// Writes the finished run `run_id`'s cassette to `output` (by default
/// `cassettes/RUN_ID.json`) and prints a suite task that replays it on `out`.
pub async fn run<C: Console>(
    client: &AirlockClient,
    run_id: &str,
    output: Option<PathBuf>,
    out: &mut C,
) -> Result<u8, EvalError> {
    // First, so that a run the daemon cannot make a cassette of is refused in its words.
    let cassette = client.get_cassette(run_id).await?;
    let info = client.get_run(run_id).await?;
    let mut run = client.attach_run(run_id, 0).await?;
    let mut recorder = Recorder::default();
    let mut started = None;
    while let Some(event) = run.next_event().await? {
        if let Some(Event::RunStarted(run_started)) = &event.event {
            started = Some(run_started.clone());
        }
        recorder.on_event(&event);
        if recorder.finished() {
            break;
        }
    }
    let text = pretty_json(&cassette.cassette).ok_or_else(|| {
        EvalError::Protocol("the cassette the daemon sent is not JSON".to_owned())
    })?;
    let path = output.unwrap_or_else(|| Path::new("cassettes").join(format!("{run_id}.json")));
    write_file(&path, &format!("{text}\n"))?;
    let stanza = stanza(&Capture {
        run_id,
        input: &info.input,
        workspace: &info.workspace,
        cassette: &path,
        started: started.as_ref(),
        outcome: recorder.outcome(),
    });
    out.stdout(&stanza)?;
    out.line(&format!(
        "cassette: {} ({} model call(s) of {})",
        path.display(),
        cassette.exchanges,
        if cassette.model.is_empty() {
            "an unnamed model"
        } else {
            cassette.model.as_str()
        }
    ))?;
    Ok(0)
}

fn write_file(path: &Path, text: &str) -> Result<(), EvalError> {
    let failed = |error: std::io::Error| {
        EvalError::Output(std::io::Error::new(
            error.kind(),
            format!("{}: {error}", path.display()),
        ))
    };
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    std::fs::write(path, text).map_err(failed)
}

/// What a task stanza is made from.
pub struct Capture<'a> {
    pub run_id: &'a str,
    pub input: &'a str,
    pub workspace: &'a str,
    pub cassette: &'a Path,
    pub started: Option<&'a RunStarted>,
    pub outcome: &'a Outcome,
}

/// A YAML string: JSON's quoting is YAML's double-quoted style.
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A task id made of the run's id: lower case, `-` for anything a task id cannot hold.
pub fn task_id(run_id: &str) -> String {
    run_id
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The first non-empty line of an answer, at most [`ANSWER_CHARS`] characters.
fn answer_line(answer: &str) -> Option<String> {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    Some(
        line.chars()
            .take(ANSWER_CHARS)
            .collect::<String>()
            .trim_end()
            .to_owned(),
    )
}

fn budgets_line(budgets: &Budgets) -> Option<String> {
    let fields: Vec<String> = [
        ("max_steps", u64::from(budgets.max_steps)),
        ("max_tokens", budgets.max_tokens),
        ("max_wall_time_ms", budgets.max_wall_time_ms),
        ("max_tool_calls", u64::from(budgets.max_tool_calls)),
        (
            "max_repeated_errors",
            u64::from(budgets.max_repeated_errors),
        ),
        ("context_tokens", budgets.context_tokens),
        ("max_repeated_calls", u64::from(budgets.max_repeated_calls)),
        ("max_idle_steps", u64::from(budgets.max_idle_steps)),
    ]
    .into_iter()
    .filter(|(_, value)| *value != 0)
    .map(|(name, value)| format!("{name}: {value}"))
    .collect();
    (!fields.is_empty()).then(|| format!("{{{}}}", fields.join(", ")))
}

/// The approver that answers as the recorded run's approvals were answered.
fn approver_line(outcome: &Outcome) -> Option<String> {
    let answers: Vec<&str> = outcome
        .approvals
        .iter()
        .filter_map(|approval| approval.decision.as_deref())
        .map(|decision| match decision {
            "APPROVE_ONCE" => "approve",
            "APPROVE_SESSION" => "approve_session",
            _ => "deny",
        })
        .collect();
    if answers.is_empty() {
        return None;
    }
    if answers.iter().all(|answer| *answer == "approve") {
        return Some("approve_all".to_owned());
    }
    if answers.iter().all(|answer| *answer == "deny") {
        return Some("deny_all".to_owned());
    }
    Some(format!("{{script: [{}]}}", answers.join(", ")))
}

/// The graders that pin what the run did.
fn graders(outcome: &Outcome) -> Vec<String> {
    let mut graders = Vec::new();
    if let Some(reason) = &outcome.stop_reason {
        graders.push(format!("stop_reason: {reason}"));
    }
    let mut pinned: Vec<(String, String)> = Vec::new();
    for call in &outcome.tool_calls {
        let key = (call.tool.clone(), call.status.clone());
        if !pinned.contains(&key) {
            pinned.push(key);
        }
    }
    for (tool, status) in pinned {
        if status == "OK" {
            graders.push(format!("tool_called: {tool}"));
        } else {
            graders.push(format!("tool_called: {{tool: {tool}, status: {status}}}"));
        }
    }
    if let Some(line) = answer_line(&outcome.final_text) {
        graders.push(format!("answer_contains: {}", quote(&line)));
    }
    graders
}

/// The task, as YAML to paste under a suite's `tasks:`.
pub fn stanza(capture: &Capture<'_>) -> String {
    let id = task_id(capture.run_id);
    let mut lines = vec![
        format!(
            "# captured from run {}; paths are relative to the suite file",
            capture.run_id
        ),
        format!("- id: {id}"),
        format!("  input: {}", quote(capture.input)),
        format!(
            "  workspace: workspaces/{id}   # a copy of {} as it was before the run",
            if capture.workspace.is_empty() {
                "the run's workspace"
            } else {
                capture.workspace
            }
        ),
        format!(
            "  model: {{replay: {}}}",
            quote(&capture.cassette.to_string_lossy())
        ),
    ];
    if let Some(started) = capture.started {
        lines.push(format!(
            "  policy: {}",
            policy_name(started.approval_policy).to_lowercase()
        ));
        if !started.tools.is_empty() {
            lines.push(format!("  tools: [{}]", started.tools.join(", ")));
        }
        if let Some(budgets) = started.budgets.as_ref().and_then(budgets_line) {
            lines.push(format!("  budgets: {budgets}"));
        }
        if started.stop_on_denial {
            lines.push("  stop_on_denial: true".to_owned());
        }
    }
    if let Some(approver) = approver_line(capture.outcome) {
        lines.push(format!("  approver: {approver}"));
    }
    lines.push(
        "  # instructions: the recorded run's own, if it had any (a replay must ask what was \
         recorded)"
            .to_owned(),
    );
    lines.push("  graders:".to_owned());
    for grader in graders(capture.outcome) {
        lines.push(format!("    - {grader}"));
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use airlock_client::proto::{ApprovalPolicy, Decision};

    use super::super::outcome::tests::sample_events;
    use super::*;
    use crate::grader::GraderSpec;

    #[test]
    fn a_captured_run_becomes_a_task_that_pins_what_it_did() -> anyhow::Result<()> {
        let mut recorder = Recorder::default();
        for event in sample_events() {
            recorder.on_event(&event);
            if event.seq == 7 {
                recorder.answered("apr_1", Decision::Deny);
            }
        }
        let started = RunStarted {
            approval_policy: ApprovalPolicy::Risky as i32,
            tools: vec!["read_file".to_owned(), "write_file".to_owned()],
            budgets: Some(Budgets {
                max_steps: 8,
                ..Budgets::default()
            }),
            ..RunStarted::default()
        };
        let stanza = stanza(&Capture {
            run_id: "run_01ABC",
            input: "What does \"mean\" do?\nBriefly.",
            workspace: "/srv/ws/calc",
            cassette: Path::new("cassettes/run_01ABC.json"),
            started: Some(&started),
            outcome: recorder.outcome(),
        });
        assert_eq!(
            stanza,
            "# captured from run run_01ABC; paths are relative to the suite file\n\
             - id: run_01abc\n  \
               input: \"What does \\\"mean\\\" do?\\nBriefly.\"\n  \
               workspace: workspaces/run_01abc   # a copy of /srv/ws/calc as it was before the run\n  \
               model: {replay: \"cassettes/run_01ABC.json\"}\n  \
               policy: risky\n  \
               tools: [read_file, write_file]\n  \
               budgets: {max_steps: 8}\n  \
               approver: deny_all\n  \
               # instructions: the recorded run's own, if it had any (a replay must ask what was recorded)\n  \
               graders:\n    \
                 - stop_reason: final\n    \
                 - tool_called: read_file\n    \
                 - tool_called: {tool: write_file, status: DENIED}\n    \
                 - tool_called: {tool: grep, status: INVALID_ARGUMENTS}\n    \
                 - tool_called: {tool: fetch, status: TOOL_ERROR}\n    \
                 - answer_contains: \"The mean is the average.\"\n"
        );
        // What it prints is a task a suite reads: each grader parses.
        let yaml: serde_norway::Value = serde_norway::from_str(&stanza)?;
        let task = &yaml[0];
        assert_eq!(
            task["input"].as_str(),
            Some("What does \"mean\" do?\nBriefly.")
        );
        let graders: Vec<GraderSpec> = serde_norway::from_value(task["graders"].clone())?;
        assert_eq!(graders.len(), 6);
        Ok(())
    }

    #[test]
    fn long_answers_are_pinned_by_their_first_line_cut() {
        let long = format!("\n  {}\nmore", "word ".repeat(40));
        let line = answer_line(&long).unwrap_or_default();
        assert!(line.chars().count() <= ANSWER_CHARS);
        assert!(long.contains(&line));
        assert_eq!(answer_line("   \n"), None);
        assert_eq!(task_id("run_01J/X"), "run_01j-x");
    }
}
