//! The PostgreSQL store's [`Store`]: each request is a shared query ([`queries`]) run by the
//! writer in its next batch, fenced by the epoch this node holds the run at (a write), or on
//! a connection of the pool once the writes handed over before it were answered (a read).

use std::sync::{Arc, PoisonError};

use airlock_proto::v1 as pb;
use futures::FutureExt as _;

use super::PostgresStore;
use super::client::OnPg as _;
use crate::domain::Usage;
use crate::ids::{ApprovalId, CallId, ExecutionId, RunId, SessionId};
use crate::store::audit::{AuditDraft, AuditRecord};
use crate::store::queries;
use crate::store::rows::EventRow;
use crate::store::{
    ApprovalResolution, Checkpoint, Deleted, Effect, ExecutionOwner, GrantRecord, OutputRecord,
    Pending, RunCursor, RunEnd, RunFilter, RunRecord, RunState, SessionCursor, SessionRecord,
    SessionSummary, Store,
};

/// A shared query as the writer and the pool run it: a future that owns its connection and
/// a copy of its arguments (named in parentheses, each seen by reference inside), made
/// afresh each time it runs (a write of a batch that failed runs again).
macro_rules! on_pg {
    ($c:ident, ($($arg:ident),*) => $query:expr) => {{
        let owned = ($($arg.clone(),)*);
        async move {
            let ($($arg,)*) = &owned;
            let $c = &$c.pg();
            $query.await
        }
        .boxed()
    }};
}

impl Store for PostgresStore {
    fn create_session(&self, session: &SessionRecord) -> Pending<()> {
        let session = session.clone();
        self.writer.write(
            None,
            move |c| on_pg!(c, (session) => queries::sessions::create_session(c, session)),
        )
    }

    fn session(&self, session_id: &SessionId) -> Pending<Option<SessionRecord>> {
        let session_id = session_id.clone();
        self.writer
            .read(move |c| on_pg!(c, (session_id) => queries::sessions::session(c, session_id)))
    }

    fn session_summary(&self, session_id: &SessionId) -> Pending<Option<SessionSummary>> {
        let session_id = session_id.clone();
        self.writer.read(
            move |c| on_pg!(c, (session_id) => queries::sessions::session_summary(c, session_id)),
        )
    }

    fn list_sessions(
        &self,
        tenant: &str,
        limit: usize,
        after: Option<&SessionCursor>,
    ) -> Pending<(Vec<SessionSummary>, Option<SessionCursor>)> {
        let (tenant, after) = (tenant.to_owned(), after.cloned());
        self.writer
            .read(move |c| on_pg!(c, (tenant, after) => queries::sessions::list_sessions(c, tenant, limit, after.as_ref())))
    }

    fn create_run(&self, run: &RunRecord, first: &pb::RunEvent) -> Pending<()> {
        let (run, first, node) = (run.clone(), first.clone(), self.node.clone());
        self.own(&run.run_id, queries::runs::FIRST_EPOCH);
        // Unfenced: the run is new, and its row says whose it is.
        self.writer.write(None, move |c| {
            on_pg!(c, (run, first, node) => queries::runs::create_run(c, run, first, Some(node)))
        })
    }

    fn run(&self, run_id: &RunId) -> Pending<Option<RunRecord>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| on_pg!(c, (run_id) => queries::runs::run(c, run_id)))
    }

    fn list_runs(
        &self,
        filter: &RunFilter,
        limit: usize,
        after: Option<&RunCursor>,
    ) -> Pending<(Vec<RunRecord>, Option<RunCursor>)> {
        let (filter, after) = (filter.clone(), after.cloned());
        self.writer
            .read(move |c| on_pg!(c, (filter, after) => queries::runs::list_runs(c, filter, limit, after.as_ref())))
    }

    fn set_run_state(&self, run_id: &RunId, state: RunState) -> Pending<()> {
        let run_id = run_id.clone();
        self.writer.write(
            self.fence(&run_id),
            move |c| on_pg!(c, (run_id) => queries::runs::set_run_state(c, run_id, state)),
        )
    }

    fn update_progress(&self, run_id: &RunId, steps: u32, usage: &Usage) -> Pending<()> {
        let (run_id, usage) = (run_id.clone(), *usage);
        self.writer.write(self.fence(&run_id), move |c| {
            on_pg!(c, (run_id, usage) => queries::runs::update_progress(c, run_id, steps, usage))
        })
    }

    fn finish_run(&self, run_id: &RunId, end: &RunEnd) -> Pending<()> {
        let (run_id, end) = (run_id.clone(), end.clone());
        let fence = self.fence(&run_id);
        let written = self.writer.write(fence, {
            let run_id = run_id.clone();
            move |c| on_pg!(c, (run_id, end) => queries::runs::finish_run(c, run_id, end))
        });
        // Finished, the run is no claim's: what is written for it later needs no fence. Its
        // epoch is kept until the end is committed, though: a run whose end could not be
        // written is still this daemon's to give back (see `Fleet::give_back`).
        let owned = self.owned.clone();
        let (answer, pending) = Pending::channel();
        tokio::spawn(async move {
            let outcome = written.await;
            if outcome.is_ok() {
                owned
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&run_id);
            }
            let _ = answer.send(outcome);
        });
        pending
    }

    fn append_event(&self, event: &pb::RunEvent, spans: &[pb::Span]) -> Pending<()> {
        let row = Arc::new(EventRow::new(event, spans));
        self.writer.append(self.fence_of(&event.run_id), row)
    }

    fn events_after(
        &self,
        run_id: &RunId,
        after_seq: u64,
        limit: usize,
    ) -> Pending<Vec<pb::RunEvent>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| on_pg!(c, (run_id) => queries::events::events_after(c, run_id, after_seq, limit)))
    }

    fn unfinished_runs(&self) -> Pending<Vec<RunRecord>> {
        self.writer
            .read(move |c| on_pg!(c, () => queries::runs::unfinished_runs(c)))
    }

    fn save_checkpoint(&self, run_id: &RunId, checkpoint: &Checkpoint) -> Pending<()> {
        let (run_id, checkpoint) = (run_id.clone(), checkpoint.clone());
        self.writer.write(self.fence(&run_id), move |c| {
            on_pg!(c, (run_id, checkpoint) => queries::events::save_checkpoint(c, run_id, checkpoint))
        })
    }

    fn latest_checkpoint(&self, run_id: &RunId) -> Pending<Option<Checkpoint>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| on_pg!(c, (run_id) => queries::events::latest_checkpoint(c, run_id)))
    }

    fn record_intent(&self, effect: &Effect) -> Pending<()> {
        let effect = effect.clone();
        self.writer.write(
            self.fence(&effect.run_id),
            move |c| on_pg!(c, (effect) => queries::approvals::record_intent(c, effect)),
        )
    }

    fn record_effect_result(
        &self,
        run_id: &RunId,
        call_id: &CallId,
        result: &pb::ToolResult,
    ) -> Pending<()> {
        let (run_id, call_id, result) = (run_id.clone(), call_id.clone(), result.clone());
        self.writer.write(self.fence(&run_id), move |c| {
            on_pg!(c, (run_id, call_id, result) => queries::approvals::record_effect_result(c, run_id, call_id, result))
        })
    }

    fn record_pending_changes(
        &self,
        run_id: &RunId,
        call_id: &CallId,
        changes: &pb::ChangeSet,
    ) -> Pending<()> {
        let (run_id, call_id, changes) = (run_id.clone(), call_id.clone(), changes.clone());
        self.writer.write(self.fence(&run_id), move |c| {
            on_pg!(c, (run_id, call_id, changes) => queries::approvals::record_pending_changes(c, run_id, call_id, changes))
        })
    }

    fn effect(&self, run_id: &RunId, call_id: &CallId) -> Pending<Option<Effect>> {
        let (run_id, call_id) = (run_id.clone(), call_id.clone());
        self.writer.read(
            move |c| on_pg!(c, (run_id, call_id) => queries::approvals::effect(c, run_id, call_id)),
        )
    }

    fn save_approval(&self, request: &pb::ApprovalRequest) -> Pending<()> {
        let request = request.clone();
        self.writer.write(
            self.fence_of(&request.run_id),
            move |c| on_pg!(c, (request) => queries::approvals::save_approval(c, request)),
        )
    }

    fn resolve_approval(
        &self,
        approval_id: &ApprovalId,
        resolution: &ApprovalResolution,
    ) -> Pending<()> {
        let (approval_id, resolution) = (approval_id.clone(), resolution.clone());
        self.writer.write(None, move |c| {
            on_pg!(c, (approval_id, resolution) => queries::approvals::resolve_approval(c, approval_id, resolution))
        })
    }

    fn approval_for_call(
        &self,
        run_id: &RunId,
        call_id: &CallId,
    ) -> Pending<Option<(pb::ApprovalRequest, Option<ApprovalResolution>)>> {
        let (run_id, call_id) = (run_id.clone(), call_id.clone());
        self.writer
            .read(move |c| on_pg!(c, (run_id, call_id) => queries::approvals::approval_for_call(c, run_id, call_id)))
    }

    fn add_session_grant(&self, grant: &GrantRecord) -> Pending<()> {
        let grant = grant.clone();
        self.writer.write(
            None,
            move |c| on_pg!(c, (grant) => queries::sessions::add_session_grant(c, grant)),
        )
    }

    fn session_grants(&self, session_id: &SessionId) -> Pending<Vec<GrantRecord>> {
        let session_id = session_id.clone();
        self.writer.read(
            move |c| on_pg!(c, (session_id) => queries::sessions::session_grants(c, session_id)),
        )
    }

    fn revoke_session_grant(&self, session_id: &SessionId, grant_key: &str) -> Pending<bool> {
        let (session_id, grant_key) = (session_id.clone(), grant_key.to_owned());
        self.writer.write(None, move |c| {
            on_pg!(c, (session_id, grant_key) => queries::sessions::revoke_session_grant(c, session_id, grant_key))
        })
    }

    fn spans(&self, run_id: &RunId) -> Pending<Vec<pb::Span>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| on_pg!(c, (run_id) => queries::events::spans(c, run_id)))
    }

    fn record_exchange(&self, run_id: &RunId, exchange: &str) -> Pending<()> {
        let (run_id, exchange) = (run_id.clone(), exchange.to_owned());
        self.writer.write(self.fence(&run_id), move |c| {
            on_pg!(c, (run_id, exchange) => queries::events::record_exchange(c, run_id, exchange))
        })
    }

    fn exchanges(&self, run_id: &RunId) -> Pending<Vec<String>> {
        let run_id = run_id.clone();
        self.writer
            .read(move |c| on_pg!(c, (run_id) => queries::events::exchanges(c, run_id)))
    }

    fn record_output(&self, output: &OutputRecord) -> Pending<()> {
        let output = output.clone();
        self.writer.write(
            None,
            move |c| on_pg!(c, (output) => queries::outputs::record_output(c, output)),
        )
    }

    fn output(&self, execution_id: &ExecutionId) -> Pending<Option<OutputRecord>> {
        let execution_id = execution_id.clone();
        self.writer
            .read(move |c| on_pg!(c, (execution_id) => queries::outputs::output(c, execution_id)))
    }

    fn oldest_outputs(&self, limit: usize) -> Pending<Vec<OutputRecord>> {
        self.writer
            .read(move |c| on_pg!(c, () => queries::outputs::oldest_outputs(c, limit)))
    }

    fn outputs_before(&self, before_ms: i64, limit: usize) -> Pending<Vec<OutputRecord>> {
        self.writer
            .read(move |c| on_pg!(c, () => queries::outputs::outputs_before(c, before_ms, limit)))
    }

    fn remove_output(&self, execution_id: &ExecutionId) -> Pending<()> {
        let execution_id = execution_id.clone();
        self.writer.write(
            None,
            move |c| on_pg!(c, (execution_id) => queries::outputs::remove_output(c, execution_id)),
        )
    }

    fn output_references(&self, digest: &str) -> Pending<u64> {
        let digest = digest.to_owned();
        self.writer
            .read(move |c| on_pg!(c, (digest) => queries::outputs::output_references(c, digest)))
    }

    fn record_execution_owner(
        &self,
        execution_id: &ExecutionId,
        owner: &ExecutionOwner,
    ) -> Pending<()> {
        let (execution_id, owner) = (execution_id.clone(), owner.clone());
        self.writer.write(None, move |c| {
            on_pg!(c, (execution_id, owner) => queries::outputs::record_execution_owner(c, execution_id, owner))
        })
    }

    fn execution_owner(&self, execution_id: &ExecutionId) -> Pending<Option<String>> {
        let execution_id = execution_id.clone();
        self.writer
            .read(move |c| on_pg!(c, (execution_id) => queries::outputs::execution_owner(c, execution_id)))
    }

    fn forget_executions(&self, before_ms: i64) -> Pending<u64> {
        self.writer.write(
            None,
            move |c| on_pg!(c, () => queries::outputs::forget_executions(c, before_ms)),
        )
    }

    fn delete_finished_runs(&self, before_ms: i64, limit: usize) -> Pending<Deleted> {
        self.writer.write(
            None,
            move |c| on_pg!(c, () => queries::runs::delete_finished_runs(c, before_ms, limit)),
        )
    }

    fn append_audit(&self, draft: &AuditDraft) -> Pending<AuditRecord> {
        let draft = draft.clone();
        self.writer
            .transaction(move |c| on_pg!(c, (draft) => queries::audit::append(c, draft)))
    }

    fn audit_records(
        &self,
        tenant: &str,
        after_seq: u64,
        since_ms: i64,
        limit: usize,
    ) -> Pending<Vec<AuditRecord>> {
        let tenant = tenant.to_owned();
        self.writer.read(move |c| {
            on_pg!(c, (tenant) => queries::audit::records(c, tenant, after_seq, since_ms, limit))
        })
    }

    fn audit_head(&self, tenant: &str) -> Pending<Option<(u64, String)>> {
        let tenant = tenant.to_owned();
        self.writer
            .read(move |c| on_pg!(c, (tenant) => queries::audit::head(c, tenant)))
    }

    fn audit_tenants(&self) -> Pending<Vec<String>> {
        self.writer
            .read(move |c| on_pg!(c, () => queries::audit::tenants(c)))
    }

    fn cut_audit(&self, tenant: &str, before_ms: i64) -> Pending<u64> {
        let tenant = tenant.to_owned();
        self.writer.write(
            None,
            move |c| on_pg!(c, (tenant) => queries::audit::cut(c, tenant, before_ms)),
        )
    }
}
