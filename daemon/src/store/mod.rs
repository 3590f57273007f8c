//! The store: sessions, runs and each run's event log — the source of truth that clients
//! re-attach from and a restarted daemon resumes from.
//!
//! Events are kept as encoded `airlock.v1.RunEvent` messages: the log's format is the wire
//! format, so replaying it to a client is a copy, and its evolution follows protobuf's rules.
//! The store is a trait so a fleet of daemons can share a server database; SQLite, one file in
//! the state directory, is the embedded default.
//!
//! Every call returns a [`Pending`]: the store has taken the request when the call returns,
//! and the future resolves when it is done — for a write, once it is committed. So a caller
//! may hand the store several writes and wait only where durability matters (before a side
//! effect, before an event is shown to anyone), and nothing a store does ever blocks the
//! async runtime: a backend does its work elsewhere (SQLite on a writer thread of its own,
//! a server database over the network).

pub mod audit;
#[cfg(test)]
mod conformance;
mod postgres;
mod queries;
mod relay;
mod rows;
#[cfg(test)]
mod schema;
mod sql;
mod sqlite;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use airlock_proto::v1 as pb;
use tokio::sync::oneshot;

use crate::domain::{DecidedBy, Decision, StopReason, Usage};
pub use crate::domain::{ExecutionOwner, OutputRecord};
use crate::ids::{ApprovalId, CallId, ExecutionId, NodeId, RunId, SessionId, TraceId};

#[cfg(test)]
pub use conformance::{conformance, recorded_run};
pub use postgres::PostgresStore;
#[cfg(feature = "testing")]
pub use postgres::testing::fresh_database as fresh_postgres_database;
pub use relay::{
    CommandId, CommandOutcome, CommandState, Notice, Relay, RunCommand, StoredApproval,
};
pub use sqlite::{SqliteStore, StoreOptions, install_page_cache};

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub session_id: SessionId,
    /// Absolute host path, already checked against the workspace roots; none for a session
    /// without a workspace.
    pub workspace: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub created_at_ms: i64,
    /// The tenant that created it; only that tenant sees it.
    pub tenant: String,
    /// What its runs inherit (checked when the session was created).
    pub settings: pb::SessionSettings,
}

/// What a person granted for a session while answering a question: a rule of the session's
/// grant layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRecord {
    pub session_id: SessionId,
    /// Its identity: an exact call's key, or the digest of the tool and prefix granted.
    pub grant_key: String,
    /// The tool it is for; empty for a grant kept before grants named theirs.
    pub tool: String,
    /// The command prefix it grants; none grants the exact call its key names.
    pub prefix: Option<Vec<String>>,
    /// What a person reads it as (the call's arguments, or the prefix).
    pub covers: String,
    pub created_at_ms: i64,
}

/// A session and where it stands, for `GetSession` and `ListSessions`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub session: SessionRecord,
    pub runs: u32,
    /// The latest run: the one the next run continues from.
    pub last_run_id: Option<RunId>,
    /// When the latest run started; the session's creation when it has none.
    pub last_active_ms: i64,
    /// Whether one of its runs has not finished.
    pub running: bool,
}

/// Where a page of sessions ended: the next page starts after this session (sessions are
/// listed most recently active first, then by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub last_active_ms: i64,
    pub session_id: SessionId,
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
    pub run_id: RunId,
    pub session_id: SessionId,
    pub state: RunState,
    /// The request that started the run, as the client sent it.
    pub start: pb::StartRun,
    pub model: String,
    /// None for a run without a workspace.
    pub workspace: Option<String>,
    pub trace_id: TraceId,
    pub created_at_ms: i64,
    pub finished_at_ms: Option<i64>,
    pub stop_reason: Option<StopReason>,
    pub stop_detail: String,
    pub final_text: String,
    pub usage: Usage,
    pub steps: u32,
    pub last_seq: u64,
    /// The tenant that started it; only that tenant sees it.
    pub tenant: String,
}

/// A recoverable snapshot of a run's loop, covering its log up to `seq`.
///
/// The conversation is kept entry by entry beside the rest of the state, so that a step
/// writes only the entries it added: saved, `entries` are the conversation's from entry
/// `entries_from` on, and the entries before it are those of checkpoint `entries_base`,
/// which must be the run's checkpoint the store holds (it refuses the checkpoint otherwise);
/// read, `entries_from` is 0 and `entries` is the whole conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub checkpoint_id: String,
    pub seq: u64,
    /// The loop's state but its conversation, as the agent encodes it.
    pub state: Vec<u8>,
    pub created_at_ms: i64,
    pub entries_from: u64,
    /// The checkpoint whose entries before `entries_from` this one keeps; none when
    /// `entries_from` is 0.
    pub entries_base: Option<String>,
    /// Each entry as the agent encodes it.
    pub entries: Vec<Vec<u8>>,
}

/// The effect journal's entry for one tool call: its intent, written before it runs, and its
/// result, written after.
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    pub run_id: RunId,
    pub call_id: CallId,
    pub tool: String,
    pub arguments: String,
    pub idempotent: bool,
    pub intent_at_ms: i64,
    /// The longest the call may run from its intent (none in entries from before it was
    /// kept): in a fleet, no daemon takes the run over while the call might still act.
    pub timeout_ms: Option<u64>,
    pub result: Option<pb::ToolResult>,
    /// The call's change set, as it was about to be applied: after a crash, which of its
    /// paths reached the workspace is found by comparing them with it.
    pub pending_changes: Option<pb::ChangeSet>,
}

/// How an approval request was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalResolution {
    pub decision: Decision,
    pub reason: String,
    pub decided_by: DecidedBy,
    pub resolved_at_ms: i64,
}

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub session_id: Option<SessionId>,
    pub state: Option<RunState>,
    /// Only the runs of this tenant.
    pub tenant: Option<String>,
    /// Only runs whose input contains this text, letters in either case as the store's
    /// `lower()` folds them: ASCII letters on both backends, every letter on PostgreSQL.
    pub text: Option<String>,
}

impl RunFilter {
    /// Whether a run's input holds the filter's text, as SQLite's query decides it: ASCII
    /// letters match in either case. (What `WatchRuns` checks new runs by; on PostgreSQL
    /// its listing folds other letters' case too.)
    pub fn matches_text(&self, input: &str) -> bool {
        self.text.as_deref().is_none_or(|text| {
            let text = text.to_ascii_lowercase();
            input.to_ascii_lowercase().contains(&text)
        })
    }

    /// The filter's text as a `LIKE` pattern (compared, lowered, with `lower(input)`), `!`
    /// escaping.
    pub(crate) fn like_pattern(&self) -> Option<String> {
        self.text.as_deref().map(|text| {
            let mut pattern = String::with_capacity(text.len() + 2);
            pattern.push('%');
            for c in text.chars() {
                if matches!(c, '%' | '_' | '!') {
                    pattern.push('!');
                }
                pattern.push(c.to_ascii_lowercase());
            }
            pattern.push('%');
            pattern
        })
    }
}

/// Where a page of runs ended: the next page starts after this run (runs are listed newest
/// first, then by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCursor {
    pub created_at_ms: i64,
    pub run_id: RunId,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub stop_reason: StopReason,
    pub stop_detail: String,
    pub final_text: String,
    pub finished_at_ms: i64,
    /// The seq of the run's `RunFinished` event: the run is recorded finished only once its
    /// log holds it, so no follower waits for an end a failed write left out of the log.
    pub last_seq: u64,
}

/// What a retention sweep removed ([`Store::delete_finished_runs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deleted {
    pub runs: u64,
    pub sessions: u64,
}

#[derive(Debug, Clone, thiserror::Error)]
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
    #[error("a stored record cannot be decoded: {0}")]
    Corrupt(String),
    /// The run's write was refused: another daemon of the fleet took the run over (this
    /// daemon's lease on it lapsed), so nothing more of it is this daemon's to record.
    #[error("run {run_id} was taken over by another daemon; this one no longer writes for it")]
    Fenced { run_id: String },
    /// A run's end or checkpoint was refused: its log does not hold the event it covers (a
    /// write of the log failed before it), so the run is resumed from what the log holds.
    #[error("the {what} of run {run_id} is not recorded: its log does not hold event {seq}")]
    Unlogged {
        run_id: String,
        seq: u64,
        what: &'static str,
    },
    /// A checkpoint was refused: it keeps the first entries of a checkpoint that is not the
    /// one the store holds for the run (a write of an earlier checkpoint failed), so the run
    /// is resumed from the checkpoint the store holds.
    #[error(
        "the checkpoint of run {run_id} is not recorded: it keeps the first {from} entries of \
         the conversation of a checkpoint the store does not hold"
    )]
    ConversationGap { run_id: String, from: u64 },
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A request the store has taken; resolves with its outcome (for a write, once committed).
/// Dropping it does not withdraw the request.
pub struct Pending<T>(PendingInner<T>);

enum PendingInner<T> {
    Waiting(oneshot::Receiver<StoreResult<T>>),
    Ready(Option<StoreResult<T>>),
}

impl<T> Pending<T> {
    /// A request and the sender its backend answers on.
    pub fn channel() -> (oneshot::Sender<StoreResult<T>>, Pending<T>) {
        let (sender, receiver) = oneshot::channel();
        (sender, Pending(PendingInner::Waiting(receiver)))
    }

    /// An outcome known at once (a request refused before it reached the backend).
    pub fn ready(outcome: StoreResult<T>) -> Pending<T> {
        Pending(PendingInner::Ready(Some(outcome)))
    }
}

// Nothing in a `Pending` is structurally pinned: the outcome is moved out whole.
impl<T> Unpin for Pending<T> {}

impl<T> Future for Pending<T> {
    type Output = StoreResult<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<StoreResult<T>> {
        // Neither variant is structurally pinned: the receiver is Unpin.
        match &mut self.get_mut().0 {
            PendingInner::Waiting(receiver) => Pin::new(receiver).poll(cx).map(|outcome| {
                outcome.unwrap_or_else(|_| {
                    Err(StoreError::Io(
                        "the store stopped before answering".to_owned(),
                    ))
                })
            }),
            PendingInner::Ready(outcome) => Poll::Ready(outcome.take().unwrap_or_else(|| {
                Err(StoreError::Io("a store answer was read twice".to_owned()))
            })),
        }
    }
}

/// What a write of a group commit answers: `failed` when its batch did not commit, else its
/// own outcome (a write whose batch never ran it has none).
fn batched<T>(failed: Option<StoreError>, outcome: Option<StoreResult<T>>) -> StoreResult<T> {
    match (failed, outcome) {
        (Some(error), _) => Err(error),
        (None, Some(outcome)) => outcome,
        (None, None) => Err(StoreError::Io("the write's transaction did not run".into())),
    }
}

/// Where sessions, runs and events live. Every write is durable when its [`Pending`]
/// resolves `Ok`; writes take effect in the order they were handed to the store.
pub trait Store: Send + Sync {
    fn create_session(&self, session: &SessionRecord) -> Pending<()>;
    fn session(&self, session_id: &SessionId) -> Pending<Option<SessionRecord>>;
    /// A session with its runs counted.
    fn session_summary(&self, session_id: &SessionId) -> Pending<Option<SessionSummary>>;
    /// A page of `tenant`'s sessions after `after`, most recently active first, and the
    /// cursor of the next page when there is one.
    fn list_sessions(
        &self,
        tenant: &str,
        limit: usize,
        after: Option<&SessionCursor>,
    ) -> Pending<(Vec<SessionSummary>, Option<SessionCursor>)>;

    /// Records a new run together with its first event (`seq` 1): a run is never in the
    /// store without the event that says it started.
    fn create_run(&self, run: &RunRecord, first: &pb::RunEvent) -> Pending<()>;
    fn run(&self, run_id: &RunId) -> Pending<Option<RunRecord>>;
    /// Newest first, at most `limit`, after `after` (the cursor a previous page returned);
    /// the cursor of the next page when there is one.
    fn list_runs(
        &self,
        filter: &RunFilter,
        limit: usize,
        after: Option<&RunCursor>,
    ) -> Pending<(Vec<RunRecord>, Option<RunCursor>)>;
    fn set_run_state(&self, run_id: &RunId, state: RunState) -> Pending<()>;
    fn update_progress(&self, run_id: &RunId, steps: u32, usage: &Usage) -> Pending<()>;
    fn finish_run(&self, run_id: &RunId, end: &RunEnd) -> Pending<()>;

    /// Appends one event, whose `seq` must be the run's last plus one, and in the same
    /// transaction the run's `spans` that ended since its previous event.
    fn append_event(&self, event: &pb::RunEvent, spans: &[pb::Span]) -> Pending<()>;
    /// Events with `seq > after_seq`, in order, at most `limit`.
    fn events_after(
        &self,
        run_id: &RunId,
        after_seq: u64,
        limit: usize,
    ) -> Pending<Vec<pb::RunEvent>>;

    /// Runs that were running or waiting when the daemon last stopped.
    fn unfinished_runs(&self) -> Pending<Vec<RunRecord>>;

    /// Replaces the run's checkpoint.
    fn save_checkpoint(&self, run_id: &RunId, checkpoint: &Checkpoint) -> Pending<()>;
    fn latest_checkpoint(&self, run_id: &RunId) -> Pending<Option<Checkpoint>>;

    /// Records that a call is about to run. Must be committed before the call runs.
    fn record_intent(&self, effect: &Effect) -> Pending<()>;
    fn record_effect_result(
        &self,
        run_id: &RunId,
        call_id: &CallId,
        result: &pb::ToolResult,
    ) -> Pending<()>;
    /// Journals a call's change set before it is applied. Must be committed before the apply.
    fn record_pending_changes(
        &self,
        run_id: &RunId,
        call_id: &CallId,
        changes: &pb::ChangeSet,
    ) -> Pending<()>;
    fn effect(&self, run_id: &RunId, call_id: &CallId) -> Pending<Option<Effect>>;

    /// Keeps an approval request: a call's or a connection's, any subject.
    fn save_approval(&self, request: &pb::ApprovalRequest) -> Pending<()>;
    fn resolve_approval(
        &self,
        approval_id: &ApprovalId,
        resolution: &ApprovalResolution,
    ) -> Pending<()>;
    /// The latest approval asked for a call's own run (not for one of its connections), and
    /// its answer if it got one.
    fn approval_for_call(
        &self,
        run_id: &RunId,
        call_id: &CallId,
    ) -> Pending<Option<(pb::ApprovalRequest, Option<ApprovalResolution>)>>;

    /// Keeps a grant (a second of the same key changes nothing).
    fn add_session_grant(&self, grant: &GrantRecord) -> Pending<()>;
    /// The session's grants, oldest first.
    fn session_grants(&self, session_id: &SessionId) -> Pending<Vec<GrantRecord>>;
    /// Withdraws a grant of the session; whether there was one.
    fn revoke_session_grant(&self, session_id: &SessionId, grant_key: &str) -> Pending<bool>;

    /// The run's spans in start order.
    fn spans(&self, run_id: &RunId) -> Pending<Vec<pb::Span>>;

    /// Appends a model call's wire exchange (a cassette entry, as JSON) to the run's.
    fn record_exchange(&self, run_id: &RunId, exchange: &str) -> Pending<()>;
    /// The run's exchanges in the order they were recorded.
    fn exchanges(&self, run_id: &RunId) -> Pending<Vec<String>>;

    fn record_output(&self, output: &OutputRecord) -> Pending<()>;
    fn output(&self, execution_id: &ExecutionId) -> Pending<Option<OutputRecord>>;
    /// Kept outputs, oldest first, at most `limit`.
    fn oldest_outputs(&self, limit: usize) -> Pending<Vec<OutputRecord>>;
    /// Kept outputs created before `before_ms`, oldest first, at most `limit` — never one
    /// of an execution whose run has not finished.
    fn outputs_before(&self, before_ms: i64, limit: usize) -> Pending<Vec<OutputRecord>>;
    fn remove_output(&self, execution_id: &ExecutionId) -> Pending<()>;
    /// How many kept outputs name the blob `digest`.
    fn output_references(&self, digest: &str) -> Pending<u64>;

    /// Records whose a tool execution is (its `ReadOutput` and `CancelExecution` are that
    /// tenant's alone); the first record stands.
    fn record_execution_owner(
        &self,
        execution_id: &ExecutionId,
        owner: &ExecutionOwner,
    ) -> Pending<()>;
    /// The tenant of an execution.
    fn execution_owner(&self, execution_id: &ExecutionId) -> Pending<Option<String>>;
    /// Forgets the owners of executions started before `before_ms` that have no kept output
    /// and no unfinished run; how many.
    fn forget_executions(&self, before_ms: i64) -> Pending<u64>;

    /// Deletes the runs that finished before `before_ms` (never an unfinished one), with
    /// everything recorded for them, and the sessions left without runs; at most `limit`
    /// runs at a time.
    fn delete_finished_runs(&self, before_ms: i64, limit: usize) -> Pending<Deleted>;

    /// Places `draft` at the end of its tenant's audit chain; the record as placed. Appends
    /// handed over together may be placed in either order (PostgreSQL runs each in a short
    /// transaction of its own, apart from the batches of runs' writes), each once.
    fn append_audit(&self, draft: &audit::AuditDraft) -> Pending<audit::AuditRecord>;

    /// A tenant's audit records after `after_seq` and from `since_ms` on, in order; at most
    /// `limit`.
    fn audit_records(
        &self,
        tenant: &str,
        after_seq: u64,
        since_ms: i64,
        limit: usize,
    ) -> Pending<Vec<audit::AuditRecord>>;

    /// The sequence number and digest of a tenant's last audit record, as its head row says.
    fn audit_head(&self, tenant: &str) -> Pending<Option<(u64, String)>>;

    /// The tenants that have an audit chain.
    fn audit_tenants(&self) -> Pending<Vec<String>>;

    /// Deletes a tenant's audit records before its newest checkpoint older than
    /// `before_ms`; how many.
    fn cut_audit(&self, tenant: &str, before_ms: i64) -> Pending<u64>;
}

/// What a store that several daemons share offers beyond [`Store`]: each daemon's lease,
/// and the runs it owns under it. A run belongs to the daemon that created or last claimed
/// it; a claim moves it on only once its owner's lease lapsed, and raises the run's epoch,
/// so every later write of the previous owner for that run is refused
/// ([`StoreError::Fenced`]) — the database's transactions, not a consensus layer of ours,
/// decide who owns what. Times are the database server's clock, so the daemons' clocks
/// need not agree.
pub trait Leases: Send + Sync {
    /// This daemon, as the store knows it.
    fn node(&self) -> &NodeId;
    /// Extends this daemon's lease to `lease` from now.
    fn renew(&self, lease: std::time::Duration) -> Pending<()>;
    /// Gives the lease up, as a daemon stops: its unfinished runs may be claimed at once.
    fn release(&self) -> Pending<()>;
    /// Claims for this daemon at most `limit` unfinished runs whose owner's lease lapsed and
    /// none of whose calls in flight may still be running (their timeout since their intent
    /// has passed), leaving out `skip`. No two daemons ever claim the same run: a claim is
    /// one transaction that takes each run's row lock and skips rows another claim holds.
    /// A daemon whose own lease lapsed claims nothing, never claims its own runs, and after
    /// an outage of the store takes a run only from an owner that had a lease's time to
    /// renew and did not.
    fn claim(&self, limit: usize, skip: &[RunId]) -> Pending<Vec<RunRecord>>;
    /// Of `runs`, executed here, those another daemon took over (this one's lease lapsed
    /// and its runs were claimed): this daemon stops them without writing.
    fn lost(&self, runs: &[RunId]) -> Pending<Vec<RunId>>;
    /// Gives up a run this daemon owns but does not execute, so the next claim may take it;
    /// whether it was still this daemon's to give.
    fn disown(&self, run_id: &RunId) -> Pending<bool>;
}
