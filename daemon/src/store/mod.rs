//! The store: sessions, runs and each run's event log — the source of truth that clients
//! re-attach from and a restarted daemon resumes from.
//!
//! Events are kept as encoded `airlock.v1.RunEvent` messages: the log's format is the wire
//! format, so replaying it to a client is a copy, and its evolution follows protobuf's rules.
//! The store is a trait so a fleet of daemons can share a server database; SQLite, one file in
//! the state directory, is the embedded default.

mod sqlite;

use std::collections::BTreeMap;

use airlock_proto::v1 as pb;

pub use sqlite::{SqliteStore, StoreOptions};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub session_id: String,
    /// Absolute host path, already checked against the workspace roots; empty for none.
    pub workspace: String,
    pub labels: BTreeMap<String, String>,
    pub created_at_ms: i64,
    /// The tenant that created it; only that tenant sees it.
    pub tenant: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Running,
    WaitingForApproval,
    Finished,
}

impl RunState {
    fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::WaitingForApproval => "waiting",
            RunState::Finished => "finished",
        }
    }

    fn parse(text: &str) -> Option<RunState> {
        match text {
            "running" => Some(RunState::Running),
            "waiting" => Some(RunState::WaitingForApproval),
            "finished" => Some(RunState::Finished),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    pub session_id: String,
    pub state: RunState,
    /// The request that started the run, as the client sent it.
    pub start: pb::StartRun,
    pub model: String,
    pub workspace: String,
    pub trace_id: String,
    pub created_at_ms: i64,
    pub finished_at_ms: Option<i64>,
    pub stop_reason: Option<pb::StopReason>,
    pub stop_detail: String,
    pub final_text: String,
    pub usage: pb::Usage,
    pub steps: u32,
    pub last_seq: u64,
    /// The tenant that started it; only that tenant sees it.
    pub tenant: String,
}

/// A recoverable snapshot of a run's loop, covering its log up to `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub checkpoint_id: String,
    pub seq: u64,
    /// The loop's state, as the agent encodes it.
    pub state: Vec<u8>,
    pub created_at_ms: i64,
}

/// The effect journal's entry for one tool call: its intent, written before it runs, and its
/// result, written after.
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    pub run_id: String,
    pub call_id: String,
    pub tool: String,
    pub arguments: String,
    pub idempotent: bool,
    pub intent_at_ms: i64,
    pub result: Option<pb::ToolResult>,
}

/// How an approval request was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalResolution {
    pub decision: pb::Decision,
    pub reason: String,
    pub decided_by: String,
    pub resolved_at_ms: i64,
}

/// A call's full output, kept when the caller saw only part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRecord {
    pub execution_id: String,
    /// sha256 of the content, lowercase hex: the name of its blob.
    pub digest: String,
    pub size: u64,
    pub created_at_ms: i64,
}

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub session_id: Option<String>,
    pub state: Option<RunState>,
    /// Only the runs of this tenant.
    pub tenant: Option<String>,
}

/// Where a page of runs ended: the next page starts after this run (runs are listed newest
/// first, then by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCursor {
    pub created_at_ms: i64,
    pub run_id: String,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub stop_reason: pb::StopReason,
    pub stop_detail: String,
    pub final_text: String,
    pub finished_at_ms: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the store at {path} cannot be opened: {message}")]
    Open { path: String, message: String },
    #[error("the store at {path} is damaged and will not be used: {message}")]
    Damaged { path: String, message: String },
    #[error("the store failed: {0}")]
    Io(String),
    #[error("no run `{0}`")]
    UnknownRun(String),
    #[error("event {seq} of run {run_id} is out of order (the log is at {last})")]
    OutOfOrder { run_id: String, seq: u64, last: u64 },
    #[error("a stored event cannot be decoded: {0}")]
    Corrupt(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Where sessions, runs and events live. Every write is durable when it returns.
pub trait Store: Send + Sync {
    fn create_session(&self, session: &SessionRecord) -> StoreResult<()>;
    fn session(&self, session_id: &str) -> StoreResult<Option<SessionRecord>>;

    /// Records a new run together with its first event (`seq` 1): a run is never in the
    /// store without the event that says it started.
    fn create_run(&self, run: &RunRecord, first: &pb::RunEvent) -> StoreResult<()>;
    fn run(&self, run_id: &str) -> StoreResult<Option<RunRecord>>;
    /// Newest first, at most `limit`, after `after` (the cursor a previous page returned);
    /// the cursor of the next page when there is one.
    fn list_runs(
        &self,
        filter: &RunFilter,
        limit: usize,
        after: Option<&RunCursor>,
    ) -> StoreResult<(Vec<RunRecord>, Option<RunCursor>)>;
    fn set_run_state(&self, run_id: &str, state: RunState) -> StoreResult<()>;
    fn update_progress(&self, run_id: &str, steps: u32, usage: &pb::Usage) -> StoreResult<()>;
    fn finish_run(&self, run_id: &str, end: &RunEnd) -> StoreResult<()>;

    /// Appends one event, whose `seq` must be the run's last plus one, and in the same
    /// transaction the run's `spans` that ended since its previous event.
    fn append_event(&self, event: &pb::RunEvent, spans: &[pb::Span]) -> StoreResult<()>;
    /// Events with `seq > after_seq`, in order, at most `limit`.
    fn events_after(
        &self,
        run_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<pb::RunEvent>>;

    /// Runs that were running or waiting when the daemon last stopped.
    fn unfinished_runs(&self) -> StoreResult<Vec<RunRecord>>;

    /// Replaces the run's checkpoint.
    fn save_checkpoint(&self, run_id: &str, checkpoint: &Checkpoint) -> StoreResult<()>;
    fn latest_checkpoint(&self, run_id: &str) -> StoreResult<Option<Checkpoint>>;

    /// Records that a call is about to run. Must succeed before the call runs.
    fn record_intent(&self, effect: &Effect) -> StoreResult<()>;
    fn record_effect_result(
        &self,
        run_id: &str,
        call_id: &str,
        result: &pb::ToolResult,
    ) -> StoreResult<()>;
    fn effect(&self, run_id: &str, call_id: &str) -> StoreResult<Option<Effect>>;

    fn save_approval(&self, request: &pb::ApprovalRequest) -> StoreResult<()>;
    fn resolve_approval(
        &self,
        approval_id: &str,
        resolution: &ApprovalResolution,
    ) -> StoreResult<()>;
    /// The approval asked for a call, and its answer if it got one.
    fn approval_for_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> StoreResult<Option<(pb::ApprovalRequest, Option<ApprovalResolution>)>>;

    fn add_session_grant(&self, session_id: &str, grant_key: &str) -> StoreResult<()>;
    /// Every session grant's key.
    fn session_grants(&self) -> StoreResult<Vec<String>>;

    /// The run's spans in start order.
    fn spans(&self, run_id: &str) -> StoreResult<Vec<pb::Span>>;

    fn record_output(&self, output: &OutputRecord) -> StoreResult<()>;
    fn output(&self, execution_id: &str) -> StoreResult<Option<OutputRecord>>;
    /// Kept outputs, oldest first, at most `limit`.
    fn oldest_outputs(&self, limit: usize) -> StoreResult<Vec<OutputRecord>>;
    fn remove_output(&self, execution_id: &str) -> StoreResult<()>;
    /// How many kept outputs name the blob `digest`.
    fn output_references(&self, digest: &str) -> StoreResult<u64>;

    /// Records which tenant a tool execution belongs to (its `ReadOutput` and
    /// `CancelExecution` are that tenant's alone).
    fn record_execution_owner(&self, execution_id: &str, tenant: &str) -> StoreResult<()>;
    fn execution_owner(&self, execution_id: &str) -> StoreResult<Option<String>>;
}
