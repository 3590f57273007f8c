//! The state of one run's loop: the [`RunLoop`] struct that `mod.rs` drives step by step,
//! `assemble` builds and `pipeline` takes calls through, and the run's tools as the model
//! reads them ([`tool_set`]). Its own file so those files share it without importing the
//! loop's driver, which calls into them.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::super::context::{self, Counter, Entry, ToolSet};
use super::super::live::{LiveRun, Shared};
use super::super::provider::{ModelProvider, ToolDefinition};
use super::super::registry::LiveRuns;
use super::super::tokens::Tokenizer;
use super::approvals::Approvals;
use super::budget::Budget;
use super::progress::ProgressTracker;
use super::recorder::Recorder;
use super::state::PendingStep;
use crate::changes::WorkspaceIgnores;
use crate::ids::TurnId;
use crate::policy::ApprovalPolicy;
use crate::policy::rules::Policy;
use crate::store::SessionRecord;
use crate::tools::Tool;
use crate::trace::Span;

pub(in crate::agent) struct RunLoop {
    pub(super) shared: Arc<Shared>,
    pub(super) run: Arc<LiveRun>,
    /// Where the run is live (see `registry.rs`).
    pub(super) registry: LiveRuns,
    pub(super) session: SessionRecord,
    pub(super) provider: Arc<dyn ModelProvider>,
    pub(super) tools: BTreeMap<String, Arc<Tool>>,
    /// The same tools as the model reads them.
    pub(super) tool_set: ToolSet,
    /// How the run counts tokens.
    pub(super) counter: Counter,
    /// The workspace's AGENTS.md as the run started.
    pub(super) project: Option<String>,
    /// The counts of `system` and `project`, made once.
    pub(super) fixed: context::Fixed,
    /// The turn in progress.
    pub(super) turn_id: TurnId,
    pub(super) progress: ProgressTracker,
    /// After a failed summarising call: the step before which compaction is not tried again.
    pub(super) compaction_retry_step: Option<u32>,
    pub(super) policy: ApprovalPolicy,
    /// The operator's, session's and run's rules.
    pub(super) rules: Policy,
    pub(super) system: String,
    pub(super) stop_on_denial: bool,
    pub(super) input: mpsc::UnboundedReceiver<String>,
    pub(super) conversation: Vec<Entry>,
    pub(super) budget: Budget,
    /// The calls of the latest model response not all observed yet.
    pub(super) pending: Option<PendingStep>,
    pub(super) recorder: Recorder,
    pub(super) approvals: Arc<Approvals>,
    /// The span of the step in progress.
    pub(super) step_span: Option<Span>,
    /// The workspace's ignore files as they were when the run started (or resumed): what
    /// its calls' change sets record by digest only does not move with them.
    pub(super) ignores: Option<WorkspaceIgnores>,
}

/// The run's tools as its model reads them.
pub(super) fn tool_set(tools: &BTreeMap<String, Arc<Tool>>, tokenizer: &Tokenizer) -> ToolSet {
    ToolSet::new(
        tools
            .values()
            .map(|tool| ToolDefinition {
                name: tool.name().to_owned(),
                description: tool.manifest.description.clone(),
                input_schema: tool.arguments.json().clone(),
            })
            .collect(),
        tokenizer,
    )
}
