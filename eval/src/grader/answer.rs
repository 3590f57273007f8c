//! The answer graders: the run's final text contains a string (`answer_contains`), matches a
//! regular expression (`answer_matches`), or is JSON valid against a JSON Schema
//! (`answer_json`; a Markdown code fence around the JSON is allowed, as models write one).

use async_trait::async_trait;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use super::grading::{GradeContext, Grader, Verdict, quoted};
use crate::problem::Problem;

/// How much of the answer a failed verdict quotes.
const QUOTE_CHARS: usize = 120;
/// Schema violations a failed verdict lists.
const MAX_VIOLATIONS: usize = 3;

pub struct Contains {
    text: String,
}

impl Contains {
    pub fn new(text: String) -> Result<Contains, Problem> {
        if text.is_empty() {
            return Err(Problem::invalid(
                "answer_contains",
                "the text is empty, which every answer contains",
            ));
        }
        Ok(Contains { text })
    }
}

#[async_trait(?Send)]
impl Grader for Contains {
    fn kind(&self) -> &'static str {
        "answer_contains"
    }

    fn label(&self) -> String {
        format!("answer_contains {}", quoted(&self.text, 60))
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let answer = &cx.outcome.final_text;
        if answer.contains(&self.text) {
            Verdict::pass(format!("the answer contains {}", quoted(&self.text, 60)))
        } else {
            Verdict::fail(format!(
                "the answer does not contain {}; it reads {}",
                quoted(&self.text, 60),
                quoted(answer, QUOTE_CHARS)
            ))
        }
    }
}

pub struct Matches {
    regex: Regex,
}

impl Matches {
    pub fn new(pattern: &str) -> Result<Matches, Problem> {
        let regex = Regex::new(pattern).map_err(|error| {
            Problem::invalid(
                "answer_matches",
                format!("not a regular expression: {error}"),
            )
        })?;
        Ok(Matches { regex })
    }
}

#[async_trait(?Send)]
impl Grader for Matches {
    fn kind(&self) -> &'static str {
        "answer_matches"
    }

    fn label(&self) -> String {
        format!("answer_matches /{}/", self.regex.as_str())
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let answer = &cx.outcome.final_text;
        match self.regex.find(answer) {
            Some(found) => Verdict::pass(format!(
                "the answer matches /{}/ at {}",
                self.regex.as_str(),
                quoted(found.as_str(), 60)
            )),
            None => Verdict::fail(format!(
                "the answer does not match /{}/; it reads {}",
                self.regex.as_str(),
                quoted(answer, QUOTE_CHARS)
            )),
        }
    }
}

/// `answer_json: {schema: …}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonSpec {
    pub schema: Value,
}

pub struct Json {
    validator: jsonschema::Validator,
}

impl Json {
    pub fn new(spec: JsonSpec) -> Result<Json, Problem> {
        // No resolvers are built in: a `$ref` to another document is refused, never fetched.
        let validator = jsonschema::validator_for(&spec.schema).map_err(|error| {
            Problem::invalid(
                "answer_json.schema",
                format!("not a valid JSON Schema: {error}"),
            )
        })?;
        Ok(Json { validator })
    }
}

/// The JSON in an answer: the whole text, or the body of a Markdown code fence around it.
fn json_text(answer: &str) -> &str {
    let trimmed = answer.trim();
    let Some(fenced) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let Some(body) = fenced.strip_suffix("```") else {
        return trimmed;
    };
    // The fence's first line may name the language (```json).
    body.split_once('\n').map_or(body, |(_, rest)| rest).trim()
}

#[async_trait(?Send)]
impl Grader for Json {
    fn kind(&self) -> &'static str {
        "answer_json"
    }

    fn label(&self) -> String {
        "answer_json".to_owned()
    }

    async fn grade(&self, cx: &GradeContext<'_>) -> Verdict {
        let answer = &cx.outcome.final_text;
        let value: Value = match serde_json::from_str(json_text(answer)) {
            Ok(value) => value,
            Err(error) => {
                return Verdict::fail(format!(
                    "the answer is not JSON ({error}); it reads {}",
                    quoted(answer, QUOTE_CHARS)
                ));
            }
        };
        let violations: Vec<String> = self
            .validator
            .iter_errors(&value)
            .take(MAX_VIOLATIONS)
            .map(|error| {
                let path = error.instance_path().to_string();
                let path = if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                };
                format!("at {path}: {error}")
            })
            .collect();
        if violations.is_empty() {
            Verdict::pass("the answer is JSON valid against the schema")
        } else {
            Verdict::fail(format!(
                "the answer's JSON does not match the schema: {}",
                violations.join("; ")
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

    fn answer(text: &str) -> Outcome {
        Outcome {
            final_text: text.to_owned(),
            ..Outcome::default()
        }
    }

    #[tokio::test]
    async fn answer_contains_passes_and_fails() -> anyhow::Result<()> {
        let grader = build("answer_contains: arithmetic mean", Path::new("."))?;
        let verdict = grade(grader.as_ref(), &answer("It returns the arithmetic mean.")).await;
        assert!(verdict.passed, "{verdict:?}");
        let verdict = grade(grader.as_ref(), &answer("It returns the median.")).await;
        assert!(!verdict.passed);
        assert_eq!(
            verdict.detail,
            "the answer does not contain \"arithmetic mean\"; it reads \"It returns the median.\""
        );
        Ok(())
    }

    #[tokio::test]
    async fn answer_matches_passes_and_fails() -> anyhow::Result<()> {
        let grader = build(r#"answer_matches: '(?i)\bmean\b.*\d+'"#, Path::new("."))?;
        assert_eq!(grader.label(), r"answer_matches /(?i)\bmean\b.*\d+/");
        assert!(
            grade(grader.as_ref(), &answer("The Mean is 42"))
                .await
                .passed
        );
        let verdict = grade(grader.as_ref(), &answer("no numbers here")).await;
        assert!(!verdict.passed);
        assert!(
            verdict.detail.starts_with("the answer does not match"),
            "{verdict:?}"
        );
        Ok(())
    }

    #[test]
    fn a_bad_regex_is_a_problem_of_the_grader() {
        let Err(problem) = Matches::new("(unclosed") else {
            panic!("a bad regex compiled");
        };
        assert_eq!(problem.field, "answer_matches");
        assert!(
            problem.message.starts_with("not a regular expression: "),
            "{problem}"
        );
    }

    #[tokio::test]
    async fn answer_json_validates_against_the_schema() -> anyhow::Result<()> {
        let grader = build(
            "answer_json:\n  schema:\n    type: object\n    required: [mean]\n    properties:\n      mean: {type: number}\n",
            Path::new("."),
        )?;
        let verdict = grade(grader.as_ref(), &answer(r#"{"mean": 2.5}"#)).await;
        assert!(verdict.passed, "{verdict:?}");
        let fenced = "```json\n{\"mean\": 3}\n```";
        assert!(grade(grader.as_ref(), &answer(fenced)).await.passed);
        let verdict = grade(grader.as_ref(), &answer(r#"{"mean": "two"}"#)).await;
        assert!(!verdict.passed);
        assert!(verdict.detail.contains("at /mean: "), "{verdict:?}");
        let verdict = grade(grader.as_ref(), &answer("The mean is 2.5")).await;
        assert!(!verdict.passed);
        assert!(
            verdict.detail.starts_with("the answer is not JSON"),
            "{verdict:?}"
        );
        Ok(())
    }

    #[test]
    fn an_invalid_schema_is_refused() {
        let spec = JsonSpec {
            schema: serde_json::json!({"type": "no-such-type"}),
        };
        let Err(problem) = Json::new(spec) else {
            panic!("an invalid schema compiled");
        };
        assert_eq!(problem.field, "answer_json.schema");
    }
}
