"""The blocking client: the asyncio client of :mod:`airlock_client.aio`, run on an event loop
of its own in a background thread.

One implementation serves both styles, so they cannot drift apart: each blocking method is
the asyncio method of the same name and signature (:func:`_blocking` keeps the signature for
type checkers), run to completion on the client's loop; each iterator pulls the asyncio
iterator one item at a time. A ``Ctrl-C`` while waiting stops the wait, not the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from airlock.v1 import approval_pb2, run_event_pb2

from . import aio
from .approvals import ApprovalConsole as AsyncApprovalConsole
from .approvals import AutoApprover as AsyncAutoApprover
from .approvals import Predicate
from .errors import ConnectionLostError
from .execution import Execution as AsyncExecution
from .runs import RunHandle as AsyncRunHandle

__all__ = ["ApprovalConsole", "AutoApprover", "Client", "Execution", "RunHandle", "connect"]

P = ParamSpec("P")
R = TypeVar("R")
A = TypeVar("A")


class _Loop:
    """An event loop running in a daemon thread, and the bridge from blocking code to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.closing = False
        self._thread = threading.Thread(target=self.loop.run_forever, name="airlock-client", daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[R]) -> R:
        """Runs ``awaitable`` on the loop and waits for it. Interrupted (Ctrl-C), it cancels
        the awaitable and waits for it to have stopped before passing the interruption on:
        nothing goes on reading a stream behind the caller's back."""
        if self.closing or self.loop.is_closed() or not self.loop.is_running():
            closing = getattr(awaitable, "close", None)
            if closing is not None:
                closing()  # never awaited: say so to nobody
            raise ConnectionLostError("this client is closed", endpoint="")
        stopped = threading.Event()

        async def wrapped() -> R:
            try:
                return await awaitable
            finally:
                stopped.set()

        future = asyncio.run_coroutine_threadsafe(wrapped(), self.loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self.closing:
                raise ConnectionLostError("this client was closed while the call waited", endpoint="") from None
            raise
        except BaseException:
            if not future.done():
                future.cancel()
                stopped.wait(timeout=5)
            raise

    def iterate(self, iterator: AsyncIterator[R]) -> Iterator[R]:
        try:
            while True:
                try:
                    yield self.run(iterator.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            closing = getattr(iterator, "aclose", None)
            if closing is not None and not self.loop.is_closed():
                if threading.current_thread() is self._thread:
                    # Finalised on the loop's own thread (by the garbage collector): waiting
                    # here for the loop would wait forever.
                    self.loop.create_task(closing())
                elif self.loop.is_running() and not self.closing:
                    self.run(closing())

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Runs ``callback`` on the loop, unless the loop is gone (its client closed)."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(callback)

    def stop(self) -> None:
        """Cancels what still runs on the loop (a read another thread waits on ends with its
        cancellation), then stops the loop and its thread."""
        self.closing = True
        if self.loop.is_running():

            async def cancel_all() -> None:
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            try:
                asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(timeout=5)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        if not self._thread.is_alive() and not self.loop.is_closed():
            self.loop.close()


class _Bridged(Protocol[A]):
    _aio: A
    _loop: _Loop


def _blocking(
    method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[_Bridged[A], P], R]:
    """The blocking twin of an asyncio method: same name, signature and docs."""

    def call(self: _Bridged[A], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._loop.run(method(self._aio, *args, **kwargs))

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


def _iterating(
    method: Callable[Concatenate[A, P], AsyncIterator[R]],
) -> Callable[Concatenate[_Bridged[A], P], Iterator[R]]:
    """The iterator twin of an asyncio generator method."""

    def call(self: _Bridged[A], /, *args: P.args, **kwargs: P.kwargs) -> Iterator[R]:
        return self._loop.iterate(method(self._aio, *args, **kwargs))

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


def connect(
    endpoint: str | None = None,
    *,
    token: str | None = None,
    ca_cert: str | os.PathLike[str] | None = None,
    client_cert: str | os.PathLike[str] | None = None,
    client_key: str | os.PathLike[str] | None = None,
    timeout: float = aio.CONNECT_TIMEOUT_S,
) -> Client:
    """Connects to airlockd (see :func:`airlock_client.aio.connect` for every argument) and
    returns the blocking client."""
    loop = _Loop()
    try:
        client = loop.run(
            aio.connect(
                endpoint,
                token=token,
                ca_cert=ca_cert,
                client_cert=client_cert,
                client_key=client_key,
                timeout=timeout,
            )
        )
    except BaseException:
        loop.stop()
        raise
    return Client(client, loop)


class Client:
    """A blocking connection to one daemon; ``with`` closes it. Every method is its asyncio
    twin's in :class:`airlock_client.aio.AsyncClient`, blocking until done."""

    def __init__(self, client: aio.AsyncClient, loop: _Loop) -> None:
        self._aio = client
        self._loop = loop

    @property
    def info(self) -> Any:
        """What the daemon said at connect (``DaemonInfo``)."""
        return self._aio.info

    @property
    def endpoint(self) -> str:
        return self._aio.endpoint

    @property
    def asyncio(self) -> aio.AsyncClient:
        """The asyncio client under this one (its coroutines run on this client's loop)."""
        return self._aio

    def run_coroutine(self, coroutine: Coroutine[Any, Any, R]) -> concurrent.futures.Future[R]:
        """Runs a coroutine of :attr:`asyncio` on this client's loop, from any thread; wrap the
        future with :func:`asyncio.wrap_future` to await it from another loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop.loop)

    def close(self) -> None:
        """Closes the connection; a call another thread waits on ends with
        :class:`ConnectionLostError`, and so does any later call."""
        if self._loop.loop.is_running() and not self._loop.closing:
            self._loop.run(self._aio.close())
        self._loop.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    daemon_info = _blocking(aio.AsyncClient.daemon_info)
    collect_garbage = _blocking(aio.AsyncClient.collect_garbage)
    review_mcp_server = _blocking(aio.AsyncClient.review_mcp_server)
    trust_mcp_server = _blocking(aio.AsyncClient.trust_mcp_server)
    list_tools = _blocking(aio.AsyncClient.list_tools)
    get_tool = _blocking(aio.AsyncClient.get_tool)
    run_tool = _blocking(aio.AsyncClient.run_tool)
    cancel_execution = _blocking(aio.AsyncClient.cancel_execution)
    read_output = _blocking(aio.AsyncClient.read_output)
    iter_output = _iterating(aio.AsyncClient.iter_output)
    read_all_output = _blocking(aio.AsyncClient.read_all_output)
    watch_run = _iterating(aio.AsyncClient.watch_run)
    get_run = _blocking(aio.AsyncClient.get_run)
    list_runs = _blocking(aio.AsyncClient.list_runs)
    iter_runs = _iterating(aio.AsyncClient.iter_runs)
    cancel_run = _blocking(aio.AsyncClient.cancel_run)
    get_trace = _blocking(aio.AsyncClient.get_trace)
    create_session = _blocking(aio.AsyncClient.create_session)
    get_session = _blocking(aio.AsyncClient.get_session)
    iter_sessions = _iterating(aio.AsyncClient.iter_sessions)
    watch_approvals = _iterating(aio.AsyncClient.watch_approvals)
    decide = _blocking(aio.AsyncClient.decide)
    list_changes = _blocking(aio.AsyncClient.list_changes)
    read_blob = _blocking(aio.AsyncClient.read_blob)
    revert_run = _blocking(aio.AsyncClient.revert_run)
    fork_run = _blocking(aio.AsyncClient.fork_run)
    get_cassette = _blocking(aio.AsyncClient.get_cassette)
    check_policy = _blocking(aio.AsyncClient.check_policy)
    policy_rules = _blocking(aio.AsyncClient.policy_rules)
    revoke_grant = _blocking(aio.AsyncClient.revoke_grant)

    def execute(self, *args: Any, **kwargs: Any) -> Execution:
        """Starts one tool call (arguments as :meth:`AsyncClient.execute`'s) and returns its
        events."""

        async def started() -> AsyncExecution:
            # On the loop: a call is made on the loop its channel belongs to.
            return self._aio.execute(*args, **kwargs)

        return Execution(self._loop.run(started()), self._loop)

    def start_run(self, input: str, **options: Any) -> RunHandle:
        """Starts an agent run (options as :meth:`AsyncClient.start_run`'s)."""
        return RunHandle(self._loop.run(self._aio.start_run(input, **options)), self._loop)

    def attach_run(self, run_id: str, after_seq: int = 0, **options: Any) -> RunHandle:
        """Follows an existing run from after ``after_seq``."""
        return RunHandle(self._loop.run(self._aio.attach_run(run_id, after_seq, **options)), self._loop)

    def approvals(self) -> ApprovalConsole:
        """The approver console of every run of this client's tenant."""
        return ApprovalConsole(self._loop.run(self._aio.approvals()), self._loop)

    def auto_approve(
        self, predicate: Predicate, *, deny_reason: str = "denied by the client's policy", run_id: str = ""
    ) -> AutoApprover:
        """Answers every pending request by ``predicate`` while ``with`` lasts."""
        return AutoApprover(self._aio.auto_approve(predicate, deny_reason=deny_reason, run_id=run_id), self._loop)


class _Wrapper(Generic[A]):
    def __init__(self, inner: A, loop: _Loop) -> None:
        self._aio = inner
        self._loop = loop


class RunHandle(_Wrapper[AsyncRunHandle]):
    """The blocking twin of :class:`airlock_client.runs.RunHandle`: ``for event in run``."""

    @property
    def run_id(self) -> str:
        return self._aio.run_id

    @property
    def last_seq(self) -> int:
        return self._aio.last_seq

    @property
    def finished(self) -> run_event_pb2.RunFinished | None:
        return self._aio.finished

    @property
    def reattached(self) -> int:
        return self._aio.reattached

    def __iter__(self) -> Iterator[run_event_pb2.RunEvent]:
        return self._loop.iterate(self._aio)

    def __enter__(self) -> RunHandle:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops following the run (the run goes on in the daemon)."""
        self._loop.call_soon(self._aio.close)

    def committed(self) -> Iterator[run_event_pb2.RunEvent]:
        """The run's stored events, without the streamed pieces."""
        return self._loop.iterate(self._aio.committed())

    def text(self) -> Iterator[str]:
        """The model's text as it arrives."""
        return self._loop.iterate(self._aio.text())

    next_event = _blocking(AsyncRunHandle.next_event)
    wait = _blocking(AsyncRunHandle.wait)
    decide = _blocking(AsyncRunHandle.decide)
    approve = _blocking(AsyncRunHandle.approve)
    deny = _blocking(AsyncRunHandle.deny)
    cancel = _blocking(AsyncRunHandle.cancel)
    send_input = _blocking(AsyncRunHandle.send_input)


class Execution(_Wrapper[AsyncExecution]):
    """The blocking twin of :class:`airlock_client.execution.Execution`."""

    @property
    def execution_id(self) -> str:
        return self._aio.execution_id

    @property
    def stdout(self) -> bytes:
        return bytes(self._aio.stdout)

    @property
    def stderr(self) -> bytes:
        return bytes(self._aio.stderr)

    @property
    def approval(self) -> approval_pb2.ApprovalRequest | None:
        return self._aio.approval

    def __iter__(self) -> Iterator[Any]:
        return self._loop.iterate(self._aio)

    def __enter__(self) -> Execution:
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon(self._aio.close)

    result = _blocking(AsyncExecution.result)


class ApprovalConsole(_Wrapper[AsyncApprovalConsole]):
    """The blocking twin of :class:`airlock_client.approvals.ApprovalConsole`."""

    def __iter__(self) -> Iterator[approval_pb2.ApprovalRequest]:
        return self._loop.iterate(self._aio)

    def __enter__(self) -> ApprovalConsole:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._loop.call_soon(self._aio.close)

    decide = _blocking(AsyncApprovalConsole.decide)


class AutoApprover(_Wrapper[AsyncAutoApprover]):
    """The blocking twin of :class:`airlock_client.approvals.AutoApprover`: answers requests
    in the background while ``with`` lasts."""

    @property
    def decided(self) -> list[tuple[approval_pb2.ApprovalRequest, bool]]:
        return list(self._aio.decided)

    @property
    def error(self) -> BaseException | None:
        return self._aio.error

    def __enter__(self) -> AutoApprover:
        self._loop.run(self._aio.start())
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.run(self._aio.stop())
