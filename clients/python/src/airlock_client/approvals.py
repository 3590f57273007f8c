"""Answering approval requests: the decision bound to the exact call a request asks about, the
approver console of every run (``Agent.Approvals``), and an auto-approver that answers by a
predicate.

A decision carries the request's id *and* its digest (of the tool, the arguments and the
sandbox profile): a decision made while looking at one call can never approve another, and
the daemon refuses one whose digest does not match.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import grpc
import grpc.aio

from airlock.v1 import agent_pb2_grpc, approval_pb2

from ._peer import Peer
from .errors import ConnectionLostError, UnavailableError

__all__ = ["ApprovalConsole", "AutoApprover", "Predicate", "decision_for"]

#: Decides one approval request: True approves it once, False denies it.
Predicate = Callable[[approval_pb2.ApprovalRequest], bool]


def decision_for(
    request: approval_pb2.ApprovalRequest,
    *,
    approve: bool,
    for_session: bool = False,
    reason: str = "",
    grant_prefix: Sequence[str] = (),
) -> approval_pb2.ApprovalDecision:
    """The decision on ``request``, bound to it by its id and digest.

    ``for_session`` approves every later call of the same tool and arguments in the session
    (with ``grant_prefix``, every command starting with those words); ``reason`` is what the
    model is told of a denial."""
    if for_session and not approve:
        raise ValueError("a denial is for one call: for_session goes with approve=True")
    if grant_prefix and not for_session:
        raise ValueError("grant_prefix goes with an approval for the session")
    if approve:
        decision = (
            approval_pb2.DECISION_APPROVE_SESSION if for_session else approval_pb2.DECISION_APPROVE_ONCE
        )
    else:
        decision = approval_pb2.DECISION_DENY
    return approval_pb2.ApprovalDecision(
        approval_id=request.approval_id,
        decision=decision,
        reason=reason,
        digest=request.digest,
        grant_prefix=list(grant_prefix),
    )


class ApprovalConsole:
    """The approver console: every request pending now, then every new request and every
    update on one, for all runs of the tenant; decisions sent on it answer for any run.

    Each update's ``state`` says what it is: ``PENDING`` (a request to answer), ``RESOLVED``
    (answered, here or elsewhere), ``EXPIRED``, or ``DECISION_REJECTED`` (a decision sent here
    was refused; ``detail`` says why). Iteration ends when the daemon ends the stream or the
    console is closed."""

    def __init__(self, peer: Peer) -> None:
        self._peer = peer
        self._agent = agent_pb2_grpc.AgentStub(peer.channel)
        self._closed = False
        self._call: grpc.aio.StreamStreamCall[approval_pb2.ApprovalDecision, approval_pb2.ApprovalRequest] = (
            self._agent.Approvals(metadata=peer.metadata)
        )

    async def _opened(self) -> ApprovalConsole:
        try:
            await self._call.initial_metadata()
            if self._call.done():
                await self._call.read()
        except grpc.RpcError as error:
            raise self._peer.error(error, self._agent.Approvals) from None
        return self

    def __aiter__(self) -> ApprovalConsole:
        return self

    async def __anext__(self) -> approval_pb2.ApprovalRequest:
        request = await self._peer.read(
            self._call,
            approval_pb2.ApprovalRequest,
            self._agent.Approvals,
            closed=lambda: self._closed,
            what="approver console",
        )
        if request is None:
            raise StopAsyncIteration
        return request

    async def decide(
        self,
        request: approval_pb2.ApprovalRequest,
        *,
        approve: bool,
        for_session: bool = False,
        reason: str = "",
        grant_prefix: Sequence[str] = (),
    ) -> None:
        """Answers ``request`` (of any run)."""
        decision = decision_for(
            request, approve=approve, for_session=for_session, reason=reason, grant_prefix=grant_prefix
        )
        try:
            await self._call.write(decision)
        except grpc.RpcError as error:
            raise self._peer.error(error, self._agent.Approvals) from None
        except asyncio.InvalidStateError:
            raise ConnectionLostError(
                f"the approver console of airlockd at {self._peer.endpoint} is closed; the "
                "decision was not sent",
                endpoint=self._peer.endpoint,
            ) from None

    def close(self) -> None:
        self._closed = True
        self._call.cancel()

    async def __aenter__(self) -> ApprovalConsole:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()


# The pauses of an auto-approver opening its console again after the daemon went away.
_FIRST_BACKOFF_S = 0.1
_MAX_BACKOFF_S = 2.0


class AutoApprover:
    """Answers every pending request of the tenant's runs (or of one run) by a predicate:
    approved once when it returns True, denied with ``deny_reason`` otherwise. Runs in the
    background between ``async with`` and its end, opening its console again when the daemon
    goes away and comes back. The predicate runs in a worker thread, so it may block (ask a
    person) without stalling the client.

    ``decided`` lists what it answered, in order: ``(request, approved)``. An error that stops
    it (the predicate raised; the daemon refused the console) is raised by :meth:`stop`."""

    def __init__(
        self,
        peer: Peer,
        predicate: Predicate,
        *,
        deny_reason: str,
        run_id: str = "",
    ) -> None:
        self._peer = peer
        self._predicate = predicate
        self._deny_reason = deny_reason
        self._run_id = run_id
        self._task: asyncio.Task[None] | None = None
        self._console: ApprovalConsole | None = None
        self.decided: list[tuple[approval_pb2.ApprovalRequest, bool]] = []
        #: What stopped it early, when something did.
        self.error: BaseException | None = None

    async def start(self) -> AutoApprover:
        """Opens the console and starts answering; returns once the console is open, so that
        no request asked after this returns is missed."""
        self._console = await ApprovalConsole(self._peer)._opened()
        self._task = asyncio.get_running_loop().create_task(self._answer())
        return self

    async def _answer(self) -> None:
        backoff = _FIRST_BACKOFF_S
        try:
            while True:
                if self._console is None:
                    try:
                        self._console = await ApprovalConsole(self._peer)._opened()
                    except UnavailableError:
                        await asyncio.sleep(backoff)
                        backoff = min(backoff * 2, _MAX_BACKOFF_S)
                        continue
                try:
                    async for request in self._console:
                        backoff = _FIRST_BACKOFF_S
                        await self._consider(self._console, request)
                except UnavailableError:
                    pass
                # The daemon ended the stream (it stopped) or the connection broke: open
                # another console once it is back.
                self._console = None
                await asyncio.sleep(backoff)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - raised by stop()
            self.error = error

    async def _consider(self, console: ApprovalConsole, request: approval_pb2.ApprovalRequest) -> None:
        if request.state != approval_pb2.APPROVAL_STATE_PENDING:
            return
        if self._run_id and request.run_id != self._run_id:
            return
        approved = bool(await asyncio.to_thread(self._predicate, request))
        await console.decide(request, approve=approved, reason="" if approved else self._deny_reason)
        self.decided.append((request, approved))

    async def stop(self) -> None:
        """Stops answering (requests still pending wait for someone else); raises what
        stopped it early, if anything did."""
        if self._console is not None:
            self._console.close()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self.error is not None:
            raise self.error

    async def __aenter__(self) -> AutoApprover:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()
