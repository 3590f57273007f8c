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

#: The most of each stream an :class:`Execution` keeps (``stdout``, ``stderr``): the largest
#: output the daemon keeps for a call. What a server streams past it is counted, not kept.
MAX_KEPT_OUTPUT = 16 * 1024 * 1024


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
        #: What the tool wrote on standard output and standard error so far (the first
        #: ``MAX_KEPT_OUTPUT`` bytes of each), and how much it wrote in all.
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.output_bytes = 0
        #: The approval request the call waits on, when it asked one.
        self.approval: approval_pb2.ApprovalRequest | None = None
        self.finished: tool_pb2.ToolResult | None = None
        self._closed = False

    def __aiter__(self) -> Execution:
        return self

    async def __anext__(self) -> tools_pb2.ExecuteToolEvent:
        if self.finished is not None or self._closed:
            raise StopAsyncIteration
        event = await self._peer.read(
            self._call,
            tools_pb2.ExecuteToolEvent,
            self._stub.ExecuteTool,
            closed=lambda: self._closed,
            what="tool call",
        )
        if event is None:
            if self._closed:
                raise StopAsyncIteration
            raise ConnectionLostError(
                f"airlockd at {self._peer.endpoint} closed the call's stream before sending its result",
                endpoint=self._peer.endpoint,
            )
        kind = event.WhichOneof("event")
        if kind == "started":
            self.execution_id = event.started.execution_id
        elif kind == "output":
            sink = self.stderr if event.output.stream == tools_pb2.OUTPUT_STREAM_STDERR else self.stdout
            data = event.output.data
            self.output_bytes += len(data)
            sink.extend(data[: max(0, MAX_KEPT_OUTPUT - len(sink))])
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
        if self.finished is None:  # pragma: no cover - __anext__ ends only after `finished`
            raise ConnectionLostError("the call's stream ended without its result", endpoint=self._peer.endpoint)
        return self.finished

    def close(self) -> None:
        """Stops reading; a call still running is cancelled."""
        self._closed = True
        self._call.cancel()

    async def __aenter__(self) -> Execution:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()
