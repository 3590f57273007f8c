//! `junit.xml`: the report in the JUnit format CI systems show — one testsuite, one testcase
//! per attempt, a failed grader as a `failure` (its message the failed graders' details), an
//! unfinished attempt as an `error`. Every text is XML-escaped, and characters XML 1.0 cannot
//! carry at all (most control characters: model and tool output can hold any) become U+FFFD.

use std::fmt::Write;

use super::report::{AttemptRecord, AttemptStatus, Report};

/// `text` as XML character data or attribute value.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => {
                out.push('\u{FFFD}');
            }
            c => out.push(c),
        }
    }
    out
}

fn seconds(value: f64) -> String {
    format!("{value:.3}")
}

/// The failed graders of an attempt, one line each, non-deterministic ones marked.
fn failures(attempt: &AttemptRecord) -> Vec<String> {
    attempt
        .verdicts
        .iter()
        .filter(|verdict| !verdict.passed)
        .map(|verdict| {
            let marker = if verdict.deterministic {
                ""
            } else {
                " (non-deterministic)"
            };
            format!("{}{marker}: {}", verdict.grader, verdict.detail)
        })
        .collect()
}

pub fn junit(report: &Report) -> String {
    let totals = &report.totals;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!(
        "tests=\"{}\" failures=\"{}\" errors=\"{}\"",
        totals.attempts, totals.failed, totals.unfinished
    );
    let _ = writeln!(
        out,
        "<testsuites name=\"airlock eval\" {counts} time=\"{}\">",
        seconds(totals.wall_s)
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" {counts} skipped=\"0\" time=\"{}\" timestamp=\"{}\">",
        escape(&report.suite),
        seconds(totals.wall_s),
        escape(&report.started_at)
    );
    out.push_str("    <properties>\n");
    let mut properties = vec![
        ("label", report.label.clone()),
        ("result_id", report.result_id.clone()),
        ("endpoint", report.endpoint.clone()),
    ];
    if let Some(variant) = &report.variant {
        properties.push(("variant", variant.clone()));
    }
    for (name, value) in properties {
        let _ = writeln!(
            out,
            "      <property name=\"{name}\" value=\"{}\"/>",
            escape(&value)
        );
    }
    out.push_str("    </properties>\n");
    for task in &report.tasks {
        for attempt in &task.attempts {
            let _ = write!(
                out,
                "    <testcase classname=\"{}.{}\" name=\"{} #{}\" time=\"{}\">",
                escape(&report.suite),
                escape(&task.id),
                escape(&task.id),
                attempt.repeat,
                seconds(attempt.outcome.wall_s)
            );
            let trace = attempt
                .trace
                .as_ref()
                .map(|trace| format!("trace: {} (trace id {})", trace.command, trace.trace_id));
            match attempt.status {
                AttemptStatus::Passed => {}
                AttemptStatus::Failed => {
                    let lines = failures(attempt);
                    let body = lines.join("\n");
                    let _ = write!(
                        out,
                        "\n      <failure message=\"{}\" type=\"graders\">{}</failure>",
                        escape(&lines.join("; ")),
                        escape(&body)
                    );
                }
                AttemptStatus::Unfinished => {
                    let error = attempt.error.as_deref().unwrap_or("unfinished");
                    let _ = write!(
                        out,
                        "\n      <error message=\"{}\" type=\"unfinished\">{}</error>",
                        escape(error),
                        escape(error)
                    );
                }
            }
            let mut notes = Vec::new();
            if task.nondeterministic {
                notes.push(format!(
                    "non-deterministic: {}",
                    task.nondeterministic_reasons.join(", ")
                ));
            }
            notes.extend(trace);
            if !notes.is_empty() {
                let _ = write!(
                    out,
                    "\n      <system-out>{}</system-out>",
                    escape(&notes.join("\n"))
                );
            }
            if attempt.status == AttemptStatus::Passed && notes.is_empty() {
                out.push_str("</testcase>\n");
            } else {
                out.push_str("\n    </testcase>\n");
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::super::run::tests::sample_report;
    use super::*;

    #[test]
    fn text_is_escaped_and_unrepresentable_characters_replaced() {
        assert_eq!(
            escape("a<b & \"c\" 'd' >\u{1b}[31m\n"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos; &gt;\u{FFFD}[31m\n"
        );
    }

    /// Checks that `xml` is well-formed: every tag closed in order, attributes quoted,
    /// no raw `<` or `&` outside markup (a small checker: no XML parser is a dependency).
    fn well_formed(xml: &str) -> Result<usize, String> {
        let body = xml
            .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
            .ok_or("no XML declaration")?;
        let mut open: Vec<String> = Vec::new();
        let mut elements = 0;
        let mut rest = body;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            check_text(text)?;
            let end = rest[start..].find('>').ok_or("a tag is not closed")? + start;
            let tag = &rest[start + 1..end];
            if let Some(name) = tag.strip_prefix('/') {
                let expected = open.pop().ok_or("a closing tag without an opening one")?;
                if name != expected {
                    return Err(format!("</{name}> closes <{expected}>"));
                }
            } else {
                elements += 1;
                let self_closing = tag.ends_with('/');
                let tag = tag.trim_end_matches('/');
                let name = tag.split_whitespace().next().ok_or("an empty tag")?;
                let attributes = &tag[name.len()..];
                if attributes.matches('"').count() % 2 != 0 {
                    return Err(format!("unbalanced quotes in <{name}>"));
                }
                check_text(&attributes.replace('"', ""))?;
                if !self_closing {
                    open.push(name.to_owned());
                }
            }
            rest = &rest[end + 1..];
        }
        check_text(rest)?;
        if open.is_empty() {
            Ok(elements)
        } else {
            Err(format!("unclosed: {open:?}"))
        }
    }

    fn check_text(text: &str) -> Result<(), String> {
        for (index, _) in text.match_indices('&') {
            let entity = &text[index..];
            if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                .iter()
                .any(|known| entity.starts_with(known))
            {
                return Err(format!("a raw & in {text:?}"));
            }
        }
        if text.contains('<')
            || text.contains('>')
            || text.chars().any(|c| c < ' ' && !"\t\n\r".contains(c))
        {
            return Err(format!("raw markup or control characters in {text:?}"));
        }
        Ok(())
    }

    #[test]
    fn junit_is_well_formed_with_one_testcase_per_attempt() -> anyhow::Result<()> {
        let mut report = sample_report();
        // Hostile text in every place that carries it.
        report.tasks[0].attempts[1].verdicts[0].detail =
            "expected <final> & got \"max_steps\" \u{7}".to_owned();
        let xml = junit(&report);
        well_formed(&xml).map_err(|error| anyhow::anyhow!("{error}\n{xml}"))?;
        assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" errors=\"1\""),
            "{xml}"
        );
        assert!(
            xml.contains(
                "<failure message=\"stop_reason: expected &lt;final&gt; &amp; got \
                 &quot;max_steps&quot; \u{FFFD}\" type=\"graders\">"
            ),
            "{xml}"
        );
        assert!(xml.contains("<error message=\"lost the connection\" type=\"unfinished\">"));
        assert!(xml.contains("name=\"read #1\""), "{xml}");
        assert!(
            xml.contains("trace: airlock runs trace run_read_2"),
            "{xml}"
        );
        Ok(())
    }

    #[test]
    fn the_checker_catches_what_it_must() {
        assert!(well_formed("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a><b></a></b>").is_err());
        assert!(well_formed("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a>x & y</a>").is_err());
    }
}
