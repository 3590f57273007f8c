"""The daemon one client talks to, as every call needs it: the address, the token's metadata,
and the one place a failed call becomes an exception of :mod:`airlock_client.errors`."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio

from .connection import Token
from .errors import AirlockError, ConnectionLostError, DataLossError, from_rpc_error

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Peer:
    endpoint: str
    token: Token = dataclasses.field(repr=False)
    channel: grpc.aio.Channel = dataclasses.field(repr=False)
    #: Set by the client's close(): calls after it fail as a lost connection.
    closed: list[bool] = dataclasses.field(default_factory=lambda: [False], repr=False)

    def check_open(self) -> None:
        if self.closed[0]:
            raise ConnectionLostError(f"the client of airlockd at {self.endpoint} is closed", endpoint=self.endpoint)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        if self.token.value is None:
            return ()
        return (("authorization", f"Bearer {self.token.value}"),)

    def error(self, error: grpc.RpcError, call: Any) -> AirlockError:
        """The exception for a call that ended with ``error``."""
        method = getattr(call, "_method", b"")
        if isinstance(method, bytes):
            method = method.decode("ascii", "replace")
        return from_rpc_error(
            error, endpoint=self.endpoint, method=str(method), token_source=self.token.source
        )

    async def unary(self, call: grpc.aio.UnaryUnaryMultiCallable[Any, T], request: Any) -> T:
        """One unary call, with the token, its failure mapped."""
        self.check_open()
        try:
            pending: Awaitable[T | None] = call(request, metadata=self.metadata)
            response = await pending
        except grpc.RpcError as error:
            raise self.error(error, call) from None
        if response is None:
            raise self._undecodable(call)
        return response

    async def read(
        self,
        stream: Any,
        kind: type[T],
        call: Any,
        *,
        closed: Callable[[], bool],
        what: str,
    ) -> T | None:
        """The next message of ``stream`` (a call of ``call``); None at its end, or once it
        was closed on this side (``closed()``). grpc.aio ends a read of a call cancelled on
        this side with CancelledError: the task's own cancellation is passed on, a close ends
        the stream, and any other (a read interrupted by its caller, which cancelled the call)
        is a lost connection — what the call would have said is gone."""
        try:
            message = await stream.read()
        except grpc.RpcError as error:
            if closed():
                return None
            raise self.error(error, call) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            if closed():
                return None
            raise ConnectionLostError(
                f"a read of this {what} was interrupted, which ended its call to airlockd at {self.endpoint}",
                endpoint=self.endpoint,
            ) from None
        if message is grpc.aio.EOF:
            return None
        return self.decoded(message, kind, call)

    def decoded(self, message: object, kind: type[T], call: Any) -> T:
        """``message`` as read off a stream; grpc.aio reads one that does not decode as None."""
        if not isinstance(message, kind):
            raise self._undecodable(call)
        return message

    def _undecodable(self, call: Any) -> DataLossError:
        method = getattr(call, "_method", b"")
        if isinstance(method, bytes):
            method = method.decode("ascii", "replace")
        return DataLossError(
            f"a reply of airlockd at {self.endpoint} to {method} does not decode as its "
            "message: is the server airlockd, and of this API?",
            endpoint=self.endpoint,
            method=str(method),
        )
