//! The context builder: what the model sees at each step, within a token budget, with a
//! report of what went in, what was summarised and what was dropped.
//!
//! Always kept: the system prompt, the tool descriptions, the goal (the run's first user
//! message) and the latest exchange. When the rest does not fit, older observations are
//! summarised first (oldest first), then whole older exchanges are dropped (oldest first),
//! each exchange being an assistant message with the observations that answer it, so the
//! conversation stays well-formed for every provider. Tokens are estimated at four bytes
//! each: cheap, provider-neutral, and conservative for code and JSON.

use std::sync::Arc;

use airlock_proto::v1 as pb;
use serde_json::{Value, json};

use super::provider::{Message, ToolDefinition};

/// What a summarised observation keeps of its content.
const SUMMARY_CHARS: usize = 240;

pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

fn message_tokens(message: &Message) -> u64 {
    match message {
        Message::User { text } => estimate_tokens(text),
        Message::Assistant { text, tool_calls } => {
            text.as_deref().map_or(0, estimate_tokens)
                + tool_calls
                    .iter()
                    .map(|call| estimate_tokens(&call.name) + estimate_tokens(&call.arguments))
                    .sum::<u64>()
        }
        Message::Tool { content, .. } => estimate_tokens(content),
    }
}

/// One message of the conversation and where it came from (the step or call that made it;
/// empty for the run's input), for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub message: Message,
    pub source: String,
}

/// The tools a run's model may call: described once, for the request of every step.
pub struct ToolSet {
    pub definitions: Arc<[ToolDefinition]>,
    /// What the descriptions cost, estimated once: every step's budget counts them.
    tokens: u64,
}

impl ToolSet {
    pub fn new(definitions: Vec<ToolDefinition>) -> ToolSet {
        let tokens = definitions
            .iter()
            .map(|tool| {
                estimate_tokens(&tool.name)
                    + estimate_tokens(&tool.description)
                    + estimate_tokens(&tool.input_schema.to_string())
            })
            .sum();
        ToolSet {
            definitions: definitions.into(),
            tokens,
        }
    }
}

/// The context of one step.
pub struct Built {
    pub messages: Vec<Message>,
    pub report: pb::ContextBuilt,
}

/// Builds the context from the whole conversation.
pub fn build(system: &str, tools: &ToolSet, conversation: &[Entry], budget: u64) -> Built {
    let tools_tokens = tools.tokens;
    let fixed = estimate_tokens(system) + tools_tokens;

    // Units after the goal: a lone user message, or an assistant message and its answers.
    let mut units: Vec<Vec<usize>> = Vec::new();
    for (index, entry) in conversation.iter().enumerate().skip(1) {
        match &entry.message {
            Message::Tool { .. } if !units.is_empty() => {
                if let Some(unit) = units.last_mut() {
                    unit.push(index);
                }
            }
            _ => units.push(vec![index]),
        }
    }
    let mut messages: Vec<Option<Message>> = conversation
        .iter()
        .map(|entry| Some(entry.message.clone()))
        .collect();
    let mut disposition = vec![pb::ContextDisposition::Included; conversation.len()];
    let total = |messages: &[Option<Message>]| -> u64 {
        fixed + messages.iter().flatten().map(message_tokens).sum::<u64>()
    };
    let protected = units.last().cloned().unwrap_or_default();

    // Summarise observations, oldest first, outside the latest exchange.
    for (index, state) in disposition.iter_mut().enumerate() {
        if total(&messages) <= budget {
            break;
        }
        if protected.contains(&index) {
            continue;
        }
        if let Some(Some(message)) = messages.get_mut(index)
            && summarise(message)
        {
            *state = pb::ContextDisposition::Summarised;
        }
    }
    // Drop whole exchanges, oldest first, outside the latest; the note that says so is
    // counted in.
    let mut dropped_units = 0;
    let note = |dropped: usize| {
        format!(
            "\n\n[context: {dropped} earlier exchange(s) were dropped to fit the context budget]"
        )
    };
    let note_tokens = estimate_tokens(&note(units.len()));
    for unit in units.iter().take(units.len().saturating_sub(1)) {
        let reserve = if dropped_units > 0 { note_tokens } else { 0 };
        if total(&messages) + reserve <= budget {
            break;
        }
        for &index in unit {
            messages[index] = None;
            disposition[index] = pb::ContextDisposition::Dropped;
        }
        dropped_units += 1;
    }
    // The latest exchange alone is too big: summarise it as well.
    for &index in &protected {
        if total(&messages) <= budget {
            break;
        }
        if let Some(Some(message)) = messages.get_mut(index)
            && summarise(message)
        {
            disposition[index] = pb::ContextDisposition::Summarised;
        }
    }
    if dropped_units > 0
        && let Some(Some(Message::User { text })) = messages.first_mut()
    {
        text.push_str(&note(dropped_units));
    }

    let mut items = vec![
        pb::ContextItem {
            kind: "system".into(),
            source: String::new(),
            tokens: estimate_tokens(system),
            disposition: pb::ContextDisposition::Included as i32,
        },
        pb::ContextItem {
            kind: "tools".into(),
            source: format!("{} tools", tools.definitions.len()),
            tokens: tools_tokens,
            disposition: pb::ContextDisposition::Included as i32,
        },
    ];
    for (index, entry) in conversation.iter().enumerate() {
        let original = &entry.message;
        let kind = match original {
            Message::User { .. } if index == 0 => "goal",
            Message::User { .. } => "user",
            Message::Assistant { .. } => "assistant",
            Message::Tool { .. } => "observation",
        };
        items.push(pb::ContextItem {
            kind: kind.into(),
            source: entry.source.clone(),
            tokens: messages[index]
                .as_ref()
                .map_or_else(|| message_tokens(original), message_tokens),
            disposition: disposition[index] as i32,
        });
    }
    let messages: Vec<Message> = messages.into_iter().flatten().collect();
    Built {
        report: pb::ContextBuilt {
            tokens: fixed + messages.iter().map(message_tokens).sum::<u64>(),
            budget,
            items,
        },
        messages,
    }
}

/// Replaces an observation's content with its status and a short prefix; false when the
/// message is not an observation or already short.
fn summarise(message: &mut Message) -> bool {
    let Message::Tool { content, .. } = message else {
        return false;
    };
    if content.chars().count() <= SUMMARY_CHARS {
        return false;
    }
    let status = serde_json::from_str::<Value>(content)
        .ok()
        .and_then(|value| {
            value
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".into());
    let head: String = content.chars().take(SUMMARY_CHARS).collect();
    *content = json!({
        "status": status,
        "summarised": true,
        "head": head,
        "original_bytes": content.len(),
    })
    .to_string();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::provider::ToolCall;

    fn exchange(i: usize, observation_bytes: usize) -> Vec<Message> {
        vec![
            Message::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: format!("c{i}"),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::Tool {
                call_id: format!("c{i}"),
                name: "read_file".into(),
                content: json!({"status": "OK", "content": "x".repeat(observation_bytes)})
                    .to_string(),
                is_error: false,
            },
        ]
    }

    fn conversation(exchanges: usize, observation_bytes: usize) -> Vec<Entry> {
        let mut messages = vec![Message::User {
            text: "fix the test".into(),
        }];
        for i in 0..exchanges {
            messages.extend(exchange(i, observation_bytes));
        }
        messages
            .into_iter()
            .map(|message| Entry {
                message,
                source: String::new(),
            })
            .collect()
    }

    fn dispositions(built: &Built, kind: &str) -> Vec<pb::ContextDisposition> {
        built
            .report
            .items
            .iter()
            .filter(|item| item.kind == kind)
            .map(|item| pb::ContextDisposition::try_from(item.disposition).expect("known"))
            .collect()
    }

    #[test]
    fn everything_fits_within_a_large_budget() {
        let conversation = conversation(3, 100);
        let built = build(
            "system",
            &ToolSet::new(Vec::new()),
            &conversation,
            1_000_000,
        );
        let messages: Vec<Message> = conversation.into_iter().map(|e| e.message).collect();
        assert_eq!(built.messages, messages);
        assert!(
            dispositions(&built, "observation")
                .iter()
                .all(|d| *d == pb::ContextDisposition::Included)
        );
        assert!(built.report.tokens <= built.report.budget);
    }

    #[test]
    fn old_observations_are_summarised_before_anything_is_dropped() {
        let conversation = conversation(4, 4000);
        // Room for the latest observation in full and short summaries of the rest.
        let built = build("system", &ToolSet::new(Vec::new()), &conversation, 1500);
        assert_eq!(built.messages.len(), conversation.len());
        assert_eq!(
            dispositions(&built, "observation"),
            vec![
                pb::ContextDisposition::Summarised,
                pb::ContextDisposition::Summarised,
                pb::ContextDisposition::Summarised,
                pb::ContextDisposition::Included,
            ]
        );
        assert!(built.report.tokens <= 1500, "{}", built.report.tokens);
    }

    #[test]
    fn whole_old_exchanges_are_dropped_when_summaries_are_not_enough() {
        let conversation = conversation(40, 4000);
        let built = build("system", &ToolSet::new(Vec::new()), &conversation, 1600);
        assert!(built.report.tokens <= 1600, "{}", built.report.tokens);
        let Message::User { text } = &built.messages[0] else {
            panic!("the goal comes first");
        };
        assert!(text.starts_with("fix the test") && text.contains("dropped"));
        // Well-formed: every observation follows an assistant message that called it.
        for (i, message) in built.messages.iter().enumerate() {
            if let Message::Tool { call_id, .. } = message {
                let Message::Assistant { tool_calls, .. } = &built.messages[i - 1] else {
                    panic!("an observation without its call at {i}");
                };
                assert_eq!(&tool_calls[0].id, call_id);
            }
        }
        let last = dispositions(&built, "observation");
        assert_eq!(last.last(), Some(&pb::ContextDisposition::Included));
        assert!(last.contains(&pb::ContextDisposition::Dropped));
    }

    #[test]
    fn summaries_keep_the_status() {
        let mut message = exchange(0, 5000).remove(1);
        assert!(summarise(&mut message));
        let Message::Tool { content, .. } = message else {
            panic!("still an observation");
        };
        let value: Value = serde_json::from_str(&content).expect("json");
        assert_eq!(value["status"], "OK");
        assert_eq!(value["summarised"], true);
    }
}
