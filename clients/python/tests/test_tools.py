"""Tools through the blocking client: listing, calls of both engines, output streamed and
paged, and every refusal as its exception class with the field at fault."""

from __future__ import annotations

import json
import socket

import pytest

import airlock_client
from airlock.v1 import tool_pb2, tools_pb2

from .conftest import Daemon


@pytest.fixture(scope="module")
def client(daemon: Daemon) -> airlock_client.Client:
    with airlock_client.connect(daemon.endpoint, token=daemon.token) as c:
        yield c  # type: ignore[misc]


def test_connect_says_who_the_client_is(client: airlock_client.Client, daemon: Daemon) -> None:
    assert client.info.version
    assert client.info.tenant == "default"
    assert str(daemon.workspace.parent) in list(client.info.workspace_roots)


def test_lists_tools_with_their_schemas(client: airlock_client.Client) -> None:
    by_name = {tool.name: tool for tool in client.list_tools()}
    assert {"read_file", "list_dir", "grep", "write_file"} <= set(by_name)
    assert by_name["write_file"].risk == tool_pb2.RISK_WRITE
    shown = client.get_tool("read_file")
    assert "path" in json.loads(shown.input_schema_json)["properties"]
    with pytest.raises(airlock_client.NotFoundError) as missing:
        client.get_tool("no_such_tool")
    assert missing.value.field == "tool"


def test_a_call_returns_its_result_and_a_failed_call_is_not_an_exception(
    client: airlock_client.Client, daemon: Daemon
) -> None:
    (daemon.workspace / "hello.txt").write_text("hello from the package\n")
    result = client.run_tool("read_file", {"path": "hello.txt"}, workspace=daemon.workspace)
    assert result.status == tool_pb2.TOOL_STATUS_OK, result
    assert "hello from the package" in result.content
    bad = client.run_tool("read_file", {"path": 7}, workspace=daemon.workspace)
    assert bad.status == tool_pb2.TOOL_STATUS_INVALID_ARGUMENTS
    assert "/path" in bad.error_message


def test_refusals_are_exceptions_of_their_code_naming_the_field(
    client: airlock_client.Client, daemon: Daemon
) -> None:
    with pytest.raises(airlock_client.NotFoundError) as unknown:
        client.run_tool("no_such_tool", {}, workspace=daemon.workspace)
    assert unknown.value.field == "tool"
    assert not unknown.value.retryable
    assert unknown.value.method == "/airlock.v1.Tools/ExecuteTool"
    with pytest.raises(airlock_client.InvalidArgumentError) as outside:
        client.run_tool("read_file", {"path": "x"}, workspace="/etc")
    assert outside.value.field == "workspace"
    with pytest.raises(airlock_client.InvalidArgumentError) as run_id:
        client.get_run("not-a-run-id")
    assert run_id.value.field == "run_id"
    with pytest.raises(airlock_client.NotFoundError):
        client.get_run("run_" + "0" * 32)
    with pytest.raises(airlock_client.NotFoundError) as attach:
        client.attach_run("run_" + "0" * 32)
    assert attach.value.field == "attach.run_id"


def test_a_wrong_token_is_refused_at_connect_saying_where_it_came_from(daemon: Daemon) -> None:
    with pytest.raises(airlock_client.UnauthenticatedError) as refused:
        airlock_client.connect(daemon.endpoint, token="not-the-token")
    assert refused.value.token_source == "given"
    assert "given" in str(refused.value)


def test_the_token_is_found_as_the_cli_finds_it(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("AIRLOCK_TOKEN", daemon.token)
    with airlock_client.connect(daemon.endpoint) as c:
        assert c.list_tools()
    monkeypatch.delenv("AIRLOCK_TOKEN")
    # The daemon's default state dir under $XDG_STATE_HOME holds its token file.
    monkeypatch.setenv("XDG_STATE_HOME", str(daemon.state.parent / "xdg"))
    (daemon.state.parent / "xdg" / "airlock").mkdir(parents=True, exist_ok=True)
    (daemon.state.parent / "xdg" / "airlock" / "token").write_text(daemon.token + "\n")
    with airlock_client.connect(daemon.endpoint) as c:
        assert c.list_tools()
    (daemon.state.parent / "xdg" / "airlock" / "token").unlink()
    with pytest.raises(airlock_client.UnauthenticatedError) as none:
        airlock_client.connect(daemon.endpoint)
    assert "no token given" in none.value.token_source


def test_nothing_listening_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    with pytest.raises(airlock_client.UnreachableError) as refused:
        airlock_client.connect(f"127.0.0.2:{port}", token="t", timeout=2)
    assert f"127.0.0.2:{port}" in str(refused.value)
    with pytest.raises(airlock_client.AirlockError, match="unsupported scheme"):
        airlock_client.connect("ftp://example.com", token="t")


def test_a_cut_result_is_read_whole_page_by_page(client: airlock_client.Client, daemon: Daemon) -> None:
    expected = "".join(f"{i}\n" for i in range(1, 30001)).encode()
    result = client.run_tool("count", workspace=daemon.workspace)
    assert result.status == tool_pb2.TOOL_STATUS_OK, result.error_message
    assert result.truncated
    assert result.original_bytes == len(expected)
    assert result.content.startswith("1\n2\n3\n") and result.content.endswith("29999\n30000\n")
    assert client.read_all_output(result.execution_id) == expected
    # From where the shown head ends, in small pages.
    pages = []
    offset = result.head_bytes
    while True:
        page = client.read_output(result.execution_id, offset=offset, length=10_000)
        pages.append(page.data)
        offset += len(page.data)
        if page.eof:
            break
    assert len(pages) > 10
    assert b"".join(pages) == expected[result.head_bytes :]
    with pytest.raises(airlock_client.OutOfRangeError) as past:
        client.read_output(result.execution_id, offset=len(expected) + 1)
    assert past.value.field == "offset"


def test_a_process_tool_streams_its_output(client: airlock_client.Client, daemon: Daemon) -> None:
    with client.execute("count", workspace=daemon.workspace) as execution:
        kinds = [event.WhichOneof("event") for event in execution]
        result = execution.result()
    assert kinds[0] == "started" and kinds[-1] == "finished", kinds
    assert "output" in kinds
    assert result.metadata.engine == "process"
    assert execution.execution_id == result.execution_id
    # Streamed as the program wrote it: every byte, not the cut result.
    assert execution.stdout == "".join(f"{i}\n" for i in range(1, 30001)).encode()


def test_a_call_that_asks_first_waits_for_a_decision(client: airlock_client.Client, daemon: Daemon) -> None:
    with client.execute(
        "write_file",
        {"path": "asked.txt", "content": "approved\n"},
        workspace=daemon.workspace,
        require_approval=True,
    ) as execution:
        for event in execution:
            if event.WhichOneof("event") == "approval":
                assert not (daemon.workspace / "asked.txt").exists()
                client.decide(event.approval, approve=True)
        result = execution.result()
    assert result.status == tool_pb2.TOOL_STATUS_OK, result
    assert (daemon.workspace / "asked.txt").read_text() == "approved\n"
    assert isinstance(execution.approval, type(tools_pb2.ExecuteToolEvent().approval))
