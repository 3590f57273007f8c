"""Every way a call to airlockd can fail, as exception classes that follow proto/API.md.

The daemon answers a call it refuses with a gRPC status whose message names the request field
at fault first (``start.model.model: unknown model ...``); :func:`from_rpc_error` turns that
status into the exception of its code, with the field and whether a retry can help. Failures
of the conversation itself (nothing listening, a connection lost mid-call, a run's stream
closed before the run finished) have classes of their own.

A tool that ran and failed is *not* an exception: that is a ``ToolResult`` whose ``status``
is not ``TOOL_STATUS_OK``.
"""

from __future__ import annotations

import re

import grpc

__all__ = [
    "AbortedError",
    "AirlockError",
    "ConnectionLostError",
    "DataLossError",
    "FailedPreconditionError",
    "IncompleteRunError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "RpcError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnreachableError",
    "from_rpc_error",
]

# A field path as the daemon writes it: `tool`, `start.model.model`, `settings.rules`.
_FIELD = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")


class AirlockError(Exception):
    """The base of every error this package raises."""

    #: Whether the same call may succeed if sent again later (API.md's "retry?" column).
    retryable: bool = False

    def __init__(self, message: str, *, endpoint: str = "") -> None:
        super().__init__(message)
        self.message = message
        #: The daemon the call went to.
        self.endpoint = endpoint


class RpcError(AirlockError):
    """The daemon answered a call with an error status."""

    #: The gRPC status code this class stands for.
    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, endpoint: str = "", method: str = "") -> None:
        super().__init__(message, endpoint=endpoint)
        #: The full method name of the call, ``/airlock.v1.Tools/ExecuteTool``.
        self.method = method
        head, sep, _ = message.partition(": ")
        #: The request field at fault, as a path inside the request (``start.workspace``);
        #: empty when the error names none.
        self.field = head if sep and _FIELD.match(head) else ""


class InvalidArgumentError(RpcError):
    """A field is malformed, missing, or past its bound: fix the field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFoundError(RpcError):
    """An id or name that names nothing this caller may see (another tenant's run is exactly
    as unknown as one that never existed)."""

    code = grpc.StatusCode.NOT_FOUND


class OutOfRangeError(RpcError):
    """A position past the end: an output offset, an ``after_seq``."""

    code = grpc.StatusCode.OUT_OF_RANGE


class FailedPreconditionError(RpcError):
    """Well-formed, but the state forbids it: cancelling a finished run, a decision whose
    digest names another call, a review of a listing that changed since."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class UnauthenticatedError(RpcError):
    """No token, a malformed ``authorization`` header, or a token this daemon does not know.

    The message says where the token sent came from (``token_source``)."""

    code = grpc.StatusCode.UNAUTHENTICATED

    def __init__(
        self, message: str, *, endpoint: str = "", method: str = "", token_source: str = ""
    ) -> None:
        super().__init__(message, endpoint=endpoint, method=method)
        #: Where the token came from: ``given``, ``$AIRLOCK_TOKEN``, a file's path, or
        #: ``none`` when there was none anywhere.
        self.token_source = token_source


class PermissionDeniedError(RpcError):
    """The tenant may not use this tool, workspace or service, or a rule denies the call."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(RpcError):
    """The tenant's cap on concurrent runs or executions, or a message over the size limit:
    later, when something finished."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    retryable = True


class AbortedError(RpcError):
    """In a fleet, another daemon took the run over while this one was writing for it: retry
    on any daemon."""

    code = grpc.StatusCode.ABORTED
    retryable = True


class UnavailableError(RpcError):
    """The daemon cannot reach its store now, or it is stopping; in a fleet, the daemon
    executing the run did not answer within its lease. Retry with backoff."""

    code = grpc.StatusCode.UNAVAILABLE
    retryable = True


class DataLossError(RpcError):
    """Stored data is damaged: tell the operator."""

    code = grpc.StatusCode.DATA_LOSS


class InternalError(RpcError):
    """A bug of the daemon: report it."""

    code = grpc.StatusCode.INTERNAL


class UnimplementedError(RpcError):
    """The daemon does not serve this call: it is older than this client (or the call is not
    one of airlock's)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class UnreachableError(UnavailableError):
    """Nothing answered at the daemon's address, or the TLS handshake with it failed. An
    :class:`UnavailableError`: ``except UnavailableError`` catches every failure worth
    retrying with backoff."""

    def __init__(self, message: str, *, endpoint: str = "", method: str = "") -> None:
        super().__init__(message, endpoint=endpoint, method=method)
        self.field = ""


class ConnectionLostError(UnavailableError):
    """The connection broke in the middle of a call: the daemon stopped, or the network
    between failed. Whether a running tool finished is unknown to this client."""

    def __init__(self, message: str, *, endpoint: str = "", method: str = "") -> None:
        super().__init__(message, endpoint=endpoint, method=method)
        self.field = ""


class IncompleteRunError(AirlockError):
    """A run's stream ended before the run finished. The run belongs to the daemon, not to
    the stream: it may still be going, and can be followed again from ``last_seq``."""

    retryable = True

    def __init__(self, message: str, *, endpoint: str, run_id: str, last_seq: int) -> None:
        super().__init__(message, endpoint=endpoint)
        self.run_id = run_id
        self.last_seq = last_seq


_BY_CODE: dict[grpc.StatusCode, type[RpcError]] = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        OutOfRangeError,
        FailedPreconditionError,
        UnauthenticatedError,
        PermissionDeniedError,
        ResourceExhaustedError,
        AbortedError,
        UnavailableError,
        DataLossError,
        InternalError,
        UnimplementedError,
    )
}


def from_rpc_error(
    error: grpc.RpcError, *, endpoint: str, method: str, token_source: str
) -> AirlockError:
    """The exception for a call to ``method`` that ended with ``error``'s status.

    The one mapper every call of this package goes through."""
    code: grpc.StatusCode = getattr(error, "code", lambda: grpc.StatusCode.UNKNOWN)()
    details: str = getattr(error, "details", lambda: "")() or ""
    transport = _transport_failure(code, details)
    if transport == "unreachable":
        return UnreachableError(
            f"cannot reach airlockd at {endpoint}: {details} — is it running?",
            endpoint=endpoint,
            method=method,
        )
    if transport == "lost":
        return ConnectionLostError(
            f"lost the connection to airlockd at {endpoint} during {method}: {details or code.name}",
            endpoint=endpoint,
            method=method,
        )
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
        # grpc-core's own refusal, on this side, of a message over a limit: the same call
        # would meet the same refusal.
        sent = details.lower().startswith("sent")
        refused = ResourceExhaustedError(
            f"a request to airlockd at {endpoint} ({method}) is over the daemon's limit of "
            f"{4 * 1024 * 1024} bytes: {details}"
            if sent
            else f"a reply of airlockd at {endpoint} to {method} is over this client's limit of "
            f"{16 * 1024 * 1024} bytes: {details}",
            endpoint=endpoint,
            method=method,
        )
        refused.retryable = False
        return refused
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return UnimplementedError(
            f"airlockd at {endpoint} does not serve {method.lstrip('/')}: it is older than "
            f"this client ({details or 'unimplemented'})",
            endpoint=endpoint,
            method=method,
        )
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return UnauthenticatedError(
            f"airlockd at {endpoint} refused the token ({token_source}): {details}; pass "
            "token=... or set AIRLOCK_TOKEN to one of its tokens",
            endpoint=endpoint,
            method=method,
            token_source=token_source,
        )
    cls = _BY_CODE.get(code)
    if cls is None:
        # UNKNOWN, ALREADY_EXISTS: codes the daemon does not send; kept as they came.
        unknown = RpcError(f"{code.name}: {details}", endpoint=endpoint, method=method)
        unknown.code = code
        return unknown
    return cls(details, endpoint=endpoint, method=method)


# grpc-core's words for a connection it could not make (UNAVAILABLE).
_UNREACHABLE = (
    "failed to connect to all addresses",
    "connection refused",
    "connections to all backends failing",
    "dns resolution failed",
)
# Its words for a connection that broke under a call (UNAVAILABLE or UNKNOWN).
_LOST = (
    "socket closed",
    "connection reset by peer",
    "broken pipe",
    "stream removed",
    "endpoint closing",
    "keepalive watchdog timeout",
    "ping timeout",
    "goaway received",
    "tls handshake failed",
    "ssl handshake failed",
    "handshake read failed",
    "handshake write failed",
)
# Its words, as INTERNAL, for a write on a connection that is gone or a stream reset: the
# daemon's own INTERNAL is a bug, never read by these heuristics.
_LOST_INTERNAL = ("internal error from core", "received rst_stream")


def _transport_failure(code: grpc.StatusCode, details: str) -> str:
    """``unreachable``, ``lost`` or ``""`` (the daemon's own status) for a call's end."""
    lowered = details.lower()
    if code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED):
        # The daemon sends neither: a reset stream (a daemon stopping resets its streams)
        # or a deadline this client set.
        return "lost"
    if code == grpc.StatusCode.INTERNAL:
        return "lost" if lowered.startswith(_LOST_INTERNAL) else ""
    if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN):
        return ""
    if any(words in lowered for words in _UNREACHABLE):
        return "unreachable"
    if any(words in lowered for words in _LOST):
        return "lost"
    return ""
