"""Clients of one release against daemons of another: the previous release's stubs (generated
from its kept API, tests/fixtures/v0.1.0) driving this daemon, and this client meeting a call
its daemon does not serve."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import grpc
import pytest
from google.protobuf import descriptor_pb2

import airlock_client
from airlock.v1 import policy_pb2, rules_pb2

from .conftest import REPO, Daemon

RELEASE = REPO / "tests" / "fixtures" / "v0.1.0" / "airlock.v1.binpb"


def release_services() -> dict[str, list[str]]:
    kept = descriptor_pb2.FileDescriptorSet.FromString(RELEASE.read_bytes())
    return {s.name: [m.name for m in s.method] for f in kept.file for s in f.service}


def test_the_previous_releases_stubs_drive_this_daemon(daemon: Daemon, tmp_path: pathlib.Path) -> None:
    kept = descriptor_pb2.FileDescriptorSet.FromString(RELEASE.read_bytes())
    protos = [f.name for f in kept.file if f.name.startswith("airlock/")]
    from grpc_tools import protoc

    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"--descriptor_set_in={RELEASE}",
            f"--python_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *protos,
        ]
    )
    assert status == 0
    # Packages, as the installed stubs are, so that these come first on PYTHONPATH.
    for package in (tmp_path / "airlock", tmp_path / "airlock" / "v1"):
        (package / "__init__.py").touch()
    (daemon.workspace / "old.txt").write_text("read by an old client\n")
    # Its own interpreter, so that the old `airlock.v1` modules are the only ones it imports.
    program = textwrap.dedent(
        f"""
        import json, queue, sys
        import grpc
        from airlock.v1 import agent_pb2, agent_pb2_grpc, approval_pb2, run_event_pb2, tools_pb2, tools_pb2_grpc
        assert agent_pb2.__file__.startswith({str(tmp_path)!r}), agent_pb2.__file__
        md = (("authorization", "Bearer {daemon.token}"),)
        channel = grpc.insecure_channel("{daemon.endpoint.removeprefix('http://')}")
        tools = tools_pb2_grpc.ToolsStub(channel)
        names = [t.name for t in tools.ListTools(tools_pb2.ListToolsRequest(), metadata=md).tools]
        assert "read_file" in names, names
        events = list(tools.ExecuteTool(tools_pb2.ExecuteToolRequest(
            tool="read_file", arguments_json=json.dumps({{"path": "old.txt"}}),
            workspace="{daemon.workspace}"), metadata=md))
        assert "read by an old client" in events[-1].finished.content, events
        script = json.dumps({{"turns": [{{"tool_calls": [{{"name": "write_file",
            "arguments": {{"path": "old-run.txt", "content": "old\\n"}}}}]}}, {{"final": "done"}}]}})
        requests = queue.Queue()
        requests.put(agent_pb2.RunRequest(start=agent_pb2.StartRun(
            workspace="{daemon.workspace}", input="write", model=agent_pb2.ModelConfig(model="scripted", script=script),
            approval_policy=run_event_pb2.APPROVAL_POLICY_RISKY)))
        for event in agent_pb2_grpc.AgentStub(channel).Run(iter(requests.get, None), metadata=md, timeout=60):
            kind = event.WhichOneof("event")
            if kind == "approval_requested":
                r = event.approval_requested.request
                requests.put(agent_pb2.RunRequest(decision=approval_pb2.ApprovalDecision(
                    approval_id=r.approval_id, decision=approval_pb2.DECISION_APPROVE_ONCE, digest=r.digest)))
            if kind == "run_finished":
                requests.put(None)
                print(event.run_finished.final_text)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"
    assert (daemon.workspace / "old-run.txt").read_text() == "old\n"


def test_a_call_the_daemon_does_not_serve_is_a_clear_error(daemon: Daemon) -> None:
    # The previous release had no Policy service: its daemon answers CheckPolicy as this one
    # answers a method it has never heard of.
    assert "Policy" not in release_services() and "Agent" in release_services()
    with airlock_client.connect(daemon.endpoint, token=daemon.token) as client:
        peer = client.asyncio._peer
        newer = peer.channel.unary_unary(
            "/airlock.v1.Policy/ExplainEverything",
            request_serializer=policy_pb2.CheckPolicyRequest.SerializeToString,
            response_deserializer=rules_pb2.PolicyVerdict.FromString,
        )
        with pytest.raises(airlock_client.UnimplementedError) as missing:
            client.run_coroutine(peer.unary(newer, policy_pb2.CheckPolicyRequest(tool="read_file"))).result()
        assert "does not serve airlock.v1.Policy/ExplainEverything" in str(missing.value)
        assert "older than this client" in str(missing.value)
        assert missing.value.code == grpc.StatusCode.UNIMPLEMENTED
        # The client goes on working after it.
        assert client.list_tools()
