//! `summary.md`: the report for a person, in Markdown — a table with a row per task (pass
//! rate with its 95% interval, mean steps, tokens, cost and wall time, how the runs stopped),
//! the thresholds, the graders, and each failed or unfinished attempt with its trace command.
//! Non-deterministic tasks and graders are flagged wherever they appear.

use std::fmt::Write;

use super::report::{Aggregate, AttemptStatus, Report};
use super::text;

/// A cell's text: no line breaks, `|` escaped.
fn cell(text: &str) -> String {
    airlock_render::fold_whitespace(text).replace('|', "\\|")
}

fn stops(aggregate: &Aggregate) -> String {
    let stops: Vec<String> = aggregate
        .stop_reasons
        .iter()
        .map(|(reason, count)| format!("{reason}: {count}"))
        .collect();
    if stops.is_empty() {
        "-".to_owned()
    } else {
        stops.join(", ")
    }
}

fn row(name: &str, aggregate: &Aggregate, note: &str) -> String {
    let cost = if aggregate.cost_unknown > 0 {
        format!(
            "{} + {} unknown",
            text::usd(Some(aggregate.cost_usd)),
            aggregate.cost_unknown
        )
    } else {
        text::usd(Some(aggregate.cost_usd))
    };
    format!(
        "| {name} | {} | {} | {} | {cost} | {} | {} | {} |\n",
        text::rate(aggregate.pass_rate.as_ref()),
        text::number(aggregate.mean_steps),
        text::number(aggregate.mean_tokens),
        text::seconds(aggregate.mean_wall_s),
        cell(&stops(aggregate)),
        cell(note)
    )
}

pub fn summary(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Eval `{}` — {}\n", report.suite, report.label);
    if !report.description.is_empty() {
        let _ = writeln!(out, "{}\n", report.description.trim());
    }
    let _ = writeln!(
        out,
        "Result `{}`, started {}, airlockd at {}{}. **{}** (exit {}).\n",
        report.result_id,
        report.started_at,
        report.endpoint,
        report
            .variant
            .as_ref()
            .map_or(String::new(), |variant| format!(", variant `{variant}`")),
        match report.status {
            AttemptStatus::Passed => "Passed",
            AttemptStatus::Failed => "Failed",
            AttemptStatus::Unfinished => "Unfinished",
        },
        report.exit_code
    );
    out.push_str(
        "| task | pass rate [95% CI] | steps | tokens | cost (total) | wall | stop reasons | \
         notes |\n|---|---|---|---|---|---|---|---|\n",
    );
    for task in &report.tasks {
        let note = if task.nondeterministic {
            format!(
                "⚠ non-deterministic: {}",
                task.nondeterministic_reasons.join(", ")
            )
        } else {
            String::new()
        };
        out.push_str(&row(&format!("`{}`", cell(&task.id)), &task.summary, &note));
    }
    out.push_str(&row("**all**", &report.totals, ""));
    out.push_str("\nMeans are over the attempts whose run finished; steps, tokens and wall time per attempt.\n");

    if !report.thresholds.is_empty() {
        out.push_str("\n## Thresholds\n\n");
        for check in &report.thresholds {
            let _ = writeln!(
                out,
                "- {} {}: {}",
                if check.passed { "✓" } else { "✗" },
                check.name,
                cell(&check.detail)
            );
        }
    }

    out.push_str("\n## Graders\n\n| grader | passed | failed | |\n|---|---|---|---|\n");
    for grader in &report.graders {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            grader.grader,
            grader.passed,
            grader.failed,
            if grader.deterministic {
                ""
            } else {
                "⚠ non-deterministic: a second grading may differ"
            }
        );
    }

    let troubled: Vec<_> = report
        .attempts()
        .filter(|attempt| attempt.status != AttemptStatus::Passed)
        .collect();
    if !troubled.is_empty() {
        out.push_str("\n## Failed and unfinished attempts\n\n");
        for attempt in troubled {
            let reasons: Vec<String> = match attempt.status {
                AttemptStatus::Unfinished => {
                    vec![format!(
                        "unfinished: {}",
                        attempt.error.as_deref().unwrap_or("-")
                    )]
                }
                AttemptStatus::Passed | AttemptStatus::Failed => attempt
                    .verdicts
                    .iter()
                    .filter(|verdict| !verdict.passed)
                    .map(|verdict| {
                        let marker = if verdict.deterministic { "" } else { " ⚠" };
                        format!("{}{marker}: {}", verdict.label, verdict.detail)
                    })
                    .collect(),
            };
            let trace = attempt
                .trace
                .as_ref()
                .map_or(String::new(), |trace| format!(" — `{}`", trace.command));
            let _ = writeln!(
                out,
                "- `{}` #{}{trace}",
                cell(&attempt.task),
                attempt.repeat
            );
            for reason in reasons {
                let _ = writeln!(out, "  - {}", cell(&reason));
            }
            if attempt.workspace_kept {
                let _ = writeln!(out, "  - workspace kept: `{}`", attempt.workspace);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::run::tests::sample_report;
    use super::*;

    #[test]
    fn the_summary_has_a_row_per_task_and_lists_what_failed() {
        let mut report = sample_report();
        report.tasks[0].nondeterministic = true;
        report.tasks[0].nondeterministic_reasons = vec!["repeats: 3".to_owned()];
        let markdown = summary(&report);
        assert!(
            markdown.starts_with("# Eval `coding-basics` — base\n"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| `read` | 1/3 33% [6%, 79%] | 2.5 | 120.0 | $0.0300 | 2.0 s | final: 1, max_steps: 1 | ⚠ non-deterministic: repeats: 3 |"),
            "{markdown}"
        );
        assert!(markdown.contains("| **all** | 1/3 33%"), "{markdown}");
        assert!(markdown.contains("- ✗ pass_rate: "), "{markdown}");
        assert!(
            markdown.contains("- `read` #2 — `airlock runs trace run_read_2`\n  - stop_reason final: expected final, got max_steps"),
            "{markdown}"
        );
        assert!(
            markdown.contains("  - unfinished: lost the connection"),
            "{markdown}"
        );
    }
}
