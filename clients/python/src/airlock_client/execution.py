"""One tool call run directly (``Tools.ExecuteTool``), without a model: its events as they
come, the output it streamed, and its result.

A tool that ran and failed is not an exception: :meth:`Execution.result` returns the
``ToolResult`` whatever its ``status``. A call made with ``require_approval`` waits for a
person first: its ``approval`` event carries the request, answered with
:meth:`airlock_client.AsyncClient.decide`.
"""

from __future__ import annotations

import grpc
import grpc.aio

from airlock.v1 import approval_pb2, tool_pb2, tools_pb2, tools_pb2_grpc

from ._peer import Peer
from .errors import ConnectionLostError

__all__ = ["Execution"]


class Execution:
    """The event stream of one tool call. ``async for event in execution`` yields each
    ``ExecuteToolEvent``; :meth:`result` reads to the end. Leaving ``async with`` (or
    :meth:`close`) before the result cancels the call: the daemon stops the tool."""

    def __init__(self, peer: Peer, request: tools_pb2.ExecuteToolRequest) -> None:
        self._peer = peer
        self._stub = tools_pb2_grpc.ToolsStub(peer.channel)
        self._call: grpc.aio.UnaryStreamCall[tools_pb2.ExecuteToolRequest, tools_pb2.ExecuteToolEvent] = (
            self._stub.ExecuteTool(request, metadata=peer.metadata)
        )
        #: The id that names the call, once ``started`` arrived.
        self.execution_id = ""
        #: What the tool wrote on standard output and standard error so far.
        self.stdout = bytearray()
        self.stderr = bytearray()
        #: The approval request the call waits on, when it asked one.
        self.approval: approval_pb2.ApprovalRequest | None = None
        self.finished: tool_pb2.ToolResult | None = None

    def __aiter__(self) -> Execution:
        return self

    async def __anext__(self) -> tools_pb2.ExecuteToolEvent:
        if self.finished is not None:
            raise StopAsyncIteration
        try:
            event = await self._call.read()
        except grpc.RpcError as error:
            raise self._peer.error(error, self._stub.ExecuteTool) from None
        if event is grpc.aio.EOF:
            raise ConnectionLostError(
                f"airlockd at {self._peer.endpoint} closed the call's stream before sending its result",
                endpoint=self._peer.endpoint,
            )
        assert isinstance(event, tools_pb2.ExecuteToolEvent)
        kind = event.WhichOneof("event")
        if kind == "started":
            self.execution_id = event.started.execution_id
        elif kind == "output":
            sink = self.stderr if event.output.stream == tools_pb2.OUTPUT_STREAM_STDERR else self.stdout
            sink.extend(event.output.data)
        elif kind == "approval":
            self.approval = event.approval
        elif kind == "finished":
            self.finished = event.finished
            self.execution_id = self.execution_id or event.finished.execution_id
        return event

    async def result(self) -> tool_pb2.ToolResult:
        """Reads the call to its end and returns its result."""
        async for _ in self:
            pass
        assert self.finished is not None
        return self.finished

    def close(self) -> None:
        """Stops reading; a call still running is cancelled."""
        self._call.cancel()

    async def __aenter__(self) -> Execution:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()
