//! Checkpoints: the loop's state, saved at every point a restarted daemon must be able to go
//! on from — after the run starts, after each model response (with the calls it proposed),
//! and after each of those calls is observed. Together with the effect journal, they let a
//! resumed run continue exactly where it stopped, without running any call twice behind
//! anyone's back.

use std::collections::BTreeMap;

use airlock_proto::v1 as pb;
use serde::{Deserialize, Serialize};

use super::provider::{Message, ToolCall};

/// Everything the loop needs to go on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopState {
    pub conversation: Vec<SavedMessage>,
    pub sources: Vec<String>,
    pub usage: SavedUsage,
    pub steps: u32,
    pub failures: BTreeMap<String, u32>,
    /// Wall time the run has used, in milliseconds, not counting time the daemon was down.
    pub elapsed_ms: u64,
    /// The calls of the latest model response that are not all observed yet.
    pub pending: Option<PendingStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingStep {
    pub step_id: String,
    /// Each proposed call with the run's own id for it.
    pub calls: Vec<(SavedCall, String)>,
    /// The first call not yet observed.
    pub next: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model_calls: u32,
    pub tool_calls: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case", deny_unknown_fields)]
pub enum SavedMessage {
    User {
        text: String,
    },
    Assistant {
        text: Option<String>,
        tool_calls: Vec<SavedCall>,
    },
    Tool {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
    },
}

impl From<&ToolCall> for SavedCall {
    fn from(call: &ToolCall) -> SavedCall {
        SavedCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }
    }
}

impl From<SavedCall> for ToolCall {
    fn from(call: SavedCall) -> ToolCall {
        ToolCall {
            id: call.id,
            name: call.name,
            arguments: call.arguments,
        }
    }
}

impl From<&Message> for SavedMessage {
    fn from(message: &Message) -> SavedMessage {
        match message {
            Message::User { text } => SavedMessage::User { text: text.clone() },
            Message::Assistant { text, tool_calls } => SavedMessage::Assistant {
                text: text.clone(),
                tool_calls: tool_calls.iter().map(SavedCall::from).collect(),
            },
            Message::Tool {
                call_id,
                name,
                content,
                is_error,
            } => SavedMessage::Tool {
                call_id: call_id.clone(),
                name: name.clone(),
                content: content.clone(),
                is_error: *is_error,
            },
        }
    }
}

impl From<SavedMessage> for Message {
    fn from(message: SavedMessage) -> Message {
        match message {
            SavedMessage::User { text } => Message::User { text },
            SavedMessage::Assistant { text, tool_calls } => Message::Assistant {
                text,
                tool_calls: tool_calls.into_iter().map(ToolCall::from).collect(),
            },
            SavedMessage::Tool {
                call_id,
                name,
                content,
                is_error,
            } => Message::Tool {
                call_id,
                name,
                content,
                is_error,
            },
        }
    }
}

impl From<pb::Usage> for SavedUsage {
    fn from(usage: pb::Usage) -> SavedUsage {
        SavedUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            model_calls: usage.model_calls,
            tool_calls: usage.tool_calls,
        }
    }
}

impl From<SavedUsage> for pb::Usage {
    fn from(usage: SavedUsage) -> pb::Usage {
        pb::Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            model_calls: usage.model_calls,
            tool_calls: usage.tool_calls,
        }
    }
}

impl LoopState {
    pub fn encode(&self) -> Vec<u8> {
        // Serialising plain data to JSON cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<LoopState, String> {
        serde_json::from_slice(bytes).map_err(|err| format!("the checkpoint cannot be read: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_survives_encoding() {
        let call = ToolCall {
            id: "call_0_0".into(),
            name: "write_file".into(),
            arguments: "{\"path\": ".into(),
        };
        let state = LoopState {
            conversation: vec![
                SavedMessage::from(&Message::User {
                    text: "fix it".into(),
                }),
                SavedMessage::from(&Message::Assistant {
                    text: None,
                    tool_calls: vec![call.clone()],
                }),
            ],
            sources: vec![String::new(), "stp_1".into()],
            usage: SavedUsage {
                input_tokens: 10,
                output_tokens: 5,
                model_calls: 1,
                tool_calls: 0,
            },
            steps: 1,
            failures: [("k".to_owned(), 2)].into(),
            elapsed_ms: 1234,
            pending: Some(PendingStep {
                step_id: "stp_1".into(),
                calls: vec![(SavedCall::from(&call), "cal_1".into())],
                next: 0,
            }),
        };
        let decoded = LoopState::decode(&state.encode()).expect("decodes");
        assert_eq!(decoded, state);
        let messages: Vec<Message> = decoded
            .conversation
            .into_iter()
            .map(Message::from)
            .collect();
        assert!(
            matches!(&messages[1], Message::Assistant { tool_calls, .. } if tool_calls[0] == call)
        );
        assert!(LoopState::decode(b"{\"garbage\": 1}").is_err());
    }
}
