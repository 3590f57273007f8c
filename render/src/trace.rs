//! A run's trace for people: one line per span, children indented under their parent in the
//! order they started, each with its duration and what matters about its kind.
//!
//! ```text
//! trace 4bf92f3577b34da6a3ce929d0e0e4736 of run run_…
//! run run_…  1.52 s  stop FINAL, 2 steps, 2 model calls, 812 input + 96 output tokens, 2 tool calls
//!   step 1  1.20 s
//!     context  85 µs  412 of 100000 tokens
//!     model scripted  2.1 ms  412 input + 48 output tokens, 1 tool call, finish ToolCalls
//!     validate write_file  40 µs  arguments sha256 9f86d081884c
//!     permission write_file  1.18 s  asked, approved, risk write, policy risky
//!     tool write_file  6.3 ms  OK, exe_…, peak memory 1.1 MiB, cpu 2.0 ms, output 24 B
//!   step 2  3.0 ms
//!     …
//! ```
//!
//! A failed span is toned as an error and followed by its message on a line of its own. The
//! run's own span is recorded when the run ends: until then its steps have no parent in the
//! trace, and are shown at the top level.
//!
//! Attribute values come from the run (a tool name the model made up, a refusal a person
//! typed): they are folded onto one line and cut, and escaped when painted for a terminal.

use std::collections::HashMap;

use super::names::span_status_name;
use super::styled::{StyledLine, Tone};
use super::table::SHORT_DIGEST_LEN;
use super::text::{cut, fold_whitespace};
use super::transcript::counted;
use super::units::{format_bytes, format_micros};
use crate::proto::{Span, SpanStatus, Trace};

/// Characters of one attribute value: a tool name, a model, a refusal's start. The JSON form
/// has them whole.
const VALUE_CHARS: usize = 80;

/// Characters of a failed span's message: enough for a sandbox's or a validator's reason,
/// which are a sentence or two.
const ERROR_CHARS: usize = 240;

/// Indentation per level of the tree.
const INDENT: &str = "  ";

/// The trace as lines: a header naming the trace and the run, then the span tree.
pub fn trace_lines(trace: &Trace) -> Vec<StyledLine> {
    let mut lines = vec![StyledLine::plain(format!(
        "trace {} of run {}",
        trace.trace_id, trace.run_id
    ))];
    if !trace.spans.iter().any(|span| span.name == "run") {
        lines.push(StyledLine::plain(
            "(no run span yet: it is recorded when the run ends)",
        ));
    }
    // The daemon records a step's index when the step's span ends; a span without one (a
    // daemon older than that) is numbered by counting steps in the order they are shown.
    let mut steps = 0;
    for (index, depth) in tree_order(&trace.spans) {
        let span = &trace.spans[index];
        if span.name == "step" {
            steps += 1;
        }
        lines.extend(span_lines(span, depth, steps));
    }
    lines
}

/// Each span's index and depth, parents before their children, siblings by start time.
///
/// A span whose parent is not in the trace (the run's span before the run ends, or a span of a
/// trace cut short) is a root. The walk keeps its own stack and marks what it has shown, so a
/// malformed trace (a cycle of parents, a repeated id) shows every span once and cannot
/// recurse without end.
fn tree_order(spans: &[Span]) -> Vec<(usize, usize)> {
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (index, span) in spans.iter().enumerate() {
        by_id.entry(span.span_id.as_str()).or_insert(index);
    }
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (index, span) in spans.iter().enumerate() {
        match by_id.get(span.parent_span_id.as_str()) {
            Some(&parent) if parent != index && !span.parent_span_id.is_empty() => {
                children.entry(parent).or_default().push(index);
            }
            Some(_) | None => roots.push(index),
        }
    }
    let by_start = |a: &usize, b: &usize| {
        (spans[*a].start_unix_nano, *a).cmp(&(spans[*b].start_unix_nano, *b))
    };
    roots.sort_by(by_start);
    for siblings in children.values_mut() {
        siblings.sort_by(by_start);
    }
    // Spans caught in a cycle are reachable from no root; they are shown last, at the top.
    let mut rest: Vec<usize> = (0..spans.len()).collect();
    rest.sort_by(by_start);

    let mut shown = vec![false; spans.len()];
    let mut order = Vec::with_capacity(spans.len());
    for start in roots.into_iter().chain(rest) {
        let mut stack = vec![(start, 0)];
        while let Some((index, depth)) = stack.pop() {
            if std::mem::replace(&mut shown[index], true) {
                continue;
            }
            order.push((index, depth));
            if let Some(siblings) = children.get(&index) {
                // Reversed, so that the first to start is the next popped.
                stack.extend(siblings.iter().rev().map(|&child| (child, depth + 1)));
            }
        }
    }
    order
}

/// The span's line, and for a failed span the line with its message. `steps` is how many
/// steps have been shown, this one included.
fn span_lines(span: &Span, depth: usize, steps: usize) -> Vec<StyledLine> {
    let indent = INDENT.repeat(depth);
    let attributes = Attributes(span);
    let (title, details) = describe(span, &attributes, steps);
    let nanos = span.end_unix_nano.saturating_sub(span.start_unix_nano);
    let duration = format_micros(u64::try_from(nanos / 1000).unwrap_or(0));
    let mut text = format!("{indent}{title}  {duration}");
    if !details.is_empty() {
        text.push_str("  ");
        text.push_str(&details.join(", "));
    }
    if span.status != SpanStatus::Error as i32 {
        if span.status != SpanStatus::Ok as i32 {
            // A status this client does not know: say it rather than pass it for success.
            text.push_str(&format!("  [{}]", span_status_name(span.status)));
        }
        return vec![StyledLine::plain(text)];
    }
    let message = fold_whitespace(&span.status_message);
    let message = if message.is_empty() {
        "failed".to_owned()
    } else {
        cut(&message, ERROR_CHARS).into_owned()
    };
    vec![
        StyledLine::new(Tone::Error, text),
        StyledLine::new(Tone::Error, format!("{indent}{INDENT}✗ {message}")),
    ]
}

/// The span's title (its kind, and what it is about) and the details of its kind.
fn describe(span: &Span, attributes: &Attributes<'_>, steps: usize) -> (String, Vec<String>) {
    let titled = |about: Option<String>| match about {
        Some(about) => format!("{} {about}", span.name),
        None => span.name.clone(),
    };
    let mut details = Vec::new();
    let title = match span.name.as_str() {
        "run" => {
            if let Some(stop) = attributes.text("stop_reason") {
                details.push(format!("stop {stop}"));
            }
            details.extend(attributes.count("steps", "step"));
            details.extend(attributes.count("model_calls", "model call"));
            details.extend(attributes.tokens());
            details.extend(attributes.count("tool_calls", "tool call"));
            titled(attributes.text("run_id"))
        }
        "step" => {
            if attributes.text("resumed").as_deref() == Some("true") {
                details.push("resumed after a restart".to_owned());
            }
            titled(Some(
                attributes
                    .text("index")
                    .unwrap_or_else(|| steps.to_string()),
            ))
        }
        "context" => {
            if let (Some(tokens), Some(budget)) =
                (attributes.text("tokens"), attributes.text("budget"))
            {
                details.push(format!("{tokens} of {budget} tokens"));
            }
            for cut_kind in ["summarised", "dropped"] {
                if let Some(count) = attributes.text(cut_kind).filter(|count| count != "0") {
                    details.push(format!("{count} {cut_kind}"));
                }
            }
            titled(None)
        }
        "model" => {
            details.extend(attributes.tokens());
            details.extend(attributes.count("tool_calls", "tool call"));
            if let Some(finish) = attributes.text("finish") {
                details.push(format!("finish {finish}"));
            }
            titled(attributes.text("model"))
        }
        "validate" => {
            if let Some(digest) = attributes.text("arguments_sha256") {
                let short: String = digest.chars().take(SHORT_DIGEST_LEN).collect();
                details.push(format!("arguments sha256 {short}"));
            }
            titled(attributes.text("tool"))
        }
        "permission" => {
            details.extend(permission_outcome(attributes));
            if let Some(risk) = attributes.text("risk") {
                details.push(format!("risk {risk}"));
            }
            if let Some(policy) = attributes.text("policy") {
                details.push(format!("policy {policy}"));
            }
            if let Some(refusal) = attributes.text("refusal") {
                details.push(format!("refusal: {refusal}"));
            }
            titled(attributes.text("tool"))
        }
        "tool" => {
            details.extend(attributes.text("status"));
            details.extend(attributes.text("execution_id"));
            if let Some(code) = attributes.text("exit_code") {
                details.push(format!("tool exit code {code}"));
            }
            details.extend(attributes.bytes("peak_memory_bytes", "peak memory"));
            if let Some(micros) = attributes.number("cpu_time_us") {
                details.push(format!("cpu {}", format_micros(micros)));
            }
            details.extend(attributes.bytes("output_bytes", "output"));
            if let Some(original) = attributes.number("truncated_from_bytes") {
                details.push(format!(
                    "observation cut from {} (airlock tools output has it all)",
                    format_bytes(original)
                ));
            }
            titled(attributes.text("tool"))
        }
        // A kind newer than this client: every attribute, as recorded.
        _ => {
            details.extend(
                span.attributes
                    .iter()
                    .map(|attribute| format!("{}={}", attribute.key, one_line(&attribute.value))),
            );
            titled(None)
        }
    };
    (title, details)
}

/// What the permission gate decided, and for a question what became of it.
fn permission_outcome(attributes: &Attributes<'_>) -> Option<String> {
    let decision = attributes.text("decision")?;
    let outcome = match decision.as_str() {
        "allow" => "allowed by policy".to_owned(),
        "deny" => "denied by policy".to_owned(),
        "ask" => match attributes.text("approved").as_deref() {
            Some("true") => "asked, approved".to_owned(),
            Some("false") => "asked, refused".to_owned(),
            Some(_) | None => "asked, no answer".to_owned(),
        },
        other => other.to_owned(),
    };
    Some(outcome)
}

/// A span's attributes, looked up by key.
struct Attributes<'a>(&'a Span);

impl Attributes<'_> {
    /// The value, on one line and cut; the last one recorded when a key repeats.
    fn text(&self, key: &str) -> Option<String> {
        self.0
            .attributes
            .iter()
            .rev()
            .find(|attribute| attribute.key == key)
            .map(|attribute| one_line(&attribute.value))
    }

    fn number(&self, key: &str) -> Option<u64> {
        self.text(key)?.parse().ok()
    }

    /// `2 tool calls`; a value that is not a count is shown as it is.
    fn count(&self, key: &str, noun: &str) -> Option<String> {
        let value = self.text(key)?;
        Some(match value.parse() {
            Ok(count) => counted(count, noun),
            Err(_) => format!("{value} {noun}s"),
        })
    }

    /// `peak memory 1.1 MiB`.
    fn bytes(&self, key: &str, label: &str) -> Option<String> {
        let bytes = self.number(key)?;
        Some(format!("{label} {}", format_bytes(bytes)))
    }

    /// `412 input + 48 output tokens`, as the run's usage line says it.
    fn tokens(&self) -> Option<String> {
        let input = self.text("input_tokens")?;
        let output = self.text("output_tokens")?;
        Some(format!("{input} input + {output} output tokens"))
    }
}

fn one_line(value: &str) -> String {
    cut(&fold_whitespace(value), VALUE_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plain_text;
    use crate::proto::SpanAttribute;

    const MS: i64 = 1_000_000;

    fn span(id: &str, parent: &str, name: &str, start_ms: i64, end_ms: i64) -> Span {
        Span {
            trace_id: "t".repeat(32),
            span_id: id.to_owned(),
            parent_span_id: parent.to_owned(),
            name: name.to_owned(),
            start_unix_nano: start_ms * MS,
            end_unix_nano: end_ms * MS,
            attributes: Vec::new(),
            status: SpanStatus::Ok as i32,
            status_message: String::new(),
        }
    }

    fn with(mut span: Span, attributes: &[(&str, &str)]) -> Span {
        span.attributes = attributes
            .iter()
            .map(|(key, value)| SpanAttribute {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect();
        span
    }

    fn trace(spans: Vec<Span>) -> Trace {
        Trace {
            run_id: "run_1".to_owned(),
            trace_id: "t".repeat(32),
            spans,
        }
    }

    /// A finished run of two steps: a read allowed by policy, then a write asked and approved.
    /// Listed as the daemon stores them, each when it ended: children before their parents.
    fn finished_run() -> Trace {
        trace(vec![
            with(
                span("c1", "s1", "context", 1, 2),
                &[
                    ("tokens", "412"),
                    ("budget", "100000"),
                    ("summarised", "0"),
                    ("dropped", "2"),
                ],
            ),
            with(
                span("m1", "s1", "model", 2, 5),
                &[
                    ("model", "scripted"),
                    ("input_tokens", "412"),
                    ("output_tokens", "48"),
                    ("tool_calls", "1"),
                    ("finish", "ToolCalls"),
                ],
            ),
            with(
                span("v1", "s1", "validate", 5, 5),
                &[
                    ("call_id", "call_1"),
                    ("tool", "write_file"),
                    ("arguments_sha256", &"9f86d081884c7d65".repeat(4)),
                ],
            ),
            with(
                span("p1", "s1", "permission", 5, 1185),
                &[
                    ("tool", "write_file"),
                    ("risk", "write"),
                    ("policy", "risky"),
                    ("decision", "ask"),
                    ("approved", "true"),
                ],
            ),
            with(
                span("x1", "s1", "tool", 1185, 1191),
                &[
                    ("tool", "write_file"),
                    ("execution_id", "exe_1"),
                    ("status", "OK"),
                    ("duration_ms", "6"),
                    ("exit_code", "0"),
                    ("peak_memory_bytes", "1153434"),
                    ("cpu_time_us", "2000"),
                    ("output_bytes", "24"),
                    ("profile", "workspace"),
                ],
            ),
            with(span("s1", "root", "step", 1, 1200), &[("index", "1")]),
            with(
                span("m2", "s2", "model", 1201, 1203),
                &[
                    ("model", "scripted"),
                    ("input_tokens", "400"),
                    ("output_tokens", "48"),
                    ("tool_calls", "0"),
                ],
            ),
            // The step a run ends in is cut short, before its index is recorded.
            with(
                span("s2", "root", "step", 1200, 1204),
                &[("step_id", "step_2")],
            ),
            with(
                span("root", "", "run", 0, 1520),
                &[
                    ("run_id", "run_1"),
                    ("stop_reason", "FINAL"),
                    ("steps", "2"),
                    ("input_tokens", "812"),
                    ("output_tokens", "96"),
                    ("model_calls", "2"),
                    ("tool_calls", "1"),
                ],
            ),
        ])
    }

    #[test]
    fn a_run_is_a_tree_in_start_order_with_each_kind_described() {
        let expected = format!(
            "trace {t} of run run_1\n\
             run run_1  1.52 s  stop FINAL, 2 steps, 2 model calls, 812 input + 96 output tokens, 1 tool call\n\
             \x20 step 1  1.20 s\n\
             \x20   context  1.0 ms  412 of 100000 tokens, 2 dropped\n\
             \x20   model scripted  3.0 ms  412 input + 48 output tokens, 1 tool call, finish ToolCalls\n\
             \x20   validate write_file  0 µs  arguments sha256 9f86d081884c\n\
             \x20   permission write_file  1.18 s  asked, approved, risk write, policy risky\n\
             \x20   tool write_file  6.0 ms  OK, exe_1, tool exit code 0, peak memory 1.1 MiB, cpu 2.0 ms, output 24 B\n\
             \x20 step 2  4.0 ms\n\
             \x20   model scripted  2.0 ms  400 input + 48 output tokens, 0 tool calls\n",
            t = "t".repeat(32)
        );
        assert_eq!(plain_text(&trace_lines(&finished_run())), expected);
    }

    #[test]
    fn failures_are_toned_and_say_why() {
        let mut denied = with(
            span("p", "s", "permission", 2, 3),
            &[
                ("tool", "write_file"),
                ("decision", "deny"),
                ("refusal", "policy never:\n  nothing is asked"),
            ],
        );
        denied.status = SpanStatus::Ok as i32;
        let mut failed = with(
            span("x", "s", "tool", 3, 4),
            &[
                ("tool", "spin"),
                ("status", "TIMEOUT"),
                ("truncated_from_bytes", "300000"),
            ],
        );
        failed.status = SpanStatus::Error as i32;
        failed.status_message = "the call ran past\nits 200 ms".to_owned();
        let mut silent = span("v", "s", "validate", 1, 2);
        silent.status = SpanStatus::Error as i32;
        let lines = trace_lines(&trace(vec![
            span("s", "", "step", 0, 5),
            denied,
            failed,
            silent,
        ]));
        let text = plain_text(&lines);
        assert_eq!(
            text,
            format!(
                "trace {t} of run run_1\n\
                 (no run span yet: it is recorded when the run ends)\n\
                 step 1  5.0 ms\n\
                 \x20 validate  1.0 ms\n\
                 \x20   ✗ failed\n\
                 \x20 permission write_file  1.0 ms  denied by policy, refusal: policy never: nothing is asked\n\
                 \x20 tool spin  1.0 ms  TIMEOUT, observation cut from 293.0 KiB (airlock tools output has it all)\n\
                 \x20   ✗ the call ran past its 200 ms\n",
                t = "t".repeat(32)
            )
        );
        let tones: Vec<Tone> = lines.iter().map(|line| line.tone).collect();
        assert_eq!(
            tones,
            [
                Tone::Plain,
                Tone::Plain,
                Tone::Plain,
                Tone::Error,
                Tone::Error,
                Tone::Plain,
                Tone::Error,
                Tone::Error
            ]
        );
    }

    #[test]
    fn asked_permissions_say_what_became_of_the_question() {
        for (approved, outcome) in [
            (Some("false"), "asked, refused"),
            (None, "asked, no answer"),
        ] {
            let mut attributes = vec![("decision", "ask")];
            attributes.extend(approved.map(|approved| ("approved", approved)));
            let span = with(span("p", "", "permission", 0, 1), &attributes);
            let text = plain_text(&trace_lines(&trace(vec![span])));
            assert!(
                text.ends_with(&format!("permission  1.0 ms  {outcome}\n")),
                "{text}"
            );
        }
    }

    #[test]
    fn siblings_follow_start_time_not_storage_order() {
        let spans = vec![
            span("b", "r", "second", 20, 30),
            span("a", "r", "first", 10, 15),
            span("r", "", "run", 0, 40),
            span("c", "a", "nested", 11, 12),
        ];
        let order: Vec<(&str, usize)> = tree_order(&spans)
            .into_iter()
            .map(|(index, depth)| (spans[index].span_id.as_str(), depth))
            .collect();
        assert_eq!(order, [("r", 0), ("a", 1), ("c", 2), ("b", 1)]);
    }

    #[test]
    fn a_malformed_trace_shows_every_span_once() {
        let spans = vec![
            span("a", "b", "one", 0, 1),
            span("b", "a", "two", 1, 2),
            span("self", "self", "three", 2, 3),
            span("orphan", "gone", "four", 3, 4),
            span("orphan", "", "five", 4, 5),
        ];
        let mut shown: Vec<usize> = tree_order(&spans)
            .into_iter()
            .map(|(index, _)| index)
            .collect();
        shown.sort_unstable();
        assert_eq!(shown, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn unknown_kinds_and_statuses_are_shown_as_recorded() {
        let mut newer = with(
            span("n", "", "cache", 0, 2),
            &[("hit", "true"), ("key", "a\nb")],
        );
        newer.status = 7;
        let text = plain_text(&trace_lines(&trace(vec![newer])));
        assert!(
            text.ends_with("cache  2.0 ms  hit=true, key=a b  [SPAN_STATUS_7]\n"),
            "{text}"
        );
    }

    #[test]
    fn long_values_are_cut() {
        let long = "x".repeat(500);
        let span = with(span("m", "", "model", 0, 1), &[("model", &long)]);
        let lines = trace_lines(&trace(vec![span]));
        let line = &lines[2].text;
        assert!(
            line.starts_with(&format!("model {}…  ", "x".repeat(VALUE_CHARS - 1))),
            "{line}"
        );
    }
}
