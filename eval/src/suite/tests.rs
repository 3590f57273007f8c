//! Loading suites: a good one resolved field by field, and each kind of mistake reported at
//! its place.

use std::path::Path;

use airlock_client::proto::{ApprovalPolicy, Decision};

use super::*;

/// A suite directory with a workspace, a script and a cassette.
fn suite_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("workspaces/calc"))?;
    std::fs::write(dir.path().join("workspaces/calc/README.md"), "mean()\n")?;
    std::fs::create_dir_all(dir.path().join("scripts"))?;
    std::fs::write(
        dir.path().join("scripts/fix.yaml"),
        "turns:\n  - final: done\n",
    )?;
    std::fs::create_dir_all(dir.path().join("cassettes"))?;
    std::fs::write(
        dir.path().join("cassettes/read.json"),
        r#"{"cassette": 1, "provider": "openai", "model": "openai:gpt-4o", "run_id": "run_1", "exchanges": []}"#,
    )?;
    Ok(dir)
}

const GOOD: &str = r#"
suite: coding-basics
description: "Reading and fixing a small calculator."
defaults:
  model: {replay: cassettes/read.json}
  policy: risky
  budgets: {max_steps: 20, max_tokens: 100000}
  approver: approve_all
  timeout_s: 60
prices:
  "openai:gpt-4o": {input: 2.5, output: 10}
thresholds: {pass_rate: 0.9, max_cost_usd: 1.0}
tasks:
  - id: read-readme
    input: "What does the README say the mean function does?"
    workspace: workspaces/calc
    graders:
      - answer_contains: "mean"
      - stop_reason: final
      - tool_called: read_file
      - no_egress: true
  - id: fix_mean
    input: "Fix mean()."
    workspace: workspaces/calc
    model: {scripted: scripts/fix.yaml}
    policy: always
    budgets: {max_steps: 5}
    approver: {script: [approve, deny]}
    repeats: 3
    tools: [read_file, write_file]
    instructions: "Be brief."
    stop_on_denial: true
    graders:
      - max_steps: 5
      - budget: {max_tokens: 5000}
"#;

fn load_text(dir: &Path, text: &str) -> Result<Suite, SuiteError> {
    parse_suite(&dir.join("suite.yaml"), text, None, &LoadOptions::default())
}

/// The one problem of a suite that must not load.
fn problem(dir: &Path, text: &str) -> anyhow::Result<String> {
    let Err(error) = load_text(dir, text) else {
        anyhow::bail!("the suite loaded");
    };
    Ok(error.to_string())
}

#[test]
fn a_good_suite_is_resolved_task_by_task() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    let suite = load_text(dir.path(), GOOD).map_err(|error| anyhow::anyhow!("{error}"))?;
    assert_eq!(suite.name, "coding-basics");
    assert_eq!(suite.thresholds.pass_rate, Some(0.9));
    assert_eq!(suite.tasks.len(), 2);

    let read = &suite.tasks[0];
    assert_eq!(read.id, "read-readme");
    assert_eq!(read.graders.len(), 4);
    assert_eq!(read.graders[1].label(), "stop_reason final");
    assert_eq!(read.settings.model.config.model, "replay");
    assert_eq!(
        read.settings.model.priced_as.as_deref(),
        Some("openai:gpt-4o")
    );
    assert_eq!(read.settings.policy, ApprovalPolicy::Risky);
    assert_eq!(read.settings.budgets.max_steps, 20);
    assert_eq!(read.settings.budgets.max_tokens, 100_000);
    assert_eq!(read.settings.approver, Approver::ApproveAll);
    assert_eq!(read.settings.repeats, 1);
    assert_eq!(read.settings.timeout, Duration::from_secs(60));
    assert!(read.nondeterministic().is_empty());
    assert_eq!(
        read.fixture.as_ref().map(Fixture::path),
        Some(dir.path().join("workspaces/calc").as_path())
    );

    // The task's own settings win over the defaults, field by field for budgets.
    let fix = &suite.tasks[1];
    assert_eq!(fix.settings.model.config.model, "scripted");
    assert_eq!(
        fix.settings.model.config.script,
        "turns:\n  - final: done\n"
    );
    assert_eq!(fix.settings.model.name, "scripted:scripts/fix.yaml");
    assert_eq!(fix.settings.policy, ApprovalPolicy::Always);
    assert_eq!(fix.settings.budgets.max_steps, 5);
    assert_eq!(fix.settings.budgets.max_tokens, 100_000);
    assert_eq!(fix.settings.approver.answer(1), Decision::Deny);
    assert_eq!(fix.settings.repeats, 3);
    assert_eq!(fix.settings.tools, ["read_file", "write_file"]);
    assert_eq!(fix.settings.instructions, "Be brief.");
    assert!(fix.settings.stop_on_denial);
    assert_eq!(fix.nondeterministic(), ["repeats: 3"]);
    Ok(())
}

#[test]
fn a_variant_goes_over_every_task_and_flags_narrow_the_suite() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    std::fs::create_dir(dir.path().join("variants"))?;
    let variant = dir.path().join("variants/strict.yaml");
    // Relative to the variant's own directory.
    std::fs::write(
        &variant,
        "model: {scripted: ../scripts/fix.yaml}\npolicy: never\nbudgets: {max_tokens: 10}\n",
    )?;
    let tasks = ["fix_mean".to_owned()];
    let suite = load(
        &{
            let file = dir.path().join("suite.yaml");
            std::fs::write(&file, GOOD)?;
            file
        },
        &LoadOptions {
            variant: Some(&variant),
            repeats: Some(2),
            tasks: &tasks,
        },
    )
    .map_err(|error| anyhow::anyhow!("{error}"))?;
    assert_eq!(suite.tasks.len(), 1);
    let task = &suite.tasks[0];
    assert_eq!(task.settings.model.config.model, "scripted");
    assert_eq!(task.settings.policy, ApprovalPolicy::Never);
    assert_eq!(task.settings.budgets.max_tokens, 10);
    assert_eq!(task.settings.budgets.max_steps, 5);
    assert_eq!(task.settings.repeats, 2);
    assert_eq!(suite.variant.as_deref(), Some(variant.as_path()));

    let unknown = ["nope".to_owned()];
    let Err(error) = load(
        &dir.path().join("suite.yaml"),
        &LoadOptions {
            tasks: &unknown,
            ..LoadOptions::default()
        },
    ) else {
        panic!("an unknown --task was accepted");
    };
    assert!(
        error
            .to_string()
            .contains("--task nope: no task has this id; the tasks are: read-readme, fix_mean"),
        "{error}"
    );
    Ok(())
}

#[test]
fn an_unknown_field_is_named_with_its_place() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    let text = GOOD.replace(
        "    input: \"Fix mean().\"",
        "    input: \"Fix mean().\"\n    retries: 2",
    );
    let message = problem(dir.path(), &text)?;
    assert!(
        message.contains("suite.yaml: tasks[1].retries: unknown field `retries`, expected one of "),
        "{message}"
    );
    assert!(message.ends_with(" at line 24 column 5"), "{message}");
    let text = GOOD.replace("approver: approve_all", "approver: approve_some");
    let message = problem(dir.path(), &text)?;
    assert!(
        message.contains("suite.yaml: defaults.approver: unknown approver `approve_some`"),
        "{message}"
    );
    Ok(())
}

#[test]
fn an_unknown_grader_is_named_with_its_place() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    let text = GOOD.replace("      - max_steps: 5", "      - max_stepz: 5");
    let message = problem(dir.path(), &text)?;
    assert!(
        message.contains("suite.yaml: tasks[1].graders[0]: unknown grader `max_stepz`; the graders are: answer_contains, "),
        "{message}"
    );
    Ok(())
}

#[test]
fn a_duplicate_task_id_is_refused() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    let text = GOOD.replace("id: fix_mean", "id: read-readme");
    let message = problem(dir.path(), &text)?;
    assert!(
        message.ends_with("suite.yaml: tasks[1].id: `read-readme` is already the id of tasks[0]"),
        "{message}"
    );
    let text = GOOD.replace("id: fix_mean", "id: Fix Mean");
    assert!(problem(dir.path(), &text)?.contains("is not a task id"));
    Ok(())
}

#[test]
fn a_missing_workspace_is_an_unreadable_input() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    let text = GOOD.replace(
        "    workspace: workspaces/calc\n    model",
        "    workspace: workspaces/gone\n    model",
    );
    let Err(error) = load_text(dir.path(), &text) else {
        panic!("a missing workspace was accepted");
    };
    let message = error.to_string();
    assert!(
        message.contains("tasks[1].workspace: cannot read "),
        "{message}"
    );
    assert!(message.contains("workspaces/gone"), "{message}");
    assert!(matches!(EvalError::from(error), EvalError::NoInput(_)));
    Ok(())
}

#[test]
fn a_bad_regex_is_a_usage_error_at_its_grader() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    let text = GOOD.replace(
        "      - answer_contains: \"mean\"",
        "      - answer_matches: \"(mean\"",
    );
    let Err(error) = load_text(dir.path(), &text) else {
        panic!("a bad regex was accepted");
    };
    let message = error.to_string();
    assert!(
        message.contains("tasks[0].graders[0].answer_matches: not a regular expression: "),
        "{message}"
    );
    assert!(matches!(EvalError::from(error), EvalError::Usage(_)));
    Ok(())
}

#[test]
fn every_problem_is_reported_at_once() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    let text = GOOD
        .replace(
            "      - stop_reason: final",
            "      - stop_reason: finished",
        )
        .replace("    repeats: 3", "    repeats: 0")
        .replace(
            "{replay: cassettes/read.json}",
            "{replay: cassettes/none.json}",
        );
    let message = problem(dir.path(), &text)?;
    assert!(message.contains("defaults.model: "), "{message}");
    assert!(
        message.contains("tasks[0].graders[1].stop_reason: unknown stop reason"),
        "{message}"
    );
    assert!(
        message.contains("tasks[1].repeats: at least 1"),
        "{message}"
    );
    Ok(())
}

#[test]
fn a_task_without_a_model_or_graders_is_refused() -> anyhow::Result<()> {
    let dir = suite_dir()?;
    let text = "suite: s\ntasks:\n  - id: a\n    input: hi\n    graders: []\n";
    let message = problem(dir.path(), text)?;
    assert!(message.contains("tasks[0].model: no model"), "{message}");
    assert!(
        message.contains("tasks[0].graders: no graders"),
        "{message}"
    );
    let message = problem(dir.path(), "suite: ../up\ntasks: []\n")?;
    assert!(message.contains("suite: `../up` cannot name"), "{message}");
    assert!(
        message.contains("tasks: the suite has no tasks"),
        "{message}"
    );
    Ok(())
}
