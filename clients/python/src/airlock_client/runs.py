"""One agent run followed on its bidirectional ``Agent.Run`` stream: its numbered events, and
the decisions, cancel and input sent back.

A run belongs to the daemon, not to the stream that started it. When the stream drops before
the run finished (the daemon restarted, the network failed, a read was interrupted), a
:class:`RunHandle` attaches again from the last committed event it received, by itself, for
up to ``reattach_s`` seconds: the caller sees every committed event once, in order. Decisions
and a cancel sent and not yet answered by an event are sent again on the new stream (the
daemon answers a repeated one with ``decision_rejected``, harmlessly); a decision sent while
the stream is down waits for it. Streamed pieces (events with ``delta`` set: the model's text
and tool calls as they arrive) are never stored; a handle that re-attaches gets the committed
event they led up to instead, which repeats them whole.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
import grpc
import grpc.aio

from airlock.v1 import agent_pb2, agent_pb2_grpc, approval_pb2, run_event_pb2

from ._peer import Peer
from .approvals import decision_for
from .errors import (
    ConnectionLostError,
    IncompleteRunError,
    InvalidArgumentError,
    UnavailableError,
)

__all__ = ["RunHandle"]

# How long a handle keeps trying to attach again after its stream dropped, from the last
# event it received: a daemon restarting on the same state resumes its runs within seconds.
DEFAULT_REATTACH_S = 30.0
# The first pause between attempts; it doubles up to the cap.
_FIRST_BACKOFF_S = 0.1
_MAX_BACKOFF_S = 2.0
#: The longest input a run takes (`start.input`, and each later input): the daemon's bound,
#: checked here so that an oversized one is refused alone instead of failing the whole stream.
MAX_INPUT_BYTES = 256 * 1024
# What a dropped stream looks like: these errors (UnavailableError covers a lost connection
# and an unreachable daemon), and only these, are worth attaching again.
_DROPPED = (UnavailableError, IncompleteRunError)


class RunHandle:
    """Follows one run and steers it. ``async for event in handle`` yields every event, deltas
    included (``event.delta``); :meth:`committed` only the stored ones, :meth:`text` the
    model's text as it streams; :meth:`wait` runs to the end and returns ``RunFinished``.

    Closing the handle (or leaving ``async with``) stops following the run; the run goes on.
    """

    def __init__(
        self,
        peer: Peer,
        first: agent_pb2.RunRequest,
        *,
        run_id: str = "",
        after_seq: int = 0,
        reattach_s: float = DEFAULT_REATTACH_S,
    ) -> None:
        self._peer = peer
        self._agent = agent_pb2_grpc.AgentStub(peer.channel)
        self._first = first
        self._reattach_s = reattach_s
        self._call: grpc.aio.StreamStreamCall[agent_pb2.RunRequest, run_event_pb2.RunEvent] | None = None
        self._buffered: run_event_pb2.RunEvent | None = None
        self._closed = False
        # Decisions (by approval id) and the cancel sent and not yet answered by an event:
        # sent again whenever the stream is opened again.
        self._unanswered: dict[str, agent_pb2.RunRequest] = {}
        self._cancel: agent_pb2.RunRequest | None = None
        #: The run's id: known from the start for an attached run, from the first event for
        #: one this handle started.
        self.run_id = run_id
        #: The last committed event's seq (the ``after_seq`` to resume after it). Deltas do
        #: not count: one carries the seq of the event it leads up to, not yet arrived.
        self.last_seq = after_seq
        #: The run's end, once ``run_finished`` arrived.
        self.finished: run_event_pb2.RunFinished | None = None
        #: How many times the stream dropped and was attached again.
        self.reattached = 0

    async def _open(self, request: agent_pb2.RunRequest) -> None:
        """Opens a stream with ``request`` as its first message and reads its first event, so
        that a refused request (a bad field, an unknown run, a seq past the end) is raised
        here, not by the first read.

        An attach after seq N asks for the events after N - 1 and does not hand out event N
        again: a run waiting for a person may have nothing new to say for a long time, and
        the daemon's answer to an attach is otherwise only known with its first event."""
        self._peer.check_open()
        if self._call is not None:
            self._call.cancel()
        after_seq = request.attach.after_seq if request.WhichOneof("request") == "attach" else 0
        if after_seq > 0:
            request = _attach(request.attach.run_id, after_seq - 1)
        call = self._agent.Run(metadata=self._peer.metadata)
        self._call = call
        try:
            await call.write(request)
            first = await call.read()
        except grpc.RpcError as error:
            raise self._peer.error(error, self._agent.Run) from None
        if first is grpc.aio.EOF:
            raise self._incomplete()
        if self._closed:
            # Closed while this stream opened (a re-attach in its backoff): not followed.
            call.cancel()
            return
        event = self._event(first)
        self._record(event)
        if not (after_seq > 0 and event.seq <= after_seq and not event.delta):
            self._buffered = event

    async def __aenter__(self) -> RunHandle:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops following the run (the run goes on in the daemon); iteration then ends."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    def __aiter__(self) -> RunHandle:
        return self

    async def __anext__(self) -> run_event_pb2.RunEvent:
        event = await self.next_event()
        if event is None:
            raise StopAsyncIteration
        return event

    async def next_event(self) -> run_event_pb2.RunEvent | None:
        """The run's next event; None once the stream ended after ``run_finished``, or the
        handle was closed."""
        dropped_at = 0.0
        backoff = _FIRST_BACKOFF_S
        while True:
            try:
                return await self._read()
            except _DROPPED:
                now = time.monotonic()
                dropped_at = dropped_at or now
                if (
                    self._closed
                    or self._peer.closed[0]
                    or not self.run_id
                    or self.finished is not None
                    or self._reattach_s <= 0
                    or now - dropped_at > self._reattach_s
                ):
                    raise
            # The stream dropped: attach again after the last committed event, until one
            # attempt takes or the time is up (the last attempt's error is raised then).
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
            if self._closed:
                return None
            try:
                await self._open(_attach(self.run_id, self.last_seq))
            except _DROPPED:
                if self._peer.closed[0] or time.monotonic() - dropped_at > self._reattach_s:
                    raise
                continue
            if self._closed:
                return None
            self.reattached += 1
            await self._resend()

    async def _read(self) -> run_event_pb2.RunEvent | None:
        if self._buffered is not None:
            buffered, self._buffered = self._buffered, None
            return buffered
        if self._closed:
            return None
        if self._call is None:
            await self._open(self._first)
            return await self._read()
        event = await self._peer.read(
            self._call, run_event_pb2.RunEvent, self._agent.Run, closed=lambda: self._closed, what="run's stream"
        )
        if event is None:
            if self.finished is not None or self._closed:
                return None
            raise self._incomplete()
        self._record(event)
        return event

    def _event(self, message: object) -> run_event_pb2.RunEvent:
        return self._peer.decoded(message, run_event_pb2.RunEvent, self._agent.Run)

    def _record(self, event: run_event_pb2.RunEvent) -> None:
        if not self.run_id and event.run_id:
            self.run_id = event.run_id
        if not event.delta:
            self.last_seq = max(self.last_seq, event.seq)
        kind = event.WhichOneof("event")
        if kind == "approval_resolved":
            self._unanswered.pop(event.approval_resolved.approval_id, None)
        elif kind == "decision_rejected":
            self._unanswered.pop(event.decision_rejected.approval_id, None)
        elif kind == "run_finished":
            self.finished = event.run_finished
            self._unanswered.clear()
            self._cancel = None

    def _incomplete(self) -> IncompleteRunError:
        return IncompleteRunError(
            f"airlockd at {self._peer.endpoint} closed the stream of run {self.run_id or '?'} "
            f"before the run finished (last event received: {self.last_seq})",
            endpoint=self._peer.endpoint,
            run_id=self.run_id,
            last_seq=self.last_seq,
        )

    async def committed(self) -> AsyncIterator[run_event_pb2.RunEvent]:
        """The run's stored events, in order, without the streamed pieces."""
        async for event in self:
            if not event.delta:
                yield event

    async def text(self) -> AsyncIterator[str]:
        """The model's text as it arrives: each streamed piece, then whatever of the whole
        ``model_text`` was not streamed (all of it for a model that does not stream, the rest
        after a re-attach that missed pieces: those that come after it are not used, since
        the ones lost in between cannot be told apart)."""
        streamed: dict[int, tuple[int, str]] = {}
        async for event in self:
            kind = event.WhichOneof("event")
            if kind == "text_delta":
                epoch, text = streamed.get(event.seq, (self.reattached, ""))
                if epoch == self.reattached:
                    streamed[event.seq] = (epoch, text + event.text_delta.text)
                    yield event.text_delta.text
                else:
                    streamed[event.seq] = (epoch, text)
            elif kind == "model_text":
                whole = event.model_text.text
                _, already = streamed.pop(event.seq, (0, ""))
                rest = whole[len(already) :] if whole.startswith(already) else whole
                if rest:
                    yield rest

    async def wait(self) -> run_event_pb2.RunFinished:
        """Reads the run to its end and returns how it ended."""
        async for _ in self:
            pass
        if self.finished is None:
            raise self._incomplete()
        return self.finished

    async def decide(
        self,
        request: approval_pb2.ApprovalRequest,
        *,
        approve: bool,
        for_session: bool = False,
        reason: str = "",
        grant_prefix: Sequence[str] = (),
    ) -> None:
        """Answers one of the run's approval requests, bound to the exact call it asks about
        (its id and digest). A decision the daemon refuses comes back as a
        ``decision_rejected`` event."""
        decision = decision_for(
            request, approve=approve, for_session=for_session, reason=reason, grant_prefix=grant_prefix
        )
        message = agent_pb2.RunRequest(decision=decision)
        self._unanswered[decision.approval_id] = message
        await self._send(message, keep=True)

    async def approve(self, request: approval_pb2.ApprovalRequest, *, for_session: bool = False) -> None:
        """Approves ``request`` once, or for the rest of the session."""
        await self.decide(request, approve=True, for_session=for_session)

    async def deny(self, request: approval_pb2.ApprovalRequest, reason: str = "") -> None:
        """Denies ``request``; the model is told ``reason``."""
        await self.decide(request, approve=False, reason=reason)

    async def cancel(self, reason: str = "") -> None:
        """Stops the run; it ends ``CANCELLED``, which this stream then reports."""
        self._cancel = agent_pb2.RunRequest(cancel=agent_pb2.CancelRun(reason=reason))
        await self._send(self._cancel, keep=True)

    async def send_input(self, text: str) -> None:
        """More input from the user, read at the start of the run's next step. Raises
        :class:`ConnectionLostError` when the stream is down: input is not sent twice."""
        if len(text.encode()) > MAX_INPUT_BYTES:
            raise InvalidArgumentError(f"input.text: over {MAX_INPUT_BYTES} bytes", endpoint=self._peer.endpoint)
        await self._send(agent_pb2.RunRequest(input=agent_pb2.UserInput(text=text)), keep=False)

    async def _send(self, request: agent_pb2.RunRequest, *, keep: bool) -> None:
        """Writes ``request``; one that is ``keep`` (a decision, the cancel) and cannot be
        written now is sent when the stream is open again."""
        if self._closed:
            raise ConnectionLostError(
                f"the handle of run {self.run_id} is closed; the message was not sent",
                endpoint=self._peer.endpoint,
            )
        if self._call is None:
            await self._open(self._first)
        assert self._call is not None
        try:
            await self._call.write(request)
        except (grpc.RpcError, asyncio.InvalidStateError) as error:
            if keep:
                return
            cause = self._peer.error(error, self._agent.Run) if isinstance(error, grpc.RpcError) else error
            raise ConnectionLostError(
                f"the stream of run {self.run_id} to airlockd at {self._peer.endpoint} is "
                f"down; the input was not sent ({cause})",
                endpoint=self._peer.endpoint,
            ) from None

    async def _resend(self) -> None:
        """After attaching again: what is still unanswered, on the new stream."""
        pending = list(self._unanswered.values())
        if self._cancel is not None:
            pending.append(self._cancel)
        for request in pending:
            await self._send(request, keep=True)


def _attach(run_id: str, after_seq: int) -> agent_pb2.RunRequest:
    return agent_pb2.RunRequest(attach=agent_pb2.AttachRun(run_id=run_id, after_seq=after_seq))
