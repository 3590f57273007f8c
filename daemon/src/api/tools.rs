//! `airlock.v1.Tools`: list tools, run one directly, cancel a run. Each tenant sees and runs
//! only the tools its entry allows, in its own workspaces, and reaches only its own
//! executions.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use airlock_proto::v1 as pb;
use futures::{Future, Stream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};
use tonic::{Request, Response, Status};

use super::auth::caller;
use super::direct_approval::DirectApprovals;
use super::direct_call::{Admitted, DirectCall, DirectCalls};
use super::error::ApiError;
use super::quota::Slot;
use super::request::parse_id;
use super::tenants::{DEFAULT_TENANT, Tenant};
use crate::ids::ExecutionId;
use crate::store::Store;
use crate::tools::{ExecutionEvent, Executor};
use crate::wire as convert;

pub struct ToolsService {
    executor: Arc<Executor>,
    store: Arc<dyn Store>,
    /// Admission of direct calls, shared with the MCP endpoint.
    calls: Arc<DirectCalls>,
}

impl ToolsService {
    pub fn new(calls: Arc<DirectCalls>, store: Arc<dyn Store>) -> ToolsService {
        ToolsService {
            executor: calls.executor.clone(),
            store,
            calls,
        }
    }

    /// Fails with NOT_FOUND unless `tenant` owns execution `execution_id` (request field
    /// `execution_id`). Executions with no recorded owner (from before tenants existed, or
    /// whose output was not kept) belong to `default`.
    async fn owned_execution(
        &self,
        tenant: &Tenant,
        execution_id: &str,
    ) -> Result<ExecutionId, ApiError> {
        let execution_id = parse_id(ExecutionId::parse, execution_id, "execution_id")?;
        // A running call's owner is known here; the store has the owners of calls that kept
        // their output (and of runs' calls), recorded with it.
        let owner = match self.executor.running_tenant(&execution_id) {
            Some(tenant) => Some(tenant),
            None => self.store.execution_owner(&execution_id).await?,
        };
        if tenant.owns(owner.as_deref().unwrap_or(DEFAULT_TENANT)) {
            Ok(execution_id)
        } else {
            Err(not_found_execution(execution_id.as_str()))
        }
    }
}

fn not_found_execution(execution_id: &str) -> ApiError {
    ApiError::NotFound {
        kind: "execution",
        id: execution_id.to_owned(),
    }
    .at("execution_id")
}

#[tonic::async_trait]
impl pb::tools_server::Tools for ToolsService {
    async fn list_tools(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let tenant = caller(&request)?;
        let tools = self
            .calls
            .visible(&tenant)
            .iter()
            .map(|tool| convert::tool_info(tool))
            .collect();
        Ok(Response::new(pb::ListToolsResponse { tools }))
    }

    type ExecuteToolStream = CallStream;

    async fn execute_tool(
        &self,
        request: Request<pb::ExecuteToolRequest>,
    ) -> Result<Response<Self::ExecuteToolStream>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let Admitted { call, slot } = self.calls.admit(
            &tenant,
            DirectCall {
                tool: request.tool,
                arguments_json: request.arguments_json,
                workspace: convert::non_empty(&request.workspace).map(str::to_owned),
                timeout: (request.timeout_ms > 0)
                    .then(|| Duration::from_millis(request.timeout_ms)),
                ask_risky: request.require_approval,
            },
        )?;
        let (events, receiver) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let executor = self.executor.clone();
        let call_cancel = cancel.clone();
        // The question, when the call waits for one, reaches the client before anything the
        // executor reports: the stream reads it first.
        let (asking, question) = DirectApprovals::needed(&call)
            .then(|| {
                let (ask, question) = oneshot::channel();
                ((self.calls.approvals.clone(), ask), question)
            })
            .unzip();
        let asker = tenant.name.clone();
        let call = Box::pin(async move {
            // The slot is the tenant's until the call has ended.
            let _slot: Slot = slot;
            if let Some((approvals, ask)) = asking
                && let Some((question, asked)) =
                    approvals.register(&asker, &call, &call_cancel).await
            {
                let approval_id = question.approval_id.clone();
                let _ = ask.send(question);
                let outcome = tokio::select! {
                    outcome = asked.outcome() => outcome,
                    // Dropping the question withdraws it from the consoles.
                    () = call_cancel.cancelled() => return,
                };
                if let Some(refused) = approvals.settle(&asker, &call, &approval_id, outcome) {
                    let _ = events.send(ExecutionEvent::Finished(refused));
                    return;
                }
            }
            executor.run(call, events, call_cancel).await;
        });
        Ok(Response::new(CallStream {
            call: Some(call),
            runtime: tokio::runtime::Handle::current(),
            question,
            events: receiver,
            finished: false,
            _cancel: cancel.drop_guard(),
        }))
    }

    async fn read_output(
        &self,
        request: Request<pb::ReadOutputRequest>,
    ) -> Result<Response<pb::ReadOutputResponse>, Status> {
        let tenant = caller(&request)?;
        let request = request.into_inner();
        let execution_id = self.owned_execution(&tenant, &request.execution_id).await?;
        let kept = self
            .executor
            .kept_outputs()
            .ok_or(ApiError::NotServed("this daemon keeps no outputs"))?;
        let page = kept
            .read(&execution_id, request.offset, request.length)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ReadOutputResponse {
            data: page.data,
            offset: page.offset,
            total_bytes: page.total_bytes,
            eof: page.eof,
            digest: page.digest,
        }))
    }

    async fn cancel_execution(
        &self,
        request: Request<pb::CancelExecutionRequest>,
    ) -> Result<Response<pb::CancelExecutionResponse>, Status> {
        let tenant = caller(&request)?;
        let id = self
            .owned_execution(&tenant, &request.into_inner().execution_id)
            .await?;
        if self.executor.cancel(&id) {
            Ok(Response::new(pb::CancelExecutionResponse {}))
        } else {
            // Finished, or never started: either way nothing runs under this id.
            Err(ApiError::NotFound {
                kind: "running execution",
                id: id.into_string(),
            }
            .at("execution_id")
            .into())
        }
    }
}

/// The event stream of one call: the approval question, when the call waits for one, then
/// what the executor reports, each turned into its wire form as the client reads it. When
/// the client goes away tonic drops the stream, and the guard cancels the call.
///
/// The call itself starts on the stream's first poll, in the task that serves the response:
/// a call that ends within that poll (a warm WebAssembly call does) has all its events ready
/// at once, so the response's headers, events and trailers leave in one write, with no other
/// task woken and no other thread involved. A call still running after that poll moves to a
/// task of its own, so that it keeps running (and meets its deadline) whether or not the
/// client is reading, exactly as if it had been spawned at once.
pub struct CallStream {
    /// The call, until its first poll.
    call: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    runtime: tokio::runtime::Handle,
    /// Answered (or dropped, when no question is asked) before the executor starts.
    question: Option<oneshot::Receiver<pb::ApprovalRequest>>,
    events: mpsc::UnboundedReceiver<ExecutionEvent>,
    /// `Finished` was the last event: the stream ends there rather than when the last sender
    /// goes (a clone can outlive the call's future by a task switch), so the response's
    /// trailers leave in the same write as its events.
    finished: bool,
    _cancel: DropGuard,
}

impl Stream for CallStream {
    type Item = Result<pb::ExecuteToolEvent, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(mut call) = self.call.take()
            && call.as_mut().poll(cx).is_pending()
        {
            // Its next poll, in its own task, registers that task's wakers in place of ours.
            drop(self.runtime.spawn(call));
        }
        if let Some(question) = &mut self.question {
            let asked = std::task::ready!(Pin::new(question).poll(cx));
            self.question = None;
            if let Ok(question) = asked {
                return Poll::Ready(Some(Ok(pb::ExecuteToolEvent {
                    event: Some(pb::execute_tool_event::Event::Approval(question)),
                })));
            }
        }
        if self.finished {
            return Poll::Ready(None);
        }
        let event = std::task::ready!(self.events.poll_recv(cx));
        self.finished = matches!(event, None | Some(ExecutionEvent::Finished(_)));
        Poll::Ready(event.map(|event| Ok(convert::execution_event(event))))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::tools::{ToolResult, ToolStatus};

    /// The stream ends with `Finished` even while a sender of its channel is still alive, so
    /// the response's trailers go out with its events.
    #[tokio::test]
    async fn the_stream_ends_at_finished_not_when_its_senders_go() {
        let (events, receiver) = mpsc::unbounded_channel();
        let mut stream = CallStream {
            call: None,
            runtime: tokio::runtime::Handle::current(),
            question: None,
            events: receiver,
            finished: false,
            _cancel: CancellationToken::new().drop_guard(),
        };
        let finished = ToolResult::refused(ToolStatus::Ok, "");
        events
            .send(ExecutionEvent::Finished(finished))
            .expect("the stream listens");
        let first = stream
            .next()
            .await
            .expect("an event")
            .expect("not an error");
        assert!(matches!(
            first.event,
            Some(pb::execute_tool_event::Event::Finished(_))
        ));
        let waker = futures::task::noop_waker();
        let next = Pin::new(&mut stream).poll_next(&mut Context::from_waker(&waker));
        assert!(matches!(next, Poll::Ready(None)), "{next:?}");
        drop(events);
    }
}
