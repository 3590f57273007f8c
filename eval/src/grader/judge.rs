//! `llm_judge: {model, rubric}`: a model reads the task and the agent's final answer and
//! says PASS or FAIL. It is the one grader whose verdict may change between two gradings of
//! the same run, and every report says so.
//!
//! The judge is a run of its own through the daemon, in the attempt's workspace, where no
//! tool runs: every call is put to approval (policy `always`), denied by the eval, and ends
//! the judge's run (`stop_on_denial`). The rubric is its instructions, with the answer format
//! added; the verdict is the first word of its final text.

use airlock_client::proto::{ApprovalPolicy, Budgets, StartRun};
use async_trait::async_trait;
use serde::Deserialize;

use super::super::approver::Approver;
use super::super::daemon::RunEnd;
use super::grading::{GradeContext, Grader, Verdict, quoted};
use crate::model::{Model, ModelSpec};
use crate::problem::Problem;

/// Added to the rubric: the one format the verdict is read from.
pub const ANSWER_FORMAT: &str = "Answer PASS or FAIL on the first line, then why.";

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeSpec {
    pub model: ModelSpec,
    pub rubric: String,
}

pub struct LlmJudge {
    model: Model,
    rubric: String,
}

impl LlmJudge {
    pub fn new(spec: JudgeSpec, base: &std::path::Path) -> Result<LlmJudge, Problem> {
        if spec.rubric.trim().is_empty() {
            return Err(Problem::invalid("llm_judge.rubric", "the rubric is empty"));
        }
        let model = spec.model.resolve(base, "llm_judge.model")?;
        Ok(LlmJudge {
            model,
            rubric: spec.rubric,
        })
    }

    /// The judge's run: the attempt's task and answer as input, the rubric as instructions.
    pub fn start(&self, cx: &GradeContext<'_>) -> StartRun {
        StartRun {
            workspace: cx.workspace.to_string_lossy().into_owned(),
            input: format!(
                "The task given to an agent:\n{}\n\nThe agent's final answer:\n{}",
                cx.input, cx.outcome.final_text
            ),
            model: Some(self.model.config.clone()),
            approval_policy: ApprovalPolicy::Always as i32,
            budgets: Some(Budgets::default()),
            stop_on_denial: true,
            instructions: format!("{}\n\n{ANSWER_FORMAT}", self.rubric.trim_end()),
            ..StartRun::default()
        }
    }
}

/// The judge's verdict word: its text's first word, without Markdown emphasis or headings.
fn verdict_word(text: &str) -> String {
    text.trim_start()
        .trim_start_matches(['*', '#', '_', '`', ' '])
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_uppercase()
}

#[async_trait(?Send)]
impl Grader for LlmJudge {
    fn kind(&self) -> &'static str {
        "llm_judge"
    }

    fn label(&self) -> String {
        format!("llm_judge {}", self.model.name)
    }

    fn deterministic(&self) -> bool {
        false
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let judged = cx
            .daemon
            .run(self.start(cx), &Approver::DenyAll, cx.timeout)
            .await;
        let judge = &judged.outcome;
        let run = if judge.run_id.is_empty() {
            "the judge".to_owned()
        } else {
            format!("judge run {}", judge.run_id)
        };
        if let RunEnd::Unfinished(failure) = &judged.end {
            return Verdict::fail(format!("{run} did not finish: {}", failure.error));
        }
        if judge.stop_reason.as_deref() != Some("final") {
            return Verdict::fail(format!(
                "{run} gave no verdict: it stopped {} {}",
                judge
                    .stop_reason
                    .as_deref()
                    .unwrap_or("without a stop reason"),
                quoted(&judge.stop_detail, 120)
            ));
        }
        let says = quoted(&judge.final_text, 200);
        match verdict_word(&judge.final_text).as_str() {
            "PASS" => Verdict::pass(format!("{run}: {says}")),
            "FAIL" => Verdict::fail(format!("{run}: {says}")),
            _ => Verdict::fail(format!("{run} answered neither PASS nor FAIL: {says}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::{FakeDaemon, build, grade_with};
    use super::*;
    use crate::outcome::Outcome;

    fn judge_says(text: &str, stop: &str) -> FakeDaemon {
        FakeDaemon {
            run_outcome: Outcome {
                run_id: "run_judge".to_owned(),
                final_text: text.to_owned(),
                stop_reason: Some(stop.to_owned()),
                ..Outcome::default()
            },
            ..FakeDaemon::default()
        }
    }

    #[tokio::test]
    async fn the_judge_runs_without_tools_and_its_first_word_decides() -> anyhow::Result<()> {
        let grader = build(
            "llm_judge: {model: \"openai:gpt-4o-mini\", rubric: \"The answer names the mean.\"}",
            Path::new("."),
        )?;
        assert!(!grader.deterministic());
        let answer = Outcome {
            final_text: "mean() returns the average".to_owned(),
            ..Outcome::default()
        };
        let daemon = judge_says("**PASS**\nIt names the mean.", "final");
        let verdict = grade_with(grader.as_ref(), &answer, Path::new("/ws"), &daemon).await;
        assert!(verdict.passed, "{verdict:?}");
        assert!(
            verdict.detail.starts_with("judge run run_judge: "),
            "{verdict:?}"
        );

        {
            let runs = daemon.runs.borrow();
            let (start, approver) = &runs[0];
            assert_eq!(*approver, Approver::DenyAll);
            assert_eq!(start.approval_policy, ApprovalPolicy::Always as i32);
            assert!(start.stop_on_denial);
            assert_eq!(start.workspace, "/ws");
            assert!(
                start.input.contains("What does mean() do?"),
                "{}",
                start.input
            );
            assert!(
                start.input.contains("mean() returns the average"),
                "{}",
                start.input
            );
            assert_eq!(
                start.instructions,
                format!("The answer names the mean.\n\n{ANSWER_FORMAT}")
            );
            assert_eq!(
                start.model.as_ref().map(|model| model.model.as_str()),
                Some("openai:gpt-4o-mini")
            );
        }

        let daemon = judge_says("FAIL: it describes the median", "final");
        assert!(
            !grade_with(grader.as_ref(), &answer, Path::new("/ws"), &daemon)
                .await
                .passed
        );
        let daemon = judge_says("", "permission_denied");
        let verdict = grade_with(grader.as_ref(), &answer, Path::new("/ws"), &daemon).await;
        assert!(!verdict.passed);
        assert!(verdict.detail.contains("gave no verdict"), "{verdict:?}");
        let daemon = judge_says("Passable, I guess", "final");
        assert!(
            !grade_with(grader.as_ref(), &answer, Path::new("/ws"), &daemon)
                .await
                .passed
        );
        Ok(())
    }
}
