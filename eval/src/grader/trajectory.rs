//! The trajectory graders: what the run did on its way, from its recorded tool calls, steps
//! and stop reason — `tool_called` (optionally with a status), `tool_not_called`,
//! `no_denied_call`, `no_tool_error`, `max_steps` and `stop_reason`.

use std::fmt;

use async_trait::async_trait;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::super::outcome::{Outcome, STOP_REASONS, TOOL_STATUSES, ToolCall};
use super::grading::{GradeContext, Grader, Verdict};
use crate::problem::Problem;

/// Calls a failed verdict lists.
const MAX_LISTED: usize = 5;

/// `tool_called: NAME` or `tool_called: {tool: NAME, status: DENIED}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCalledSpec {
    pub tool: String,
    pub status: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCalledMap {
    tool: String,
    status: Option<String>,
}

impl<'de> Deserialize<'de> for ToolCalledSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;
        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = ToolCalledSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool's name, or {tool: NAME, status: STATUS}")
            }
            fn visit_str<E: de::Error>(self, tool: &str) -> Result<ToolCalledSpec, E> {
                Ok(ToolCalledSpec {
                    tool: tool.to_owned(),
                    status: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ToolCalledSpec, A::Error> {
                let spec = ToolCalledMap::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(ToolCalledSpec {
                    tool: spec.tool,
                    status: spec.status,
                })
            }
        }
        deserializer.deserialize_any(SpecVisitor)
    }
}

fn check_tool(field: &str, tool: &str) -> Result<(), Problem> {
    if tool.is_empty() {
        return Err(Problem::invalid(field, "the tool's name is empty"));
    }
    Ok(())
}

/// `name (STATUS)` for each call, the first few.
fn list_calls<'a>(calls: impl Iterator<Item = &'a ToolCall>) -> String {
    let calls: Vec<&ToolCall> = calls.collect();
    if calls.is_empty() {
        return "none".to_owned();
    }
    let mut listed: Vec<String> = calls
        .iter()
        .take(MAX_LISTED)
        .map(|call| {
            if call.error.is_empty() {
                format!("{} ({})", call.tool, call.status)
            } else {
                format!(
                    "{} ({}: {})",
                    call.tool,
                    call.status,
                    airlock_render::cut(&call.error, 80)
                )
            }
        })
        .collect();
    if calls.len() > MAX_LISTED {
        listed.push(format!("… and {} more", calls.len() - MAX_LISTED));
    }
    listed.join(", ")
}

pub struct ToolCalled {
    spec: ToolCalledSpec,
}

impl ToolCalled {
    pub fn new(spec: ToolCalledSpec) -> Result<ToolCalled, Problem> {
        check_tool("tool_called", &spec.tool)?;
        if let Some(status) = &spec.status
            && !TOOL_STATUSES.contains(&status.as_str())
        {
            return Err(Problem::invalid(
                "tool_called.status",
                format!(
                    "unknown status `{status}`; the statuses are: {}",
                    TOOL_STATUSES.join(", ")
                ),
            ));
        }
        Ok(ToolCalled { spec })
    }
}

#[async_trait(?Send)]
impl Grader for ToolCalled {
    fn kind(&self) -> &'static str {
        "tool_called"
    }

    fn label(&self) -> String {
        match &self.spec.status {
            Some(status) => format!("tool_called {} {status}", self.spec.tool),
            None => format!("tool_called {}", self.spec.tool),
        }
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let calls = &cx.outcome.tool_calls;
        let matching = calls.iter().filter(|call| {
            call.tool == self.spec.tool
                && self
                    .spec
                    .status
                    .as_ref()
                    .is_none_or(|status| *status == call.status)
        });
        let count = matching.count();
        let what = match &self.spec.status {
            Some(status) => format!("{} with status {status}", self.spec.tool),
            None => self.spec.tool.clone(),
        };
        if count > 0 {
            return Verdict::pass(format!("{what} was called {count} time(s)"));
        }
        let same_tool = calls.iter().filter(|call| call.tool == self.spec.tool);
        if self.spec.status.is_some() && calls.iter().any(|call| call.tool == self.spec.tool) {
            return Verdict::fail(format!(
                "{what} was never called; its calls: {}",
                list_calls(same_tool)
            ));
        }
        Verdict::fail(format!(
            "{} was never called; the calls: {}",
            self.spec.tool,
            list_calls(calls.iter())
        ))
    }
}

pub struct ToolNotCalled {
    tool: String,
}

impl ToolNotCalled {
    pub fn new(tool: String) -> Result<ToolNotCalled, Problem> {
        check_tool("tool_not_called", &tool)?;
        Ok(ToolNotCalled { tool })
    }
}

#[async_trait(?Send)]
impl Grader for ToolNotCalled {
    fn kind(&self) -> &'static str {
        "tool_not_called"
    }

    fn label(&self) -> String {
        format!("tool_not_called {}", self.tool)
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let calls: Vec<&ToolCall> = cx
            .outcome
            .tool_calls
            .iter()
            .filter(|call| call.tool == self.tool)
            .collect();
        if calls.is_empty() {
            Verdict::pass(format!("{} was not called", self.tool))
        } else {
            Verdict::fail(format!(
                "{} was called {} time(s): {}",
                self.tool,
                calls.len(),
                list_calls(calls.into_iter())
            ))
        }
    }
}

pub struct NoDeniedCall;

#[async_trait(?Send)]
impl Grader for NoDeniedCall {
    fn kind(&self) -> &'static str {
        "no_denied_call"
    }

    fn label(&self) -> String {
        "no_denied_call".to_owned()
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let denied = cx.outcome.tool_calls.iter().filter(|call| call.denied);
        match denied.clone().count() {
            0 => Verdict::pass("no call was denied"),
            count => Verdict::fail(format!("{count} call(s) denied: {}", list_calls(denied))),
        }
    }
}

/// A call that ran (or tried to) and failed: any status but `OK` and `DENIED` (which
/// `no_denied_call` is about), a call still pending at the run's end included.
fn failed(call: &ToolCall) -> bool {
    call.status != "OK" && !call.denied
}

pub struct NoToolError;

#[async_trait(?Send)]
impl Grader for NoToolError {
    fn kind(&self) -> &'static str {
        "no_tool_error"
    }

    fn label(&self) -> String {
        "no_tool_error".to_owned()
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let failures = cx.outcome.tool_calls.iter().filter(|call| failed(call));
        match failures.clone().count() {
            0 => Verdict::pass("every call that ran succeeded"),
            count => Verdict::fail(format!("{count} call(s) failed: {}", list_calls(failures))),
        }
    }
}

pub struct MaxSteps {
    max: u32,
}

impl MaxSteps {
    pub fn new(max: u32) -> Result<MaxSteps, Problem> {
        if max == 0 {
            return Err(Problem::invalid("max_steps", "0 steps: no run can pass"));
        }
        Ok(MaxSteps { max })
    }
}

#[async_trait(?Send)]
impl Grader for MaxSteps {
    fn kind(&self) -> &'static str {
        "max_steps"
    }

    fn label(&self) -> String {
        format!("max_steps {}", self.max)
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let steps = cx.outcome.steps;
        if steps <= self.max {
            Verdict::pass(format!("{steps} step(s), at most {}", self.max))
        } else {
            Verdict::fail(format!("{steps} steps, more than {}", self.max))
        }
    }
}

pub struct StopReasonIs {
    expected: String,
}

impl StopReasonIs {
    pub fn new(expected: String) -> Result<StopReasonIs, Problem> {
        if !STOP_REASONS.contains(&expected.as_str()) {
            return Err(Problem::invalid(
                "stop_reason",
                format!(
                    "unknown stop reason `{expected}`; the reasons are: {}",
                    STOP_REASONS.join(", ")
                ),
            ));
        }
        Ok(StopReasonIs { expected })
    }
}

fn stop_of(outcome: &Outcome) -> String {
    let reason = outcome
        .stop_reason
        .as_deref()
        .unwrap_or("none (the run did not finish)");
    if outcome.stop_detail.is_empty() {
        reason.to_owned()
    } else {
        format!(
            "{reason} ({})",
            airlock_render::cut(&outcome.stop_detail, 120)
        )
    }
}

#[async_trait(?Send)]
impl Grader for StopReasonIs {
    fn kind(&self) -> &'static str {
        "stop_reason"
    }

    fn label(&self) -> String {
        format!("stop_reason {}", self.expected)
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        if cx.outcome.stop_reason.as_deref() == Some(self.expected.as_str()) {
            Verdict::pass(format!("stopped {}", self.expected))
        } else {
            Verdict::fail(format!(
                "expected {}, got {}",
                self.expected,
                stop_of(cx.outcome)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::{build, grade};
    use super::*;
    use crate::outcome::Outcome;

    fn call(tool: &str, status: &str) -> ToolCall {
        ToolCall {
            call_id: format!("call_{tool}"),
            tool: tool.to_owned(),
            status: status.to_owned(),
            denied: status == "DENIED",
            ..ToolCall::default()
        }
    }

    fn run(calls: Vec<ToolCall>, steps: u32, stop: &str) -> Outcome {
        Outcome {
            tool_calls: calls,
            steps,
            stop_reason: Some(stop.to_owned()),
            ..Outcome::default()
        }
    }

    #[tokio::test]
    async fn tool_called_with_and_without_a_status() -> anyhow::Result<()> {
        let outcome = run(
            vec![call("read_file", "OK"), call("write_file", "DENIED")],
            2,
            "final",
        );
        let dot = Path::new(".");
        assert!(
            grade(build("tool_called: read_file", dot)?.as_ref(), &outcome)
                .await
                .passed
        );
        let denied = build("tool_called: {tool: write_file, status: DENIED}", dot)?;
        assert!(grade(denied.as_ref(), &outcome).await.passed);
        let ok = build("tool_called: {tool: write_file, status: OK}", dot)?;
        let verdict = grade(ok.as_ref(), &outcome).await;
        assert!(!verdict.passed);
        assert_eq!(
            verdict.detail,
            "write_file with status OK was never called; its calls: write_file (DENIED)"
        );
        let verdict = grade(build("tool_called: grep", dot)?.as_ref(), &outcome).await;
        assert!(!verdict.passed);
        assert_eq!(
            verdict.detail,
            "grep was never called; the calls: read_file (OK), write_file (DENIED)"
        );
        assert!(build("tool_called: {tool: x, status: FINE}", dot).is_err());
        Ok(())
    }

    #[tokio::test]
    async fn tool_not_called_denials_and_errors() -> anyhow::Result<()> {
        let dot = Path::new(".");
        let clean = run(vec![call("read_file", "OK")], 1, "final");
        let messy = run(
            vec![
                call("read_file", "OK"),
                call("write_file", "DENIED"),
                call("grep", "TOOL_ERROR"),
            ],
            3,
            "final",
        );
        let not_called = build("tool_not_called: write_file", dot)?;
        assert!(grade(not_called.as_ref(), &clean).await.passed);
        let verdict = grade(not_called.as_ref(), &messy).await;
        assert_eq!(
            verdict.detail,
            "write_file was called 1 time(s): write_file (DENIED)"
        );

        let no_denied = build("no_denied_call: true", dot)?;
        assert!(grade(no_denied.as_ref(), &clean).await.passed);
        let verdict = grade(no_denied.as_ref(), &messy).await;
        assert!(!verdict.passed);
        assert_eq!(verdict.detail, "1 call(s) denied: write_file (DENIED)");

        let no_error = build("no_tool_error: true", dot)?;
        assert!(grade(no_error.as_ref(), &clean).await.passed);
        let verdict = grade(no_error.as_ref(), &messy).await;
        assert!(!verdict.passed);
        assert_eq!(verdict.detail, "1 call(s) failed: grep (TOOL_ERROR)");
        Ok(())
    }

    #[tokio::test]
    async fn steps_and_stop_reason() -> anyhow::Result<()> {
        let dot = Path::new(".");
        let outcome = Outcome {
            stop_detail: "20 steps".to_owned(),
            ..run(Vec::new(), 20, "max_steps")
        };
        let steps = build("max_steps: 5", dot)?;
        assert!(
            grade(steps.as_ref(), &run(Vec::new(), 5, "final"))
                .await
                .passed
        );
        let verdict = grade(steps.as_ref(), &outcome).await;
        assert_eq!(verdict, Verdict::fail("20 steps, more than 5"));

        let stop = build("stop_reason: final", dot)?;
        assert!(
            grade(stop.as_ref(), &run(Vec::new(), 1, "final"))
                .await
                .passed
        );
        let verdict = grade(stop.as_ref(), &outcome).await;
        assert_eq!(
            verdict,
            Verdict::fail("expected final, got max_steps (20 steps)")
        );
        let Err(error) = build("stop_reason: done", dot) else {
            panic!("an unknown stop reason was accepted");
        };
        assert!(
            error.to_string().contains("unknown stop reason `done`"),
            "{error}"
        );
        Ok(())
    }
}
