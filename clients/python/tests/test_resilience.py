"""What a client meets that is not the happy case: a read interrupted by the caller (a
timeout, Ctrl-C), a decision made while the daemon is down, a handle closed from another
thread, a finished run attached at its end, and a server that is not airlockd — garbage and
oversized replies. Also: the token and key material never show in a repr or a message."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

import airlock_client
from airlock.v1 import approval_pb2, tool_pb2
from airlock_client import aio
from airlock_client.connection import Token, read_pem

from .conftest import Daemon, free_port, start_daemon
from .test_runs import kind, write_script


@pytest.fixture(scope="module")
def client(daemon: Daemon) -> Iterator[airlock_client.Client]:
    with airlock_client.connect(daemon.endpoint, token=daemon.token) as c:
        yield c


def until_reachable(client: airlock_client.Client, within_s: float = 10.0) -> None:
    """Waits until ``client`` reaches its daemon again. After a drop the channel tries again
    on grpc's reconnect backoff (up to 2 s, see ``connection.py``), and until then a call
    fails at once with the last attempt's error, by design: a daemon that has just come back
    is not reached before the channel's next try."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            client.daemon_info()
            return
        except airlock_client.UnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def until_asked(run: airlock_client.RunHandle) -> approval_pb2.ApprovalRequest:
    for event in run:
        if kind(event) == "approval_requested":
            return event.approval_requested.request
    raise AssertionError("the run ended without asking")


def test_a_decision_made_while_the_daemon_is_down_reaches_it_when_it_is_back(scratch: pathlib.Path) -> None:
    crashing = start_daemon(scratch, "down")
    try:
        with airlock_client.connect(crashing.endpoint, token=crashing.token) as client:
            run = client.start_run("write", workspace=crashing.workspace, script=write_script("down.txt", "d\n"))
            request = until_asked(run)
            crashing.kill()
            run.approve(request)  # the stream is gone: kept, and sent once the run is followed again
            restart = threading.Thread(target=crashing.restart, daemon=True)
            restart.start()
            finished = run.wait()
            restart.join(60)
            assert finished.final_text == "written", finished
            assert run.reattached >= 1
        assert (crashing.workspace / "down.txt").read_text() == "d\n"
    finally:
        assert crashing.stop() == 0, crashing.log_text()


def test_an_auto_approver_outlives_a_daemon_restart(scratch: pathlib.Path) -> None:
    crashing = start_daemon(scratch, "approver")
    try:
        with airlock_client.connect(crashing.endpoint, token=crashing.token) as client:
            with client.auto_approve(lambda request: True) as approver:
                crashing.kill()
                crashing.restart()
                until_reachable(client)
                # A run asked after the restart is answered by the console opened again.
                run = client.start_run("write", workspace=crashing.workspace, script=write_script("a.txt", "a\n"))
                assert run.wait().final_text == "written"
            assert [r.tool for r, ok in approver.decided] == ["write_file"]
    finally:
        assert crashing.stop() == 0, crashing.log_text()


def test_closing_the_client_ends_a_wait_in_another_thread(daemon: Daemon) -> None:
    client = airlock_client.connect(daemon.endpoint, token=daemon.token)
    run = client.start_run("write", workspace=daemon.workspace, script=write_script("closed.txt", "x\n"))
    until_asked(run)
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            run.wait()
        except BaseException as error:  # noqa: BLE001 - what the test looks at
            outcome.append(error)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    client.close()
    waiter.join(10)
    assert not waiter.is_alive(), "the wait outlived its client"
    assert outcome and isinstance(outcome[0], airlock_client.ConnectionLostError), outcome
    with pytest.raises(airlock_client.ConnectionLostError):
        client.list_tools()
    with airlock_client.connect(daemon.endpoint, token=daemon.token) as other:
        other.cancel_run(run.run_id, "the test is over")  # asks nobody after this test


def test_a_finished_run_attached_at_its_end_ends_at_once(client: airlock_client.Client, daemon: Daemon) -> None:
    run = client.start_run("write", workspace=daemon.workspace, script=write_script("end.txt", "e\n"), approval_policy="auto")
    finished = run.wait()
    again = client.attach_run(run.run_id, after_seq=run.last_seq, reattach_s=1)
    assert list(again) == []
    assert again.finished == finished


def test_an_interrupted_read_is_recovered_by_the_next(daemon: Daemon) -> None:
    async def main() -> tuple[str, int]:
        async with await aio.connect(daemon.endpoint, token=daemon.token) as client:
            run = await client.start_run("write", workspace=daemon.workspace, script=write_script("t.txt", "t\n"))
            request = None
            async for event in run:
                if kind(event) == "approval_requested":
                    request = event.approval_requested.request
                    break
            assert request is not None
            # Nothing comes while the run waits: the read times out, which cancels it (and
            # with it the call); the handle recovers on the next read.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(run.next_event(), 0.3)
            await run.approve(request)
            finished = await run.wait()
            return finished.final_text, run.reattached

    final_text, reattached = asyncio.run(main())
    assert final_text == "written"
    assert reattached >= 1


def test_ctrl_c_in_the_blocking_client_stops_the_wait_and_the_run_goes_on(
    client: airlock_client.Client, daemon: Daemon
) -> None:
    run = client.start_run("write", workspace=daemon.workspace, script=write_script("c.txt", "c\n"))
    request = until_asked(run)

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            run.next_event()  # nothing comes until someone decides
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    run.approve(request)
    assert run.wait().final_text == "written"
    assert (daemon.workspace / "c.txt").read_text() == "c\n"


def test_closing_a_console_from_another_thread_ends_its_iteration(client: airlock_client.Client) -> None:
    console = client.approvals()
    seen: list[approval_pb2.ApprovalRequest] = []
    ended = threading.Event()

    def read() -> None:
        for request in console:
            seen.append(request)
        ended.set()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    console.close()
    assert ended.wait(10), "iteration did not end"


def serve_raw(handlers: dict[str, bytes]) -> tuple[grpc.Server, str]:
    """A gRPC server on loopback answering each named method with the raw bytes given."""

    def unary(reply: bytes) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(lambda request, context: reply)

    by_service: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
    for method, reply in handlers.items():
        service, name = method.rsplit("/", 1)
        by_service.setdefault(service, {})[name] = unary(reply)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=2), options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
    )
    for service, methods in by_service.items():
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, methods),))
    port = free_port()
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, f"127.0.0.1:{port}"


def test_a_server_that_is_not_airlockd_is_named_not_believed() -> None:
    # A reply that does not decode as DaemonInfo.
    server, address = serve_raw({"airlock.v1.Daemon/GetInfo": b"\xff\xff\xff\xff"})
    try:
        with pytest.raises(airlock_client.DataLossError, match="is it airlockd"):
            airlock_client.connect(address, token="t")
    finally:
        server.stop(None)
    # A reply over gRPC's default 4 MiB and under the daemon's 16 MiB (a large blob, a long
    # trace) is read.
    from airlock.v1 import tool_pb2, tools_pb2

    large = tools_pb2.ListToolsResponse(tools=[tool_pb2.ToolInfo(name="big", description="d" * (6 * 1024 * 1024))])
    server, address = serve_raw({"airlock.v1.Daemon/GetInfo": b"", "airlock.v1.Tools/ListTools": large.SerializeToString()})
    try:
        with airlock_client.connect(address, token="t") as client:
            assert len(client.list_tools()[0].description) == 6 * 1024 * 1024
    finally:
        server.stop(None)
    # A reply larger than the daemon ever sends: refused from its length, not read.
    huge = b"\x0a" + b"\x80\x80\x80\x0a" + b"x" * (20 * 1024 * 1024)
    server, address = serve_raw({"airlock.v1.Daemon/GetInfo": b"", "airlock.v1.Tools/ListTools": huge})
    try:
        with airlock_client.connect(address, token="t") as client:
            with pytest.raises(airlock_client.ResourceExhaustedError) as refused:
                client.list_tools()
            assert not refused.value.retryable
            assert "limit" in str(refused.value)
    finally:
        server.stop(None)


def test_a_server_that_pages_in_a_circle_is_refused_not_followed() -> None:
    from airlock.v1 import agent_pb2

    page = agent_pb2.ListRunsResponse(runs=[agent_pb2.RunInfo(run_id="run_" + "1" * 32)], next_page_token="again")
    server, address = serve_raw(
        {"airlock.v1.Daemon/GetInfo": b"", "airlock.v1.Agent/ListRuns": page.SerializeToString()}
    )
    try:
        with airlock_client.connect(address, token="t") as client:
            listed = []
            with pytest.raises(airlock_client.InternalError, match="page token 'again' again"):
                for run in client.iter_runs():
                    listed.append(run.run_id)
            assert len(listed) == 2  # the first page, and the one the token named
    finally:
        server.stop(None)


def test_the_token_and_keys_never_show(tmp_path: pathlib.Path, client: airlock_client.Client, daemon: Daemon) -> None:
    assert daemon.token not in repr(Token(daemon.token, "given"))
    assert daemon.token not in repr(client.asyncio._peer)
    key = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"
    # Inline PEM is taken as PEM; key material given as a path is never echoed.
    assert read_pem(key, "client key") == key.encode()
    for leaked in ("Bag Attributes\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg", "MIGHAgEAMBMGByqGSM49/AgEGCCq+GSM49AwEHBG0wawIBAQQg"):
        with pytest.raises(airlock_client.AirlockError) as unreadable:
            read_pem(leaked, "client key")
        shown = "".join(traceback.format_exception(unreadable.value))
        assert "MIGHAgEAMBMG" not in shown, shown
    with pytest.raises(airlock_client.AirlockError, match="missing.pem: no such file"):
        read_pem(str(tmp_path / "missing.pem"), "CA")
    with pytest.raises(airlock_client.AirlockError, match="not printable ASCII"):
        airlock_client.connect(daemon.endpoint, token="two\nlines")


def test_arguments_given_as_json_text_are_sent_as_they_are(daemon: Daemon) -> None:
    async def main() -> str:
        async with await aio.connect(daemon.endpoint, token=daemon.token) as client:
            (daemon.workspace / "j.txt").write_text("json text\n")
            result = await client.run_tool("read_file", json.dumps({"path": "j.txt"}), workspace=daemon.workspace)
            assert result.status == tool_pb2.TOOL_STATUS_OK, result
            return result.content

    assert "json text" in asyncio.run(main())
