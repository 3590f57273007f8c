//! The run's saved state (checkpoints): the loop's state, saved where a restarted daemon goes on from — after the
//! run starts and after each model response (with the calls it proposed). Together with the
//! effect journal, which holds each call's result, they let a resumed run continue exactly
//! where it stopped, without running any call twice behind anyone's back.
//!
//! The saved form is versioned JSON: this daemon writes version 4 — version 3 with the
//! conversation kept apart, entry by entry (the store's `Checkpoint::entries`), so a step
//! writes the entries it added and not the whole conversation again. It still reads version 3
//! (version 2 with each entry's part of the conversation, the turn, the project
//! instructions, the token calibration, the progress detector and the compaction state — all
//! defaulted when absent, so version 2 reads as it is) and the first form (parallel lists of
//! messages and their sources, failures keyed by text), so a run checkpointed by an earlier
//! release resumes after an upgrade.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::super::context::{Counted, Entry, Part};
use super::super::provider::{Message, ToolCall};
use super::super::tokens::CalibrationState;
use super::budget::FailureKey;
use super::progress::ProgressTracker;
use crate::domain::Usage;
use crate::ids::{CallId, StepId, TurnId};

/// The turn a test's snapshot of a state without one is saved with.
#[cfg(test)]
static TEST_TURN: std::sync::LazyLock<TurnId> = std::sync::LazyLock::new(TurnId::new);

/// The version of the form [`Snapshot::encode`] writes.
const VERSION: u32 = 4;

/// The earlier versions whose form [`Saved`] reads too, the conversation inline (version 2's
/// newer fields defaulted).
const INLINE_VERSIONS: [u32; 2] = [2, 3];

/// Everything the loop needs to go on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoopState {
    pub conversation: Vec<Entry>,
    pub usage: Usage,
    pub steps: u32,
    pub failures: BTreeMap<FailureKey, u32>,
    /// Wall time the run has used, in milliseconds, not counting time the daemon was down.
    pub elapsed_ms: u64,
    /// The calls of the latest model response that are not all observed yet.
    pub pending: Option<PendingStep>,
    /// The turn in progress; none in a checkpoint from before turns were recorded.
    pub turn_id: Option<TurnId>,
    /// The workspace's project instructions (AGENTS.md) as they were when the run started.
    pub project_instructions: Option<String>,
    pub calibration: CalibrationState,
    pub progress: ProgressTracker,
    /// The step before which compaction is not tried again after a failed summarising call.
    pub compaction_retry_step: Option<u32>,
}

/// The loop's state borrowed from the running loop, to be saved: nothing of it is copied but
/// into its encoding.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub conversation: &'a [Entry],
    pub usage: &'a Usage,
    pub steps: u32,
    pub failures: &'a BTreeMap<FailureKey, u32>,
    pub elapsed_ms: u64,
    pub pending: Option<&'a PendingStep>,
    pub turn_id: &'a TurnId,
    pub project_instructions: Option<&'a str>,
    pub calibration: CalibrationState,
    pub progress: &'a ProgressTracker,
    pub compaction_retry_step: Option<u32>,
}

/// A snapshot as the store keeps it: the state but the conversation, and the conversation's
/// entries from the first one not already saved.
pub struct Encoded {
    pub state: Vec<u8>,
    pub entries: Vec<Vec<u8>>,
}

impl Snapshot<'_> {
    /// The state, and the conversation's entries from entry `from` on (those before are the
    /// ones the run's checkpoint holds already).
    pub fn encode(&self, from: usize) -> Encoded {
        let entries = self
            .conversation
            .get(from..)
            .unwrap_or_default()
            .iter()
            .map(|entry| {
                let saved = SavedEntry {
                    message: SavedMessage::from(&entry.message),
                    source: Cow::Borrowed(&entry.source),
                    part: entry.part,
                };
                // Serialising plain data to JSON cannot fail.
                serde_json::to_vec(&saved).unwrap_or_default()
            })
            .collect();
        let saved = Saved {
            version: VERSION,
            conversation: Vec::new(),
            entries: Some(self.conversation.len() as u64),
            usage: SavedUsage::from(self.usage),
            steps: self.steps,
            failures: self
                .failures
                .iter()
                .map(|(key, count)| (Cow::Borrowed(key), *count))
                .collect(),
            elapsed_ms: self.elapsed_ms,
            pending: self.pending.map(Cow::Borrowed),
            turn_id: Some(Cow::Borrowed(self.turn_id)),
            project_instructions: self.project_instructions.map(Cow::Borrowed),
            calibration: self.calibration,
            progress: Cow::Borrowed(self.progress),
            compaction_retry_step: self.compaction_retry_step,
        };
        Encoded {
            // Serialising plain data to JSON cannot fail.
            state: serde_json::to_vec(&saved).unwrap_or_default(),
            entries,
        }
    }
}

/// The calls of one model response, and how far the loop got with them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingStep {
    pub step_id: StepId,
    /// Each proposed call with the run's own id for it.
    pub calls: Vec<(SavedCall, CallId)>,
    /// The first call not yet observed.
    pub next: usize,
}

impl PendingStep {
    /// The next call to observe, with its id.
    pub fn next_call(&self) -> Option<(ToolCall, CallId)> {
        self.calls
            .get(self.next)
            .map(|(call, call_id)| (ToolCall::from(call.clone()), call_id.clone()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A message as saved. Written, it borrows from the running loop, so a checkpoint copies the
/// conversation once, into its encoding; read, it owns its strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case", deny_unknown_fields)]
enum SavedMessage<'a> {
    User {
        text: Cow<'a, str>,
    },
    Assistant {
        text: Option<Cow<'a, str>>,
        tool_calls: Vec<SavedCall>,
    },
    Tool {
        call_id: Cow<'a, str>,
        name: Cow<'a, str>,
        content: Cow<'a, str>,
        is_error: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedEntry<'a> {
    message: SavedMessage<'a>,
    source: Cow<'a, str>,
    /// Version 2 has none: every entry was the run's own then.
    #[serde(default)]
    part: Part,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedUsage {
    input_tokens: u64,
    output_tokens: u64,
    model_calls: u32,
    tool_calls: u32,
}

/// Version 4, as written: version 3 with its conversation apart and `entries` counting it;
/// version 2 is version 3 without the fields marked as defaulted.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved<'a> {
    version: u32,
    /// Versions 2 and 3 only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    conversation: Vec<SavedEntry<'a>>,
    /// Version 4: how many entries the conversation has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entries: Option<u64>,
    usage: SavedUsage,
    steps: u32,
    failures: Vec<(Cow<'a, FailureKey>, u32)>,
    elapsed_ms: u64,
    pending: Option<Cow<'a, PendingStep>>,
    #[serde(default)]
    turn_id: Option<Cow<'a, TurnId>>,
    #[serde(default)]
    project_instructions: Option<Cow<'a, str>>,
    #[serde(default)]
    calibration: CalibrationState,
    #[serde(default)]
    progress: Cow<'a, ProgressTracker>,
    #[serde(default)]
    compaction_retry_step: Option<u32>,
}

/// Version 1, as the previous release wrote it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedV1 {
    conversation: Vec<SavedMessage<'static>>,
    sources: Vec<String>,
    usage: SavedUsage,
    steps: u32,
    /// Keyed by tool, NUL, arguments.
    failures: BTreeMap<String, u32>,
    elapsed_ms: u64,
    pending: Option<PendingStep>,
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

impl<'a> From<&'a Message> for SavedMessage<'a> {
    fn from(message: &'a Message) -> SavedMessage<'a> {
        match message {
            Message::User { text } => SavedMessage::User {
                text: Cow::Borrowed(text),
            },
            Message::Assistant { text, tool_calls } => SavedMessage::Assistant {
                text: text.as_deref().map(Cow::Borrowed),
                tool_calls: tool_calls.iter().map(SavedCall::from).collect(),
            },
            Message::Tool {
                call_id,
                name,
                content,
                is_error,
            } => SavedMessage::Tool {
                call_id: Cow::Borrowed(call_id),
                name: Cow::Borrowed(name),
                content: Cow::Borrowed(content),
                is_error: *is_error,
            },
        }
    }
}

impl From<SavedMessage<'_>> for Message {
    fn from(message: SavedMessage<'_>) -> Message {
        match message {
            SavedMessage::User { text } => Message::User {
                text: text.into_owned(),
            },
            SavedMessage::Assistant { text, tool_calls } => Message::Assistant {
                text: text.map(Cow::into_owned),
                tool_calls: tool_calls.into_iter().map(ToolCall::from).collect(),
            },
            SavedMessage::Tool {
                call_id,
                name,
                content,
                is_error,
            } => Message::Tool {
                call_id: call_id.into_owned(),
                name: name.into_owned(),
                content: content.into_owned(),
                is_error,
            },
        }
    }
}

impl From<SavedUsage> for Usage {
    fn from(usage: SavedUsage) -> Usage {
        Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            model_calls: usage.model_calls,
            tool_calls: usage.tool_calls,
        }
    }
}

impl From<&Usage> for SavedUsage {
    fn from(usage: &Usage) -> SavedUsage {
        SavedUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            model_calls: usage.model_calls,
            tool_calls: usage.tool_calls,
        }
    }
}

impl LoopState {
    /// The state of a run that has only its input.
    pub fn start(input: &str) -> LoopState {
        LoopState::start_after(Vec::new(), input)
    }

    /// A fresh state whose conversation is `earlier` (a forked run's, or the session's
    /// history), then `input`.
    pub fn start_after(mut earlier: Vec<Entry>, input: &str) -> LoopState {
        earlier.push(Entry {
            message: Message::User {
                text: input.to_owned(),
            },
            source: String::new(),
            part: Part::Goal,
            counted: Counted::default(),
        });
        LoopState {
            conversation: earlier,
            ..LoopState::default()
        }
    }

    /// The state as [`Snapshot`]: what a test encodes.
    #[cfg(test)]
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            conversation: &self.conversation,
            usage: &self.usage,
            steps: self.steps,
            failures: &self.failures,
            elapsed_ms: self.elapsed_ms,
            pending: self.pending.as_ref(),
            turn_id: self.turn_id.as_ref().unwrap_or(&TEST_TURN),
            project_instructions: self.project_instructions.as_deref(),
            calibration: self.calibration,
            progress: &self.progress,
            compaction_retry_step: self.compaction_retry_step,
        }
    }

    /// A state from its checkpoint: `bytes` the state, `entries` the conversation's (none for
    /// a state of an earlier version, whose conversation is inline).
    pub fn decode(bytes: &[u8], entries: &[Vec<u8>]) -> Result<LoopState, String> {
        let mut current = match serde_json::from_slice::<Saved>(bytes) {
            Ok(saved) if saved.version == VERSION => {
                let count = saved.entries.unwrap_or(0);
                if count != entries.len() as u64 {
                    return Err(format!(
                        "the checkpoint's conversation has {} of its {count} entries",
                        entries.len()
                    ));
                }
                saved
            }
            Ok(saved) if INLINE_VERSIONS.contains(&saved.version) => saved,
            Ok(saved) => {
                return Err(format!(
                    "the checkpoint is of version {}, which this daemon does not know",
                    saved.version
                ));
            }
            Err(err) => match serde_json::from_slice::<SavedV1>(bytes) {
                Ok(first) => return Ok(LoopState::from(first)),
                Err(_) => return Err(format!("the checkpoint cannot be read: {err}")),
            },
        };
        if current.version == VERSION {
            current.conversation = entries
                .iter()
                .enumerate()
                .map(|(at, entry)| {
                    serde_json::from_slice(entry).map_err(|err| {
                        format!("entry {at} of the checkpoint cannot be read: {err}")
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(LoopState {
            conversation: current
                .conversation
                .into_iter()
                .map(|entry| Entry {
                    message: Message::from(entry.message),
                    source: entry.source.into_owned(),
                    part: entry.part,
                    counted: Counted::default(),
                })
                .collect(),
            usage: Usage::from(current.usage),
            steps: current.steps,
            failures: current
                .failures
                .into_iter()
                .map(|(key, count)| (key.into_owned(), count))
                .collect(),
            elapsed_ms: current.elapsed_ms,
            pending: current.pending.map(Cow::into_owned),
            turn_id: current.turn_id.map(Cow::into_owned),
            project_instructions: current.project_instructions.map(Cow::into_owned),
            calibration: current.calibration,
            progress: current.progress.into_owned(),
            compaction_retry_step: current.compaction_retry_step,
        })
    }
}

impl From<SavedV1> for LoopState {
    fn from(first: SavedV1) -> LoopState {
        let mut sources = first.sources.into_iter();
        LoopState {
            conversation: first
                .conversation
                .into_iter()
                .map(|message| Entry {
                    message: Message::from(message),
                    source: sources.next().unwrap_or_default(),
                    part: Part::Run,
                    counted: Counted::default(),
                })
                .collect(),
            usage: Usage::from(first.usage),
            steps: first.steps,
            failures: first
                .failures
                .into_iter()
                .map(|(key, count)| {
                    let (tool, arguments) = key.split_once('\u{0}').unwrap_or(("", &key));
                    let key = FailureKey {
                        tool: tool.to_owned(),
                        arguments: arguments.to_owned(),
                    };
                    (key, count)
                })
                .collect(),
            elapsed_ms: first.elapsed_ms,
            pending: first.pending,
            ..LoopState::default()
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
