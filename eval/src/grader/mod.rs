//! Graders: what decides whether an attempt passed. Each is a plugin behind one trait,
//! [`Grader`], built from one entry of a task's `graders` list and asked, after the run, for
//! a [`Verdict`](grading::Verdict) on what the run did ([`GradeContext`]). One module per
//! family:
//!
//! - [`answer`] — `answer_contains`, `answer_matches`, `answer_json`;
//! - [`workspace`] — `file_equals`, `tree_equals`, `command` (run through the daemon);
//! - [`trajectory`] — `tool_called`, `tool_not_called`, `no_denied_call`, `no_tool_error`,
//!   `max_steps`, `stop_reason`;
//! - [`budget`] — `budget`;
//! - [`egress`] — `no_egress`;
//! - [`judge`] — `llm_judge`, the one grader whose verdict can differ between two gradings of
//!   the same run, which every report marks.
//!
//! The trait, the verdict and the context every family shares are in [`grading`], which
//! uses none of them; this module reads a task's `graders` list and builds each family's
//! graders.
//!
//! A grader is checked when the suite loads (a bad regex, schema, stop reason or missing
//! expected file stops the suite before anything runs); grading itself never fails: what
//! goes wrong is a failed verdict saying what.

mod answer;
mod budget;
mod egress;
mod grading;
mod judge;
mod trajectory;
mod workspace;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::problem::Problem;

pub use grading::{GradeContext, Grader};

/// One entry of a task's `graders`, as written: a map with one key, the grader's name.
#[derive(Debug, Clone, PartialEq)]
pub enum GraderSpec {
    AnswerContains(String),
    AnswerMatches(String),
    AnswerJson(answer::JsonSpec),
    FileEquals(workspace::FileEqualsSpec),
    TreeEquals(PathBuf),
    Command(workspace::CommandSpec),
    ToolCalled(trajectory::ToolCalledSpec),
    ToolNotCalled(String),
    NoDeniedCall(bool),
    NoToolError(bool),
    MaxSteps(u32),
    StopReason(String),
    Budget(budget::BudgetSpec),
    NoEgress(bool),
    LlmJudge(judge::JudgeSpec),
}

/// Every grader's name, as suites write them.
pub const GRADERS: [&str; 15] = [
    "answer_contains",
    "answer_matches",
    "answer_json",
    "file_equals",
    "tree_equals",
    "command",
    "tool_called",
    "tool_not_called",
    "no_denied_call",
    "no_tool_error",
    "max_steps",
    "stop_reason",
    "budget",
    "no_egress",
    "llm_judge",
];

impl<'de> Deserialize<'de> for GraderSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SpecVisitor)
    }
}

struct SpecVisitor;

impl SpecVisitor {
    fn unknown<E: de::Error>(name: &str) -> E {
        E::custom(format!(
            "unknown grader `{name}`; the graders are: {}",
            GRADERS.join(", ")
        ))
    }
}

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = GraderSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a grader: a map with one key, the grader's name (`answer_contains: TEXT`)")
    }

    /// `- no_egress` alone, for the graders that take no parameter.
    fn visit_str<E: de::Error>(self, name: &str) -> Result<GraderSpec, E> {
        match name {
            "no_denied_call" => Ok(GraderSpec::NoDeniedCall(true)),
            "no_tool_error" => Ok(GraderSpec::NoToolError(true)),
            "no_egress" => Ok(GraderSpec::NoEgress(true)),
            name if GRADERS.contains(&name) => Err(E::custom(format!(
                "grader `{name}` needs a value: `{name}: …`"
            ))),
            name => Err(Self::unknown(name)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GraderSpec, A::Error> {
        let Some(name) = map.next_key::<String>()? else {
            return Err(de::Error::custom(
                "a grader is a map with one key, the grader's name; this one is empty",
            ));
        };
        let spec = match name.as_str() {
            "answer_contains" => GraderSpec::AnswerContains(map.next_value()?),
            "answer_matches" => GraderSpec::AnswerMatches(map.next_value()?),
            "answer_json" => GraderSpec::AnswerJson(map.next_value()?),
            "file_equals" => GraderSpec::FileEquals(map.next_value()?),
            "tree_equals" => GraderSpec::TreeEquals(map.next_value()?),
            "command" => GraderSpec::Command(map.next_value()?),
            "tool_called" => GraderSpec::ToolCalled(map.next_value()?),
            "tool_not_called" => GraderSpec::ToolNotCalled(map.next_value()?),
            "no_denied_call" => GraderSpec::NoDeniedCall(map.next_value()?),
            "no_tool_error" => GraderSpec::NoToolError(map.next_value()?),
            "max_steps" => GraderSpec::MaxSteps(map.next_value()?),
            "stop_reason" => GraderSpec::StopReason(map.next_value()?),
            "budget" => GraderSpec::Budget(map.next_value()?),
            "no_egress" => GraderSpec::NoEgress(map.next_value()?),
            "llm_judge" => GraderSpec::LlmJudge(map.next_value()?),
            other => return Err(Self::unknown(other)),
        };
        if let Some(another) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "one grader per list entry: `{name}` and `{another}` are in the same one; \
                 start `{another}` on a line of its own with `- `"
            )));
        }
        Ok(spec)
    }
}

impl GraderSpec {
    /// The grader, checked; paths it names are relative to `base`. A problem's field is
    /// relative to the grader's entry (`answer_matches`).
    pub fn build(self, base: &Path) -> Result<Box<dyn Grader>, Problem> {
        Ok(match self {
            Self::AnswerContains(text) => Box::new(answer::Contains::new(text)?),
            Self::AnswerMatches(pattern) => Box::new(answer::Matches::new(&pattern)?),
            Self::AnswerJson(spec) => Box::new(answer::Json::new(spec)?),
            Self::FileEquals(spec) => Box::new(workspace::FileEquals::new(spec, base)?),
            Self::TreeEquals(dir) => Box::new(workspace::TreeEquals::new(&dir, base)?),
            Self::Command(spec) => Box::new(workspace::Command::new(spec)?),
            Self::ToolCalled(spec) => Box::new(trajectory::ToolCalled::new(spec)?),
            Self::ToolNotCalled(tool) => Box::new(trajectory::ToolNotCalled::new(tool)?),
            Self::NoDeniedCall(on) => {
                switched_on("no_denied_call", on)?;
                Box::new(trajectory::NoDeniedCall)
            }
            Self::NoToolError(on) => {
                switched_on("no_tool_error", on)?;
                Box::new(trajectory::NoToolError)
            }
            Self::MaxSteps(max) => Box::new(trajectory::MaxSteps::new(max)?),
            Self::StopReason(name) => Box::new(trajectory::StopReasonIs::new(name)?),
            Self::Budget(spec) => Box::new(budget::Budget::new(spec)?),
            Self::NoEgress(on) => {
                switched_on("no_egress", on)?;
                Box::new(egress::NoEgress)
            }
            Self::LlmJudge(spec) => Box::new(judge::LlmJudge::new(spec, base)?),
        })
    }
}

/// A grader written `name: false` checks nothing, which is more likely a slip than a wish.
fn switched_on(name: &str, on: bool) -> Result<(), Problem> {
    if on {
        Ok(())
    } else {
        Err(Problem::invalid(
            name,
            format!("`{name}: false` checks nothing; write `{name}: true` or leave it out"),
        ))
    }
}

#[cfg(test)]
pub mod tests {
    use std::cell::RefCell;
    use std::time::Duration;

    use airlock_client::ClientError;
    use airlock_client::proto::{ExecuteToolRequest, StartRun, ToolResult};
    use async_trait::async_trait;

    use super::super::approver::Approver;
    use super::super::daemon::{EvalDaemon, Followed, RunEnd};
    use super::super::outcome::Outcome;
    use super::grading::Verdict;
    use super::*;

    /// A daemon stand-in: answers runs and tool calls as told, and keeps what it was asked.
    #[derive(Default)]
    pub struct FakeDaemon {
        pub run_outcome: Outcome,
        pub tool_result: ToolResult,
        pub runs: RefCell<Vec<(StartRun, Approver)>>,
        pub executions: RefCell<Vec<ExecuteToolRequest>>,
    }

    #[async_trait(?Send)]
    impl EvalDaemon for FakeDaemon {
        async fn run(&self, start: StartRun, approver: &Approver, _timeout: Duration) -> Followed {
            self.runs.borrow_mut().push((start, approver.clone()));
            Followed {
                outcome: self.run_outcome.clone(),
                end: RunEnd::Finished,
            }
        }

        async fn execute_tool(
            &self,
            request: ExecuteToolRequest,
        ) -> Result<ToolResult, ClientError> {
            self.executions.borrow_mut().push(request);
            Ok(self.tool_result.clone())
        }
    }

    /// Grades `outcome` (in `workspace`) with `grader` against a daemon stand-in.
    pub async fn grade_with(
        grader: &dyn Grader,
        outcome: &Outcome,
        workspace: &Path,
        daemon: &dyn EvalDaemon,
    ) -> Verdict {
        let cx = GradeContext {
            input: "What does mean() do?",
            outcome,
            workspace,
            daemon,
            timeout: Duration::from_secs(5),
        };
        grader.grade(&cx).await
    }

    pub async fn grade(grader: &dyn Grader, outcome: &Outcome) -> Verdict {
        grade_with(
            grader,
            outcome,
            Path::new("/nonexistent"),
            &FakeDaemon::default(),
        )
        .await
    }

    /// The grader of one YAML entry, built relative to `base`.
    pub fn build(yaml: &str, base: &Path) -> anyhow::Result<Box<dyn Grader>> {
        let spec: GraderSpec = serde_norway::from_str(yaml)?;
        spec.build(base)
            .map_err(|problem| anyhow::anyhow!("{problem}"))
    }

    #[test]
    fn a_grader_is_a_map_with_one_known_key() {
        let spec: Result<GraderSpec, _> = serde_norway::from_str("answer_contains: mean");
        assert_eq!(
            spec.ok(),
            Some(GraderSpec::AnswerContains("mean".to_owned()))
        );
        let spec: Result<GraderSpec, _> = serde_norway::from_str("no_egress");
        assert_eq!(spec.ok(), Some(GraderSpec::NoEgress(true)));
        let Err(error) = serde_norway::from_str::<GraderSpec>("answer_contain: mean") else {
            panic!("an unknown grader was read");
        };
        assert!(
            error
                .to_string()
                .contains("unknown grader `answer_contain`"),
            "{error}"
        );
        let Err(error) = serde_norway::from_str::<GraderSpec>("{max_steps: 3, no_egress: true}")
        else {
            panic!("two graders in one entry were read");
        };
        assert!(
            error.to_string().contains("one grader per list entry"),
            "{error}"
        );
        let spec: Result<GraderSpec, _> = serde_norway::from_str("no_egress: false");
        let Err(problem) = spec.map_err(anyhow::Error::from).and_then(|spec| {
            spec.build(Path::new("."))
                .map(|_| ())
                .map_err(|problem| anyhow::anyhow!("{problem}"))
        }) else {
            panic!("`no_egress: false` was accepted");
        };
        assert!(problem.to_string().contains("checks nothing"), "{problem}");
    }
}
