//! What every grader shares: the [`Grader`] trait, the [`Verdict`] it gives, the
//! [`GradeContext`] it looks at, and [`quoted`] for a verdict's detail. The grader families
//! (`answer`, `workspace`, `trajectory`, `budget`, `egress`, `judge`) use this module, and it
//! uses none of them.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;

use crate::daemon::EvalDaemon;
use crate::outcome::Outcome;

/// A grader's judgement of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub passed: bool,
    /// What was found: for a failure, what was expected and what came instead.
    pub detail: String,
}

impl Verdict {
    pub fn pass(detail: impl Into<String>) -> Verdict {
        Verdict {
            passed: true,
            detail: detail.into(),
        }
    }

    pub fn fail(detail: impl Into<String>) -> Verdict {
        Verdict {
            passed: false,
            detail: detail.into(),
        }
    }
}

/// What a grader may look at.
pub struct GradeContext<'a> {
    /// The task's input.
    pub input: &'a str,
    pub outcome: &'a Outcome,
    /// The attempt's workspace after the run, as the daemon sees it (absolute, symlinks
    /// resolved; the eval and the daemon share the host).
    pub workspace: &'a Path,
    pub daemon: &'a dyn EvalDaemon,
    /// How long a grader's own run may take (the task's `timeout_s`).
    pub timeout: Duration,
}

#[async_trait(?Send)]
pub trait Grader {
    /// The grader's name in a suite: `answer_contains`, `stop_reason`, …
    fn kind(&self) -> &'static str;

    /// The grader with its parameters, as reports name it: `stop_reason final`.
    fn label(&self) -> String;

    /// Whether grading the same run twice gives the same verdict.
    fn deterministic(&self) -> bool {
        true
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict;
}

/// `text` quoted, cut to `max` characters, for a verdict's detail.
pub fn quoted(text: &str, max: usize) -> String {
    let folded = airlock_render::fold_whitespace(text);
    format!("{:?}", airlock_render::cut(&folded, max))
}
