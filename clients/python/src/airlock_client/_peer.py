"""The daemon one client talks to, as every call needs it: the address, the token's metadata,
and the one place a failed call becomes an exception of :mod:`airlock_client.errors`."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import Any, TypeVar

import grpc
import grpc.aio

from .connection import Token
from .errors import AirlockError, from_rpc_error

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Peer:
    endpoint: str
    token: Token
    channel: grpc.aio.Channel

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
        try:
            response: Awaitable[T] = call(request, metadata=self.metadata)
            return await response
        except grpc.RpcError as error:
            raise self.error(error, call) from None
