//! `budget: {max_tokens, max_cost_usd, max_wall_s}`: the run stayed within what the task may
//! cost. An unknown cost (no price for the model) fails `max_cost_usd`: a limit that cannot be
//! checked is not met.

use async_trait::async_trait;
use serde::Deserialize;

use super::super::price::{Cost, format_usd};
use super::grading::{GradeContext, Grader, Verdict};
use crate::problem::Problem;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_wall_s: Option<f64>,
}

pub struct Budget {
    spec: BudgetSpec,
}

impl Budget {
    pub fn new(spec: BudgetSpec) -> Result<Budget, Problem> {
        if spec.max_tokens.is_none() && spec.max_cost_usd.is_none() && spec.max_wall_s.is_none() {
            return Err(Problem::invalid(
                "budget",
                "no limit given: name max_tokens, max_cost_usd or max_wall_s",
            ));
        }
        for (field, value) in [
            ("budget.max_cost_usd", spec.max_cost_usd),
            ("budget.max_wall_s", spec.max_wall_s),
        ] {
            if value.is_some_and(|value| !(value.is_finite() && value >= 0.0)) {
                return Err(Problem::invalid(field, "must be a number, 0 or more"));
            }
        }
        Ok(Budget { spec })
    }
}

#[async_trait(?Send)]
impl Grader for Budget {
    fn kind(&self) -> &'static str {
        "budget"
    }

    fn label(&self) -> String {
        let mut limits = Vec::new();
        if let Some(tokens) = self.spec.max_tokens {
            limits.push(format!("max_tokens {tokens}"));
        }
        if let Some(usd) = self.spec.max_cost_usd {
            limits.push(format!("max_cost_usd {usd}"));
        }
        if let Some(seconds) = self.spec.max_wall_s {
            limits.push(format!("max_wall_s {seconds}"));
        }
        format!("budget {}", limits.join(", "))
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let outcome = cx.outcome;
        let mut within = Vec::new();
        let mut over = Vec::new();
        if let Some(max) = self.spec.max_tokens {
            let tokens = outcome.tokens();
            let line = format!("{tokens} tokens (at most {max})");
            if tokens <= max {
                within.push(line)
            } else {
                over.push(line)
            }
        }
        if let Some(max) = self.spec.max_cost_usd {
            match outcome.cost_usd {
                Cost::Usd(usd) => {
                    let line = format!("{} (at most {})", format_usd(usd), format_usd(max));
                    if usd <= max {
                        within.push(line)
                    } else {
                        over.push(line)
                    }
                }
                Cost::Unknown => over.push(format!(
                    "cost unknown: the suite has no price for {:?}",
                    outcome.priced_model
                )),
            }
        }
        if let Some(max) = self.spec.max_wall_s {
            let line = format!("{:.1} s (at most {max} s)", outcome.wall_s);
            if outcome.wall_s <= max {
                within.push(line)
            } else {
                over.push(line)
            }
        }
        if over.is_empty() {
            Verdict::pass(within.join(", "))
        } else {
            Verdict::fail(format!("over budget: {}", over.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::{build, grade};
    use super::*;
    use crate::outcome::Outcome;

    #[tokio::test]
    async fn a_run_within_and_over_its_budget() -> anyhow::Result<()> {
        let grader = build(
            "budget: {max_tokens: 1000, max_cost_usd: 0.01, max_wall_s: 30}",
            Path::new("."),
        )?;
        let cheap = Outcome {
            input_tokens: 600,
            output_tokens: 100,
            cost_usd: Cost::Usd(0.002),
            wall_s: 3.0,
            ..Outcome::default()
        };
        let verdict = grade(grader.as_ref(), &cheap).await;
        assert!(verdict.passed, "{verdict:?}");
        let dear = Outcome {
            input_tokens: 6000,
            cost_usd: Cost::Usd(0.05),
            wall_s: 3.0,
            ..Outcome::default()
        };
        let verdict = grade(grader.as_ref(), &dear).await;
        assert!(!verdict.passed);
        assert_eq!(
            verdict.detail,
            "over budget: 6000 tokens (at most 1000), $0.0500 (at most $0.0100)"
        );
        Ok(())
    }

    #[tokio::test]
    async fn an_unknown_cost_fails_a_cost_limit() -> anyhow::Result<()> {
        let grader = build("budget: {max_cost_usd: 1}", Path::new("."))?;
        let unpriced = Outcome {
            priced_model: "scripted".to_owned(),
            ..Outcome::default()
        };
        let verdict = grade(grader.as_ref(), &unpriced).await;
        assert!(!verdict.passed);
        assert!(verdict.detail.contains("cost unknown"), "{verdict:?}");
        assert!(build("budget: {}", Path::new(".")).is_err());
        Ok(())
    }
}
