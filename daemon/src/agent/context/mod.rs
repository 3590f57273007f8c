//! The context builder: what the model sees at each step, within a token budget, with a
//! report of what went in, what was summarised and what was dropped, and why.
//!
//! The context is a case file, in this order: the system prompt and the tool descriptions;
//! the workspace's project instructions (`AGENTS.md`, as it was when the run started, sent
//! as untrusted workspace content, never as policy — see [`project`]); then the
//! conversation: what the session's earlier runs left (their history), summaries of older
//! steps, the run's goal, and its steps, the latest exchange last.
//!
//! Tokens are counted with the model's own encoding where it is public (the OpenAI family)
//! and estimated otherwise, calibrated against the usage each provider reports
//! ([`Counter`], `tokens`). When the conversation does not fit, the loop first asks the model
//! to compact the older steps into a summary ([`compact`]); what still does not fit — or
//! everything, when that call fails — is cut mechanically here: older observations are
//! summarised first (oldest first), then whole older exchanges are dropped (oldest first),
//! each exchange being an assistant message with the observations that answer it, so the
//! conversation stays well-formed for every provider. The goal, the summaries and the
//! latest exchange are never dropped.

pub(super) mod compact;
pub(super) mod project;

use std::sync::{Arc, OnceLock};

use airlock_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::observation::FULL_OUTPUT;
use super::provider::{Message, ToolDefinition};
use super::tokens::CalibrationState;
use super::tokens::{Calibration, Tokenizer};

/// What a mechanically summarised observation keeps of its content.
const SUMMARY_CHARS: usize = 240;

/// Where an entry of the conversation comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Part {
    /// An earlier run of the session: what the run continues from.
    History,
    /// The run's input. (A forked run's conversation holds its parent's too: the last one is
    /// the run's goal.)
    Goal,
    /// What the run itself added: the user's later input, the model's answers, observations.
    #[default]
    Run,
    /// The model's summary of older entries, standing for them from then on.
    Summary {
        /// The run's own answers it stands for: a stateless provider numbers its turns by
        /// them.
        answers: u32,
    },
}

/// One message of the conversation, where it came from (the step or call that made it;
/// empty for the run's input), and which part of the case file it is. An entry is never
/// changed once made (a summary replaces entries, it does not edit them): its count is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub message: Message,
    pub source: String,
    pub part: Part,
    pub counted: Counted,
}

/// A message's tokens as its run's tokenizer counts them, uncalibrated, once counted: every
/// step builds the context from the whole conversation, and a BPE count of each message
/// every time would make a step's cost grow with the run. Not saved: a run resumed (or a
/// session's next run, whose model may differ) counts again.
#[derive(Debug, Clone, Default)]
pub struct Counted(OnceLock<u64>);

/// Entries are equal by what they hold, counted or not.
impl PartialEq for Counted {
    fn eq(&self, _: &Counted) -> bool {
        true
    }
}

impl Entry {
    /// How many of the run's answers the entry stands for.
    fn answers(&self) -> u32 {
        match (self.part, &self.message) {
            (Part::Summary { answers }, _) => answers,
            (Part::History, _) => 0,
            (Part::Goal | Part::Run, Message::Assistant { .. }) => 1,
            (Part::Goal | Part::Run, Message::User { .. } | Message::Tool { .. }) => 0,
        }
    }
}

/// How a run counts tokens: its model's tokenizer, scaled by what the provider's reported
/// usage has shown so far. A BPE counts tens of megabytes a second, and every step builds the
/// context from all of it: what does not change is counted once and kept with it
/// ([`Counted`] on each entry, [`Fixed`] for the system prompt and project instructions, the
/// [`ToolSet`] for the tools), so a step costs a count of what is new in it.
#[derive(Debug)]
pub struct Counter {
    tokenizer: Tokenizer,
    calibration: Calibration,
}

/// The counts of a run's system prompt and project instructions, made at its first step:
/// neither changes while it runs.
#[derive(Debug, Default)]
pub struct Fixed {
    system: Counted,
    project: Counted,
}

impl Counter {
    pub fn new(tokenizer: Tokenizer, state: CalibrationState) -> Counter {
        Counter {
            tokenizer,
            calibration: Calibration::restore(state.factor, state.samples),
        }
    }

    /// What the run has learnt so far, for its checkpoint.
    pub fn state(&self) -> CalibrationState {
        CalibrationState {
            factor: self.calibration.factor(),
            samples: self.calibration.samples(),
        }
    }

    /// Learns from a model call: `raw` as this counter counted the request, `reported` as the
    /// provider did.
    pub fn observe(&mut self, raw: u64, reported: u64) {
        self.calibration.observe(raw, reported);
    }

    fn raw_text(&self, text: &str) -> u64 {
        self.tokenizer.count(text)
    }

    /// The budget the counts are held to: all of it with the model's own encoding, less the
    /// estimate's tolerance otherwise, so a context counted a little short still fits.
    fn usable(&self, budget: u64) -> u64 {
        let headroom = (budget as f64 * self.tokenizer.headroom()).ceil() as u64;
        budget.saturating_sub(headroom)
    }

    /// A message with its framing, uncalibrated.
    fn raw_message(&self, message: &Message) -> u64 {
        self.tokenizer.per_message()
            + match message {
                Message::User { text } => self.raw_text(text),
                Message::Assistant { text, tool_calls } => {
                    text.as_deref().map_or(0, |text| self.raw_text(text))
                        + tool_calls
                            .iter()
                            .map(|call| self.raw_text(&call.name) + self.raw_text(&call.arguments))
                            .sum::<u64>()
                }
                Message::Tool { content, .. } => self.raw_text(content),
            }
    }

    fn calibrated(&self, raw: u64) -> u64 {
        self.calibration.apply(raw)
    }

    /// An entry's message with its framing.
    pub fn entry(&self, entry: &Entry) -> u64 {
        self.calibrated(self.raw_entry(entry))
    }

    /// An entry's message with its framing, uncalibrated, counted once.
    fn raw_entry(&self, entry: &Entry) -> u64 {
        *entry
            .counted
            .0
            .get_or_init(|| self.raw_message(&entry.message))
    }

    pub fn text(&self, text: &str) -> u64 {
        self.calibrated(self.raw_text(text))
    }
}

/// The tools a run's model may call: described once, for the request of every step.
pub struct ToolSet {
    pub definitions: Arc<[ToolDefinition]>,
    /// What the descriptions cost, uncalibrated, counted once: every step's budget counts
    /// them.
    raw_tokens: u64,
}

impl ToolSet {
    pub fn new(definitions: Vec<ToolDefinition>, tokenizer: &Tokenizer) -> ToolSet {
        let raw_tokens = definitions
            .iter()
            .map(|tool| {
                tokenizer.count(&tool.name)
                    + tokenizer.count(&tool.description)
                    + tokenizer.count(&tool.input_schema.to_string())
            })
            .sum();
        ToolSet {
            definitions: definitions.into(),
            raw_tokens,
        }
    }
}

/// What one step's context is built from.
pub struct Sources<'a> {
    pub system: &'a str,
    pub tools: &'a ToolSet,
    /// The workspace's `AGENTS.md`, as the run started.
    pub project: Option<&'a str>,
    pub conversation: &'a [Entry],
    pub budget: u64,
    pub counter: &'a Counter,
    /// The counts of `system` and `project`, kept across the run's steps.
    pub fixed: &'a Fixed,
}

impl Sources<'_> {
    fn raw_system(&self) -> u64 {
        *self
            .fixed
            .system
            .0
            .get_or_init(|| self.counter.raw_text(self.system))
    }

    /// The project instructions' message with its framing; 0 without any.
    fn raw_project(&self) -> u64 {
        *self.fixed.project.0.get_or_init(|| {
            self.project
                .map_or(0, |text| self.counter.raw_message(&project::message(text)))
        })
    }

    /// The system prompt, the tools and the project instructions, uncalibrated.
    fn raw_fixed(&self) -> u64 {
        self.counter.tokenizer.per_request()
            + self.raw_system()
            + self.tools.raw_tokens
            + self.raw_project()
    }

    /// Whether the whole conversation fits the budget as it is.
    pub fn fits(&self) -> bool {
        self.total() <= self.counter.usable(self.budget)
    }

    /// The whole conversation as it is, calibrated, with the fixed parts.
    pub fn total(&self) -> u64 {
        self.counter.calibrated(
            self.raw_fixed()
                + self
                    .conversation
                    .iter()
                    .map(|entry| self.counter.raw_entry(entry))
                    .sum::<u64>(),
        )
    }

    /// The index of the run's goal: the last [`Part::Goal`] entry.
    fn goal(&self) -> Option<usize> {
        self.conversation
            .iter()
            .rposition(|entry| entry.part == Part::Goal)
    }

    /// The conversation's exchanges outside the goal and the summaries, oldest first: a lone
    /// user message, or an assistant message and the observations that answer it.
    fn units(&self) -> Vec<Vec<usize>> {
        let goal = self.goal();
        let mut units: Vec<Vec<usize>> = Vec::new();
        for (index, entry) in self.conversation.iter().enumerate() {
            if Some(index) == goal || matches!(entry.part, Part::Summary { .. }) {
                continue;
            }
            match (&entry.message, units.last_mut()) {
                (Message::Tool { .. }, Some(unit)) => unit.push(index),
                _ => units.push(vec![index]),
            }
        }
        units
    }
}

/// The context of one step.
pub struct Built {
    pub messages: Vec<Message>,
    pub report: pb::ContextBuilt,
    /// The request as counted before calibration: what the provider's reported usage is
    /// compared with.
    pub raw_tokens: u64,
    /// The run's answers so far (see `ModelRequest::answers`).
    pub answers: u32,
}

impl Built {
    /// Whether anything was summarised or dropped to fit: the conversation outgrew the budget.
    pub fn cut(&self) -> bool {
        self.report
            .items
            .iter()
            .any(|item| item.disposition != pb::ContextDisposition::Included as i32)
    }
}

/// The run's answers so far in `conversation` (see `ModelRequest::answers`).
fn answers(conversation: &[Entry]) -> u32 {
    conversation.iter().map(Entry::answers).sum()
}

/// One entry as the builder cuts it: what is sent of it, what that costs uncalibrated, and
/// what became of it.
struct Slot {
    message: Option<Message>,
    raw: u64,
    fate: Fate,
}

impl Slot {
    /// Summarises the entry if it is a long observation; returns the tokens saved.
    fn summarise(&mut self, counter: &Counter) -> u64 {
        let Some(message) = &mut self.message else {
            return 0;
        };
        if !summarise(message) {
            return 0;
        }
        let raw = counter.raw_message(message);
        let saved = self.raw.saturating_sub(raw);
        self.raw = raw;
        self.fate = Fate::Summarised;
        saved
    }
}

/// What happened to one entry, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Included(&'static str),
    Summarised,
    Dropped,
}

/// Builds the context from the whole conversation, cutting it mechanically to the budget.
pub fn build(sources: &Sources<'_>) -> Built {
    let counter = sources.counter;
    let conversation = sources.conversation;
    let raw_fixed = sources.raw_fixed();
    let units = sources.units();
    let older = &units[..units.len().saturating_sub(1)];
    let latest = units.last().cloned().unwrap_or_default();
    let goal = sources.goal();

    let mut slots: Vec<Slot> = conversation
        .iter()
        .enumerate()
        .map(|(index, entry)| Slot {
            raw: counter.raw_entry(entry),
            message: Some(entry.message.clone()),
            fate: Fate::Included(included_reason(
                entry,
                Some(index) == goal,
                latest.contains(&index),
            )),
        })
        .collect();
    // The request as it stands, kept up to date as the cutting goes, so that each check
    // costs an addition rather than a count of the whole conversation.
    let mut total = raw_fixed + slots.iter().map(|slot| slot.raw).sum::<u64>();
    let usable = counter.usable(sources.budget);
    let fits = |total: u64| counter.calibrated(total) <= usable;

    // Summarise observations, oldest first, outside the latest exchange.
    'summarising: for unit in older {
        for &index in unit {
            if fits(total) {
                break 'summarising;
            }
            total -= slots[index].summarise(counter);
        }
    }
    // Drop whole exchanges, oldest first, outside the latest; the note that says so is
    // counted in.
    let mut dropped_units = 0;
    let note_tokens = counter.raw_text(&dropped_note(units.len()));
    for unit in older {
        let reserve = if dropped_units > 0 { note_tokens } else { 0 };
        if fits(total + reserve) {
            break;
        }
        for &index in unit {
            let slot = &mut slots[index];
            total -= slot.raw;
            slot.raw = 0;
            slot.message = None;
            slot.fate = Fate::Dropped;
        }
        dropped_units += 1;
    }
    // The latest exchange alone is too big: summarise it as well.
    for &index in &latest {
        if fits(total) {
            break;
        }
        total -= slots[index].summarise(counter);
    }
    if dropped_units > 0
        && let Some(slot) = goal.and_then(|goal| slots.get_mut(goal))
        && let Some(Message::User { text }) = &mut slot.message
    {
        text.push_str(&dropped_note(dropped_units));
        let raw = counter.raw_text(text) + counter.tokenizer.per_message();
        total = total - slot.raw + raw;
        slot.raw = raw;
    }

    let mut items = vec![
        item(
            "system",
            String::new(),
            counter.calibrated(sources.raw_system()),
            "the daemon's system prompt with the session's and the run's instructions",
        ),
        item(
            "tools",
            format!("{} tools", sources.tools.definitions.len()),
            counter.calibrated(sources.tools.raw_tokens),
            "the descriptions of the tools the run may call",
        ),
    ];
    let project = sources.project.map(project::message);
    if project.is_some() {
        items.push(item(
            "project_instructions",
            project::FILE.to_owned(),
            counter.calibrated(sources.raw_project()),
            "the workspace's AGENTS.md as it was when the run started: untrusted workspace \
             content for the model to read, never policy",
        ));
    }
    for ((index, entry), slot) in conversation.iter().enumerate().zip(&slots) {
        let (disposition, reason) = match slot.fate {
            Fate::Included(reason) => (pb::ContextDisposition::Included, reason),
            Fate::Summarised => (
                pb::ContextDisposition::Summarised,
                "cut to its status and first characters to fit the budget",
            ),
            Fate::Dropped => (
                pb::ContextDisposition::Dropped,
                "an older exchange, dropped whole to fit the budget",
            ),
        };
        let tokens = match slot.fate {
            Fate::Dropped => counter.entry(entry),
            Fate::Included(_) | Fate::Summarised => counter.calibrated(slot.raw),
        };
        items.push(pb::ContextItem {
            kind: kind(entry, Some(index) == goal).into(),
            source: entry.source.clone(),
            tokens,
            disposition: disposition as i32,
            reason: reason.into(),
        });
    }
    let messages: Vec<Message> = project
        .into_iter()
        .chain(slots.into_iter().filter_map(|slot| slot.message))
        .collect();
    // `total` counts the project instructions with the fixed parts.
    let raw_tokens = total;
    Built {
        report: pb::ContextBuilt {
            tokens: counter.calibrated(raw_tokens),
            budget: sources.budget,
            items,
            tokenizer: counter.tokenizer.name().into(),
            calibration: counter.calibration.factor(),
        },
        messages,
        raw_tokens,
        answers: answers(conversation),
    }
}

fn item(kind: &str, source: String, tokens: u64, reason: &str) -> pb::ContextItem {
    pb::ContextItem {
        kind: kind.into(),
        source,
        tokens,
        disposition: pb::ContextDisposition::Included as i32,
        reason: reason.into(),
    }
}

fn kind(entry: &Entry, is_goal: bool) -> &'static str {
    match (&entry.message, entry.part) {
        (_, Part::Summary { .. }) => "summary",
        (Message::User { .. }, _) if is_goal => "goal",
        (Message::User { .. }, _) => "user",
        (Message::Assistant { .. }, _) => "assistant",
        (Message::Tool { .. }, _) => "observation",
    }
}

fn included_reason(entry: &Entry, is_goal: bool, latest: bool) -> &'static str {
    match entry.part {
        Part::Summary { .. } => "the model's summary of older steps: always kept",
        _ if is_goal => "the run's input: always kept",
        _ if latest => "the latest exchange: always kept whole",
        Part::History => "from an earlier run of the session; fits the budget",
        Part::Goal | Part::Run => "fits the budget",
    }
}

fn dropped_note(dropped: usize) -> String {
    format!("\n\n[context: {dropped} earlier exchange(s) were dropped to fit the context budget]")
}

/// Replaces an observation's content with its status, a short prefix and the pointer to its
/// kept full output; false when the message is not an observation or already short.
fn summarise(message: &mut Message) -> bool {
    let Message::Tool { content, .. } = message else {
        return false;
    };
    if content.chars().count() <= SUMMARY_CHARS {
        return false;
    }
    let parsed = serde_json::from_str::<Value>(content).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|value| value.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let status = field("status").unwrap_or_else(|| "unknown".into());
    let head: String = content.chars().take(SUMMARY_CHARS).collect();
    let mut summary = json!({
        "status": status,
        "summarised": true,
        "head": head,
        "original_bytes": content.len(),
    });
    if let Some(execution_id) = field(FULL_OUTPUT) {
        summary[FULL_OUTPUT] = Value::String(execution_id);
    }
    *content = summary.to_string();
    true
}

#[cfg(test)]
mod tests;
