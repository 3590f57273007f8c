"""airlock-client: drive airlockd from Python.

Connect, then call its tools, drive agent runs and answer their approvals::

    import airlock_client

    with airlock_client.connect("127.0.0.1:7411") as client:
        run = client.start_run("fix the failing test", workspace="/src/app", model="openai:gpt-4.1")
        for event in run:
            ...

:func:`connect` returns the blocking :class:`Client`; :func:`airlock_client.aio.connect`
the asyncio :class:`~airlock_client.aio.AsyncClient` it wraps. Errors are the classes of
:mod:`airlock_client.errors`, one per status of proto/API.md's table. The generated messages
are in ``airlock.v1`` (``from airlock.v1 import agent_pb2``).
"""

from .aio import AsyncClient
from .approvals import decision_for
from .errors import (
    AbortedError,
    AirlockError,
    ConnectionLostError,
    DataLossError,
    FailedPreconditionError,
    IncompleteRunError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    RpcError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnreachableError,
)
from .sync import Client, RunHandle, connect

__version__ = "0.1.0"

__all__ = [
    "AbortedError",
    "AirlockError",
    "AsyncClient",
    "Client",
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
    "RunHandle",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnreachableError",
    "connect",
    "decision_for",
]
