//! One attempt: a task's fixture copied into a fresh workspace, its run started and followed
//! to its end (approvals answered by the task's approver, the run cancelled past
//! `timeout_s`), then every grader asked for its verdict. What happened is an
//! [`AttemptRecord`]; an attempt never fails as a whole — what goes wrong is recorded.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use airlock_client::proto::StartRun;
use tokio::sync::mpsc::UnboundedSender;

use super::daemon::{EvalDaemon, RunEnd};
use super::fixture::Fixture;
use super::grader::GradeContext;
use super::outcome::Outcome;
use super::price::Prices;
use super::report::{AttemptRecord, AttemptStatus, TraceLink, VerdictRecord};
use super::suite::Task;

/// One attempt to make.
pub struct Plan<'a> {
    /// 1 for the first of the whole eval.
    pub number: usize,
    pub total: usize,
    pub task: &'a Task,
    /// 1 for the task's first.
    pub repeat: u32,
    /// Where its workspace copy goes.
    pub workspace: PathBuf,
}

impl Plan<'_> {
    fn prefix(&self) -> String {
        format!(
            "[{}/{}] {} #{}",
            self.number, self.total, self.task.id, self.repeat
        )
    }

    /// The line that says the attempt started.
    pub fn started_line(&self) -> String {
        format!(
            "{} started ({})",
            self.prefix(),
            self.task.settings.model.name
        )
    }

    /// The line that says how it ended: `[3/12] fix-mean #1 PASS 4 steps 2.1 s`.
    pub fn ended_line(&self, record: &AttemptRecord) -> String {
        let prefix = self.prefix();
        let word = record.status.word();
        if record.status == AttemptStatus::Unfinished {
            return format!(
                "{prefix} {word}: {}",
                record.error.as_deref().unwrap_or("no reason given")
            );
        }
        let outcome = &record.outcome;
        let steps = if outcome.steps == 1 { "step" } else { "steps" };
        let mut line = format!(
            "{prefix} {word} {} {steps} {:.1} s",
            outcome.steps, outcome.wall_s
        );
        let failed: Vec<&VerdictRecord> = record.verdicts.iter().filter(|v| !v.passed).collect();
        if let Some(first) = failed.first() {
            let marker = if first.deterministic {
                ""
            } else {
                " (non-deterministic)"
            };
            line.push_str(&format!(": {}{marker}: {}", first.grader, first.detail));
            if failed.len() > 1 {
                line.push_str(&format!(" (and {} more)", failed.len() - 1));
            }
        }
        line
    }
}

/// What the attempts of one eval share.
pub struct Env<'a> {
    pub daemon: &'a dyn EvalDaemon,
    pub prices: &'a Prices,
    /// Set, with the error, once the daemon is gone: attempts not yet started are recorded
    /// as unfinished without trying.
    pub gone: &'a RefCell<Option<String>>,
    /// Progress lines, for whoever prints them.
    pub progress: &'a UnboundedSender<String>,
}

/// The verdict of a run that passed its timeout.
pub const TIMEOUT_GRADER: &str = "timeout";

/// How the error of an attempt the daemon's unavailability kept from running begins.
pub const NOT_RUN: &str = "not run: ";

pub async fn run(plan: &Plan<'_>, env: &Env<'_>) -> AttemptRecord {
    let task = plan.task;
    let gone = env.gone.borrow().clone();
    if let Some(error) = gone {
        return unfinished(plan, format!("{NOT_RUN}{error}"), Outcome::default());
    }
    // Nobody may be listening any more (the eval was interrupted): nothing to tell then.
    let _ = env.progress.send(plan.started_line());
    let fixture = task.fixture.clone();
    let dest = plan.workspace.clone();
    let prepared = tokio::task::spawn_blocking(move || prepare(fixture.as_ref(), &dest)).await;
    let workspace = match prepared {
        Ok(Ok(workspace)) => workspace,
        // What is at the path (if anything) is not this attempt's: never reported as its
        // kept workspace.
        Ok(Err(error)) => return not_prepared(plan, error),
        Err(error) => return not_prepared(plan, error.to_string()),
    };
    let settings = &task.settings;
    let start = StartRun {
        workspace: workspace.to_string_lossy().into_owned(),
        input: task.input.clone(),
        model: Some(settings.model.config.clone()),
        tools: settings.tools.clone(),
        approval_policy: settings.policy as i32,
        budgets: Some(settings.budgets),
        stop_on_denial: settings.stop_on_denial,
        instructions: settings.instructions.clone(),
        ..StartRun::default()
    };
    let followed = env
        .daemon
        .run(start, &settings.approver, settings.timeout)
        .await;
    let mut outcome = followed.outcome;
    outcome.priced_model = settings
        .model
        .priced_as
        .clone()
        .unwrap_or_else(|| outcome.model.clone());
    outcome.cost_usd = env.prices.cost(
        &outcome.priced_model,
        outcome.input_tokens,
        outcome.output_tokens,
    );
    let mut verdicts = Vec::new();
    match followed.end {
        RunEnd::Unfinished(failure) => {
            if failure.unavailable {
                env.gone.borrow_mut().get_or_insert(failure.error.clone());
            }
            return unfinished(plan, failure.error, outcome);
        }
        RunEnd::TimedOut => verdicts.push(VerdictRecord {
            grader: TIMEOUT_GRADER.to_owned(),
            label: format!("timeout_s {}", settings.timeout.as_secs()),
            deterministic: true,
            passed: false,
            detail: format!(
                "the run took longer than timeout_s ({} s) and was cancelled",
                settings.timeout.as_secs()
            ),
        }),
        RunEnd::Finished => {}
    }
    let cx = GradeContext {
        input: &task.input,
        outcome: &outcome,
        workspace: &workspace,
        daemon: env.daemon,
        timeout: settings.timeout,
    };
    for grader in &task.graders {
        let verdict = grader.grade(&cx).await;
        verdicts.push(VerdictRecord {
            grader: grader.kind().to_owned(),
            label: grader.label(),
            deterministic: grader.deterministic(),
            passed: verdict.passed,
            detail: verdict.detail,
        });
    }
    let status = if verdicts.iter().all(|verdict| verdict.passed) {
        AttemptStatus::Passed
    } else {
        AttemptStatus::Failed
    };
    AttemptRecord {
        task: task.id.clone(),
        repeat: plan.repeat,
        status,
        run_id: outcome.run_id.clone(),
        error: None,
        workspace: workspace.to_string_lossy().into_owned(),
        workspace_kept: true,
        trace: TraceLink::of(&outcome),
        outcome,
        verdicts,
        failed_here: false,
    }
}

/// An attempt whose workspace could not be made: unfinished, with no workspace of its own,
/// failed here rather than by the daemon.
fn not_prepared(plan: &Plan<'_>, error: String) -> AttemptRecord {
    let mut record = unfinished(plan, error, Outcome::default());
    record.workspace = String::new();
    record.workspace_kept = false;
    record.failed_here = true;
    record
}

/// The record of an attempt that could not finish; its workspace is named when it was made.
pub fn unfinished(plan: &Plan<'_>, error: String, outcome: Outcome) -> AttemptRecord {
    let made = plan.workspace.is_dir();
    AttemptRecord {
        task: plan.task.id.clone(),
        repeat: plan.repeat,
        status: AttemptStatus::Unfinished,
        run_id: outcome.run_id.clone(),
        error: Some(error),
        workspace: if made {
            plan.workspace.to_string_lossy().into_owned()
        } else {
            String::new()
        },
        workspace_kept: made,
        trace: TraceLink::of(&outcome),
        outcome,
        verdicts: Vec::new(),
        failed_here: false,
    }
}

/// Makes the attempt's workspace at `dest` — a copy of the fixture, or an empty directory —
/// and returns it as the daemon checks it: absolute, symlinks resolved, UTF-8.
fn prepare(fixture: Option<&Fixture>, dest: &Path) -> Result<PathBuf, String> {
    let failed = |error: &dyn std::fmt::Display| {
        format!("cannot prepare the workspace {}: {error}", dest.display())
    };
    match fixture {
        Some(fixture) => fixture.materialize(dest).map_err(|error| failed(&error))?,
        None => {
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(|error| failed(&error))?;
            }
            std::fs::create_dir(dest).map_err(|error| failed(&error))?;
        }
    }
    let resolved = std::fs::canonicalize(dest).map_err(|error| failed(&error))?;
    if resolved.to_str().is_none() {
        return Err(failed(&"the path is not UTF-8, which the API requires"));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use airlock_client::proto::{ApprovalPolicy, Budgets};

    use super::super::approver::Approver;
    use super::super::grader::tests::FakeDaemon;
    use super::super::grader::{Grader, GraderSpec};
    use super::super::price::{Cost, Price};
    use super::super::suite::Model;
    use super::super::suite::Settings;
    use super::*;

    fn task(graders: &[&str]) -> anyhow::Result<Task> {
        let graders: Vec<Box<dyn Grader>> = graders
            .iter()
            .map(|yaml| {
                let spec: GraderSpec = serde_norway::from_str(yaml)?;
                spec.build(Path::new("."))
                    .map_err(|problem| anyhow::anyhow!("{problem}"))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Task {
            id: "read".to_owned(),
            input: "What does mean() do?".to_owned(),
            fixture: None,
            settings: Settings {
                model: Model {
                    config: airlock_client::proto::ModelConfig {
                        model: "replay".to_owned(),
                        ..Default::default()
                    },
                    priced_as: Some("openai:gpt-4o".to_owned()),
                    name: "replay:c.json".to_owned(),
                },
                policy: ApprovalPolicy::Risky,
                budgets: Budgets::default(),
                approver: Approver::ApproveAll,
                repeats: 1,
                tools: vec!["read_file".to_owned()],
                instructions: String::new(),
                stop_on_denial: false,
                timeout: Duration::from_secs(5),
            },
            graders,
        })
    }

    #[tokio::test]
    async fn an_attempt_runs_in_a_fresh_workspace_is_priced_and_graded() -> anyhow::Result<()> {
        let task = task(&["answer_contains: average", "stop_reason: final"])?;
        let daemon = FakeDaemon {
            run_outcome: Outcome {
                run_id: "run_9".to_owned(),
                trace_id: "trace_9".to_owned(),
                model: "replay".to_owned(),
                final_text: "It returns the average.".to_owned(),
                stop_reason: Some("final".to_owned()),
                steps: 2,
                input_tokens: 1_000_000,
                ..Outcome::default()
            },
            ..FakeDaemon::default()
        };
        let prices = Prices(
            [(
                "openai:gpt-4o".to_owned(),
                Price {
                    input: 2.5,
                    output: 10.0,
                },
            )]
            .into(),
        );
        let gone = RefCell::new(None);
        let (progress, mut lines) = tokio::sync::mpsc::unbounded_channel();
        let env = Env {
            daemon: &daemon,
            prices: &prices,
            gone: &gone,
            progress: &progress,
        };
        let dir = tempfile::tempdir()?;
        let plan = Plan {
            number: 1,
            total: 1,
            task: &task,
            repeat: 1,
            workspace: dir.path().join("scratch/read-1"),
        };
        let record = run(&plan, &env).await;
        assert_eq!(record.status, AttemptStatus::Passed, "{record:?}");
        assert_eq!(record.outcome.priced_model, "openai:gpt-4o");
        assert_eq!(record.outcome.cost_usd, Cost::Usd(2.5));
        assert_eq!(
            record.trace.as_ref().map(|trace| trace.command.as_str()),
            Some("airlock runs trace run_9")
        );
        assert_eq!(record.verdicts.len(), 2);
        assert!(dir.path().join("scratch/read-1").is_dir());
        let runs = daemon.runs.borrow();
        let (start, approver) = &runs[0];
        assert_eq!(
            Path::new(&start.workspace),
            std::fs::canonicalize(dir.path())?.join("scratch/read-1")
        );
        assert_eq!(start.tools, ["read_file"]);
        assert_eq!(*approver, Approver::ApproveAll);
        assert_eq!(
            lines.try_recv().ok().as_deref(),
            Some("[1/1] read #1 started (replay:c.json)")
        );
        assert_eq!(plan.ended_line(&record), "[1/1] read #1 PASS 2 steps 0.0 s");
        Ok(())
    }

    #[tokio::test]
    async fn a_failed_grader_fails_the_attempt_and_a_gone_daemon_skips_it() -> anyhow::Result<()> {
        let task = task(&["stop_reason: final", "max_steps: 3"])?;
        let daemon = FakeDaemon {
            run_outcome: Outcome {
                stop_reason: Some("max_steps".to_owned()),
                steps: 20,
                ..Outcome::default()
            },
            ..FakeDaemon::default()
        };
        let prices = Prices::default();
        let gone = RefCell::new(None);
        let (progress, _lines) = tokio::sync::mpsc::unbounded_channel();
        let env = Env {
            daemon: &daemon,
            prices: &prices,
            gone: &gone,
            progress: &progress,
        };
        let dir = tempfile::tempdir()?;
        let plan = Plan {
            number: 2,
            total: 4,
            task: &task,
            repeat: 2,
            workspace: dir.path().join("read-2"),
        };
        let record = run(&plan, &env).await;
        assert_eq!(record.status, AttemptStatus::Failed);
        assert_eq!(record.outcome.cost_usd, Cost::Unknown);
        assert_eq!(
            plan.ended_line(&record),
            "[2/4] read #2 FAIL 20 steps 0.0 s: stop_reason: expected final, got max_steps \
             (and 1 more)"
        );

        *gone.borrow_mut() = Some("cannot reach airlockd".to_owned());
        let plan = Plan {
            workspace: dir.path().join("read-3"),
            ..plan
        };
        let record = run(&plan, &env).await;
        assert_eq!(record.status, AttemptStatus::Unfinished);
        assert_eq!(
            record.error.as_deref(),
            Some("not run: cannot reach airlockd")
        );
        assert!(!dir.path().join("read-3").exists());
        assert_eq!(
            plan.ended_line(&record),
            "[2/4] read #2 UNFINISHED: not run: cannot reach airlockd"
        );
        Ok(())
    }
}
