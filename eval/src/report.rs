//! The record of one `airlock eval run`, as `report.json` holds it and `airlock eval compare`
//! reads it back: the suite and configuration, every attempt with what its run did and each
//! grader's verdict, per task and over the whole suite the pass rate with its 95% Wilson
//! interval and the means of steps, tokens, cost and wall time, the thresholds checked, and
//! the exit code the run ended with.
//!
//! An attempt is `passed` (every grader passed), `failed` (one did not, or the run passed its
//! `timeout_s`), or `unfinished` (the daemon could not be reached or went away, or the run
//! could not be followed to its end; `error` says why). A pass rate counts every attempt: an
//! unfinished one is not a pass.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::outcome::Outcome;
use super::price::Cost;
use super::stats::Rate;

/// The version of this layout; `compare` refuses others.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub format: u32,
    pub suite: String,
    pub description: String,
    pub suite_file: String,
    /// The directory name of this result: `<started, UTC>-<label>`.
    pub result_id: String,
    /// The configuration's name: `--label`, else the variant file's stem, else `base`.
    pub label: String,
    pub variant: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    pub endpoint: String,
    pub status: AttemptStatus,
    pub exit_code: u8,
    pub workspaces: Workspaces,
    pub thresholds: Vec<ThresholdCheck>,
    pub totals: Aggregate,
    /// Per grader kind, over every attempt.
    pub graders: Vec<GraderSummary>,
    pub tasks: Vec<TaskReport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    Passed,
    Failed,
    Unfinished,
}

impl AttemptStatus {
    pub fn word(self) -> &'static str {
        match self {
            Self::Passed => "PASS",
            Self::Failed => "FAIL",
            Self::Unfinished => "UNFINISHED",
        }
    }
}

/// Where attempts ran, and which copies were left there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workspaces {
    pub root: String,
    /// `all` (`--keep-workspaces`) or `failed` (the copies of failed and unfinished attempts
    /// are kept to look into; passed ones are removed).
    pub kept: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThresholdCheck {
    /// `pass_rate` or `max_cost_usd`.
    pub name: String,
    pub limit: f64,
    pub actual: Option<f64>,
    pub passed: bool,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskReport {
    pub id: String,
    pub input: String,
    pub model: String,
    pub policy: String,
    pub approver: String,
    pub repeats: u32,
    /// Two attempts may end differently (the reasons say why: repeats, a judge, a live
    /// model); compare pass rates with their intervals, not one by one.
    pub nondeterministic: bool,
    pub nondeterministic_reasons: Vec<String>,
    pub graders: Vec<GraderInfo>,
    pub summary: Aggregate,
    pub attempts: Vec<AttemptRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraderInfo {
    pub kind: String,
    pub label: String,
    pub deterministic: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptRecord {
    pub task: String,
    /// 1 for the first attempt of the task.
    pub repeat: u32,
    pub status: AttemptStatus,
    /// The attempt's run, as in `outcome` and `trace`; empty when no run started.
    pub run_id: String,
    /// Why it is unfinished.
    pub error: Option<String>,
    pub workspace: String,
    pub workspace_kept: bool,
    /// The run's trace; `None` when no run started.
    pub trace: Option<TraceLink>,
    pub outcome: Outcome,
    pub verdicts: Vec<VerdictRecord>,
    /// The attempt never reached the daemon for a reason of this machine's (its workspace
    /// could not be made): what the exit code tells from the daemon's unavailability. Not
    /// written to the report.
    #[serde(skip)]
    pub failed_here: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceLink {
    pub run_id: String,
    pub trace_id: String,
    /// The command that shows it.
    pub command: String,
}

impl TraceLink {
    pub fn of(outcome: &Outcome) -> Option<TraceLink> {
        (!outcome.run_id.is_empty()).then(|| TraceLink {
            run_id: outcome.run_id.clone(),
            trace_id: outcome.trace_id.clone(),
            command: format!("airlock runs trace {}", outcome.run_id),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictRecord {
    /// The grader's kind (`stop_reason`), or `timeout` for a run that passed `timeout_s`.
    pub grader: String,
    pub label: String,
    pub deterministic: bool,
    pub passed: bool,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraderSummary {
    pub grader: String,
    pub deterministic: bool,
    pub passed: u32,
    pub failed: u32,
}

/// Counts and means over a set of attempts. Means are over the attempts whose run finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aggregate {
    pub attempts: u32,
    pub passed: u32,
    pub failed: u32,
    pub unfinished: u32,
    /// Passed over all attempts, with its 95% Wilson interval; `None` for no attempts.
    pub pass_rate: Option<Rate>,
    pub mean_steps: Option<f64>,
    pub mean_tokens: Option<f64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The cost of the attempts whose cost is known.
    pub cost_usd: f64,
    /// Attempts whose cost is unknown (no price for their model): `cost_usd` leaves them out.
    pub cost_unknown: u32,
    /// `None` when a finished attempt's cost is unknown.
    pub mean_cost_usd: Option<f64>,
    pub wall_s: f64,
    pub mean_wall_s: Option<f64>,
    /// How the finished runs stopped: `final: 3`.
    pub stop_reasons: BTreeMap<String, u32>,
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty())
        .then(|| values.iter().fold(0.0, |total, value| total + value) / values.len() as f64)
}

impl Aggregate {
    pub fn of<'a>(attempts: impl IntoIterator<Item = &'a AttemptRecord>) -> Aggregate {
        let attempts: Vec<&AttemptRecord> = attempts.into_iter().collect();
        let count = |status| {
            attempts
                .iter()
                .filter(|attempt| attempt.status == status)
                .count() as u32
        };
        let (passed, failed, unfinished) = (
            count(AttemptStatus::Passed),
            count(AttemptStatus::Failed),
            count(AttemptStatus::Unfinished),
        );
        let finished: Vec<&Outcome> = attempts
            .iter()
            .map(|attempt| &attempt.outcome)
            .filter(|outcome| outcome.finished())
            .collect();
        let of_finished = |value: fn(&Outcome) -> f64| {
            mean(
                &finished
                    .iter()
                    .map(|outcome| value(outcome))
                    .collect::<Vec<_>>(),
            )
        };
        let costs: Vec<Cost> = finished.iter().map(|outcome| outcome.cost_usd).collect();
        let known: Vec<f64> = costs.iter().filter_map(|cost| cost.usd()).collect();
        let mut stop_reasons = BTreeMap::new();
        for outcome in &finished {
            if let Some(reason) = &outcome.stop_reason {
                *stop_reasons.entry(reason.clone()).or_insert(0) += 1;
            }
        }
        Aggregate {
            attempts: attempts.len() as u32,
            passed,
            failed,
            unfinished,
            pass_rate: Rate::of(passed, attempts.len() as u32),
            mean_steps: of_finished(|outcome| f64::from(outcome.steps)),
            mean_tokens: of_finished(|outcome| outcome.tokens() as f64),
            input_tokens: attempts.iter().map(|a| a.outcome.input_tokens).sum(),
            output_tokens: attempts.iter().map(|a| a.outcome.output_tokens).sum(),
            // Folded from +0.0: an empty f64 sum is -0.0, which prints as "-0".
            cost_usd: attempts
                .iter()
                .filter_map(|attempt| attempt.outcome.cost_usd.usd())
                .fold(0.0, |total, usd| total + usd),
            cost_unknown: attempts
                .iter()
                .filter(|attempt| {
                    attempt.outcome.finished() && attempt.outcome.cost_usd.usd().is_none()
                })
                .count() as u32,
            mean_cost_usd: if known.len() == costs.len() {
                mean(&known)
            } else {
                None
            },
            wall_s: attempts
                .iter()
                .map(|attempt| attempt.outcome.wall_s)
                .fold(0.0, |total, wall| total + wall),
            mean_wall_s: of_finished(|outcome| outcome.wall_s),
            stop_reasons,
        }
    }
}

/// Per grader kind, over `attempts`, in the order the kinds first come.
pub fn grader_summaries<'a>(
    attempts: impl IntoIterator<Item = &'a AttemptRecord>,
) -> Vec<GraderSummary> {
    let mut summaries: Vec<GraderSummary> = Vec::new();
    for verdict in attempts.into_iter().flat_map(|attempt| &attempt.verdicts) {
        let index = match summaries.iter().position(|s| s.grader == verdict.grader) {
            Some(index) => index,
            None => {
                summaries.push(GraderSummary {
                    grader: verdict.grader.clone(),
                    deterministic: verdict.deterministic,
                    passed: 0,
                    failed: 0,
                });
                summaries.len() - 1
            }
        };
        let summary = &mut summaries[index];
        if verdict.passed {
            summary.passed += 1;
        } else {
            summary.failed += 1;
        }
    }
    summaries
}

impl Report {
    /// Whether any task could end differently on another run.
    pub fn nondeterministic(&self) -> bool {
        self.tasks.iter().any(|task| task.nondeterministic)
    }

    pub fn attempts(&self) -> impl Iterator<Item = &AttemptRecord> {
        self.tasks.iter().flat_map(|task| &task.attempts)
    }
}

/// Reads a report written by `airlock eval run`.
pub fn read(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|error| format!("{} is not JSON: {error}", path.display()))?;
    let format = value.get("format").and_then(serde_json::Value::as_u64);
    if format != Some(u64::from(FORMAT)) {
        return Err(format!(
            "{} is not a report of this airlock (format {}, this one reads {FORMAT})",
            path.display(),
            format.map_or("none".to_owned(), |format| format.to_string())
        ));
    }
    serde_json::from_value(value)
        .map_err(|error| format!("{} is not an eval report: {error}", path.display()))
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn attempt(task: &str, repeat: u32, status: AttemptStatus, steps: u32) -> AttemptRecord {
        let finished = status != AttemptStatus::Unfinished;
        AttemptRecord {
            task: task.to_owned(),
            repeat,
            status,
            run_id: format!("run_{task}_{repeat}"),
            error: (!finished).then(|| "lost the connection".to_owned()),
            workspace: format!("/ws/{task}-{repeat}"),
            workspace_kept: status != AttemptStatus::Passed,
            trace: Some(TraceLink {
                run_id: format!("run_{task}_{repeat}"),
                trace_id: "t".to_owned(),
                command: format!("airlock runs trace run_{task}_{repeat}"),
            }),
            outcome: Outcome {
                run_id: format!("run_{task}_{repeat}"),
                stop_reason: finished.then(|| {
                    let reason = if status == AttemptStatus::Passed {
                        "final"
                    } else {
                        "max_steps"
                    };
                    reason.to_owned()
                }),
                steps,
                input_tokens: 100,
                output_tokens: 20,
                cost_usd: Cost::Usd(0.01),
                wall_s: 2.0,
                ..Outcome::default()
            },
            verdicts: vec![VerdictRecord {
                grader: "stop_reason".to_owned(),
                label: "stop_reason final".to_owned(),
                deterministic: true,
                passed: status == AttemptStatus::Passed,
                detail: if status == AttemptStatus::Passed {
                    "stopped final".to_owned()
                } else {
                    "expected final, got max_steps".to_owned()
                },
            }],
            failed_here: false,
        }
    }

    #[test]
    fn an_aggregate_counts_every_attempt_and_means_the_finished_ones() {
        let attempts = [
            attempt("a", 1, AttemptStatus::Passed, 2),
            attempt("a", 2, AttemptStatus::Failed, 4),
            attempt("a", 3, AttemptStatus::Unfinished, 0),
        ];
        let aggregate = Aggregate::of(&attempts);
        assert_eq!(
            (
                aggregate.attempts,
                aggregate.passed,
                aggregate.failed,
                aggregate.unfinished
            ),
            (3, 1, 1, 1)
        );
        let rate = aggregate.pass_rate.unwrap_or(Rate {
            passed: 0,
            attempts: 0,
            rate: -1.0,
            ci95: crate::stats::Interval {
                low: 0.0,
                high: 0.0,
            },
        });
        assert!((rate.rate - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(aggregate.mean_steps, Some(3.0));
        assert_eq!(aggregate.mean_tokens, Some(120.0));
        assert_eq!(aggregate.stop_reasons.get("final"), Some(&1));
        assert_eq!(aggregate.stop_reasons.get("max_steps"), Some(&1));
        assert!((aggregate.cost_usd - 0.03).abs() < 1e-9);
        assert_eq!(aggregate.mean_cost_usd, Some(0.01));
        let summaries = grader_summaries(&attempts);
        assert_eq!(summaries.len(), 1);
        assert_eq!((summaries[0].passed, summaries[0].failed), (1, 2));
    }

    #[test]
    fn an_unknown_cost_leaves_the_mean_unknown() {
        let mut unpriced = attempt("a", 1, AttemptStatus::Passed, 1);
        unpriced.outcome.cost_usd = Cost::Unknown;
        let aggregate = Aggregate::of([&unpriced, &attempt("a", 2, AttemptStatus::Passed, 1)]);
        assert_eq!(aggregate.cost_unknown, 1);
        assert_eq!(aggregate.mean_cost_usd, None);
        assert!((aggregate.cost_usd - 0.01).abs() < 1e-9);
    }
}
