//! `airlock.v1.Tools`: list tools, run one directly, cancel a run.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use airlock_proto::v1 as pb;
use futures::Stream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::{CancellationToken, DropGuard};
use tonic::{Request, Response, Status};

use super::error::ApiError;
use crate::tools::{CallRequest, ExecutionEvent, Executor};
use crate::wire as convert;

pub struct ToolsService {
    executor: Arc<Executor>,
}

impl ToolsService {
    pub fn new(executor: Arc<Executor>) -> ToolsService {
        ToolsService { executor }
    }
}

#[tonic::async_trait]
impl pb::tools_server::Tools for ToolsService {
    async fn list_tools(
        &self,
        _request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let tools = self
            .executor
            .registry()
            .tools()
            .map(|tool| convert::tool_info(tool))
            .collect();
        Ok(Response::new(pb::ListToolsResponse { tools }))
    }

    type ExecuteToolStream = CancelOnDrop<UnboundedReceiverStream<ExecutionEvent>>;

    async fn execute_tool(
        &self,
        request: Request<pb::ExecuteToolRequest>,
    ) -> Result<Response<Self::ExecuteToolStream>, Status> {
        let request = request.into_inner();
        let call = self
            .executor
            .prepare(CallRequest {
                tool: request.tool,
                arguments_json: request.arguments_json,
                workspace: request.workspace,
                timeout: (request.timeout_ms > 0)
                    .then(|| Duration::from_millis(request.timeout_ms)),
                read_only: false,
            })
            .map_err(ApiError::from)?;
        let (events, receiver) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let executor = self.executor.clone();
        let call_cancel = cancel.clone();
        tokio::spawn(async move { executor.run(call, events, call_cancel).await });
        Ok(Response::new(CancelOnDrop {
            events: UnboundedReceiverStream::new(receiver),
            _cancel: cancel.drop_guard(),
        }))
    }

    async fn read_output(
        &self,
        request: Request<pb::ReadOutputRequest>,
    ) -> Result<Response<pb::ReadOutputResponse>, Status> {
        let request = request.into_inner();
        let kept = self
            .executor
            .kept_outputs()
            .ok_or_else(|| Status::unimplemented("this daemon keeps no outputs"))?;
        let page = kept
            .read(&request.execution_id, request.offset, request.length)
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
        let id = request.into_inner().execution_id;
        if self.executor.cancel(&id) {
            Ok(Response::new(pb::CancelExecutionResponse {}))
        } else {
            Err(ApiError::ExecutionNotFound(id).into())
        }
    }
}

/// The event stream of one call. When the client goes away tonic drops the stream, and the
/// guard cancels the call.
pub struct CancelOnDrop<S> {
    events: S,
    _cancel: DropGuard,
}

impl<S> Stream for CancelOnDrop<S>
where
    S: Stream<Item = ExecutionEvent> + Unpin,
{
    type Item = Result<pb::ExecuteToolEvent, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.events)
            .poll_next(cx)
            .map(|event| event.map(|event| Ok(convert::execution_event(event))))
    }
}
